// SPDX-License-Identifier: MIT
// Uncontended lock/unlock pairs on a heap mutex: the cost of the pthread_mutex_lock wrapper.
// cc -O2 -pthread -o mutex_loop mutex_loop.c; uzswap run --memory-max 64M -- ./mutex_loop 50000000
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    pthread_mutex_t *m = malloc(sizeof *m);
    pthread_mutex_init(m, 0);
    long x = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) { pthread_mutex_lock(m); x += i; pthread_mutex_unlock(m); }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.2f ns per lock/unlock (%ld)\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n, x & 1);
    return 0;
}
