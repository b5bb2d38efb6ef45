#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Captures the memory of real programs as page files (docs/page-file-format.md) for
# `uzswap bench --corpus` and `uzswap estimate --file`:
#   pg    a PostgreSQL 15 backend in the middle of a large hash aggregate (work_mem 2 GB),
#         the server run as the unprivileged user `postgres` on loopback, data in /tmp
#   jvm   a Java 17 program holding ~0.25 M orders (HashMap, records, Strings, small maps)
#   go    a Go HTTP service holding ~0.6 M sessions in a map
#   node  a Node.js process holding ~0.4 M JSON-like records in a Map
#
#   scripts/capture-corpora.sh [-o OUTDIR] [-u UZSWAP_BINARY] [pg jvm go node]
#
# Needs root (capture reads /proc/PID/mem of the workloads). Every workload is stopped and its
# files removed afterwards. Prints, per corpus, its size and `uzswap estimate`'s compression
# stats (zero pages, compressed size with lz4 and lzo-rle).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=/tmp/uzswap-corpora bin=""
while getopts "o:u:" o; do
  case $o in
    o) out=$OPTARG ;; u) bin=$OPTARG ;;
    *) sed -n '3,15p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
which=("$@"); [ ${#which[@]} -gt 0 ] || which=(pg jvm go node)
if [ -z "$bin" ]; then
  cargo build --release -q -p uzswap-cli --manifest-path "$here/../Cargo.toml"
  bin="$(cargo metadata --format-version 1 --no-deps --manifest-path "$here/../Cargo.toml" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/uzswap"
fi
mkdir -p "$out"
work=$(mktemp -d /tmp/uzswap-workloads.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -f "$work/pg/data/postmaster.pid" ]; then
    runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$work/pg/data" -m immediate stop >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# Waits until FILE has a line "READY <pid> ..." and prints the pid.
wait_ready() {
  local file=$1 t=0
  while ! grep -q '^ *READY [0-9]' "$file" 2>/dev/null; do
    sleep 1; t=$((t + 1))
    [ $t -lt 600 ] || { echo "workload did not get ready: $file" >&2; cat "$file" >&2; return 1; }
  done
  grep -m1 '^ *READY [0-9]' "$file" | sed 's/^ *//' | cut -d' ' -f2
}

capture() {
  local name=$1 pid=$2
  echo "capturing $name (pid $pid)" >&2
  "$bin" capture --pid "$pid" -o "$out/$name.pages"
  "$bin" estimate --file "$out/$name.pages" --compressor lz4 --compressor lzo-rle --json \
    > "$out/$name.estimate.json"
}

run_pg() {
  local pg=/usr/lib/postgresql/15/bin d="$work/pg" port=54329
  mkdir -p "$d" && chown postgres "$d"
  runuser -u postgres -- "$pg/initdb" -D "$d/data" -A trust -U postgres >/dev/null
  runuser -u postgres -- "$pg/pg_ctl" -D "$d/data" -l "$d/log" -w start \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $d -c shared_buffers=128MB" >/dev/null
  local psql=(runuser -u postgres -- "$pg/psql" -X -q -h 127.0.0.1 -p $port -U postgres -d postgres)
  "${psql[@]}" -f "$here/corpora/pg/setup.sql" >/dev/null
  # Keep one session open (the cursor holds the hash table) by feeding psql from a fifo.
  mkfifo "$d/in"; chown postgres "$d/in"
  "${psql[@]}" -At < "$d/in" > "$d/out" 2>&1 &
  pids+=($!)
  exec 3> "$d/in"
  cat "$here/corpora/pg/hashagg.sql" >&3
  local pid; pid=$(wait_ready "$d/out")
  capture pg "$pid"
  exec 3>&-
}

run_jvm() {
  java -Xmx1g -XX:+UseG1GC "$here/corpora/jvm/HeapWorkload.java" > "$work/jvm.out" 2>&1 &
  pids+=($!)
  capture jvm "$(wait_ready "$work/jvm.out")"
}

run_go() {
  mkdir -p "$work/go" && cp "$here/corpora/go/"* "$work/go/"
  (cd "$work/go" && GOFLAGS=-mod=mod go build -o mapservice .)
  "$work/go/mapservice" > "$work/go.out" 2>&1 &
  pids+=($!)
  capture go "$(wait_ready "$work/go.out")"
}

run_node() {
  node --max-old-space-size=4096 --expose-gc "$here/corpora/node/cache.js" > "$work/node.out" 2>&1 &
  pids+=($!)
  capture node "$(wait_ready "$work/node.out")"
}

for w in "${which[@]}"; do
  case $w in
    pg) run_pg ;; jvm) run_jvm ;; go) run_go ;; node) run_node ;;
    *) echo "unknown workload $w (pg jvm go node)" >&2; exit 2 ;;
  esac
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  pids=()
done

python3 - "$out" "${which[@]}" <<'PY'
import json, os, sys
out = sys.argv[1]
for name in sys.argv[2:]:
    est = json.load(open(f"{out}/{name}.estimate.json"))
    n = est["pages"]
    line = (f"{name:5s} {n:7d} pages ({n * 4096 / 2**20:5.0f} MiB)  zero {est['zero_pages'] / n:6.2%}"
            f"  same-filled {est['same_filled_pages'] / n:6.2%}")
    for r in est["results"]:
        line += (f"  {r['compressor']}: {r['compressed_bytes'] / (n * 4096):.3f} of the input,"
                 f" pool {r['pool_pages'] / n:.3f} pages/page, {r['incompressible_pages']} incompressible")
    print(line)
PY
