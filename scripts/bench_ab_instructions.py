#!/usr/bin/env python3
"""Two sanbench builds on the same work, counted in instructions per I/O (callgrind).

On this noisy 2-core VM identical timed runs differ by 10-20 %, so a timed A/B cannot show a
3 % change either way (scripts/bench_ab.py). Instructions are repeatable: callgrind counts
the same total for the same binary and work whatever else the machine does. Each case runs
under `valgrind --tool=callgrind` twice per build, for a short and a long window; the
difference of the two totals over the difference of their I/Os is the marginal cost of one
I/O (start-up, allocation and exit cancel out). The ratio B/A of those is the change.

Instructions are not time (a cache miss costs more than an add), but a refactor that moves
code between crates changes time only through the instructions it adds or the inlining it
loses, and both show here.

Cases (loopback only; the servers run natively, only the client is counted):
  null:        4 KiB random read QD 32 (the generator and the run loop alone)
  mem:         4 KiB random read QD 32 on the in-process RAM disk
  mem-verify:  70 % reads, --verify (stamping and checking every block); not in the default
               set: under valgrind its I/O count per window is erratic (2880 I/Os in 2 s, then
               1408 in 6 s), valgrind running one thread at a time while a thread of the
               verified path waits by spinning, so the marginal count is not the I/O's
  nbd, iscsi:  4 KiB random read QD 32 against build B's own server
  nbd-tls:     the same over TLS (nbds://, X.509 P-256 certificates made with openssl), against
               build B's `serve nbd --tls-certificates` (on a host without the kernel's tls
               module both builds make their records in user space: the fallback path);
               not in the default set

Usage: scripts/bench_ab_instructions.py A_BINARY B_BINARY [--short 2] [--long 6]
"""
import argparse, atexit, json, os, re, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CASES = {
    "null": ["null:", "--read", "100"],
    "mem": ["mem:64M", "--read", "100"],
    "mem-verify": ["mem:64M", "--read", "70", "--verify"],
    "nbd": ["@nbd", "--read", "100"],
    "iscsi": ["@iscsi", "--read", "100"],
    "nbd-tls": ["@nbd-tls", "--read", "100"],
}
COMMON = ["--bs", "4k", "--qd", "32", "--random", "100", "--ramp", "0", "--precondition", "none",
          "--no-monitor", "--quiet", "--json=-"]


def counted(sb, args, secs):
    """(instructions, I/Os) of one run of `sb` under callgrind."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                            sb, "run"] + args + COMMON + ["--time", f"{secs}s"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{sb} {' '.join(args)}: exit {p.returncode}\n{p.stderr[-2000:]}")
        doc = json.loads(p.stdout)
        ios = doc["results"][0]["ios"]
        with open(out) as f:
            text = f.read()
        m = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M)
        return int(m.group(1)), ios


def per_io(sb, args, short, long):
    i1, n1 = counted(sb, args, short)
    i2, n2 = counted(sb, args, long)
    if n2 <= n1:
        raise RuntimeError(f"the long run did no more I/O ({n1} then {n2})")
    return (i2 - i1) / (n2 - n1), n2


def pki(d):
    """A CA and a server certificate for localhost in nbdkit's layout, in directory `d`."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = lambda *a: subprocess.run(["openssl", *a], cwd=d, check=True, capture_output=True)
    run("req", "-x509", *ec, "-keyout", "ca-key.pem", "-out", "ca-cert.pem", "-days", "2",
        "-subj", "/CN=bench-ca")
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    run("req", *ec, "-keyout", "server-key.pem", "-out", "server.csr", "-subj", "/CN=localhost")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca-cert.pem", "-CAkey", "ca-key.pem",
        "-CAcreateserial", "-out", "server-cert.pem", "-days", "2", "-extfile", "server.ext")


def served(sb, proto):
    extra, query = [], ""
    if proto == "nbd-tls":
        d = tempfile.mkdtemp(prefix="bench-pki-")
        atexit.register(shutil.rmtree, d, True)
        pki(d)
        proto, extra, query = "nbd", ["--tls-certificates", d], f"?tls-certificates={d}"
    p = subprocess.Popen([sb, "serve", proto, "--size", "256M", "--listen", "127.0.0.1:0"] + extra,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    uri = next(w for w in line.split() if "://" in w)
    if query:
        uri = uri.replace("127.0.0.1", "localhost") + query
    return p, uri


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--short", type=float, default=2)
    ap.add_argument("--long", type=float, default=6)
    ap.add_argument("--cases", default="null,mem,nbd,iscsi")
    o = ap.parse_args()
    servers, rows = {}, []
    try:
        for case in o.cases.split(","):
            args = list(CASES[case])
            if args[0].startswith("@"):
                proto = args[0][1:]
                if proto not in servers:
                    servers[proto] = served(o.b, proto)
                args[0] = servers[proto][1]
            a, na = per_io(o.a, args, o.short, o.long)
            b, nb = per_io(o.b, args, o.short, o.long)
            rows.append((case, a, b, na, nb))
            print(f"{case:<11} A {a:9.0f} instr/IO  B {b:9.0f} instr/IO  B/A {b / a:6.3f}"
                  f"   (long runs: {na} and {nb} I/Os)", flush=True)
    finally:
        for p, _ in servers.values():
            p.terminate()
            p.wait()


if __name__ == "__main__":
    main()
