// SPDX-License-Identifier: MIT
// memwalk: the C workload of docs/benchmarks/run.md. Allocates MiB megabytes with malloc,
// fills them with compressible data (words and numbers, about 0.4 under lzo), then does
// PASSES passes of random page touches (3 reads and 1 write in 4) from THREADS threads, and
// prints a checksum, identical with and without a pager.
// Usage: memwalk MiB PASSES THREADS
// With MEMWALK_LAT=1 in the environment it also times every access of the walk as the program
// sees it (clock_gettime, vDSO) and prints to stderr how many took 1 us or more and their
// p50/p99: the fault-in latency a program feels, the same measure under the kernel's swap and
// under a pager (the kernel's own swap-in time is not visible per fault from user space).
#include <pthread.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char *mem;
static size_t pages;
static int passes;
static int nthreads;
static uint64_t sums[64];
static int lat_on;
// Latency histogram per thread: 0.1 us buckets up to 100 us, then 10 us buckets up to 100 ms
// (the last bucket everything above).
#define LAT_FINE 1000
#define LAT_BUCKETS (LAT_FINE + 10000)
static uint32_t (*lat)[LAT_BUCKETS];

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *walk(void *arg) {
    long t = (long)arg;
    uint64_t x = 0x9e3779b97f4a7c15ull * (t + 1), s = 0;
    size_t n = pages * passes / nthreads;
    for (size_t k = 0; k < n; k++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t pg = x % pages;
        unsigned char *p = mem + pg * 4096 + (x >> 40) % 4000;
        uint64_t t0 = lat_on ? now_ns() : 0;
        if ((x & 3) == 0) p[0] = (unsigned char)(p[0] + 1);
        s = s * 31 + p[0];
        if (lat_on) {
            uint64_t b = (now_ns() - t0) / 100;
            if (b >= LAT_FINE) b = LAT_FINE + (b - LAT_FINE) / 100;
            lat[t][b < LAT_BUCKETS - 1 ? b : LAT_BUCKETS - 1]++;
        }
    }
    sums[t] = s;
    return 0;
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], 0, 10) : 256;
    passes = argc > 2 ? atoi(argv[2]) : 2;
    nthreads = argc > 3 ? atoi(argv[3]) : 1;
    if (nthreads < 1 || nthreads > 64) nthreads = 1;
    pages = mib << 8;
    mem = malloc(pages * 4096);
    static const char *words[] = {"alpha ", "beta ", "gamma ", "delta ", "memory ", "page ", "swap ", "zswap ", "cache ", "\n"};
    uint64_t x = 42;
    size_t off = 0;
    while (off < pages * 4096 - 32) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        if (x % 5 == 0) off += (size_t)snprintf((char *)mem + off, 32, "%llu ", (unsigned long long)(x % 100000));
        else { const char *w = words[x % 10]; size_t l = strlen(w); memcpy(mem + off, w, l); off += l; }
    }
    lat_on = getenv("MEMWALK_LAT") != 0;
    if (lat_on) lat = calloc((size_t)nthreads, sizeof *lat);
    pthread_t th[64];
    for (long t = 0; t < nthreads; t++) pthread_create(&th[t], 0, walk, (void *)t);
    uint64_t s = 0;
    for (int t = 0; t < nthreads; t++) { pthread_join(th[t], 0); s ^= sums[t]; }
    if (nthreads > 1) s = 0; /* thread interleaving changes the walk's sums; print the data's */
    uint64_t d = 0;
    for (size_t i = 0; i < pages * 4096; i += 4096) d = d * 1000003 + mem[i + 17];
    if (lat_on) {
        // Accesses of 1 us or more: every fault, major or minor; a present page costs far less.
        uint64_t n = 0, seen = 0;
        double p50 = 0, p99 = 0;
        for (int b = 10; b < LAT_BUCKETS; b++) for (int t = 0; t < nthreads; t++) n += lat[t][b];
        for (int b = 10; b < LAT_BUCKETS && n; b++) {
            for (int t = 0; t < nthreads; t++) seen += lat[t][b];
            double us = b < LAT_FINE ? b / 10.0 : LAT_FINE / 10.0 + (b - LAT_FINE) * 10.0;
            if (!p50 && seen * 2 >= n) p50 = us;
            if (!p99 && seen * 100 >= n * 99) { p99 = us; break; }
        }
        fprintf(stderr, "memwalk latency: %llu accesses >= 1 us, p50 %.1f us, p99 %.1f us\n",
                (unsigned long long)n, p50, p99);
    }
    printf("memwalk %zu MiB: data %016llx walk %016llx\n", mib, (unsigned long long)d, (unsigned long long)s);
    return 0;
}
