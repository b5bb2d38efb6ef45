#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One recorded fuzz campaign: run a cargo-fuzz target for a budget of CPU time (not wall time,
# so a campaign on a busy machine still gets its full budget), under `nice -n 19`, then print
# the CPU seconds, executions and findings for docs/fuzzing.md.
#
#   scripts/fuzz-campaign.sh TARGET CPU_MINUTES [WORKDIR]
#
# MAX_LEN (default 8192) bounds the input size. Builds the targets first (`cargo +nightly fuzz build`). The working corpus lives in
# WORKDIR/TARGET/corpus (default WORKDIR: ${CARGO_TARGET_DIR:-fuzz/target}/fuzz-work), seeded
# from the repository's fuzz/corpus/TARGET; crashes go to WORKDIR/TARGET/artifacts. Minimize
# back into the repository afterwards with `cargo +nightly fuzz cmin TARGET`.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
[ $# -ge 2 ] || { sed -n '3,12p' "$0"; exit 2; }
target=$1 budget=$(( $2 * 60 ))
tdir=${CARGO_TARGET_DIR:-$PWD/target}
work=${3:-$tdir/fuzz-work}/$target
mkdir -p "$work/corpus" "$work/artifacts"
nice -n 19 cargo +nightly fuzz build --target-dir "$tdir" "$target" >&2
bin=$tdir/x86_64-unknown-linux-gnu/release/$target
# A private copy: rebuilding the targets while a campaign runs must not replace its binary.
cp "$bin" "$work/$target.bin"
seeds=()
[ -d "corpus/$target" ] && seeds=("corpus/$target")
log=$work/campaign.log
nice -n 19 "$work/$target.bin" "$work/corpus" "${seeds[@]}" \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1 -max_len="${MAX_LEN:-8192}" \
  -timeout=30 -rss_limit_mb=2048 >"$log" 2>&1 &
pid=$!
cpu() { awk '{print int(($14 + $15) / 100)}' "/proc/$1/stat" 2>/dev/null || echo -1; }
used=0
while kill -0 "$pid" 2>/dev/null; do
  now=$(cpu "$pid")
  [ "$now" -ge 0 ] && used=$now
  if [ "$used" -ge "$budget" ]; then
    kill -INT "$pid"
    break
  fi
  sleep 10
done
wait "$pid" || true
execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}' | tail -1)
echo "target $target: CPU ${used}s (budget ${budget}s), executions ${execs:-?}," \
  "crashes $(find "$work/artifacts" -type f | wc -l), corpus $(ls "$work/corpus" | wc -l) inputs"
