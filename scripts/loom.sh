#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The loom models of the lock-free protocols, each a small bounded model:
#   zsmalloc  per-object state word: read against free, read against a compaction move, and the
#             same two for optimistic reads (the version check)
#   zswap     pool references (tryget against kill), the slot's LOADING / WRITEBACK hand-off,
#             the striped counters (stripe ownership hand-over)
#   backing   the swap area's cluster bits (slot allocation against allocation and free)
# Built with --cfg loom (the crates' sync facades then use loom's types), release mode with debug
# assertions, in a target directory of its own so the normal build stays cached.
#   scripts/loom.sh                      # every model
#   LOOM_MAX_PREEMPTIONS=3 scripts/loom.sh -p uzswap-zswap
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTFLAGS="${RUSTFLAGS:-} --cfg loom -C debug-assertions=on"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
export CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-${CARGO_TARGET_DIR:-target}/loom}"
pkgs=("$@")
if [ ${#pkgs[@]} -eq 0 ]; then
    pkgs=(-p uzswap-zsmalloc -p uzswap-zswap -p uzswap-backing)
fi
time cargo test --release "${pkgs[@]}" --lib loom_models -- --test-threads=1
