// SPDX-License-Identifier: MIT
// Fork latency: fills MiB (argv[1]) of poorly compressible words, forks a child that only
// reports when it runs; both print the time since the fork() call (BENCHMARKS.md, 2026-11-28,
// ninth session).
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(int argc, char **argv) {
    size_t sz = (size_t)atoi(argv[1]) << 20;
    unsigned char *a = malloc(sz);
    for (size_t i = 0; i < sz; i += 8) *(unsigned long *)(a + i) = i * 2654435761UL;
    double t0 = now();
    pid_t c = fork();
    if (c == 0) { double t1 = now(); printf("child runs %.3f s after fork()\n", t1 - t0); fflush(stdout); _exit(0); }
    double t1 = now();
    int st; waitpid(c, &st, 0);
    printf("fork returned in the parent after %.3f s\n", t1 - t0);
    return 0;
}
