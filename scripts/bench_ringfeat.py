#!/usr/bin/env python3
"""Whether each io_uring socket feature pays on loopback (issue 43), counted three ways that
do not depend on how loaded the machine is:

  instructions/op  the client process's user-space instructions (callgrind), marginal: the
                   difference of two runs' totals (OPS and 2*OPS ops) over OPS, so start-up
                   and exit cancel out
  syscalls/op      strace -c -f over the client: calls per op (io_uring_enter mostly)
  copied           for zero-copy sends: the share whose notification said the kernel copied
                   the data after all (IORING_NOTIF_USAGE_ZC_COPIED; on loopback, all)
  cpu us/op        the client's user+system CPU per op (getrusage, i.e. /proc/PID/stat's
                   utime+stime, which includes the kernel's send/receive work done in the
                   client's context), the median of interleaved repetitions; this one is
                   time, so on a loaded machine it is noisier than the two counts

Cases (crates/io/examples/ringfeat.rs, against its own blocking server in another process):
  write SIZE: a 16-byte header + SIZE payload per op, reply waited for (QD 1):
              msg (SENDMSG, today's NBD), msgzc (SENDMSG_ZC), zc (SEND_ZC), zcfixed (SEND_ZC
              from a registered buffer); SIZE 64 KiB, 256 KiB, 1 MiB
  read 4k32:  32 x 4 KiB replies per batch; read 1m: one 1 MiB reply:
              single (one RECV at a time, today's initiators), multi (multishot RECV into a
              provided buffer ring, copied out), multinocopy (the same, parsed in place)

Ratios are against the first mode of each case (msg, single): below 1 pays.

With --e2e, the features in the initiators (SANBENCH_SOCKRING_FEATURES, `?sockio=uring`),
against `sanbench serve KIND` per protocol, interleaved --reps runs of --time seconds each:
4 KiB random reads at QD 32 (none against multishot) and 1 MiB sequential writes at QD 4
(none against sendzc), counted with perf stat (system calls and task-clock per I/O) and the
result's process_cpu (SANBENCH_BIN selects the binary, default target/release/sanbench).

Usage: scripts/bench_ringfeat.py [--reps 5] [--no-callgrind] [--no-strace] [--only write|read]
       scripts/bench_ringfeat.py --e2e [--reps 3] [--time 3] [--kinds nbd,iscsi,nvme]
"""
import argparse, json, os, re, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BIN = os.path.join(TARGET, "release", "examples", "ringfeat")

CASES = [
    # (name, kind, size, qd, ops, modes)
    ("write 64k", "write", 64 << 10, 1, 4000, ["msg", "msgzc", "zc", "zcfixed"]),
    ("write 256k", "write", 256 << 10, 1, 1500, ["msg", "msgzc", "zc", "zcfixed"]),
    ("write 1m", "write", 1 << 20, 1, 500, ["msg", "msgzc", "zc", "zcfixed"]),
    ("read 4k qd32", "read", 4 << 10, 32, 64000, ["single", "multi", "multinocopy"]),
    ("read 1m", "read", 1 << 20, 1, 500, ["single", "multi", "multinocopy"]),
]


def client(addr, kind, mode, size, qd, ops, wrap=()):
    p = subprocess.run(list(wrap) + [BIN, "run", addr, kind, mode, str(size), str(qd), str(ops)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"ringfeat {kind} {mode} {size}: exit {p.returncode}\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def instructions(addr, kind, mode, size, qd, ops):
    tot = []
    for n in (ops, 2 * ops):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "cg.out")
            client(addr, kind, mode, size, qd, n,
                   ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out])
            with open(out) as f:
                m = re.search(r"^(?:summary|totals):\s+(\d+)", f.read(), re.M)
            tot.append(int(m.group(1)))
    return (tot[1] - tot[0]) / ops


def syscalls(addr, kind, mode, size, qd, ops):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "strace")
        client(addr, kind, mode, size, qd, ops, ["strace", "-c", "-f", "-o", out])
        calls = {}
        for line in open(out):
            f = line.split()
            if len(f) >= 5 and f[-1] not in ("syscall", "total") and f[3].isdigit():
                calls[f[-1]] = int(f[3])
    # Start-up and exit calls are a few dozen: negligible against OPS round trips.
    return sum(calls.values()) / ops, calls.get("io_uring_enter", 0) / ops


E2E = [
    # (name, block size, arguments, features compared)
    ("4k randread qd32", 4096, ["--bs=4k", "--read=100", "--random=100", "--qd=32"],
     ["none", "multishot"]),
    ("1m seqwrite qd4", 1 << 20, ["--bs=1m", "--read=0", "--random=0", "--qd=4"],
     ["none", "sendzc"]),
]


def e2e(a):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from benchlib import SB, Server, free_port, sh  # noqa: E402
    ev = ["raw_syscalls:sys_enter", "task-clock"]
    for kind in a.kinds.split(","):
        port = free_port()
        srv = Server([SB, "serve", kind, "--size=1G", f"--listen=127.0.0.1:{port}"], port)
        uri = {"nbd": f"nbd://127.0.0.1:{port}",
               "iscsi": f"iscsi://127.0.0.1:{port}/iqn.2026-11.io.sanbench:ram/0",
               "nvme": f"nvme+tcp://127.0.0.1:{port}/nqn.2026-11.io.sanbench:ram"}[kind]
        sep = "&" if "?" in uri else "?"
        try:
            for name, bs, args, feats in E2E:
                res = {f: [] for f in feats}
                for r in range(a.reps):
                    for f in (feats if r % 2 == 0 else feats[::-1]):
                        env = dict(os.environ, SANBENCH_SOCKRING_FEATURES=f)
                        with tempfile.NamedTemporaryFile("r", suffix=".perf") as pf:
                            p = subprocess.run(
                                ["perf", "stat", "-x,", "-o", pf.name, "-e", ",".join(ev),
                                 SB, "run", f"{uri}{sep}sockio=uring", f"--time={a.time}s",
                                 "--ramp=0", "--json=-", "--quiet", "--no-monitor",
                                 "--precondition=none"] + args,
                                capture_output=True, text=True, env=env)
                            if p.returncode != 0:
                                sys.exit(f"{kind} {name} {f}: exit {p.returncode}\n{p.stderr[-1500:]}")
                            vals = {}
                            for line in pf.read().splitlines():
                                parts = line.split(",")
                                if len(parts) > 2 and parts[2] in ev:
                                    vals[parts[2]] = float(parts[0])
                        doc = json.loads(p.stdout)
                        r0 = doc["results"][0]
                        ios = r0["ios"]
                        got = r0["info"]["params"].get("socket_features")
                        if got != f:
                            sys.exit(f"{kind} {name}: asked {f}, ran {got}")
                        res[f].append({"sys": vals["raw_syscalls:sys_enter"] / ios,
                                       "task_us": vals["task-clock"] * 1e3 / ios,
                                       "cpu_us": doc["process_cpu"]["cpu_us_per_io"],
                                       "mib_s": r0["iops"] * bs / (1 << 20)})
                base = feats[0]
                med = {f: {k: statistics.median(x[k] for x in v) for k in v[0]}
                       for f, v in res.items()}
                print(f"== {kind} {name} (reps {a.reps}, {a.time} s each; ratios vs {base})")
                for f in feats:
                    cells = [f"{k} {med[f][k]:.3f} ({med[f][k] / med[base][k]:.2f}x)"
                             for k in ("cpu_us", "task_us", "sys", "mib_s")]
                    print(f"  {f:10s} " + "  ".join(cells))
                print(json.dumps({"kind": kind, "case": name, "median": med}), flush=True)
        finally:
            srv.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--e2e", action="store_true")
    ap.add_argument("--time", type=int, default=3)
    ap.add_argument("--kinds", default="nbd,iscsi,nvme")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--no-strace", action="store_true")
    ap.add_argument("--only", choices=["write", "read"])
    a = ap.parse_args()
    if a.e2e:
        return e2e(a)
    if not os.path.exists(BIN):
        sys.exit(f"build it first: cargo build --release -p sanbench-io --example ringfeat ({BIN})")
    srv = subprocess.Popen([BIN, "serve"], stdout=subprocess.PIPE, text=True)
    try:
        addr = srv.stdout.readline().strip()
        for name, kind, size, qd, ops, modes in CASES:
            if a.only and kind != a.only:
                continue
            cpu = {m: [] for m in modes}
            wall = {m: [] for m in modes}
            copied = {m: 0 for m in modes}
            for _ in range(a.reps):  # interleaved: every mode once per repetition
                for m in modes:
                    r, _ = client(addr, kind, m, size, qd, ops)
                    cpu[m].append((r["user_s"] + r["sys_s"]) / ops * 1e6)
                    wall[m].append(r["wall_s"] / ops * 1e6)
                    copied[m] += r.get("zc_copied", 0)
            rows = {}
            for m in modes:
                row = {"cpu_us": statistics.median(cpu[m]), "wall_us": statistics.median(wall[m])}
                if copied[m]:
                    # Zero-copy sends whose notification said the kernel copied after all.
                    row["zc_copied"] = copied[m] / (ops * a.reps)
                if not a.no_strace:
                    row["sys_per_op"], row["enter_per_op"] = syscalls(addr, kind, m, size, qd, ops)
                if not a.no_callgrind:
                    row["instr_per_op"] = instructions(addr, kind, m, size, qd, max(ops // 10, 20))
                rows[m] = row
            base = rows[modes[0]]
            print(f"== {name} (ops {ops}, reps {a.reps}; ratios vs {modes[0]})")
            for m in modes:
                row = rows[m]
                cells = []
                for k in ("cpu_us", "wall_us", "sys_per_op", "enter_per_op", "instr_per_op"):
                    if k == "cpu_us" and "zc_copied" in row:
                        cells.append(f"copied {row['zc_copied']:.2f}")
                    if k in row:
                        ratio = row[k] / base[k] if base[k] else float("nan")
                        cells.append(f"{k} {row[k]:.3f} ({ratio:.2f}x)")
                print(f"  {m:12s} " + "  ".join(cells))
            print(json.dumps({"case": name, "rows": rows}), flush=True)
    finally:
        srv.kill()
        srv.wait()


if __name__ == "__main__":
    main()
