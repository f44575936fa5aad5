#!/usr/bin/env python3
"""Replay fidelity at 100k IOPS (issue 42): a synthetic fio v3 iolog of 4 KiB random reads
and writes (70/30) one every 10 us, replayed timed by `sanbench replay` on null: and mem:,
and by fio's read_iolog (ioengine=null) on the same trace.

Per replay: the issue lag against the trace's times (p50/p99/max; goal p99 <= 50 us), the
achieved against the recorded rate (goal within 1 %), and CPU per I/O. fio writes no per-I/O
issue time finer than 1 ms (its logs are in ms, and it refuses write_iolog while it reads
one), so it is compared by its achieved rate (I/Os over its runtime) and CPU per I/O.

Usage: scripts/bench_replay.py [--seconds 3] [--reps 3] [--sanbench PATH]
(builds the release binary unless given one; honours CARGO_TARGET_DIR)
"""
import argparse, json, os, random, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

TARGET_DIR = os.environ.get("CARGO_TARGET_DIR", os.path.join(benchlib.ROOT, "target"))
SB = os.path.join(TARGET_DIR, "release", "sanbench")


def write_trace(path, n, gap_us, seed=1):
    r = random.Random(seed)
    with open(path, "w") as f:
        f.write("fio version 3 iolog\n0 /dev/shm/sb-replay-fio add\n0 /dev/shm/sb-replay-fio open\n")
        for i in range(n):
            op = "read" if r.random() < 0.7 else "write"
            f.write(f"{i * gap_us} /dev/shm/sb-replay-fio {op} {r.randrange(262144) * 4096} 4096\n")


def sanbench(trace, target):
    out = benchlib.sh([SB, "replay", trace, target, "--qd", "64", "--json", "-", "-q"])
    doc = json.loads(out)
    p = doc["results"][0]["replay"]
    pc = doc["process_cpu"]
    ios = p["replayed_ops"]["read"] + p["replayed_ops"]["write"]
    return {
        "lag_p50": p["issue_lag_us"]["p50"],
        "lag_p99": p["issue_lag_us"]["p99"],
        "lag_max": p["issue_lag_us"]["max"],
        "ratio": p["rate_ratio"],
        "achieved": p["achieved_iops"],
        "cpu_us": (pc["user_s"] + pc["system_s"]) * 1e6 / ios,
        "host_limited": p["host_limited"],
    }


def fio(trace, n, recorded):
    out = benchlib.sh(["fio", "--output-format=json", "--name=r", "--ioengine=null", "--size=1G",
                       "--filename=/dev/shm/sb-replay-fio", f"--read_iolog={trace}"])
    job = json.loads(out[out.index("{"):])["jobs"][0]
    ios = job["read"]["total_ios"] + job["write"]["total_ios"]
    runtime = job["job_runtime"] / 1000.0
    achieved = (ios - 1) / runtime
    return {
        "achieved": achieved,
        "ratio": achieved / recorded,
        "cpu_us": (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * runtime * 1e6 / ios,
        "ios": ios,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sanbench", help="this binary instead of a release build")
    a = ap.parse_args()
    global SB
    if a.sanbench:
        SB = a.sanbench
    else:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "sanbench"], cwd=benchlib.ROOT, check=True)
    gap_us = 10
    n = int(a.seconds * 1e6 / gap_us)
    recorded = (n - 1) / ((n - 1) * gap_us / 1e6)
    trace = "/dev/shm/sb-replay-100k.iolog"
    write_trace(trace, n, gap_us)
    try:
        print(f"trace: {n} I/Os, one every {gap_us} us ({recorded:.0f} IOPS), {a.seconds} s")
        for target in ["null:", "mem:1G"]:
            rows = [sanbench(trace, target) for _ in range(a.reps)]
            for i, r in enumerate(rows):
                print(f"sanbench {target:7} rep {i}: lag p50 {r['lag_p50']:.1f} us p99 {r['lag_p99']:.1f} us "
                      f"max {r['lag_max']:.0f} us; achieved {r['achieved']:.0f}/s ({r['ratio'] * 100:.2f} %); "
                      f"{r['cpu_us']:.2f} CPU-us/IO; host_limited {r['host_limited']}")
            med = lambda k: benchlib.median([r[k] for r in rows])  # noqa: E731
            print(f"sanbench {target:7} median: lag p99 {med('lag_p99'):.1f} us (goal <= 50: "
                  f"{'met' if med('lag_p99') <= 50 else 'MISSED'}), rate {med('ratio') * 100:.2f} % "
                  f"(goal >= 99: {'met' if med('ratio') >= 0.99 else 'MISSED'}), {med('cpu_us'):.2f} CPU-us/IO")
        rows = [fio(trace, n, recorded) for _ in range(a.reps)]
        for i, r in enumerate(rows):
            print(f"fio read_iolog null rep {i}: achieved {r['achieved']:.0f}/s ({r['ratio'] * 100:.2f} %), "
                  f"{r['cpu_us']:.2f} CPU-us/IO, {r['ios']} I/Os")
    finally:
        for p in [trace, "/dev/shm/sb-replay-fio"]:
            if os.path.exists(p):
                os.remove(p)


if __name__ == "__main__":
    main()
