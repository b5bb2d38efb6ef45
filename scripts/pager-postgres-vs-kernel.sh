#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# PostgreSQL under the kernel's zswap and under `uzswap run`, and plain (docs/benchmarks/run.md):
# a server run as the unprivileged user `postgres` (uzswap run as that user: the ordinary-user
# path, UFFD_USER_MODE_ONLY), one hash aggregate of 1.5 million groups over 4 million rows with
# work_mem 1 GB (about 330 MiB of the backend's private memory), timed from the client.
# - kernel: the server in a cgroup v1 memory cgroup with memory.limit_in_bytes = KERNEL_SIZE
#   (default SIZE; the cgroup also charges the server's shared memory and file pages, 10-15 MiB
#   here, which `--budget-covers resident` does not), a 4 GiB swap file, zswap with lzo;
# - uzswap: `uzswap run --memory-max SIZE --compressor lzo --budget-covers resident`;
# - plain: no limit.
# Usage (root; PostgreSQL 15 in /usr/lib/postgresql/15/bin):
#   scripts/pager-postgres-vs-kernel.sh SIZE_MiB ROUNDS [KERNEL_SIZE_MiB]
# UZSWAP: the uzswap binary (default target/release/uzswap; copied with its preload library to a
# directory the postgres user can read). Takes the kernel-test lock and restores every setting
# it changes (zswap's parameters, the swap file, the cgroup).
set -u
SIZE=$1; ROUNDS=$2; KSIZE=${3:-$1}
UZSWAP=${UZSWAP:-target/release/uzswap}
PG=/usr/lib/postgresql/15/bin; PORT=54331
CG=/sys/fs/cgroup/memory/uzswap-pg-bench
Q="set work_mem='1GB'; set max_parallel_workers_per_gather=0; select count(*), sum(c), sum(k::bigint) from (select g % 1500000 as k, count(*) as c from generate_series(1, 4000000) g group by 1) s;"
W=$(mktemp -d /tmp/uzswap-pg.XXXXXX); chmod 755 "$W"
cp "$UZSWAP" "$(dirname "$UZSWAP")/libuzswap_preload.so" "$W/"
mkdir -p "$W/sock" "$W/pg"; chown postgres "$W" "$W/sock" "$W/pg"
runuser -u postgres -- $PG/initdb -D "$W/pg/data" -A trust -U postgres >/dev/null
OPTS="-D $W/pg/data -p $PORT -k $W/sock -c listen_addresses=127.0.0.1 -c shared_buffers=16MB"
before_restore() {
    runuser -u postgres -- $PG/pg_ctl -D "$W/pg/data" -m immediate stop >/dev/null 2>&1
    rm -rf "$W"
}
# shellcheck source=scripts/kernel-side.sh
. "$(dirname "$0")/kernel-side.sh"
kernel_side_begin $CG /var/tmp/uzswap-pg-bench.swap "$KSIZE"
ready() {
    for _ in $(seq 100); do
        runuser -u postgres -- $PG/pg_isready -q -h 127.0.0.1 -p $PORT && return 0
        sleep 0.1
    done
    return 1
}
query() {
    local t0 t1 out
    t0=$(date +%s.%N)
    out=$(runuser -u postgres -- $PG/psql -X -h 127.0.0.1 -p $PORT -U postgres -d postgres -Atc "$Q" 2>&1 | tail -1)
    t1=$(date +%s.%N)
    echo "$(echo "$t1 - $t0" | bc) s; $out"
}
# Immediate: a server whose backend the kernel OOM-killed may hang in a fast shutdown.
stop() { runuser -u postgres -- $PG/pg_ctl -D "$W/pg/data" -m immediate -w -t 20 stop >/dev/null; }
for i in $(seq 1 "$ROUNDS"); do
    echo "== round $i $(date +%T)"
    zswap_on lzo
    sh -c "echo \$\$ > $CG/tasks; exec runuser -u postgres -- $PG/postgres $OPTS" > "$W/kernel.log" 2>&1 &
    ready || echo "kernel: the server did not start"
    before=$(vm); oom0=$(oom_kills)
    echo "kernel (${KSIZE}M): $(query)"
    echo "  before: $before"
    echo "  after:  $(vm); max usage $(( $(cat $CG/memory.max_usage_in_bytes) >> 20 )) MiB; OOM kills $(( $(oom_kills) - oom0 ))"
    stop; wait
    zswap_off
    runuser -u postgres -- "$W/uzswap" run --memory-max "${SIZE}M" --compressor lzo \
        --budget-covers resident --report "$W/report.json" -- $PG/postgres $OPTS > "$W/uzswap.log" 2>&1 &
    ready || echo "uzswap: the server did not start"
    echo "uzswap (${SIZE}M, resident): $(query)"
    stop; wait
    python3 - "$W/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
f, p = r["faults"], r["pager"]
print(f"  exit {r['exit_status']}; faults {f['count']} (pool {f['from_pool']}), p50 {f['p50_us']:.2f} us, "
      f"p99 {f['p99_us']:.2f} us; evictions {p['evictions']}; zswpin {r['counters'].get('zswpin')}; "
      f"peak charged {r['budget']['peak_charged_bytes'] >> 20} MiB")
PY
    runuser -u postgres -- $PG/postgres $OPTS > "$W/plain.log" 2>&1 &
    ready || echo "plain: the server did not start"
    echo "plain: $(query)"
    stop; wait
done
