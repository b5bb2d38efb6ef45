// SPDX-License-Identifier: MIT
// hotshift: a read-mostly working set that moves. Allocates MiB megabytes, fills them with
// compressible text, then runs PHASES phases of ACCESSES page reads each: 90 % inside a hot
// window of a tenth of the pages, 10 % anywhere; the window moves by a tenth every phase. It
// checks that victim selection lets an old hot set go (active pages must not hold memory
// after their phase). Prints a checksum, identical with and without a pager.
// cc -O2 -o hotshift hotshift.c ; ./hotshift MiB PHASES ACCESSES
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: hotshift MiB PHASES ACCESSES\n");
        return 2;
    }
    size_t pages = (size_t)atol(argv[1]) * 256;
    long phases = atol(argv[2]), accesses = atol(argv[3]);
    unsigned char *m = malloc(pages * 4096);
    if (!m) return 1;
    for (size_t p = 0; p < pages; p++)
        for (size_t o = 0; o < 4096; o += 64)
            snprintf((char *)m + p * 4096 + o, 64, "page %zu offset %zu word %zu ", p, o, (p * 31 + o) % 977);
    uint64_t sum = 0;
    size_t window = pages / 10 ? pages / 10 : 1;
    for (long ph = 0; ph < phases; ph++) {
        size_t base = (size_t)ph * window % pages;
        for (long a = 0; a < accesses; a++) {
            uint64_t r = next();
            size_t p = (r % 10) ? (base + (r >> 8) % window) % pages : (r >> 8) % pages;
            sum += m[p * 4096 + (r >> 40) % 4096];
        }
    }
    printf("%016llx\n", (unsigned long long)sum);
    return 0;
}
