// SPDX-License-Identifier: MIT
// Random rewrites of incompressible heap pages: randrw MiB ACCESSES [SLEEP_S]. Fills MiB of
// 4000-byte malloc blocks with xorshift bytes, then reads one and writes one byte of a random
// block ACCESSES times, prints a checksum and the monotonic time of its last output (for the
// exit lag: scripts/pager-exit-lag.sh), and optionally sleeps before exiting.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){
  long mb=atol(argv[1]); long iters=atol(argv[2]);
  long n=mb*256; char **p=malloc(n*sizeof(char*)); unsigned long x=88172645463325252UL;
  for(long i=0;i<n;i++){p[i]=malloc(4000); for(int j=0;j<4000;j+=8){x^=x<<13;x^=x>>7;x^=x<<17;memcpy(p[i]+j,&x,8);} sprintf(p[i],"page %ld",i);}
  long sum=0;
  for(long k=0;k<iters;k++){ x^=x<<13;x^=x>>7;x^=x<<17; long i=x%n; sum+=p[i][100]; p[i][200+(k%3000)]=(char)k; }
  printf("sum %ld done at %.3f\n",sum,now()); fflush(stdout);
  if(argc>3)sleep(atoi(argv[3]));
  return 0;
}
