#!/usr/bin/env python3
"""Interleaved A/B of sanbench binaries (e.g. before and after a change) on loopback: each
LABEL=BINARY:TRANSPORT[:URI-QUERY] starts BINARY's own `serve nvme|iscsi` (1 GiB RAM, filled
once), then every repetition runs `BINARY run` against its server once per configuration, the
order reversed every other repetition. Prints per run and as medians (ratios to the first
configuration): IOPS, MB/s, CPU-µs per I/O of the client (`run`'s process_cpu) and of the
server (/proc/PID/stat), each split into user and system time.

Usage: scripts/ab_nvme.py [--reps 5] [--time 5] [--bs 4k] [--qd 32] [--random 100]
           before=/tmp/sb-old:nvme after=target/release/sanbench:nvme iscsi=target/release/sanbench:iscsi
"""
import json, os, subprocess, sys, time, statistics, socket, argparse
TCK = os.sysconf("SC_CLK_TCK")
ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--time", type=int, default=5)
ap.add_argument("--bs", default="4k")
ap.add_argument("--qd", default="32")
ap.add_argument("--random", default="100")
ap.add_argument("--env", default="")
ap.add_argument("cfg", nargs="+")
a = ap.parse_args()
def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def cpu(pid):
    r = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(r[11]) / TCK, int(r[12]) / TCK
cfgs = []
for c in a.cfg:
    label, rest = c.split("=", 1)
    parts = rest.split(":", 2)
    sb, t = parts[0], parts[1]
    q = parts[2] if len(parts) > 2 else ""
    p = port()
    srv = subprocess.Popen([sb, "serve", t, "--size=1G", f"--listen=127.0.0.1:{p}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    uri = (f"nvme+tcp://127.0.0.1:{p}/nqn.2026-11.io.sanbench:ram/1" if t == "nvme"
           else f"iscsi://127.0.0.1:{p}/iqn.2026-11.io.sanbench:ram/0") + q
    cfgs.append((label, sb, uri, srv))
time.sleep(0.7)
env = dict(os.environ)
if a.env:
    k, v = a.env.split("=", 1); env[k] = v
def run(sb, uri, extra):
    out = subprocess.run([sb, "run", uri, "--json=-", "--quiet", "--no-monitor"] + extra,
                         capture_output=True, text=True, check=True, env=env).stdout
    return json.loads(out)
try:
    for label, sb, uri, srv in cfgs:
        run(sb, uri, ["--precondition=fill", "--bs=1M", "--read=0", "--time=1s", "--ramp=0"])
    res = {c[0]: [] for c in cfgs}
    print("load", open("/proc/loadavg").read().split()[:3])
    for rep in range(a.reps):
        order = cfgs if rep % 2 == 0 else list(reversed(cfgs))
        for label, sb, uri, srv in order:
            s0 = cpu(srv.pid)
            d = run(sb, uri, [f"--time={a.time}s", "--ramp=1s", "--precondition=none", f"--bs={a.bs}",
                              "--read=100", f"--random={a.random}", f"--qd={a.qd}"])
            s1 = cpu(srv.pid)
            r = d["results"][0]; pc = d["process_cpu"]; ios = r["ios"]
            x = dict(ios=ios, iops=r["iops"], mbs=r["mb_per_s"], cu=pc["user_s"] * 1e6 / ios, cs=pc["system_s"] * 1e6 / ios,
                     su=(s1[0] - s0[0]) * 1e6 / ios, ss=(s1[1] - s0[1]) * 1e6 / ios)
            x["c"] = x["cu"] + x["cs"]; x["s"] = x["su"] + x["ss"]
            res[label].append(x)
            print(f"rep {rep+1} {label:8s} {ios} ios {x['iops']:9.0f} IOPS {x['mbs']:7.0f} MB/s cli {x['c']:.3f} (u {x['cu']:.3f} s {x['cs']:.3f}) srv {x['s']:.3f} (u {x['su']:.3f} s {x['ss']:.3f})", flush=True)
    print("load", open("/proc/loadavg").read().split()[:3])
    base = cfgs[0][0]
    med = {l: {k: statistics.median([x[k] for x in v]) for k in v[0]} for l, v in res.items()}
    for l, m in med.items():
        b = med[base]
        print(f"median {l:8s} {m['iops']:9.0f} IOPS ({m['iops']/b['iops']:.3f}x) {m['mbs']:7.0f} MB/s cli {m['c']:.3f} ({m['c']/b['c']:.3f}x; u {m['cu']:.3f} s {m['cs']:.3f}) srv {m['s']:.3f} ({m['s']/b['s']:.3f}x; u {m['su']:.3f} s {m['ss']:.3f})")
finally:
    for c in cfgs:
        c[3].terminate(); c[3].wait()
