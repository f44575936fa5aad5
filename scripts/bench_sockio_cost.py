#!/usr/bin/env python3
"""Where the initiators' socket layer spends its CPU, in figures that do not depend on the
machine's load (issue 43): the poll loop against io_uring (`?sockio=uring`), one loopback path
(and with --paths 1,2 two, multipath over both ports of the server, the same QD in total),
4 KiB random reads at QD 32, one worker, against one `sanbench serve KIND` (nbd, iscsi, nvme)
listening on two loopback ports.

Per layer:
  instr/IO    user-space instructions per I/O of the client (valgrind --tool=callgrind, the
              difference of a short and a long run over the difference of their I/Os, so
              start-up and exit cancel out, as scripts/bench_ab_instructions.py does)
  sys/IO      system calls per I/O (perf stat -e raw_syscalls:sys_enter on the client)
  cs/IO       context switches per I/O (perf stat -e context-switches)
  cpu-µs/IO   task-clock of the client per I/O (this one does depend on the load: read it
              beside the load printed)
Layers: poll, uring (with two paths: the stream's paths on one shared ring, the default) and
uring-own (io_uring with each path on a ring of its own: SANBENCH_SOCKRING_SHARED=0, as before
rings were shared).
With --profile, the kernel and user symbols taking the client's CPU (perf record -e cpu-clock,
a software clock: this VM has no PMU), each layer's top entries.
With --setups defer,coop,plain: an interleaved A/B of CPU per I/O (task-clock), the poll loop
against io_uring rings set up each way (SANBENCH_SOCKRING_SETUP), --reps short runs each,
medians and ratios to poll (load-dependent: the order alternates and the load is printed).

Usage: scripts/bench_sockio_cost.py [--time 4] [--short 1] [--long 3] [--kinds nbd,iscsi,nvme]
                                   [--layers poll,uring] [--paths 1,2] [--no-callgrind]
                                   [--profile]
       scripts/bench_sockio_cost.py --setups defer,coop,plain [--reps 12] [--time 2]
SANBENCH_BIN=path selects the binary (default target/release/sanbench).
"""
import argparse, json, os, re, statistics, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import SB, Server, free_port, sh  # noqa: E402

PCT = float(os.environ.get("PROFILE_PCT", "0.3"))
COMMON = ["--bs=4k", "--read=100", "--random=100", "--qd=32", "--ramp=0", "--json=-",
          "--quiet", "--no-monitor", "--precondition=none"]


def argv(uri, secs):
    return [SB, "run", uri, f"--time={secs}s"] + COMMON


def callgrind(uri, secs):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out]
                           + argv(uri, secs), capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"exit {p.returncode}\n{p.stderr[-2000:]}")
        ios = json.loads(p.stdout)["results"][0]["ios"]
        m = re.search(r"^(?:summary|totals):\s+(\d+)", open(out).read(), re.M)
        return int(m.group(1)), ios


def instr_per_io(uri, short, long):
    """Marginal user instructions per I/O, and the I/Os of the short and the long run (a
    long run with hardly more I/Os than the short one makes the figure meaningless)."""
    i1, n1 = callgrind(uri, short)
    i2, n2 = callgrind(uri, long)
    return (i2 - i1) / max(1, n2 - n1), n1, n2


def counted(uri, secs):
    ev = ["raw_syscalls:sys_enter", "context-switches", "task-clock"]
    with tempfile.NamedTemporaryFile("r", suffix=".perf") as f:
        out = sh(["perf", "stat", "-x,", "-o", f.name, "-e", ",".join(ev)] + argv(uri, secs))
        vals = {}
        for line in f.read().splitlines():
            parts = line.split(",")
            if len(parts) > 2 and parts[2] in ev:
                vals[parts[2]] = float(parts[0])
    doc = json.loads(out)
    ios = doc["results"][0]["ios"]
    return {"sys": vals["raw_syscalls:sys_enter"] / ios,
            "cs": vals["context-switches"] / ios,
            "task_us": vals["task-clock"] * 1e3 / ios,  # task-clock is in ms
            "cpu_us": doc["process_cpu"]["cpu_us_per_io"],
            "iops": doc["results"][0]["iops"],
            "socket": socket_of(doc["results"][0])}


def socket_of(r):
    """The layer that ran, and with several paths whether their rings were shared."""
    layer = r["info"]["params"].get("socket")
    rings = {q.get("multipath.socket_ring") for q in r.get("queues", [])} - {None}
    return layer + (f" {'/'.join(sorted(rings))} ring" if rings else "")


def with_layer(layer):
    """The sockio= value of a layer name, with the environment it needs set."""
    if layer == "uring-own":
        os.environ["SANBENCH_SOCKRING_SHARED"] = "0"
        return "uring"
    os.environ.pop("SANBENCH_SOCKRING_SHARED", None)
    return layer


def uri_of(kind, ports):
    """The URI of `sanbench serve KIND` (default IQN/NQN) over the ports given (two: multipath)."""
    hosts = ",".join(f"127.0.0.1:{p}" for p in ports)
    return {"nbd": f"nbd://{hosts}",
            "iscsi": f"iscsi://{hosts}/iqn.2026-11.io.sanbench:ram/0",
            "nvme": f"nvme+tcp://{hosts}/nqn.2026-11.io.sanbench:ram"}[kind]


def profile(uri, secs, top):
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "perf.data")
        sh(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4999", "-o", data]
           + argv(uri, secs))
        rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children",
                              "--sort", "dso,sym", "--percent-limit", str(PCT)],
                             capture_output=True, text=True).stdout
        comm = subprocess.run(["perf", "report", "-i", data, "--stdio", "--sort", "comm"],
                              capture_output=True, text=True).stdout
    rows = [x for x in rep.splitlines() if x.strip() and not x.startswith("#")][:top]
    comms = [x.strip() for x in comm.splitlines() if x.strip() and not x.startswith("#")]
    return rows, comms


def setups(base, names, reps, secs):
    variants = [("poll", "poll", None)] + [(n, "uring", n) for n in names]
    res = {v[0]: [] for v in variants}
    for r in range(reps):
        for label, layer, setup in (variants if r % 2 == 0 else variants[::-1]):
            if setup:
                os.environ["SANBENCH_SOCKRING_SETUP"] = setup
            try:
                res[label].append(counted(f"{base}?sockio={layer}", secs))
            finally:
                os.environ.pop("SANBENCH_SOCKRING_SETUP", None)
        print(f"  rep {r + 1}: " + " | ".join(f"{k} {v[-1]['task_us']:.3f}"
                                             for k, v in res.items()) + "  (task-µs/IO)",
              flush=True)
    poll = statistics.median(x["task_us"] for x in res["poll"])
    for k, v in res.items():
        m = statistics.median(x["task_us"] for x in v)
        print(f"  {k:<6} median task-µs/IO {m:.3f} ({m / poll:.3f}x poll)  "
              f"sys/IO {statistics.median(x['sys'] for x in v):.4f}  "
              f"cs/IO {statistics.median(x['cs'] for x in v):.4f}  "
              f"IOPS {statistics.median(x['iops'] for x in v) / 1e3:.1f}k", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--time", type=int, default=4)
    ap.add_argument("--short", type=float, default=1)
    ap.add_argument("--long", type=float, default=3)
    ap.add_argument("--kinds", default="nbd")
    ap.add_argument("--layers", default="poll,uring")
    ap.add_argument("--paths", default="1")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--setups", help="interleaved A/B of ring setups against poll")
    a = ap.parse_args()
    print(f"binary {SB}; load: {open('/proc/loadavg').read().strip()}; {os.cpu_count()} CPUs; "
          f"{os.uname().release}")
    for k in a.kinds.split(","):
        ports = [free_port(), free_port()]
        srv = Server([SB, "serve", k, "--size=1G"] + [f"--listen=127.0.0.1:{p}" for p in ports],
                     ports[0])
        try:
            if a.setups:
                setups(uri_of(k, ports[:1]), a.setups.split(","), a.reps, a.time)
                continue
            for n, layer in ((int(n), layer) for n in a.paths.split(",")
                             for layer in a.layers.split(",")):
                uri = f"{uri_of(k, ports[:n])}?sockio={with_layer(layer)}"
                line = f" {k} {n} path{'s' if n > 1 else ''} {layer:<9}"
                if not a.no_callgrind:
                    per, n1, n2 = instr_per_io(uri, a.short, a.long)
                    line += f" instr/IO {per:8.0f} (I/Os {n1}, {n2})"
                for _ in range(a.reps):
                    c = counted(uri, a.time)
                    line += (f" | sys/IO {c['sys']:.4f} cs/IO {c['cs']:.4f} "
                             f"task-µs/IO {c['task_us']:.3f} cpu-µs/IO {c['cpu_us']:.3f} "
                             f"IOPS {c['iops'] / 1e3:.1f}k ({c['socket']})")
                print(line, flush=True)
                if a.profile:
                    rows, comms = profile(uri, a.time, a.top)
                    print("   threads: " + "; ".join(comms[:6]))
                    print("\n".join("   " + r for r in rows))
        finally:
            srv.stop()
    print(f"load after: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    sys.exit(main())
