# SPDX-License-Identifier: MIT
# A large bytes object (compressible text) checksummed again and again: its pages are only
# read once written, the best case for clean-page reuse.
import sys
import zlib

mib = int(sys.argv[1]) if len(sys.argv) > 1 else 96
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
blob = b"".join((b"%08d some text that compresses; " % i) * 128 for i in range(mib * 228))
t = 0
for _ in range(rounds):
    t = zlib.crc32(blob, t)
print(len(blob), t)
