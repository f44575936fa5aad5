#!/usr/bin/env python3
"""Findings that hold up (issue 22): the design's error rates, the rounds real targets need, and
whether the demo's findings reproduce.

1. Simulation: `findings_sim` (crates/stats/examples) runs 1,000 seeded demo-shaped comparisons
   per scenario through the real plan: the A/A false-finding rate (goal <= 5 %), the power for a
   true 1.1x, 1.2x, 1.3x (goal >= 90 % at the default --max-repeat), 1.5x, 1.8x, carry-over
   alone, and what peeking at a fixed-sample t test does beside the plan's spending; then the
   table of issue 40's noise (carry-over with the truth at the margin, 3x unequal sd, AR(1)
   0.3/0.5, t(3) and log-normal tails, 22-29 I/Os a cell counted alike every round) at a
   family error of 20 % and 4 %, and the shapes a budget stops (T = 4, 5, 7 mid-square; the
   demo's T = 5 with two references at 10 rounds): A/A at 20 % and 5 %, a true 1.3x's power
   for the questions and for the findings' averages (400 comparisons each: --noisy-sims).
   Issue 40's third pass (a pair's lag-1 estimate pooled over its workloads with honest degrees
   of freedom; each pair's variances moderated across its workloads, Smyth 2004): the figures
   before and after, per scenario, are in docs/BENCHMARKS.md ("Issue 40, third pass").
2. Rounds on real targets: `compare --repeat auto` over the quick suite on sanbench's own NBD,
   iSCSI and NVMe/TCP servers (one store each, loopback): rounds run, why it stopped, and per
   primary question its verdict and the rounds it used or still needs.
3. Reproducibility: `sanbench demo` N times back to back (default 3): per primary question the
   ratio, interval and verdict of each run; whether any decided question reversed between runs
   and whether every finding of one run is a finding or inconclusive in the others.

Usage: scripts/bench_findings.py [--sims 1000] [--noisy-sims 400] [--demos 3] [--skip-real]
       [--skip-demo]
"""
import argparse, json, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, SB, build  # noqa: E402


def simulation(n, noisy):
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "sanbench-stats", "--example",
                    "findings_sim"], cwd=ROOT, check=True)
    exe = os.path.join(ROOT, "target", "release", "examples", "findings_sim")
    print(f"## 1. Simulation ({n} comparisons per scenario)\n")
    for maxr in (30, 20):
        print(f"--max-repeat {maxr}:")
        print(subprocess.run([exe, str(n), str(maxr), str(noisy)], check=True, capture_output=True,
                             text=True).stdout)


def questions(doc):
    return [q for q in doc.get("questions", []) if q["family"] == "primary"]


def fmt_q(q):
    lo, hi = q.get("ci_low"), q.get("ci_high")
    iv = f"[{lo:.2f}-{hi:.2f}]" if lo is not None else "[unbounded]"
    more = f", ~{q['more_rounds']} more" if q.get("more_rounds") else ""
    return f"{q['ratio']:.2f}x {iv} {q['verdict']}{more}"


def real_targets(maxr, budget):
    print("## 2. --repeat auto on sanbench's NBD, iSCSI and NVMe/TCP servers (quick suite)\n")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out")
        cmd = [SB, "demo", "--out", out, "--no-store", "--quiet", "--max-repeat", str(maxr),
               "--budget", budget]
        print("$ " + " ".join(cmd[1:]))
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        doc = json.load(open(os.path.join(out, "results.json")))
    d = doc["design"]
    print(f"rounds {d['rounds']}, stopped: {d['stop']}")
    for q in questions(doc):
        print(f"  {q['workload']:<14} {q['a']:>22} / {q['b']:<22} {fmt_q(q)}")
    print()


def demos(n, budget):
    print(f"## 3. sanbench demo x{n}, back to back (budget {budget} each)\n")
    runs = []
    for i in range(n):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out")
            p = subprocess.run([SB, "demo", "--out", out, "--no-store", "--quiet",
                                "--budget", budget], check=True, capture_output=True, text=True)
            doc = json.load(open(os.path.join(out, "results.json")))
            runs.append(doc)
            print(f"run {i + 1}: {doc['design']['rounds']} rounds, stopped {doc['design']['stop']}")
            for line in p.stdout.splitlines():
                if line.startswith("  - "):
                    print("   " + line)
    keys = [(q["workload"], q["a"], q["b"]) for q in questions(runs[0])]
    print("\nper question (ratio a/b [interval] verdict), one column per run:")
    reversed_, unreproduced = [], []
    for k in keys:
        row = []
        verdicts = []
        for doc in runs:
            q = next((q for q in questions(doc) if (q["workload"], q["a"], q["b"]) == k), None)
            row.append(fmt_q(q) if q else "-")
            verdicts.append(q["verdict"] if q else None)
        print(f"  {k[0]:<14} {k[1]:>20} / {k[2]:<20} " + " | ".join(row))
        decided = {v for v in verdicts if v in ("better", "worse")}
        if len(decided) > 1:
            reversed_.append(k)
        for v in verdicts:
            if v in ("better", "worse", "equivalent"):
                others = [w for w in verdicts if w not in (v, "inconclusive")]
                if others:
                    unreproduced.append(k)
                    break
    print(f"\nreversed between runs: {len(reversed_)} {reversed_ if reversed_ else ''}")
    print(f"a verdict of one run contradicted (not the same, not inconclusive) in another: "
          f"{len(unreproduced)} {unreproduced if unreproduced else ''}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--noisy-sims", type=int, default=400)
    ap.add_argument("--demos", type=int, default=3)
    ap.add_argument("--budget", default="4m")
    ap.add_argument("--skip-real", action="store_true")
    ap.add_argument("--skip-demo", action="store_true")
    a = ap.parse_args()
    build()
    simulation(a.sims, a.noisy_sims)
    if not a.skip_real:
        real_targets(30, "15m")
    if not a.skip_demo:
        demos(a.demos, a.budget)


if __name__ == "__main__":
    main()
