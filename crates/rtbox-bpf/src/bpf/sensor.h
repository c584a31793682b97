/* SPDX-License-Identifier: (MIT OR Apache-2.0) OR GPL-2.0 */
/* Shared by the BPF program and (by hand, with a layout test) src/figs.rs. */
#ifndef RTBOX_SENSOR_H
#define RTBOX_SENSOR_H

#define RTBOX_MAX_MEMBERS 8192
#define RTBOX_MAX_SERVERS 1024

/* rtbox_fig.state */
#define RTBOX_BLOCKED 0
#define RTBOX_RUNNABLE 1
#define RTBOX_RUNNING 2
#define RTBOX_EXITED 3

/* rtbox_event.kind */
#define RTBOX_EV_SERVER_ACTIVE 1
#define RTBOX_EV_SERVER_IDLE 2
#define RTBOX_EV_FORK 3
#define RTBOX_EV_EXIT 4
#define RTBOX_EV_EXEC 5

/* One member, one cache line. Fields up to `cpu` are written by the program inside a
 * sequence count (odd while a write is under way); `server` and `quiet` by the daemon. */
struct rtbox_fig {
	__u32 seq;
	__u32 state;
	__u64 sum_ns;       /* se.sum_exec_runtime when last switched in or out */
	__u64 on_cpu_since; /* bpf_ktime_get_ns() at switch-in; 0 while off CPU */
	__u64 switches;
	__u64 wakeups;
	__u32 cpu;          /* CPU of the last switch-in */
	__u32 server;       /* daemon: server slot the member is placed on */
	__s32 counted;      /* program: server slot it is counted runnable under, -1 none */
	__u32 quiet;        /* daemon: set before a stop; the next run or wake-up clears it */
	__u32 every;        /* daemon: each readiness change is news (a global box's member) */
	__u32 joined;       /* daemon: registered as running; the program clears it at the
	                     * member's first switch (see pre_join in sensor.bpf.c) */
};

struct rtbox_event {
	__u32 kind;
	__u32 tid;
	__u32 pid;
	__u32 arg; /* server slot, or the parent's tid of a fork */
};

#endif
