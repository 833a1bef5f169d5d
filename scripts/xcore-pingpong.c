/* Cross-core latency probe: a cache line bounced between a thread on core 0 and one on
 * core 1, 200,000 round trips per sample, one sample a second; prints ns per round trip.
 * On a VM it shows where the host placed the two vCPUs (docs/BENCHMARKS.md, "Runs that
 * fall behind are not clean"): run it before trusting a two-core figure.
 *
 *   gcc -O2 -pthread -o /tmp/xcore-pingpong scripts/xcore-pingpong.c
 *   /tmp/xcore-pingpong [SAMPLES]     (default 30)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Alignas(128) atomic_long flag;
static const long ROUNDS = 200000;

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *peer(void *arg)
{
	(void)arg;
	pin(1);
	for (long i = 0; i < ROUNDS; i++) {
		while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 1)
			;
		atomic_store_explicit(&flag, 2 * i + 2, memory_order_release);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int samples = argc > 1 ? atoi(argv[1]) : 30;
	pin(0);
	for (int r = 0; r < samples; r++) {
		pthread_t t;
		struct timespec a, b, pause = {1, 0};
		atomic_store(&flag, 0);
		if (pthread_create(&t, NULL, peer, NULL) != 0)
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (long i = 0; i < ROUNDS; i++) {
			atomic_store_explicit(&flag, 2 * i + 1, memory_order_release);
			while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 2)
				;
		}
		clock_gettime(CLOCK_MONOTONIC, &b);
		pthread_join(t, NULL);
		printf("%.0f ", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / ROUNDS);
		fflush(stdout);
		nanosleep(&pause, NULL);
	}
	printf("\n");
	return 0;
}
