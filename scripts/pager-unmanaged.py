#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How much of a program's anonymous memory `uzswap run` pages, and how much stays outside.

Runs CMD under `uzswap run --memory-max SIZE [UZSWAP_ARGS]`, samples every process of the tree
every 50 ms (`/proc/PID/smaps`), and prints the peak of anonymous memory in mappings registered
with a userfaultfd (`um` in VmFlags: managed, paged) and outside them, with the largest
kinds of outside mappings (each kind's peak total; permissions, file or [name], and the flags that explain most of them:
`dc` MADV_DONTFORK, `wf` MADV_WIPEONFORK, `lo` locked, `nr` MAP_NORESERVE). The pager's own
memory (the compressed pool, its state arrays) shows as unnamed `rw-p nr` mappings outside;
libraries' data, the `brk` heap and private file mappings written to are outside by design
(docs/pager.md, "What is managed"). A program whose heap shows outside is not being paged.

  scripts/pager-unmanaged.py [--uzswap BIN] SIZE [UZSWAP_ARGS ...] -- CMD ARGS...
"""
import os
import re
import subprocess
import sys
import time

args = sys.argv[1:]
uzswap = 'target/release/uzswap'
if args[:1] == ['--uzswap']:
    uzswap, args = args[1], args[2:]
if '--' not in args or not args:
    sys.exit(__doc__)
split = args.index('--')
size, extra, cmd = args[0], args[1:split], args[split + 1:]

run = subprocess.Popen([uzswap, 'run', '--memory-max', size] + extra + ['--'] + cmd,
                       stdout=subprocess.DEVNULL)


def tree(pid):
    out = [pid]
    try:
        for t in os.listdir(f'/proc/{pid}/task'):
            for c in open(f'/proc/{pid}/task/{t}/children').read().split():
                out += tree(int(c))
    except OSError:
        pass
    return out


peak_in = peak_out = 0
largest = {}
while run.poll() is None:
    inside = outside = 0
    by_key = {}
    for pid in tree(run.pid)[1:]:
        try:
            text = open(f'/proc/{pid}/smaps').read()
        except OSError:
            continue
        for block in re.split(r'\n(?=[0-9a-f]+-[0-9a-f]+ )', text):
            anon = re.search(r'\nAnonymous:\s+(\d+)', block)
            flags = re.search(r'VmFlags:(.*)', block)
            if not anon or anon.group(1) == '0' or not flags:
                continue
            kib, flags = int(anon.group(1)), flags.group(1).split()
            if 'um' in flags:
                inside += kib
                continue
            outside += kib
            head = block.split('\n', 1)[0].split()
            key = ' '.join([head[1]] + head[5:6] + [f for f in flags if f in ('dc', 'wf', 'lo', 'nr')])
            by_key[key] = by_key.get(key, 0) + kib
    for key, kib in by_key.items():
        largest[key] = max(largest.get(key, 0), kib)
    peak_in, peak_out = max(peak_in, inside), max(peak_out, outside)
    time.sleep(0.05)
print(f'exit status {run.returncode}; anonymous memory, peak over the run: '
      f'{peak_in / 1024:.1f} MiB paged, {peak_out / 1024:.1f} MiB outside')
for key, kib in sorted(largest.items(), key=lambda kv: -kv[1])[:6]:
    print(f'  outside: {kib / 1024:8.1f} MiB  {key}')
