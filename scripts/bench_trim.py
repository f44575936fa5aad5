#!/usr/bin/env python3
"""Trim IOPS per transport (issue 42): 4 KiB random trims at QD 32 from sanbench's initiators
against sanbench's three servers, each beside the peer the host has for it: nbdkit's memory
plugin for NBD, tgtd (thin provisioned, a sparse /dev/shm image) for iSCSI. Write-zeroes too.
Prints per target the median trim IOPS, p50 / p99 latency and, where the engine counts
them, commands per trim (several trims share one UNMAP or DSM command).

With `written`, every run first fills the span (`--precondition fill`), so each trim frees
data rather than a hole. A loop device over a sparse /dev/shm file (a block device whose
discards punch holes) is measured beside the servers.

Usage: scripts/bench_trim.py SANBENCH_BINARY [REPS] [SECONDS] [written]
"""
import json, os, signal, socket, subprocess, statistics, sys, time

SIZE = "1G"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port):
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"port {port} never opened")


def serve(sb, kind):
    port = free_port()
    p = subprocess.Popen([sb, "serve", kind, "--size", SIZE, "--listen", f"127.0.0.1:{port}"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    uri = p.stdout.readline().split(": ", 1)[1].split(" ")[0]
    wait_port(port)
    return p, uri


def nbdkit():
    port = free_port()
    p = subprocess.Popen(["nbdkit", "-f", "-p", str(port), "-i", "127.0.0.1", "memory", SIZE],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return p, f"nbd://127.0.0.1:{port}"


def tgtd():
    port, ctl = free_port(), 2000 + os.getpid() % 20000
    img = f"/dev/shm/bench-trim-{os.getpid()}.img"
    with open(img, "wb") as f:
        f.truncate(1 << 30)
    p = subprocess.Popen(["tgtd", "-f", "-C", str(ctl), "--iscsi", f"portal=127.0.0.1:{port}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    adm = ["tgtadm", "-C", str(ctl), "--lld", "iscsi"]
    iqn = "iqn.2026-11.bench:trim"
    for _ in range(100):
        if subprocess.run(adm + ["--op", "new", "--mode", "target", "--tid", "1", "-T", iqn],
                          capture_output=True).returncode == 0:
            break
        time.sleep(0.05)
    for a in (["--op", "new", "--mode", "logicalunit", "--tid", "1", "--lun", "1", "-b", img],
              ["--op", "bind", "--mode", "target", "--tid", "1", "-I", "ALL"],
              ["--op", "update", "--mode", "logicalunit", "--tid", "1", "--lun", "1",
               "--params", "thin_provisioning=1"]):
        subprocess.run(adm + a, check=True, capture_output=True)
    wait_port(port)
    return p, f"iscsi://127.0.0.1:{port}/{iqn}/1", img


def loop_device():
    img = f"/dev/shm/bench-trim-loop-{os.getpid()}.img"
    with open(img, "wb") as f:
        f.truncate(1 << 30)
    dev = subprocess.run(["losetup", "-f", "--show", img], check=True, capture_output=True,
                         text=True).stdout.strip()

    class Detach:
        def send_signal(self, _):
            subprocess.run(["losetup", "-d", dev])

        def wait(self):
            pass
    return Detach(), dev, img


WRITTEN = False


def run(sb, uri, op, secs):
    flag = "--trim=100" if op == "trim" else "--write-zeroes=100"
    pre = "--precondition=fill" if WRITTEN else "--precondition=none"
    out = subprocess.run([sb, "run", uri, "--json=-", "--quiet", "--no-monitor", "--bs=4k",
                          "--random=100", "--qd=32", "--read=0", flag, f"--time={secs}s",
                          "--ramp=1s", pre],
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out)["results"][0]
    d = r[op]
    cmds = sum(q.get("iscsi.commands", q.get("dsm_commands", 0)) for q in r.get("queues", []))
    per = cmds / d["ios"] if cmds and op == "trim" else None
    return d["iops"], d["latency_us"]["p50"], d["latency_us"]["p99"], per


def main():
    sb = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    secs = sys.argv[3] if len(sys.argv) > 3 else "3"
    global WRITTEN
    WRITTEN = len(sys.argv) > 4 and sys.argv[4] == "written"
    print(f"load average {os.getloadavg()[0]:.1f}; spans {'written' if WRITTEN else 'empty'}")
    print("| target | op | IOPS | p50 us | p99 us | commands per trim |")
    print("|---|---|---|---|---|---|")
    for name, start in (("sanbench NBD server", lambda: serve(sb, "nbd")),
                        ("nbdkit memory", nbdkit),
                        ("sanbench iSCSI target", lambda: serve(sb, "iscsi")),
                        ("tgtd (thin, /dev/shm)", tgtd),
                        ("sanbench NVMe/TCP target", lambda: serve(sb, "nvme")),
                        ("loop device (/dev/shm file)", loop_device)):
        started = start()
        proc, uri = started[0], started[1]
        try:
            for op in ("trim", "write_zeroes"):
                rs = [run(sb, uri, op, secs) for _ in range(reps)]
                med = lambda i: statistics.median(x[i] for x in rs)
                per = rs[0][3]
                print(f"| {name} | {op} | {med(0):,.0f} | {med(1):.0f} | {med(2):.0f} | "
                      f"{'' if per is None else f'{per:.2f}'} |", flush=True)
        finally:
            proc.send_signal(signal.SIGKILL if name.startswith("tgtd") else signal.SIGINT)
            proc.wait()
            if len(started) > 2:
                os.remove(started[2])


if __name__ == "__main__":
    main()
