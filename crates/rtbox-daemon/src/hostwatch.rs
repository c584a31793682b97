//! The host's own real-time work, watched while the daemon runs (docs/runtime.md,
//! "Coexistence with the host's real-time work"): unmanaged SCHED_DEADLINE tasks (counted
//! before boxes are admitted), fixed-priority kernel threads above some member (threaded
//! interrupts: their measured CPU use is counted), and user FIFO/RR threads above the members'
//! band (reported with their measured CPU use; admission cannot reserve for them).
//!
//! A thread at normal priority scans /proc every [`HOST_SCAN`] (a few ms per scan: never in
//! the enforcement loop) and publishes a [`HostReport`]; the runtime reads the latest one at
//! every admission and checks the running boxes against it when it changes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rtbox_linux::hostthreads::{self, RtKind, RtThread};
use rtbox_linux::LinuxError;
use rtbox_model::{
    deadline_interference, root_domain_share, Bandwidth, CpuSet, DeadlineTask, HostLoad, PrioRange,
};
use serde::Serialize;

/// How often the host's threads are scanned. A scan reads every thread's stat (~3.5 ms of CPU
/// on a quiet 2-vCPU host, measured with `perf record`): at 1 s that alone was 0.0035 CPU, most
/// of the daemon's budget for a 2 ms / 10 ms box (issue 14). The host's real-time work changes
/// rarely, and a deadline task started later is still seen within this interval.
pub const HOST_SCAN: Duration = Duration::from_secs(5);

/// How many scan windows a kernel thread's peak CPU use is kept for admission.
pub const PEAK_WINDOWS: usize = 10;

/// Below this share of a CPU (0.1 %), a kernel thread's measured use is reported but not
/// admitted: migration and timer threads wake for microseconds a second.
pub const NOISE: Bandwidth = Bandwidth::from_units(1_000_000_000);

/// A real-time thread outside rtbox, as status shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostThread {
    pub pid: i32,
    pub tid: i32,
    pub comm: String,
    pub kind: &'static str,
    pub policy: &'static str,
    pub priority: u32,
    pub runtime_ns: u64,
    pub period_ns: u64,
    pub cpus: String,
    /// Measured CPU use over the last scan window (CPUs; `None` on first sight).
    pub cpu_share: Option<f64>,
    /// Whether admission counts it (deadline tasks; kernel threads above some member).
    pub admitted: bool,
}

/// What the latest scan found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HostReport {
    /// Scans so far (a change of the admitted load bumps `generation`).
    pub scans: u64,
    pub generation: u64,
    pub preempt_rt: bool,
    /// The members' band the kernel threads were compared with.
    pub band: String,
    pub threads: Vec<HostThread>,
    /// Per CPU: what admission subtracts (deadline worst case + counted kernel threads).
    #[serde(skip)]
    pub load: HostLoad,
    /// Per CPU: the kernel's own accounting of the deadline tasks (root-domain spread).
    #[serde(skip)]
    pub kernel_deadline: BTreeMap<u32, Bandwidth>,
    /// The last scan's error, if it failed (the previous load stays).
    pub error: Option<String>,
}

impl HostReport {
    /// Per-CPU figures for status: deadline (worst case and kernel view), kernel threads.
    pub fn cpus_json(&self) -> serde_json::Value {
        let cpus: std::collections::BTreeSet<u32> = self
            .load
            .cpus
            .keys()
            .chain(self.kernel_deadline.keys())
            .copied()
            .collect();
        serde_json::Value::Array(
            cpus.into_iter()
                .map(|c| {
                    let h = self.load.cpus.get(&c).cloned().unwrap_or_default();
                    serde_json::json!({
                        "cpu": c,
                        "deadline": h.deadline.as_f64(),
                        "deadline_tasks": h.deadline_tasks,
                        "deadline_kernel_accounting": self.kernel_deadline.get(&c).copied().unwrap_or_default().as_f64(),
                        "kernel_threads": h.kernel_threads.as_f64(),
                        "kernel_thread_count": h.kernel_thread_count,
                        "admitted": h.total().as_f64(),
                    })
                })
                .collect(),
        )
    }

    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        v["cpus"] = self.cpus_json();
        v
    }
}

fn policy_name(p: u32) -> &'static str {
    match p {
        rtbox_linux::sched::SCHED_FIFO => "fifo",
        rtbox_linux::sched::SCHED_RR => "rr",
        rtbox_linux::sched::SCHED_DEADLINE => "deadline",
        _ => "other",
    }
}

/// The measured history of the host's threads between scans.
#[derive(Debug, Default)]
pub struct Fold {
    /// (tid, start time) -> CPU time at the last scan and the last shares.
    seen: BTreeMap<(i32, u64), (u64, VecDeque<Bandwidth>)>,
    last_ns: Option<u64>,
    scans: u64,
    generation: u64,
    last_load: HostLoad,
}

/// Rule: a fixed-priority kernel thread takes CPU time from a member when it runs above it,
/// i.e. at or above the band's bottom; its measured use is then counted on every CPU it may run
/// on (a handler's thread follows its interrupt's affinity). Threads below the band run in
/// what the boxes leave.
pub fn kernel_thread_counts(kind: RtKind, priority: u32, band: PrioRange) -> bool {
    matches!(kind, RtKind::Interrupt | RtKind::Kernel) && priority >= band.lo
}

impl Fold {
    /// Folds one scan taken at `now_ns` into a report. Pure.
    pub fn fold(
        &mut self,
        now_ns: u64,
        threads: &[RtThread],
        band: PrioRange,
        online: &CpuSet,
        preempt_rt: bool,
    ) -> HostReport {
        let window = self
            .last_ns
            .map(|t| now_ns.saturating_sub(t))
            .filter(|&w| w > 0);
        let mut seen = BTreeMap::new();
        let mut out = Vec::new();
        let mut deadline = Vec::new();
        let mut kernel: BTreeMap<u32, (Bandwidth, usize)> = BTreeMap::new();
        for t in threads {
            let key = (t.tid, t.starttime);
            let mut history = self
                .seen
                .remove(&key)
                .map(|(prev, h)| (Some(prev), h))
                .unwrap_or((None, VecDeque::new()));
            let share = match (history.0, window) {
                (Some(prev), Some(w)) => {
                    let s = Bandwidth::of(t.cpu_ns.saturating_sub(prev), w).min(Bandwidth::ONE);
                    history.1.push_back(s);
                    while history.1.len() > PEAK_WINDOWS {
                        history.1.pop_front();
                    }
                    Some(s)
                }
                _ => None,
            };
            let cpus = CpuSet::parse(&t.cpus).unwrap_or_else(|_| online.clone());
            let cpus: CpuSet = {
                let mut c = CpuSet::new();
                for cpu in cpus.iter().filter(|c| online.contains(*c)) {
                    c.insert(cpu);
                }
                c
            };
            let mut admitted = false;
            if t.kind == RtKind::Deadline {
                admitted = true;
                deadline.push(DeadlineTask {
                    tid: t.tid,
                    comm: t.comm.clone(),
                    runtime: t.runtime,
                    period: t.period,
                    cpus: cpus.clone(),
                });
            } else if kernel_thread_counts(t.kind, t.priority, band) {
                let peak = history.1.iter().copied().max().unwrap_or_default();
                if peak >= NOISE {
                    admitted = true;
                    for cpu in cpus.iter() {
                        let e = kernel.entry(cpu).or_default();
                        e.0 = (e.0 + peak).min(Bandwidth::ONE);
                        e.1 += 1;
                    }
                }
            }
            out.push(HostThread {
                pid: t.pid,
                tid: t.tid,
                comm: t.comm.clone(),
                kind: t.kind.name(),
                policy: policy_name(t.policy),
                priority: t.priority,
                runtime_ns: t.runtime,
                period_ns: t.period,
                cpus: t.cpus.clone(),
                cpu_share: share.map(Bandwidth::as_f64),
                admitted,
            });
            seen.insert(key, (t.cpu_ns, history.1));
        }
        self.seen = seen;
        self.last_ns = Some(now_ns);
        self.scans += 1;
        let load = HostLoad::new(&deadline, &kernel);
        if load != self.last_load {
            self.generation += 1;
            self.last_load = load.clone();
        }
        debug_assert!(deadline_interference(&deadline)
            .iter()
            .all(|(c, b)| load.cpus[c].deadline == *b));
        HostReport {
            scans: self.scans,
            generation: self.generation,
            preempt_rt,
            band: band.to_string(),
            threads: out,
            kernel_deadline: root_domain_share(&deadline),
            load,
            error: None,
        }
    }
}

/// Whether a process is the daemon itself or its watchdog (forked by it, same name).
fn own_process(pid: i32, me: i32, my_comm: &str) -> bool {
    if pid == me {
        return true;
    }
    let Ok(stat) = rtbox_linux::procfs::stat(pid) else {
        return false;
    };
    stat.ppid == me
        && std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == my_comm)
}

/// One scan of this machine, without the daemon's members (`members`: their thread ids).
pub fn scan_once(
    fold: &mut Fold,
    band: PrioRange,
    online: &CpuSet,
    members: &BTreeSet<i32>,
) -> Result<HostReport, LinuxError> {
    let me = std::process::id() as i32;
    let my_comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
    let my_comm = my_comm.trim().to_string();
    let threads = hostthreads::scan_host(&|pid| own_process(pid, me, &my_comm), &|tid| {
        members.contains(&tid)
    })?;
    Ok(fold.fold(
        rtbox_linux::monotonic_ns(),
        &threads,
        band,
        online,
        hostthreads::preempt_rt(),
    ))
}

/// The scanning thread and its latest report. The enforcement loop (FIFO 98) never waits for
/// the scanner (a normal thread that members may preempt while it holds the lock): it reads the
/// publication counter and only `try_lock`s when there is something new ([`HostWatch::fresh`]).
pub struct HostWatch {
    latest: Arc<Mutex<HostReport>>,
    /// The daemon's members, left out of the scans: real-time threads, but admitted as boxes
    /// already. Reading 500 sleeping members' /proc files was most of the cost of sleeping
    /// members (5.7 ms of daemon CPU per second, issue 14). Replaced whole by the loop, which
    /// never waits for it ([`HostWatch::set_members`]).
    members: Arc<Mutex<Arc<BTreeSet<i32>>>>,
    /// Reports published so far.
    published: Arc<AtomicU64>,
    /// Dropped to stop the scanner: its wait between scans ends at once (no polling tick).
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HostWatch {
    /// Scans once now (so admission at start counts the deadline tasks already there), then
    /// every [`HOST_SCAN`] from a thread at normal priority.
    pub fn start(band: PrioRange, online: CpuSet) -> HostWatch {
        let mut fold = Fold::default();
        let members: Arc<Mutex<Arc<BTreeSet<i32>>>> = Arc::default();
        let first =
            scan_once(&mut fold, band, &online, &BTreeSet::new()).unwrap_or_else(|e| HostReport {
                error: Some(e.to_string()),
                ..HostReport::default()
            });
        let latest = Arc::new(Mutex::new(first));
        let published = Arc::new(AtomicU64::new(1));
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let (l, n, known) = (latest.clone(), published.clone(), members.clone());
        let thread = std::thread::Builder::new()
            .name("rtbox-host".into())
            .spawn(move || {
                // Normal priority whatever the spawning thread had.
                let _ = rtbox_linux::sched::set_attr(
                    rtbox_linux::sched::gettid(),
                    &rtbox_linux::sched::SchedAttr::other(0),
                );
                // Wakes only to scan: the channel's sender is dropped to stop it.
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(HOST_SCAN)
                {
                    let known = known.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    let r = scan_once(&mut fold, band, &online, &known);
                    let old = {
                        let mut g = l.lock().unwrap_or_else(|p| p.into_inner());
                        match r {
                            Ok(r) => Some(std::mem::replace(&mut *g, r)),
                            Err(e) => {
                                g.error = Some(e.to_string());
                                None
                            }
                        }
                    };
                    drop(old);
                    n.fetch_add(1, Ordering::Release);
                }
            })
            .ok();
        HostWatch {
            latest,
            members,
            published,
            stop: Some(stop),
            thread,
        }
    }

    /// The members to leave out of the next scans; false when the scanner held the lock (the
    /// loop tries again later rather than wait for a normal-priority thread).
    pub fn set_members(&self, tids: Arc<BTreeSet<i32>>) -> bool {
        match self.members.try_lock() {
            Ok(mut g) => {
                *g = tids;
                true
            }
            Err(std::sync::TryLockError::Poisoned(p)) => {
                *p.into_inner() = tids;
                true
            }
            Err(std::sync::TryLockError::WouldBlock) => false,
        }
    }

    /// Reports published so far.
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Acquire)
    }

    /// The latest report if one was published after the `seen`-th and the lock is free now
    /// (never waits).
    pub fn fresh(&self, seen: u64) -> Option<(HostReport, u64)> {
        let n = self.published();
        if n == seen {
            return None;
        }
        let g = self.latest.try_lock().ok()?;
        Some((g.clone(), n))
    }

    /// The latest report, waiting for the lock (start and tests only).
    pub fn report(&self) -> HostReport {
        self.latest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for HostWatch {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Rule: the default band. On a kernel whose interrupt handlers all run as threads (PREEMPT_RT,
/// or the `threadirqs` boot option) the members' band ends just below the lowest interrupt
/// thread priority (40 priorities wide, at least 1): interrupts then preempt every member and
/// are never starved, and their measured load is admitted on their CPUs. Elsewhere the band
/// stays 40-89 and the few forced-threaded handlers inside it are measured and admitted.
pub fn default_band(all_threaded: bool, threads: &[RtThread]) -> (PrioRange, String) {
    let lowest_irq = threads
        .iter()
        .filter(|t| t.kind == RtKind::Interrupt && t.priority > 1)
        .map(|t| t.priority)
        .min();
    match (all_threaded, lowest_irq) {
        (true, Some(p)) => {
            let hi = p - 1;
            let lo = hi.saturating_sub(39).max(1);
            (
                PrioRange { lo, hi },
                format!("threaded interrupts at FIFO {p}: members run below them"),
            )
        }
        _ => (
            PrioRange::DEFAULT,
            "interrupt handlers are not threaded: default band".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(tid: i32, comm: &str, kind: RtKind, prio: u32, cpus: &str, cpu_ns: u64) -> RtThread {
        RtThread {
            pid: tid,
            tid,
            comm: comm.into(),
            kind,
            policy: if kind == RtKind::Deadline { 6 } else { 1 },
            priority: prio,
            runtime: if kind == RtKind::Deadline {
                4_000_000
            } else {
                0
            },
            period: if kind == RtKind::Deadline {
                10_000_000
            } else {
                0
            },
            cpus: cpus.into(),
            cpu_ns,
            starttime: 1,
        }
    }

    /// Issue 19: deadline tasks count at once; an interrupt thread in or above the band counts
    /// its measured peak on its CPUs after a window; one below the band, and user threads, are
    /// reported only.
    #[test]
    fn a_scan_counts_deadline_tasks_and_busy_kernel_threads_above_members() {
        let online = CpuSet::parse("0-1").unwrap();
        let band = PrioRange::DEFAULT;
        let mut fold = Fold::default();
        let scan = |ns: [u64; 4]| {
            vec![
                t(5, "dl", RtKind::Deadline, 0, "0-1", ns[0]),
                t(6, "irq/24-eth0", RtKind::Interrupt, 50, "1", ns[1]),
                t(7, "ktimers/0", RtKind::Kernel, 1, "0", ns[2]),
                t(8, "user95", RtKind::User, 95, "0-1", ns[3]),
            ]
        };
        let r = fold.fold(1_000_000_000, &scan([0; 4]), band, &online, false);
        assert_eq!(r.load.on(0), Bandwidth::of(4, 10));
        assert_eq!(r.load.on(1), Bandwidth::of(4, 10));
        assert_eq!(r.kernel_deadline[&1], Bandwidth::of(2, 10));
        assert!(r.threads.iter().all(|t| t.cpu_share.is_none()));
        let gen = r.generation;
        // One second later: the handler used 50 ms of CPU 1, ktimers 300 ms, the user thread 0.5 s.
        let r = fold.fold(
            2_000_000_000,
            &scan([400_000_000, 50_000_000, 300_000_000, 500_000_000]),
            band,
            &online,
            false,
        );
        assert_eq!(r.load.on(1), Bandwidth::of(45, 100));
        assert_eq!(
            r.load.on(0),
            Bandwidth::of(4, 10),
            "ktimers runs below the band"
        );
        assert!(r.generation > gen);
        let user = r.threads.iter().find(|t| t.comm == "user95").unwrap();
        assert_eq!((user.cpu_share, user.admitted), (Some(0.5), false));
        // The peak is kept: a quiet window does not drop the handler's count.
        let r = fold.fold(
            3_000_000_000,
            &scan([800_000_000, 50_000_000, 300_000_000, 500_000_000]),
            band,
            &online,
            false,
        );
        assert_eq!(r.load.on(1), Bandwidth::of(45, 100));
        // With the band at 1-49 ktimers (FIFO 1) runs above members and counts too.
        let low = PrioRange::new(1, 49).unwrap();
        let r = fold.fold(
            4_000_000_000,
            &scan([800_000_000, 50_000_000, 600_000_000, 500_000_000]),
            low,
            &online,
            false,
        );
        assert_eq!(r.load.cpus[&0].kernel_threads, Bandwidth::of(3, 10));
    }

    #[test]
    fn the_default_band_goes_below_threaded_interrupts_only_when_all_are_threads() {
        let rt = [
            t(50, "irq/24-eth0", RtKind::Interrupt, 50, "1", 0),
            t(51, "irq/9-acpi", RtKind::Interrupt, 50, "0", 0),
            t(19, "ktimers/0", RtKind::Kernel, 1, "0", 0),
        ];
        assert_eq!(default_band(true, &rt).0, PrioRange::new(10, 49).unwrap());
        assert_eq!(default_band(false, &rt).0, PrioRange::DEFAULT);
        assert_eq!(default_band(true, &[]).0, PrioRange::DEFAULT);
    }

    /// The live scan of this machine finds its stopper threads and nothing of its own process.
    #[test]
    fn this_machine_is_watched() {
        let online = crate::host::online().unwrap();
        let mut fold = Fold::default();
        let r = scan_once(&mut fold, PrioRange::DEFAULT, &online, &BTreeSet::new()).unwrap();
        let me = std::process::id() as i32;
        assert!(r.threads.iter().all(|t| t.pid != me));
        assert!(r.threads.iter().any(|t| t.comm.starts_with("migration/")));
    }
}
