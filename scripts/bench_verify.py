#!/usr/bin/env python3
"""Verification at speed (issue 12): what checking every read costs, and sanbench's verifying
generator against fio's.

1. mem: (in-process RAM disk) and sanbench's own NBD server, 4 KiB random 70/30 QD 32:
   `sanbench run --verify` vs the same run without it. Goal: verified IOPS >= 0.90x.
2. The same NBD server, 4 KiB random QD 32, every read verified: sanbench `--verify` 50/50
   vs fio `--rw=randwrite --verify=crc32c --verify_backlog=32` (fio writes 32 blocks, then reads
   them back and checks them: about half its I/Os are verified reads, like sanbench's 50/50).
   Goal: sanbench >= 1.5x fio's verified IOPS; CPU-µs per I/O of each client.

Runs are interleaved (the first of each pair alternates) and repeated; medians and ratios of
medians are printed.

Usage: scripts/bench_verify.py [--reps 5] [--time 5]
"""
import argparse, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import SB, Server, build, fio_json, free_port, measured, median, sanbench_json  # noqa

W7030 = ["--bs=4k", "--read=70", "--random=100", "--qd=32"]
W5050 = ["--bs=4k", "--read=50", "--random=100", "--qd=32"]


def pair(name, runs, reps):
    """runs: {label: fn}; returns {label: [results]} with interleaved order."""
    out = {k: [] for k in runs}
    labels = list(runs)
    for rep in range(reps):
        order = labels if rep % 2 == 0 else list(reversed(labels))
        for k in order:
            out[k].append(runs[k]())
        print(f"  {name} rep {rep + 1}: " + " | ".join(
            f"{k} {out[k][-1]['iops']:>9,.0f} IOPS {out[k][-1]['client_cpu_us_per_io']:.2f} "
            f"CPU-µs/IO" for k in labels), flush=True)
    return out


def summary(name, res, base, other, goal):
    m = {k: median([r["iops"] for r in v]) for k, v in res.items()}
    cpu = {k: median([r["client_cpu_us_per_io"] for r in v]) for k, v in res.items()}
    ratio = m[other] / m[base]
    verdict = "met" if ratio >= goal else "MISSED"
    print(f"{name}: median {other} {m[other]:,.0f} IOPS ({cpu[other]:.2f} CPU-µs/IO), "
          f"{base} {m[base]:,.0f} IOPS ({cpu[base]:.2f} CPU-µs/IO); "
          f"{other}/{base} {ratio:.3f}x (goal >= {goal}x: {verdict})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time", type=int, default=5)
    a = ap.parse_args()
    build()
    t = [f"--time={a.time}s", "--ramp=1s"]
    port = free_port()
    nbd = Server([SB, "serve", "nbd", "--size=1G", f"--listen=127.0.0.1:{port}"], port)
    uri = f"nbd://127.0.0.1:{port}"
    try:
        print(f"$ {SB} run mem:1G --verify {' '.join(t + W7030)}")
        mem = pair("mem 70/30", {
            "plain": lambda: measured(None, lambda: sanbench_json(["mem:1G"] + t + W7030)),
            "verify": lambda: measured(None, lambda: sanbench_json(
                ["mem:1G", "--verify"] + t + W7030)),
        }, a.reps)
        print(f"$ {SB} run {uri} --verify {' '.join(t + W7030)}")
        srv = pair("nbd 70/30", {
            "plain": lambda: measured(nbd, lambda: sanbench_json([uri] + t + W7030)),
            "verify": lambda: measured(nbd, lambda: sanbench_json([uri, "--verify"] + t + W7030)),
        }, a.reps)
        fio = ["--name=v", "--ioengine=nbd", f"--uri={uri}", "--rw=randwrite", "--bs=4k",
               "--iodepth=32", "--size=1G", "--verify=crc32c", "--verify_backlog=32",
               "--time_based", f"--runtime={a.time}", "--ramp_time=1"]
        print("$ fio " + " ".join(fio))
        vs = pair("nbd verified", {
            "fio": lambda: measured(nbd, lambda: fio_json(fio)),
            "sanbench": lambda: measured(nbd, lambda: sanbench_json([uri, "--verify"] + t + W5050)),
        }, a.reps)
        print()
        summary("mem: verify cost", mem, "plain", "verify", 0.90)
        summary("NBD server: verify cost", srv, "plain", "verify", 0.90)
        summary("verified I/O vs fio", vs, "fio", "sanbench", 1.5)
    finally:
        nbd.stop()


if __name__ == "__main__":
    main()
