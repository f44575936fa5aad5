#!/usr/bin/env python3
"""What unique data costs (issue 11): `mem:` write IOPS with stamped data against a binary from
before stamps (the parent of commit 225b3d8), the worst case for the stamping's cost: an I/O of
the in-process RAM disk is one copy.

    sanbench run mem:1G --read 0 --bs 4k --qd 32 --time 2

Binaries are interleaved (the first of each round alternates) and repeated; medians and the
ratio of medians are printed, with the load average before and after. Goal: stamped write IOPS
at least 0.90x the before-stamps binary's.

Usage: scripts/bench_stamp.py --before PATH [--after PATH] [--reps 7] [--time 2]
(build the reference once: git worktree add /tmp/ref 225b3d8~1 && cargo build --release -p
sanbench there; --after defaults to this tree's release build.)
"""
import argparse, json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import SB, build, median, sh  # noqa


def one(binary, time_s):
    # --precondition does not exist before stamps; both binaries write to a fresh mem: disk.
    extra = [] if "before" in binary[0] else ["--precondition=none"]
    doc = json.loads(sh([binary[1], "run", "mem:1G", "--read=0", "--bs=4k", "--qd=32",
                         f"--time={time_s}", "--json=-", "--quiet", "--no-monitor"] + extra))
    return doc["results"][0]["iops"], doc["process_cpu"]["cpu_us_per_io"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default=None)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--time", type=int, default=2)
    a = ap.parse_args()
    if a.after is None:
        build()
    bins = [("before", a.before), ("after", a.after or SB)]
    print(f"load average before: {os.getloadavg()}")
    res = {k: [] for k, _ in bins}
    for rep in range(a.reps):
        for b in (bins if rep % 2 == 0 else bins[::-1]):
            res[b[0]].append(one(b, a.time))
        print(f"  rep {rep + 1}: " + " | ".join(
            f"{k} {res[k][-1][0]:>11,.0f} IOPS {res[k][-1][1]:.3f} CPU-µs/IO" for k, _ in bins),
            flush=True)
    print(f"load average after: {os.getloadavg()}")
    m = {k: median([r[0] for r in v]) for k, v in res.items()}
    c = {k: median([r[1] for r in v]) for k, v in res.items()}
    ratio = m["after"] / m["before"]
    print(f"median IOPS: before {m['before']:,.0f} ({c['before']:.3f} CPU-µs/IO), after "
          f"{m['after']:,.0f} ({c['after']:.3f} CPU-µs/IO); after/before {ratio:.3f}x "
          f"(goal >= 0.90x: {'met' if ratio >= 0.90 else 'MISSED'})")


if __name__ == "__main__":
    main()
