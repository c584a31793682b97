/*
 * Overhead of the periodic-task API (librtbox), for experiments/api-overhead.sh.
 *
 *   api-overhead calls N       N cycles of rt_enter .. rt_exit: wall time of every call
 *   api-overhead wait N        CPU time of rt_wait_for_period when no sleep is due (period
 *                              1 us, every job late) against clock_gettime + clock_nanosleep
 *                              on a past deadline, the bare cost of a periodic loop's step
 *   api-overhead plain N T_us  N periods of a plain clock_nanosleep(TIMER_ABSTIME) loop with
 *                              100 us of work per period: release latency (wake - release)
 *   api-overhead api N T_us    the same loop through rt_run / rt_wait_for_period (the daemon
 *                              measures its latency; the script reads rtbox status)
 *
 * Prints markdown table rows: | what | n | p50 us | p99 us | max us |
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rtbox.h"

static uint64_t clk(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t mono(void) { return clk(CLOCK_MONOTONIC); }
static uint64_t cpu(void) { return clk(CLOCK_THREAD_CPUTIME_ID); }

static void sleep_until(uint64_t t)
{
	struct timespec ts = {.tv_sec = t / 1000000000u, .tv_nsec = t % 1000000000u};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
		;
}

static void work(uint64_t ns)
{
	uint64_t until = cpu() + ns;
	while (cpu() < until)
		;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void row(const char *what, uint64_t *v, int n)
{
	qsort(v, n, sizeof *v, cmp);
	int p99 = (99 * n + 99) / 100 - 1;
	printf("| %s | %d | %.2f | %.2f | %.2f |\n", what, n, v[(n + 1) / 2 - 1] / 1e3,
	       v[p99] / 1e3, v[n - 1] / 1e3);
}

#define TIMED(slot, call)                                                             \
	do {                                                                          \
		uint64_t t0_ = mono();                                                \
		int rc_ = (call);                                                     \
		(slot)[i] = mono() - t0_;                                             \
		if (rc_ != RT_OK) {                                                   \
			fprintf(stderr, "%s: %s: %s\n", #call, rt_strerror(rc_),      \
				rt_last_error());                                     \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

enum { ENTER, WCET, PERIOD, DEADLINE, PRIO, RUN, WAIT, EXIT, NCALLS };
static const char *names[NCALLS] = {
	"rt_enter (socket: attach, job page)", "rt_set_wcet", "rt_set_period",
	"rt_set_deadline", "rt_set_priority", "rt_run(0) (socket: declare)",
	"rt_wait_for_period (1 ms sleep not counted)", "rt_exit (socket: detach)",
};

static int calls(int n)
{
	uint64_t *v[NCALLS];
	for (int c = 0; c < NCALLS; c++)
		v[c] = calloc(n, sizeof(uint64_t));
	for (int i = 0; i < n; i++) {
		TIMED(v[ENTER], rt_enter());
		TIMED(v[WCET], rt_set_wcet(100000));
		TIMED(v[PERIOD], rt_set_period(1000000));
		TIMED(v[DEADLINE], rt_set_deadline(1000000));
		TIMED(v[PRIO], rt_set_priority(50));
		TIMED(v[RUN], rt_run(0));
		uint64_t c0 = cpu();
		TIMED(v[WAIT], rt_wait_for_period());
		v[WAIT][i] = cpu() - c0; /* its CPU time: the sleep itself is not overhead */
		TIMED(v[EXIT], rt_exit());
	}
	for (int c = 0; c < NCALLS; c++)
		row(names[c], v[c], n);
	return 0;
}

static int wait_cost(int n)
{
	uint64_t *api = calloc(n, sizeof(uint64_t)), *bare = calloc(n, sizeof(uint64_t));
	int i = 0;
	TIMED(api, rt_enter());
	TIMED(api, rt_set_wcet(1));
	TIMED(api, rt_set_period(1000));
	TIMED(api, rt_set_deadline(1000));
	TIMED(api, rt_run(0));
	for (i = 0; i < n; i++) {
		uint64_t c0 = cpu();
		int rc = rt_wait_for_period();
		api[i] = cpu() - c0;
		if (rc != RT_OK)
			return 1;
	}
	i = 0;
	TIMED(bare, rt_exit());
	for (i = 0; i < n; i++) {
		uint64_t c0 = cpu();
		sleep_until(mono() - 1000);
		bare[i] = cpu() - c0;
	}
	row("rt_wait_for_period, no sleep due (CPU time)", api, n);
	row("clock_gettime + clock_nanosleep, past deadline (CPU time)", bare, n);
	return 0;
}

static int plain(int n, uint64_t T)
{
	uint64_t *lat = calloc(n, sizeof(uint64_t)), *cost = calloc(n, sizeof(uint64_t));
	uint64_t r = mono() + T;
	for (int i = 0; i < n; i++, r += T) {
		uint64_t c0 = cpu();
		sleep_until(r);
		lat[i] = mono() - r;
		cost[i] = cpu() - c0;
		work(100000);
	}
	row("plain clock_nanosleep loop: release latency", lat, n);
	row("plain clock_nanosleep loop: CPU time per period step", cost, n);
	return 0;
}

static int api(int n, uint64_t T)
{
	int i = 0;
	uint64_t dummy[1];
	TIMED(dummy, rt_enter());
	TIMED(dummy, rt_set_wcet(200000));
	TIMED(dummy, rt_set_period(T));
	TIMED(dummy, rt_set_deadline(T));
	TIMED(dummy, rt_set_priority(50));
	TIMED(dummy, rt_run(T));
	uint64_t *cost = calloc(n, sizeof(uint64_t));
	for (i = 0; i < n; i++) {
		work(100000);
		uint64_t c0 = cpu();
		if (rt_wait_for_period() != RT_OK)
			return 1;
		cost[i] = cpu() - c0;
	}
	i = 0;
	TIMED(dummy, rt_exit());
	(void)dummy;
	row("rt_wait_for_period loop: CPU time per period step", cost, n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s calls|wait|plain|api N [T_us]\n", argv[0]);
		return 2;
	}
	int n = atoi(argv[2]);
	uint64_t T = argc > 3 ? strtoull(argv[3], NULL, 10) * 1000u : 1000000u;
	if (!strcmp(argv[1], "calls"))
		return calls(n);
	if (!strcmp(argv[1], "wait"))
		return wait_cost(n);
	if (!strcmp(argv[1], "plain"))
		return plain(n, T);
	if (!strcmp(argv[1], "api"))
		return api(n, T);
	fprintf(stderr, "unknown mode %s\n", argv[1]);
	return 2;
}
