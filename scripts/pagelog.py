#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""One page's history from a page-transition log of `uzswap run`.

    UZSWAP_PAGE_LOG=/tmp/pl uzswap run ... -- PROGRAM     # writes /tmp/pl.PID at exit
    scripts/pagelog.py /tmp/pl.PID ADDR [ADDR...] [--forks]

Prints every record of the pages at ADDR (hex), oldest first, with the ranges (fills with
fault-around, readahead, drops, remaps) that cover them; --forks adds the fork events. The
record layout is crates/pager/src/pagelog.rs: four little-endian u64 words, (page address |
event), the state word seen, one more value, (thread id << 40 | monotonic ns).
"""
import struct
import sys

NAMES = {1: 'FAULT', 2: 'FILL_ZERO', 3: 'FILL_EVICTED', 4: 'FILL_RESIDENT', 5: 'READAHEAD',
         6: 'CLAIM', 7: 'MOVED', 8: 'NOT_MOVED', 9: 'STORED', 10: 'COPY_BACK', 11: 'DROP',
         12: 'REMAP', 13: 'FORK_PREPARE', 14: 'FORK_PARENT', 15: 'FORK_CHILD',
         16: 'KEPT_DROPPED', 17: 'MOVE_ERR', 18: 'MOVE_MISREPORTED', 19: 'HOLE',
         20: 'PIN_FILL', 21: 'FILL_FAILED', 22: 'FAULT_BACK',
         23: 'COPIED_OUT'}
RANGE_BYTES = {11, 12}      # DROP, REMAP: state = length in bytes
RANGE_PAGES = {2, 5}        # FILL_ZERO, READAHEAD: state = pages
FORKS = {13, 14, 15}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    if len(args) < 2:
        sys.exit(__doc__)
    data = open(args[0], 'rb').read()
    want = {int(a, 16) & ~0xfff for a in args[1:]}
    forks = '--forks' in sys.argv
    mask = (1 << 40) - 1
    t0 = None
    for i in range(len(data) // 32):
        a, s, x, tt = struct.unpack_from('<4Q', data, i * 32)
        addr, ev = a & ~0xfff, a & 0xfff
        end = addr + (s if ev in RANGE_BYTES else s * 4096 if ev in RANGE_PAGES else 4096)
        hit = any(addr <= w < end for w in want)
        if t0 is None:
            t0 = tt & mask
        if hit or (forks and ev in FORKS):
            t = ((tt & mask) - t0) / 1e6
            print(f"{i:8d} {t:10.3f} ms tid {tt >> 40:6d} {addr:#x} "
                  f"{NAMES.get(ev, ev):16s} s={s:#x} x={x:#x}")


if __name__ == '__main__':
    main()
