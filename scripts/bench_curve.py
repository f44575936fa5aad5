#!/usr/bin/env python3
"""Open-loop load (issue 15): the generator's own ceiling, rate accuracy, and response-time
curves of four NBD and iSCSI servers on one workload.

1. Ceiling: `sanbench run null: --rate R` for rising R; the highest rate that is still a valid
   point (achieved within 2 %, issue lag p99 within 100 µs) is the open-loop generator's
   ceiling on this machine.
2. Rate accuracy: asked 1k, 10k, 100k IOPS on null: and mem:: achieved / asked and the issue
   lag p99.
3. Curves: `sanbench compare --curve 10,50,80,90,95,100` over sanbench's NBD server, nbdkit
   (memory plugin), sanbench's iSCSI target and tgtd (RAM-backed LUN), 4 KiB random read
   QD 16: each target's closed-loop maximum, then response time (mean, p99) at each share of
   it. The figures are printed from the comparison's results.json.

Usage: scripts/bench_curve.py [--time 3] [--repeat 1]   (root for tgtd)
"""
import argparse, json, os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import SB, Server, build, free_port, sh  # noqa: E402
from bench_iscsi import TGT_IQN, Tgtd  # noqa: E402

IQN = "iqn.2026-11.io.sanbench:ram"


def point(target, rate, secs=2):
    doc = json.loads(sh([SB, "run", target, f"--rate={rate}", "--qd=64", f"--time={secs}s",
                         "--ramp=0.5s", "--read=70", "--bs=4k", "--json=-", "--quiet",
                         "--no-monitor"]))
    r = doc["results"][0]
    return r["iops"], r["issue_lag_us"]["p99"], r["open_loop"]["valid"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--time", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    build()

    print("1. open-loop generator ceiling on null: (70/30 4 KiB, QD 64, 2 s)")
    ceiling = 0
    for rate in [100_000, 250_000, 500_000, 1_000_000, 2_000_000, 4_000_000]:
        got, lag, valid = point("null:", rate)
        print(f"   asked {rate:>9,} achieved {got:>11,.0f} lag p99 {lag:8.1f} µs "
              f"{'valid' if valid else 'INVALID'}")
        if valid:
            ceiling = rate
    print(f"   ceiling: {ceiling:,} IOPS (highest valid point)")

    print("2. rate accuracy (2 s)")
    for target in ["null:", "mem:256M"]:
        for rate in [1_000, 10_000, 100_000]:
            got, lag, valid = point(target, rate)
            print(f"   {target:<9} asked {rate:>7,} achieved/asked {got / rate:.4f} "
                  f"lag p99 {lag:7.1f} µs {'valid' if valid else 'INVALID'}")

    print("3. curves: 4 KiB random read QD 16")
    p_nbd, p_kit, p_isc, p_tgt = free_port(), free_port(), free_port(), free_port()
    servers = [
        Server([SB, "serve", "nbd", "--size=1G", f"--listen=127.0.0.1:{p_nbd}"], p_nbd),
        Server(["nbdkit", "-f", "-p", str(p_kit), "-i", "127.0.0.1", "memory", "1G"], p_kit),
        Server([SB, "serve", "iscsi", "--size=1G", f"--listen=127.0.0.1:{p_isc}"], p_isc),
    ]
    tgt = Tgtd(p_tgt, 3000 + os.getpid() % 20000)
    try:
        with tempfile.TemporaryDirectory() as d:
            suite = os.path.join(d, "curve.toml")
            with open(suite, "w") as f:
                f.write(f'name = "curve"\ntime = "{a.time}s"\nramp = "1s"\n'
                        '[[workload]]\nid = "rr4k"\ntitle = "4 KiB random read, QD 16"\nqd = 16\n'
                        '[[workload.segment]]\nbs = "4k"\nread = 100\n')
            out = os.path.join(d, "out")
            cmd = [SB, "compare", "--suite", suite, "--no-store", "--quiet", "--out", out,
                   "--curve", "10,50,80,90,95,100", "--repeat", str(a.repeat),
                   f"sanbench-nbd=nbd://127.0.0.1:{p_nbd}", f"nbdkit=nbd://127.0.0.1:{p_kit}",
                   f"sanbench-iscsi=iscsi://127.0.0.1:{p_isc}/{IQN}/0",
                   f"tgtd=iscsi://127.0.0.1:{p_tgt}/{TGT_IQN}/1",
                   "--precondition", "fill"]
            print("   $ " + " ".join(cmd))
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            doc = json.load(open(os.path.join(out, "results.json")))
            for t in doc["targets"]:
                name = t["name"]
                cells = [c for c in doc["cells"] if c["target"] == name]
                closed = [c for c in cells if c.get("load_pct") is None]
                top = sum(c["result"]["iops"] for c in closed) / max(len(closed), 1)
                print(f"   {name}: closed-loop maximum {top:,.0f} IOPS, mean "
                      f"{closed[0]['result']['latency_us']['mean']:.1f} µs")
                for c in sorted((c for c in cells if c.get("load_pct") is not None),
                                key=lambda c: (c["load_pct"], c["repeat"])):
                    r = c["result"]
                    o = r["open_loop"]
                    print(f"     {c['load_pct']:>5.0f} %: asked {o['asked_iops']:>9,.0f} achieved "
                          f"{r['iops']:>9,.0f} response mean {r['latency_us']['mean']:8.1f} µs "
                          f"p99 {r['latency_us']['p99']:9.1f} µs service p99 "
                          f"{r['service_us']['p99']:8.1f} µs {'' if o['valid'] else 'INVALID'}")
    finally:
        for s in servers:
            s.stop()
        tgt.stop()


if __name__ == "__main__":
    main()
