//! The host's real-time threads: every thread with a SCHED_DEADLINE, SCHED_FIFO or SCHED_RR
//! policy, found through /proc, with what admission and status need (parameters, CPUs, CPU time,
//! kernel thread or not). One pass reads each thread's `stat` (policy and RT priority are fields
//! 41 and 40, flags field 9), and only real-time threads get their `status` (CPUs),
//! `schedstat` (CPU time) and, for deadline threads, `sched_getattr` (runtime and period,
//! which /proc does not show). The root is a parameter so the detection is tested on fixture
//! trees of a PREEMPT_RT machine.

use std::fs;
use std::path::Path;

use crate::sched::{self, SchedAttr, SCHED_DEADLINE, SCHED_FIFO, SCHED_RR};
use crate::LinuxError;

use crate::procfs::PF_KTHREAD;

/// What a real-time thread of the host is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RtKind {
    /// A SCHED_DEADLINE thread: the kernel admitted its bandwidth.
    Deadline,
    /// A threaded interrupt handler (`irq/N-name`: every handler on PREEMPT_RT, forced or
    /// nested ones elsewhere).
    Interrupt,
    /// Another kernel thread at a fixed RT priority (ktimers, rcuc, rcub, migration, ...).
    Kernel,
    /// A user thread with an RT policy.
    User,
}

impl RtKind {
    pub fn name(self) -> &'static str {
        match self {
            RtKind::Deadline => "deadline",
            RtKind::Interrupt => "interrupt",
            RtKind::Kernel => "kernel",
            RtKind::User => "user",
        }
    }
}

/// One real-time thread of the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtThread {
    pub pid: i32,
    pub tid: i32,
    pub comm: String,
    pub kind: RtKind,
    pub policy: u32,
    /// RT priority 1..99 (0 for deadline threads).
    pub priority: u32,
    /// SCHED_DEADLINE runtime and period in ns (0 otherwise).
    pub runtime: u64,
    pub period: u64,
    /// CPUs it may run on (`Cpus_allowed_list`).
    pub cpus: String,
    /// Its CPU time so far (`schedstat`, ns).
    pub cpu_ns: u64,
    /// Process start time in clock ticks (tells a reused tid apart).
    pub starttime: u64,
}

/// The scheduling fields of a `stat` line: comm, flags, RT priority, policy, start time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatSched {
    pub comm: String,
    pub flags: u64,
    pub rt_priority: u32,
    pub policy: u32,
    pub starttime: u64,
}

/// Parses the fields of `/proc/<tid>/stat` the host scan needs (the name may contain spaces
/// and parentheses: it is everything between the first `(` and the last `)`).
pub fn parse_stat_sched(text: &str) -> Option<StatSched> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // rest[0] is field 3 (state): field n is rest[n - 3].
    Some(StatSched {
        comm,
        flags: rest.get(6)?.parse().ok()?,
        starttime: rest.get(19)?.parse().ok()?,
        rt_priority: rest.get(37)?.parse().ok()?,
        policy: rest.get(38)?.parse().ok()?,
    })
}

/// Rule: which kind of real-time thread this is. Kernel threads carry `PF_KTHREAD`; threaded
/// interrupt handlers are the kernel threads named `irq/<number>-<name>` (kernel/irq/manage.c
/// names them so; `irq_work/N` and others are not handlers).
pub fn classify(comm: &str, flags: u64, policy: u32) -> RtKind {
    if policy == SCHED_DEADLINE {
        return RtKind::Deadline;
    }
    if flags & PF_KTHREAD == 0 {
        return RtKind::User;
    }
    let handler = comm
        .strip_prefix("irq/")
        .and_then(|r| r.split('-').next())
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if handler {
        RtKind::Interrupt
    } else {
        RtKind::Kernel
    }
}

fn is_rt_policy(policy: u32) -> bool {
    matches!(policy, SCHED_FIFO | SCHED_RR | SCHED_DEADLINE)
}

fn numeric(dir: &Path) -> Vec<i32> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<i32> = rd
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

fn cpus_allowed(status: &str) -> Option<String> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
}

/// Every real-time thread under `proc` (a /proc tree), except those of processes `skip`
/// returns true for. `deadline_attr` gives a deadline thread's parameters (the live scan uses
/// `sched_getattr`). Threads that exit during the scan are left out; a `proc` that cannot be
/// listed is an error.
pub fn scan(
    proc: &Path,
    skip: &dyn Fn(i32) -> bool,
    deadline_attr: &dyn Fn(i32) -> Result<SchedAttr, LinuxError>,
) -> Result<Vec<RtThread>, LinuxError> {
    scan_with(proc, skip, &|_| false, deadline_attr, false)
}

/// [`scan`]; with `policy_first`, `attr` is asked for every thread's policy first and only
/// the real-time ones are read from `proc`: one system call instead of an open, a read and a
/// parse per thread (a host with 500 sleeping processes beside a box spent ~8 ms of the
/// daemon's CPU per second in this scan, issue 14). The policy stat then shows decides.
/// Threads `known` returns true for (the daemon's members: real-time, but its own) are left
/// out before anything is asked of them.
fn scan_with(
    proc: &Path,
    skip: &dyn Fn(i32) -> bool,
    known: &dyn Fn(i32) -> bool,
    attr: &dyn Fn(i32) -> Result<SchedAttr, LinuxError>,
    policy_first: bool,
) -> Result<Vec<RtThread>, LinuxError> {
    fs::read_dir(proc).map_err(|e| LinuxError::io(proc, e))?;
    let mut out = Vec::new();
    for pid in numeric(proc) {
        // Asked only of processes with a real-time thread (the daemon's own check reads the
        // process's stat): most have none.
        let mut skipped = None;
        let task = proc.join(pid.to_string()).join("task");
        for tid in numeric(&task) {
            if known(tid) {
                continue;
            }
            if policy_first && attr(tid).is_ok_and(|a| !is_rt_policy(a.policy)) {
                continue;
            }
            if *skipped.get_or_insert_with(|| skip(pid)) {
                break;
            }
            let dir = task.join(tid.to_string());
            let Ok(text) = fs::read_to_string(dir.join("stat")) else {
                continue;
            };
            let Some(st) = parse_stat_sched(&text) else {
                return Err(LinuxError::Parse {
                    path: dir.join("stat"),
                    what: "stat scheduling fields".into(),
                });
            };
            if !is_rt_policy(st.policy) {
                continue;
            }
            let kind = classify(&st.comm, st.flags, st.policy);
            let (runtime, period) = if kind == RtKind::Deadline {
                match attr(tid) {
                    Ok(a) if a.policy == SCHED_DEADLINE => (a.runtime, a.period.max(a.deadline)),
                    Ok(_) => continue,
                    Err(e) if e.is_gone() => continue,
                    Err(e) => return Err(e),
                }
            } else {
                (0, 0)
            };
            let cpus = fs::read_to_string(dir.join("status"))
                .ok()
                .and_then(|s| cpus_allowed(&s))
                .unwrap_or_default();
            let cpu_ns = fs::read_to_string(dir.join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok())
                .unwrap_or(0);
            out.push(RtThread {
                pid,
                tid,
                comm: st.comm,
                kind,
                policy: st.policy,
                priority: st.rt_priority,
                runtime,
                period,
                cpus,
                cpu_ns,
                starttime: st.starttime,
            });
        }
    }
    Ok(out)
}

/// [`scan`] of this machine's /proc, without the threads `known` returns true for.
pub fn scan_host(
    skip: &dyn Fn(i32) -> bool,
    known: &dyn Fn(i32) -> bool,
) -> Result<Vec<RtThread>, LinuxError> {
    scan_with(Path::new("/proc"), skip, known, &sched::get_attr, true)
}

/// Whether the kernel is PREEMPT_RT (`/sys/kernel/realtime` reads 1 there, and exists nowhere
/// else), under the sysfs root `sys`.
pub fn preempt_rt_under(sys: &Path) -> bool {
    fs::read_to_string(sys.join("kernel/realtime")).is_ok_and(|s| s.trim() == "1")
}

/// Whether this machine's kernel is PREEMPT_RT.
pub fn preempt_rt() -> bool {
    preempt_rt_under(Path::new("/sys"))
}

/// Whether every interrupt handler runs as a thread: PREEMPT_RT, or the `threadirqs` boot
/// option (a word of the kernel command line `cmdline`).
pub fn all_interrupts_threaded_with(preempt_rt: bool, cmdline: &str) -> bool {
    preempt_rt || cmdline.split_whitespace().any(|w| w == "threadirqs")
}

/// [`all_interrupts_threaded_with`] for this machine.
pub fn all_interrupts_threaded() -> bool {
    let cmdline = fs::read_to_string("/proc/cmdline").unwrap_or_default();
    all_interrupts_threaded_with(preempt_rt(), &cmdline)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stat line as the kernel writes it, with the fields the scan reads.
    fn stat_line(tid: i32, comm: &str, flags: u64, prio: u32, policy: u32) -> String {
        let mut f: Vec<String> = vec!["S".into(), "2".into()];
        f.extend((5..=52).map(|n| match n {
            9 => flags.to_string(),
            22 => "42".into(),
            40 => prio.to_string(),
            41 => policy.to_string(),
            _ => "0".into(),
        }));
        format!("{tid} ({comm}) {}\n", f.join(" "))
    }

    /// A /proc tree of a PREEMPT_RT machine with two CPUs (the kernel's default priorities on
    /// such a kernel: threaded handlers at FIFO 50, ktimers and rcuc at FIFO 1, migration at
    /// 99), a user FIFO 95 thread, a deadline task and ordinary threads.
    fn preempt_rt_tree(root: &Path) {
        let k = PF_KTHREAD | 0x40;
        // pid, tid, comm, flags, RT priority, policy, CPUs, CPU time.
        type Row<'a> = (i32, i32, &'a str, u64, u32, u32, &'a str, u64);
        let threads: &[Row] = &[
            (2, 2, "kthreadd", k, 0, 0, "0-1", 10),
            (18, 18, "migration/0", k, 99, 1, "0", 500),
            (19, 19, "ktimers/0", k, 1, 1, "0", 9_000),
            (20, 20, "rcuc/0", k, 1, 1, "0", 7_000),
            (50, 50, "irq/24-eth0", k, 50, 1, "1", 3_000_000),
            (51, 51, "irq/9-acpi", k, 50, 1, "0-1", 1_000),
            (52, 52, "irq_work/1", k, 1, 1, "1", 10),
            (300, 300, "bash", 0x400100, 0, 0, "0-1", 99),
            (400, 400, "ctl (main)", 0x400040, 95, 1, "0-1", 5_000_000),
            (400, 401, "ctl worker", 0x400040, 0, 0, "0-1", 5),
            (500, 500, "dl-task", 0x400040, 0, 6, "0-1", 8_000_000),
        ];
        for &(pid, tid, comm, flags, prio, policy, cpus, ns) in threads {
            let dir = root.join(format!("{pid}/task/{tid}"));
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("stat"), stat_line(tid, comm, flags, prio, policy)).unwrap();
            fs::write(
                dir.join("status"),
                format!("Name:\t{comm}\nCpus_allowed:\t3\nCpus_allowed_list:\t{cpus}\n"),
            )
            .unwrap();
            fs::write(dir.join("schedstat"), format!("{ns} 0 0\n")).unwrap();
        }
        fs::create_dir_all(root.join("sys/kernel")).unwrap();
        fs::write(root.join("sys/kernel/realtime"), "1\n").unwrap();
    }

    #[test]
    fn stat_fields_survive_names_with_spaces_and_parentheses() {
        let s = parse_stat_sched(&stat_line(7, "a (b) c", PF_KTHREAD, 50, 1)).unwrap();
        assert_eq!(s.comm, "a (b) c");
        assert_eq!(
            (s.flags, s.rt_priority, s.policy, s.starttime),
            (PF_KTHREAD, 50, 1, 42)
        );
        // A real line of this machine's kernel parses too.
        let own = fs::read_to_string("/proc/self/stat").unwrap();
        assert_eq!(parse_stat_sched(&own).unwrap().policy, sched::SCHED_OTHER);
    }

    #[test]
    fn interrupt_threads_are_told_from_other_kernel_threads() {
        assert_eq!(classify("irq/24-eth0", PF_KTHREAD, 1), RtKind::Interrupt);
        assert_eq!(classify("irq/9-acpi", PF_KTHREAD, 1), RtKind::Interrupt);
        assert_eq!(classify("irq_work/1", PF_KTHREAD, 1), RtKind::Kernel);
        assert_eq!(classify("irq/x-y", PF_KTHREAD, 1), RtKind::Kernel);
        assert_eq!(classify("ktimers/0", PF_KTHREAD, 1), RtKind::Kernel);
        // A user thread that calls itself irq/1-x is still a user thread.
        assert_eq!(classify("irq/1-x", 0x40, 1), RtKind::User);
        assert_eq!(classify("anything", PF_KTHREAD, 6), RtKind::Deadline);
    }

    /// Issue 19: the detection on a fixture tree of a PREEMPT_RT machine.
    #[test]
    fn a_preempt_rt_tree_is_scanned_for_every_rt_thread() {
        let root = std::env::temp_dir().join(format!("rtbox-hostthreads-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        preempt_rt_tree(&root);
        let dl = |tid: i32| {
            assert_eq!(tid, 500, "only deadline threads are asked");
            Ok(SchedAttr {
                policy: SCHED_DEADLINE,
                flags: 0,
                nice: 0,
                priority: 0,
                runtime: 4_000_000,
                deadline: 10_000_000,
                period: 10_000_000,
            })
        };
        let all = scan(&root, &|pid| pid == 300, &dl).unwrap();
        let names: Vec<(&str, RtKind, u32)> = all
            .iter()
            .map(|t| (t.comm.as_str(), t.kind, t.priority))
            .collect();
        assert_eq!(
            names,
            vec![
                ("migration/0", RtKind::Kernel, 99),
                ("ktimers/0", RtKind::Kernel, 1),
                ("rcuc/0", RtKind::Kernel, 1),
                ("irq/24-eth0", RtKind::Interrupt, 50),
                ("irq/9-acpi", RtKind::Interrupt, 50),
                ("irq_work/1", RtKind::Kernel, 1),
                ("ctl (main)", RtKind::User, 95),
                ("dl-task", RtKind::Deadline, 0),
            ]
        );
        let eth = &all[3];
        assert_eq!((eth.cpus.as_str(), eth.cpu_ns), ("1", 3_000_000));
        let d = all.last().unwrap();
        assert_eq!(
            (d.runtime, d.period, d.cpus.as_str()),
            (4_000_000, 10_000_000, "0-1")
        );
        assert!(preempt_rt_under(&root.join("sys")));
        assert!(all_interrupts_threaded_with(true, "quiet"));
        assert!(all_interrupts_threaded_with(false, "quiet threadirqs ro"));
        assert!(!all_interrupts_threaded_with(false, "quiet nothreadirqs"));
        assert!(!preempt_rt_under(&root.join("nothing")));
        // A skipped process is left out.
        assert!(scan(&root, &|pid| pid == 500, &dl)
            .unwrap()
            .iter()
            .all(|t| t.pid != 500));
        // Asked for policies first, a thread whose policy is not real-time is not read.
        let policy = |tid: i32| {
            if tid == 500 {
                dl(tid)
            } else {
                Ok(SchedAttr::other(0))
            }
        };
        let dl_only = scan_with(&root, &|_| false, &|_| false, &policy, true).unwrap();
        assert_eq!(
            dl_only.iter().map(|t| t.comm.as_str()).collect::<Vec<_>>(),
            vec!["dl-task"]
        );
        // A known thread (a member) is neither asked nor read; its process's others are.
        let asked = std::cell::RefCell::new(Vec::new());
        let counting = |tid: i32| {
            asked.borrow_mut().push(tid);
            match tid {
                500 => dl(tid),
                400 => Ok(SchedAttr::fifo(95)),
                _ => Ok(SchedAttr::other(0)),
            }
        };
        let known = scan_with(&root, &|_| false, &|tid| tid == 400, &counting, true).unwrap();
        assert!(known.iter().all(|t| t.tid != 400), "{known:?}");
        assert!(!asked.borrow().contains(&400));
        assert!(known.iter().any(|t| t.tid == 500));
        fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn this_machine_is_scanned_without_errors() {
        let all = scan_host(&|_| false, &|_| false).expect("scan /proc");
        // Every kernel has its per-CPU stopper threads at FIFO 99.
        assert!(
            all.iter()
                .any(|t| t.comm.starts_with("migration/") && t.kind == RtKind::Kernel),
            "{all:?}"
        );
    }
}
