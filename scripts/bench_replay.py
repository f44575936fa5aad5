#!/usr/bin/env python3
"""Replay fidelity at 100k IOPS (issue 42): a synthetic fio v3 iolog of 4 KiB random reads
and writes (70/30) one every 10 us, replayed timed by `sanbench replay` on null: and mem:,
and by fio's read_iolog (ioengine=null) on the same trace, interleaved rep by rep (sanbench
null:, sanbench mem:, fio), medians over the reps.

Per replay: the issue lag against the trace's times (p50/p99/max; goal p99 <= 50 us), the
achieved against the recorded rate (goal within 1 %), CPU per I/O, and how long the
replaying thread waited for a CPU (its run-queue wait from /proc/PID/task/TID/schedstat,
sampled while it runs: the part of the lag that is the scheduler's). fio's lag comes from
its per-I/O latency log (`write_lat_log`, `log_avg_msec=0`): each I/O's log time (ms since
the job's start, at completion, which the null engine makes at issue) minus its time in the
trace, so to +-1 ms; fio refuses write_iolog while it reads one, and logs no finer time.

`--ideal` adds the floor of this machine: a C spin loop (compiled here with cc) that issues
each arrival the moment it sees the clock pass it, at no cost per I/O; its lag is what no
replayer on this host, at this load, can beat.

Usage: scripts/bench_replay.py [--seconds 2] [--reps 3] [--sanbench PATH] [--ideal]
(builds the release binary unless given one; honours CARGO_TARGET_DIR)
"""
import argparse, json, os, random, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

TARGET_DIR = os.environ.get("CARGO_TARGET_DIR", os.path.join(benchlib.ROOT, "target"))
SB = os.path.join(TARGET_DIR, "release", "sanbench")
FIO_FILE = "/dev/shm/sb-replay-fio"

IDEAL_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
static uint64_t ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }
#define NB 1000001
static uint64_t h[NB];
int main(int argc, char **argv) {
    double secs = atof(argv[1]); uint64_t gap = atoll(argv[2]);
    uint64_t s = ns(), end = s + (uint64_t)(secs * 1e9), next = s + gap, n = 0, mx = 0;
    for (;;) {
        uint64_t t = ns(); if (t > end) break;
        while (next <= t) { uint64_t l = (t - next) / 100; h[l < NB ? l : NB - 1]++; n++; if (t - next > mx) mx = t - next; next += gap; }
    }
    double q[3] = {0.5, 0.99, 0.999}; int qi = 0; uint64_t acc = 0;
    for (int i = 0; i < NB && qi < 3; i++) { acc += h[i]; while (qi < 3 && acc >= q[qi] * n) { printf("%.1f ", i / 10.0); qi++; } }
    printf("%.1f\n", mx / 1e3);
    return 0;
}
"""


def write_trace(path, n, gap_us, seed=1):
    r = random.Random(seed)
    with open(path, "w") as f:
        f.write(f"fio version 3 iolog\n0 {FIO_FILE} add\n0 {FIO_FILE} open\n")
        for i in range(n):
            op = "read" if r.random() < 0.7 else "write"
            f.write(f"{i * gap_us} {FIO_FILE} {op} {r.randrange(262144) * 4096} 4096\n")


class RunQueueWait:
    """Samples the run-queue wait (ns) of a process' threads named `name` until it exits."""

    def __init__(self, pid, name):
        self.pid, self.name, self.first, self.last = pid, name, {}, {}
        self.t = threading.Thread(target=self.poll, daemon=True)
        self.t.start()

    def poll(self):
        while True:
            try:
                tids = os.listdir(f"/proc/{self.pid}/task")
            except OSError:
                return
            for tid in tids:
                try:
                    with open(f"/proc/{self.pid}/task/{tid}/comm") as f:
                        if not f.read().startswith(self.name):
                            continue
                    with open(f"/proc/{self.pid}/task/{tid}/schedstat") as f:
                        wait = int(f.read().split()[1])
                except OSError:
                    continue
                self.first.setdefault(tid, wait)
                self.last[tid] = wait
            time.sleep(0.01)

    def ms(self):
        self.t.join(1)
        return sum(self.last[t] - self.first[t] for t in self.last) / 1e6


def run_watched(argv, thread_name):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    w = RunQueueWait(p.pid, thread_name)
    out, err = p.communicate()
    if p.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed: {err.strip()}")
    return out, w.ms()


def sanbench(trace, target):
    out, runq = run_watched([SB, "replay", trace, target, "--qd", "64", "--json", "-", "-q"], "sb-w")
    doc = json.loads(out)
    p = doc["results"][0]["replay"]
    pc = doc["process_cpu"]
    ios = p["replayed_ops"]["read"] + p["replayed_ops"]["write"]
    late = p.get("late_ios") or {}
    return {
        "lag_p50": p["issue_lag_us"]["p50"],
        "lag_p99": p["issue_lag_us"]["p99"],
        "lag_max": p["issue_lag_us"]["max"],
        "ratio": p["rate_ratio"],
        "cpu_us": (pc["user_s"] + pc["system_s"]) * 1e6 / ios,
        "runq_ms": runq,
        "flags": ",".join(k for k in ["host_limited", "qd_limited", "overlap_limited"] if p.get(k)) or "-",
        "late": f"{late.get('host', 0)}/{late.get('qd', 0)}/{late.get('overlap', 0)}",
    }


def quantile(xs, q):
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def fio(trace, times_us, recorded):
    d = tempfile.mkdtemp(dir="/dev/shm")
    try:
        out, runq = run_watched(["fio", "--output-format=json", "--name=r", "--ioengine=null", "--size=1G",
                                 f"--filename={FIO_FILE}", f"--read_iolog={trace}",
                                 f"--write_lat_log={d}/r", "--log_avg_msec=0"], "fio")
        job = json.loads(out[out.index("{"):])["jobs"][0]
        ios = job["read"]["total_ios"] + job["write"]["total_ios"]
        runtime = job["job_runtime"] / 1000.0
        # The per-I/O log: "time_ms, latency, ddir, bs, ...", one line per I/O in issue order.
        with open(os.path.join(d, "r_lat.1.log")) as f:
            logged = [int(line.split(",", 1)[0]) for line in f if line.strip()]
        lags = sorted(max(0.0, t_ms * 1000.0 - times_us[i]) for i, t_ms in enumerate(logged[:len(times_us)]))
        achieved = (ios - 1) / runtime
        return {
            "lag_p50": quantile(lags, 0.5),
            "lag_p99": quantile(lags, 0.99),
            "lag_max": lags[-1],
            "ratio": achieved / recorded,
            "cpu_us": (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * runtime * 1e6 / ios,
            "runq_ms": runq,
            "flags": "-",
            "late": "-",
        }
    finally:
        subprocess.run(["rm", "-rf", d], check=False)


def ideal(seconds, gap_us):
    d = tempfile.mkdtemp()
    try:
        src, exe = os.path.join(d, "ideal.c"), os.path.join(d, "ideal")
        with open(src, "w") as f:
            f.write(IDEAL_C)
        subprocess.run(["cc", "-O2", "-o", exe, src], check=True)
        out, runq = run_watched([exe, str(seconds), str(gap_us * 1000)], "ideal")
        p50, p99, p999, mx = (float(x) for x in out.split())
        return {"lag_p50": p50, "lag_p99": p99, "lag_max": mx, "ratio": 1.0, "cpu_us": float("nan"),
                "runq_ms": runq, "flags": "-", "late": "-"}
    finally:
        subprocess.run(["rm", "-rf", d], check=False)


def line(name, r):
    return (f"{name:24} lag p50 {r['lag_p50']:9.1f} us p99 {r['lag_p99']:9.1f} us max {r['lag_max']:9.0f} us; "
            f"rate {r['ratio'] * 100:6.2f} %; {r['cpu_us']:5.2f} CPU-us/IO; run-queue wait {r['runq_ms']:6.0f} ms; "
            f"late host/qd/overlap {r['late']}; {r['flags']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sanbench", help="this binary instead of a release build")
    ap.add_argument("--ideal", action="store_true", help="also the floor of a bare spin loop")
    a = ap.parse_args()
    global SB
    if a.sanbench:
        SB = a.sanbench
    else:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "sanbench"], cwd=benchlib.ROOT, check=True)
    gap_us = 10
    n = int(a.seconds * 1e6 / gap_us)
    recorded = (n - 1) / ((n - 1) * gap_us / 1e6)
    times_us = [i * gap_us for i in range(n)]
    trace = "/dev/shm/sb-replay-100k.iolog"
    write_trace(trace, n, gap_us)
    cases = [("sanbench null:", lambda: sanbench(trace, "null:")),
             ("sanbench mem:1G", lambda: sanbench(trace, "mem:1G")),
             ("fio read_iolog null", lambda: fio(trace, times_us, recorded))]
    if a.ideal:
        cases.append(("ideal spin loop", lambda: ideal(a.seconds, gap_us)))
    rows = {name: [] for name, _ in cases}
    try:
        print(f"trace: {n} I/Os, one every {gap_us} us ({recorded:.0f} IOPS), {a.seconds} s")
        for rep in range(a.reps):
            for name, case in cases:
                load = os.getloadavg()[0]
                r = case()
                r["load"] = load
                rows[name].append(r)
                print(f"rep {rep} load {load:5.2f} " + line(name, r), flush=True)
        print("medians:")
        for name, rs in rows.items():
            med = {k: benchlib.median([r[k] for r in rs]) for k in
                   ["lag_p50", "lag_p99", "lag_max", "ratio", "cpu_us", "runq_ms", "load"]}
            med["flags"] = med["late"] = "-"
            print(f"  load {med['load']:5.2f} " + line(name, med))
    finally:
        for p in [trace, FIO_FILE]:
            if os.path.exists(p):
                os.remove(p)


if __name__ == "__main__":
    main()
