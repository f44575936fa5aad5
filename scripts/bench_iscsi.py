#!/usr/bin/env python3
"""iSCSI benchmark (issue 5): sanbench's target and initiator against tgtd and libiscsi's
iscsi-perf, on the same work in one run, interleaved, medians of --reps repetitions.

  1. target: sanbench serve iscsi vs tgtd (RAM-backed LUN), both driven by iscsi-perf,
     4 KiB random reads QD 32: IOPS and target CPU-µs per I/O.
  2. initiator: sanbench run iscsi:// vs iscsi-perf, both against sanbench's target:
     IOPS and initiator CPU-µs per I/O.
  3. 1 MiB sequential reads (QD 4) through sanbench's initiator and target vs iperf3.
  4. 2 and 3 again with CRC32C header and data digests, to show what they cost.

Usage: scripts/bench_iscsi.py [--reps 3] [--time 5]   (needs root for tgtd)
"""
import argparse, os, re, subprocess, sys, time
from benchlib import (SB, Server, build, cpu_s, free_port, iperf3_bps, median, print_reps,
                      sanbench_json, sh, wait_port)

IQN = "iqn.2026-11.io.sanbench:ram"
TGT_IQN = "iqn.2026-11.test:bench"


def iscsi_perf(url, blocks, secs, server=None, qd=32, random=True):
    """Runs iscsi-perf for `secs` (`blocks` of 512 bytes per read, `qd` in flight, random or
    sequential); returns IOPS (its final average) and CPU of both sides."""
    c0 = server.cpu() if server else 0.0
    p = subprocess.Popen(["iscsi-perf", "-m", str(qd), "-b", str(blocks)] + (["-r"] if random else [])
                         + ["-t", str(secs), url],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # iscsi-perf's own CPU, read just before it exits.
    time.sleep(secs - 0.3)
    try:
        cli = cpu_s(p.pid)
    except OSError:
        cli = float("nan")
    out, _ = p.communicate(timeout=secs + 30)
    avgs = re.findall(r"iops average (\d+)", out)
    if not avgs:
        raise RuntimeError(f"iscsi-perf printed no figures: {out[-300:]}")
    iops = float(avgs[-1])
    ios = iops * secs
    r = {"iops": iops, "ios": ios, "client_cpu_us_per_io": cli * 1e6 / ios}
    if server:
        r["server_cpu_us_per_io"] = (server.cpu() - c0) * 1e6 / ios
    return r


class Tgtd:
    def __init__(self, port, ctl):
        self.img = f"/dev/shm/sanbench-bench-tgt-{os.getpid()}.img"
        sh(["truncate", "-s", "1G", self.img])
        self.port, self.ctl = port, str(ctl)
        self.p = subprocess.Popen(["tgtd", "-f", "-C", self.ctl, "--iscsi",
                                   f"portal=127.0.0.1:{port}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        adm = ["tgtadm", "-C", self.ctl, "--lld", "iscsi"]
        for _ in range(50):
            r = subprocess.run(adm + ["--op", "new", "--mode", "target", "--tid", "1", "-T", TGT_IQN],
                               capture_output=True)
            if r.returncode == 0:
                break
            time.sleep(0.1)
        sh(adm + ["--op", "new", "--mode", "logicalunit", "--tid", "1", "--lun", "1", "-b", self.img])
        sh(adm + ["--op", "bind", "--mode", "target", "--tid", "1", "-I", "ALL"])
        wait_port(port)

    def cpu(self):
        return cpu_s(self.p.pid)

    def stop(self):
        self.p.kill()  # tgtd ignores SIGTERM while serving
        self.p.wait()
        os.unlink(self.img)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--time", type=int, default=5)
    a = ap.parse_args()
    build()
    p_sb, p_tgt = free_port(), free_port()
    sb = Server([SB, "serve", "iscsi", "--size=1G", f"--listen=127.0.0.1:{p_sb}"], p_sb)
    tgt = Tgtd(p_tgt, 20000 + p_tgt % 10000)
    sb_url = f"iscsi://127.0.0.1:{p_sb}/{IQN}/0"
    tgt_url = f"iscsi://127.0.0.1:{p_tgt}/{TGT_IQN}/1"
    rows = {}

    def add(k, v):
        rows.setdefault(k, []).append(v)

    def sbrun(url, bs, random, qd, extra=()):
        c0 = sb.cpu()
        r = sanbench_json([url, f"--bs={bs}", "--read=100", f"--random={random}", f"--qd={qd}",
                           f"--time={a.time}s", "--size=256M", *extra])
        r["server_cpu_us_per_io"] = (sb.cpu() - c0) * 1e6 / max(r["ios"], 1)
        r["client_cpu_us_per_io"] = r["client_cpu_s"] * 1e6 / max(r["ios"], 1)
        return r

    try:
        # Both targets hold data in the span read below.
        sanbench_json([sb_url, "--bs=1M", "--read=0", "--random=0", "--qd=4", "--time=2s",
                       "--size=256M"])
        for _ in range(a.reps):
            add("tgt_sb", iscsi_perf(sb_url, 8, a.time, sb))
            add("tgt_tgtd", iscsi_perf(tgt_url, 8, a.time, tgt))
            add("ini_sb", sbrun(sb_url, "4k", 100, 32))
            add("seq_sb", sbrun(sb_url, "1M", 0, 4))
            add("ini_sb_dig", sbrun(sb_url + "?digest=crc32c", "4k", 100, 32))
            add("seq_sb_dig", sbrun(sb_url + "?digest=crc32c", "1M", 0, 4))
            add("iperf", {"bytes_per_s": iperf3_bps(a.time)})
    finally:
        sb.stop()
        tgt.stop()

    def med(k, f):
        return median([r[f] for r in rows[k]])

    print_reps(rows)
    print(f"iSCSI benchmark, {a.reps} repetitions of {a.time} s, medians (4 KiB random read QD 32 unless noted)")
    s_us, t_us = med("tgt_sb", "server_cpu_us_per_io"), med("tgt_tgtd", "server_cpu_us_per_io")
    s_io, t_io = med("tgt_sb", "iops"), med("tgt_tgtd", "iops")
    print(f"1 target, iscsi-perf as initiator: sanbench {s_io:,.0f} IOPS at {s_us:.2f} target CPU-µs/IO; "
          f"tgtd {t_io:,.0f} IOPS at {t_us:.2f}")
    print(f"    target CPU per I/O ratio {s_us / t_us:.2f}x (goal <= 0.25x), IOPS ratio {s_io / t_io:.2f}x (goal >= 2x)")
    i_us, p_us = med("ini_sb", "client_cpu_us_per_io"), med("tgt_sb", "client_cpu_us_per_io")
    i_io = med("ini_sb", "iops")
    print(f"2 initiator, against sanbench's target: sanbench {i_io:,.0f} IOPS at {i_us:.2f} initiator CPU-µs/IO; "
          f"iscsi-perf {s_io:,.0f} IOPS at {p_us:.2f}")
    print(f"    initiator CPU per I/O ratio {i_us / p_us:.2f}x (goal <= 0.7x), IOPS ratio {i_io / s_io:.2f}x (goal >= 1.0x)")
    q_bw, w_bw = med("seq_sb", "bytes_per_s"), med("iperf", "bytes_per_s")
    print(f"3 1 MiB sequential read QD 4: {q_bw / 1e6:,.0f} MB/s vs iperf3 loopback {w_bw / 1e6:,.0f} MB/s: "
          f"{q_bw / w_bw:.0%} (goal >= 85 %)")
    d_io, d_us = med("ini_sb_dig", "iops"), med("ini_sb_dig", "client_cpu_us_per_io")
    d_bw = med("seq_sb_dig", "bytes_per_s")
    print(f"4 with CRC32C header+data digests: 4 KiB {d_io:,.0f} IOPS ({d_io / i_io:.2f}x of no digests) at "
          f"{d_us:.2f} initiator CPU-µs/IO; 1 MiB {d_bw / 1e6:,.0f} MB/s ({d_bw / q_bw:.2f}x)")


if __name__ == "__main__":
    sys.exit(main())
