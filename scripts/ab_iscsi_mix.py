#!/usr/bin/env python3
"""A/B of two sanbench builds on a mixed iSCSI workload: `X run iscsi://` against `X serve
iscsi` (256 MiB RAM, written first), 4 KiB random 70 % reads QD 32, interleaved (A, B, B, A,
...), medians of --reps: IOPS and target CPU-µs per I/O. It measures what a target does when
reads and writes share a batch (ab_iscsi.py measures reads only).

Usage: scripts/ab_iscsi_mix.py A_BINARY B_BINARY [--reps 5] [--time 5] [--read 70]
"""
import argparse, json, sys
from benchlib import Server, free_port, median, sh

IQN = "iqn.2026-11.io.sanbench:ram"


def one(binary, secs, read):
    port = free_port()
    s = Server([binary, "serve", "iscsi", "--size=256M", f"--listen=127.0.0.1:{port}"], port)
    url = f"iscsi://127.0.0.1:{port}/{IQN}/0"
    run = [binary, "run", "--json=-", "--quiet", "--no-monitor", url, "--size=256M"]
    try:
        sh(run + ["--bs=1M", "--read=0", "--random=0", "--qd=4", "--time=1s"])
        c0 = s.cpu()
        doc = json.loads(sh(run + ["--bs=4k", f"--read={read}", "--random=100", "--qd=32",
                                   f"--time={secs}s"]))
        r = doc["results"][0]
        return {"iops": r["iops"], "tgt_us": (s.cpu() - c0) * 1e6 / max(r["ios"], 1)}
    finally:
        s.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time", type=int, default=5)
    ap.add_argument("--read", type=int, default=70)
    a = ap.parse_args()
    print("load average before:", open("/proc/loadavg").read().split()[:3])
    rows = {"A": [], "B": []}
    for i in range(a.reps):
        for k in (("A", "B") if i % 2 == 0 else ("B", "A")):
            r = one(a.a if k == "A" else a.b, a.time, a.read)
            rows[k].append(r)
            print(k, {f: round(v, 2) for f, v in r.items()}, flush=True)
    print("load average after:", open("/proc/loadavg").read().split()[:3])
    for f, what in [("iops", f"IOPS ({a.read} % reads)"), ("tgt_us", "target CPU-µs/IO")]:
        ma, mb = median([r[f] for r in rows["A"]]), median([r[f] for r in rows["B"]])
        print(f"{what}: A {ma:,.2f}  B {mb:,.2f}  B/A {mb / ma:.3f}")


if __name__ == "__main__":
    sys.exit(main())
