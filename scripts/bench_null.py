#!/usr/bin/env python3
"""The generators alone (issue 16, item 11): sanbench's `null:` target against fio's null
engine as it comes and configured for its lowest overhead (gtod_reduce=1: no per-I/O clock
reads; batched submission and completion), 4 KiB random read, QD 32, one worker. The figure is
I/Os per CPU-second of the generator process, so that other load on the machine changes wall
time, not the ratio. Interleaved, repeated; medians and ratios.

Usage: scripts/bench_null.py [--reps 5] [--time 3]
"""
import argparse, json, os, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import SB, build, sh  # noqa: E402

FIO = ["fio", "--name=x", "--ioengine=null", "--rw=randread", "--bs=4k", "--iodepth=32",
       "--size=1T", "--numjobs=1", "--time_based", "--output-format=json"]
LEAN = ["--gtod_reduce=1", "--iodepth_batch_submit=32", "--iodepth_batch_complete_min=1",
        "--iodepth_batch_complete_max=32"]


def fio(extra, secs):
    job = json.loads(sh(FIO + [f"--runtime={secs}"] + extra))["jobs"][0]
    r = job["read"]
    cpu_s = (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * r["runtime"] / 1000.0
    return r["total_ios"] / cpu_s


def sanbench(secs):
    doc = json.loads(sh([SB, "run", "null:", "--bs=4k", "--read=100", "--random=100", "--qd=32",
                         f"--time={secs}s", "--ramp=0s", "--json=-", "--quiet", "--no-monitor"]))
    return doc["process_cpu"]["ios_per_cpu_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time", type=int, default=3)
    a = ap.parse_args()
    build()
    runs = {"sanbench": lambda: sanbench(a.time), "fio": lambda: fio([], a.time),
            "fio-lean": lambda: fio(LEAN, a.time)}
    got = {k: [] for k in runs}
    order = list(runs)
    print("$ " + " ".join(FIO + LEAN + [f"--runtime={a.time}"]))
    for rep in range(a.reps):
        for k in order[rep % 3:] + order[:rep % 3]:
            got[k].append(runs[k]())
        print(f"  rep {rep + 1}: " + "  ".join(f"{k} {got[k][-1] / 1e6:.2f}M" for k in order),
              flush=True)
    med = {k: statistics.median(v) for k, v in got.items()}
    print("I/Os per CPU-second, medians: " + ", ".join(f"{k} {v / 1e6:.2f}M" for k, v in med.items()))
    print(f"sanbench/fio {med['sanbench'] / med['fio']:.1f}x, "
          f"sanbench/fio-lean {med['sanbench'] / med['fio-lean']:.1f}x")


if __name__ == "__main__":
    main()
