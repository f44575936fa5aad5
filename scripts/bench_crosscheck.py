#!/usr/bin/env python3
"""sanbench crosscheck on six workloads on one tmpfs file: sanbench and the fio job it exports
(`--emit-fio`), interleaved, --reps repetitions each; prints one table row per workload with the
medians, the sanbench/fio ratios and Little's law for both tools (docs/FIO.md).

Workloads (mixed sizes, mixes, queue depths, several workers):
  1 4 KiB random read, QD 1            2 4 KiB random read, QD 16
  3 4 KiB random 70/30, QD 8, 2 workers 4 64 KiB sequential write, QD 4
  5 4k/16k/64k (50/25/25) random 50/50, QD 8 (a --spec file: fio's bssplit)
  6 8 KiB random write, QD 4, 2 workers

The file is /dev/shm/sanbench-crosscheck.img (--size, default 1G), created by sanbench's first
run and removed at the end. Uses target/release/sanbench (built if missing) and fio on PATH.

Usage: scripts/bench_crosscheck.py [--reps 3|auto] [--max-repeat 30] [--time 3] [--size 1G]
                                   [--tolerance 15] [--only N]
                                   [--cpus-policy shared|split]
"""
import argparse, json, os, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SB = os.environ.get("SANBENCH", os.path.join(ROOT, "target", "release", "sanbench"))

MIXED = """qd = 8
[[segment]]
weight = 2
bs = "4k"
read = 50
random = 100
align = "4k"
[[segment]]
weight = 1
bs = "16k"
read = 50
random = 100
align = "4k"
[[segment]]
weight = 1
bs = "64k"
read = 50
random = 100
align = "4k"
"""

WORKLOADS = [
    ("4k randread QD1", ["--bs", "4k", "--read", "100", "--random", "100", "--qd", "1"]),
    ("4k randread QD16", ["--bs", "4k", "--read", "100", "--random", "100", "--qd", "16"]),
    ("4k rand 70/30 QD8 x2", ["--bs", "4k", "--read", "70", "--random", "100", "--qd", "8",
                              "--workers", "2"]),
    ("64k seq write QD4", ["--bs", "64k", "--read", "0", "--random", "0", "--qd", "4"]),
    ("4k/16k/64k rand 50/50 QD8", ["--spec", "MIXED"]),
    ("8k randwrite QD4 x2", ["--bs", "8k", "--read", "0", "--random", "100", "--qd", "4",
                             "--workers", "2"]),
]


def fmt_iops(v):
    return f"{v / 1e3:.1f}k" if v >= 1e3 else f"{v:.0f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", default="3", help="N, or auto: until the intervals decide")
    ap.add_argument("--max-repeat", default="30")
    ap.add_argument("--time", type=int, default=3)
    ap.add_argument("--size", default="1G")
    ap.add_argument("--tolerance", default="15")
    ap.add_argument("--only", type=int)
    ap.add_argument("--cpus-policy", choices=["shared", "split"], default="shared",
                    help="split: each stream of sanbench and each fio job on one CPU of its own "
                         "(fio's cpus_allowed_policy=split, in the exported job)")
    a = ap.parse_args()
    if not os.path.exists(SB):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "sanbench"], cwd=ROOT, check=True)
    img = "/dev/shm/sanbench-crosscheck.img"
    spec = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    spec.write(MIXED)
    spec.close()
    rows = []
    try:
        for i, (name, args) in enumerate(WORKLOADS, 1):
            if a.only and a.only != i:
                continue
            args = [spec.name if x == "MIXED" else x for x in args]
            cmd = [SB, "crosscheck", img, "--size", a.size, "--time", f"{a.time}s", "--ramp", "1s",
                   "--repeat", a.reps, "--max-repeat", a.max_repeat, "--tolerance", a.tolerance, "--json", "-",
                   "--no-store", "--cpus-policy", a.cpus_policy] + args
            print("$ " + " ".join(cmd), file=sys.stderr)
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode not in (0, 1):
                print(p.stderr, file=sys.stderr)
                sys.exit(f"crosscheck failed on {name}")
            sys.stderr.write(p.stderr)
            d = json.loads(p.stdout)
            rows.append((i, name, d))
    finally:
        os.unlink(spec.name)
        if os.path.exists(img):
            os.unlink(img)
    print(f"| # | workload | sanbench IOPS | fio IOPS | IOPS ratio | mean µs sb / fio | ratio "
          f"| p99 µs sb / fio | ratio | Little sb / fio | within {a.tolerance} % |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for i, name, d in rows:
        m = d["medians"]
        def ratio(k):
            r = m[k]["ratio"]
            return f"**{r:.3f}x**" if m[k]["ok"] else f"{r:.3f}x"
        def little(who):
            dev = m[f"littles_law_{who}"]["deviation"]
            return "n/a" if dev is None else f"{dev * 100:.1f} %"
        print(f"| {i} | {name} | {fmt_iops(m['iops']['sanbench'])} | {fmt_iops(m['iops']['fio'])} "
              f"| {ratio('iops')} | {m['mean_us']['sanbench']:.1f} / {m['mean_us']['fio']:.1f} "
              f"| {ratio('mean_us')} | {m['p99_us']['sanbench']:.1f} / {m['p99_us']['fio']:.1f} "
              f"| {ratio('p99_us')} | {little('sanbench')} / {little('fio')} "
              f"| {'yes' if d['agree'] else 'no'} |")
    # The intervals of the ratios (from two repetitions on): what the data show.
    if any("interval" in d["medians"]["iops"] for _, _, d in rows):
        print()
        print("| # | workload | repetitions (stop) | IOPS ratio [interval] shows | mean µs | p99 µs |")
        print("|---|---|---|---|---|---|")
        for i, name, d in rows:
            m = d["medians"]
            def iv(k):
                x = m[k].get("interval")
                if not x:
                    return "-"
                more = x.get("more_repetitions")
                more = f" (~{more} more reps)" if more else ""
                return (f"{x['ratio']:.3f}x [{x['ci_low']:.2f}-{x['ci_high']:.2f}] "
                        f"{x['verdict']}{more}")
            reps = f"{d.get('repetitions', '?')} ({d.get('stop', '?')})"
            print(f"| {i} | {name} | {reps} | {iv('iops')} | {iv('mean_us')} | {iv('p99_us')} |")


if __name__ == "__main__":
    main()
