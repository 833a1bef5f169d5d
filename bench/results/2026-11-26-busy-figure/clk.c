#include <stdio.h>
#include <time.h>
#include <x86intrin.h>
int main(){ struct timespec a,b,t; long n=20000000; unsigned long s=0;
clock_gettime(CLOCK_MONOTONIC,&a); for(long i=0;i<n;i++){clock_gettime(CLOCK_MONOTONIC,&t); s+=t.tv_nsec;} clock_gettime(CLOCK_MONOTONIC,&b);
printf("clock_gettime %.1f ns\n", ((b.tv_sec-a.tv_sec)*1e9+(b.tv_nsec-a.tv_nsec))/n);
clock_gettime(CLOCK_MONOTONIC,&a); for(long i=0;i<n;i++){s+=__rdtsc();} clock_gettime(CLOCK_MONOTONIC,&b);
printf("rdtsc %.1f ns %lu\n", ((b.tv_sec-a.tv_sec)*1e9+(b.tv_nsec-a.tv_nsec))/n, s&1);}
