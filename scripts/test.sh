#!/usr/bin/env bash
# The whole test suite: formatting, the user guide (docs/guide built, its links checked),
# lints, every tier of tests (docs/TESTING.md: plain `cargo test` runs only the fast tier;
# here the features interop, lab and guest add the rest),
# and interop tests against real peers
# (fio, nbdkit, qemu-nbd, libnbd tools, tgtd, libiscsi's iscsi-test-cu, the Linux kernel's
# NVMe/TCP host and target in a QEMU TCG guest). Interop tests need root for loop devices and
# network namespaces, as on CI. The workspace is built and tested with the `mpi` feature (its
# tests start `mpirun -n 3` on this host); the refusal of a build without it under mpirun is
# tested on the default build. Last, every fuzz target runs for SANBENCH_FUZZ_SECONDS (default
# 3: 38 targets, about 2 minutes; at 5 the whole suite took 32 minutes on a quiet host on
# 2026-11-29; scripts/fuzz.sh 60 for longer) each (scripts/fuzz.sh).
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
cargo clippy --workspace --all-targets -- -D warnings
devnull "clippy"
# The tests build the optional features: mpi (rsmpi, Open MPI) and tls-psk (NBD TLS with
# pre-shared keys, OpenSSL). The default build is linted above; its refusals (under mpirun;
# of PSK, "build with --features tls-psk") are tested on their own below.
FEATURES="sanbench/mpi sanbench/tls-psk"
# Every tier of tests (docs/TESTING.md): the features only choose tests; with them the lint
# below covers the test binaries the default build leaves out.
TIERS="sanbench/interop sanbench/lab sanbench/guest sanbench-nbd/interop sanbench-iscsi/interop"
TIERS="$TIERS sanbench-report/interop"
FEATURES="$FEATURES $TIERS"
cargo clippy --workspace --all-targets --features "$FEATURES" -- -D warnings
devnull "clippy with features"
# mpirun as root (CI) needs these; shared memory without CMA inside containers.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
cargo test --workspace --features "$FEATURES" --no-fail-fast -- \
  --test-threads="${SANBENCH_TEST_THREADS:-2}"
devnull "cargo test --workspace"
cargo test -p sanbench --features interop --test run_cli -- mpi
cargo test -p sanbench-nbd --lib tls::
devnull "the default-build tests"
scripts/fuzz.sh "${SANBENCH_FUZZ_SECONDS:-3}"
devnull "scripts/fuzz.sh"
