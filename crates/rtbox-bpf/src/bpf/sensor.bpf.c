// SPDX-License-Identifier: (MIT OR Apache-2.0) OR GPL-2.0
//
// The rtbox sensor: what the enforcement loop needs to know about its members, kept by the
// scheduler's own tracepoints instead of polled.
//
// - Runtime: each member's `se.sum_exec_runtime` (the clock SCHED_DEADLINE charges with; it
//   leaves out host steal where the kernel accounts steal) at every switch, plus the time it
//   was switched in while it runs. The loop computes a running member's consumption from these
//   two without a system call.
// - Readiness: running, runnable (preempted or woken) or blocked, from sched_switch's
//   prev_state and sched_wakeup.
// - Wake-ups of the loop, through a ring buffer, only when its core must decide: a server
//   gains its first or loses its last runnable member, a member forks (a new thread or process
//   to place) or exits, or a member that is not its process's leader calls exec (it then
//   takes the leader's tid).
// - Dirty marks: one bit per member slot, set after each write of its figures, so the loop
//   reads only the members whose figures moved (sleeping members cost it nothing).
//
// Members and their servers are written by the daemon: `members` maps a tid to a slot of
// `figs`, a global array the daemon reads and writes through libbpf's memory mapping.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "sensor.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RTBOX_MAX_MEMBERS);
	__type(key, __u32);   /* tid */
	__type(value, __u32); /* slot in figs */
} members SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* Memory-mapped by the daemon (libbpf maps .bss of a loaded object); one struct, so the
 * layout is fixed (src/figs.rs). */
struct {
	struct rtbox_fig figs[RTBOX_MAX_MEMBERS];
	/* Runnable members counted per server slot (a member counts under the server it was
	 * counted for, until it blocks or is seen running for another server). */
	__s32 runnable[RTBOX_MAX_SERVERS];
	/* Events the ring buffer could not take: the loop then scans everything. */
	__u64 lost_events;
	/* One bit per slot, set after every write of its figures; the loop takes and clears
	 * them, and visits only the members whose figures moved (a sleeper's stay still). */
	__u64 dirty[RTBOX_MAX_MEMBERS / 64];
	/* Per slot, the CPU time the member had at its registration beyond the figure the daemon
	 * registered it with, left out of every figure written: /proc's figure of a running
	 * thread is as old as its last tick (up to 4 ms at HZ=250), and charged to its first
	 * server that time made a box throttle early and report an overrun at each join. */
	__u64 pre_join[RTBOX_MAX_MEMBERS];
} shared;

/* The slot of member `tid`, or -1. */
static __always_inline __s32 slot_of(__u32 tid)
{
	__u32 *slot = bpf_map_lookup_elem(&members, &tid);
	if (!slot || *slot >= RTBOX_MAX_MEMBERS)
		return -1;
	return *slot;
}

static __always_inline void emit(__u32 kind, __u32 tid, __u32 pid, __u32 arg)
{
	struct rtbox_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&shared.lost_events, 1);
		return;
	}
	e->kind = kind;
	e->tid = tid;
	e->pid = pid;
	e->arg = arg;
	bpf_ringbuf_submit(e, 0);
}

/* One runnable member less on server `s`; the loop is told when it was the last one, or at
 * every change when `every` (and which member it was, `tid`, for its figures). */
static __always_inline void server_dec(__s32 s, int quiet, int every, __u32 tid)
{
	if (s < 0 || s >= RTBOX_MAX_SERVERS)
		return;
	if ((__sync_fetch_and_add(&shared.runnable[s], -1) == 1 || every) && !quiet)
		emit(RTBOX_EV_SERVER_IDLE, tid, 0, s);
}

/* One runnable member more on server `s`; the loop is told when it is the first one, or at
 * every change when `every`. */
static __always_inline void server_inc(__s32 s, int quiet, int every, __u32 tid)
{
	if (s < 0 || s >= RTBOX_MAX_SERVERS)
		return;
	if ((__sync_fetch_and_add(&shared.runnable[s], 1) == 0 || every) && !quiet)
		emit(RTBOX_EV_SERVER_ACTIVE, tid, 0, s);
}

/* Keep the per-server counts equal to the members' readiness: a runnable member is counted
 * once, under its current server; a blocked one not at all. A member of a global box
 * (`every`) reports each wake-up and block: the loop's core places its box's members across
 * vCPUs by priority, so a member that wakes or blocks beside another on its server changes
 * what should run on the other vCPUs (without it, the core held a vCPU for a member that had
 * blocked until its next timer, up to a server period: issue 16, Figure 11's global runs). */
static __always_inline void settle(struct rtbox_fig *f, int ready, __u32 tid)
{
	__s32 counted = f->counted;
	__s32 server = (__s32)f->server;
	int quiet = f->quiet;
	int every = f->every;

	if (ready) {
		if (counted == server)
			return;
		f->counted = server;
		/* A runnable member counted elsewhere was moved by the loop itself (global
		 * placement): neither server's change is news to it. */
		server_inc(server, quiet || counted >= 0, every, tid);
		if (counted >= 0)
			server_dec(counted, 1, every, tid);
	} else if (counted >= 0) {
		f->counted = -1;
		server_dec(counted, quiet, every, tid);
	}
}

/* The kernel's figure `sum` of the member in slot `slot`, in the daemon's terms: less its time
 * before the join. At the member's first switch after a registration that took it as running
 * (`joined`), that time is found: the figure registered plus the time on CPU since (which the
 * daemon's readings showed meanwhile) falls short of the kernel's by it. A member that was
 * only runnable then is switched in first, and /proc's figure of a thread off CPU is exact. */
static __always_inline __u64 member_sum(struct rtbox_fig *f, __u32 slot, __u64 sum, __u64 now)
{
	if (slot >= RTBOX_MAX_MEMBERS)
		return sum;
	if (f->joined) {
		__u64 shown = f->sum_ns;
		if (f->on_cpu_since && now > f->on_cpu_since)
			shown += now - f->on_cpu_since;
		f->joined = 0;
		if (sum > shown)
			shared.pre_join[slot] = sum - shown;
	}
	__u64 pre = shared.pre_join[slot];
	return sum > pre ? sum - pre : 0;
}

static __always_inline void begin(struct rtbox_fig *f)
{
	__sync_fetch_and_add(&f->seq, 1);
}

/* Closes a write of slot `slot`'s figures and marks the slot dirty, after the write: a loop
 * that clears the mark and then reads sees this write or marks set after it. */
static __always_inline void end(struct rtbox_fig *f, __u32 slot)
{
	__sync_fetch_and_add(&f->seq, 1);
	if (slot < RTBOX_MAX_MEMBERS)
		__sync_fetch_and_or(&shared.dirty[slot / 64], 1ULL << (slot % 64));
}

SEC("tp_btf/sched_switch")
int BPF_PROG(rtbox_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();
	struct rtbox_fig *f;

	__u32 prev_tid = BPF_CORE_READ(prev, pid), next_tid = BPF_CORE_READ(next, pid);
	__s32 slot = slot_of(prev_tid);

	if (slot >= 0 && slot < RTBOX_MAX_MEMBERS) {
		f = &shared.figs[slot];
		/* An exited member may still be switched before it is gone: it stays exited. */
		int exited = f->state == RTBOX_EXITED;
		int ready = !exited && (preempt || prev_state == 0);

		begin(f);
		f->sum_ns = member_sum(f, slot, BPF_CORE_READ(prev, se.sum_exec_runtime), now);
		f->on_cpu_since = 0;
		if (!exited)
			f->state = ready ? RTBOX_RUNNABLE : RTBOX_BLOCKED;
		f->switches++;
		end(f, slot);
		settle(f, ready, prev_tid);
	}
	slot = slot_of(next_tid);
	if (slot >= 0 && slot < RTBOX_MAX_MEMBERS && shared.figs[slot].state != RTBOX_EXITED) {
		f = &shared.figs[slot];
		begin(f);
		f->sum_ns = member_sum(f, slot, BPF_CORE_READ(next, se.sum_exec_runtime), now);
		f->on_cpu_since = now;
		f->cpu = bpf_get_smp_processor_id();
		f->state = RTBOX_RUNNING;
		end(f, slot);
		settle(f, 1, next_tid);
	}
	return 0;
}

static __always_inline int woken(struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid);
	__s32 slot = slot_of(tid);
	struct rtbox_fig *f;

	if (slot < 0 || slot >= RTBOX_MAX_MEMBERS)
		return 0;
	f = &shared.figs[slot];
	if (f->state == RTBOX_EXITED)
		return 0;
	begin(f);
	if (f->state == RTBOX_BLOCKED)
		f->state = RTBOX_RUNNABLE;
	f->wakeups++;
	end(f, slot);
	settle(f, 1, tid);
	/* A thaw's wake-up was the loop's own doing; later changes are news again. */
	f->quiet = 0;
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(rtbox_wakeup, struct task_struct *p)
{
	return woken(p);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(rtbox_wakeup_new, struct task_struct *p)
{
	return woken(p);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(rtbox_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptid = BPF_CORE_READ(parent, pid);

	if (slot_of(ptid) >= 0)
		emit(RTBOX_EV_FORK, BPF_CORE_READ(child, pid), BPF_CORE_READ(child, tgid), ptid);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(rtbox_exit, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid);
	__s32 slot = slot_of(tid);
	struct rtbox_fig *f;

	if (slot < 0 || slot >= RTBOX_MAX_MEMBERS)
		return 0;
	f = &shared.figs[slot];
	begin(f);
	f->state = RTBOX_EXITED;
	end(f, slot);
	/* The exit is reported whether or not a stop is in force. */
	f->quiet = 0;
	settle(f, 0, tid);
	/* With its slot: a tid's exit may be reported after the loop moved the member of another
	 * thread to that tid (an exec by a thread other than the leader). */
	emit(RTBOX_EV_EXIT, tid, BPF_CORE_READ(p, tgid), slot);
	return 0;
}

/* A thread other than its process's leader that calls exec takes over the leader's tid once
 * the kernel has made every other thread exit (de_thread, fs/exec.c): the task that was member
 * `old_pid` now runs as `p->pid`, whose slot (the old leader's) reads as exited. The loop
 * moves the member to its new tid; until then its switches are not seen, and its runtime,
 * which the kernel keeps, is counted from its next registration on. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(rtbox_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tid = BPF_CORE_READ(p, pid);

	if ((__u32)old_pid != tid && slot_of(old_pid) >= 0)
		emit(RTBOX_EV_EXEC, tid, BPF_CORE_READ(p, tgid), old_pid);
	return 0;
}
