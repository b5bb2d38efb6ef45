// SPDX-License-Identifier: MIT
// Usage: cc -O2 -pthread -o uffd-movein-threads scripts/uffd-movein-threads.c && ./uffd-movein-threads [PAGES] [0|1]
// (second argument 1: a second thread of the process spins on the other CPU, so every TLB flush
// of the process needs an IPI; root or vm.unprivileged_userfaultfd=1). BENCHMARKS.md section 6,
// the seventh-session entry.
// Fills PAGES registered pages one ioctl at a time, three rounds, p50/p90 per page of:
// UFFDIO_COPY_MODE_WP from a buffer; UFFDIO_MOVE of a resident page of an unregistered area;
// the move followed by UFFDIO_WRITEPROTECT (what a read fault kept clean would need); a 4 KiB
// memcpy into the source page then the move (a decode into a recycled page); memcpy then COPY.
#define _GNU_SOURCE
#include <linux/userfaultfd.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <time.h>
#include <pthread.h>
#include <errno.h>
#define PG 4096
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1<<15)
#define UFFD_FEATURE_WP_UNPOPULATED (1<<13)
#endif
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1<<10)
#endif
#ifndef UFFDIO_MOVE
struct uffdio_move{unsigned long long dst,src,len,mode; long long move;};
#define UFFDIO_MOVE ((3UL<<30)|(40UL<<16)|(0xAAUL<<8)|5)
#endif
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
static int uffd;
static volatile int stop;
static void* spin(void*a){(void)a;while(!stop){__asm__ volatile("pause");}return 0;}
static void reg(void*p,size_t len,int mode){struct uffdio_register r={.range={(unsigned long)p,len},.mode=mode};if(ioctl(uffd,UFFDIO_REGISTER,&r)){perror("reg");exit(1);}}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  int N=argc>1?atoi(argv[1]):4096; int threads=argc>2?atoi(argv[2]):0;
  uffd=syscall(SYS_userfaultfd,O_CLOEXEC|UFFD_USER_MODE_ONLY);
  struct uffdio_api api={.api=UFFD_API,.features=UFFD_FEATURE_SIGBUS|UFFD_FEATURE_WP_ASYNC|UFFD_FEATURE_WP_UNPOPULATED|UFFD_FEATURE_MOVE};
  if(ioctl(uffd,UFFDIO_API,&api)){perror("api");return 1;}
  pthread_t th; if(threads){pthread_create(&th,0,spin,0);}
  char*dst=mmap(0,(size_t)N*PG,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  char*stash=mmap(0,(size_t)N*PG,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  madvise(dst,(size_t)N*PG,MADV_NOHUGEPAGE);madvise(stash,(size_t)N*PG,MADV_NOHUGEPAGE);
  reg(dst,(size_t)N*PG,UFFDIO_REGISTER_MODE_MISSING|UFFDIO_REGISTER_MODE_WP);
  char buf[PG]; memset(buf,7,PG);
  double *t=malloc(sizeof(double)*N);
  for(int round=0;round<3;round++){
  // COPY MODE_WP
  for(int i=0;i<N;i++){struct uffdio_copy c={.dst=(unsigned long)dst+(size_t)i*PG,.src=(unsigned long)buf,.len=PG,.mode=UFFDIO_COPY_MODE_WP};
    double a=now(); if(ioctl(uffd,UFFDIO_COPY,&c)){perror("copy");return 1;} t[i]=now()-a;}
  qsort(t,N,sizeof(double),cmp); printf("copy_wp       p50 %6.0f ns p90 %6.0f\n",t[N/2],t[N*9/10]);
  madvise(dst,(size_t)N*PG,MADV_DONTNEED);
  // MOVE from prefaulted stash
  for(int i=0;i<N;i++) stash[(size_t)i*PG]=1, memset(stash+(size_t)i*PG,i,PG);
  for(int i=0;i<N;i++){struct uffdio_move m={.dst=(unsigned long)dst+(size_t)i*PG,.src=(unsigned long)stash+(size_t)i*PG,.len=PG,.mode=0};
    double a=now(); if(ioctl(uffd,UFFDIO_MOVE,&m)){perror("move");return 1;} t[i]=now()-a;}
  qsort(t,N,sizeof(double),cmp); printf("move          p50 %6.0f ns p90 %6.0f\n",t[N/2],t[N*9/10]);
  // check written
  madvise(dst,(size_t)N*PG,MADV_DONTNEED);
  // MOVE + WP
  for(int i=0;i<N;i++) memset(stash+(size_t)i*PG,i,PG);
  for(int i=0;i<N;i++){struct uffdio_move m={.dst=(unsigned long)dst+(size_t)i*PG,.src=(unsigned long)stash+(size_t)i*PG,.len=PG,.mode=0};
    struct uffdio_writeprotect w={.range={(unsigned long)dst+(size_t)i*PG,PG},.mode=UFFDIO_WRITEPROTECT_MODE_WP};
    double a=now(); if(ioctl(uffd,UFFDIO_MOVE,&m)){perror("move");return 1;} if(ioctl(uffd,UFFDIO_WRITEPROTECT,&w)){perror("wp");return 1;} t[i]=now()-a;}
  qsort(t,N,sizeof(double),cmp); printf("move+wp       p50 %6.0f ns p90 %6.0f\n",t[N/2],t[N*9/10]);
  madvise(dst,(size_t)N*PG,MADV_DONTNEED);
  // memcpy into stash page (warm) + MOVE: the real fault path writes the page first
  for(int i=0;i<N;i++) memset(stash+(size_t)i*PG,i,PG);
  for(int i=0;i<N;i++){struct uffdio_move m={.dst=(unsigned long)dst+(size_t)i*PG,.src=(unsigned long)stash+(size_t)i*PG,.len=PG,.mode=0};
    double a=now(); memcpy(stash+(size_t)i*PG,buf,PG); if(ioctl(uffd,UFFDIO_MOVE,&m)){perror("move");return 1;} t[i]=now()-a;}
  qsort(t,N,sizeof(double),cmp); printf("memcpy+move   p50 %6.0f ns p90 %6.0f\n",t[N/2],t[N*9/10]);
  madvise(dst,(size_t)N*PG,MADV_DONTNEED);
  for(int i=0;i<N;i++){struct uffdio_copy c={.dst=(unsigned long)dst+(size_t)i*PG,.src=(unsigned long)buf,.len=PG,.mode=UFFDIO_COPY_MODE_WP};
    double a=now(); memcpy(buf,stash,PG); if(ioctl(uffd,UFFDIO_COPY,&c)){perror("copy");return 1;} t[i]=now()-a;}
  qsort(t,N,sizeof(double),cmp); printf("memcpy+copy   p50 %6.0f ns p90 %6.0f\n",t[N/2],t[N*9/10]);
  madvise(dst,(size_t)N*PG,MADV_DONTNEED);
  }
  stop=1; if(threads)pthread_join(th,0);
  return 0;}
