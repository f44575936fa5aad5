#!/usr/bin/env python3
"""The cost of NBD over TLS (issue 16 item 1): sanbench's client against sanbench's server,
plaintext (nbd://) and TLS (nbds://, rustls X.509, TLS 1.3), on the same work in one run,
interleaved (the order alternates per repetition), medians of --reps repetitions.

  4 KiB random read QD 32: IOPS, client and server CPU-µs per I/O.
  1 MiB sequential read QD 4: MB/s, client and server CPU-µs per I/O.

The two servers are separate processes on separate ports (one with --tls require), each
filled once with sanbench's stamped data before the first measurement. Certificates (EC
P-256, CN/SAN localhost) are made with the openssl command-line tool in a temporary directory.

Usage: scripts/bench_tls.py [--reps 3] [--time 5]
"""
import argparse, os, subprocess, sys, tempfile
from benchlib import SB, Server, build, free_port, measured, median, print_reps, sanbench_json

SPAN = "256M"


def make_pki(d):
    def ossl(*args):
        subprocess.run(["openssl"] + list(args), cwd=d, check=True, capture_output=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ossl("req", "-x509", *ec, "-keyout", "ca-key.pem", "-out", "ca-cert.pem", "-days", "2",
         "-subj", "/CN=sanbench-bench-ca")
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    ossl("req", *ec, "-keyout", "server-key.pem", "-out", "server.csr", "-subj", "/CN=localhost")
    ossl("x509", "-req", "-in", "server.csr", "-CA", "ca-cert.pem", "-CAkey", "ca-key.pem",
         "-CAcreateserial", "-out", "server-cert.pem", "-days", "2", "-extfile", "server.ext")


def run(uri, bs, random, qd, secs, read=100):
    return sanbench_json([uri, f"--bs={bs}", f"--read={read}", f"--random={random}",
                          f"--qd={qd}", f"--time={secs}s", f"--size={SPAN}"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--time", type=int, default=5)
    a = ap.parse_args()
    build()
    pki = tempfile.TemporaryDirectory()
    make_pki(pki.name)
    p_plain, p_tls = free_port(), free_port()
    plain = Server([SB, "serve", "nbd", "--size=1G", f"--listen=127.0.0.1:{p_plain}"], p_plain)
    tls = Server([SB, "serve", "nbd", "--size=1G", f"--listen=127.0.0.1:{p_tls}",
                  "--tls=require", f"--tls-certificates={pki.name}"], p_tls)
    uris = {
        "plain": f"nbd://127.0.0.1:{p_plain}/",
        "tls": f"nbds://localhost:{p_tls}/?tls-certificates={pki.name}",
    }
    servers = {"plain": plain, "tls": tls}
    rows = {k: [] for k in ["plain_4k", "tls_4k", "plain_1m", "tls_1m"]}
    try:
        for k in ("plain", "tls"):
            run(uris[k], "1M", 0, 4, 1, read=0)
        for rep in range(a.reps):
            order = ("plain", "tls") if rep % 2 == 0 else ("tls", "plain")
            for k in order:
                rows[f"{k}_4k"].append(
                    measured(servers[k], lambda: run(uris[k], "4k", 100, 32, a.time)))
            for k in order:
                rows[f"{k}_1m"].append(
                    measured(servers[k], lambda: run(uris[k], "1M", 0, 4, a.time)))
    finally:
        plain.stop()
        tls.stop()
        pki.cleanup()

    def med(k, f):
        return median([r[f] for r in rows[k]])

    print_reps(rows)
    print(f"NBD over TLS, sanbench client -> sanbench server, {a.reps} repetitions of {a.time} s, medians")
    for w, label, unit in (("4k", "4 KiB random read QD 32", "iops"),
                           ("1m", "1 MiB sequential read QD 4", "bytes_per_s")):
        p, t = med(f"plain_{w}", unit), med(f"tls_{w}", unit)
        pc, tc = med(f"plain_{w}", "client_cpu_us_per_io"), med(f"tls_{w}", "client_cpu_us_per_io")
        ps, ts = med(f"plain_{w}", "server_cpu_us_per_io"), med(f"tls_{w}", "server_cpu_us_per_io")
        fmt = (lambda v: f"{v:,.0f} IOPS") if unit == "iops" else (lambda v: f"{v / 1e6:,.0f} MB/s")
        print(f"{label}: plaintext {fmt(p)}, TLS {fmt(t)} ({t / p:.2f}x); "
              f"client CPU-µs/IO {pc:.2f} -> {tc:.2f} ({tc / pc:.2f}x); "
              f"server CPU-µs/IO {ps:.2f} -> {ts:.2f} ({ts / ps:.2f}x)")


if __name__ == "__main__":
    sys.exit(main())
