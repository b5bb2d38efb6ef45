#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Fork programs under two builds of `uzswap run`, run by run in turn: run time (the report's
`elapsed_s`, paired ratio NEW/OLD), peak charged and pool (the report's `budget`), the fork
child's VmHWM where the program prints it, and the runs with a budget warning.

Usage: scripts/pager-fork-ab.py OLD_UZSWAP NEW_UZSWAP [RUNS] [PY_MP]
PY_MP: a Python multiprocessing script (pager-torture.sh writes `py_mp.py`), run at 13M if given.
The C programs are built here, with cc, in a temporary directory."""
import json, os, shutil, statistics, subprocess, sys, tempfile

VAL = "static unsigned long val(size_t i) { return (i / 8) % 1000 * 7 + (i >> 14); }\n"
HEAD = "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <unistd.h>\n" \
       "#include <sys/mman.h>\n#include <sys/wait.h>\n"
PROGS = {
    # 48 MiB; three children each read 64 words, the parent re-reads everything after each.
    "peek": HEAD + "#define SZ (48UL << 20)\n" + VAL + r"""
int main(void) {
    unsigned char *a = malloc(SZ); size_t bad = 0;
    for (size_t i = 0; i < SZ; i += 8) *(unsigned long *)(a + i) = val(i);
    for (int k = 0; k < 3; k++) {
        pid_t c = fork();
        if (c == 0) { for (size_t i = 0; i < SZ; i += SZ / 64) bad += *(unsigned long *)(a + i) != val(i); _exit(bad != 0); }
        int st; waitpid(c, &st, 0); bad += st != 0;
        for (size_t i = 0; i < SZ; i += 8) bad += *(unsigned long *)(a + i) != val(i);
    }
    printf("%zu bad\n", bad); return bad != 0;
}
""",
    # 48 MiB; the child reads everything, rewrites a quarter, reads again.
    "readall": HEAD + "#define SZ (48UL << 20)\n" + VAL + r"""
int main(void) {
    unsigned char *a = malloc(SZ);
    for (size_t i = 0; i < SZ; i += 8) *(unsigned long *)(a + i) = val(i);
    pid_t c = fork();
    if (c == 0) {
        size_t bad = 0;
        for (size_t i = 0; i < SZ; i += 8) bad += *(unsigned long *)(a + i) != val(i);
        for (size_t i = 0; i < SZ / 4; i += 8) *(unsigned long *)(a + i) = ~val(i);
        for (size_t i = 0; i < SZ; i += 8) bad += *(unsigned long *)(a + i) != (i < SZ / 4 ? ~val(i) : val(i));
        printf("child: %zu bad\n", bad); fflush(stdout); _exit(bad != 0);
    }
    int st; waitpid(c, &st, 0); size_t bad = 0;
    for (size_t i = 0; i < SZ; i += 8) bad += *(unsigned long *)(a + i) != val(i);
    printf("parent: %zu bad, child %d\n", bad, WEXITSTATUS(st)); return bad != 0 || st != 0;
}
""",
    # 40 MiB mapping; the parent unmaps it right after the fork, the child sleeps, then reads
    # and writes everything twice and prints its VmHWM.
    "letgo": HEAD + "#define SZ (40UL << 20)\n" + VAL + r"""
static long hwm_kb(void) {
    FILE *f = fopen("/proc/self/status", "r"); char l[256]; long v = -1;
    while (fgets(l, sizeof l, f)) if (!strncmp(l, "VmHWM:", 6)) v = atol(l + 6);
    fclose(f); return v;
}
int main(void) {
    unsigned char *a = mmap(0, SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (size_t i = 0; i < SZ; i += 8) *(unsigned long *)(a + i) = val(i);
    pid_t c = fork();
    if (c == 0) {
        usleep(400000); size_t bad = 0;
        for (int r = 0; r < 2; r++) {
            for (size_t i = 0; i < SZ; i += 8) bad += *(unsigned long *)(a + i) != val(i);
            for (size_t i = 0; i < SZ; i += 4096) a[i + 100] ^= 1;
            for (size_t i = 0; i < SZ; i += 4096) a[i + 100] ^= 1;
        }
        fprintf(stderr, "child VmHWM %ld KB\n", hwm_kb());
        printf("child: %zu bad\n", bad); fflush(stdout); _exit(bad != 0);
    }
    munmap(a, SZ); int st; waitpid(c, &st, 0);
    printf("parent: child %d\n", WEXITSTATUS(st)); return st != 0;
}
""",
}
C4 = ["--budget-covers", "resident", "--direct-io", "--total-memory", "64M",
      "--max-pool-percent", "3", "--shrinker", "on"]


def main():
    old, new = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    work = tempfile.mkdtemp(prefix="uzswap-fork-ab.")
    exe = {}
    for name, src in PROGS.items():
        with open(os.path.join(work, name + ".c"), "w") as f:
            f.write(src)
        exe[name] = os.path.join(work, name)
        subprocess.run(["cc", "-O2", "-o", exe[name], exe[name] + ".c"], check=True)
    cases = [
        ("48 MiB, three children read 64 pages each", "16M", [], [exe["peek"]]),
        ("48 MiB, the child reads all, writes a quarter", "16M", [], [exe["readall"]]),
        ("40 MiB, the parent unmaps it after the fork", "16M", [], [exe["letgo"]]),
        ("the second, resident budget 8M, O_DIRECT, shrinker", "8M", C4, [exe["readall"]]),
    ]
    if len(sys.argv) > 4:
        cases.append(("Python multiprocessing fork pool", "13M", [], [sys.executable, sys.argv[4]]))
    print("| program (SIZE) | run time old / new | new/old | peak charged MiB old / new "
          "| peak pool MiB old / new | child's VmHWM MB old / new | runs with a budget warning old / new |")
    print("|---|---|---|---|---|---|---|")
    for name, size, extra, cmd in cases:
        rows = {"old": [], "new": []}
        for _ in range(runs):
            for b, u in (("old", old), ("new", new)):
                rep = os.path.join(work, "report.json")
                p = subprocess.run([u, "run", "--memory-max", size, *extra, "--report", rep,
                                    "--", *cmd], capture_output=True, text=True, cwd=work)
                r = json.load(open(rep))
                if r["exit_status"] != 0:
                    sys.exit(f"{name}: {b} exited {r['exit_status']}: {p.stderr}")
                hwm = [int(l.split()[-2]) / 1024 for l in p.stderr.splitlines()
                       if l.startswith("child VmHWM")]
                rows[b].append((r["elapsed_s"], r["budget"]["peak_charged_bytes"] / 2**20,
                                r["budget"]["peak_pool_bytes"] / 2**20,
                                hwm[0] if hwm else None, bool(r.get("warnings"))))
        ratio = [n[0] / o[0] for o, n in zip(rows["old"], rows["new"])]

        def med(b, k, fmt):
            v = [x[k] for x in rows[b] if x[k] is not None]
            return format(statistics.median(v), fmt) if v else ""
        both = lambda k, fmt: f"{med('old', k, fmt)} / {med('new', k, fmt)}"
        print(f"| {name} ({size}) | {both(0, '.2f')} s | {statistics.median(ratio):.3f} "
              f"({min(ratio):.3f}-{max(ratio):.3f}) | {both(1, '.1f')} | {both(2, '.2f')} "
              f"| {both(3, '.1f') if rows['new'][0][3] else ''} "
              f"| {sum(x[4] for x in rows['old'])} / {sum(x[4] for x in rows['new'])} |",
              flush=True)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
