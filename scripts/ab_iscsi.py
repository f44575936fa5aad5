#!/usr/bin/env python3
"""A/B of two sanbench builds on the iSCSI data path, interleaved (A, B, B, A, ...), medians of
--reps. Three measurements per build and repetition:

  target:     iscsi-perf (libiscsi, the same client for both) against `X serve iscsi`,
              4 KiB random reads QD 32: IOPS and target CPU-µs per I/O;
  target seq: the same, 1 MiB sequential reads QD 4;
  initiator:  `X run iscsi://` against `X serve iscsi`, 4 KiB random reads QD 32: IOPS and
              initiator CPU-µs per I/O.

The LUN is --lun-size of RAM (1G by default), its first 256 MiB written before measuring: with
--lun-size 256M every read finds written data, not the store's shared block of zeros.

Usage: scripts/ab_iscsi.py A_BINARY B_BINARY [--reps 5] [--time 5] [--lun-size 1G]
Prints B/A ratios of the medians and the load average before and after.
"""
import argparse, json, sys
from benchlib import Server, free_port, median, sh
from bench_iscsi import iscsi_perf

IQN = "iqn.2026-11.io.sanbench:ram"


def run_json(binary, args):
    doc = json.loads(sh([binary, "run", "--json=-", "--quiet", "--no-monitor"] + args))
    r, pc = doc["results"][0], doc["process_cpu"]
    return r["iops"], r["ios"], pc["user_s"] + pc["system_s"]


def one(binary, secs, lun_size):
    port = free_port()
    sb = Server([binary, "serve", "iscsi", f"--size={lun_size}", f"--listen=127.0.0.1:{port}"],
                port)
    url = f"iscsi://127.0.0.1:{port}/{IQN}/0"
    try:
        run_json(binary, [url, "--bs=1M", "--read=0", "--random=0", "--qd=4", "--time=1s",
                          "--size=256M"])
        t = iscsi_perf(url, 8, secs, sb)
        q = iscsi_perf(url, 2048, secs, sb, qd=4, random=False)
        iops, ios, cpu = run_json(binary, [url, "--bs=4k", "--read=100", "--random=100",
                                           "--qd=32", f"--time={secs}s", "--size=256M"])
    finally:
        sb.stop()
    return {"tgt_iops": t["iops"], "tgt_us": t["server_cpu_us_per_io"],
            "seq_iops": q["iops"], "seq_us": q["server_cpu_us_per_io"],
            "ini_iops": iops, "ini_us": cpu * 1e6 / max(ios, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time", type=int, default=5)
    ap.add_argument("--lun-size", default="1G")
    a = ap.parse_args()
    print("load average before:", open("/proc/loadavg").read().split()[:3])
    rows = {"A": [], "B": []}
    for i in range(a.reps):
        order = ("A", "B") if i % 2 == 0 else ("B", "A")
        for k in order:
            r = one(a.a if k == "A" else a.b, a.time, a.lun_size)
            rows[k].append(r)
            print(k, {f: round(v, 2) for f, v in r.items()}, flush=True)
    print("load average after:", open("/proc/loadavg").read().split()[:3])
    for f, what in [("tgt_iops", "target IOPS (iscsi-perf)"),
                    ("tgt_us", "target CPU-µs/IO"),
                    ("seq_iops", "target 1 MiB seq QD 4 IOPS (iscsi-perf)"),
                    ("seq_us", "target 1 MiB seq QD 4 CPU-µs/IO"),
                    ("ini_iops", "initiator IOPS (sanbench run)"),
                    ("ini_us", "initiator CPU-µs/IO")]:
        ma, mb = median([r[f] for r in rows["A"]]), median([r[f] for r in rows["B"]])
        print(f"{what}: A {ma:,.2f}  B {mb:,.2f}  B/A {mb / ma:.3f}")


if __name__ == "__main__":
    sys.exit(main())
