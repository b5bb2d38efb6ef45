// SPDX-License-Identifier: MIT
// An idle process beside a busy one (docs/pager.md, "Idle processes give first"):
//   idle_hog hog MiB FILE   fills MiB, waits until FILE exists, reads it all back (checksum);
//   idle_hog work MiB K     fills MiB, walks it K times (every 8th word read, the next written),
//                           prints its own time on stderr.
// Together: sh -c 'idle_hog hog 40 F & sleep 1; idle_hog work 40 6; touch F; wait'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdint.h>
#include <time.h>
static void fill(uint64_t *p, size_t n, uint64_t seed){ for(size_t i=0;i<n;i++){ p[i]= (i%7==0)? seed*2654435761u + i : (i & 0xff); } }
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t mib=atoi(argv[2]); size_t n=mib<<17; uint64_t *p=malloc(n*8);
  if(!strcmp(argv[1],"hog")){ fill(p,n,1); while(access(argv[3],F_OK)) usleep(10000); uint64_t s=0; for(size_t i=0;i<n;i++) s+=p[i]; printf("hog %lu\n",(unsigned long)s); return 0; }
  double t0=now(); int k=atoi(argv[3]); fill(p,n,2); fprintf(stderr,"fill %.3f\n",now()-t0); uint64_t s=0;
  for(int r=0;r<k;r++){ for(size_t i=0;i<n;i+=8){ s+=p[i]; p[i+1]+=r; } fprintf(stderr,"pass %d %.3f\n",r,now()-t0);}
  fprintf(stderr,"work time %.3f s\n",now()-t0);
  printf("work %lu\n",(unsigned long)s); return 0; }
