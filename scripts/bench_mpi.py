#!/usr/bin/env python3
"""sanbench as an MPI job (issue 14): what the coordination costs, and whether ranks scale.

1. Same work, one rank: `sanbench run` plain and under `mpirun -n 1` (the same binary, built
   with --features mpi), interleaved, medians of --reps. The MPI run adds a barrier before the
   window, a poll for rank 0's end, and the gather after it: nothing per I/O, so the goal is
   IOPS within 2 %. Measured on null: (sanbench's own per-I/O cost, where any per-I/O cost
   would show most) and on mem:.
2. Scaling on null:: `mpirun -n 2` (one rank per core) against `mpirun -n 1`, total I/Os in
   the same window; the goal is at least 1.8x.

Every MPI run stays on this host (shared memory; Open MPI's own TCP on loopback only).

Usage: scripts/bench_mpi.py [--reps 5] [--time 3]
"""
import argparse, json, os, statistics, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, SB  # noqa: E402

MPIRUN = ["mpirun", "--oversubscribe", "--mca", "btl", "self,vader",
          "--mca", "oob_tcp_if_include", "lo"]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl_vader_single_copy_mechanism="none")


def build():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "sanbench", "--features", "mpi"],
                   cwd=ROOT, check=True)


def run(target, secs, ranks=None):
    """One run's document; `ranks`: under mpirun -n ranks (None: plain)."""
    args = [SB, "run", target, "--bs=4k", "--qd=32", "--workers=1", f"--time={secs}s",
            "--ramp=0.5s", "--json=-", "--quiet", "--no-monitor"]
    if ranks is not None:
        args = MPIRUN + ["-n", str(ranks)] + args
    out = subprocess.run(args, check=True, capture_output=True, text=True, env=ENV).stdout
    return json.loads(out[out.index("{"):])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time", type=int, default=3)
    ap.add_argument("--no-build", action="store_true")
    a = ap.parse_args()
    if not a.no_build:
        build()
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")

    print(f"1. one rank: plain run vs mpirun -n 1, 4 KiB random read QD 32, {a.time} s, "
          f"medians of {a.reps} interleaved")
    for target in ["null:", "mem:256M"]:
        plain, mpi = [], []
        for _ in range(a.reps):
            plain.append(run(target, a.time)["results"][0]["iops"])
            mpi.append(run(target, a.time, ranks=1)["results"][0]["iops"])
        p, m = statistics.median(plain), statistics.median(mpi)
        print(f"   {target:<9} plain {p:>13,.0f} IOPS  mpirun -n 1 {m:>13,.0f} IOPS  "
              f"ratio {m / p:.4f}  (goal within 2 %: {'met' if abs(m / p - 1) <= 0.02 else 'MISSED'})")
        print(f"             plain runs {[round(x) for x in plain]}")
        print(f"             mpi runs   {[round(x) for x in mpi]}")

    print(f"2. scaling on null:: mpirun -n 2 vs -n 1, total I/Os in {a.time} s, medians of "
          f"{a.reps} interleaved")
    one, two, spread = [], [], []
    for _ in range(a.reps):
        one.append(run("null:", a.time, ranks=1)["results"][0]["ios"])
        d = run("null:", a.time, ranks=2)
        two.append(d["results"][0]["ios"])
        spread.append(d["mpi"]["barrier_exit_spread_us"])
    o, t = statistics.median(one), statistics.median(two)
    print(f"   1 rank {o:>14,.0f} I/Os  2 ranks {t:>14,.0f} I/Os  ratio {t / o:.2f}x  "
          f"(goal >= 1.8x: {'met' if t / o >= 1.8 else 'MISSED'})")
    print(f"   barrier exit spread of the 2-rank runs: median {statistics.median(spread):.3f} µs")
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
