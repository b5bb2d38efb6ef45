// SPDX-License-Identifier: MIT
// System calls on heap buffers in a loop: the cost of the preload library's pins.
//   cc -O2 -o syscall_loop syscall_loop.c
//   uzswap run --memory-max 64M -- ./syscall_loop read 1000000   (4 KiB read from /dev/zero)
//   uzswap run --memory-max 64M -- ./syscall_loop stat 1000000   (stat of a heap path into a heap buffer)
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    long n = atol(argv[2]);
    char *buf = malloc(4096), *path = malloc(64);
    struct stat *st = malloc(sizeof *st);
    snprintf(path, 64, "/etc/hostname");
    int fd = open("/dev/zero", O_RDONLY);
    int rd = strcmp(argv[1], "read") == 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    long s = 0;
    for (long i = 0; i < n; i++) {
        if (rd) s += read(fd, buf, 4096);
        else s += stat(path, st) == 0 ? st->st_size : 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%s: %.1f ns per call (%ld)\n", argv[1], ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n, s & 1);
    return 0;
}
