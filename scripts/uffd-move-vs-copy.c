// SPDX-License-Identifier: MIT
// Usage: cc -O2 -o uffd-move-vs-copy scripts/uffd-move-vs-copy.c && ./uffd-move-vs-copy 0|1 [FAULTS]
// (0: UFFDIO_COPY from a buffer, 1: UFFDIO_MOVE of a recycled page; root or
// vm.unprivileged_userfaultfd=1). BENCHMARKS.md section 6, the 22:45 entry.
// Fault-in by UFFDIO_COPY from a buffer vs UFFDIO_MOVE of a recycled page, SIGBUS mode,
// resolved by the faulting thread. Eviction: MOVE a batch of resident pages out to a scratch
// area; COPY mode then drops the scratch batch (MADV_DONTNEED), MOVE mode keeps it as the
// recycled pages the next faults decode into.
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifndef UFFDIO_MOVE
struct uffdio_move { uint64_t dst, src, len, mode; int64_t move; };
#define UFFDIO_MOVE _IOWR(UFFDIO, 0x05, struct uffdio_move)
#endif
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 10)
#endif
#define PG 4096
#define N 8192
#define B 32
static int uffd; static volatile int mode;
static char *R, *S, *src;
static volatile int nfree; static char *freep[4096]; static volatile int nholes; static char *holes[4096];
static double now(void){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec*1e9+t.tv_nsec;}
static void h(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)uc;
    char *a = (char *)((uintptr_t)si->si_addr & ~(uintptr_t)(PG-1));
    if (mode == 0) {
        char buf[PG] __attribute__((aligned(64)));
        memcpy(buf, src + ((uintptr_t)a / PG % 64) * 64, PG);
        struct uffdio_copy c = { .dst = (uintptr_t)a, .src = (uintptr_t)buf, .len = PG };
        if (ioctl(uffd, UFFDIO_COPY, &c)) { perror("copy"); _exit(1); }
    } else {
        char *p = freep[--nfree];
        memcpy(p, src + ((uintptr_t)a / PG % 64) * 64, PG);
        struct uffdio_move m = { .dst = (uintptr_t)a, .src = (uintptr_t)p, .len = PG };
        if (ioctl(uffd, UFFDIO_MOVE, &m)) { perror("move"); _exit(1); }
        holes[nholes++] = p;
    }
}
int main(int argc, char **argv) {
    mode = atoi(argv[1]);
    int rounds = argc > 2 ? atoi(argv[2]) : 100000;
    uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
    struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_SIGBUS | UFFD_FEATURE_MOVE };
    if (ioctl(uffd, UFFDIO_API, &api)) { perror("api"); return 1; }
    R = mmap(0, (size_t)N*PG, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
    S = mmap(0, 4096L*PG, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
    src = malloc(2*PG + 64*64); memset(src, 'x', 2*PG + 64*64);
    for (int i = 0; i < 2*PG; i++) src[i] = (char)(i * 7);
    struct uffdio_register reg = { .range = { (uintptr_t)R, (size_t)N*PG }, .mode = UFFDIO_REGISTER_MODE_MISSING };
    if (ioctl(uffd, UFFDIO_REGISTER, &reg)) { perror("reg"); return 1; }
    struct uffdio_register reg2 = { .range = { (uintptr_t)S, 4096L*PG }, .mode = UFFDIO_REGISTER_MODE_MISSING };
    if (ioctl(uffd, UFFDIO_REGISTER, &reg2)) { perror("reg2"); return 1; }
    stack_t ss = { .ss_sp = malloc(1<<16), .ss_size = 1<<16 }; sigaltstack(&ss, 0);
    struct sigaction sa = { .sa_sigaction = h, .sa_flags = SA_SIGINFO | SA_ONSTACK }; sigfillset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, 0);
    // fill R (faults through the handler; the MOVE mode needs recycled pages: seed S with B pages)
    for (int k = 0; k < B; k++) { char *p = S + (size_t)k*PG; struct uffdio_zeropage z = { .range = { (uintptr_t)p, PG } }; ioctl(uffd, UFFDIO_ZEROPAGE, &z); p[0] = 1; }
    int mode_save = mode; mode = 0;
    for (int i = 0; i < N; i++) R[(size_t)i*PG] = 1;
    mode = mode_save;
    for (int k = 0; k < B; k++) freep[nfree++] = S + (size_t)k*PG;
    for (int k = B; k < 2048; k++) holes[nholes++] = S + (size_t)k*PG;
    static uint32_t hist[20000];
    uint64_t x = 88172645463325252ull;
    char *scratch = S + 2048L*PG; // eviction target: B pages
    int resident[N]; for (int i = 0; i < N; i++) resident[i] = 1;
    for (int r = 0; r < rounds; r++) {
        // keep ~N/2 resident: evict a batch of B random resident pages when a batch of faults happened
        if (r % B == 0) {
            int got = 0;
            while (got < B) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; int i = x % N; if (!resident[i]) continue;
                char *d = mode == 1 ? holes[--nholes] : scratch + (size_t)got * PG;
                struct uffdio_move m = { .dst = (uintptr_t)d, .src = (uintptr_t)(R + (size_t)i*PG), .len = PG };
                if (ioctl(uffd, UFFDIO_MOVE, &m)) { perror("evict move"); return 1; }
                resident[i] = 0; got++;
                if (mode == 1) freep[nfree++] = d;
            }
            if (mode == 0) madvise(scratch, (size_t)B*PG, MADV_DONTNEED);
        }
        // fault one non-resident page
        int i; do { x ^= x << 13; x ^= x >> 7; x ^= x << 17; i = x % N; } while (resident[i]);
        double t0 = now();
        volatile char c = R[(size_t)i*PG + 100]; (void)c;
        double t1 = now();
        resident[i] = 1;
        int b = (int)((t1 - t0) / 10); if (b >= 20000) b = 19999; hist[b]++;
    }
    long tot = 0, cum = 0; for (int b = 0; b < 20000; b++) tot += hist[b];
    double p50 = 0, p99 = 0; for (int b = 0; b < 20000; b++) { cum += hist[b]; if (!p50 && cum >= tot/2) p50 = b*10; if (!p99 && cum >= tot*99/100) { p99 = b*10; break; } }
    printf("mode %s: faults %ld p50 %.2f us p99 %.2f us\n", mode ? "move" : "copy", tot, p50/1000, p99/1000);
}
