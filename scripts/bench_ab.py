#!/usr/bin/env python3
"""Two sanbench builds on the same work, interleaved: did a change cost performance?

For a refactor (issue 39: the I/O core, the result document and the analysis in crates of
their own) nothing may get slower. Each repetition runs every case with build A, then with
build B, then B, then A (ABBA, so drift over the run falls on both alike); the table gives
medians and B/A ratios. Cases (all on this host, loopback only):
  null:        4 KiB random read QD 32, one worker: I/Os per CPU-second of the process
  mem:         4 KiB random read QD 32: IOPS and I/Os per CPU-second
  mem-verify:  the same, 70 % reads, --verify
  shm-uring:   4 KiB random read QD 32 on a 1 GiB file in /dev/shm (io_uring): IOPS
  nbd, iscsi, nvme: 4 KiB random read QD 32 against the same build's own server over
               loopback: IOPS, client and server CPU-us per I/O

Usage: scripts/bench_ab.py A_BINARY B_BINARY [--reps 5] [--time 4]
"""
import argparse, json, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import cpu_s, median  # noqa: E402


def run(sb, args):
    out = subprocess.run([sb, "run", "--json=-", "--quiet", "--no-monitor"] + args,
                         check=True, capture_output=True, text=True).stdout
    doc = json.loads(out)
    r, pc = doc["results"][0], doc["process_cpu"]
    cpu = pc["user_s"] + pc["system_s"]
    return {"iops": r["iops"], "ios": r["ios"], "ios_per_cpu_s": r["ios"] / cpu if cpu else 0.0,
            "client_us": cpu * 1e6 / max(r["ios"], 1)}


def served(sb, proto, args):
    """The same build's own server on loopback; its URI is the first line it prints."""
    p = subprocess.Popen([sb, "serve", proto, "--size", "1G", "--listen", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = p.stdout.readline()
        uri = next(w for w in line.split() if "://" in w)
        c0 = cpu_s(p.pid)
        r = run(sb, [uri] + args)
        r["server_us"] = (cpu_s(p.pid) - c0) * 1e6 / max(r["ios"], 1)
        return r
    finally:
        p.terminate()
        p.wait(10)


def cases(secs, shm):
    rr = ["--bs=4k", "--read=100", "--random=100", "--qd=32", f"--time={secs}s", "--ramp=1s"]
    return {
        "null": lambda sb: run(sb, ["null:"] + rr),
        "mem": lambda sb: run(sb, ["mem:1G"] + rr),
        "mem-verify": lambda sb: run(sb, ["mem:1G", "--bs=4k", "--read=70", "--random=100",
                                          "--qd=32", f"--time={secs}s", "--ramp=1s",
                                          "--verify"]),
        "shm-uring": lambda sb: run(sb, [shm] + rr),
        "nbd": lambda sb: served(sb, "nbd", rr),
        "iscsi": lambda sb: served(sb, "iscsi", rr),
        "nvme": lambda sb: served(sb, "nvme", rr),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time", type=int, default=4)
    ap.add_argument("--only", default="", help="comma-separated case names")
    o = ap.parse_args()
    shm_dir = tempfile.mkdtemp(dir="/dev/shm")
    shm = os.path.join(shm_dir, "ab.img")
    with open(shm, "wb") as f:
        f.truncate(1 << 30)
    subprocess.run(["dd", "if=/dev/urandom", f"of={shm}", "bs=1M", "count=1024",
                    "conv=notrunc", "status=none"], check=True)
    cs = cases(o.time, shm)
    if o.only:
        cs = {k: v for k, v in cs.items() if k in o.only.split(",")}
    res = {k: {"a": [], "b": []} for k in cs}
    try:
        for rep in range(o.reps):
            order = ("a", "b") if rep % 2 == 0 else ("b", "a")
            for name, fn in cs.items():
                for side in order[:2]:
                    res[name][side].append(fn(o.a if side == "a" else o.b))
                print(f"rep {rep + 1}/{o.reps} {name}: "
                      f"A {res[name]['a'][-1]['iops']:.0f} B {res[name]['b'][-1]['iops']:.0f} IOPS",
                      file=sys.stderr, flush=True)
    finally:
        os.unlink(shm)
        os.rmdir(shm_dir)
    print(f"A = {o.a}\nB = {o.b}\n{o.reps} repetitions, {o.time} s each, order alternating AB / BA per repetition; "
          "medians, B/A ratios")
    print(f"{'case':<11} {'figure':<16} {'A':>12} {'B':>12} {'B/A':>7}")
    for name, r in res.items():
        for fig in ["iops", "ios_per_cpu_s", "client_us", "server_us"]:
            if fig not in r["a"][0]:
                continue
            a = median([x[fig] for x in r["a"]])
            b = median([x[fig] for x in r["b"]])
            print(f"{name:<11} {fig:<16} {a:>12.1f} {b:>12.1f} {b / a if a else 0:>7.3f}")


if __name__ == "__main__":
    main()
