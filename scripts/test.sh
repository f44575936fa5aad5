#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests, and interop tests against real peers
# (fio, nbdkit, qemu-nbd, libnbd tools, tgtd, libiscsi's iscsi-test-cu, the Linux kernel's
# NVMe/TCP host and target in a QEMU TCG guest). Interop tests need root for loop devices and
# network namespaces, as on CI. Last, every fuzz target runs for SANBENCH_FUZZ_SECONDS (default
# 10) each (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The tests build the tls-psk feature (NBD TLS with pre-shared keys, OpenSSL); the default build
# is linted above, and its refusal of PSK ("build with --features tls-psk") is unit-tested here.
cargo clippy --workspace --all-targets --features sanbench/tls-psk -- -D warnings
cargo test -p sanbench-nbd --lib tls::
cargo test --workspace --features sanbench/tls-psk --no-fail-fast -- --test-threads="${SANBENCH_TEST_THREADS:-2}"
scripts/fuzz.sh "${SANBENCH_FUZZ_SECONDS:-10}"
