#!/usr/bin/env python3
"""`mem:` verified against plain, for one or more builds, interleaved (issue 43 item 3).

The same workload as scripts/bench_verify.py's first case (`mem:1G`, 4 KiB random 70/30, QD 32,
one worker, a 1 s ramp), with and without `--verify`, for every binary given. Each repetition
runs every binary's plain and verified run; the order of the binaries rotates and plain and
verified swap every repetition, so drift and other load fall on all alike. Each run's line
carries the one-minute load average before it (other builds share this 2-core VM: read the
figures of a loaded repetition as such). Medians per binary, and verified/plain of the medians
and of each repetition's pair.

Usage: scripts/bench_verify_ab.py BIN [BIN ...] [--reps 5] [--time 2] [--size 1G]
"""
import argparse, json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import median  # noqa: E402


def run(sb, args):
    out = subprocess.run([sb, "run", "--json=-", "--quiet", "--no-monitor"] + args,
                         check=True, capture_output=True, text=True).stdout
    doc = json.loads(out)
    r, pc = doc["results"][0], doc["process_cpu"]
    cpu = pc["user_s"] + pc["system_s"]
    v = r.get("verify")
    if v and (any(v["bad"].values()) or v["reads"] == 0):
        sys.exit(f"{sb}: the verified run checked {v['reads']} reads, found {v['bad']}")
    return {"iops": r["iops"], "cpu_us": cpu * 1e6 / max(r["ios"], 1)}


def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bins", nargs="+")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time", type=int, default=2)
    ap.add_argument("--size", default="1G")
    a = ap.parse_args()
    work = [f"mem:{a.size}", "--bs=4k", "--read=70", "--random=100", "--qd=32",
            f"--time={a.time}s", "--ramp=1s"]
    kinds = {"plain": [], "verify": ["--verify"]}
    res = {(b, k): [] for b in a.bins for k in kinds}
    print(f"$ BIN run {' '.join(work)} [--verify]", flush=True)
    for rep in range(a.reps):
        shift = rep % len(a.bins)
        order = a.bins[shift:] + a.bins[:shift]
        for b in order:
            ks = list(kinds) if rep % 2 == 0 else list(reversed(kinds))
            for k in ks:
                ld = load1()
                r = run(b, work + kinds[k])
                r["load"] = ld
                res[(b, k)].append(r)
                print(f"  rep {rep + 1} {b} {k:6} {r['iops']:>11,.0f} IOPS "
                      f"{r['cpu_us']:.3f} CPU-µs/IO  load {ld:.2f}", flush=True)
    print()
    for b in a.bins:
        m = {k: median([r["iops"] for r in res[(b, k)]]) for k in kinds}
        c = {k: median([r["cpu_us"] for r in res[(b, k)]]) for k in kinds}
        pairs = [v["iops"] / max(p["iops"], 1) for p, v in zip(res[(b, "plain")], res[(b, "verify")])]
        print(f"{b}: plain {m['plain']:,.0f} IOPS {c['plain']:.3f} CPU-µs/IO, verified "
              f"{m['verify']:,.0f} IOPS {c['verify']:.3f} CPU-µs/IO; verified/plain "
              f"{m['verify'] / max(m['plain'], 1):.3f}x (pairs " +
              ", ".join(f"{x:.2f}" for x in pairs) + ")")


if __name__ == "__main__":
    main()
