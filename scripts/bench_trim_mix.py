#!/usr/bin/env python3
"""A 75:24:1 read/write/trim mix (issue 42; fio #534: impossible in one fio job) on one block
device, sanbench against fio's nearest equivalents, interleaved, in one run.

The device is a loop device over a sparse file in /dev/shm (it passes discards to the file as
punched holes), created here and detached at the end; nothing else is written.

  sanbench   one stream: --read 75 --trim 1 (the trim drawn from the non-read share), QD 32
  fio-flow   two jobs on the device: randrw rwmixread=76 at QD 31 and randtrim at QD 1, held
             to 99:1 by fio's flow control (flow=99 / flow=1, one flow_id)
  fio-rate   the same two jobs without flow control, the trim job held to a rate
             (rate_iops) of 1/99 of what the randrw job reached beside it in the run before

Per variant the median over the repetitions of: total IOPS, each op's share and p50 / p99
latency, and the CPU per I/O of the process (getrusage of the children: user + system).

Usage: scripts/bench_trim_mix.py [--reps N] [--time S] [--size 1G]
(SANBENCH_BIN: the binary; default target/release/sanbench)
"""
import argparse, json, os, resource, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import SB, median  # noqa: E402

OPS = ("read", "write", "trim")


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(argv):
    before = child_cpu()
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({out.returncode}): {out.stderr.strip()[:500]}")
    return out.stdout, child_cpu() - before


def sanbench(dev, secs):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        _, cpu = timed([SB, "run", dev, "--read", "75", "--trim", "1", "--random", "100",
                        "--bs", "4k", "--qd", "32", "--time", f"{secs}s", "--ramp", "0",
                        "--no-monitor", "--quiet", "--json", f.name])
        r = json.load(open(f.name))["results"][0]
    per = {}
    for op in OPS:
        d = r.get(op) or {}
        lat = d.get("latency_us") or {}
        per[op] = (d.get("ios", 0), d.get("iops", 0.0), lat.get("p50"), lat.get("p99"))
    return per, cpu, r["seconds"]


def fio_job(dev, secs, size, trim_rate=None, flow=False, trim=True):
    lines = ["[global]", f"filename={dev}", "ioengine=io_uring", "direct=1", "bs=4k",
             "time_based=1", f"runtime={secs}", f"size={size}", "randrepeat=0",
             "[rw]", "rw=randrw", "rwmixread=76", "iodepth=31"]
    if flow:
        lines += ["flow_id=1", "flow=99"]
    if trim:
        lines += ["[trim]", "rw=randtrim", "iodepth=1"]
        if flow:
            lines += ["flow_id=1", "flow=1"]
        if trim_rate:
            lines += [f"rate_iops={max(1, int(trim_rate))}"]
    return "\n".join(lines) + "\n"


def fio(dev, secs, size, **kw):
    with tempfile.NamedTemporaryFile("w", suffix=".fio", delete=False) as f:
        f.write(fio_job(dev, secs, size, **kw))
    try:
        out, cpu = timed(["fio", "--output-format=json", f.name])
    finally:
        os.unlink(f.name)
    jobs = json.loads(out[out.index("{"):])["jobs"]
    per = {}
    for op in OPS:
        ios = sum(j[op]["total_ios"] for j in jobs)
        iops = sum(j[op]["iops"] for j in jobs)
        pcts = [j[op]["clat_ns"].get("percentile", {}) for j in jobs if j[op]["total_ios"]]
        p50 = pcts[0].get("50.000000", 0) / 1000 if pcts else None
        p99 = pcts[0].get("99.000000", 0) / 1000 if pcts else None
        per[op] = (ios, iops, p50, p99)
    return per, cpu, secs


def summary(per, cpu):
    ios = sum(v[0] for v in per.values())
    return {
        "iops": sum(v[1] for v in per.values()),
        "cpu_us_per_io": cpu / ios * 1e6 if ios else float("nan"),
        **{f"{op}_share": per[op][0] / ios * 100 if ios else 0 for op in OPS},
        **{f"{op}_p50": per[op][2] for op in OPS},
        **{f"{op}_p99": per[op][3] for op in OPS},
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time", type=int, default=4)
    ap.add_argument("--size", default="1G")
    a = ap.parse_args()
    img = tempfile.NamedTemporaryFile(dir="/dev/shm", suffix=".img", delete=False).name
    subprocess.run(["truncate", "-s", a.size, img], check=True)
    dev = subprocess.run(["losetup", "-f", "--show", img], capture_output=True, text=True,
                         check=True).stdout.strip()
    try:
        # Written once, so reads and trims meet data (a loop device over holes reads zeros).
        subprocess.run(["fio", "--name=fill", f"--filename={dev}", "--rw=write", "--bs=1M",
                        "--direct=1", "--ioengine=io_uring", "--iodepth=8", f"--size={a.size}"],
                       capture_output=True, check=True)
        cal, _, secs = fio(dev, a.time, a.size, trim=False)
        rw_rate = sum(v[1] for v in cal.values())
        print(f"device {dev} over {img} ({a.size}); load average {os.getloadavg()[0]:.1f}; "
              f"calibration: randrw alone {rw_rate:,.0f} IOPS -> trim rate_iops "
              f"{rw_rate / 99:,.0f}")
        # The trims slow the reads and writes beside them, so the rate that gives 1 % is found
        # by running: each fio-rate run sets the next one's trim rate from its own read/write
        # rate (two settling runs first).
        trim_rate = rw_rate / 99
        for _ in range(2):
            per, _, _ = fio(dev, a.time, a.size, trim_rate=trim_rate)
            trim_rate = (per["read"][1] + per["write"][1]) / 99
        print(f"settled trim rate_iops {trim_rate:,.0f}")
        runs = {"sanbench": [], "fio-flow": [], "fio-rate": []}
        for rep in range(a.reps):
            order = list(runs) if rep % 2 == 0 else list(reversed(runs))
            for name in order:
                if name == "sanbench":
                    per, cpu, _ = sanbench(dev, a.time)
                elif name == "fio-flow":
                    per, cpu, _ = fio(dev, a.time, a.size, flow=True)
                else:
                    per, cpu, _ = fio(dev, a.time, a.size, trim_rate=trim_rate)
                    trim_rate = (per["read"][1] + per["write"][1]) / 99
                runs[name].append(summary(per, cpu))
        print(f"load average after: {os.getloadavg()[0]:.1f}; medians of {a.reps} runs of "
              f"{a.time} s, 4 KiB random, QD 32 in all")
        print("| variant | IOPS | read / write / trim share % | p50 r / w / t µs | "
              "p99 r / w / t µs | CPU µs per I/O |")
        print("|---|---:|---|---|---|---:|")
        sb = None
        for name, rows in runs.items():
            m = {k: median([r[k] for r in rows if r[k] is not None] or [float("nan")])
                 for k in rows[0]}
            sb = sb or m
            share = " / ".join(f"{m[f'{op}_share']:.1f}" for op in OPS)
            p50 = " / ".join(f"{m[f'{op}_p50']:.0f}" for op in OPS)
            p99 = " / ".join(f"{m[f'{op}_p99']:.0f}" for op in OPS)
            print(f"| {name} | {m['iops']:,.0f} ({m['iops'] / sb['iops']:.2f}x) | {share} | "
                  f"{p50} | {p99} | {m['cpu_us_per_io']:.2f} "
                  f"({m['cpu_us_per_io'] / sb['cpu_us_per_io']:.2f}x) |")
    finally:
        subprocess.run(["losetup", "-d", dev])
        os.unlink(img)


if __name__ == "__main__":
    main()
