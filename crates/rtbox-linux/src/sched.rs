//! Scheduling policy and CPU affinity of single threads (`sched_setattr`, `sched_getattr`,
//! `sched_setaffinity`), addressed by tid.

use serde::{Deserialize, Serialize};

use crate::LinuxError;

pub const SCHED_OTHER: u32 = 0;
pub const SCHED_FIFO: u32 = 1;
pub const SCHED_RR: u32 = 2;
pub const SCHED_BATCH: u32 = 3;
pub const SCHED_IDLE: u32 = 5;
pub const SCHED_DEADLINE: u32 = 6;
/// Children of the thread start as SCHED_OTHER with default nice: a promoted thread's boost is
/// never inherited by what it forks.
pub const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;

/// The kernel's `struct sched_attr`, first version (48 bytes, no utilisation clamps).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct RawAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

const ATTR_SIZE: u32 = std::mem::size_of::<RawAttr>() as u32;

/// A thread's scheduling attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedAttr {
    pub policy: u32,
    /// Only `SCHED_FLAG_RESET_ON_FORK` is kept; other flags are not restored.
    pub flags: u64,
    pub nice: i32,
    /// RT priority 1..99 for FIFO/RR, 0 otherwise.
    pub priority: u32,
    /// SCHED_DEADLINE runtime, deadline and period in ns (0 otherwise).
    pub runtime: u64,
    pub deadline: u64,
    pub period: u64,
}

impl SchedAttr {
    /// SCHED_FIFO at `priority` with RESET_ON_FORK.
    pub fn fifo(priority: u32) -> Self {
        SchedAttr {
            policy: SCHED_FIFO,
            flags: SCHED_FLAG_RESET_ON_FORK,
            nice: 0,
            priority,
            runtime: 0,
            deadline: 0,
            period: 0,
        }
    }

    /// SCHED_IDLE (runs only when no other normal thread wants the CPU) with RESET_ON_FORK.
    pub fn idle() -> Self {
        SchedAttr {
            policy: SCHED_IDLE,
            priority: 0,
            ..SchedAttr::fifo(0)
        }
    }

    /// SCHED_OTHER at `nice`.
    pub fn other(nice: i32) -> Self {
        SchedAttr {
            policy: SCHED_OTHER,
            flags: 0,
            nice,
            priority: 0,
            runtime: 0,
            deadline: 0,
            period: 0,
        }
    }

    pub fn is_rt(&self) -> bool {
        matches!(self.policy, SCHED_FIFO | SCHED_RR)
    }

    /// Whether a thread read back with `self` runs under the policy `set` asked for. Only the
    /// fields the policy uses count: the kernel reports a fair thread's time slice in
    /// `runtime` (6.12+, EEVDF) and keeps an RT thread's old nice, which `set` never named.
    pub fn same_policy(&self, set: &SchedAttr) -> bool {
        let fair = is_fair(self.policy);
        self.policy == set.policy
            && self.flags & SCHED_FLAG_RESET_ON_FORK == set.flags & SCHED_FLAG_RESET_ON_FORK
            && self.priority == set.priority
            && (!fair || self.nice == set.nice)
            && (self.policy != SCHED_DEADLINE
                || (self.runtime, self.deadline, self.period)
                    == (set.runtime, set.deadline, set.period))
    }

    /// A short human name of the policy.
    pub fn policy_name(&self) -> &'static str {
        match self.policy {
            SCHED_OTHER => "other",
            SCHED_FIFO => "fifo",
            SCHED_RR => "rr",
            SCHED_BATCH => "batch",
            SCHED_IDLE => "idle",
            SCHED_DEADLINE => "deadline",
            _ => "unknown",
        }
    }

    fn check(&self) -> Result<(), LinuxError> {
        let rt = self.is_rt();
        if rt && !(1..=99).contains(&self.priority) {
            return Err(LinuxError::Invalid(format!(
                "priority {} out of 1..99 for an RT policy",
                self.priority
            )));
        }
        if !rt && self.priority != 0 {
            return Err(LinuxError::Invalid(format!(
                "priority {} given to non-RT policy {}",
                self.priority,
                self.policy_name()
            )));
        }
        if !(-20..=19).contains(&self.nice) {
            return Err(LinuxError::Invalid(format!(
                "nice {} out of -20..19",
                self.nice
            )));
        }
        Ok(())
    }
}

/// The time slice the kernel gives a fair thread that asked for none (`sysctl_sched_base_slice`,
/// 6.12+; its knob lives in debugfs, which lockdown closes here). `sched_getattr` reports a
/// fair thread's slice in `runtime` whether it was asked for or not, and `sched_setattr` with a
/// nonzero `runtime` makes it a custom slice: a snapshot must tell the two apart, or every
/// restored thread would come back with a custom slice. Read once from a helper thread that
/// resets its own slice; `None` where it cannot (no EEVDF slices, or no right to reset).
pub fn base_slice() -> Option<u64> {
    static BASE: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *BASE.get_or_init(|| {
        std::thread::spawn(|| {
            let me = get_attr(0).ok()?;
            set_attr(
                0,
                &SchedAttr {
                    runtime: 0,
                    ..SchedAttr::other(me.nice)
                },
            )
            .ok()?;
            get_attr(0).ok().map(|a| a.runtime).filter(|&r| r > 0)
        })
        .join()
        .ok()
        .flatten()
    })
}

/// Whether the policy is one of the fair class (its `runtime` is a slice, not a budget).
pub fn is_fair(policy: u32) -> bool {
    matches!(policy, SCHED_OTHER | SCHED_BATCH | SCHED_IDLE)
}

/// Read a thread's scheduling attributes.
pub fn get_attr(tid: i32) -> Result<SchedAttr, LinuxError> {
    let mut raw = RawAttr::default();
    // SAFETY: raw is a valid buffer of ATTR_SIZE bytes.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut raw as *mut RawAttr,
            ATTR_SIZE,
            0u32,
        )
    };
    if r != 0 {
        return Err(LinuxError::last("sched_getattr", tid));
    }
    Ok(SchedAttr {
        policy: raw.policy,
        flags: raw.flags & SCHED_FLAG_RESET_ON_FORK,
        nice: raw.nice,
        priority: raw.priority,
        runtime: raw.runtime,
        deadline: raw.deadline,
        period: raw.period,
    })
}

/// Set a thread's scheduling attributes.
pub fn set_attr(tid: i32, attr: &SchedAttr) -> Result<(), LinuxError> {
    attr.check()?;
    let mut raw = RawAttr {
        size: ATTR_SIZE,
        policy: attr.policy,
        flags: attr.flags,
        nice: attr.nice,
        priority: attr.priority,
        runtime: attr.runtime,
        deadline: attr.deadline,
        period: attr.period,
    };
    // SAFETY: raw is a valid, fully initialised struct of ATTR_SIZE bytes.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &mut raw as *mut RawAttr, 0u32) };
    if r != 0 {
        return Err(LinuxError::last("sched_setattr", tid));
    }
    Ok(())
}

/// The CPUs a thread may run on, ascending.
pub fn get_affinity(tid: i32) -> Result<Vec<u32>, LinuxError> {
    // SAFETY: an all-zero cpu_set_t is valid.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is a valid cpu_set_t of the given size.
    let r =
        unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(LinuxError::last("sched_getaffinity", tid));
    }
    // Stop at the last CPU in the set rather than after all 1024 bits: the drift check asks
    // for every member that ran.
    // SAFETY: set is a valid cpu_set_t.
    let n = unsafe { libc::CPU_COUNT(&set) } as usize;
    let mut cpus = Vec::with_capacity(n);
    for cpu in 0..libc::CPU_SETSIZE as usize {
        if cpus.len() == n {
            break;
        }
        // SAFETY: cpu < CPU_SETSIZE.
        if unsafe { libc::CPU_ISSET(cpu, &set) } {
            cpus.push(cpu as u32);
        }
    }
    Ok(cpus)
}

/// Restrict a thread to `cpus` (must be non-empty).
pub fn set_affinity(tid: i32, cpus: &[u32]) -> Result<(), LinuxError> {
    if cpus.is_empty() {
        return Err(LinuxError::Invalid("empty CPU affinity".into()));
    }
    // SAFETY: an all-zero cpu_set_t is valid.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return Err(LinuxError::Invalid(format!("CPU {cpu} out of range")));
        }
        // SAFETY: cpu < CPU_SETSIZE.
        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    }
    // SAFETY: set is a valid cpu_set_t.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(LinuxError::last("sched_setaffinity", tid));
    }
    Ok(())
}

/// The calling thread's tid.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// The CPU the calling thread runs on now (`None` if the kernel cannot tell).
pub fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu has no preconditions.
    u32::try_from(unsafe { libc::sched_getcpu() }).ok()
}

/// The kernel's global RT limit: `sched_rt_runtime_us` of every `sched_rt_period_us`, in
/// microseconds; `None` when unlimited (-1) or unreadable.
pub fn rt_limit() -> Option<(u64, u64)> {
    let read = |f: &str| -> Option<i64> {
        std::fs::read_to_string(format!("/proc/sys/kernel/{f}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let runtime = u64::try_from(read("sched_rt_runtime_us")?).ok()?;
    let period = u64::try_from(read("sched_rt_period_us")?).ok()?;
    (period > 0).then_some((runtime, period))
}

/// The kernel's fair server (kernels 6.12 and later): each CPU runs normal threads that have
/// starved for `runtime_ns` of every `period_ns` above every real-time thread, whatever the RT
/// limit (`sched_rt_runtime_us = -1` turns off RT throttling, not this; measured on 6.18: a
/// normal thread beside a SCHED_FIFO hog on its CPU got 0.0505 of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FairServer {
    pub runtime_ns: u64,
    pub period_ns: u64,
    /// Read from debugfs (`/sys/kernel/debug/sched/fair_server/cpuN/`); otherwise the kernel's
    /// default (50 ms / 1 s) is assumed, as where debugfs is locked down.
    pub read: bool,
}

/// The kernel's default fair server: 50 ms of every 1 s.
pub const FAIR_SERVER_DEFAULT: FairServer = FairServer {
    runtime_ns: 50_000_000,
    period_ns: 1_000_000_000,
    read: false,
};

/// The fair server of the running kernel (the largest share over its CPUs), `None` before
/// 6.12 (no fair server) or when its runtime is 0 on every CPU.
pub fn fair_server() -> Option<FairServer> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    fair_server_of(&release, read_fair_servers())
}

/// Rule: a kernel from 6.12 on has a fair server; its parameters are `read` (runtime, period
/// per CPU) when debugfs shows them, else the default. Pure, for tests.
pub fn fair_server_of(release: &str, read: Option<Vec<(u64, u64)>>) -> Option<FairServer> {
    let mut v = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (v.next()?, v.next().unwrap_or(0));
    if (major, minor) < (6, 12) {
        return None;
    }
    match read {
        None => Some(FAIR_SERVER_DEFAULT),
        Some(cpus) => cpus
            .into_iter()
            .filter(|&(r, p)| r > 0 && p > 0)
            // The largest share: compare r1/p1 with r2/p2 exactly.
            .max_by(|a, b| {
                (u128::from(a.0) * u128::from(b.1)).cmp(&(u128::from(b.0) * u128::from(a.1)))
            })
            .map(|(runtime_ns, period_ns)| FairServer {
                runtime_ns,
                period_ns,
                read: true,
            }),
    }
}

/// Each CPU's fair server (runtime, period) from debugfs; `None` when debugfs is not mounted
/// or locked down.
fn read_fair_servers() -> Option<Vec<(u64, u64)>> {
    let dir = std::fs::read_dir("/sys/kernel/debug/sched/fair_server").ok()?;
    let num = |p: std::path::PathBuf| -> Option<u64> {
        std::fs::read_to_string(p).ok()?.trim().parse().ok()
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        out.push((
            num(e.path().join("runtime"))?,
            num(e.path().join("period"))?,
        ));
    }
    (!out.is_empty()).then_some(out)
}

/// The kernel's list of online CPUs.
pub const ONLINE_CPUS: &str = "/sys/devices/system/cpu/online";

/// The CPUs the host has online, as the kernel's CPU list (`0-3,6`) from [`ONLINE_CPUS`];
/// callers parse it with their CPU-set type.
pub fn online_cpu_list() -> Result<String, LinuxError> {
    std::fs::read_to_string(ONLINE_CPUS)
        .map(|s| s.trim().to_string())
        .map_err(|e| LinuxError::io(ONLINE_CPUS, e))
}

/// Number of CPUs online.
pub fn online_cpus() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_from_6_12_have_a_fair_server_read_or_assumed() {
        assert_eq!(fair_server_of("6.6.30-rt", None), None);
        assert_eq!(fair_server_of("6.11.0", Some(vec![(1, 2)])), None);
        assert_eq!(fair_server_of("6.12.0", None), Some(FAIR_SERVER_DEFAULT));
        assert_eq!(
            fair_server_of("6.18.44-fc-v657\n", None),
            Some(FAIR_SERVER_DEFAULT)
        );
        assert_eq!(fair_server_of("7.0", None), Some(FAIR_SERVER_DEFAULT));
        let read = fair_server_of("6.18", Some(vec![(20_000_000, 1_000_000_000), (3, 40)]));
        assert_eq!(
            read,
            Some(FairServer {
                runtime_ns: 3,
                period_ns: 40,
                read: true
            })
        );
        // Turned off on every CPU: none.
        assert_eq!(fair_server_of("6.18", Some(vec![(0, 1_000_000_000)])), None);
        assert_eq!(fair_server_of("garbage", None), None);
    }

    /// Issue 5 regression: drift was "found" at every scan for throttled (SCHED_IDLE) members,
    /// whose slice the kernel reports in `runtime`, and re-applied each time.
    #[test]
    fn same_policy_ignores_fields_the_policy_does_not_use() {
        let idle = SchedAttr {
            policy: SCHED_IDLE,
            ..SchedAttr::other(0)
        };
        let read = SchedAttr {
            runtime: 1_400_000,
            ..idle
        };
        assert!(read.same_policy(&idle));
        let fifo = SchedAttr::fifo(50);
        assert!(
            SchedAttr { nice: 5, ..fifo }.same_policy(&fifo),
            "RT keeps its old nice"
        );
        assert!(!SchedAttr::fifo(51).same_policy(&fifo));
        assert!(!SchedAttr::other(3).same_policy(&SchedAttr::other(0)));
        assert!(!SchedAttr { flags: 0, ..fifo }.same_policy(&fifo));
        let dl = SchedAttr {
            policy: SCHED_DEADLINE,
            runtime: 1,
            deadline: 2,
            period: 2,
            ..SchedAttr::other(0)
        };
        assert!(!SchedAttr { runtime: 2, ..dl }.same_policy(&dl));
    }

    #[test]
    fn own_thread_attr_and_affinity_read_back() {
        let tid = gettid();
        let a = get_attr(tid).unwrap();
        assert!(!a.is_rt() || a.priority > 0);
        let cpus = get_affinity(tid).unwrap();
        assert!(!cpus.is_empty());
        // Setting the affinity to what it is must succeed and read back identically.
        set_affinity(tid, &cpus).unwrap();
        assert_eq!(get_affinity(tid).unwrap(), cpus);
        // Each single CPU and the first and last together read back exactly (the read stops
        // at the set's last CPU), in a thread of its own.
        std::thread::spawn(move || {
            let me = gettid();
            let (first, last) = (cpus[0], *cpus.last().unwrap());
            for c in &cpus {
                set_affinity(me, &[*c]).unwrap();
                assert_eq!(get_affinity(me).unwrap(), vec![*c]);
            }
            let ends: Vec<u32> = if first == last {
                vec![first]
            } else {
                vec![first, last]
            };
            set_affinity(me, &ends).unwrap();
            assert_eq!(get_affinity(me).unwrap(), ends);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn invalid_attrs_are_refused_before_the_kernel() {
        assert!(matches!(
            set_attr(gettid(), &SchedAttr::fifo(0)),
            Err(LinuxError::Invalid(_))
        ));
        assert!(matches!(
            set_attr(gettid(), &SchedAttr::fifo(100)),
            Err(LinuxError::Invalid(_))
        ));
        assert!(matches!(
            set_affinity(gettid(), &[]),
            Err(LinuxError::Invalid(_))
        ));
    }

    #[test]
    fn missing_thread_is_reported_as_gone() {
        let e = get_attr(i32::MAX - 7).unwrap_err();
        assert!(e.is_gone(), "{e}");
    }
}
