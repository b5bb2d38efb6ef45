#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Real programs under `uzswap run` with budgets far below their peak, in several cache
# configurations: each program's output and exit status must equal a run without uzswap.
# Usage: scripts/pager-torture.sh [FRAC ...]   (budget = plain peak RSS / FRAC; default 3 6)
# Environment: UZSWAP (binary, default target/release/uzswap), PROGSET (1: the first ten
# programs, the default; 2: ten more, among them git, make and jq; 3: seven more, among them
# sockets, pipes to child processes, Node's thread pool, g++ and a cargo build, and as root a
# PostgreSQL server with its client; all),
# ONLY="prog ..." and CONF_ONLY="c0 ..." to run a subset, WORK (scratch directory, default a
# new temporary one), TIMEOUT (seconds per run, default 900). Prints one line per run; exits 1 if any run differs.
# Touches no kernel setting: every run is user space (the swap files go to WORK).
set -uo pipefail
UZSWAP=$(realpath "${UZSWAP:-target/release/uzswap}")
WORK=${WORK:-$(mktemp -d /tmp/uzswap-torture.XXXXXX)}
PY=${PY:-$(command -v python3)}
WORKLOADS=$(realpath "$(dirname "$0")/pager-workloads")
REPO=$(realpath "$(dirname "$0")/..")
# The second set reads this repository at a commit every clone has.
REPO_COMMIT=31f39c5
mkdir -p "$WORK" && cd "$WORK" || exit 2
# Sticky and writable by all, as /tmp: the third set's PostgreSQL runs as its own user.
mkdir -p swap && chmod 1777 swap
export UZSWAP_SWAP_DIR=$WORK/swap

# Inputs, made once, deterministic.
if [ ! -f words.txt ]; then
    "$PY" - <<'EOF'
import random
random.seed(9)
with open('words.txt', 'w') as f:
    for i in range(1500000):
        f.write('%08x %s\n' % (random.getrandbits(32), 'w' * random.randrange(20)))
with open('text.txt', 'w') as f:
    for i in range(300000):
        f.write('%d %x %s\n' % (i, random.getrandbits(64), random.choice(['swap', 'zspage', 'handle'])))
with open('big.c', 'w') as f:
    for i in range(800):
        f.write(f"int f{i}(int x){{ int a[16]; for(int j=0;j<16;j++) a[j]=x*j+{i}; int s=0;"
                f" for(int j=0;j<16;j++) s+=a[j]*a[(j+{i})%16]; return s; }}\n")
    f.write("int main(){int s=0;\n" + "".join(f"s+=f{i}(s);\n" for i in range(800)) + "return s&1;}\n")
EOF
    cat > py_dict.py <<'EOF'
import json, hashlib, random
random.seed(7)
d = {"k%d" % i: [random.random() for _ in range(4)] + ["v" * (i % 17)] for i in range(300000)}
s = json.dumps(d, sort_keys=True)
del d
print(hashlib.sha256(s.encode()).hexdigest(), len(s))
EOF
    cat > py_mp.py <<'EOF'
import multiprocessing as mp, hashlib, random
random.seed(3)
BIG = [bytes(random.getrandbits(8) for _ in range(64)) * 16 for _ in range(20000)]
def work(i):
    h = hashlib.sha256()
    for b in BIG[i::8]:
        h.update(b)
    return h.hexdigest()
if __name__ == "__main__":
    with mp.Pool(3) as p:
        r = p.map(work, range(8))
    print(hashlib.sha256("".join(r).encode()).hexdigest())
EOF
    cat > py_sqlite.py <<'EOF'
import sqlite3, hashlib, random
random.seed(5)
c = sqlite3.connect(":memory:")
c.execute("pragma cache_size=-200000")
c.execute("create table t(a integer, b text, c real)")
c.executemany("insert into t values(?,?,?)",
              ((i, "x%d" % random.randrange(10**6) * 3, random.random()) for i in range(300000)))
c.execute("create index ib on t(b)")
h = hashlib.sha256()
for row in c.execute("select b, count(*), sum(c) from t group by b order by b limit 50000"):
    h.update(repr(row).encode())
print(h.hexdigest())
EOF
    cat > node_map.js <<'EOF'
const crypto = require('crypto');
let m = new Map(); let x = 12345;
for (let i = 0; i < 600000; i++) {
  x = (x * 1103515245 + 12345) & 0x7fffffff;
  m.set('k' + i, {a: x, b: 'v'.repeat(i % 13), c: [x & 255, i]});
}
const h = crypto.createHash('sha256');
for (const [k, v] of m) h.update(k + JSON.stringify(v));
console.log(h.digest('hex'), m.size);
EOF
    cat > perl_hash.pl <<'EOF'
use Digest::MD5;
my %h; my $x = 1;
for my $i (0..600000) { $x = ($x * 1103515245 + 12345) % 2147483648; $h{"k$i"} = "v$x" x (1 + $i % 5); }
my $ctx = Digest::MD5->new;
for my $k (sort keys %h) { $ctx->add($k, $h{$k}); }
print $ctx->hexdigest, "\n";
EOF
    cp "$WORKLOADS/JavaMap.java" .
fi
# The second set's inputs: this repository at a fixed commit, JSON, a Makefile,
# a Node program with worker threads.
if { [ "${PROGSET:-1}" = 2 ] || [ "${PROGSET:-1}" = all ]; } && [ ! -d repo ]; then
    git clone -q "$REPO" repo && git -C repo checkout -q "$REPO_COMMIT" || exit 2
    "$PY" - <<'EOF'
import json, random
random.seed(5)
json.dump([{"k": i, "v": random.randrange(10**6), "s": "x" * (i % 23), "t": [random.random()] * (i % 4)}
           for i in range(250000)], open("data.json", "w"))
EOF
    mkdir -p mk && for i in 1 2 3 4; do
        sed "s/\bf\([0-9]\)/g${i}_\1/g; s/int main()/int main$i()/" big.c > "mk/u$i.c"
    done
    printf 'all: u.a\nu.a: u1.o u2.o u3.o u4.o\n\tar rcD $@ $^\n%%.o: %%.c\n\tgcc -O2 -c -o $@ $<\nclean:\n\trm -f *.o u.a\n' > mk/Makefile
    cat > node_workers.js <<'EOF'
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');
const crypto = require('crypto');
function work(seed) {
  const m = new Map(); let x = seed;
  for (let i = 0; i < 250000; i++) { x = (x * 1103515245 + 12345) & 0x7fffffff; m.set('k' + i, [x, 'w'.repeat(i % 11)]); }
  const h = crypto.createHash('sha256'); for (const [k, v] of m) h.update(k + v[0] + v[1]); return h.digest('hex');
}
if (isMainThread) {
  const ps = [1, 2].map(s => new Promise(r => new Worker(__filename, { workerData: s }).on('message', r)));
  Promise.all(ps).then(hs => console.log(hs.join(' '), work(3)));
} else parentPort.postMessage(work(workerData));
EOF
fi

# The third set's inputs: programs that move heap buffers through sockets and pipes, Node's
# zlib in its thread pool, Tcl, and a C++ file heavy in templates.
if { [ "${PROGSET:-1}" = 3 ] || [ "${PROGSET:-1}" = all ]; } && [ ! -f gpp.cpp ]; then
    cat > py_sock.py <<'EOF'
import hashlib, socket, threading
data = bytearray(b"".join(b"%08x swap zspage %d handle\n" % ((i * 2654435761) & 0xFFFFFFFF, i % 977)
                          for i in range(1_600_000)))
n = len(data)
sink = bytearray(n)
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
got = []
def serve():
    c, _ = srv.accept()
    view, k = memoryview(sink), 0
    while k < n:
        r = c.recv_into(view[k:], min(1 << 20, n - k))
        if r == 0:
            break
        k += r
    got.append(k); c.close()
t = threading.Thread(target=serve); t.start()
cl = socket.create_connection(srv.getsockname())
view = memoryview(data)
for off in range(0, n, 3 << 20):
    cl.sendall(view[off:off + (3 << 20)])
cl.close(); t.join()
print(hashlib.sha256(sink).hexdigest(), got[0], sink == data)
EOF
    cat > py_pipe.py <<'EOF'
import hashlib, subprocess
data = b"".join(b"%08x %d\n" % ((i * 2654435761) & 0xFFFFFFFF, i) for i in range(1_500_000))
out = subprocess.run(["sort"], input=data, capture_output=True, check=True).stdout
rev = subprocess.run(["tac"], input=out, capture_output=True, check=True).stdout
print(hashlib.sha256(out).hexdigest(), hashlib.sha256(rev).hexdigest(), len(out))
EOF
    cat > node_zlib.js <<'EOF'
const zlib = require('zlib'), crypto = require('crypto');
const bufs = [1, 2, 3, 4].map(s => { const b = Buffer.alloc(12e6); let x = s;
  for (let i = 0; i < b.length; i++) { x = (x * 1103515245 + 12345) & 0x7fffffff; b[i] = ((x >> 16) % 7 === 0) ? 97 + (x % 26) : 65 + (i % 13); }
  return b; });
Promise.all(bufs.map(b => new Promise((res, rej) => zlib.gzip(b, { level: 6 }, (e, r) => e ? rej(e) : res(r)))))
  .then(rs => Promise.all(rs.map(r => new Promise((res, rej) => zlib.gunzip(r, (e, u) => e ? rej(e) : res([r, u]))))))
  .then(ps => { const h = crypto.createHash('sha256');
    ps.forEach(([r, u], i) => { h.update(r); if (!u.equals(bufs[i])) throw new Error('round trip ' + i); });
    console.log(h.digest('hex'), ps.map(p => p[0].length).join(' ')); });
EOF
    cat > tcl_dict.tcl <<'EOF'
set d [dict create]
set x 1
for {set i 0} {$i < 400000} {incr i} {
    set x [expr {($x * 1103515245 + 12345) % 2147483648}]
    dict set d k$i "[string repeat v [expr {$i % 7 + 1}]]$x"
}
set s 0
foreach k [lsort [dict keys $d]] { set s [expr {($s * 31 + [string length [dict get $d $k]]) % 1000000007}] }
puts "$s [dict size $d]"
EOF
    {
        printf '#include <map>\n#include <string>\n#include <vector>\n#include <regex>\n'
        printf '#include <sstream>\n#include <unordered_map>\n#include <functional>\n'
        printf 'template <int N> struct Box { std::map<std::string, std::vector<int>> m; int f(const std::string& s) { std::regex r("[a-z]+" + std::to_string(N)); std::smatch sm; int c = 0; for (auto& [k, v] : m) if (std::regex_search(k, sm, r)) c += v.size() + N; return c + (int)s.size(); } };\n'
        for i in $(seq 1 60); do
            printf 'int use%d(const std::string& s) { Box<%d> b; b.m[s].push_back(%d); std::unordered_map<std::string, std::function<int(int)>> u; u[s] = [](int x){ return x * %d; }; std::ostringstream o; o << b.f(s) << u[s](%d); return (int)o.str().size(); }\n' "$i" "$i" "$i" "$i" "$i"
        done
    } > gpp.cpp
fi

# A Rust crate that cargo builds from scratch: cargo is paged, the rustc it starts links its
# own malloc and runs unpaged (counted), the C compiler driver and linker rustc starts are paged.
if { [ "${PROGSET:-1}" = 3 ] || [ "${PROGSET:-1}" = all ]; } && [ ! -d cdemo ]; then
    mkdir -p cdemo/src
    printf '[package]\nname = "cdemo"\nversion = "0.1.0"\nedition = "2021"\n' > cdemo/Cargo.toml
    cat > cdemo/src/main.rs <<'EOF'
use std::collections::{BTreeMap, HashMap};
fn main() {
    let mut m: HashMap<String, Vec<u64>> = HashMap::new();
    for i in 0..200_000u64 {
        m.entry(format!("k{}", i % 5000)).or_default().push(i * 7919 % 1_000_003);
    }
    let b: BTreeMap<_, _> = m.iter().map(|(k, v)| (k.clone(), v.iter().sum::<u64>())).collect();
    println!("{} {}", b.len(), b.values().sum::<u64>());
}
EOF
fi

# name|command (run with sh -c).
PROGS=(
    "py_dict|$PY py_dict.py"
    "py_mp|$PY py_mp.py"
    "py_sqlite|$PY py_sqlite.py"
    "node_map|node node_map.js"
    "perl_hash|perl perl_hash.pl"
    "sort|sort -S 120M --parallel=2 words.txt | sha256sum"
    "xz|xz -T2 -6 -c text.txt | sha256sum"
    "gcc|gcc -O2 -c -o big.o big.c && sha256sum < big.o"
    "sqlite3|sqlite3 :memory: \"pragma cache_size=-100000; create table t(a,b); with recursive c(x) as (select 1 union all select x+1 from c where x<400000) insert into t select x, printf('%08d-%d', (x*7919) % 1000003, x) from c; create index i on t(b); select count(*), sum(length(b)), max(b), min(b) from t;\""
    "java|java -XX:+UseSerialGC -Xmx256m JavaMap.java 400000 3"
)
PROGS2=(
    "git_log|git -C repo log -p --stat $REPO_COMMIT | sha256sum"
    "git_grep|git -C repo grep -n -e unsafe -e fn --threads=2 $REPO_COMMIT | sha256sum"
    "tar_gz|tar -C repo -cf - --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner crates docs | gzip -6 -n | sha256sum"
    "bzip2|bzip2 -9 -c words.txt | sha256sum"
    "zstd19|zstd -19 -T2 -q -c words.txt | sha256sum"
    "jq|jq -S -c 'group_by(.k % 97) | map({k: (.[0].k % 97), n: length, v: (map(.v) | add), s: (map(.s) | join(\"\") | length)})' data.json | sha256sum"
    "awk|awk '{c[substr(\$1,1,3)]+=length(\$2)} END{n=0; for(k in c) n+=c[k]*length(k); print n, length(c)}' words.txt"
    "make|make -s -C mk clean && make -s -j2 -C mk && sha256sum mk/u1.o mk/u4.o"
    "java_g1|java -XX:+UseG1GC -XX:ParallelGCThreads=2 -Xmx256m JavaMap.java 400000 3"
    "node_workers|node node_workers.js"
)
PROGS3=(
    "py_sock|$PY py_sock.py"
    "py_pipe|$PY py_pipe.py"
    "node_zlib|node node_zlib.js"
    "tcl_dict|tclsh tcl_dict.tcl"
    "gpp|g++ -O1 -frandom-seed=1 -c -o gpp.o gpp.cpp && sha256sum < gpp.o"
    "java_par|java -XX:+UseParallelGC -XX:ParallelGCThreads=2 -Xmx256m JavaMap.java 400000 3"
    "cargo|d=\$(mktemp -d ctgt.XXXXXX) && cargo build --release --offline -q --manifest-path cdemo/Cargo.toml --target-dir \$d && sha256sum < \$d/release/cdemo && \$d/release/cdemo; rm -rf \$d"
)
case "${PROGSET:-1}" in
    1) ;;
    2) PROGS=("${PROGS2[@]}") ;;
    3) PROGS=("${PROGS3[@]}") ;;
    all) PROGS+=("${PROGS2[@]}" "${PROGS3[@]}") ;;
    *) echo "PROGSET is 1, 2, 3 or all" >&2; exit 2 ;;
esac
# name|flags; c4 writes back to the swap files with O_DIRECT; c5 adds fault-around.
CONFS=(
    "c0|"
    "c1|--compressor lzo-rle --background-reclaim off"
    "c2|--compressor zstd --keep-clean off --readahead 0"
    "c3|--compressor deflate --victim fifo --chain-size 16"
    "c4|--budget-covers resident --direct-io --total-memory 256M --max-pool-percent 10 --shrinker on"
    "c5|--victim clock-faults --lru per-pool --zero-pages entry --compressor lzo"
)
selected() { [ -z "$1" ] || [[ " $1 " == *" $2 "* ]]; }
# The third set's PostgreSQL: a server and its client in one tree. The server drops from root
# to the postgres user with setpriv (as a service manager starts it), forks a backend per
# connection and sorts and indexes in its private memory; the output is the query results'
# hash. Only as root, with PostgreSQL, setpriv and a postgres user on the machine.
PGBIN=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -1)
if { [ "${PROGSET:-1}" = 3 ] || [ "${PROGSET:-1}" = all ]; } && [ ! -f pg_run.sh ] &&
    [ "$(id -u)" = 0 ] && [ -x "$PGBIN/initdb" ] && command -v setpriv > /dev/null &&
    id postgres > /dev/null 2>&1; then
    chmod 755 . && mkdir -p pg && chown postgres pg
    AS="setpriv --reuid postgres --regid postgres --init-groups --reset-env"
    $AS "$PGBIN/initdb" -D "$PWD/pg/data" -A trust -U postgres > pg/initdb.log 2>&1
    cat > pg/q.sql <<'EOF'
drop table if exists t;
create table t(a int, b text, c float8);
insert into t select i, md5(i::text) || repeat('x', i % 50), (i::bigint * 7919 % 1000003)::float8 / 7 from generate_series(1, 600000) i;
create index on t(b);
select count(*), sum(length(b)), md5(string_agg(b, ',' order by b)) from t;
select a % 1000 as k, count(*), sum(c)::numeric(20,3) from t group by 1 order by 1 limit 20;
with s as (select b, row_number() over (order by c desc) r from t) select md5(string_agg(b || r, ';' order by r)) from s where r < 100000;
EOF
    chmod 644 pg/q.sql
    cat > pg_run.sh <<EOF
# Written by pager-torture.sh: a PostgreSQL server and its client, one process tree.
D=$PWD/pg; B=$PGBIN; AS="$AS"
PORT=\$((20000 + \$\$ % 20000))
\$AS \$B/postgres -D \$D/data -k \$D -p \$PORT -c shared_buffers=16MB -c work_mem=64MB \\
    -c maintenance_work_mem=128MB -c jit=off -c listen_addresses= > \$D/server.log 2>&1 &
for i in \$(seq 600); do \$B/pg_isready -h \$D -p \$PORT -q && break; sleep 0.1; done
out=\$(\$AS \$B/psql -h \$D -p \$PORT -X -q -A -t -f \$D/q.sql postgres 2> /dev/null)
echo "psql status \$?"
printf '%s\\n' "\$out" | sha256sum
\$AS \$B/pg_ctl -D \$D/data stop -m fast > /dev/null || \$AS \$B/pg_ctl -D \$D/data stop -m immediate
wait
EOF
fi
if { [ "${PROGSET:-1}" = 3 ] || [ "${PROGSET:-1}" = all ]; } && [ -f pg_run.sh ]; then
    PROGS+=("postgres|sh pg_run.sh")
fi

declare -A PEAK
for p in "${PROGS[@]}"; do
    name=${p%%|*}; cmd=${p#*|}
    selected "${ONLY:-}" "$name" || continue
    [ -f "$name.plain.out" ] && [ -f "$name.peak" ] ||
        /usr/bin/time -f "%M" -o "$name.peak" sh -c "$cmd" > "$name.plain.out" 2>/dev/null
    PEAK[$name]=$(( $(tail -1 "$name.peak") / 1024 ))
done

FRACS=("$@"); [ ${#FRACS[@]} = 0 ] && FRACS=(3 6)
fail=0
for frac in "${FRACS[@]}"; do
    for conf in "${CONFS[@]}"; do
        cname=${conf%%|*}; opts=${conf#*|}
        selected "${CONF_ONLY:-}" "$cname" || continue
        for p in "${PROGS[@]}"; do
            name=${p%%|*}; cmd=${p#*|}
            selected "${ONLY:-}" "$name" || continue
            b=$(( PEAK[$name] / frac )); [ $b -lt 12 ] && b=12
            # xz's and zstd -19's match finders read their whole window at random: below it,
            # every access is a fault (xz at 1/3: 20 M faults and 7 minutes; zstd at 1/2: more
            # than 400 s against 31 s plainly). Their budgets stay at 3/4 of their peaks.
            # Only in the first round: the same budget again would repeat the same run.
            case $name in xz | zstd19)
                [ "$frac" = "${FRACS[0]}" ] || continue
                b=$(( PEAK[$name] * 3 / 4 )) ;;
            esac
            envx=(); [ "$cname" = c5 ] && envx=(UZSWAP_FAULT_AROUND=1)
            t0=$(date +%s.%N)
            # shellcheck disable=SC2086
            env "${envx[@]}" timeout "${TIMEOUT:-900}" "$UZSWAP" run --memory-max ${b}M $opts \
                --report "r.$name.$cname.$frac.json" -- sh -c "$cmd" \
                > "$name.$cname.$frac.out" 2> "$name.$cname.$frac.err"
            rc=$?; t1=$(date +%s.%N)
            if [ $rc = 0 ] && cmp -s "$name.plain.out" "$name.$cname.$frac.out"; then st=OK; else st=FAIL; fail=1; fi
            f=$("$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); f=d['faults']; print(f['count'], f['from_pool'], f['from_swapfile'], d['peak_rss_bytes'] >> 20)" \
                "r.$name.$cname.$frac.json" 2>/dev/null)
            printf "%s %-10s %s 1/%s %4sM rc=%s %6.1fs faults/pool/file/peakMiB=%s\n" \
                $st "$name" "$cname" "$frac" $b $rc "$(echo "$t1 - $t0" | bc)" "$f"
        done
    done
done
exit $fail
