#!/bin/bash
# Measures IOPS and server CPU-µs per I/O of the sanbench target and of tgtd under
# iscsi-perf (4 KiB random READ16, QD32) on loopback. Usage: crates/iscsi/scripts/perf-vs-tgtd.sh [SECONDS]
# Server CPU = utime+stime from /proc/PID/stat (fields 14+15) over the window after a 2 s warm-up.
set -euo pipefail
SECS=${1:-5}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
cargo build -q --release -p sanbench-iscsi --example target --manifest-path "$ROOT/Cargo.toml"
HZ=$(getconf CLK_TCK)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -f /dev/shm/sanbench-perf-$$.img; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

measure() { # NAME PID URL
  local ticks0 ticks1 t0 t1 out
  out=$(mktemp)
  stdbuf -oL iscsi-perf -m 32 -b 8 -r "$3" > "$out" 2>&1 & local perf=$!
  sleep 2
  ticks0=$(awk '{print $14+$15}' /proc/$2/stat); t0=$(date +%s.%N)
  sleep "$SECS"
  ticks1=$(awk '{print $14+$15}' /proc/$2/stat); t1=$(date +%s.%N)
  kill "$perf"; wait "$perf" 2>/dev/null || true
  local iops
  iops=$(tr '\r' '\n' < "$out" | grep -o "iops average [0-9]*" | tail -1 | awk '{print $3}')
  rm -f "$out"
  awk -v n="$1" -v i="$iops" -v a="$ticks0" -v b="$ticks1" -v s="$t0" -v e="$t1" -v hz="$HZ" \
    'BEGIN { cpu=(b-a)/hz; printf "%-10s %8d IOPS  %6.2f CPU-us/IO\n", n, i, cpu/(e-s)/i*1e6 }'
}

P1=$(free_port)
"$ROOT/target/release/examples/target" "127.0.0.1:$P1" 1 2>/dev/null & PIDS+=($!); OURS=$!
sleep 0.5
measure sanbench "$OURS" "iscsi://127.0.0.1:$P1/iqn.2026-11.io.sanbench:ram/0"

P2=$(free_port); CTL=$((P2 % 1000 + 100))
truncate -s 1G /dev/shm/sanbench-perf-$$.img
tgtd -f -C "$CTL" --iscsi "portal=127.0.0.1:$P2" >/dev/null 2>&1 & PIDS+=($!); TGTD=$!
sleep 1
tgtadm -C "$CTL" --lld iscsi --op new --mode target --tid 1 -T iqn.2026-11.test:perf
tgtadm -C "$CTL" --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 -b /dev/shm/sanbench-perf-$$.img
tgtadm -C "$CTL" --lld iscsi --op bind --mode target --tid 1 -I ALL
measure tgtd "$TGTD" "iscsi://127.0.0.1:$P2/iqn.2026-11.test:perf/1"
