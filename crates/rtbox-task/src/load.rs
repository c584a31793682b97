//! A synthetic periodic load whose jobs use exactly their CPU time, whatever the machine's
//! speed: one thread per task, job k released at the common start + k T, and each job burns
//! C ns of its thread's own CPU clock (`CLOCK_THREAD_CPUTIME_ID`) before it ends. It is what the
//! fidelity experiment runs inside analysis-sized boxes (`rtbox load`).
//!
//! Why not rt-app: rt-app 1.0's `run` event is a count of loops calibrated once, and beside
//! unmanaged load its loops ran 1.6-2.0 times slower (cache and memory-bus contention, host
//! steal), so jobs used more CPU than the WCET the box was sized for; its `runtime` event runs
//! for a span of CLOCK_MONOTONIC time, so a preempted job ends when the wall clock says so,
//! having done less work (a job that cannot be late). Neither is a job of C ns of CPU. Here the
//! job's demand is its WCET by construction, so the analysis's model holds for the workload.
//!
//! Releases are strictly periodic from the start (the analysis's sporadic model at its
//! densest): a job that ends after the next release starts the next job at once, and its
//! lateness shows in the record. Each thread sets its own SCHED_FIFO priority and name as
//! rt-app's threads do, so inside a box the runtime ranks it by that priority.

use rtbox_linux::sched::{self, SchedAttr};
use rtbox_model::Nanos;

/// One task of the load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadTask {
    /// Thread name (at most 15 bytes reach the kernel).
    pub name: String,
    /// CPU time of every job, ns of the thread's own CPU clock.
    pub wcet: Nanos,
    pub period: Nanos,
    /// Relative deadline (recorded with each job, for the log's reader).
    pub deadline: Nanos,
    /// SCHED_FIFO priority the thread sets itself (0: it stays a normal thread).
    pub priority: u32,
}

/// What one job did (CLOCK_MONOTONIC ns, CPU in ns of the thread's CPU clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadJob {
    pub release: u64,
    pub start: u64,
    pub end: u64,
    pub cpu: u64,
}

impl LoadJob {
    /// How late the job ended after its absolute deadline `release + deadline`, if it did.
    pub fn lateness(&self, deadline: Nanos) -> Option<u64> {
        let due = self.release + deadline;
        (self.end > due).then(|| self.end - due)
    }
}

/// Errors of a load run.
#[derive(Debug)]
pub enum LoadError {
    /// A task's figures are unusable (`0 < wcet <= deadline <= period`, priority <= 99).
    Task { task: String, reason: String },
    /// A thread could not be created.
    Spawn(std::io::Error),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Task { task, reason } => write!(f, "task {task}: {reason}"),
            LoadError::Spawn(e) => write!(f, "thread: {e}"),
        }
    }
}

impl std::error::Error for LoadError {}

/// Rule: a load task is `0 < wcet <= deadline <= period` (the model's declaration rule for
/// periodic tasks), with a SCHED_FIFO priority of at most 99.
pub fn check(t: &LoadTask) -> Result<(), LoadError> {
    let bad = |reason: String| {
        Err(LoadError::Task {
            task: t.name.clone(),
            reason,
        })
    };
    if t.wcet == 0 {
        return bad("wcet is 0".into());
    }
    if t.wcet > t.deadline {
        return bad(format!(
            "wcet {} ns is above the deadline {} ns",
            t.wcet, t.deadline
        ));
    }
    if t.deadline > t.period {
        return bad(format!(
            "deadline {} ns is above the period {} ns",
            t.deadline, t.period
        ));
    }
    if t.priority > 99 {
        return bad(format!("priority {} is above 99", t.priority));
    }
    Ok(())
}

/// The releases of a task that runs from `start` for `duration`: every `start + k period`
/// before `start + duration`.
pub fn releases(start: u64, period: Nanos, duration: Nanos) -> impl Iterator<Item = u64> {
    (0..)
        .map(move |k: u64| start + k * period)
        .take_while(move |&r| r < start + duration)
}

/// Burns `ns` of the calling thread's CPU clock (it may be preempted meanwhile: only the CPU
/// it got counts). Returns the CPU time it used, at least `ns` (one clock read more).
pub fn burn(ns: Nanos) -> u64 {
    let c0 = rtbox_linux::thread_cpu_ns();
    loop {
        let used = rtbox_linux::thread_cpu_ns() - c0;
        if used >= ns {
            return used;
        }
    }
}

/// Names the calling thread (the kernel keeps 15 bytes).
fn set_thread_name(name: &str) {
    let mut b: Vec<u8> = name.bytes().filter(|&c| c != 0).take(15).collect();
    b.push(0);
    // SAFETY: b is a NUL-terminated buffer of at most 16 bytes, as PR_SET_NAME reads.
    unsafe { libc::prctl(libc::PR_SET_NAME, b.as_ptr() as libc::c_ulong, 0, 0, 0) };
}

/// One task's thread: name and priority, then its jobs from `start` for `duration`; then it
/// waits for every other task's last job before it ends (`done`).
fn task_loop(t: &LoadTask, start: u64, duration: Nanos, done: &std::sync::Barrier) -> Vec<LoadJob> {
    set_thread_name(&t.name);
    if t.priority > 0 {
        // As rt-app: the thread sets its own priority; inside a box the runtime re-ranks it.
        let _ = sched::set_attr(sched::gettid(), &SchedAttr::fifo(t.priority));
    }
    let mut jobs = Vec::new();
    for release in releases(start, t.period, duration) {
        if rtbox_linux::monotonic_ns() < release {
            rtbox_linux::sleep_until(release);
        }
        let begin = rtbox_linux::monotonic_ns();
        let cpu = burn(t.wcet);
        jobs.push(LoadJob {
            release,
            start: begin,
            end: rtbox_linux::monotonic_ns(),
            cpu,
        });
    }
    // No thread ends while another still runs jobs: a thread's exit costs a runtime that
    // manages it work at that moment (measured with rtbox: the loop read an exiting member's
    // /proc files while the kernel tore it down), which is not the jobs' own demand.
    done.wait();
    jobs
}

/// Runs `tasks` together: every task's first job is released `delay` from now (time for
/// every thread to start, and to be placed by a runtime, before the critical instant), the
/// last before `delay + duration`; the threads end together once every task's last job ended.
/// Returns each task's jobs, in the order of `tasks`.
pub fn run(
    tasks: &[LoadTask],
    delay: Nanos,
    duration: Nanos,
) -> Result<Vec<Vec<LoadJob>>, LoadError> {
    for t in tasks {
        check(t)?;
    }
    let start = rtbox_linux::monotonic_ns() + delay;
    let done = std::sync::Arc::new(std::sync::Barrier::new(tasks.len()));
    let handles = tasks
        .iter()
        .map(|t| {
            let (t, done) = (t.clone(), done.clone());
            std::thread::Builder::new()
                .name(t.name.chars().take(15).collect())
                .spawn(move || task_loop(&t, start, duration, &done))
                .map_err(LoadError::Spawn)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(handles
        .into_iter()
        .map(|h| h.join().unwrap_or_default())
        .collect())
}

/// The log of one task: a comment line with its figures, then one line per job,
/// `release start end cpu` in ns.
pub fn log_text(t: &LoadTask, jobs: &[LoadJob]) -> String {
    let mut s = format!(
        "# task {} wcet {} period {} deadline {} priority {}\n# release start end cpu\n",
        t.name, t.wcet, t.period, t.deadline, t.priority
    );
    for j in jobs {
        s += &format!("{} {} {} {}\n", j.release, j.start, j.end, j.cpu);
    }
    s
}

/// Parses [`log_text`]'s job lines (comments skipped).
pub fn parse_log(text: &str) -> Result<Vec<LoadJob>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty())
        .map(|(i, l)| {
            let v: Vec<u64> = l
                .split_whitespace()
                .map(|x| x.parse::<u64>())
                .collect::<Result<_, _>>()
                .map_err(|e| format!("line {}: {e}", i + 1))?;
            match v[..] {
                [release, start, end, cpu] => Ok(LoadJob {
                    release,
                    start,
                    end,
                    cpu,
                }),
                _ => Err(format!("line {}: {} fields, not 4", i + 1, v.len())),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(wcet: Nanos, period: Nanos) -> LoadTask {
        LoadTask {
            name: "t0".into(),
            wcet,
            period,
            deadline: period,
            priority: 0,
        }
    }

    #[test]
    fn releases_are_strictly_periodic_and_end_before_the_run_does() {
        let r: Vec<u64> = releases(100, 10, 35).collect();
        assert_eq!(r, vec![100, 110, 120, 130]);
        assert_eq!(releases(0, 10, 0).count(), 0);
    }

    #[test]
    fn figures_are_checked_with_the_field_named() {
        assert!(check(&task(1, 10)).is_ok());
        let e = check(&task(0, 10)).unwrap_err().to_string();
        assert!(e.contains("wcet is 0"), "{e}");
        let e = check(&task(11, 10)).unwrap_err().to_string();
        assert!(e.contains("above the deadline"), "{e}");
        let mut t = task(1, 10);
        t.deadline = 12;
        assert!(check(&t)
            .unwrap_err()
            .to_string()
            .contains("above the period"));
        t.deadline = 10;
        t.priority = 100;
        assert!(check(&t).unwrap_err().to_string().contains("above 99"));
    }

    #[test]
    fn a_job_burns_its_cpu_time_and_no_more_than_a_clock_read_beyond() {
        let used = burn(2_000_000);
        assert!(used >= 2_000_000);
        // One read of the CPU clock is a syscall of a few microseconds at most; a generous
        // bound still tells a calibrated loop (tens of percent off) apart.
        assert!(used < 2_000_000 + 200_000, "{used}");
    }

    #[test]
    fn a_short_run_releases_every_job_on_time_and_logs_it() {
        let t = task(1_000_000, 10_000_000);
        let jobs = run(std::slice::from_ref(&t), 1_000_000, 50_000_000).unwrap();
        assert_eq!(jobs.len(), 1);
        let j = &jobs[0];
        assert_eq!(j.len(), 5);
        for w in j.windows(2) {
            assert_eq!(w[1].release - w[0].release, 10_000_000);
        }
        for x in j {
            assert!(x.start >= x.release && x.end > x.start && x.cpu >= 1_000_000);
        }
        let parsed = parse_log(&log_text(&t, j)).unwrap();
        assert_eq!(&parsed, j);
        assert!(parse_log("1 2 3\n").unwrap_err().contains("3 fields"));
        let late = LoadJob {
            release: 0,
            start: 0,
            end: 12,
            cpu: 1,
        };
        assert_eq!(late.lateness(10), Some(2));
        assert_eq!(late.lateness(12), None);
    }
}
