#!/usr/bin/env python3
"""Soak (hardening issue, item 7): sanbench's three servers under hours-long abuse, and the lab
built and torn down again and again. A script, not a CI test: it takes `--minutes`.

1. Servers: `serve nbd`, `serve iscsi` and `serve nvme` (RAM, --size each) on loopback, their
   stderr kept. For --minutes, at the same time:
   - a comparison loop: `sanbench compare` of the three over the quick suite, short cells;
     every one must exit 0;
   - chaos clients: `sanbench run` against a random server with a random queue depth and mix,
     killed after a random 0.2-3 s (SIGKILL mostly, sometimes SIGINT, which must end it with
     exit 0, or 130 / death by SIGINT when it came before the run began), and raw sockets that send random bytes, half a handshake, or nothing and
     then vanish;
   - a sampler every --sample seconds: each server's RSS, open fds and threads.
   Passing: every server still alive and answering, the comparisons all exit 0, the servers'
   logs (stderr) stay empty, open fds and threads back to their count before the
   first client, and RSS flat after the warm-up (the data store is filled by the first
   comparison's preconditioning): the median RSS of the run's second half at most 2 % + 4 MiB
   above the median of its first half after --warmup (in-flight buffers make RSS spike with
   the clients and the allocator keeps a high-water mark; a leak moves the level).
2. Lab: `sanbench lab up --link soak=10gbit --targets nbd,iscsi` and `lab down`, --lab-cycles
   times (root, ip, tc); after each down no sblab namespace, veth or process is left.

Usage: scripts/soak.py [--minutes 30] [--lab-cycles 100] [--size 256M] [--pause S] [--chaos N]
                       [--json FILE]
"""
import argparse, json, os, random, signal, socket, statistics, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import SB, build, free_port, wait_port  # noqa: E402

MIB = 1 << 20


def proc_stat(pid):
    """(RSS bytes, open fds, threads) of a live process."""
    rss = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd")), threads


class Soak:
    def __init__(self, a, tmp):
        self.a, self.tmp = a, tmp
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.servers = {}  # kind -> (Popen, uri, port, log path)
        self.samples = []  # (t, kind, rss, fds, threads)
        self.compares = {"ok": 0, "failed": []}
        self.chaos = {"runs": 0, "killed": 0, "interrupted": 0, "bad_exit": [], "sockets": 0}

    def start_servers(self):
        for kind in ["nbd", "iscsi", "nvme"]:
            port = free_port()
            log = os.path.join(self.tmp, f"{kind}.log")
            banner = os.path.join(self.tmp, f"{kind}.out")
            p = subprocess.Popen(
                [SB, "serve", kind, "--size", self.a.size, "--listen", f"127.0.0.1:{port}"],
                stdout=open(banner, "w"), stderr=open(log, "w"))
            wait_port(port)
            time.sleep(0.2)
            with open(banner) as f:
                first = f.readline()
            uri = next(w for w in first.split() if "://" in w).rstrip(";")
            self.servers[kind] = (p, uri, port, log)
            print(f"   {kind}: pid {p.pid}, {uri}")
        self.baseline = {k: proc_stat(s[0].pid) for k, s in self.servers.items()}

    def sample(self, t):
        for kind, (p, *_rest) in self.servers.items():
            if p.poll() is not None:
                raise SystemExit(f"soak: the {kind} server died (exit {p.returncode})")
            rss, fds, threads = proc_stat(p.pid)
            with self.lock:
                self.samples.append((t, kind, rss, fds, threads))

    def compare_loop(self):
        n = 0
        while not self.stop.is_set():
            n += 1
            out = os.path.join(self.tmp, f"cmp{n % 2}")
            targets = [f"{k}={s[1]}" for k, s in self.servers.items()]
            r = subprocess.run([SB, "compare", *targets, "--suite", "quick", "--time", "2s",
                                "--ramp", "0.5s", "--no-store", "--out", out, "--quiet",
                                "--no-monitor"],
                               capture_output=True, text=True)
            with self.lock:
                if r.returncode == 0:
                    self.compares["ok"] += 1
                else:
                    self.compares["failed"].append((r.returncode, r.stderr.strip()[-400:]))
            self.stop.wait(self.a.pause)

    def garbage_socket(self, rng, port):
        s = socket.create_connection(("127.0.0.1", port), 2)
        what = rng.randrange(4)
        if what == 0:  # random bytes
            s.sendall(os.urandom(rng.randrange(1, 4096)))
        elif what == 1:  # a plausible start, then nothing
            s.sendall(b"IHAVEOPT" if rng.random() < 0.5 else bytes([0x43]) + bytes(47))
        elif what == 2:  # silent for a while
            time.sleep(rng.uniform(0.1, 2.0))
        else:  # read a little, then go
            s.settimeout(0.3)
            try:
                s.recv(64)
            except OSError:
                pass
        if rng.random() < 0.5:
            # RST instead of FIN.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()

    def chaos_loop(self, seed):
        rng = random.Random(seed)
        kinds = list(self.servers)
        while not self.stop.is_set():
            kind = rng.choice(kinds)
            _p, uri, port, _log = self.servers[kind]
            if rng.random() < 0.3:
                try:
                    self.garbage_socket(rng, port)
                except OSError:
                    pass
                with self.lock:
                    self.chaos["sockets"] += 1
                continue
            argv = [SB, "run", uri, "--time", "30s", "--ramp", "0s", "--quiet", "--no-monitor",
                    "--precondition", "none", f"--qd={rng.choice([1, 4, 16, 32])}",
                    f"--read={rng.choice([0, 70, 100])}",
                    f"--bs={rng.choice(['512', '4k', '64k', '1M'])}"]
            c = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 text=True)
            time.sleep(rng.uniform(0.2, 3.0))
            interrupt = rng.random() < 0.25
            c.send_signal(signal.SIGINT if interrupt else signal.SIGKILL)
            try:
                _, err = c.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                c.kill()
                _, err = c.communicate()
                err = "did not end within 60 s of SIGINT: " + err
            with self.lock:
                self.chaos["runs"] += 1
                if interrupt:
                    self.chaos["interrupted"] += 1
                    # 0: stopped cleanly; 130 or killed by SIGINT: the signal came before
                    # the run had anything to stop (logging in, opening), where its default
                    # action is the right one.
                    if c.returncode not in (0, 130, -signal.SIGINT):
                        self.chaos["bad_exit"].append((kind, c.returncode, err.strip()[-300:]))
                else:
                    self.chaos["killed"] += 1

    def run(self):
        t0 = time.time()
        end = t0 + self.a.minutes * 60
        workers = [threading.Thread(target=self.compare_loop)]
        workers += [threading.Thread(target=self.chaos_loop, args=(i,)) for i in range(self.a.chaos)]
        for w in workers:
            w.start()
        try:
            while time.time() < end:
                self.sample(time.time() - t0)
                time.sleep(min(self.a.sample, max(0.0, end - time.time())))
        finally:
            self.stop.set()
            for w in workers:
                w.join()
        time.sleep(3)  # let the servers see the last clients go
        self.sample(time.time() - t0)

    def verdict(self):
        bad = []
        summary = {}
        for kind, (p, uri, _port, log) in self.servers.items():
            rows = [s for s in self.samples if s[1] == kind]
            # Flat means a plateau: in-flight write buffers come and go with the clients (a
            # spike of 30 MiB when several 1 MiB QD 32 writers meet), and the allocator keeps
            # a high-water mark; a leak moves the level itself. The median RSS of the second
            # half of the run is held against the median of the first half after the warm-up.
            warm = [s for s in rows if s[0] >= self.a.warmup] or rows
            mid = (warm[0][0] + warm[-1][0]) / 2
            rss0 = statistics.median(s[2] for s in warm if s[0] <= mid)
            rss1 = statistics.median(s[2] for s in warm if s[0] >= mid)
            base = self.baseline[kind]
            fds1, thr1 = rows[-1][3], rows[-1][4]
            with open(log) as f:
                lines = f.read().splitlines()
            extra = lines
            summary[kind] = {
                "uri": uri, "rss_median_first_half_mib": rss0 / MIB,
                "rss_median_second_half_mib": rss1 / MIB, "rss_end_mib": rows[-1][2] / MIB,
                "rss_max_mib": max(s[2] for s in rows) / MIB,
                "fds_before": base[1], "fds_end": fds1, "fds_max": max(s[3] for s in rows),
                "threads_before": base[2], "threads_end": thr1,
                "threads_max": max(s[4] for s in rows), "log_lines": len(extra),
            }
            if rss1 > rss0 * 1.02 + 4 * MIB:
                bad.append(f"{kind}: RSS grew from a median {rss0 / MIB:.1f} MiB (first half) "
                           f"to {rss1 / MIB:.1f} MiB (second half)")
            if fds1 != base[1]:
                bad.append(f"{kind}: {fds1} fds open at the end, {base[1]} before any client")
            if thr1 != base[2]:
                bad.append(f"{kind}: {thr1} threads at the end, {base[2]} before any client")
            if extra:
                bad.append(f"{kind}: {len(extra)} log lines, first: {extra[0]}")
            try:
                socket.create_connection(("127.0.0.1", _port), 2).close()
            except OSError as e:
                bad.append(f"{kind}: no longer accepts connections ({e})")
        if self.compares["failed"]:
            bad.append(f"{len(self.compares['failed'])} comparisons failed, first: "
                       f"{self.compares['failed'][0]}")
        if self.chaos["bad_exit"]:
            bad.append(f"{len(self.chaos['bad_exit'])} interrupted runs ended badly, first: "
                       f"{self.chaos['bad_exit'][0]}")
        return summary, bad

    def stop_servers(self):
        for p, *_ in self.servers.values():
            p.send_signal(signal.SIGINT)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def running(pid):
    """True for a process that has not ended (a zombie waiting for its reaper has)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def lab_leftovers():
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    left = [l.split()[0] for l in ns.splitlines() if l.startswith("sblab-")]
    left += [l.split(":")[1].strip() for l in links.splitlines() if ": sbl-" in l]
    return left


def lab_cycles(n, tmp):
    state = os.path.join(tmp, "lab.json")
    times, bad = [], []
    for i in range(n):
        t = time.time()
        up = subprocess.run([SB, "lab", "up", "--link", "soak=10gbit", "--targets", "nbd,iscsi",
                             "--state", state], capture_output=True, text=True)
        if up.returncode != 0:
            bad.append(f"cycle {i}: lab up exit {up.returncode}: {up.stderr.strip()[-300:]}")
        pids = []
        if os.path.exists(state):
            with open(state) as f:
                pids = [p["pid"] for p in json.load(f).get("processes", [])]
        down = subprocess.run([SB, "lab", "down", "--state", state], capture_output=True,
                              text=True)
        times.append(time.time() - t)
        if down.returncode != 0:
            bad.append(f"cycle {i}: lab down exit {down.returncode}: {down.stderr.strip()[-300:]}")
        left = lab_leftovers()
        alive = [p for p in pids if running(p)]
        if left or alive:
            bad.append(f"cycle {i}: left behind {left} processes {alive}")
        if bad:
            break
    return times, bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--lab-cycles", type=int, default=100)
    ap.add_argument("--size", default="256M")
    ap.add_argument("--sample", type=float, default=15, help="seconds between samples")
    ap.add_argument("--warmup", type=float, default=120, help="seconds before RSS must be flat")
    ap.add_argument("--pause", type=float, default=0, help="seconds between comparisons")
    ap.add_argument("--chaos", type=int, default=2, help="chaos client threads")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    a.warmup = min(a.warmup, a.minutes * 60 / 4)
    build()
    failures = []
    report = {"minutes": a.minutes, "size": a.size}
    with tempfile.TemporaryDirectory(prefix="sb-soak-") as tmp:
        print(f"1. servers under a comparison loop and chaos clients for {a.minutes:g} min")
        s = Soak(a, tmp)
        s.start_servers()
        try:
            s.run()
            summary, bad = s.verdict()
        finally:
            s.stop_servers()
        for kind, v in summary.items():
            print(f"   {kind:<5} RSS median {v['rss_median_first_half_mib']:.1f} -> "
                  f"{v['rss_median_second_half_mib']:.1f} MiB (max {v['rss_max_mib']:.1f}, "
                  f"end {v['rss_end_mib']:.1f}), fds {v['fds_before']} -> {v['fds_end']} "
                  f"(max {v['fds_max']}), threads {v['threads_before']} -> {v['threads_end']} "
                  f"(max {v['threads_max']}), log lines {v['log_lines']}")
        print(f"   comparisons: {s.compares['ok']} ok, {len(s.compares['failed'])} failed; "
              f"chaos: {s.chaos['runs']} runs ({s.chaos['killed']} SIGKILL, "
              f"{s.chaos['interrupted']} SIGINT), {s.chaos['sockets']} raw sockets")
        report.update(servers=summary, samples=s.samples, compares_ok=s.compares["ok"],
                      compares_failed=s.compares["failed"], chaos=s.chaos)
        failures += bad
        if a.lab_cycles:
            print(f"2. lab up/down x {a.lab_cycles}")
            times, bad = lab_cycles(a.lab_cycles, tmp)
            times.sort()
            if times:
                print(f"   {len(times)} cycles, median {times[len(times) // 2]:.2f} s, "
                      f"max {times[-1]:.2f} s" + ("" if bad else ", nothing left behind"))
            report.update(lab_cycles=len(times), lab_median_s=times[len(times) // 2] if times
                          else None)
            failures += bad
    report["failures"] = failures
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    for f in failures:
        print(f"FAIL: {f}")
    print("soak: " + ("passed" if not failures else f"{len(failures)} failures"))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
