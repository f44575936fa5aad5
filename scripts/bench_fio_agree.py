#!/usr/bin/env python3
"""Does sanbench measure what fio measures? The same work on the same file, interleaved, medians.

On a file in /dev/shm (laid out once by fio, so both read and overwrite the same data):
  A. 4 KiB random 70/30 read/write, QD 8, 2 workers (fio numjobs=2)
  B. 64 KiB sequential write, QD 4, 1 worker
fio runs its io_uring engine three ways: as it comes (writes re-send one buffer, slightly scrambled)
with --refill_buffers (new random data for every write, the same work as sanbench's unique
stamped data), and matched: refill plus --fixedbufs --registerfiles (registered buffers and file,
as sanbench's ring has them); sanbench runs its default file engine (io_uring), buffered,
with --precondition none (the file is already written). Reported: IOPS and mean latency (fio's `lat`,
from when the I/O is prepared to its completion; sanbench's from just before the batch is
submitted; fio's `clat`, from after io_uring_enter returns, printed beside) with sanbench/fio ratios per
repetition and their medians.

--pin CPUS runs every command of both tools under `taskset -c CPUS` (io_uring's io-wq workers,
which do tmpfs writes, inherit it): on a 2-vCPU VM where the submitter and the workers land on
the same or on different vCPUs run to run, B is bimodal for both tools unpinned and steady pinned.
--only A|B runs one workload.

Usage: scripts/bench_fio_agree.py [--reps 5] [--time 5] [--size 1G] [--pin CPUS] [--only A|B]
"""
import argparse, json, os, statistics, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SB = os.environ.get("SANBENCH", os.path.join(ROOT, "target", "release", "sanbench"))

WORKLOADS = {
    "A rand 4k 70/30 qd8 x2": dict(bs="4k", read=70, random=100, qd=8, workers=2),
    "B seq write 64k qd4": dict(bs="64k", read=0, random=0, qd=4, workers=1),
}


PIN = []


def sh(cmd):
    return subprocess.run(PIN + cmd, check=True, capture_output=True, text=True).stdout


def fio(path, w, secs, size, refill=False, matched=False):
    rw = ("randrw" if w["random"] else "rw") if 0 < w["read"] < 100 else (
        ("randread" if w["random"] else "read") if w["read"] == 100 else
        ("randwrite" if w["random"] else "write"))
    cmd = ["fio", "--name=x", "--ioengine=io_uring", f"--filename={path}", f"--size={size}",
           f"--rw={rw}", f"--rwmixread={w['read']}", f"--bs={w['bs']}", f"--iodepth={w['qd']}",
           f"--numjobs={w['workers']}", "--group_reporting", "--time_based",
           f"--runtime={secs}", "--ramp_time=1", "--output-format=json"]
    if refill:
        cmd.append("--refill_buffers=1")
    if matched:
        # sanbench's ring registers its files and buffers; fio can too.
        cmd += ["--fixedbufs=1", "--registerfiles=1"]
    job = json.loads(sh(cmd))["jobs"][0]
    rd, wr = job["read"], job["write"]
    ios = rd["total_ios"] + wr["total_ios"]
    def mean(key):
        return (rd[key]["mean"] * rd["total_ios"] + wr[key]["mean"] * wr["total_ios"]) / ios / 1e3
    return {"iops": rd["iops"] + wr["iops"], "lat_us": mean("lat_ns"), "clat_us": mean("clat_ns")}, cmd


def sanbench(path, w, secs):
    cmd = [SB, "run", path, f"--bs={w['bs']}", f"--read={w['read']}", f"--random={w['random']}",
           f"--qd={w['qd']}", f"--workers={w['workers']}", f"--time={secs}s", "--ramp=1s",
           "--precondition=none", "--no-monitor", "--json=-", "--quiet"]
    r = json.loads(sh(cmd))["results"][0]
    return {"iops": r["iops"], "lat_us": r["latency_us"]["mean"]}, cmd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time", type=int, default=5)
    ap.add_argument("--size", default="1G")
    ap.add_argument("--pin", help="taskset -c CPUS for every command of both tools")
    ap.add_argument("--only", choices=["A", "B"])
    a = ap.parse_args()
    if a.pin:
        PIN[:] = ["taskset", "-c", a.pin]
        print(f"every command under taskset -c {a.pin}")
    path = "/dev/shm/sanbench-fio-agree.img"
    sh(["fio", "--name=layout", f"--filename={path}", f"--size={a.size}", "--rw=write",
        "--bs=1M", "--ioengine=psync", "--output-format=json"])
    try:
        for name, w in WORKLOADS.items():
            if a.only and not name.startswith(a.only):
                continue
            ratios = {"fio": ([], []), "fio-refill": ([], []), "fio-matched": ([], [])}
            vs_clat = []
            print(name)
            runners = {
                "fio": lambda: fio(path, w, a.time, a.size),
                "fio-refill": lambda: fio(path, w, a.time, a.size, refill=True),
                "fio-matched": lambda: fio(path, w, a.time, a.size, refill=True, matched=True),
                "sb": lambda: sanbench(path, w, a.time),
            }
            for rep in range(a.reps):
                # Rotate who goes first, so drift falls on all.
                order = list(runners)
                order = order[rep % len(order):] + order[:rep % len(order)]
                got = {}
                for who in order:
                    got[who], cmd = runners[who]()
                    if rep == 0:
                        print("   $ " + " ".join(PIN + cmd))
                s = got["sb"]
                line = f"  rep {rep + 1}: sanbench {s['iops']:>9,.0f} IOPS {s['lat_us']:7.2f} µs"
                for peer, (ri, rl) in ratios.items():
                    f = got[peer]
                    ri.append(s["iops"] / f["iops"])
                    rl.append(s["lat_us"] / f["lat_us"])
                    line += (f" | {peer} {f['iops']:>9,.0f} IOPS {f['lat_us']:7.2f} µs"
                             f" ({ri[-1]:.2f}x, {rl[-1]:.2f}x)")
                vs_clat.append(s["lat_us"] / got["fio"]["clat_us"])
                print(line + f" | vs fio clat {vs_clat[-1]:.2f}x")
            for peer, (ri, rl) in ratios.items():
                print(f"  median sanbench/{peer}: IOPS {statistics.median(ri):.3f}x, "
                      f"mean latency {statistics.median(rl):.3f}x")
            print(f"  median sanbench latency / fio clat (from after the submitting call): "
                  f"{statistics.median(vs_clat):.3f}x")
    finally:
        os.unlink(path)


if __name__ == "__main__":
    sys.exit(main())
