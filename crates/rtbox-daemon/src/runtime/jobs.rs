//! Periodic tasks of the periodic-task API and their jobs: the job pages the daemon created
//! (`crate::jobpage`), what each task declared, and per-task job statistics read from the
//! pages at scans (never per job): releases, completions, response times, release latency,
//! deadline misses and WCET overruns. Status, JSON and metrics show them.
//!
//! A task enters (`task_enter`: its process joins the box unless it already is a member of
//! it, and the daemon creates the task's page), declares and starts (`task_run`: WCET,
//! period, deadline, priority), and leaves (`task_exit`, or by exiting). Leaving takes a last
//! reading of the page and keeps the task's figures among the finished tasks.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

use rtbox_model::Nanos;
use serde::Serialize;

use super::members::Target;
use super::{Runtime, RuntimeError};
use crate::jobpage::{Declared, JobPage, PageCounters};

/// Per-job samples kept per task for the percentiles (the last this many jobs).
pub const SAMPLES: usize = 4096;
/// Finished tasks kept for status.
pub const FINISHED: usize = 64;
/// Priorities a task may declare (the seed's range, that of SCHED_FIFO).
pub const PRIORITIES: std::ops::RangeInclusive<u32> = 1..=99;

/// Why a task request was refused (nothing changed); the message names the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskError {
    /// A declared figure is out of range.
    Field {
        field: &'static str,
        why: String,
    },
    /// `tid` is not a thread of `pid`.
    NotThread {
        pid: i32,
        tid: i32,
    },
    AlreadyTask {
        tid: i32,
    },
    NoTask {
        tid: i32,
    },
    /// The task's process is a member of another box.
    OtherBox {
        pid: i32,
        box_name: String,
        wanted: String,
    },
    /// `task_run` twice.
    Running {
        tid: i32,
    },
    Page {
        path: PathBuf,
        why: String,
    },
}

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskError::Field { field, why } => write!(f, "task: {field}: {why}"),
            TaskError::NotThread { pid, tid } => {
                write!(f, "task: tid {tid} is not a thread of process {pid}")
            }
            TaskError::AlreadyTask { tid } => write!(f, "task: thread {tid} already entered"),
            TaskError::NoTask { tid } => {
                write!(f, "task: thread {tid} has not entered (rt_enter first)")
            }
            TaskError::OtherBox {
                pid,
                box_name,
                wanted,
            } => write!(
                f,
                "task: process {pid} is a member of box \"{box_name}\", not \"{wanted}\""
            ),
            TaskError::Running { tid } => write!(f, "task: thread {tid} is already running"),
            TaskError::Page { path, why } => {
                write!(f, "task: job page {}: {why}", path.display())
            }
        }
    }
}

impl std::error::Error for TaskError {}

/// Checks a declaration: every time above zero, `wcet <= deadline <= period` (constrained
/// deadlines, as the response-time analysis of fixed priority assumes), priority 1..99.
pub fn check_declaration(d: Declared, priority: Option<u32>) -> Result<(), TaskError> {
    let field = |field, why: String| Err(TaskError::Field { field, why });
    if d.wcet == 0 {
        return field("wcet_ns", "must be above 0".into());
    }
    if d.period == 0 {
        return field("period_ns", "must be above 0".into());
    }
    if d.deadline == 0 {
        return field("deadline_ns", "must be above 0".into());
    }
    if d.wcet > d.deadline {
        return field(
            "wcet_ns",
            format!("{} is above the deadline {}", d.wcet, d.deadline),
        );
    }
    if d.deadline > d.period {
        return field(
            "deadline_ns",
            format!("{} is above the period {}", d.deadline, d.period),
        );
    }
    if let Some(p) = priority {
        if !PRIORITIES.contains(&p) {
            return field("priority", format!("{p} is not in 1..99"));
        }
    }
    Ok(())
}

/// Bounded per-job samples with nearest-rank percentiles.
#[derive(Debug, Default, Clone)]
pub struct Samples(VecDeque<u64>);

impl Samples {
    pub fn push(&mut self, v: u64) {
        if self.0.len() == SAMPLES {
            self.0.pop_front();
        }
        self.0.push_back(v);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The nearest-rank `p`-th percentile (0 < p <= 100), `None` without samples.
    pub fn percentile(&self, p: u32) -> Option<u64> {
        if self.0.is_empty() {
            return None;
        }
        let mut v: Vec<u64> = self.0.iter().copied().collect();
        v.sort_unstable();
        let rank = (p as usize * v.len()).div_ceil(100).max(1);
        Some(v[rank - 1])
    }
}

/// One task and what the daemon learned about its jobs.
#[derive(Debug)]
pub struct TaskJobs {
    pub pid: i32,
    pub tid: i32,
    pub box_name: String,
    page: JobPage,
    path: PathBuf,
    pub declared: Option<Declared>,
    pub priority: Option<u32>,
    /// The task's `task_enter` attached its process (so its exit detaches it).
    attached: bool,
    /// "entered", "running", "exited" (rt_exit) or "gone" (exited without rt_exit).
    pub state: &'static str,
    pub counters: PageCounters,
    /// The next job whose ring record the daemon has not read.
    next_job: u64,
    pub response: Samples,
    pub latency: Samples,
    /// Completed jobs whose record the ring no longer held when the daemon looked.
    pub unsampled: u64,
}

impl TaskJobs {
    /// Reads the page: counters, and the ring records of the jobs completed since the last
    /// read.
    pub fn read(&mut self) {
        let c = self.page.counters();
        let from = self
            .next_job
            .max(c.completed.saturating_sub(crate::jobpage::RING));
        self.unsampled += from - self.next_job;
        for job in from..c.completed {
            match self.page.record(job) {
                Some(r) => {
                    self.response.push(r.response());
                    self.latency.push(r.latency());
                }
                None => self.unsampled += 1,
            }
        }
        self.next_job = self.next_job.max(c.completed);
        self.counters = c;
        if self.state == "entered" || self.state == "running" {
            self.state = self.page.state().name();
        }
    }

    /// Its jobs at core time `now` for a plug-in (`plugins.rs`): nominal releases from the
    /// page's first release (CLOCK_MONOTONIC, `epoch` at core time 0) and its completions.
    /// `None` before `task_run`.
    pub fn job_counts(&self, epoch: u64, now: Nanos) -> Option<super::plugins::JobCounts> {
        let d = self.declared?;
        let c = self.page.counters();
        let first = (c.first_release != 0).then(|| c.first_release.saturating_sub(epoch));
        Some(super::plugins::JobCounts::nominal(
            first,
            d.period,
            now,
            c.completed,
        ))
    }

    pub fn row(&self) -> TaskRow {
        let d = self.declared.unwrap_or_default();
        TaskRow {
            pid: self.pid,
            tid: self.tid,
            box_name: self.box_name.clone(),
            state: self.state,
            wcet_ns: d.wcet,
            period_ns: d.period,
            deadline_ns: d.deadline,
            priority: self.priority,
            released: self.counters.released,
            completed: self.counters.completed,
            misses: self.counters.misses,
            overruns: self.counters.overruns,
            max_response_ns: self.counters.max_response,
            max_exec_ns: self.counters.max_exec,
            response_p50_ns: self.response.percentile(50),
            response_p99_ns: self.response.percentile(99),
            latency_p50_ns: self.latency.percentile(50),
            latency_p99_ns: self.latency.percentile(99),
            latency_max_ns: self.counters.max_latency,
            samples: self.response.len(),
            unsampled: self.unsampled,
            plugin: None,
        }
    }
}

/// A task as status and metrics show it (integer nanoseconds; percentiles over the last
/// [`SAMPLES`] jobs, maxima over all jobs).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TaskRow {
    pub pid: i32,
    pub tid: i32,
    #[serde(rename = "box")]
    pub box_name: String,
    pub state: &'static str,
    pub wcet_ns: u64,
    pub period_ns: u64,
    pub deadline_ns: u64,
    pub priority: Option<u32>,
    pub released: u64,
    pub completed: u64,
    pub misses: u64,
    pub overruns: u64,
    pub max_response_ns: u64,
    pub max_exec_ns: u64,
    pub response_p50_ns: Option<u64>,
    pub response_p99_ns: Option<u64>,
    /// Release latency (the release jitter of `rt_wait_for_period`).
    pub latency_p50_ns: Option<u64>,
    pub latency_p99_ns: Option<u64>,
    pub latency_max_ns: u64,
    pub samples: usize,
    pub unsampled: u64,
    /// In a plug-in box: the plug-in's decision for the task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<PluginRow>,
}

/// A plug-in's decision for a task (`plugins.rs`): its verdict (`guaranteed`, `unproven`,
/// `background`: failed the plug-in's test and runs below every admitted task), its current
/// vCPU and its priority in the box.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PluginRow {
    pub name: String,
    pub verdict: &'static str,
    pub cpu: Option<u32>,
    pub priority: u32,
}

/// The tasks of the periodic-task API.
#[derive(Debug)]
pub struct Jobs {
    dir: PathBuf,
    live: BTreeMap<i32, TaskJobs>,
    finished: VecDeque<TaskJobs>,
    last_read: Option<Nanos>,
}

impl Jobs {
    /// Tasks with pages in `dir`; pages a previous daemon left there (files named by a
    /// thread id) are removed.
    pub fn new(dir: PathBuf) -> Jobs {
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                if e.file_name()
                    .to_str()
                    .is_some_and(|n| n.parse::<i32>().is_ok())
                {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        Jobs {
            dir,
            live: BTreeMap::new(),
            finished: VecDeque::new(),
            last_read: None,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn get(&self, tid: i32) -> Option<&TaskJobs> {
        self.live.get(&tid)
    }

    /// The live tasks, by thread id.
    pub fn live(&self) -> impl Iterator<Item = &TaskJobs> {
        self.live.values()
    }

    /// Live tasks, then finished ones (oldest first).
    pub fn rows(&self) -> Vec<TaskRow> {
        self.live
            .values()
            .chain(self.finished.iter())
            .map(TaskJobs::row)
            .collect()
    }

    /// Whether a page read is due (at most once per `every`).
    fn due(&mut self, now: Nanos, every: Nanos) -> bool {
        if self.last_read.is_some_and(|t| now < t + every) {
            return false;
        }
        self.last_read = Some(now);
        true
    }

    /// Reads a task's page a last time and keeps it among the finished tasks; returns the
    /// process to detach when this task attached it and no other task of it remains.
    fn finish(&mut self, tid: i32, state: &'static str) -> Option<i32> {
        let mut t = self.live.remove(&tid)?;
        t.read();
        t.state = state;
        let _ = std::fs::remove_file(&t.path);
        let (pid, attached) = (t.pid, t.attached);
        if self.finished.len() == FINISHED {
            self.finished.pop_front();
        }
        self.finished.push_back(t);
        // The process leaves the box with the last of its tasks, if a task attached it.
        match self.live.values_mut().find(|o| o.pid == pid) {
            Some(other) => {
                other.attached |= attached;
                None
            }
            None => attached.then_some(pid),
        }
    }
}

impl Drop for Jobs {
    fn drop(&mut self) {
        for t in self.live.values() {
            let _ = std::fs::remove_file(&t.path);
        }
        // Only if empty.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn is_thread_of(pid: i32, tid: i32) -> bool {
    pid > 0 && tid > 0 && Path::new(&format!("/proc/{pid}/task/{tid}")).exists()
}

impl From<TaskError> for RuntimeError {
    fn from(e: TaskError) -> Self {
        RuntimeError::Task(e)
    }
}

impl Runtime {
    /// Thread `tid` of process `pid` (whose user is `uid`) enters box `box_name` as a periodic
    /// task: its process is attached unless it already is a member of the box, and its job
    /// page is created. Returns the page's path.
    pub fn task_enter(
        &mut self,
        box_name: &str,
        pid: i32,
        tid: i32,
        uid: u32,
    ) -> Result<PathBuf, RuntimeError> {
        if !is_thread_of(pid, tid) {
            return Err(TaskError::NotThread { pid, tid }.into());
        }
        if self.jobs.live.contains_key(&tid) {
            return Err(TaskError::AlreadyTask { tid }.into());
        }
        if self.system.get(box_name).is_none() {
            return Err(RuntimeError::NoSuchBox {
                name: box_name.into(),
            });
        }
        let member_of = self
            .members
            .by_tid
            .values()
            .find(|m| m.pid == pid)
            .map(|m| m.box_name.clone());
        let attached = match member_of {
            Some(b) if b == box_name => {
                // Its process is in the box; the thread itself may have been made after the
                // process's threads were listed (its fork reached no member parent).
                if !self.members.by_tid.contains_key(&tid) {
                    self.members.add_threads(&mut self.sched, box_name, &[tid]);
                }
                false
            }
            Some(b) => {
                return Err(TaskError::OtherBox {
                    pid,
                    box_name: b,
                    wanted: box_name.into(),
                }
                .into())
            }
            None => {
                self.attach(box_name, Target::Pid(pid))?;
                true
            }
        };
        let path = self.jobs.dir.join(tid.to_string());
        let page = std::fs::create_dir_all(&self.jobs.dir)
            .and_then(|_| JobPage::create(&path, tid, uid))
            .map_err(|e| TaskError::Page {
                path: path.clone(),
                why: e.to_string(),
            });
        let page = match page {
            Ok(p) => p,
            Err(e) => {
                if attached {
                    let _ = self.detach(Some(pid), None, None);
                }
                return Err(e.into());
            }
        };
        self.jobs.live.insert(
            tid,
            TaskJobs {
                pid,
                tid,
                box_name: box_name.into(),
                page,
                path: path.clone(),
                declared: None,
                priority: None,
                attached,
                state: "entered",
                counters: PageCounters::default(),
                next_job: 0,
                response: Samples::default(),
                latency: Samples::default(),
                unsampled: 0,
            },
        );
        tracing::info!(pid, tid, box_name, "task entered");
        Ok(path)
    }

    /// The task declares its WCET, period, deadline and priority and starts its jobs. The
    /// priority is its local priority in the box (the rule of `localprio`, through the core's
    /// `Scheduler::set_priority`), so a task needs no privilege of its own to get it.
    pub fn task_run(
        &mut self,
        pid: i32,
        tid: i32,
        d: Declared,
        priority: Option<u32>,
    ) -> Result<(), RuntimeError> {
        let now = self.now();
        let t = self
            .jobs
            .live
            .get_mut(&tid)
            .filter(|t| t.pid == pid)
            .ok_or(TaskError::NoTask { tid })?;
        if t.declared.is_some() {
            return Err(TaskError::Running { tid }.into());
        }
        check_declaration(d, priority)?;
        if let (Some(p), Some(m)) = (priority, self.members.by_tid.get_mut(&tid)) {
            if self.sched.set_priority(now, m.task, p).is_ok() {
                m.local_prio = p;
                // Its box's local ranks change.
                self.members.rest.stale();
                if m.ready {
                    let _ = self
                        .sched
                        .wake(now, m.task, super::localprio::native_edf_key(p));
                }
            }
        }
        t.declared = Some(d);
        t.priority = priority;
        t.page.declare(d);
        tracing::info!(
            pid,
            tid,
            wcet = d.wcet,
            period = d.period,
            deadline = d.deadline,
            ?priority,
            "task runs"
        );
        Ok(())
    }

    /// The task leaves (rt_exit): its figures are read a last time and kept; its process
    /// leaves the box if the task's entry attached it and no other task of it remains.
    pub fn task_exit(&mut self, pid: i32, tid: i32) -> Result<(), RuntimeError> {
        if self.jobs.live.get(&tid).is_none_or(|t| t.pid != pid) {
            return Err(TaskError::NoTask { tid }.into());
        }
        if let Some(p) = self.jobs.finish(tid, "exited") {
            self.detach(Some(p), None, None)?;
        }
        tracing::info!(pid, tid, "task exited");
        Ok(())
    }

    /// Reads every task's job page: at most once per scan interval unless `now_please`
    /// (status asks). Tasks whose thread is gone are finished.
    pub fn read_job_pages(&mut self, now_please: bool) {
        let now = self.now();
        if self.jobs.live.is_empty() || !(self.jobs.due(now, self.opts.scan) || now_please) {
            return;
        }
        let gone: Vec<i32> = self
            .jobs
            .live
            .values()
            .filter(|t| !is_thread_of(t.pid, t.tid))
            .map(|t| t.tid)
            .collect();
        for t in self.jobs.live.values_mut() {
            t.read();
        }
        for tid in gone {
            if let Some(p) = self.jobs.finish(tid, "gone") {
                let _ = self.detach(Some(p), None, None);
            }
        }
    }

    /// Every task's figures (live ones first).
    pub fn task_rows(&self) -> Vec<TaskRow> {
        let mut rows = self.jobs.rows();
        let prio: BTreeMap<i32, u32> = self.plugins.priorities().collect();
        for r in rows.iter_mut().filter(|r| self.jobs.get(r.tid).is_some()) {
            if let Some((name, verdict, cpu)) = self.plugins.placement(r.tid) {
                r.plugin = Some(PluginRow {
                    name: name.to_string(),
                    verdict: verdict.name(),
                    cpu,
                    priority: prio.get(&r.tid).copied().unwrap_or(0),
                });
            }
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobpage::PageState;

    fn d(wcet: u64, period: u64, deadline: u64) -> Declared {
        Declared {
            wcet,
            period,
            deadline,
        }
    }

    #[test]
    fn declarations_are_checked_field_by_field() {
        assert!(check_declaration(d(2, 10, 10), Some(50)).is_ok());
        assert!(check_declaration(d(2, 10, 5), None).is_ok());
        let field = |r: Result<(), TaskError>| match r {
            Err(TaskError::Field { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(check_declaration(d(0, 10, 10), None)), "wcet_ns");
        assert_eq!(field(check_declaration(d(1, 0, 10), None)), "period_ns");
        assert_eq!(field(check_declaration(d(11, 20, 10), None)), "wcet_ns");
        assert_eq!(field(check_declaration(d(1, 10, 20), None)), "deadline_ns");
        assert_eq!(field(check_declaration(d(1, 10, 10), Some(0))), "priority");
        assert_eq!(
            field(check_declaration(d(1, 10, 10), Some(100))),
            "priority"
        );
    }

    #[test]
    fn percentiles_are_nearest_rank_over_the_last_samples() {
        let mut s = Samples::default();
        assert_eq!(s.percentile(99), None);
        for v in 1..=100 {
            s.push(v);
        }
        assert_eq!(s.percentile(50), Some(50));
        assert_eq!(s.percentile(99), Some(99));
        assert_eq!(s.percentile(100), Some(100));
        for v in 0..SAMPLES as u64 {
            s.push(1000 + v);
        }
        assert_eq!(s.len(), SAMPLES);
        assert_eq!(
            s.percentile(1),
            Some(1000 + (SAMPLES as u64).div_ceil(100) - 1)
        );
    }

    #[test]
    fn the_daemon_reads_every_job_and_counts_what_the_ring_lost() {
        let dir = std::env::temp_dir().join(format!("rtbox-jobs-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let mut jobs = Jobs::new(dir.clone());
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let path = dir.join("7");
        let page = JobPage::create(&path, 7, uid).unwrap();
        let task = JobPage::open(&path).unwrap();
        let decl = d(2_000_000, 10_000_000, 10_000_000);
        page.declare(decl);
        jobs.live.insert(
            7,
            TaskJobs {
                pid: 1,
                tid: 7,
                box_name: "A".into(),
                page,
                path: path.clone(),
                declared: Some(decl),
                priority: Some(10),
                attached: true,
                state: "entered",
                counters: PageCounters::default(),
                next_job: 0,
                response: Samples::default(),
                latency: Samples::default(),
                unsampled: 0,
            },
        );
        task.set_state(PageState::Running);
        let job = |j: u64| crate::jobpage::JobRecord {
            job: j,
            release: j * 10_000_000,
            start: j * 10_000_000 + 1_000 + j,
            end: j * 10_000_000 + 3_000_000,
            exec: 2_000_000,
        };
        for j in 0..10 {
            task.released(1_000 + j);
            task.completed(&job(j), decl);
        }
        jobs.live.get_mut(&7).unwrap().read();
        // 200 more jobs before the next read: the ring keeps the last RING of them.
        for j in 10..210 {
            task.released(1_000 + j);
            task.completed(&job(j), decl);
        }
        task.released(0);
        task.withdraw();
        task.set_state(PageState::Exited);
        assert_eq!(jobs.finish(7, "exited"), Some(1));
        let row = &jobs.rows()[0];
        assert_eq!((row.released, row.completed, row.misses), (210, 210, 0));
        assert_eq!(row.state, "exited");
        assert_eq!(row.samples as u64, 10 + crate::jobpage::RING);
        assert_eq!(row.unsampled, 200 - crate::jobpage::RING);
        assert_eq!(row.latency_max_ns, 1_209);
        assert_eq!(row.response_p99_ns, Some(3_000_000));
        assert!(!path.exists(), "a finished task's page is removed");
        // A new table removes leftover pages, and nothing else.
        std::fs::write(dir.join("99"), b"").unwrap();
        std::fs::write(dir.join("notes.txt"), b"").unwrap();
        drop(jobs);
        let _ = Jobs::new(dir.clone());
        assert!(!dir.join("99").exists() && dir.join("notes.txt").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
