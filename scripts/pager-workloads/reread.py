# SPDX-License-Identifier: MIT
# A Python list of N strings read again and again (clean-page reuse, victim selection):
# iterating touches each string's reference count (CPython writes on reads), while the
# list's own pointer array stays clean.
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
xs = [str(i) * 3 for i in range(n)]
t = 0
for _ in range(rounds):
    for s in xs:
        t += len(s)
print(t)
