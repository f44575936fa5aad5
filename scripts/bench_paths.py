#!/usr/bin/env python3
"""Multipath: what a second path gives and what the path selector costs.

(a) Two shaped paths vs one (needs root: `sanbench lab`). `lab up --link a=RATE --link b=RATE
    --paths a,b` puts one target namespace behind two htb-shaped links; each transport's
    target there is run over one path (KIND@a) and over both (KIND@a+b, a multipath URI,
    the default service-time selector), 1 MiB sequential reads, interleaved (the first
    alternates), --reps each. Prints MB/s per repetition, the medians and two/one. Goal:
    >= 1.9x with two 1 Gbit/s paths.
(c) Failover on the lab (same two links): each transport's two-path target, 4 KiB random reads
    at QD 32 with `?path_timeout=PT` (default 1s) and `--fault T/3:b:down,2T/3:b:up` (link b
    blackholed: a pulled cable, nothing closed), --reps runs each. Prints the result's
    disruption per run: when the path was declared failed (detected_ms) and when its first
    reissued I/O completed on the other path (failover_ms, both from the fault), the longest
    span in which nothing completed (path a keeps completing its own I/Os meanwhile, so it is
    short), the worst latency, and the medians. Goal: link down -> first completion on the
    other path (failover_ms) <= path_timeout + 50 ms.
(b) The multipath layer's CPU cost on loopback: one `sanbench serve KIND --listen 127.0.0.1:P1
    --listen 127.0.0.1:P2`, 4 KiB random reads, one worker, four ways, interleaved:
      plain       one portal, a plain URI (no multipath layer), QD 32;
      layer       the same portal through the multipath layer (`?policy=service-time` on
                  the single-portal URI forces it), QD 32: the layer's own cost;
      two paths   both portals (a multipath URI, the default service-time selector), QD 32;
      plain QD16  one portal, plain, QD 16: what each of the two paths carries, so the cost
                  of the smaller batches a second connection brings, without the layer;
      two paths rr      both portals with `?policy=round-robin`, QD 32: the same two
                  connections under the selector that does no arithmetic and splits every
                  submitted batch between the paths;
      two paths QD64    both portals (service-time), QD 64: each path carries 32, the depth
                  of the one-path run, so the per-connection batches are the same size.
    The figure is sanbench's own CPU per I/O (`process_cpu.cpu_us_per_io` of the result:
    getrusage of the sanbench process over the window, host monitor off), medians and the
    relative differences. Goal (issue 23): two paths <= 2 % more than one.

Each run is `sanbench run` with the flags printed once per section. Uses target/release/sanbench
(built if missing). The lab lives under a temporary state file and is taken down at the end;
note that `lab up` removes any other lab on the host first (the `sblab-` prefix).

Usage: scripts/bench_paths.py [--reps 5] [--time 5] [--rate 1gbit] [--kinds iscsi,nvme,nbd]
                              [--path-timeout 1] [--skip-lab] [--skip-bandwidth] [--skip-failover]
                              [--skip-cpu]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import SB, Server, build, free_port, sh  # noqa: E402

IQN = "iqn.2026-11.io.sanbench:ram"
NQN = "nqn.2026-11.io.sanbench:ram"
SEQ = ["--bs=1M", "--read=100", "--random=0", "--qd=8"]
RAND = ["--bs=4k", "--read=100", "--random=100", "--qd=32"]


def run(uri, args, secs):
    doc = json.loads(sh([SB, "run", uri, f"--time={secs}s", "--ramp=1s", "--json=-", "--quiet",
                         "--no-monitor"] + args))
    r = doc["results"][0]
    mp = r.get("multipath") or {}
    return {"mb_s": r["mb_per_s"], "iops": r["iops"],
            "cpu_us": doc["process_cpu"]["cpu_us_per_io"],
            "paths": [p["bytes"] for p in mp.get("paths", [])]}


def interleave(name, uris, args, reps, secs, key, fmt):
    """Runs each URI `reps` times, the first alternating; returns the medians of `key`."""
    res = {k: [] for k in uris}
    for k, u in uris.items():
        print(f"   {k}: $ {SB} run '{u}' --time={secs}s --ramp=1s --no-monitor " + " ".join(args))
    for rep in range(reps):
        order = list(uris) if rep % 2 == 0 else list(reversed(uris))
        for k in order:
            res[k].append(run(uris[k], args, secs))
        print(f"  rep {rep + 1}: " + " | ".join(f"{k} {fmt(res[k][-1])}" for k in uris))
    return {k: statistics.median(x[key] for x in v) for k, v in res.items()}


def lab_section(a):
    state = os.path.join(tempfile.mkdtemp(prefix="sanbench-bench-paths-"), "lab.json")
    kinds = a.kinds.split(",")
    up = [SB, "lab", "up", "--link", f"a={a.rate}", "--link", f"b={a.rate}", "--paths", "a,b",
          "--targets", ",".join(kinds), "--size", "1G", "--state", state]
    print(f"(a) two {a.rate} lab paths vs one, 1 MiB sequential read\n  $ " + " ".join(up))
    sh(up)
    try:
        with open(state) as f:
            targets = {t["name"]: t["uri"] for t in json.load(f)["targets"]}
        for k in ([] if a.skip_bandwidth else kinds):
            uris = {"one path": targets[f"{k}@a"], "two paths": targets[f"{k}@a+b"]}
            print(f" {k}")
            med = interleave(k, uris, SEQ, a.reps, a.time, "mb_s",
                             lambda r: f"{r['mb_s']:7.1f} MB/s" + (
                                 f" (per path {', '.join(f'{b / 1e6:.0f}' for b in r['paths'])}"
                                 " MB)" if r["paths"] else ""))
            ratio = med["two paths"] / med["one path"]
            print(f"  median: one path {med['one path']:.1f} MB/s, two paths "
                  f"{med['two paths']:.1f} MB/s; two/one {ratio:.3f}x "
                  f"(goal >= 1.9x: {'met' if ratio >= 1.9 else 'MISSED'})")
        if not a.skip_failover:
            failover_section(a, targets, kinds, state)
    finally:
        subprocess.run([SB, "lab", "down", "--state", state], capture_output=True)


def failover_section(a, targets, kinds, state):
    secs = max(a.time, 6)
    pt = a.path_timeout
    faults = f"{secs * 1000 // 3}ms:b:down,{2 * secs * 1000 // 3}ms:b:up"
    print(f"(c) failover: link b down at 1/3 of a {secs} s window, up at 2/3; path_timeout={pt}s; "
          "4 KiB random read QD 32")
    goal = pt * 1000 + 50
    for k in kinds:
        uri = targets[f"{k}@a+b"]
        uri += ("&" if "?" in uri else "?") + f"path_timeout={pt}s"
        argv = [SB, "run", uri, f"--time={secs}s", "--ramp=1s", "--json=-", "--quiet",
                "--no-monitor", f"--fault={faults}", f"--lab={state}"] + RAND
        print(f" {k}\n  $ " + " ".join(argv[:2]) + f" '{uri}' " + " ".join(argv[3:]))
        stalls, det, fo, worst = [], [], [], []
        for rep in range(a.reps):
            doc = json.loads(sh(argv))
            d = doc["results"][0].get("disruption") or {}
            stalls.append(d.get("stall_ms", float("nan")))
            det.append(d.get("detected_ms") or float("nan"))
            fo.append(d.get("failover_ms") or float("nan"))
            worst.append(d.get("worst_latency_ms", float("nan")))
            print(f"  rep {rep + 1}: failed over {fo[-1]:7.1f} ms (detected {det[-1]:7.1f} ms), "
                  f"longest span with no completion {stalls[-1]:6.1f} ms, worst latency "
                  f"{worst[-1]:7.1f} ms, reissued {d.get('reissued', 0)}, failed "
                  f"{d.get('failed', 0)}, back within 10 % after {d.get('recovered_ms') or 0:.0f} ms")
        m = statistics.median(fo)
        print(f"  median: failed over {m:.1f} ms (max {max(fo):.1f}), detected "
              f"{statistics.median(det):.1f} ms, no-completion span {statistics.median(stalls):.1f}"
              f" ms, worst latency {statistics.median(worst):.1f} ms; goal link down -> first "
              f"completion on the other path <= {goal:.0f} ms: "
              f"{'met' if max(fo) <= goal else 'MISSED'} (every run)")


def cpu_section(a):
    print("(b) sanbench's CPU per I/O, 4 KiB random read, one worker, one serve with two "
          "loopback portals: plain URI, the multipath layer over one portal, two portals, "
          "and plain at QD 16 (each path's share)")
    qd16 = [x if x != "--qd=32" else "--qd=16" for x in RAND]
    qd64 = [x if x != "--qd=32" else "--qd=64" for x in RAND]
    for k in a.kinds.split(","):
        p1, p2 = free_port(), free_port()
        argv = [SB, "serve", k, "--size=1G", f"--listen=127.0.0.1:{p1}",
                f"--listen=127.0.0.1:{p2}"]
        print(f" {k}\n  $ " + " ".join(argv))
        srv = Server(argv, p1)
        try:
            tail = {"iscsi": f"/{IQN}/0", "nvme": f"/{NQN}/1", "nbd": ""}[k]
            scheme = {"iscsi": "iscsi", "nvme": "nvme+tcp", "nbd": "nbd"}[k]
            one = f"{scheme}://127.0.0.1:{p1}{tail}"
            uris = {"plain": one, "layer": f"{one}?policy=service-time",
                    "two paths": f"{scheme}://127.0.0.1:{p1},127.0.0.1:{p2}{tail}"}
            uris["two paths rr"] = uris["two paths"] + "?policy=round-robin"
            run(one, ["--precondition=fill", "--bs=1M"], 1)
            runs = [(key, u, RAND) for key, u in uris.items()] + [
                ("plain QD16", one, qd16), ("two paths QD64", uris["two paths"], qd64)]
            res = {key: [] for key, _, _ in runs}
            for key, u, args in runs:
                print(f"   {key}: $ {SB} run '{u}' --time={a.time}s --ramp=1s --no-monitor "
                      + " ".join(args))
            for rep in range(a.reps):
                for key, u, args in (runs if rep % 2 == 0 else runs[::-1]):
                    res[key].append(run(u, args, a.time))
                print(f"  rep {rep + 1}: " + " | ".join(
                    f"{key} {r[-1]['iops']:9,.0f} IOPS {r[-1]['cpu_us']:.3f}"
                    for key, r in res.items()) + " CPU-µs/IO")
            med = {key: statistics.median(x["cpu_us"] for x in r) for key, r in res.items()}
            rel = {key: (med[key] / med["plain"] - 1) * 100 for key in med}
            print("  median CPU-µs per I/O: " + ", ".join(
                f"{key} {v:.3f} ({rel[key]:+.1f} %)" for key, v in med.items()))
            print("  median IOPS: " + ", ".join(
                f"{key} {statistics.median(x['iops'] for x in r) / 1e3:.1f}k"
                for key, r in res.items()))
            d = rel["two paths"]
            print(f"  the layer over one portal: {rel['layer']:+.1f} %; two paths vs one: "
                  f"{d:+.1f} % (goal <= +2 %: {'met' if d <= 2 else 'MISSED'}); one "
                  f"connection at QD 16 vs 32 (no layer): {rel['plain QD16']:+.1f} %; two "
                  f"paths round-robin: {rel['two paths rr']:+.1f} %; two paths at 32 each "
                  f"(QD 64): {rel['two paths QD64']:+.1f} %")
        finally:
            srv.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time", type=int, default=5)
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--kinds", default="iscsi,nvme,nbd")
    ap.add_argument("--skip-lab", action="store_true")
    ap.add_argument("--skip-cpu", action="store_true")
    ap.add_argument("--skip-failover", action="store_true")
    ap.add_argument("--skip-bandwidth", action="store_true")
    ap.add_argument("--path-timeout", type=float, default=1.0)
    a = ap.parse_args()
    if not os.path.exists(SB):
        build()
    print(f"load: {open('/proc/loadavg').read().strip()}; {os.cpu_count()} CPUs; "
          f"{os.uname().release}")
    if not a.skip_lab:
        if os.geteuid() != 0:
            print("(a) skipped: the lab needs root")
        else:
            lab_section(a)
    if not a.skip_cpu:
        cpu_section(a)
    print(f"load after: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    sys.exit(main())
