#!/usr/bin/env python3
"""NVMe/TCP vs iSCSI benchmark (issue 13): sanbench's initiator against sanbench's own
`serve nvme` and `serve iscsi` (the same RAM block store behind both), on loopback, in one run.

Both targets are filled once (`--precondition fill`); then every repetition runs each workload
on each transport, the first transport alternating between repetitions, and iperf3 on loopback
beside the 1 MiB runs. Figures: IOPS, MB/s, CPU-µs per I/O of the client (`sanbench run`,
its whole process) and of the server (the `sanbench serve` process, from /proc), per repetition
and as medians, with the NVMe/iSCSI ratios and 1 MiB MB/s as a share of iperf3's.

Goals: NVMe/TCP at least iSCSI's IOPS at no more CPU per I/O on either side (4 KiB random
read QD 32); 1 MiB sequential read QD 4 at least 90 % of iperf3.

Usage: scripts/bench_nvme.py [--reps 5] [--time 5] [--size 1G] [--digests]
"""
import argparse, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (SB, Server, build, free_port, iperf3_bps, measured, median,  # noqa: E402
                      sanbench_json)

NQN = "nqn.2026-11.io.sanbench:ram"
IQN = "iqn.2026-11.io.sanbench:ram"
WORKLOADS = {
    "4 KiB random read QD 32": ["--bs=4k", "--read=100", "--random=100", "--qd=32"],
    "1 MiB sequential read QD 4": ["--bs=1M", "--read=100", "--random=0", "--qd=4"],
}
FIELDS = ("iops", "bytes_per_s", "client_cpu_us_per_io", "server_cpu_us_per_io")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time", type=int, default=5)
    ap.add_argument("--size", default="1G")
    ap.add_argument("--digests", action="store_true",
                    help="also NVMe/TCP with header and data digests")
    a = ap.parse_args()
    build()
    p_nvme, p_iscsi = free_port(), free_port()
    nvme = Server([SB, "serve", "nvme", f"--size={a.size}", f"--listen=127.0.0.1:{p_nvme}"],
                  p_nvme)
    iscsi = Server([SB, "serve", "iscsi", f"--size={a.size}", f"--listen=127.0.0.1:{p_iscsi}"],
                   p_iscsi)
    targets = {
        "nvme": (f"nvme+tcp://127.0.0.1:{p_nvme}/{NQN}/1", nvme),
        "iscsi": (f"iscsi://127.0.0.1:{p_iscsi}/{IQN}/0", iscsi),
    }
    if a.digests:
        targets["nvme+digests"] = (targets["nvme"][0] + "?digest=header,data", nvme)
    print(f"sanbench NVMe/TCP vs iSCSI on loopback, {a.reps} repetitions of {a.time} s "
          f"(ramp 1 s), medians; CPU-µs per I/O: cli = sanbench run, srv = sanbench serve")
    try:
        for t in ("nvme", "iscsi"):
            sanbench_json([targets[t][0], "--precondition=fill", "--bs=1M", "--read=0",
                           "--time=1s", "--ramp=0"])
        results = {}
        for name, args in WORKLOADS.items():
            print(name)
            reps = {t: [] for t in targets}
            iperf = []
            for rep in range(a.reps):
                order = list(targets) if rep % 2 == 0 else list(reversed(targets))
                for t in order:
                    uri, srv = targets[t]
                    # Filled above: no run may write the span again inside a measurement.
                    argv = [uri, f"--time={a.time}s", "--ramp=1s", "--precondition=none"] + args
                    if rep == 0:
                        print(f"   $ sanbench run " + " ".join(argv))
                    reps[t].append(measured(srv, lambda: sanbench_json(argv)))
                if "1 MiB" in name:
                    iperf.append(iperf3_bps(a.time))
                print(f"  rep {rep + 1}: " + " | ".join(
                    f"{t} {reps[t][-1]['iops']:>9,.0f} IOPS {reps[t][-1]['bytes_per_s'] / 1e6:7,.0f} MB/s"
                    f" cli {reps[t][-1]['client_cpu_us_per_io']:.2f} srv"
                    f" {reps[t][-1]['server_cpu_us_per_io']:.2f}" for t in targets)
                    + (f" | iperf3 {iperf[-1] / 1e6:,.0f} MB/s" if iperf else ""))
            m = {t: {k: median([x[k] for x in reps[t]]) for k in FIELDS} for t in targets}
            for t in targets:
                print(f"  median {t}: {m[t]['iops']:,.0f} IOPS, {m[t]['bytes_per_s'] / 1e6:,.0f} MB/s,"
                      f" client {m[t]['client_cpu_us_per_io']:.2f} / server"
                      f" {m[t]['server_cpu_us_per_io']:.2f} CPU-µs per I/O")
            n, i = m["nvme"], m["iscsi"]
            ok = (n["iops"] >= i["iops"] and n["client_cpu_us_per_io"] <= i["client_cpu_us_per_io"]
                  and n["server_cpu_us_per_io"] <= i["server_cpu_us_per_io"])
            print(f"  NVMe/iSCSI: IOPS {n['iops'] / i['iops']:.2f}x, client CPU/IO"
                  f" {n['client_cpu_us_per_io'] / i['client_cpu_us_per_io']:.2f}x, server CPU/IO"
                  f" {n['server_cpu_us_per_io'] / i['server_cpu_us_per_io']:.2f}x"
                  f" (goal: IOPS >= 1x at CPU/IO <= 1x on both sides: {'met' if ok else 'MISSED'})")
            if iperf:
                ip = median(iperf)
                share = n["bytes_per_s"] / ip
                print(f"  iperf3 {ip / 1e6:,.0f} MB/s: NVMe/TCP {share:.0%}"
                      f" (goal >= 90 %: {'met' if share >= 0.9 else 'MISSED'}),"
                      f" iSCSI {i['bytes_per_s'] / ip:.0%}")
            results[name] = m
    finally:
        nvme.stop()
        iscsi.stop()


if __name__ == "__main__":
    sys.exit(main())
