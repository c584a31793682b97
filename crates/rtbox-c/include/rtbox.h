/*
 * rtbox periodic-task API (librtbox.so). See docs/api.md.
 *
 * A thread becomes a periodic real-time task inside an rtbox box:
 *
 *     rt_set_box("rt");              optional: or the environment variable RTBOX_BOX
 *     rt_enter();                    join the box (the process becomes a member)
 *     rt_set_wcet(2000000);          2 ms
 *     rt_set_period(10000000);       10 ms
 *     rt_set_deadline(10000000);     10 ms (default: the period)
 *     rt_set_priority(50);           1..99, higher is more urgent (optional)
 *     rt_run(0);                     first job released now (+ timeout ns)
 *     for (i = 0; i < n; i++) { work(); rt_wait_for_period(); }
 *     rt_exit();
 *
 * Times are integer nanoseconds (uint64_t). The ExSched API this follows passed times as
 * `timeval`s (seconds and microseconds); one microsecond is 1000 here.
 *
 * Every call returns RT_OK or an error code and never aborts; a call out of order returns
 * RT_ESTATE and changes nothing. rt_last_error() gives the calling thread's last error in
 * words (which call is expected first, which field is wrong, what the daemon said).
 * State is per thread: each thread that calls rt_enter is its own task.
 *
 * The daemon's socket is /run/rtbox/rtbox.sock, or RTBOX_SOCKET, or rt_set_socket().
 * Only rt_enter, rt_run and rt_exit talk to the daemon; rt_wait_for_period writes the finished
 * job's record into a shared page the daemon reads, then sleeps (clock_nanosleep).
 */
#ifndef RTBOX_H
#define RTBOX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rt_error {
	RT_OK = 0,
	RT_ESTATE = 1,    /* call out of order (e.g. rt_wait_for_period before rt_run) */
	RT_EINVAL = 2,    /* invalid argument (zero time, wcet > deadline > period, prio not 1..99) */
	RT_ENODAEMON = 3, /* the rtbox daemon cannot be reached */
	RT_EREFUSED = 4,  /* the daemon refused (no such box, not a user of the box, ...) */
	RT_ESYS = 5,      /* a system call or the job page failed */
	RT_EINTERNAL = 6, /* a bug in librtbox */
};

/* Before rt_enter: which box (or plug-in group inside a box) to join; which daemon. */
int rt_set_box(const char *name);
int rt_set_socket(const char *path);

/* Make the calling thread a real-time task (its process joins the box). */
int rt_enter(void);
/* Make it a normal task again (the process leaves the box with its last task). */
int rt_exit(void);

/* Between rt_enter and rt_run. */
int rt_set_wcet(uint64_t wcet_ns);         /* worst-case execution time of a job */
int rt_set_period(uint64_t period_ns);     /* minimum inter-arrival time */
int rt_set_deadline(uint64_t deadline_ns); /* relative deadline, <= period */
int rt_set_priority(int priority);         /* 1..99 */

/* Start releasing jobs: the first one timeout_ns after the call (returns at that release);
 * 0: at the daemon's answer. A positive timeout is kept even if the answer comes later: the
 * first job is then late, and counted so. */
int rt_run(uint64_t timeout_ns);
/* End the current job and sleep until the next release. */
int rt_wait_for_period(void);

/* The fixed text of a code, and the calling thread's last error in detail. */
const char *rt_strerror(int code);
const char *rt_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* RTBOX_H */
