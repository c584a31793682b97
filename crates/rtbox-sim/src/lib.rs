//! Discrete-event simulator for rtbox: drives the scheduling core (or a baseline model of Linux's
//! own mechanisms) in virtual integer-nanosecond time.
//!
//! Entry point: [`simulate`]`(&System, &SimOptions) -> Result<SimReport, SimError>`. The report
//! serializes to JSON; [`output`] writes the job CSV, the Chrome/Perfetto trace and a Gantt SVG.
//! Memory is independent of the simulated duration unless per-job records or a trace are asked
//! for (statistics stream into fixed-size histograms).
//!
//! Modules: [`model`] (the `Model` trait and the rtbox adapter), [`baselines`] (RT throttling,
//! per-task SCHED_DEADLINE, global FP), [`stats`] (histogram, PRM sbf, supply tracker),
//! [`workload`] (seeded releases and execution times), [`output`] (formats), [`jack`] (seed 004's
//! pipeline sweep), [`bench`] (the standard benchmark scenario, UUniFast). Model, rules and
//! simplifications: `docs/simulator.md`.
//!
//! Workload semantics (see docs/simulator.md): head tasks (no `after`) release a job at
//! `offset + k T` (sporadic: gaps of T plus uniform [0, T/2]), delayed by uniform [0, jitter];
//! the deadline is the nominal arrival plus D. A chained task (`after = X`) releases a job when a
//! job of X completes; its deadline and response time count from the chain head's nominal
//! arrival (end-to-end). Execution times: the per-job list of [`SimOptions::exec_lists`], else
//! uniform in [bcet, wcet], else wcet. Priorities are the model's levels
//! ([`rtbox_model::priority_levels`]): explicit ones kept, deadline monotonic below them.

pub mod baselines;
pub mod bench;
pub mod jack;
pub mod model;
pub mod output;
pub mod plugin;
pub mod stats;
pub mod workload;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::fmt;

use rtbox_model::{priority_levels, Nanos, System};
use serde::Serialize;

use crate::baselines::{DeadlineModel, FpModel, RtThrottlingModel};
use crate::model::{Model, ModelEvent, RtboxModel};
use crate::stats::{prm_sbf, Histogram, Summary, SupplyTracker};
use crate::workload::{Rng, Source};

/// Which scheduler the simulation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// The rtbox core: hierarchical hard-CBS boxes.
    #[default]
    Rtbox,
    /// Linux RT group throttling with the boxes' budgets.
    RtThrottling,
    /// One SCHED_DEADLINE reservation per boxed task, global EDF.
    Deadline,
    /// Plain global fixed priority, no reservations.
    Fp,
}

impl ModelKind {
    pub const NAMES: &'static [&'static str] = &["rtbox", "rt-throttling", "deadline", "fp"];

    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "rtbox" => Some(ModelKind::Rtbox),
            "rt-throttling" => Some(ModelKind::RtThrottling),
            "deadline" => Some(ModelKind::Deadline),
            "fp" => Some(ModelKind::Fp),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Rtbox => "rtbox",
            ModelKind::RtThrottling => "rt-throttling",
            ModelKind::Deadline => "deadline",
            ModelKind::Fp => "fp",
        }
    }
}

/// Simulation options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimOptions {
    pub duration: Nanos,
    pub model: ModelKind,
    pub seed: u64,
    /// Keep one record per job (for the CSV). Memory grows with the duration.
    pub record_jobs: bool,
    /// Record execution segments and throttling for the trace and the Gantt chart, up to
    /// `trace_until`.
    pub record_trace: bool,
    pub trace_until: Nanos,
    /// Per-job execution times by task name, used cyclically.
    pub exec_lists: BTreeMap<String, Vec<Nanos>>,
    /// Deadline model: reservation (runtime, deadline, period) by task name; default
    /// (wcet, deadline, period).
    pub dl_params: BTreeMap<String, (Nanos, Nanos, Nanos)>,
    /// Track the worst supply of each server over windows of P/2, P, 2P, 3P, 4P.
    pub supply_windows: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            duration: 1_000_000_000,
            model: ModelKind::Rtbox,
            seed: 1,
            record_jobs: false,
            record_trace: false,
            trace_until: Nanos::MAX,
            exec_lists: BTreeMap::new(),
            dl_params: BTreeMap::new(),
            supply_windows: true,
        }
    }
}

/// Why a simulation could not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimError {
    /// The core refused the system or a task.
    Core(rtbox_core::CoreError),
    /// An option names something that does not exist or has a bad value.
    BadOption { field: String, reason: String },
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Core(e) => write!(f, "{e}"),
            SimError::BadOption { field, reason } => write!(f, "{field}: {reason}"),
        }
    }
}

impl std::error::Error for SimError {}

impl From<rtbox_core::CoreError> for SimError {
    fn from(e: rtbox_core::CoreError) -> Self {
        SimError::Core(e)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskReport {
    pub name: String,
    #[serde(rename = "box")]
    pub box_name: Option<String>,
    /// The task's explicit priority (`None`: deadline monotonic).
    pub priority: Option<u32>,
    /// The level it was scheduled at (`rtbox_model::priority_levels`, higher is more urgent):
    /// the order among tasks, not a Linux priority.
    pub level: u32,
    /// The CPU of the vCPU a member of a pinned box sits on (`None`: it may move, or has no
    /// server). The same placement `rtbox analyze` reports.
    pub cpu: Option<u32>,
    pub released: u64,
    /// Completed jobs.
    pub jobs: u64,
    /// Jobs that completed late, plus unfinished jobs whose deadline passed before the end.
    pub misses: u64,
    /// Response times of completed jobs (ns, from the nominal arrival).
    pub response: Summary,
    /// Execution time received.
    pub executed: Nanos,
    /// In a plug-in box: the plug-in's admission verdict (`guaranteed`, `unproven`,
    /// `background`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin_verdict: Option<&'static str>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SupplyWindow {
    pub window: Nanos,
    /// Smallest supply seen over windows of this length while the box kept the server busy
    /// (`None`: no such window).
    pub worst: Option<Nanos>,
    /// The PRM supply bound sbf(window) of (P, Q).
    pub sbf: Nanos,
}

#[derive(Debug, Clone, Serialize)]
pub struct ServerReport {
    pub name: String,
    #[serde(rename = "box")]
    pub box_name: Option<String>,
    pub cpu: u32,
    pub budget: Nanos,
    pub period: Nanos,
    pub consumed: Nanos,
    pub throttles: u64,
    /// Members moved onto this server from another of their box's servers (global boxes;
    /// 0 in the baselines, which do not count them).
    pub migrations: u64,
    pub supply: Vec<SupplyWindow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CpuReport {
    pub cpu: u32,
    pub busy: Nanos,
    pub utilization: f64,
    /// A task left the CPU while still ready.
    pub preemptions: u64,
    /// A task started on this CPU after last running on another.
    pub migrations: u64,
}

/// One job, when [`SimOptions::record_jobs`] is set.
#[derive(Debug, Clone, Serialize)]
pub struct JobRecord {
    pub task: String,
    pub seq: u64,
    /// Nominal arrival (chain head's for chained tasks).
    pub arrival: Nanos,
    pub release: Nanos,
    pub deadline: Nanos,
    pub exec: Nanos,
    pub finish: Option<Nanos>,
    pub missed: bool,
}

/// One execution segment or throttle interval, when [`SimOptions::record_trace`] is set.
#[derive(Debug, Clone, Serialize)]
pub struct Segment {
    pub cpu: u32,
    pub start: Nanos,
    pub end: Nanos,
    pub task: String,
    pub server: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Throttle {
    pub server: String,
    pub cpu: u32,
    pub start: Nanos,
    pub end: Nanos,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Trace {
    pub until: Nanos,
    pub segments: Vec<Segment>,
    pub throttles: Vec<Throttle>,
    /// (task, time) of releases and of deadline misses (at completion or at the deadline).
    pub releases: Vec<(String, Nanos)>,
    pub misses: Vec<(String, Nanos)>,
}

/// Everything a simulation measured.
#[derive(Debug, Clone, Serialize)]
pub struct SimReport {
    pub model: ModelKind,
    pub duration: Nanos,
    pub seed: u64,
    pub tasks: Vec<TaskReport>,
    pub servers: Vec<ServerReport>,
    pub cpus: Vec<CpuReport>,
    /// Scheduling events processed: releases, completions, timer expiries (throttle,
    /// replenishment, rotation) and changes of what runs on a CPU.
    pub events: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<Vec<JobRecord>>,
    #[serde(skip)]
    pub trace: Option<Trace>,
}

impl SimReport {
    pub fn task(&self, name: &str) -> Option<&TaskReport> {
        self.tasks.iter().find(|t| t.name == name)
    }

    pub fn total_misses(&self) -> u64 {
        self.tasks.iter().map(|t| t.misses).sum()
    }

    /// Budget consumed by all servers of a box.
    pub fn box_consumed(&self, box_name: &str) -> Nanos {
        self.servers
            .iter()
            .filter(|s| s.box_name.as_deref() == Some(box_name))
            .map(|s| s.consumed)
            .sum()
    }
}

#[derive(Debug, Clone, Copy)]
struct Job {
    seq: u64,
    arrival: Nanos,
    release: Nanos,
    deadline: Nanos,
    exec: Nanos,
    left: Nanos,
}

struct TaskState {
    source: Source,
    /// The oldest pending job (the one that runs), kept out of `queued` so that the loop reads
    /// and charges its remaining work without going through the deque.
    head: Option<Job>,
    /// The pending jobs behind `head`, oldest first.
    queued: VecDeque<Job>,
    successors: Vec<usize>,
    released: u64,
    completed: u64,
    misses: u64,
    response: Histogram,
    executed: Nanos,
    last_cpu: Option<usize>,
}

impl TaskState {
    /// Appends a released job; returns true if it is the only pending one (the task wakes).
    fn push_job(&mut self, job: Job) -> bool {
        if self.head.is_none() {
            self.head = Some(job);
            true
        } else {
            self.queued.push_back(job);
            false
        }
    }

    /// Removes the oldest pending job; the next one (if any) becomes the head.
    fn pop_job(&mut self) -> Option<Job> {
        let job = self.head.take();
        if job.is_some() {
            self.head = self.queued.pop_front();
        }
        job
    }

    /// Every pending job, oldest first.
    fn pending(&self) -> impl Iterator<Item = &Job> {
        self.head.iter().chain(self.queued.iter())
    }
}

/// An unfinished job at the end of the run missed its deadline if the deadline passed before
/// the end, or is the end itself with work left: a job whose last instant of work ends exactly at
/// its deadline (and at the end of the run) is on time.
fn unfinished_missed(j: &Job, end: Nanos) -> bool {
    j.deadline < end || (j.deadline == end && j.left > 0)
}

/// Servers whose supply windows count while the same tasks keep them busy (`Sim::sat`).
struct SatGroup {
    /// Ready tasks among the group's.
    ready: usize,
    /// Ready tasks needed to keep every server of the group busy.
    need: usize,
    servers: Vec<usize>,
}

/// A CPU that runs no task, in `Sim::on_cpu`.
const IDLE: usize = usize::MAX;

/// Runs one simulation.
pub fn simulate(system: &System, opts: &SimOptions) -> Result<SimReport, SimError> {
    for name in opts.exec_lists.keys().chain(opts.dl_params.keys()) {
        if !system.tasks.iter().any(|t| &t.name == name) {
            return Err(SimError::BadOption {
                field: format!("task \"{name}\""),
                reason: "is not a task of the system".into(),
            });
        }
    }
    let prio = priority_levels(&system.tasks);
    let record = opts.record_trace;
    let mut model: Box<dyn Model> = match opts.model {
        ModelKind::Rtbox if system.boxes().iter().any(|b| b.spec.plugin.is_some()) => {
            Box::new(crate::plugin::PluginModel::new(system, &prio, record)?)
        }
        ModelKind::Rtbox => Box::new(RtboxModel::new(system, &prio, record)?),
        ModelKind::RtThrottling => Box::new(RtThrottlingModel::new(system, &prio, record)),
        ModelKind::Fp => Box::new(FpModel::new(system, &prio)),
        ModelKind::Deadline => {
            let params: Vec<Option<(Nanos, Nanos, Nanos)>> = system
                .tasks
                .iter()
                .map(|t| {
                    opts.dl_params.get(&t.name).copied().or_else(|| {
                        t.box_name
                            .as_ref()
                            .map(|_| (t.wcet.min(t.deadline), t.deadline, t.period))
                    })
                })
                .collect();
            for (t, p) in system.tasks.iter().zip(&params) {
                if let Some((q, d, per)) = p {
                    if *q == 0 || q > d || d > per {
                        return Err(SimError::BadOption {
                            field: format!("task \"{}\": deadline reservation", t.name),
                            reason: "needs 0 < runtime <= deadline <= period".into(),
                        });
                    }
                }
            }
            Box::new(DeadlineModel::new(system, &prio, &params, record))
        }
    };
    Ok(Sim::new(system, opts, prio, model.as_mut()).run())
}

struct Sim<'a> {
    system: &'a System,
    opts: &'a SimOptions,
    prio: Vec<u32>,
    model: &'a mut dyn Model,
    rng: Rng,
    now: Nanos,
    tasks: Vec<TaskState>,
    releases: BinaryHeap<Reverse<(Nanos, Nanos, usize)>>,
    running: Vec<Option<(usize, Option<usize>)>>,
    since: Vec<Nanos>,
    cpu_busy: Vec<Nanos>,
    preemptions: Vec<u64>,
    migrations: Vec<u64>,
    events: u64,
    job_seq: u64,
    jobs: Option<Vec<JobRecord>>,
    trace: Option<Trace>,
    server_names: Vec<String>,
    server_cpus: Vec<u32>,
    supply: Vec<SupplyTracker>,
    /// Saturation groups: servers kept busy by the same tasks with the same need (all vCPUs of
    /// a global box form one), so a readiness change counts once per group, not per server.
    sat: Vec<SatGroup>,
    /// Per task: the groups it counts in.
    task_groups: Vec<Vec<usize>>,
    model_events: Vec<ModelEvent>,
    cpu_ids: Vec<u32>,
    /// The model's dispatch generation at the last `observe`.
    seen_generation: Option<u64>,
    /// Scratch of `observe`: the CPUs to look at, and what ran on each CPU before.
    changed: Vec<usize>,
    before: Vec<Option<(usize, Option<usize>)>>,
    /// The task on each CPU (`IDLE`: none), as `running` says: the loop's passes over the
    /// CPUs read one word per CPU.
    on_cpu: Vec<usize>,
    /// Scratch of the loop: the tasks whose job finished at the current instant.
    done: Vec<usize>,
}

impl<'a> Sim<'a> {
    fn new(
        system: &'a System,
        opts: &'a SimOptions,
        prio: Vec<u32>,
        model: &'a mut dyn Model,
    ) -> Self {
        let n = system.tasks.len();
        let mut tasks: Vec<TaskState> = system
            .tasks
            .iter()
            .map(|t| TaskState {
                source: Source::new(t, opts.exec_lists.get(&t.name).cloned()),
                head: None,
                queued: VecDeque::new(),
                successors: Vec::new(),
                released: 0,
                completed: 0,
                misses: 0,
                response: Histogram::default(),
                executed: 0,
                last_cpu: None,
            })
            .collect();
        for (i, t) in system.tasks.iter().enumerate() {
            if let Some(a) = &t.after {
                if let Some(p) = system.tasks.iter().position(|x| &x.name == a) {
                    tasks[p].successors.push(i);
                }
            }
        }
        let mut releases = BinaryHeap::new();
        let mut rng = Rng::new(opts.seed);
        for (i, t) in system.tasks.iter().enumerate() {
            if t.after.is_none() {
                let (nominal, actual) = tasks[i].source.take_release(t, &mut rng);
                releases.push(Reverse((actual, nominal, i)));
            }
        }
        let cpu_ids: Vec<u32> = system.platform.cpus.iter().collect();
        let ncpu = cpu_ids.len();
        let descs = model.servers();
        // Which tasks keep each server busy (box servers: all members of a global box, needing
        // as many ready as the box has servers; otherwise the server's own task(s)).
        let mut group_of: BTreeMap<(Vec<usize>, usize), usize> = BTreeMap::new();
        let mut sat: Vec<SatGroup> = Vec::with_capacity(descs.len());
        for (s, d) in descs.iter().enumerate() {
            let members: Vec<usize> = match (&d.box_name, opts.model) {
                (Some(b), ModelKind::Rtbox | ModelKind::RtThrottling) => {
                    let pinned = system
                        .get(b)
                        .is_some_and(|rb| rb.spec.placement == rtbox_model::Placement::Pinned)
                        && opts.model == ModelKind::Rtbox;
                    (0..n)
                        .filter(|&t| system.tasks[t].box_name.as_deref() == Some(b.as_str()))
                        .filter(|&t| !pinned || model.home(t) == Some(s))
                        .collect()
                }
                _ => (0..n)
                    .filter(|&t| d.name == format!("dl:{}", system.tasks[t].name))
                    .collect(),
            };
            let need = match (&d.box_name, opts.model) {
                (Some(b), ModelKind::Rtbox | ModelKind::RtThrottling)
                    if system
                        .get(b)
                        .is_some_and(|rb| rb.spec.placement == rtbox_model::Placement::Global) =>
                {
                    descs.iter().filter(|x| x.box_name == d.box_name).count()
                }
                _ => 1,
            };
            let g = *group_of.entry((members, need)).or_insert_with(|| {
                sat.push(SatGroup {
                    ready: 0,
                    need,
                    servers: Vec::new(),
                });
                sat.len() - 1
            });
            sat[g].servers.push(s);
        }
        let mut task_groups = vec![Vec::new(); n];
        for ((members, _), &g) in &group_of {
            for &t in members {
                task_groups[t].push(g);
            }
        }
        let supply = descs
            .iter()
            .map(|d| {
                let w = if opts.supply_windows && d.period > 0 {
                    vec![
                        d.period / 2,
                        d.period,
                        2 * d.period,
                        3 * d.period,
                        4 * d.period,
                    ]
                } else {
                    Vec::new()
                };
                SupplyTracker::new(w)
            })
            .collect();
        Sim {
            system,
            opts,
            prio,
            model,
            rng,
            now: 0,
            tasks,
            releases,
            running: vec![None; ncpu],
            since: vec![0; ncpu],
            cpu_busy: vec![0; ncpu],
            preemptions: vec![0; ncpu],
            migrations: vec![0; ncpu],
            events: 0,
            job_seq: 0,
            jobs: opts.record_jobs.then(Vec::new),
            trace: opts.record_trace.then(Trace::default),
            server_names: descs.iter().map(|d| d.name.clone()).collect(),
            server_cpus: descs.iter().map(|d| d.cpu).collect(),
            supply,
            sat,
            task_groups,
            model_events: Vec::new(),
            cpu_ids,
            seen_generation: None,
            changed: Vec::with_capacity(ncpu),
            before: Vec::with_capacity(ncpu),
            on_cpu: vec![IDLE; ncpu],
            done: Vec::with_capacity(ncpu),
        }
    }

    fn tracing(&self) -> bool {
        self.trace.is_some() && self.now < self.opts.trace_until
    }

    fn set_ready(&mut self, t: usize, ready: bool) {
        if !self.opts.supply_windows {
            return;
        }
        for i in 0..self.task_groups[t].len() {
            let g = &mut self.sat[self.task_groups[t][i]];
            let before = g.ready >= g.need;
            g.ready = if ready { g.ready + 1 } else { g.ready - 1 };
            let after = g.ready >= g.need;
            if before != after {
                for &s in &g.servers {
                    self.supply[s].set_saturated(self.now, after);
                }
            }
        }
    }

    fn release(&mut self, t: usize, arrival: Nanos, deadline: Nanos) {
        let spec = &self.system.tasks[t];
        let exec = self.tasks[t].source.exec_time(spec, &mut self.rng);
        self.job_seq += 1;
        let job = Job {
            seq: self.tasks[t].released,
            arrival,
            release: self.now,
            deadline,
            exec,
            left: exec,
        };
        let ts = &mut self.tasks[t];
        ts.released += 1;
        let woke = ts.push_job(job);
        self.events += 1;
        if self.tracing() {
            let name = spec.name.clone();
            if let Some(tr) = self.trace.as_mut() {
                tr.releases.push((name, self.now));
            }
        }
        if woke {
            self.model.wake(self.now, t, deadline);
            self.set_ready(t, true);
        }
    }

    fn complete(&mut self, t: usize) {
        let Some(job) = self.tasks[t].pop_job() else {
            return;
        };
        self.events += 1;
        let now = self.now;
        let ts = &mut self.tasks[t];
        ts.completed += 1;
        let missed = now > job.deadline;
        if missed {
            ts.misses += 1;
        }
        ts.response.record(now - job.arrival);
        let name = &self.system.tasks[t].name;
        if let Some(jobs) = self.jobs.as_mut() {
            jobs.push(JobRecord {
                task: name.clone(),
                seq: job.seq,
                arrival: job.arrival,
                release: job.release,
                deadline: job.deadline,
                exec: job.exec,
                finish: Some(now),
                missed,
            });
        }
        if missed && self.tracing() {
            let name = name.clone();
            if let Some(tr) = self.trace.as_mut() {
                tr.misses.push((name, now));
            }
        }
        match &self.tasks[t].head {
            Some(next) => {
                let d = next.deadline;
                self.model.wake(now, t, d);
            }
            None => {
                self.model.block(now, t);
                self.set_ready(t, false);
            }
        }
        for i in 0..self.tasks[t].successors.len() {
            let s = self.tasks[t].successors[i];
            let d = job.arrival + self.system.tasks[s].deadline;
            self.release(s, job.arrival, d);
        }
    }

    /// Notes what runs now on every CPU: segments, preemptions, migrations, supply.
    fn observe(&mut self) {
        // Nothing changed on any CPU since the last look: nothing to note.
        let generation = self.model.dispatch_generation();
        if generation.is_some() && generation == self.seen_generation {
            return;
        }
        self.seen_generation = generation;
        // The CPUs to look at: those the model reports as changed (in CPU order), else all.
        let mut cpus = std::mem::take(&mut self.changed);
        cpus.clear();
        if self.model.take_changed_cpus(&mut cpus) {
            cpus.sort_unstable();
        } else {
            cpus.extend(0..self.running.len());
        }
        // First what runs now everywhere (the preemption check looks at every CPU; `before`
        // keeps what ran on the looked-at CPUs), then the changes one CPU at a time.
        let mut before = std::mem::take(&mut self.before);
        before.clear();
        for &c in &cpus {
            let new = self.model.running(c);
            let old = std::mem::replace(&mut self.running[c], new);
            before.push(old);
            self.on_cpu[c] = new.map_or(IDLE, |r| r.0);
        }
        for (&c, &old) in cpus.iter().zip(&before) {
            let new = self.running[c];
            if new == old {
                continue;
            }
            self.events += 1;
            if let Some((t, s)) = old {
                if self.tasks[t].head.is_some() && !self.on_cpu.contains(&t) {
                    self.preemptions[c] += 1;
                }
                self.close_segment(c, t, s);
                if let Some(s) = s {
                    if !self.supply[s].windows.is_empty() {
                        self.supply[s].set_running(self.now, false);
                    }
                }
            }
            if let Some((t, s)) = new {
                if self.tasks[t].last_cpu.is_some_and(|l| l != c) {
                    self.migrations[c] += 1;
                }
                self.tasks[t].last_cpu = Some(c);
                if let Some(s) = s {
                    if !self.supply[s].windows.is_empty() {
                        self.supply[s].set_running(self.now, true);
                    }
                }
            }
            self.since[c] = self.now;
        }
        self.changed = cpus;
        self.before = before;
    }

    fn close_segment(&mut self, c: usize, t: usize, s: Option<usize>) {
        // Without a trace nothing is recorded: skip the name clones.
        if self.trace.is_none() {
            return;
        }
        let start = self.since[c];
        if start >= self.opts.trace_until || start == self.now {
            return;
        }
        let end = self.now.min(self.opts.trace_until);
        let task = self.system.tasks[t].name.clone();
        let server = s.map(|s| self.server_names[s].clone());
        let cpu = self.cpu_ids[c];
        if let Some(tr) = self.trace.as_mut() {
            tr.segments.push(Segment {
                cpu,
                start,
                end,
                task,
                server,
            });
        }
    }

    fn run(mut self) -> SimReport {
        let end = self.opts.duration;
        self.model.advance(0);
        self.release_due();
        self.model.advance(0);
        self.observe();
        loop {
            let mut next = end;
            if let Some(Reverse((r, _, _))) = self.releases.peek() {
                next = next.min(*r);
            }
            let timer = self.model.next_timer();
            if let Some(tm) = timer {
                next = next.min(tm);
            }
            for &t in &self.on_cpu {
                if t != IDLE {
                    if let Some(j) = &self.tasks[t].head {
                        next = next.min(self.now + j.left);
                    }
                }
            }
            let mut done = std::mem::take(&mut self.done);
            self.execute(next - self.now, &mut done);
            self.now = next;
            if timer == Some(next) {
                self.events += 1;
            }
            if next >= end {
                self.model.advance(next);
                break;
            }
            self.model.update(next);
            // Completing a job only adds jobs behind the head of other tasks (successors), so
            // the jobs found finished while executing are those finished now, in CPU order.
            for &t in &done {
                self.complete(t);
            }
            self.done = done;
            self.release_due();
            self.model.advance(next);
            self.collect_model_events();
            self.observe();
        }
        self.collect_model_events();
        self.finish()
    }

    /// Runs every busy CPU's task for `dt` and appends the tasks whose head job is then done
    /// (in CPU order): one pass over the busy CPUs instead of one to execute and one to look
    /// for completions.
    fn execute(&mut self, dt: Nanos, done: &mut Vec<usize>) {
        done.clear();
        for (c, &t) in self.on_cpu.iter().enumerate() {
            if t == IDLE {
                continue;
            }
            let ts = &mut self.tasks[t];
            if let Some(j) = ts.head.as_mut() {
                j.left -= dt;
                if j.left == 0 {
                    done.push(t);
                }
            }
            ts.executed += dt;
            self.cpu_busy[c] += dt;
        }
    }

    fn release_due(&mut self) {
        // The task's next release replaces the due one in place (one sift instead of a pop and
        // a push); keys are unique (one pending release per head task), so the order of
        // releases does not depend on the heap's shape.
        loop {
            let (t, nominal, deadline) = {
                let Some(mut top) = self.releases.peek_mut() else {
                    break;
                };
                let Reverse((r, nominal, t)) = *top;
                if r > self.now {
                    break;
                }
                let spec = &self.system.tasks[t];
                let (n2, a2) = self.tasks[t].source.take_release(spec, &mut self.rng);
                *top = Reverse((a2.max(self.now), n2, t));
                (t, nominal, nominal + spec.deadline)
            };
            self.release(t, nominal, deadline);
        }
    }

    fn collect_model_events(&mut self) {
        if self.trace.is_none() {
            return;
        }
        self.model.drain_events(&mut self.model_events);
        for e in self.model_events.drain(..) {
            let ModelEvent::Throttled { at, server, until } = e;
            if at < self.opts.trace_until {
                if let Some(tr) = self.trace.as_mut() {
                    tr.throttles.push(Throttle {
                        server: self.server_names[server].clone(),
                        cpu: self.server_cpus[server],
                        start: at,
                        end: until.min(self.opts.trace_until),
                    });
                }
            }
        }
    }

    fn finish(mut self) -> SimReport {
        let end = self.now;
        for c in 0..self.running.len() {
            if let Some((t, s)) = self.running[c] {
                self.close_segment(c, t, s);
            }
        }
        // Unfinished jobs past their deadline are misses.
        for t in 0..self.tasks.len() {
            let late: Vec<Job> = self.tasks[t]
                .pending()
                .filter(|j| unfinished_missed(j, end))
                .copied()
                .collect();
            self.tasks[t].misses += late.len() as u64;
            if let Some(jobs) = self.jobs.as_mut() {
                for j in self.tasks[t].pending() {
                    jobs.push(JobRecord {
                        task: self.system.tasks[t].name.clone(),
                        seq: j.seq,
                        arrival: j.arrival,
                        release: j.release,
                        deadline: j.deadline,
                        exec: j.exec,
                        finish: None,
                        missed: unfinished_missed(j, end),
                    });
                }
            }
        }
        for s in self.supply.iter_mut() {
            s.finish(end);
        }
        let descs = self.model.servers();
        let servers = descs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let (consumed, throttles) = self.model.server_stats(i);
                let tr = &self.supply[i];
                ServerReport {
                    name: d.name.clone(),
                    box_name: d.box_name.clone(),
                    cpu: d.cpu,
                    budget: d.budget,
                    period: d.period,
                    consumed,
                    throttles,
                    migrations: self.model.server_migrations(i),
                    supply: tr
                        .windows
                        .iter()
                        .zip(&tr.worst)
                        .map(|(&w, &worst)| SupplyWindow {
                            window: w,
                            worst,
                            sbf: prm_sbf(d.period, d.budget, w),
                        })
                        .collect(),
                }
            })
            .collect();
        let tasks = self
            .system
            .tasks
            .iter()
            .zip(&self.tasks)
            .enumerate()
            .map(|(i, (spec, ts))| TaskReport {
                name: spec.name.clone(),
                box_name: spec.box_name.clone(),
                priority: spec.priority,
                level: self.prio[i],
                cpu: self.model.home(i).and_then(|s| descs.get(s)).map(|d| d.cpu),
                released: ts.released,
                jobs: ts.completed,
                misses: ts.misses,
                response: ts.response.summary(),
                executed: ts.executed,
                plugin_verdict: self.model.verdict(i),
            })
            .collect();
        let cpus = (0..self.running.len())
            .map(|c| CpuReport {
                cpu: self.cpu_ids[c],
                busy: self.cpu_busy[c],
                utilization: if end > 0 {
                    self.cpu_busy[c] as f64 / end as f64
                } else {
                    0.0
                },
                preemptions: self.preemptions[c],
                migrations: self.migrations[c],
            })
            .collect();
        let mut trace = self.trace.take();
        if let Some(tr) = trace.as_mut() {
            tr.until = end.min(self.opts.trace_until);
        }
        SimReport {
            model: self.opts.model,
            duration: end,
            seed: self.opts.seed,
            tasks,
            servers,
            cpus,
            events: self.events,
            jobs: self.jobs.take(),
            trace,
        }
    }
}
