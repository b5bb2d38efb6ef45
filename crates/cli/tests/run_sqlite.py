# SPDX-License-Identifier: MIT
import sqlite3, hashlib
db = sqlite3.connect(":memory:")
db.execute("create table t (id integer primary key, name text, v real)")
db.executemany("insert into t (name, v) values (?, ?)", ((f"name-{i}-" + "x" * (i % 50), i * 0.5) for i in range(120000)))
db.execute("create index ti on t(name)")
rows = db.execute("select name, sum(v) from t group by substr(name, 1, 8) order by 1").fetchall()
print(len(rows), hashlib.sha256(repr(rows).encode()).hexdigest()[:16])
