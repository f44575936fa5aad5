#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests, and interop tests against real peers
# (fio, nbdkit, qemu-nbd, libnbd tools, tgtd, libiscsi's iscsi-test-cu, the Linux kernel's
# NVMe/TCP host and target in a QEMU TCG guest). Interop tests need root for loop devices and
# network namespaces, as on CI. The workspace is built and tested with the `mpi` feature (its
# tests start `mpirun -n 3` on this host); the refusal of a build without it under mpirun is
# tested on the default build. Last, every fuzz target runs for SANBENCH_FUZZ_SECONDS (default
# 10) each (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# stdin from /dev/null: cargo feeds its inherited stdin to `rustc -` when it probes the target.
exec </dev/null
scripts/deps.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The tests build the optional features: mpi (rsmpi, Open MPI) and tls-psk (NBD TLS with
# pre-shared keys, OpenSSL). The default build is linted above; its refusals (under mpirun;
# of PSK, "build with --features tls-psk") are tested on their own below.
FEATURES="sanbench/mpi sanbench/tls-psk"
cargo clippy --workspace --all-targets --features "$FEATURES" -- -D warnings
# mpirun as root (CI) needs these; shared memory without CMA inside containers.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
cargo test --workspace --features "$FEATURES" --no-fail-fast -- \
  --test-threads="${SANBENCH_TEST_THREADS:-2}"
cargo test -p sanbench --test run_cli -- mpi
cargo test -p sanbench-nbd --lib tls::
scripts/fuzz.sh "${SANBENCH_FUZZ_SECONDS:-10}"
