#!/usr/bin/env python3
"""Runs a workspace's test binaries the way `cargo test` does, in phases that use both cores.

    scripts/test_bins.py [--jobs N] [--guest-jobs G] [--alone NAME,...] [--beside CMD] \
        [--times FILE] CARGO_TEST_ARGS... [-- TEST_ARGS...]

`cargo test` runs one test binary at a time. A guest test boots a QEMU TCG guest with one
vCPU: a core for its whole run, the other idle. Most other binaries wait (on timed runs, the
network, shaped links) more than they compute. This builds the binaries (`cargo test
CARGO_TEST_ARGS --no-run`: nothing to do after the same build), then runs each as cargo would
(from its package's directory, with cargo's environment, TEST_ARGS passed to it), binaries of
one class at a time, never two classes together:
- first the integration test binaries named by --alone (those that assert rates or times
  measured on this host), each with nothing beside it;
- then the guest tier's binaries (whose `required-features` name `guest`), G at a time
  (default 2: a core each);
- then the others, N at a time (default 1, as cargo does);
- from the guests on, CMD (`sh -c`) at nice 19 beside them: work that takes the CPU the tests
  leave idle (scripts/test.sh: the doc tests, the lints and the fuzz targets' build). Its
  output comes after the tests', and its failure fails the run.

Each binary's output is printed whole when it ends (binaries never interleave lines), then a
table of every binary's wall time and CPU time (its own and its children's: the processes its
tests start). Like `cargo test --no-fail-fast`, every binary runs; the exit status is 1 when
any failed, naming them.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time


def cargo_json(args):
    """The test executables `cargo test ARGS --no-run` builds, and the library paths its build
    scripts asked for (cargo puts these on LD_LIBRARY_PATH when it runs a test)."""
    cmd = ["cargo", "test", *args, "--no-run", "--message-format=json-render-diagnostics"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        sys.exit(p.returncode)
    exes, libpaths = [], []
    for line in p.stdout.decode().splitlines():
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
            exes.append(m)
        elif m.get("reason") == "build-script-executed":
            for lp in m.get("linked_paths", []):
                lp = lp.split("=", 1)[-1]
                if lp not in libpaths:
                    libpaths.append(lp)
    return exes, libpaths


def metadata():
    """manifest path -> package name, and (package name, target name) -> the target's
    required-features, from cargo metadata."""
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, check=True,
    ).stdout
    names, req = {}, {}
    for pkg in json.loads(out)["packages"]:
        names[pkg["manifest_path"]] = pkg["name"]
        for t in pkg["targets"]:
            req[(pkg["name"], t["name"])] = t.get("required-features", [])
    return names, req


class Job:
    def __init__(self, name, cmd, cwd, env):
        self.name, self.cmd, self.cwd, self.env = name, cmd, cwd, env
        self.rc, self.wall, self.cpu, self.output = None, 0.0, 0.0, b""


def run_job(job, lock):
    start = time.monotonic()
    # Output to a file, not a pipe: a server a test leaves running would hold a pipe open.
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(job.cmd, cwd=job.cwd, env=job.env, stdin=subprocess.DEVNULL,
                             stdout=out, stderr=subprocess.STDOUT)
        # wait4: this child's own CPU time (with its waited-for descendants: the sanbench
        # processes and servers a test starts), not the other binary's.
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        job.output = out.read()
    job.wall = time.monotonic() - start
    job.cpu = usage.ru_utime + usage.ru_stime
    job.rc = p.returncode
    with lock:
        sys.stdout.write(f"\n     Running {job.name} ({job.wall:.1f} s)\n")
        sys.stdout.flush()
        sys.stdout.buffer.write(job.output)
        sys.stdout.buffer.flush()


def main():
    argv = sys.argv[1:]
    njobs, guest_jobs, times, alone, beside = 1, 2, None, set(), None
    while argv and argv[0] in ("--jobs", "--guest-jobs", "--times", "--alone", "--beside"):
        if argv[0] == "--jobs":
            njobs = int(argv[1])
        elif argv[0] == "--guest-jobs":
            guest_jobs = int(argv[1])
        elif argv[0] == "--beside":
            beside = argv[1]
        elif argv[0] == "--alone":
            alone = set(argv[1].split(","))
        else:
            times = argv[1]
        argv = argv[2:]
    if "--" in argv:
        i = argv.index("--")
        cargo_args, test_args = argv[:i], argv[i + 1:]
    else:
        cargo_args, test_args = argv, []
    exes, libpaths = cargo_json(cargo_args)
    names, req = metadata()
    target_dir = os.environ.get("CARGO_TARGET_DIR", os.path.join(os.getcwd(), "target"))
    sysroot = subprocess.run(["rustc", "--print", "sysroot"], stdout=subprocess.PIPE,
                             check=True).stdout.decode().strip()
    ld = [os.path.join(target_dir, "debug", "deps"), os.path.join(target_dir, "debug"),
          os.path.join(sysroot, "lib"), *libpaths]
    if os.environ.get("LD_LIBRARY_PATH"):
        ld.append(os.environ["LD_LIBRARY_PATH"])
    jobs = []
    for m in exes:
        name = names[m["manifest_path"]]
        t = m["target"]
        kind = t["kind"][0]
        manifest_dir = os.path.dirname(m["manifest_path"])
        env = dict(os.environ)
        env.update({
            "CARGO_MANIFEST_DIR": manifest_dir,
            "CARGO_PKG_NAME": name,
            "CARGO_CRATE_NAME": t["name"].replace("-", "_"),
            "LD_LIBRARY_PATH": ":".join(ld),
        })
        job = Job(f"{name} {kind} {t['name']}", [m["executable"], *test_args], manifest_dir, env)
        job.key = (name, {"lib": 0, "bin": 1}.get(kind, 2), t["name"])
        job.guest = "guest" in req.get((name, t["name"]), [])
        job.alone = t["name"] in alone and kind == "test"
        jobs.append(job)
    # The binaries that run alone first (nothing else has started: the host is as quiet as it
    # gets), then the guests (the longest chain of one-at-a-time jobs), then cargo's order.
    jobs.sort(key=lambda j: (not j.alone, not j.guest, j.key))
    queue = list(jobs)
    running = []
    cond = threading.Condition()
    lock = threading.Lock()
    started = time.monotonic()

    def cls(j):
        return "alone" if j.alone else "guest" if j.guest else "rest"

    limit = {"alone": 1, "guest": guest_jobs, "rest": njobs}

    def eligible(j):
        # Binaries of one class at a time: a guest's vCPU takes a core for its whole run,
        # which the tests of the others (two threads each) would not have.
        c = cls(j)
        return all(cls(r) == c for r in running) and len(running) < limit[c]

    bg = {}

    def start_beside():
        # At nice 19 the work beside takes the CPU the tests leave idle, little more.
        bg["out"] = tempfile.TemporaryFile()
        bg["start"] = time.monotonic()
        bg["proc"] = subprocess.Popen(["nice", "-n", "19", "sh", "-c", beside],
                                      stdin=subprocess.DEVNULL, stdout=bg["out"],
                                      stderr=subprocess.STDOUT, start_new_session=True)

        def reap():
            _, status, usage = os.wait4(bg["proc"].pid, 0)
            bg["proc"].returncode = os.waitstatus_to_exitcode(status)
            bg["end"], bg["cpu"] = time.monotonic(), usage.ru_utime + usage.ru_stime

        bg["reaper"] = threading.Thread(target=reap)
        bg["reaper"].start()

    def worker():
        while True:
            with cond:
                while True:
                    if not queue:
                        return
                    j = next((j for j in queue if eligible(j)), None)
                    if j is not None:
                        queue.remove(j)
                        running.append(j)
                        if beside and cls(j) != "alone" and not bg:
                            start_beside()
                        break
                    cond.wait()
            run_job(j, lock)
            with cond:
                running.remove(j)
                cond.notify_all()

    threads = [threading.Thread(target=worker) for _ in range(max(1, njobs, guest_jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if beside and not bg:
        start_beside()
    total = time.monotonic() - started
    if bg and bg["proc"].returncode is None:
        # The tests are done: what is left beside them runs at our own priority (it would
        # otherwise wait on anything else the host runs). Raising a priority needs root, as
        # CI has; elsewhere it goes on at nice 19.
        try:
            os.setpriority(os.PRIO_PGRP, bg["proc"].pid, os.getpriority(os.PRIO_PROCESS, 0))
        except OSError:
            pass
    beside_rc = 0
    if bg:
        bg["reaper"].join()
        beside_rc = bg["proc"].returncode
        bg["out"].seek(0)
        sys.stdout.write(f"\n     Beside the tests: {beside}\n")
        sys.stdout.flush()
        sys.stdout.buffer.write(bg["out"].read())
        sys.stdout.buffer.flush()
        print(f"beside the tests: exit {beside_rc}, {bg['end'] - bg['start']:.0f} s "
              f"({bg['cpu']:.0f} s CPU), done {bg['end'] - started:.0f} s after the first "
              "test started")
    alljobs = sorted(jobs, key=lambda j: -j.wall)
    lines = [f"{j.wall:8.1f} {j.cpu:8.1f}  {'ok  ' if j.rc == 0 else 'FAIL'}  {j.name}"
             for j in alljobs]
    print(f"\ntest binaries: {len(alljobs)} in {total:.0f} s ({guest_jobs} guest binaries at a "
          f"time, {njobs} of the others); wall s, CPU s, result, binary:")
    print("\n".join(lines))
    if times:
        with open(times, "w") as f:
            f.write("\n".join(lines) + "\n")
    failed = [j.name for j in alljobs if j.rc != 0]
    if beside_rc != 0:
        failed.append(f"beside the tests ({beside})")
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
