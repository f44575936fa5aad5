#!/usr/bin/env python3
"""Two sanbench builds on null: with a 70/30 read/write mix (ABBA order), and build B with a
70/20/10 read/write/trim mix: did trims in the generator cost workloads without them?
Prints medians of I/Os per CPU-second (trims and write-zeroes included in B's mix).

Usage: scripts/ab_trim_mix.py A_BINARY B_BINARY [REPS]
"""
import json, subprocess, statistics, sys


def run(sb, extra):
    out = subprocess.run([sb, "run", "--json=-", "--quiet", "--no-monitor", "null:", "--bs=4k",
                          "--random=100", "--qd=32", "--time=3s", "--ramp=1s"] + extra,
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    r, pc = d["results"][0], d["process_cpu"]
    cpu = pc["user_s"] + pc["system_s"]
    apart = sum((r.get(k) or {}).get("ios", 0) for k in ("trim", "write_zeroes"))
    return (r["ios"] + apart) / cpu


def main():
    a_bin, b_bin = sys.argv[1], sys.argv[2]
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    res = {"a": [], "b": [], "t": []}
    for rep in range(reps):
        for s in (["a", "b"] if rep % 2 == 0 else ["b", "a"]):
            res[s].append(run(a_bin if s == "a" else b_bin, ["--read=70"]))
        res["t"].append(run(b_bin, ["--read=70", "--trim=10"]))
    a, b, t = (statistics.median(res[k]) for k in "abt")
    print(f"null 70/30 I/Os per CPU-s: A {a:.4g} B {b:.4g} B/A {b / a:.3f}; "
          f"B 70/20/10 with trims {t:.4g} ({t / b:.3f} of B's 70/30)")


if __name__ == "__main__":
    main()
