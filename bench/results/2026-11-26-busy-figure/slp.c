#include <stdio.h>
#include <time.h>
static double ts(clockid_t c){struct timespec t; clock_gettime(c,&t); return t.tv_sec*1e9+t.tv_nsec;}
int main(){ int n=20000; double c0=ts(CLOCK_THREAD_CPUTIME_ID), w0=ts(CLOCK_MONOTONIC);
 struct timespec d={0,50000}; for(int i=0;i<n;i++) nanosleep(&d,0);
 printf("per sleep: cpu %.1f us wall %.1f us\n",(ts(CLOCK_THREAD_CPUTIME_ID)-c0)/n/1e3,(ts(CLOCK_MONOTONIC)-w0)/n/1e3);}
