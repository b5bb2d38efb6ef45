#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Instructions per operation on the hot paths (deterministic; meaningful on a busy machine,
# unlike timings). Runs the `hotpath` examples of uzswap-zswap and uzswap-zsmalloc under
# callgrind, once per phase, and prints Ir per operation. The examples run an uncounted warm-up
# round first, so the counts are the steady state (no one-time allocations).
#
#   scripts/callgrind-hotpath.sh            # default sizes
#   PAGES=1024 OBJECTS=4096 scripts/callgrind-hotpath.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PAGES=${PAGES:-2048}
OBJECTS=${OBJECTS:-8192}
cargo build --release -q -p uzswap-zswap --example zswap_hotpath
cargo build --release -q -p uzswap-zsmalloc --example zsmalloc_hotpath
TARGET=${CARGO_TARGET_DIR:-target}
out=$(mktemp -d)
# The codec's Ir/op, once measured: store and load phases also print their cost over it.
CODEC_COMPRESS=""
CODEC_DECOMPRESS=""
run() { # example, n, phase, calls
    local ex=$1 n=$2 phase=$3 calls=$4
    valgrind --tool=callgrind --callgrind-out-file="$out/cg" \
        --toggle-collect="$ex::$phase" "$TARGET/release/examples/$ex" "$n" >/dev/null 2>"$out/log"
    local ir
    ir=$(grep -E '^summary:|^totals:' "$out/cg" | head -1 | awk '{print $2}')
    local per over=""
    per=$(echo "$ir / ($n * $calls)" | bc -l)
    case $phase in
        phase_compress) CODEC_COMPRESS=$per ;;
        phase_decompress) CODEC_DECOMPRESS=$per ;;
        phase_store) over=$(printf '  %7.1f over the codec' "$(echo "$per - $CODEC_COMPRESS" | bc -l)") ;;
        phase_load*) over=$(printf '  %7.1f over the codec' "$(echo "$per - $CODEC_DECOMPRESS" | bc -l)") ;;
    esac
    printf '%-28s %12s Ir  %8.1f Ir/op%s\n' "$phase" "$ir" "$per" "$over"
}
echo "== uzswap-zswap ($PAGES pages; every store goes into an empty slot;"
echo "   compress/decompress: the raw codec on the same pages, for the difference)"
run zswap_hotpath "$PAGES" phase_compress 1
run zswap_hotpath "$PAGES" phase_decompress 1
run zswap_hotpath "$PAGES" phase_store 2
run zswap_hotpath "$PAGES" phase_load 1
run zswap_hotpath "$PAGES" phase_load_random 1
run zswap_hotpath "$PAGES" phase_load_excl 1
run zswap_hotpath "$PAGES" phase_invalidate 1
echo "== uzswap-zsmalloc ($OBJECTS objects, 64..3963 bytes)"
run zsmalloc_hotpath "$OBJECTS" phase_alloc 1
run zsmalloc_hotpath "$OBJECTS" phase_read 1
run zsmalloc_hotpath "$OBJECTS" phase_free 1
rm -rf "$out"
