#!/usr/bin/env bash
# What scripts/test.sh runs beside the test binaries (scripts/test_bins.py --beside, at nice
# 19): the doc tests, the lints, the default build's PSK refusal and the fuzz targets (built, then
# run).
# None of it measures time, and the tests leave much of the CPU idle (they wait on timed runs,
# links and guests). Nothing here may build target/debug/sanbench, which the running tests
# start (the default build's run under mpirun, which does, runs after them). FEATURES: the
# features of the test build (test.sh exports them).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${FEATURES:?set by scripts/test.sh}"
exec </dev/null
# The doc tests of the test build (as `cargo test --workspace --features ...` runs them).
cargo test --workspace --features "$FEATURES" --doc --no-fail-fast
# The default build is linted in the crates whose code or dependencies change with a feature;
# the others compile the same in both builds and are linted with the features below (their
# libraries are linted here too, as dependencies).
cargo clippy -p sanbench -p sanbench-session -p sanbench-nbd -p sanbench-iscsi \
  -p sanbench-report --all-targets -- -D warnings
cargo clippy --workspace --all-targets --features "$FEATURES" -- -D warnings
# PSK refused without tls-psk (the default build of sanbench-nbd alone: no binary of it).
cargo test -p sanbench-nbd --lib tls::
# The fuzz targets, built and each run for SANBENCH_FUZZ_SECONDS (libFuzzer stops on time, so
# at nice 19 a crowded target runs fewer inputs, not longer: the counts are printed).
scripts/fuzz.sh "${SANBENCH_FUZZ_SECONDS:-3}"
