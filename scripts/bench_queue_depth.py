#!/usr/bin/env python3
"""Does sanbench keep the queue depth it is asked for? Against fio on the same file (issue 43,
item 5): IOPS, mean latency and the depth each tool kept by Little's law (IOPS x mean latency,
over the depth asked), for one or two sanbench builds and fio, interleaved, medians.

The depth kept is less sensitive to the machine's load than IOPS: a tool that leaves a slot
empty between a completion and the next submission (its own work on the thread, or a wait for
a CPU in between) keeps less than it was asked for whatever the IOPS of the moment; a tool that
keeps every slot full keeps the depth also when the machine is slow. fio's figure uses its `lat`
(from the preparation of the I/O unit, so its own submission work is inside); sanbench's its
mean latency (from just before the batch is submitted).

On a file in /dev/shm laid out once by fio:
  B  64 KiB sequential write, QD 4, 1 worker
  C  4 KiB random 30/70 read/write, QD 16, 2 workers (a write-heavy mix)
  D  1 MiB sequential write, QD 8, 1 worker
  E  4 KiB random 70/30 read/write, QD 16, 2 workers
fio: its io_uring engine as it comes (one buffer re-sent per write, slightly scrambled).

Usage: scripts/bench_queue_depth.py [--a OLD_SANBENCH] [--b NEW_SANBENCH] [--reps 5] [--time 4]
       [--only BC] [--size 1G]
"""
import argparse, json, os, statistics, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SB = os.environ.get("SANBENCH", os.path.join(ROOT, "target", "release", "sanbench"))

WORKLOADS = {
    "B": ("64k seq write qd4", dict(bs="64k", read=0, random=0, qd=4, workers=1)),
    "C": ("4k rand 30/70 qd16 x2", dict(bs="4k", read=30, random=100, qd=16, workers=2)),
    "D": ("1m seq write qd8", dict(bs="1m", read=0, random=0, qd=8, workers=1)),
    "E": ("4k rand 70/30 qd16 x2", dict(bs="4k", read=70, random=100, qd=16, workers=2)),
}


def sh(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def fio(path, w, secs, size):
    rw = ("randrw" if w["random"] else "rw") if 0 < w["read"] < 100 else (
        ("randread" if w["random"] else "read") if w["read"] == 100 else
        ("randwrite" if w["random"] else "write"))
    cmd = ["fio", "--name=x", "--ioengine=io_uring", f"--filename={path}", f"--size={size}",
           f"--rw={rw}", f"--rwmixread={w['read']}", f"--bs={w['bs']}", f"--iodepth={w['qd']}",
           f"--numjobs={w['workers']}", "--group_reporting", "--time_based",
           f"--runtime={secs}", "--ramp_time=1", "--output-format=json"]
    job = json.loads(sh(cmd))["jobs"][0]
    rd, wr = job["read"], job["write"]
    ios = rd["total_ios"] + wr["total_ios"]
    lat = (rd["lat_ns"]["mean"] * rd["total_ios"] + wr["lat_ns"]["mean"] * wr["total_ios"]) / ios
    iops = rd["iops"] + wr["iops"]
    return {"iops": iops, "lat_us": lat / 1e3, "kept": iops * lat / 1e9}, cmd


def sanbench(sb, path, w, secs):
    cmd = [sb, "run", path, f"--bs={w['bs']}", f"--read={w['read']}", f"--random={w['random']}",
           f"--qd={w['qd']}", f"--workers={w['workers']}", f"--time={secs}s", "--ramp=1s",
           "--precondition=none", "--no-monitor", "--json=-", "--quiet"]
    r = json.loads(sh(cmd))["results"][0]
    lat = r["latency_us"]["mean"]
    return {"iops": r["iops"], "lat_us": lat, "kept": r["iops"] * lat / 1e6,
            "sampled": r["littles_law"].get("mean_outstanding")}, cmd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", help="a second sanbench build (e.g. main's) run beside --b")
    ap.add_argument("--b", default=SB)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time", type=int, default=4)
    ap.add_argument("--size", default="1G")
    ap.add_argument("--only", default="BC")
    o = ap.parse_args()
    path = "/dev/shm/sanbench-queue-depth.img"
    sh(["fio", "--name=layout", f"--filename={path}", f"--size={o.size}", "--rw=write",
        "--bs=1M", "--ioengine=psync", "--output-format=json"])
    tools = {"fio": None, "b": o.b}
    if o.a:
        tools["a"] = o.a
    try:
        for key in o.only:
            name, w = WORKLOADS[key]
            asked = w["qd"] * w["workers"]
            print(f"{key}: {name} (depth asked {asked})")
            got = {t: [] for t in tools}
            for rep in range(o.reps):
                order = list(tools)
                order = order[rep % len(order):] + order[:rep % len(order)]
                line = f"  rep {rep + 1}:"
                for t in order:
                    if t == "fio":
                        r, cmd = fio(path, w, o.time, o.size)
                    else:
                        r, cmd = sanbench(tools[t], path, w, o.time)
                    if rep == 0:
                        print("   $ " + " ".join(cmd))
                    got[t].append(r)
                for t in tools:
                    r = got[t][-1]
                    line += (f" | {t} {r['iops']:>9,.0f} IOPS {r['lat_us']:7.1f} µs"
                             f" kept {r['kept']:5.2f}")
                print(line)
            med = {t: {k: statistics.median(r[k] for r in got[t]) for k in ("iops", "lat_us", "kept")}
                   for t in tools}
            for t in tools:
                m = med[t]
                extra = ""
                if t != "fio":
                    ratios = [s["iops"] / f["iops"] for s, f in zip(got[t], got["fio"])]
                    extra = (f", IOPS / fio's {statistics.median(ratios):.3f}x (median of the "
                             f"interleaved pairs)")
                print(f"  median {t}: {m['iops']:,.0f} IOPS, {m['lat_us']:.1f} µs, kept "
                      f"{m['kept']:.2f} of {asked} ({m['kept'] / asked:.3f}){extra}")
    finally:
        os.unlink(path)


if __name__ == "__main__":
    sys.exit(main())
