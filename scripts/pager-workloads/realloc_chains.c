// SPDX-License-Identifier: MIT
// realloc growth chains: ROUNDS times, a block grows by 1.5x from START to END bytes, each new
// part written; prints the time per chain. Under `uzswap run` it shows what a realloc costs
// when the allocator purges and reuses memory (docs/pager.md "The heap's footprint").
// Usage: realloc_chains START END ROUNDS   (e.g. 65536 4194304 300)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: realloc_chains START END ROUNDS\n");
        return 2;
    }
    size_t start = strtoul(argv[1], 0, 0), end = strtoul(argv[2], 0, 0);
    int rounds = atoi(argv[3]);
    struct timespec a, b;
    unsigned long sum = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int r = 0; r < rounds; r++) {
        size_t n = start;
        unsigned char *p = malloc(n);
        memset(p, r, n);
        while (n < end) {
            size_t m = n + n / 2;
            p = realloc(p, m);
            memset(p + n, r + 1, m - n);
            n = m;
        }
        sum += p[n / 2] + p[0];
        free(p);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.1f us per chain (sum %lu)\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 1e3 / rounds, sum);
    return 0;
}
