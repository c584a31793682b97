/*
 * A periodic task written like ExSched's sample program (Figure 2 of the seed paper): enter,
 * declare WCET, period, deadline and priority, run, then n x (work; wait for the period), exit.
 *
 *   cargo build --release -p rtbox-c
 *   cc examples/c/periodic.c -I crates/rtbox-c/include -L target/release -lrtbox -o periodic
 *   RTBOX_BOX=rt LD_LIBRARY_PATH=target/release ./periodic [jobs [work_us [wcet_us [period_us [deadline_us [prio]]]]]]
 *
 * Defaults: 100 jobs of 1000 us of CPU work, WCET 2 ms, period 10 ms, deadline 10 ms, prio 50.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rtbox.h"

#define CHECK(call)                                                                   \
	do {                                                                          \
		int rc_ = (call);                                                     \
		if (rc_ != RT_OK) {                                                   \
			fprintf(stderr, "%s: %s: %s\n", #call, rt_strerror(rc_),      \
				rt_last_error());                                     \
			return 1;                                                     \
		}                                                                     \
	} while (0)

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The job's work: spin until this thread has used `ns` of CPU time. */
static void work(uint64_t ns)
{
	uint64_t until = thread_cpu_ns() + ns;
	while (thread_cpu_ns() < until)
		;
}

static uint64_t arg_us(int argc, char **argv, int i, uint64_t dflt)
{
	return argc > i ? strtoull(argv[i], NULL, 10) * 1000u : dflt;
}

int main(int argc, char **argv)
{
	int nr_jobs = argc > 1 ? atoi(argv[1]) : 100;
	uint64_t work_ns = arg_us(argc, argv, 2, 1000000);
	uint64_t C = arg_us(argc, argv, 3, 2000000);
	uint64_t T = arg_us(argc, argv, 4, 10000000);
	uint64_t D = arg_us(argc, argv, 5, T);
	int prio = argc > 6 ? atoi(argv[6]) : 50;

	CHECK(rt_enter());
	CHECK(rt_set_wcet(C));
	CHECK(rt_set_period(T));
	CHECK(rt_set_deadline(D));
	CHECK(rt_set_priority(prio));
	CHECK(rt_run(0));
	for (int i = 0; i < nr_jobs; i++) {
		work(work_ns); /* User's code. */
		CHECK(rt_wait_for_period());
	}
	CHECK(rt_exit());
	printf("%d jobs\n", nr_jobs);
	return 0;
}
