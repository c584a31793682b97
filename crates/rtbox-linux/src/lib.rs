//! Linux primitives for the rtbox runtime: no kernel patch, no module.
//!
//! Each module wraps one kernel interface with typed errors ([`LinuxError`]):
//! - [`sched`]: `sched_setattr`/`sched_getattr` (policy, priority, `SCHED_FLAG_RESET_ON_FORK`,
//!   SCHED_DEADLINE parameters) and CPU affinity.
//! - [`procfs`]: threads of a process, thread state, start time (guards against tid reuse),
//!   process discovery for new children.
//! - [`cgroup`]: layout detection (v1 / v2 / hybrid), a thread's cgroups, cgroup v2 freeze with
//!   per-thread threaded children, the v1 `cpu` cgroup RT-runtime rule.
//! - [`perf`]: exact per-thread CPU time through the perf task clock.
//! - [`hostthreads`]: the host's real-time threads (deadline tasks, threaded interrupts, RT
//!   kernel and user threads) and whether the kernel is PREEMPT_RT.
//! - [`procevents`]: forks, execs and exits as they happen (netlink proc connector).
//! - [`stopgroup`]: a member thread's own threaded cgroup inside the cgroup it belongs to (its
//!   per-thread freeze), and the stop that moves nothing where the kernel refuses one.
//! - [`rtgrant`]: RT runtime for a member's v1 cpu cgroup that has none (RT group scheduling),
//!   so that the member never leaves it.
//! - [`snapshot`]: a thread's original state and its restoration.
//! - [`cpulatency`]: the kernel's CPU latency QoS request (fast wake-ups from idle).
//! - [`fdwait`]: timerfd, eventfd and waiting on them (the backstop's wake-ups).
//! - [`users`]: user and group names through the system's name service.
//! - [`lock`], [`child`], [`peer`]: the daemon's pid-naming locks, its children, its socket peers.
//! - [`journal`] and [`watchdog`]: crash safety (write-ahead state file, a forked supervisor that
//!   restores everything when the daemon dies, even by `kill -9`).

pub mod cgroup;
pub mod child;
pub mod cpuclock;
pub mod cpulatency;
pub mod error;
pub mod fdwait;
pub mod gated;
pub mod hostthreads;
pub mod journal;
pub mod lock;
pub mod peer;
pub mod perf;
pub mod pimutex;
pub mod procevents;
pub mod procfs;
pub mod rtgrant;
pub mod sched;
pub mod snapshot;
pub mod stopgroup;
pub mod users;
pub mod watchdog;

pub use error::{LinuxError, NameKind};

/// Whether the caller is root (effective uid 0). Tests that touch real threads skip otherwise.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A clock's reading in nanoseconds.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID), ns.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Sleep until the absolute CLOCK_MONOTONIC time `deadline_ns` (restarts on EINTR).
pub fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: ts is valid; remain may be null with TIMER_ABSTIME.
        let r = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if r != libc::EINTR {
            return;
        }
    }
}
