#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/fuzz_targets: one per decoder of bytes from the network)
# for SECONDS each (default 10; scripts/test.sh runs this), stopping at the first crash, whose
# input libFuzzer saves under fuzz/artifacts/TARGET/. Each target's corpus (fuzz/corpus/TARGET,
# not committed) grows across runs, from fuzz/seeds/TARGET where there is one. The machine has one stable toolchain: RUSTC_BOOTSTRAP lets
# cargo-fuzz pass its sanitizer flags to it.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${1:-10}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list)
fi
export RUSTC_BOOTSTRAP=1
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  # Committed seeds (fuzz/seeds/TARGET: bytes a peer really sends, kept current by a test)
  # start the corpus where valid input is hard to find by mutation alone.
  if [ -d "seeds/$t" ]; then cp -n "seeds/$t"/* "corpus/$t"/; fi
  # stdin from /dev/null: cargo asks `rustc -` for target information on its inherited stdin
  # and caches the answer (target/.rustc_info.json), so stray bytes there (another process's
  # output on a shared terminal) would fail every later build until that file is removed.
  if cargo fuzz run -O "$t" "corpus/$t" -- -max_total_time="$secs" -print_final_stats=1 \
      </dev/null >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz $t: ${runs:-?} inputs in ${secs} s, no failure"
  else
    tail -n 60 "$log" >&2
    echo "fuzz target $t failed (input saved under fuzz/artifacts/$t/)" >&2
    exit 1
  fi
done
