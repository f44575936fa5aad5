"""Shared helpers for sanbench's peer benchmarks: start/stop servers by PID, per-process CPU
from /proc, fio and sanbench JSON, medians. Every server listens on loopback only."""
import json, os, socket, statistics, subprocess, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# SANBENCH_BIN: a binary built elsewhere (a worktree with its own CARGO_TARGET_DIR).
SB = os.environ.get("SANBENCH_BIN") or os.path.join(ROOT, "target", "release", "sanbench")
TCK = os.sysconf("SC_CLK_TCK")


def build():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "sanbench"], cwd=ROOT, check=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def cpu_s(pid):
    """utime + stime of a whole process (all threads), seconds."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / TCK


class Server:
    """A peer or sanbench server started in the background, stopped by PID."""

    def __init__(self, argv, port, kill_signal=15):
        self.argv, self.port, self.sig = argv, port, kill_signal
        self.p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(port)

    def cpu(self):
        return cpu_s(self.p.pid)

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(self.sig)
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def sh(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def fio_json(args):
    out = sh(["fio", "--output-format=json"] + args)
    # Some engines (nbd) print a line before the JSON document.
    job = json.loads(out[out.index("{"):])["jobs"][0]
    rd, wr = job["read"], job["write"]
    ios = rd["total_ios"] + wr["total_ios"]
    runtime = max(rd["runtime"], wr["runtime"]) / 1000.0
    return {
        # Over the job's runtime: with verify_backlog fio can give its reads a runtime of a
        # few ms, and its per-direction "iops" then read 250 million (seen in bench_verify).
        "iops": ios / runtime if runtime > 0 else rd["iops"] + wr["iops"],
        "ios": ios,
        "bytes_per_s": rd["bw_bytes"] + wr["bw_bytes"],
        "client_cpu_s": (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * runtime,
    }


def sanbench_json(args):
    doc = json.loads(sh([SB, "run", "--json=-", "--quiet", "--no-monitor"] + args))
    r = doc["results"][0]
    pc = doc["process_cpu"]
    return {
        "iops": r["iops"],
        "ios": r["ios"],
        "bytes_per_s": r["mb_per_s"] * 1e6,
        "client_cpu_s": pc["user_s"] + pc["system_s"],
    }


def measured(server, fn):
    """Runs fn() (a client) and adds the server's CPU-µs per I/O over it."""
    c0 = server.cpu() if server else 0.0
    r = fn()
    if server:
        r["server_cpu_us_per_io"] = (server.cpu() - c0) * 1e6 / max(r["ios"], 1)
    r["client_cpu_us_per_io"] = r["client_cpu_s"] * 1e6 / max(r["ios"], 1)
    return r


def iperf3_bps(secs):
    port = free_port()
    srv = subprocess.Popen(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # No port probe: a one-off (-1) iperf3 server would take the probe as its client.
        for _ in range(50):
            r = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(secs),
                                "-J"], capture_output=True, text=True)
            j = json.loads(r.stdout or "{}")
            if "sum_received" in j.get("end", {}):
                return j["end"]["sum_received"]["bits_per_second"] / 8.0
            time.sleep(0.1)
        raise RuntimeError("iperf3 did not run")
    finally:
        if srv.poll() is None:
            srv.terminate()
        srv.wait()


def median(xs):
    return statistics.median(xs)


def print_reps(rows):
    """Every repetition of every row: IOPS and, where measured, CPU-µs per I/O on each side."""
    for name, reps in rows.items():
        cells = []
        for r in reps:
            c = f"{r['iops']:,.0f} IOPS" if "iops" in r else f"{r.get('bytes_per_s', 0) / 1e6:,.0f} MB/s"
            if "server_cpu_us_per_io" in r:
                c += f" {r['server_cpu_us_per_io']:.2f} srv-µs"
            if "client_cpu_us_per_io" in r:
                c += f" {r['client_cpu_us_per_io']:.2f} cli-µs"
            cells.append(c)
        print(f"  {name}: " + "; ".join(cells))
