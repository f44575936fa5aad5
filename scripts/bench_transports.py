#!/usr/bin/env python3
"""NBD vs iSCSI on sanbench's own servers: one store behind both, preconditioned, so the ratio is
the transports' alone.

Starts `sanbench serve nbd` and `sanbench serve iscsi` (RAM, same size), fills each once with
`--precondition fill`, then runs each workload on each with `sanbench run` (default
--precondition auto, which finds the span written where the server reports it and otherwise
fills it again, shown per run in brackets), interleaved with the first target rotated,
and prints per-repetition figures, medians and the NBD/iSCSI ratio of medians, with each
server's CPU-µs per I/O.

Usage: scripts/bench_transports.py [--reps 5] [--time 5] [--size 1G]
"""
import argparse, json, os, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import SB, Server, build, free_port, sh  # noqa: E402

IQN = "iqn.2026-11.io.sanbench:ram"
WORKLOADS = {
    "database-4k (67/33 random, QD 16)": ["--bs=4k", "--read=67", "--random=100", "--qd=16"],
    "rand-read-4k (QD 32)": ["--bs=4k", "--read=100", "--random=100", "--qd=32"],
    "seq-write-1m (QD 4)": ["--bs=1M", "--read=0", "--random=0", "--qd=4"],
}


def run(uri, args, secs):
    doc = json.loads(sh([SB, "run", uri, f"--time={secs}s", "--ramp=1s", "--json=-", "--quiet",
                         "--no-monitor"] + args))
    r = doc["results"][0]
    return {"iops": r["iops"], "lat_us": r["latency_us"]["mean"], "ios": r["ios"],
            "state": r["precondition"]["state"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time", type=int, default=5)
    ap.add_argument("--size", default="1G")
    a = ap.parse_args()
    build()
    p_nbd, p_iscsi = free_port(), free_port()
    nbd = Server([SB, "serve", "nbd", f"--size={a.size}", f"--listen=127.0.0.1:{p_nbd}"], p_nbd)
    iscsi = Server([SB, "serve", "iscsi", f"--size={a.size}", f"--listen=127.0.0.1:{p_iscsi}"],
                   p_iscsi)
    targets = {
        "nbd": (f"nbd://127.0.0.1:{p_nbd}", nbd),
        "iscsi": (f"iscsi://127.0.0.1:{p_iscsi}/{IQN}/0", iscsi),
    }
    try:
        # Fill each server once; measured runs then find the span written (state
        # reported_written) and write nothing outside their window, so the server CPU below is
        # the window's.
        for t, (uri, _) in targets.items():
            r = run(uri, ["--precondition=fill", "--bs=4k"], 1)
            print(f"{t}: filled before the runs [{r['state']}]")
        for name, args in WORKLOADS.items():
            print(name)
            reps = {t: [] for t in targets}
            for rep in range(a.reps):
                order = list(targets) if rep % 2 == 0 else list(reversed(targets))
                for t in order:
                    uri, srv = targets[t]
                    c0 = srv.cpu()
                    r = run(uri, args, a.time)
                    r["srv_us"] = (srv.cpu() - c0) * 1e6 / max(r["ios"], 1)
                    reps[t].append(r)
                    if rep == 0 and name == next(iter(WORKLOADS)):
                        print(f"   $ {SB} run {uri} --time={a.time}s --ramp=1s " + " ".join(args))
                print(f"  rep {rep + 1}: " + " | ".join(
                    f"{t} {reps[t][-1]['iops']:>9,.0f} IOPS {reps[t][-1]['lat_us']:8.1f} µs "
                    f"srv {reps[t][-1]['srv_us']:.2f} µs/IO [{reps[t][-1]['state']}]"
                    for t in targets))
            med = {t: statistics.median(x["iops"] for x in reps[t]) for t in targets}
            srv = {t: statistics.median(x["srv_us"] for x in reps[t]) for t in targets}
            print(f"  median: nbd {med['nbd']:,.0f} IOPS, iscsi {med['iscsi']:,.0f} IOPS; "
                  f"NBD/iSCSI {med['nbd'] / med['iscsi']:.3f}x; server CPU-µs/IO "
                  f"nbd {srv['nbd']:.2f} iscsi {srv['iscsi']:.2f}")
    finally:
        nbd.stop()
        iscsi.stop()


if __name__ == "__main__":
    sys.exit(main())
