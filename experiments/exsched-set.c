/*
 * One random task set of the real-kernel Figure 11 (experiments/exsched-fig11-real.sh): one
 * thread per task, each a periodic task of the rtbox API in the box named by RTBOX_BOX. All
 * threads enter and declare first; then every first job is released at one common instant
 * (the critical instant the simulator starts from), and each job burns W of thread CPU time
 * (its whole WCET C unless given) before rt_wait_for_period.
 *
 *   exsched-set DELAY_US DURATION_US C1:T1[:W1] [C2:T2[:W2] ...]   (microseconds, D = T, W <= C)
 *
 * Prints, on stdout, one line per task `task I C_NS T_NS JOBS MISSES TID` and one line per
 * missed job `miss I RELEASE_NS END_NS` (CLOCK_MONOTONIC), so the caller can match each miss
 * against the canaries' record of machine stalls. Exit status 1 with the failed call on
 * stderr if the API refuses.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rtbox.h"

#define MAX_TASKS 64
#define MAX_MISSES 4096

struct task {
	int index;
	uint64_t wcet, period, work;
	uint64_t jobs, misses;
	int tid;
	int failed;
	uint64_t miss_release[MAX_MISSES], miss_end[MAX_MISSES];
};

static struct task tasks[MAX_TASKS];
static pthread_barrier_t entered, started;
static uint64_t first_release, duration;

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The job's work: spin until this thread has used `ns` more of CPU time. */
static void burn(uint64_t ns)
{
	uint64_t until = clock_ns(CLOCK_THREAD_CPUTIME_ID) + ns;
	while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < until)
		;
}

#define TRY(t, call)                                                                    \
	do {                                                                            \
		int rc_ = (call);                                                       \
		if (rc_ != RT_OK) {                                                     \
			fprintf(stderr, "task %d: %s: %s: %s\n", (t)->index, #call,     \
				rt_strerror(rc_), rt_last_error());                     \
			(t)->failed = 1;                                                \
		}                                                                       \
	} while (0)

static void *task_main(void *arg)
{
	struct task *t = arg;
	t->tid = (int)syscall(SYS_gettid);
	TRY(t, rt_enter());
	if (!t->failed) {
		TRY(t, rt_set_wcet(t->wcet));
		TRY(t, rt_set_period(t->period));
		TRY(t, rt_set_deadline(t->period));
	}
	pthread_barrier_wait(&entered);
	pthread_barrier_wait(&started);
	if (t->failed)
		return NULL;
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	TRY(t, rt_run(first_release > now ? first_release - now : 0));
	if (t->failed)
		return NULL;
	uint64_t n = duration / t->period;
	for (uint64_t k = 0; k < (n ? n : 1); k++) {
		uint64_t release = first_release + k * t->period;
		burn(t->work);
		uint64_t end = clock_ns(CLOCK_MONOTONIC);
		t->jobs++;
		if (end > release + t->period) {
			if (t->misses < MAX_MISSES) {
				t->miss_release[t->misses] = release;
				t->miss_end[t->misses] = end;
			}
			t->misses++;
		}
		TRY(t, rt_wait_for_period());
		if (t->failed)
			break;
	}
	TRY(t, rt_exit());
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: exsched-set DELAY_US DURATION_US C1:T1[:W1] [C2:T2[:W2] ...]\n");
		return 2;
	}
	uint64_t delay = strtoull(argv[1], NULL, 10) * 1000u;
	duration = strtoull(argv[2], NULL, 10) * 1000u;
	int n = argc - 3;
	if (n > MAX_TASKS) {
		fprintf(stderr, "exsched-set: at most %d tasks\n", MAX_TASKS);
		return 2;
	}
	for (int i = 0; i < n; i++) {
		unsigned long long c, p, w = 0;
		int got = sscanf(argv[3 + i], "%llu:%llu:%llu", &c, &p, &w);
		if (got == 2)
			w = c;
		if (got < 2 || c == 0 || c > p || w == 0 || w > c) {
			fprintf(stderr, "exsched-set: task %d: want C:T[:W] in us, 0 < W <= C <= T: %s\n",
				i, argv[3 + i]);
			return 2;
		}
		tasks[i].index = i;
		tasks[i].wcet = c * 1000u;
		tasks[i].period = p * 1000u;
		tasks[i].work = w * 1000u;
	}
	/* No page faults in the jobs: small stacks, everything locked. */
	mlockall(MCL_CURRENT | MCL_FUTURE);
	pthread_barrier_init(&entered, NULL, n + 1);
	pthread_barrier_init(&started, NULL, n + 1);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_t th[MAX_TASKS];
	for (int i = 0; i < n; i++)
		if (pthread_create(&th[i], &attr, task_main, &tasks[i]) != 0) {
			perror("pthread_create");
			return 1;
		}
	pthread_barrier_wait(&entered);
	first_release = clock_ns(CLOCK_MONOTONIC) + delay;
	pthread_barrier_wait(&started);
	int failed = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		failed |= tasks[i].failed;
	}
	for (int i = 0; i < n; i++) {
		struct task *t = &tasks[i];
		printf("task %d %llu %llu %llu %llu %d\n", i, (unsigned long long)t->wcet,
		       (unsigned long long)t->period, (unsigned long long)t->jobs,
		       (unsigned long long)t->misses, t->tid);
		for (uint64_t k = 0; k < t->misses && k < MAX_MISSES; k++)
			printf("miss %d %llu %llu\n", i, (unsigned long long)t->miss_release[k],
			       (unsigned long long)t->miss_end[k]);
	}
	return failed;
}
