#!/usr/bin/env python3
"""Engine benchmark: sanbench vs fio on the same work, in one run, interleaved, medians.

Measures (issue 2):
  1. null: vs fio's null engine, 4 KiB random read, QD 32, one worker:
     I/Os per CPU-second of the generator process.
  2. io_uring on a file in /dev/shm and on a loop device (O_DIRECT):
     4 KiB random read QD 32 and 1 MiB sequential read QD 4: IOPS.
  3. QD 1 4 KiB random read on the same file: mean latency.

Usage: scripts/bench_engine.py [--reps 3] [--time 5] [--no-loop]
Needs root for the loop device. Prints a table of medians and sanbench/fio ratios.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SB = os.path.join(ROOT, "target", "release", "sanbench")


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def fio_full(target, engine, rw, bs, qd, secs, direct=False):
    cmd = ["fio", "--name=x", f"--ioengine={engine}", f"--rw={rw}", f"--bs={bs}",
           f"--iodepth={qd}", "--time_based", f"--runtime={secs}", "--output-format=json",
           "--numjobs=1"]
    if engine == "null":
        cmd.append("--size=1T")
    else:
        cmd += [f"--filename={target}", f"--direct={1 if direct else 0}"]
    job = json.loads(sh(cmd))["jobs"][0]
    r = job["read"]
    runtime_s = r["runtime"] / 1000.0
    cpu_s = (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * runtime_s
    return {
        "iops": r["iops"],
        "ios_per_cpu_s": r["total_ios"] / cpu_s if cpu_s > 0 else float("nan"),
        "lat_mean_us": r["lat_ns"]["mean"] / 1000.0,
    }, " ".join(cmd)


def sanbench(target, bs, random, qd, secs, direct=None):
    cmd = [SB, "run", target, f"--bs={bs}", "--read=100", f"--random={random}", f"--qd={qd}",
           f"--time={secs}s", "--json=-", "--quiet"]
    if direct is True:
        cmd.append("--direct")
    if direct is False:
        cmd.append("--buffered")
    doc = json.loads(sh(cmd))
    r = doc["results"][0]
    return {
        "iops": r["iops"],
        "ios_per_cpu_s": doc["process_cpu"]["ios_per_cpu_s"],
        "lat_mean_us": r["latency_us"]["mean"],
    }, " ".join(cmd[:1] + cmd[1:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--time", type=int, default=5)
    ap.add_argument("--no-loop", action="store_true")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "sanbench"], cwd=ROOT, check=True)

    shm = "/dev/shm/sanbench-bench.img"
    sh([SB, "run", shm, "--size=1G", "--time=100ms", "--quiet"])  # lays the file out
    cases = [
        ("null 4k randread QD32", "ios_per_cpu_s", True,
         lambda: sanbench("null:", "4k", 100, 32, a.time),
         lambda: fio_full(None, "null", "randread", "4k", 32, a.time)),
        ("shm file 4k randread QD32", "iops", True,
         lambda: sanbench(shm, "4k", 100, 32, a.time),
         lambda: fio_full(shm, "io_uring", "randread", "4k", 32, a.time)),
        ("shm file 1M seqread QD4", "iops", True,
         lambda: sanbench(shm, "1M", 0, 4, a.time),
         lambda: fio_full(shm, "io_uring", "read", "1M", 4, a.time)),
        ("shm file 4k randread QD1 latency", "lat_mean_us", False,
         lambda: sanbench(shm, "4k", 100, 1, a.time),
         lambda: fio_full(shm, "io_uring", "randread", "4k", 1, a.time)),
    ]
    loopdev = None
    if not a.no_loop:
        img = "/var/tmp/sanbench-bench-loop.img"
        sh(["truncate", "-s", "1G", img])
        sh(["dd", "if=/dev/urandom", f"of={img}", "bs=1M", "count=1024", "conv=notrunc",
            "status=none"])
        loopdev = sh(["losetup", "-f", "--show", img]).strip()
        cases += [
            ("loop 4k randread QD32 O_DIRECT", "iops", True,
             lambda: sanbench(loopdev, "4k", 100, 32, a.time),
             lambda: fio_full(loopdev, "io_uring", "randread", "4k", 32, a.time, True)),
            ("loop 1M seqread QD4 O_DIRECT", "iops", True,
             lambda: sanbench(loopdev, "1M", 0, 4, a.time),
             lambda: fio_full(loopdev, "io_uring", "read", "1M", 4, a.time, True)),
        ]
    try:
        rows = []
        for name, metric, higher_better, sbf, fiof in cases:
            s_vals, f_vals = [], []
            for _ in range(a.reps):
                # Interleave so drift falls on both alike.
                s, s_cmd = sbf()
                f, f_cmd = fiof()
                s_vals.append(s[metric])
                f_vals.append(f[metric])
            sm, fm = statistics.median(s_vals), statistics.median(f_vals)
            ratio = sm / fm if higher_better else fm / sm
            rows.append((name, metric, sm, fm, ratio, s_cmd, f_cmd))
            print(f"{name:36} {metric:14} sanbench {sm:14.1f}  fio {fm:14.1f}  "
                  f"ratio {ratio:5.2f}x{'' if higher_better else ' (fio/sanbench)'}",
                  flush=True)
        print("\ncommands (last repetition):")
        for r in rows:
            print(f"  {r[0]}:\n    {r[5]}\n    {r[6]}")
    finally:
        if loopdev:
            subprocess.run(["losetup", "-d", loopdev])
        try:
            os.unlink(shm)
        except OSError:
            pass


if __name__ == "__main__":
    main()
