#!/usr/bin/env python3
"""NBD benchmark (issue 4): sanbench's NBD server and client against nbdkit and fio/libnbd, on
the same work in one run, interleaved, medians of --reps repetitions.

  1. server: sanbench serve nbd vs nbdkit memory, both driven by fio's nbd engine,
     4 KiB random read QD 32: IOPS and server CPU-µs per I/O.
  2. client: sanbench run nbd:// vs fio's nbd engine (libnbd), both against the same nbdkit
     memory server: IOPS and client CPU-µs per I/O. nbdkit needs a full core here and sets the
     rate, so 2b repeats the comparison against sanbench's server, which does not (rows 1 and 3
     measure it: fio and sanbench's client each against sanbench's server).
  3. pair: sanbench client + sanbench server vs fio + nbdkit, 4 KiB random read QD 32: IOPS.
  4. 1 MiB sequential read (QD 4) through sanbench's client and server vs iperf3 on loopback.
  5. wake-up coalescing (on by default) must not slow a shallow client: fio at QD 4 and QD 1
     against sanbench's server with and without it (--coalesce 0).

Usage: scripts/bench_nbd.py [--reps 3] [--time 5]
"""
import argparse, sys
from benchlib import (SB, Server, build, fio_json, free_port, iperf3_bps, measured, median,
                      print_reps, sanbench_json)

SPAN = "256M"


def fio_nbd(port, rw, bs, qd, secs):
    return fio_json(["--name=x", "--ioengine=nbd", f"--uri=nbd://127.0.0.1:{port}",
                     f"--rw={rw}", f"--bs={bs}", f"--iodepth={qd}", f"--size={SPAN}",
                     "--time_based", f"--runtime={secs}"])


def fill(port):
    # Both servers hold real data in the span, so reads copy memory rather than zeros.
    fio_json(["--name=fill", "--ioengine=nbd", f"--uri=nbd://127.0.0.1:{port}", "--rw=write",
              "--bs=1M", "--iodepth=4", f"--size={SPAN}"])


def sb_nbd(port, bs, random, qd, secs):
    return sanbench_json([f"nbd://127.0.0.1:{port}", f"--bs={bs}", "--read=100",
                          f"--random={random}", f"--qd={qd}", f"--time={secs}s",
                          f"--size={SPAN}"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--time", type=int, default=5)
    a = ap.parse_args()
    build()
    p_sb, p_kit, p_raw = free_port(), free_port(), free_port()
    sb = Server([SB, "serve", "nbd", "--size=1G", f"--listen=127.0.0.1:{p_sb}"], p_sb)
    raw = Server([SB, "serve", "nbd", "--size=1G", f"--listen=127.0.0.1:{p_raw}", "--coalesce=0"],
                 p_raw)
    kit = Server(["nbdkit", "-f", "-p", str(p_kit), "-i", "127.0.0.1", "memory", "1G"], p_kit)
    rows = {k: [] for k in ["srv_sb", "srv_kit", "cli_sb", "cli_fio", "pair_sb", "seq_sb", "iperf",
                            "qd4_on", "qd4_off", "qd1_on", "qd1_off"]}
    try:
        fill(p_sb)
        fill(p_kit)
        fill(p_raw)
        for _ in range(a.reps):
            rows["srv_sb"].append(measured(sb, lambda: fio_nbd(p_sb, "randread", "4k", 32, a.time)))
            rows["srv_kit"].append(measured(kit, lambda: fio_nbd(p_kit, "randread", "4k", 32, a.time)))
            rows["cli_sb"].append(measured(kit, lambda: sb_nbd(p_kit, "4k", 100, 32, a.time)))
            rows["cli_fio"].append(measured(kit, lambda: fio_nbd(p_kit, "randread", "4k", 32, a.time)))
            rows["pair_sb"].append(measured(sb, lambda: sb_nbd(p_sb, "4k", 100, 32, a.time)))
            rows["seq_sb"].append(measured(sb, lambda: sb_nbd(p_sb, "1M", 0, 4, a.time)))
            rows["iperf"].append({"bytes_per_s": iperf3_bps(a.time)})
            for qd in (4, 1):
                rows[f"qd{qd}_on"].append(fio_nbd(p_sb, "randread", "4k", qd, a.time))
                rows[f"qd{qd}_off"].append(fio_nbd(p_raw, "randread", "4k", qd, a.time))
    finally:
        sb.stop()
        kit.stop()
        raw.stop()

    def med(k, f):
        return median([r[f] for r in rows[k]])

    print_reps(rows)
    print(f"NBD benchmark, {a.reps} repetitions of {a.time} s, medians (4 KiB random read QD 32 unless noted)")
    s_us, k_us = med("srv_sb", "server_cpu_us_per_io"), med("srv_kit", "server_cpu_us_per_io")
    s_io, k_io = med("srv_sb", "iops"), med("srv_kit", "iops")
    print(f"1 server, fio nbd engine as client: sanbench {s_io:,.0f} IOPS at {s_us:.2f} server CPU-µs/IO; "
          f"nbdkit memory {k_io:,.0f} IOPS at {k_us:.2f}")
    print(f"    server CPU per I/O ratio {s_us / k_us:.2f}x (goal <= 0.5x), IOPS ratio {s_io / k_io:.2f}x (goal >= 1.0x)")
    c_us, f_us = med("cli_sb", "client_cpu_us_per_io"), med("cli_fio", "client_cpu_us_per_io")
    c_io, f_io = med("cli_sb", "iops"), med("cli_fio", "iops")
    print(f"2 client, against nbdkit memory: sanbench {c_io:,.0f} IOPS at {c_us:.2f} client CPU-µs/IO; "
          f"fio/libnbd {f_io:,.0f} IOPS at {f_us:.2f}")
    print(f"    client CPU per I/O ratio {c_us / f_us:.2f}x (goal <= 0.6x), IOPS ratio {c_io / f_io:.2f}x (goal >= 1.0x)")
    p_io, p_us = med("pair_sb", "iops"), med("pair_sb", "client_cpu_us_per_io")
    fs_us = med("srv_sb", "client_cpu_us_per_io")
    print(f"2b client, against sanbench's server: sanbench {p_io:,.0f} IOPS at {p_us:.2f} client CPU-µs/IO; "
          f"fio/libnbd {s_io:,.0f} IOPS at {fs_us:.2f}")
    print(f"    client CPU per I/O ratio {p_us / fs_us:.2f}x (goal <= 0.6x), IOPS ratio {p_io / s_io:.2f}x (goal >= 1.0x)")
    print(f"3 pair: sanbench client + server {p_io:,.0f} IOPS vs fio + nbdkit {k_io:,.0f}: "
          f"{p_io / k_io:.2f}x (goal >= 1.5x, 2x)")
    q_bw, i_bw = med("seq_sb", "bytes_per_s"), med("iperf", "bytes_per_s")
    print(f"4 1 MiB sequential read QD 4: sanbench client + server {q_bw / 1e6:,.0f} MB/s vs iperf3 loopback "
          f"{i_bw / 1e6:,.0f} MB/s: {q_bw / i_bw:.0%} (goal >= 90 %)")
    for qd in (4, 1):
        on, off = med(f"qd{qd}_on", "iops"), med(f"qd{qd}_off", "iops")
        print(f"5 fio QD {qd} against sanbench's server: {on:,.0f} IOPS with wake-up coalescing, "
              f"{off:,.0f} without: {on / off:.2f}x (should be ~1.0x)")


if __name__ == "__main__":
    sys.exit(main())
