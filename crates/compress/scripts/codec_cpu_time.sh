#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CPU time per page of each codec, measured with `perf stat -e task-clock` (CPU time of the
# process, so time spent descheduled on a busy machine is not counted). One process per codec;
# the `memcpy` run measures the fixed set-up cost (loading and pre-compressing the pages), which
# is subtracted. Usage: scripts/codec_cpu_time.sh [ROUNDS] [REPEATS]   (needs perf)
set -euo pipefail
ROUNDS=${1:-40}
REPEATS=${2:-3}
cd "$(dirname "$0")/.."
cargo build --release --example lzo_speed -q
BIN=${CARGO_TARGET_DIR:-../../target}/release/examples/lzo_speed
PAGES=$("$BIN" 1 | grep "pages," | awk '{print $1}')
cpu_ms() { ONLY="$1" perf stat -x, -e task-clock "$BIN" "$ROUNDS" 2>&1 >/dev/null | awk -F, '/task-clock/ {print $1}'; }
best() { local b=""; for _ in $(seq "$REPEATS"); do v=$(cpu_ms "$1"); if [ -z "$b" ] || awk "BEGIN{exit !($v < $b)}"; then b=$v; fi; done; echo "$b"; }
BASE=$(best memcpy)
echo "pages=$PAGES rounds=$ROUNDS repeats=$REPEATS (best of repeats); base ${BASE} ms"
printf '| codec | CPU µs/page |\n|---|---|\n'
for c in "lz4 compress" "lz4_flex compress" "lz4 kernel-exact compress" "lzo compress" "lzo-rle compress" "liblzo2 compress" \
         "lz4 decompress" "lz4_flex decompress" "lzo decompress" "lzo-rle decompress" "liblzo2 decompress"; do
  ms=$(best "$c")
  awk -v c="$c" -v ms="$ms" -v b="$BASE" -v n="$PAGES" -v r="$ROUNDS" 'BEGIN{printf "| %s | %.2f |\n", c, (ms-b)*1000/(n*r)}'
done
