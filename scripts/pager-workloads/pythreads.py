# SPDX-License-Identifier: MIT
# Python with threads: THREADS threads each build a list of N strings (about 100 bytes each)
# and read it back PASSES times in a shuffled order, all at once, so page faults come from
# every thread (the GIL switches between them every few milliseconds). Prints one digest.
import hashlib
import random
import sys
import threading

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 4
n = int(sys.argv[2]) if len(sys.argv) > 2 else 150_000
passes = int(sys.argv[3]) if len(sys.argv) > 3 else 3
out = [None] * threads


def work(k):
    data = [f"thread {k} item {i:08d} " + "abcdefghij" * (i % 9) for i in range(n)]
    order = list(range(n))
    random.Random(k).shuffle(order)
    h = hashlib.sha256()
    for _ in range(passes):
        for i in order[: n // 2]:
            h.update(data[i].encode())
    out[k] = h.hexdigest()[:8]


ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(" ".join(out))
