#!/usr/bin/env bash
# The whole test suite: formatting, the user guide (docs/guide built, its links checked),
# lints, every tier of tests (docs/TESTING.md: plain `cargo test` runs only the fast tier;
# here the features interop, lab and guest add the rest),
# and interop tests against real peers
# (fio, nbdkit, qemu-nbd, libnbd tools, tgtd, libiscsi's iscsi-test-cu, the Linux kernel's
# NVMe/TCP host and target in a QEMU TCG guest). Interop tests need root for loop devices and
# network namespaces, as on CI. The workspace is built and tested with the `mpi` feature (its
# tests start `mpirun -n 3` on this host); the refusal of a build without it under mpirun is
# tested on the default build. Every fuzz target runs for SANBENCH_FUZZ_SECONDS (default 3: 37
# targets, two at a time; scripts/fuzz.sh 60 for longer) each, beside the tests (scripts/fuzz.sh).
#
# What it costs, on a 2-core machine from a fresh checkout: 32 min on 2026-11-29 before the
# layout below (CI 39 min with .ci/run's installs): 4 min of test build, ~5 min more of other
# builds one after another (two whole-workspace clippy runs, the default build's checks, the
# fuzz targets), 21 min of test binaries one at a time (6.6 min of it QEMU guests using one
# core), 2 min of fuzzing. The test binaries used ~15 CPU-min of the 42 those 21 min offered.
# Now (docs/TESTING.md): the test build, then the test binaries in phases (scripts/test_bins.py:
# those timing themselves alone, the guests two at a time, the rest one at a time: ~18 min by
# the binaries' own times), beside them at nice 19 the doc tests, the lints, the fuzz build and
# since 2026-11-29 20:55 the fuzzing (scripts/test_beside.sh: ~10 CPU-min for the doc tests,
# lints and nbd check, plus the fuzz targets, on the cores the tests leave idle), then the
# default build's mpirun check. CI on 2026-11-29 (before line tables only, the fuzzing beside
# and the cargo tools beside apt) failed on one test after 29 min, its fuzzing not yet run.
# Measured since on a fresh 2-core machine (2026-11-29 evening): deps.sh 4.5 min before the
# cargo tools went beside apt, the test build 4.9 min; with the build warm, the whole script
# 18.7 min (test binaries 1052-1096 s; beside them 476 s with clippy's build, the fuzzing
# included, done 694 s after the first test): ~26 min estimated for CI from fresh. Since
# 2026-11-29 22:50 the rest run two at a time (SANBENCH_TEST_JOBS, default 2; 1 for one at a
# time): test binaries 777 s instead of 1052-1096, all passing in two runs of it (777 and 799 s), one with
# clippy's build beside (the binaries that time themselves stay alone, in ALONE).
set -euo pipefail
cd "$(dirname "$0")/.."
# /dev/null must be the null device. A CI run failed when it was a regular file holding build
# scripts' discarded output: cargo feeds its inherited stdin to `rustc -` when it probes the
# target, and rustc read gcc's messages as Rust. What replaced it is not known yet, so it is
# checked (and put back, as root) after every step, naming the step.
# Restoring replaces it by rename, so that where mknod is not allowed nothing is removed.
devnull() {
  if [ ! -c /dev/null ]; then
    echo "test.sh: /dev/null is not the null device after: $1; restoring it" >&2
    mknod -m 666 /dev/.null-sanbench c 1 3 && mv -f /dev/.null-sanbench /dev/null ||
      echo "test.sh: could not restore /dev/null" >&2
  fi
}
devnull "the start of test.sh"
# An empty pipe when /dev/null cannot be trusted.
if [ -c /dev/null ]; then exec </dev/null; else exec < <(:); fi
scripts/deps.sh
devnull "scripts/deps.sh"
cargo fmt --all -- --check
# The user guide builds and has no broken link (docs/guide; scripts/guide.sh).
scripts/guide.sh
devnull "scripts/guide.sh"
# The tests build the optional features: mpi (rsmpi, Open MPI) and tls-psk (NBD TLS with
# pre-shared keys, OpenSSL). The default build's lint (scripts/test_beside.sh) and refusals
# (under mpirun; of PSK, "build with --features tls-psk") are checked on their own below.
FEATURES="sanbench/mpi sanbench/tls-psk"
# Every tier of tests (docs/TESTING.md): the features only choose tests; with them the lint
# covers the test binaries the default build leaves out.
TIERS="sanbench/interop sanbench/lab sanbench/guest sanbench-nbd/interop sanbench-iscsi/interop"
TIERS="$TIERS sanbench-report/interop"
export FEATURES="$FEATURES $TIERS"
# mpirun as root (CI) needs these; shared memory without CMA inside containers.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
threads="--test-threads=${SANBENCH_TEST_THREADS:-2}"
cargo test --workspace --features "$FEATURES" --no-run
devnull "the test build"
# Every test binary, as `cargo test --workspace --features "$FEATURES" --no-fail-fast` would
# run them (scripts/test_bins.py), in phases: first the binaries that assert rates or times
# measured on this host, each alone; then the guest tier's, two at a time (a QEMU vCPU takes a
# core); then the others two at a time. From the guests on, beside them at nice 19 on the CPU
# they leave idle (scripts/test_beside.sh): the doc tests, the lints, the default build's PSK
# refusal and the fuzz targets (built, then run); a failure there fails the run.
ALONE="lab,lab_paths,open_loop,pacing,replay_fidelity,serve_delay,queue_depth"
scripts/test_bins.py --jobs "${SANBENCH_TEST_JOBS:-2}" --guest-jobs "${SANBENCH_GUEST_JOBS:-2}" \
  --alone "$ALONE" --beside scripts/test_beside.sh --workspace --features "$FEATURES" -- "$threads"
devnull "the test binaries, the lints and builds beside them"
# The default build's refusal of a run under mpirun without the mpi feature (PSK without
# tls-psk is checked beside the tests). After the tests: this build replaces
# target/debug/sanbench, which they start.
cargo test -p sanbench --features interop --test run_cli -- mpi
devnull "the default-build test"
