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

/// Raises this process's soft limit of open files to its hard limit; returns (before, after).
/// The daemon keeps a few descriptors per member (its stat and schedstat files, with perf its
/// clock and switch watch): at the usual soft limit of 1024, a few hundred members exhausted
/// it, and a member whose clock could not be opened joined uncharged.
pub fn raise_open_files() -> Result<(u64, u64), LinuxError> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let err = |op, e: nix::errno::Errno| LinuxError::Syscall {
        op,
        tid: 0,
        errno: e as i32,
    };
    let (soft, hard) =
        getrlimit(Resource::RLIMIT_NOFILE).map_err(|e| err("getrlimit(RLIMIT_NOFILE)", e))?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
            .map_err(|e| err("setrlimit(RLIMIT_NOFILE)", e))?;
        OPEN_FILES_BEFORE.store(soft, std::sync::atomic::Ordering::Relaxed);
    }
    Ok((soft, hard.max(soft)))
}

/// The soft limit of open files before [`raise_open_files`] raised it (0: not raised): the
/// commands the daemon starts get it back (`gated`), as they would have had without rtbox.
static OPEN_FILES_BEFORE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// [`OPEN_FILES_BEFORE`], if the limit was raised.
pub(crate) fn open_files_before() -> Option<u64> {
    match OPEN_FILES_BEFORE.load(std::sync::atomic::Ordering::Relaxed) {
        0 => None,
        n => Some(n),
    }
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

#[cfg(test)]
mod tests {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};

    /// The daemon raises its soft limit of open files to the hard one, and remembers the
    /// soft limit it had for the commands it starts.
    #[test]
    fn the_open_files_limit_is_raised_to_the_hard_one() {
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
        let low = hard.min(512);
        setrlimit(Resource::RLIMIT_NOFILE, low, hard).expect("lower the soft limit");
        let (before, after) = super::raise_open_files().expect("raise");
        assert_eq!((before, after), (low, hard));
        assert_eq!(getrlimit(Resource::RLIMIT_NOFILE).unwrap(), (hard, hard));
        if low < hard {
            assert_eq!(super::open_files_before(), Some(low));
            // A command the daemon starts has the soft limit the daemon was started with.
            let out = std::env::temp_dir().join(format!("rtbox-nofile-{}", std::process::id()));
            let cmd = format!("ulimit -Sn > {}", out.display());
            let child =
                crate::gated::GatedChild::spawn(&["sh".into(), "-c".into(), cmd]).expect("spawn");
            let pid = child.release();
            assert_eq!(crate::gated::wait_exit_code(pid).expect("wait"), 0);
            let seen = std::fs::read_to_string(&out).expect("the command's limit");
            let _ = std::fs::remove_file(&out);
            assert_eq!(
                seen.trim(),
                low.to_string(),
                "the command kept the raised limit"
            );
        }
        setrlimit(Resource::RLIMIT_NOFILE, soft, hard).expect("put the soft limit back");
    }
}
