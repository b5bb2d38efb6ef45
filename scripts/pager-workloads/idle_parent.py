# SPDX-License-Identifier: MIT
# An idle process beside a busy one (docs/pager.md, "Idle processes give first"): the parent
# builds N MB of data, then waits for a child program (a new interpreter, not a fork) that
# builds its own N MB and walks it PASSES times; then the parent hashes its data again.
# Usage: python3 idle_parent.py N_MB PASSES
import hashlib, subprocess, sys, time


def build(n_mb, seed):
    # Strings of 100 bytes, a third of them unlike the others: about 2.5x compressible.
    return [("%08d" % ((i * seed) % 99991)) * 8 + "x" * 36 for i in range(n_mb * 8000)]


def digest(data):
    h = hashlib.sha256()
    for s in data:
        h.update(s.encode())
    return h.hexdigest()[:16]


if sys.argv[1] == "child":
    n, passes = int(sys.argv[2]), int(sys.argv[3])
    t = time.monotonic()
    data = build(n, 7)
    for p in range(passes):
        data = [s[1:] + s[0] for s in data]
    print("child", digest(data))
    print("child time %.3f s" % (time.monotonic() - t), file=sys.stderr)
else:
    n, passes = int(sys.argv[1]), int(sys.argv[2])
    data = build(n, 3)
    out = subprocess.run([sys.executable, __file__, "child", str(n), str(passes)],
                         check=True, capture_output=True, text=True)
    sys.stderr.write(out.stderr)
    print(out.stdout, end="")
    print("parent", digest(data))
