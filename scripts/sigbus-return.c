// SPDX-License-Identifier: MIT
// Usage: cc -O2 -o sigbus-return scripts/sigbus-return.c && ./sigbus-return [PAGES] 0|1|2
// (root or vm.unprivileged_userfaultfd=1). BENCHMARKS.md section 6, the seventh-session entry.
// A missing page of a userfaultfd in SIGBUS mode, resolved in the handler by UFFDIO_COPY, timed
// from the access to its return, p50/p90 over PAGES faults, three rounds. How the handler
// returns: 0 by returning (rt_sigreturn, the access retried: the pager's way); 1 by
// siglongjmp with the signal mask restored (a system call instead of sigreturn); 2 by _longjmp
// with nothing restored (SA_NODEFER and an empty sa_mask, so no mask changed: the cheapest
// return possible, which the pager cannot use because its handler must run with signals blocked).
#define _GNU_SOURCE
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <time.h>
#include <signal.h>
#include <setjmp.h>
#include <ucontext.h>
#define PG 4096
static int uffd; static char buf[PG];
static sigjmp_buf jb; static int mode;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
static void h(int sig, siginfo_t*si, void*uc){
  (void)sig; (void)uc;
  unsigned long a=(unsigned long)si->si_addr & ~(PG-1UL);
  struct uffdio_copy c={.dst=a,.src=(unsigned long)buf,.len=PG,.mode=0};
  if(ioctl(uffd,UFFDIO_COPY,&c)){perror("copy");_exit(1);}
  if(mode==1) siglongjmp(jb,1);  /* no sigreturn; restores mask via syscall (savemask=1) */
  if(mode==2) _longjmp(jb,1);     /* no sigreturn, no mask restore (SA_NODEFER, empty mask) */
}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  int N=argc>1?atoi(argv[1]):8192; mode=argc>2?atoi(argv[2]):0;
  uffd=syscall(SYS_userfaultfd,O_CLOEXEC|1);
  struct uffdio_api api={.api=UFFD_API,.features=UFFD_FEATURE_SIGBUS};
  if(ioctl(uffd,UFFDIO_API,&api)){perror("api");return 1;}
  char*dst=mmap(0,(size_t)N*PG,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  madvise(dst,(size_t)N*PG,MADV_NOHUGEPAGE);
  struct uffdio_register r={.range={(unsigned long)dst,(size_t)N*PG},.mode=UFFDIO_REGISTER_MODE_MISSING};
  if(ioctl(uffd,UFFDIO_REGISTER,&r)){perror("reg");return 1;}
  stack_t ss={.ss_sp=malloc(65536),.ss_size=65536}; sigaltstack(&ss,0);
  struct sigaction sa={0}; sa.sa_sigaction=h; sa.sa_flags=SA_SIGINFO|SA_ONSTACK|(mode==2?SA_NODEFER:0);
  if(mode!=2) sigfillset(&sa.sa_mask); else sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS,&sa,0);
  memset(buf,5,PG);
  double*t=malloc(sizeof(double)*N);
  for(int round=0;round<3;round++){
    for(int i=0;i<N;i++){
      volatile char*p=dst+(size_t)i*PG; double a=now();
      if(mode==0){ (void)*p; }
      else if(mode==1){ if(!sigsetjmp(jb,1)) (void)*p; }
      else { if(!_setjmp(jb)) (void)*p; }
      t[i]=now()-a;
    }
    qsort(t,N,sizeof(double),cmp); printf("mode %d: p50 %.0f ns p90 %.0f\n",mode,t[N/2],t[N*9/10]);
    madvise(dst,(size_t)N*PG,MADV_DONTNEED);
  }
  return 0;}
