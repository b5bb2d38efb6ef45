# SPDX-License-Identifier: MIT
# SQLite through Python with a skewed working set: a 300k-row table with an index, point
# queries that mostly hit a hot 10 % of the keys, and a full aggregate every few thousand
# queries (victim selection: the hot pages must survive the scans).
import hashlib
import random
import sqlite3
import sys

rows = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
queries = int(sys.argv[2]) if len(sys.argv) > 2 else 60_000
db = sqlite3.connect(":memory:")
db.execute("create table t (id integer primary key, name text, v real)")
db.executemany(
    "insert into t (name, v) values (?, ?)",
    ((f"name-{i:07d}-" + "x" * (i % 60), i * 0.5) for i in range(rows)),
)
db.execute("create index ti on t(name)")
rng = random.Random(11)
h = hashlib.sha256()
for q in range(queries):
    i = rng.randrange(rows // 10) if rng.random() < 0.9 else rng.randrange(rows)
    r = db.execute("select id, v from t where name >= ? limit 1", (f"name-{i:07d}-",)).fetchone()
    h.update(repr(r).encode())
    if q % 20000 == 19999:
        h.update(repr(db.execute("select count(*), sum(v) from t").fetchone()).encode())
print(h.hexdigest()[:16])
