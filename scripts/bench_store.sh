#!/usr/bin/env bash
# Server before vs after a change to its store ("One store for both servers" in
# docs/BENCHMARKS.md): two `sanbench serve` binaries side by side, both filled (1 MiB sequential
# writes over the whole 1 GiB), then 4 KiB random read and random write at QD 32, 3 s after 1 s
# of ramp, interleaved and alternating which goes first, REPS repetitions. The client is NEW's
# `sanbench run` for both, so only the server differs. Prints one line per run (IOPS, server
# CPU-µs per I/O from --watch, p99 µs) and medians with per-pair ratios.
#
#   scripts/bench_store.sh OLD_SANBENCH NEW_SANBENCH [nbd|iscsi] [REPS]
set -euo pipefail
OLD=$1 NEW=$2 PROTO=${3:-nbd} REPS=${4:-6}
P_OLD=19201 P_NEW=19202
uri() {
  if [ "$PROTO" = nbd ]; then echo "nbd://127.0.0.1:$1"; else echo "iscsi://127.0.0.1:$1/iqn.2026-11.io.sanbench:ram/0"; fi
}
out=$(mktemp)
"$OLD" serve "$PROTO" --size 1G --listen 127.0.0.1:$P_OLD >/dev/null 2>&1 & OLD_PID=$!
"$NEW" serve "$PROTO" --size 1G --listen 127.0.0.1:$P_NEW >/dev/null 2>&1 & NEW_PID=$!
trap 'kill -INT $OLD_PID $NEW_PID; wait; rm -f "$out"' EXIT
sleep 1
for port in $P_OLD $P_NEW; do
  "$NEW" run "$(uri $port)" --bs 1M --read 0 --random 0 --qd 4 --time 3s --ramp 0 --no-monitor --quiet
done
for rep in $(seq "$REPS"); do
  for rw in 100 0; do
    if [ $((rep % 2)) = 0 ]; then order="NEW OLD"; else order="OLD NEW"; fi
    for which in $order; do
      if [ "$which" = OLD ]; then port=$P_OLD pid=$OLD_PID; else port=$P_NEW pid=$NEW_PID; fi
      "$NEW" run "$(uri $port)" --bs 4k --read $rw --random 100 --qd 32 --time 3s --ramp 1s \
        --watch $pid --baseline 0 --quiet --json - | python3 -c "
import json, sys
r = json.load(sys.stdin)['results'][0]
srv = [g for g in r['cpu']['groups'] if g['name'].startswith('watch:')][0]['cpu_s']
print($rep, 'read' if $rw == 100 else 'write', '$which', round(r['iops']),
      round(srv / r['ios'] * 1e6, 2), r['latency_us']['p99'])" | tee -a "$out"
    done
  done
done
python3 - "$out" <<'PY'
import collections, statistics as st, sys
d = collections.defaultdict(dict)
for rep, wl, w, iops, cpu, p99 in (l.split() for l in open(sys.argv[1])):
    d[(wl, rep)][w] = (float(iops), float(cpu))
for wl in ("read", "write"):
    reps = sorted(r for (w, r) in d if w == wl)
    o = [d[(wl, r)]["OLD"] for r in reps]
    n = [d[(wl, r)]["NEW"] for r in reps]
    mo, mn = st.median(x[0] for x in o), st.median(x[0] for x in n)
    ratios = [b[0] / a[0] for a, b in zip(o, n)]
    print(f"{wl}: IOPS median old {mo / 1e3:.1f}k new {mn / 1e3:.1f}k = {mn / mo:.2f}x; pair ratios "
          f"{' '.join(f'{r:.2f}' for r in ratios)} (median {st.median(ratios):.2f}); server CPU-us/IO "
          f"median old {st.median(x[1] for x in o):.2f} new {st.median(x[1] for x in n):.2f}")
PY
