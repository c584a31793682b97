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
//   to place) or exits.
// - Dirty marks: one bit per member slot, set after each write of its figures, so the loop
//   reads only the members whose figures moved (sleeping members cost it nothing).
// - Drift marks: one bit per member slot, set when a process other than the daemon changes the
//   member's policy, priority, nice level or affinity (the setters' system-call tracepoints),
//   so that the loop checks those members at once instead of every member every second.
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
	/* One bit per slot, set when another process changed the member's scheduling (see
	 * drifted()); the loop takes and clears them. */
	__u64 drift[RTBOX_MAX_MEMBERS / 64];
	/* The daemon's process (its own changes of members are not drift); written by the daemon
	 * before the programs are attached. */
	__u32 daemon_tgid;
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
	emit(RTBOX_EV_EXIT, tid, BPF_CORE_READ(p, tgid), 0);
	return 0;
}

/* Setters under way: the calling thread's tid to the member it changes (from the setter's
 * entry to its exit, where the change is made or refused). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);   /* caller's tid */
	__type(value, __u32); /* member's tid */
} setting SEC(".maps");

/* A setter's entry: thread `who` (0: the caller itself, in the caller's pid namespace; a
 * member in a container naming another thread is missed here, and found by the daemon's slow
 * check) is about to have its scheduling changed. Only a member changed by another process
 * than the daemon is remembered. */
static __always_inline int setter_enter(__s64 who)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 caller = (__u32)id;
	__u32 target = who == 0 ? caller : (__u32)who;

	if ((__u32)(id >> 32) == shared.daemon_tgid || slot_of(target) < 0)
		return 0;
	bpf_map_update_elem(&setting, &caller, &target, BPF_ANY);
	return 0;
}

/* A setter's exit: when it succeeded, the member's drift mark is set and the loop woken, which
 * puts the box's policy back (or takes a priority the member set itself as its new local
 * rank). At the exit, so that the loop reads the new state. */
static __always_inline int setter_exit(__s64 ret)
{
	__u32 caller = (__u32)bpf_get_current_pid_tgid();
	__u32 *target = bpf_map_lookup_elem(&setting, &caller);

	if (!target)
		return 0;
	__u32 tid = *target;
	bpf_map_delete_elem(&setting, &caller);
	__s32 found = slot_of(tid);
	if (ret != 0 || found < 0 || found >= RTBOX_MAX_MEMBERS)
		return 0;
	__u32 slot = found;
	__sync_fetch_and_or(&shared.drift[slot / 64], 1ULL << (slot % 64));
	emit(RTBOX_EV_DRIFT, tid, 0, 0);
	return 0;
}

/* The entry and exit programs of setter system call `call`, whose target thread is its first
 * argument. */
#define RTBOX_SETTER(call)                                                             \
	SEC("tracepoint/syscalls/sys_enter_" #call)                                    \
	int rtbox_drift_##call##_in(struct trace_event_raw_sys_enter *ctx)             \
	{                                                                              \
		return setter_enter((__s64)ctx->args[0]);                              \
	}                                                                              \
	SEC("tracepoint/syscalls/sys_exit_" #call)                                     \
	int rtbox_drift_##call##_out(struct trace_event_raw_sys_exit *ctx)             \
	{                                                                              \
		return setter_exit(ctx->ret);                                          \
	}

/* The system calls that change a thread's policy, priority, affinity or nice level (the
 * kernel's own changes, e.g. a cpuset's, are left to the daemon's slow check). */
RTBOX_SETTER(sched_setscheduler)
RTBOX_SETTER(sched_setparam)
RTBOX_SETTER(sched_setattr)
RTBOX_SETTER(sched_setaffinity)

/* setpriority(PRIO_PROCESS, who, nice): a thread's nice level (other `which` name groups and
 * users, left to the slow check). */
SEC("tracepoint/syscalls/sys_enter_setpriority")
int rtbox_drift_setpriority_in(struct trace_event_raw_sys_enter *ctx)
{
	if (ctx->args[0] != 0 /* PRIO_PROCESS */)
		return 0;
	return setter_enter((__s64)ctx->args[1]);
}

SEC("tracepoint/syscalls/sys_exit_setpriority")
int rtbox_drift_setpriority_out(struct trace_event_raw_sys_exit *ctx)
{
	return setter_exit(ctx->ret);
}
