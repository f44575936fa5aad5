#!/usr/bin/env python3
"""The initiators' socket layer: the poll loop against io_uring (`?sockio=uring`), one path and
two, in CPU per I/O and system calls per I/O (issue 43).

One `sanbench serve KIND --size=1G --listen=127.0.0.1:P1 --listen=127.0.0.1:P2`, 4 KiB random
reads at QD 32, one worker, `--no-monitor`; four URIs, interleaved (the order reversed every
other repetition):
  one poll     KIND://127.0.0.1:P1                     (main's default)
  one uring    KIND://127.0.0.1:P1?sockio=uring
  two poll     KIND://127.0.0.1:P1,127.0.0.1:P2        (multipath, service-time)
  two uring    the same with ?sockio=uring on both paths
CPU per I/O is the result's `process_cpu.cpu_us_per_io` (getrusage of the sanbench process over
the window). System calls per I/O come from separate runs under `perf stat -e
raw_syscalls:sys_enter` (the whole process, ramp and window, divided by the I/Os of ramp and
window estimated as IOPS x (time + ramp)), so that tracing does not touch the CPU figures.
Prints every repetition, the medians, each layer's two/one ratio and uring/poll ratios.

Usage: scripts/bench_sockio.py [--reps 5] [--time 4] [--kinds nbd] [--syscall-reps 2]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import SB, Server, build, free_port, sh  # noqa: E402

RAND = ["--bs=4k", "--read=100", "--random=100", "--qd=32"]
RAMP = 1


def argv(uri, secs):
    return [SB, "run", uri, f"--time={secs}s", f"--ramp={RAMP}s", "--json=-", "--quiet",
            "--no-monitor"] + RAND


def run(uri, secs):
    doc = json.loads(sh(argv(uri, secs)))
    r = doc["results"][0]
    # The layer each queue used (a multipath queue reports its paths' queues).
    used = sorted({str(v) for q in r.get("queues", []) for k, v in q.items()
                   if k.endswith("nbd_socket")})
    return {"iops": r["iops"], "cpu_us": doc["process_cpu"]["cpu_us_per_io"],
            "socket": ",".join(used) or (r.get("info") or {}).get("params", {}).get("socket")}


def syscalls(uri, secs):
    with tempfile.NamedTemporaryFile("r", suffix=".perf") as f:
        out = sh(["perf", "stat", "-x,", "-o", f.name, "-e", "raw_syscalls:sys_enter"]
                 + argv(uri, secs))
        n = next(int(line.split(",")[0]) for line in f.read().splitlines()
                 if "raw_syscalls:sys_enter" in line)
    iops = json.loads(out)["results"][0]["iops"]
    return n / (iops * (secs + RAMP))


def with_key(uri, kv):
    return uri + ("&" if "?" in uri else "?") + kv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time", type=int, default=4)
    ap.add_argument("--kinds", default="nbd")
    ap.add_argument("--syscall-reps", type=int, default=2)
    a = ap.parse_args()
    if not os.path.exists(SB):
        build()
    print(f"load: {open('/proc/loadavg').read().strip()}; {os.cpu_count()} CPUs; "
          f"{os.uname().release}")
    for k in a.kinds.split(","):
        p1, p2 = free_port(), free_port()
        serve = [SB, "serve", k, "--size=1G", f"--listen=127.0.0.1:{p1}",
                 f"--listen=127.0.0.1:{p2}"]
        print(f" {k}\n  $ " + " ".join(serve))
        srv = Server(serve, p1)
        try:
            scheme = {"nbd": "nbd"}[k]
            one = f"{scheme}://127.0.0.1:{p1}"
            two = f"{scheme}://127.0.0.1:{p1},127.0.0.1:{p2}"
            uris = {"one poll": one, "one uring": with_key(one, "sockio=uring"),
                    "two poll": two, "two uring": with_key(two, "sockio=uring")}
            for key, u in uris.items():
                print(f"   {key}: $ " + " ".join(argv(u, a.time)[:2]) + f" '{u}' "
                      + " ".join(argv(u, a.time)[3:]))
            sh([SB, "run", one, "--precondition=fill", "--bs=1M", "--time=1s", "--quiet",
                "--no-monitor"])
            res = {key: [] for key in uris}
            for rep in range(a.reps):
                for key in (list(uris) if rep % 2 == 0 else list(uris)[::-1]):
                    res[key].append(run(uris[key], a.time))
                print(f"  rep {rep + 1}: " + " | ".join(
                    f"{key} {r[-1]['iops'] / 1e3:6.1f}k {r[-1]['cpu_us']:.3f}"
                    for key, r in res.items()) + "  (IOPS, CPU-µs/IO)")
            layers = {key: r[0]["socket"] for key, r in res.items()}
            print(f"  engine info socket: {layers}")
            med = {key: statistics.median(x["cpu_us"] for x in r) for key, r in res.items()}
            iops = {key: statistics.median(x["iops"] for x in r) for key, r in res.items()}
            print("  median CPU-µs per I/O: " + ", ".join(f"{key} {v:.3f}"
                                                         for key, v in med.items()))
            print("  median IOPS: " + ", ".join(f"{key} {v / 1e3:.1f}k"
                                                for key, v in iops.items()))
            for layer in ("poll", "uring"):
                d = (med[f"two {layer}"] / med[f"one {layer}"] - 1) * 100
                print(f"  {layer}: two paths vs one {d:+.1f} % "
                      f"(goal <= +2 %: {'met' if d <= 2 else 'MISSED'})")
            for n in ("one", "two"):
                print(f"  {n} path(s): uring/poll CPU per I/O "
                      f"{med[f'{n} uring'] / med[f'{n} poll']:.3f}x")
            if a.syscall_reps > 0:
                sc = {key: [] for key in uris}
                for rep in range(a.syscall_reps):
                    for key in (list(uris) if rep % 2 == 0 else list(uris)[::-1]):
                        sc[key].append(syscalls(uris[key], a.time))
                print("  system calls per I/O (perf stat raw_syscalls:sys_enter, each run): "
                      + ", ".join(f"{key} " + "/".join(f"{x:.3f}" for x in v)
                                  for key, v in sc.items()))
        finally:
            srv.stop()
    print(f"load after: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    sys.exit(main())
