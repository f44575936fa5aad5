#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/fuzz_targets: one per decoder of bytes from the network)
# for SECONDS each (default 10; scripts/test.sh runs this), stopping at the first crash, whose
# input libFuzzer saves under fuzz/artifacts/TARGET/. Each target's corpus (fuzz/corpus/TARGET,
# not committed) grows across runs, from fuzz/seeds/TARGET where there is one. The machine has one stable toolchain: RUSTC_BOOTSTRAP lets
# cargo-fuzz pass its sanitizer flags to it.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      (SECONDS 0: build only)
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${1:-10}"
shift || true
targets=("$@")
given="$#"
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list)
fi
export RUSTC_BOOTSTRAP=1
# Two targets at a time (libFuzzer runs one thread each; CI has two cores): SANBENCH_FUZZ_JOBS.
jobs="${SANBENCH_FUZZ_JOBS:-2}"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
# Built once, before any runs.
# stdin from /dev/null: cargo asks `rustc -` for target information on its inherited stdin
# and caches the answer (target/.rustc_info.json), so stray bytes there (another process's
# output on a shared terminal) would fail every later build until that file is removed.
if [ "$given" -eq 0 ]; then build=(""); else build=("${targets[@]}"); fi
for t in "${build[@]}"; do
  # shellcheck disable=SC2086 # empty: every target
  cargo fuzz build -O $t </dev/null >"$logs/build" 2>&1 || { tail -n 60 "$logs/build" >&2; exit 1; }
done
# 0 seconds: the build alone (scripts/test_beside.sh builds them beside the tests).
[ "$secs" != 0 ] || exit 0
# The built targets are run directly, as `cargo fuzz run` would after its own `cargo run`
# (which checks the build again, one target at a time under cargo's lock): with cargo-fuzz's
# ASAN_OPTIONS and its artifact prefix.
bins="$(cargo metadata --format-version 1 --no-deps </dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
bins="$bins/$(rustc -vV | sed -n 's/^host: //p')/release"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0"
one() {
  local t="$1" log="$logs/$1"
  mkdir -p "corpus/$t" "artifacts/$t"
  # Committed seeds (fuzz/seeds/TARGET: bytes a peer really sends, kept current by a test)
  # start the corpus where valid input is hard to find by mutation alone.
  if [ -d "seeds/$t" ]; then cp -n "seeds/$t"/* "corpus/$t"/; fi
  if "$bins/$t" -artifact_prefix="artifacts/$t/" "corpus/$t" -max_total_time="$secs" \
      -print_final_stats=1 </dev/null >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz $t: ${runs:-?} inputs in ${secs} s, no failure"
  else
    tail -n 60 "$log" >&2
    echo "fuzz target $t failed (input saved under fuzz/artifacts/$t/)" >&2
    return 1
  fi
}
pids=()
failed=0
for t in "${targets[@]}"; do
  one "$t" &
  pids+=("$!")
  if [ "${#pids[@]}" -ge "$jobs" ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
  # Stop at the first crash (the targets already running finish their time).
  [ "$failed" -eq 0 ] || break
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit "$failed"
