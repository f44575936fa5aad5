#!/usr/bin/env python3
"""Watching a run (issue 25): what per-interval histograms and a live endpoint cost.

On `null:` and `mem:`, 4 KiB random read, QD 32, one worker, each run twice, interleaved (the
first alternates): as it comes (the result's default 1 s intervals, no endpoint) and watched
(`--log-interval 10ms --hist-log FILE --metrics-listen 127.0.0.1:P`, with this script scraping
/metrics once a second during the run, as Prometheus would). The figure is I/Os per
CPU-second of the sanbench process (`process_cpu.ios_per_cpu_s`: getrusage over the window,
host monitor off), so that other load changes wall time, not the ratio; the scrapes' cost
lands in the same process and counts. Medians and watched/plain. Goal: the watched run keeps
>= 98 % of the plain run's I/Os per CPU-second.

Usage: scripts/bench_watch.py [--reps 7] [--time 4] [--targets null:,mem:256M]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, threading, time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import SB, build, free_port  # noqa: E402

WORK = ["--bs=4k", "--read=100", "--random=100", "--qd=32", "--ramp=0.5s", "--json=-",
        "--quiet", "--no-monitor"]


def scrape(port, stop, got):
    """GET /metrics every second until `stop`; counts answers that carried samples."""
    while not stop.wait(1.0):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                if b"sanbench_ios_total" in r.read():
                    got.append(time.time())
        except OSError:
            pass


def run(target, secs, watched, tmp):
    argv = [SB, "run", target, f"--time={secs}s"] + WORK
    stop, got, th = threading.Event(), [], None
    if watched:
        port = free_port()
        argv += ["--log-interval=10ms", f"--hist-log={os.path.join(tmp, 'w.hlog')}",
                 f"--metrics-listen=127.0.0.1:{port}"]
        th = threading.Thread(target=scrape, args=(port, stop, got), daemon=True)
        th.start()
    p = subprocess.run(argv, check=True, capture_output=True, text=True)
    stop.set()
    if th:
        th.join()
    doc = json.loads(p.stdout)
    return doc["process_cpu"]["ios_per_cpu_s"], len(got), len(doc["results"][0].get(
        "intervals") or [])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--time", type=int, default=4)
    ap.add_argument("--targets", default="null:,mem:256M")
    a = ap.parse_args()
    build()
    print(f"load: {open('/proc/loadavg').read().strip()}; {os.cpu_count()} CPUs; "
          f"{os.uname().release}")
    tmp = tempfile.mkdtemp(prefix="sanbench-bench-watch-")
    for t in a.targets.split(","):
        print(f"{t}\n  $ {SB} run {t} --time={a.time}s " + " ".join(WORK)
              + "   [watched: --log-interval=10ms --hist-log=F --metrics-listen=127.0.0.1:P,"
                " scraped every 1 s]")
        res = {"plain": [], "watched": []}
        for rep in range(a.reps):
            order = ["plain", "watched"] if rep % 2 == 0 else ["watched", "plain"]
            line = []
            for k in order:
                v, scrapes, ivs = run(t, a.time, k == "watched", tmp)
                res[k].append(v)
                line.append(f"{k} {v / 1e6:.3f} M I/O per CPU-s ({ivs} intervals"
                            + (f", {scrapes} scrapes)" if k == "watched" else ")"))
            print(f"  rep {rep + 1}: " + " | ".join(line))
        p, w = statistics.median(res["plain"]), statistics.median(res["watched"])
        ratios = sorted(b / a_ for a_, b in zip(res["plain"], res["watched"]))
        print(f"  median: plain {p / 1e6:.3f}, watched {w / 1e6:.3f} M I/O per CPU-s; "
              f"watched/plain {w / p:.3f}x (per-rep ratios {ratios[0]:.3f}-{ratios[-1]:.3f}, "
              f"median {statistics.median(ratios):.3f}); goal >= 0.98x: "
              f"{'met' if w / p >= 0.98 else 'MISSED'}")
    print(f"load after: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    sys.exit(main())
