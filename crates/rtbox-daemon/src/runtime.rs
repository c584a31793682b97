//! The enforcement runtime: members, the scheduling core in Measured mode, and the mapping of
//! its decisions onto real threads.
//!
//! Per CPU the non-throttled servers are ranked by EDF (deadline, then server id) and each rank
//! gets a band of SCHED_FIFO priorities inside [`PRIO_LO`]..=[`PRIO_HI`], most urgent band on
//! top; inside a band members keep their relative priorities (by the rank of their original
//! RT priority within the box). A member whose server is throttled is frozen (hard mode, cgroup
//! v2 freeze of its own threaded cgroup) or demoted to SCHED_IDLE (reclaim mode). Budgets are
//! charged with the perf task clock of each member.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::backstop::{self, Backstop, Handle, Stop};
use crate::charge::MemberCharge;
use crate::localprio;
use crate::loopcost::LoopUsage;
use rtbox_core::{Accounting, Event, Options, Scheduler, ServerId, TaskId, TaskParams};
use rtbox_linux::cgroup::{self, Layout};
use rtbox_linux::journal::{Journal, JournalState, ProcessEntry};
use rtbox_linux::perf::TaskClock;
use rtbox_linux::procevents::{ProcEvent, ProcEvents};
use rtbox_linux::sched::{self, SchedAttr};
use rtbox_linux::snapshot::ThreadSnapshot;
use rtbox_linux::{procfs, LinuxError};
use rtbox_model::{admit_with_loop, BoxSpec, LoopCost, Mode, Nanos, Platform, System};

/// Highest SCHED_FIFO priority given to members (the most urgent server's top member).
pub const PRIO_HI: u32 = 89;
/// Lowest SCHED_FIFO priority given to members. Unmanaged RT threads below this run in what
/// the boxes leave; unmanaged RT threads above [`PRIO_HI`] preempt every box.
pub const PRIO_LO: u32 = 40;
/// The daemon's enforcement loop priority (above members and the watchdog).
pub const LOOP_PRIO: u32 = 98;

/// Shortest sleep of the loop when the core's timer is already due (no spinning).
pub const MIN_SLEEP: Nanos = 50_000;

/// Shortest sleep of the loop before a budget exhaustion. The loop sleeps on the member's CPU
/// (see [`Runtime::follow_exhaustion`]); a sleep shorter than a context switch pair plus a timer
/// interrupt (~10-20 us here) would give the member no CPU at all, and the loop would wake again
/// and again to find the same few microseconds left. Granting at least this much bounds the
/// overrun it causes to this value; the core pays overruns back in the next period.
pub const MIN_GRANT: Nanos = 25_000;

/// A thread under rtbox's control.
#[derive(Debug)]
struct Member {
    pid: i32,
    box_name: String,
    task: TaskId,
    clock: Option<Arc<TaskClock>>,
    /// Its perf clock readings turned into charges, less steal found off CPU.
    charge: MemberCharge,
    /// Its schedstat kept open: the kernel's CPU time, read when it is off CPU.
    schedstat: Option<procfs::SchedstatFile>,
    /// When the last (perf, kernel) pair was taken; whether one was taken in this freeze.
    paired_at: Nanos,
    paired_frozen: bool,
    /// When the loop thawed it, until it is seen running (see [`THAW_GRACE`]).
    thawed_at: Option<Nanos>,
    /// Original RT priority (0 for normal threads): the box keeps their relative order.
    local_prio: u32,
    /// The server charged for its CPU time until the next decision.
    charge_to: Option<ServerId>,
    /// Its last vCPU: charged for what runs after a throttle until the stop takes effect.
    last_server: Option<ServerId>,
    applied: Option<Applied>,
    ready: bool,
    /// Its stat file kept open (state polled every step without reopening).
    stat: Option<procfs::StatFile>,
    /// Its freeze group's `cgroup.freeze`, opened at the first stop and kept.
    freeze: Option<Arc<std::fs::File>>,
    snapshot: ThreadSnapshot,
}

impl Member {
    /// Reads the kernel's CPU time between two perf reads; if the perf clock did not move, the
    /// member was off CPU throughout and the pair is exact: returns the steal found with it.
    fn take_pair(&mut self, perf: u64) -> Option<u64> {
        let kernel = self.kernel_time_if_still(perf)?;
        Some(self.charge.reconcile(perf, kernel))
    }

    /// The kernel's CPU time if the member is verifiably off CPU now (see [`Member::take_pair`]).
    fn kernel_time_off_cpu(&mut self) -> Option<u64> {
        let perf = self.clock.as_ref()?.read().ok()?;
        self.kernel_time_if_still(perf)
    }

    /// The kernel's CPU time, if the perf clock still reads `perf` after it was read: the
    /// member did not run around the read, so the (tick-updated) kernel figure is exact.
    fn kernel_time_if_still(&mut self, perf: u64) -> Option<u64> {
        let kernel = self.schedstat.as_mut()?.sum_exec_runtime()?;
        (self.clock.as_ref()?.read().ok()? == perf).then_some(kernel)
    }
}

/// How long a member the loop thawed counts as ready without being seen running. A thaw wakes
/// the thread at once, but on an idle vCPU the wake-up waits until the host runs that vCPU
/// (measured up to ~1 ms here), and /proc shows the thread sleeping meanwhile; taken as
/// blocked, it then ran unseen until the next poll: one period 933-958 us over Q.
const THAW_GRACE: Nanos = 2_000_000;

/// How often a blocked member's charge is reconciled with the kernel's accounting.
const PAIR_EVERY: Nanos = 20_000_000;

/// What rtbox last set on a member.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Applied {
    attr: SchedAttr,
    cpus: Vec<u32>,
    frozen: bool,
}

/// What a box is attached to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Pid(i32),
    /// A cgroup directory (v1 or v2); its threads join.
    Cgroup(PathBuf),
}

#[derive(Debug, Clone)]
struct Attachment {
    box_name: String,
    target: Target,
}

/// Per-server figures kept across periods.
#[derive(Debug, Clone, Default)]
pub struct ServerStats {
    /// Time and consumed counter at the last replenishment.
    last_replenish: Option<(Nanos, Nanos)>,
    /// Overrun of each finished period that throttled, in ns (capped list).
    pub overruns: Vec<u64>,
    /// Overrun already consumed when the loop detected the exhaustion, in ns (capped list):
    /// the part of `overruns` due to detection delay; the rest is the stop latency.
    pub detected: Vec<u64>,
    /// With [`RuntimeOptions::audit`]: the members charged to the server and their kernel CPU
    /// time at the last replenishment.
    last_kernel: Option<(Vec<i32>, u64)>,
    /// With [`RuntimeOptions::audit`]: the overrun of each throttled period by the kernel's
    /// own accounting (see [`procfs::sum_exec_runtime`]), ns.
    pub kernel_overruns: Vec<u64>,
    /// With [`RuntimeOptions::audit`]: periods whose charged overrun exceeded 100 us, as
    /// (replenish time, charged overrun, kernel overrun).
    pub outliers: Vec<(Nanos, u64, u64)>,
}

/// Runtime errors returned to clients.
#[derive(Debug)]
pub enum RuntimeError {
    Invalid(String),
    Refused(String),
    Linux(LinuxError),
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuntimeError::Invalid(s) => write!(f, "invalid: {s}"),
            RuntimeError::Refused(s) => write!(f, "refused: {s}"),
            RuntimeError::Linux(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RuntimeError {}

impl From<LinuxError> for RuntimeError {
    fn from(e: LinuxError) -> Self {
        RuntimeError::Linux(e)
    }
}

/// Runtime options.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    pub state_file: PathBuf,
    /// Longest sleep of the loop (thread wake/block detection, requests).
    pub poll: Nanos,
    /// Interval of the membership scan (new threads and processes, policy drift). With process
    /// events only attached cgroups are scanned this often; the rest every `full_scan`.
    pub scan: Nanos,
    /// Interval of the full /proc scan when process events are available (a safety net for
    /// lost events, exits, and members that changed their own policy or affinity).
    pub full_scan: Nanos,
    /// CPU time of one loop step, admitted per server event and per poll
    /// ([`rtbox_model::admit_with_loop`]); 0: off.
    pub step_cost: Nanos,
    /// Move the loop thread to the CPU of the next budget exhaustion (see
    /// [`Runtime::follow_exhaustion`]).
    pub follow: bool,
    /// Experiments: also measure every period with the kernel's accounting, read while the
    /// members are frozen (one schedstat read per member and replenishment).
    pub audit: bool,
    /// Per-CPU backstop threads that stop members at planned exhaustions when the loop is late
    /// (see `backstop.rs`).
    pub backstop: bool,
}

impl RuntimeOptions {
    /// The loop's cost as admission counts it: this loop's step cost and poll intervals.
    pub fn loop_cost(&self) -> LoopCost {
        LoopCost {
            step: self.step_cost,
            poll: self.poll,
            scan: self.scan,
        }
    }
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            state_file: PathBuf::from("/run/rtbox/state.json"),
            poll: LoopCost::DEFAULT.poll,
            scan: LoopCost::DEFAULT.scan,
            full_scan: 100_000_000,
            step_cost: LoopCost::DEFAULT.step,
            follow: true,
            audit: false,
            backstop: true,
        }
    }
}

/// The runtime's whole state.
pub struct Runtime {
    pub layout: Layout,
    platform: Platform,
    specs: Vec<BoxSpec>,
    system: System,
    sched: Scheduler,
    epoch: u64,
    members: BTreeMap<i32, Member>,
    procs: BTreeMap<i32, String>,
    attachments: Vec<Attachment>,
    journal: Journal,
    jstate: JournalState,
    seen_pids: BTreeSet<i32>,
    pub stats: BTreeMap<(String, u32), ServerStats>,
    opts: RuntimeOptions,
    last_scan: u64,
    /// When the last full scan ran (with process events, the frequent scan only looks at
    /// attached cgroups).
    last_full_scan: u64,
    /// Process events were lost: the next step scans everything.
    force_full_scan: bool,
    /// Members joined, or changed their own policy or affinity, since the last step: they run
    /// unmanaged until a step places them, so the loop steps again at once.
    unplaced: bool,
    /// A release withdrew every backstop plan: the step that did it publishes them again.
    plans_withdrawn: bool,
    /// Forks and exits from the kernel's proc connector; `None` where it is unavailable (then
    /// every scan is a full /proc scan).
    events: Option<ProcEvents>,
    /// Failed actions, drained by the daemon's log.
    pub log: Vec<String>,
    /// Log every core event (environment RTBOX_TRACE=1).
    trace: bool,
    /// The loop thread pinned by [`Runtime::follow_exhaustion`]: (tid, original affinity,
    /// current CPU).
    loop_pin: Option<(i32, Vec<u32>, u32)>,
    /// Stops members at planned exhaustions while the loop cannot run.
    backstop: Option<Backstop>,
    backstop_stops: u64,
    backstop_times: Vec<Nanos>,
    /// The loop's own CPU use against the admitted step cost.
    loop_usage: LoopUsage,
}

/// A runtime that goes away gives every thread back, as [`Runtime::shutdown`] does (which is
/// idempotent): an embedding program that panics mid-run, or forgets the call, leaves nothing
/// frozen or boosted (the daemon's watchdog covers only the daemon's own process dying).
impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn core_options() -> Options {
    Options {
        accounting: Accounting::Measured,
        timeslice: 4_000_000,
        record_events: true,
    }
}

fn build(
    platform: &Platform,
    specs: &[BoxSpec],
    cost: LoopCost,
) -> Result<(System, Scheduler), RuntimeError> {
    let system = System::new(platform.clone(), specs.to_vec(), vec![])
        .map_err(|e| RuntimeError::Invalid(e.to_string()))?;
    let adm = admit_with_loop(&system, cost);
    if !adm.admitted() {
        let why: Vec<String> = adm.refusals.iter().map(|r| r.to_string()).collect();
        return Err(RuntimeError::Refused(why.join("; ")));
    }
    let sched = Scheduler::new(&system, core_options())
        .map_err(|e| RuntimeError::Refused(e.to_string()))?;
    Ok((system, sched))
}

impl Runtime {
    /// A runtime for `platform` with the boxes `specs` (admission-controlled). Repairs a leftover
    /// state file of a crashed daemon first.
    pub fn new(
        platform: Platform,
        specs: Vec<BoxSpec>,
        opts: RuntimeOptions,
    ) -> Result<Self, RuntimeError> {
        let layout = cgroup::detect()?;
        let journal = Journal::new(&opts.state_file);
        let mut log = Vec::new();
        match journal.repair() {
            Ok(Some(rep)) => log.push(format!(
                "repaired leftovers of a previous daemon: {} threads restored, {} gone, errors: {:?}",
                rep.restored, rep.gone, rep.errors
            )),
            Ok(None) => {}
            Err(e) => log.push(format!("state file: {e}")),
        }
        let (system, sched) = build(&platform, &specs, opts.loop_cost())?;
        let swept = cgroup::sweep_stale(&layout);
        if swept > 0 {
            log.push(format!("removed {swept} stale freeze groups"));
        }
        let jstate = JournalState::new(layout.clone());
        journal.save(&jstate)?;
        let events = match ProcEvents::open() {
            Ok(e) => Some(e),
            Err(e) => {
                log.push(format!(
                    "process events unavailable ({e}); scanning /proc every {} ms instead",
                    opts.scan / 1_000_000
                ));
                None
            }
        };
        // The backstop freezes, which needs cgroup v2.
        let backstop = if opts.backstop && layout.v2.is_some() {
            let cpus: Vec<u32> = platform.cpus.iter().collect();
            match Backstop::start(&cpus) {
                Ok(b) => Some(b),
                Err(e) => {
                    log.push(format!("backstop threads: {e}; running without"));
                    None
                }
            }
        } else {
            None
        };
        Ok(Runtime {
            backstop,
            backstop_stops: 0,
            backstop_times: Vec::new(),
            loop_usage: LoopUsage::default(),
            layout,
            platform,
            specs,
            system,
            sched,
            epoch: rtbox_linux::monotonic_ns(),
            members: BTreeMap::new(),
            procs: BTreeMap::new(),
            attachments: Vec::new(),
            journal,
            jstate,
            seen_pids: BTreeSet::new(),
            stats: BTreeMap::new(),
            opts,
            last_scan: 0,
            last_full_scan: 0,
            force_full_scan: false,
            unplaced: false,
            plans_withdrawn: false,
            events,
            loop_pin: None,
            log,
            trace: std::env::var_os("RTBOX_TRACE").is_some(),
        })
    }

    /// Nanoseconds since the runtime started (the core's clock).
    pub fn now(&self) -> Nanos {
        rtbox_linux::monotonic_ns().saturating_sub(self.epoch)
    }

    /// Absolute CLOCK_MONOTONIC time for core time `t`.
    pub fn to_monotonic(&self, t: Nanos) -> u64 {
        self.epoch + t
    }

    pub fn specs(&self) -> &[BoxSpec] {
        &self.specs
    }

    pub fn platform(&self) -> &Platform {
        &self.platform
    }

    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
    }

    pub fn member_tids(&self, box_name: &str) -> Vec<i32> {
        self.members
            .iter()
            .filter(|(_, m)| m.box_name == box_name)
            .map(|(t, _)| *t)
            .collect()
    }

    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    // ---- box changes -------------------------------------------------------------------------

    /// Replace the box set (admission first; a refusal changes nothing). Members of boxes that
    /// no longer exist are released.
    pub fn set_boxes(&mut self, specs: Vec<BoxSpec>) -> Result<(), RuntimeError> {
        let (system, sched) = build(&self.platform, &specs, self.opts.loop_cost())?;
        let gone: Vec<i32> = self
            .members
            .iter()
            .filter(|(_, m)| system.get(&m.box_name).is_none())
            .map(|(t, _)| *t)
            .collect();
        self.attachments
            .retain(|a| system.get(&a.box_name).is_some());
        for tid in gone {
            self.release(tid);
        }
        self.specs = specs;
        self.sched = sched;
        self.system = system;
        self.stats.clear();
        let tids: Vec<i32> = self.members.keys().copied().collect();
        for tid in tids {
            let (bx, prio) = {
                let m = &self.members[&tid];
                (m.box_name.clone(), m.local_prio)
            };
            let task = self.register(tid, &bx, prio);
            let m = self.members.get_mut(&tid).expect("member");
            m.task = task;
            m.charge_to = None;
            m.last_server = None;
            m.ready = false;
            m.applied = m.applied.take().map(|a| Applied {
                frozen: a.frozen,
                ..a
            });
        }
        self.procs.retain(|_, b| self.system.get(b).is_some());
        self.release_empty_processes();
        Ok(())
    }

    fn register(&mut self, tid: i32, box_name: &str, prio: u32) -> TaskId {
        let p = TaskParams {
            box_name: Some(box_name.to_string()),
            ..TaskParams::background(format!("t{tid}"), prio)
        };
        match self.sched.add_task(p) {
            Ok(t) => t,
            Err(_) => self
                .sched
                .add_task(TaskParams::background(format!("t{tid}"), prio))
                .expect("background task"),
        }
    }

    /// Create a box.
    pub fn create_box(&mut self, spec: BoxSpec) -> Result<(), RuntimeError> {
        if self.specs.iter().any(|b| b.name == spec.name) {
            return Err(RuntimeError::Invalid(format!(
                "box \"{}\" exists",
                spec.name
            )));
        }
        let mut specs = self.specs.clone();
        specs.push(spec);
        self.set_boxes(specs)
    }

    /// Change a box's parameters.
    pub fn set_box(&mut self, spec: BoxSpec) -> Result<(), RuntimeError> {
        let mut specs = self.specs.clone();
        let slot = specs
            .iter_mut()
            .find(|b| b.name == spec.name)
            .ok_or_else(|| {
                RuntimeError::Invalid(format!("box \"{}\" does not exist", spec.name))
            })?;
        *slot = spec;
        self.set_boxes(specs)
    }

    /// Delete a box (refused while it has children); its members get their original state back.
    pub fn delete_box(&mut self, name: &str) -> Result<(), RuntimeError> {
        if !self.specs.iter().any(|b| b.name == name) {
            return Err(RuntimeError::Invalid(format!(
                "box \"{name}\" does not exist"
            )));
        }
        if let Some(c) = self
            .specs
            .iter()
            .find(|b| b.parent.as_deref() == Some(name))
        {
            return Err(RuntimeError::Refused(format!(
                "box \"{name}\" has child \"{}\"; delete it first",
                c.name
            )));
        }
        let specs = self
            .specs
            .iter()
            .filter(|b| b.name != name)
            .cloned()
            .collect();
        self.set_boxes(specs)
    }

    // ---- members -----------------------------------------------------------------------------

    /// Attach a process (all its threads, and later its children) or a cgroup to a box.
    pub fn attach(&mut self, box_name: &str, target: Target) -> Result<usize, RuntimeError> {
        if !self.specs.iter().any(|b| b.name == box_name) {
            return Err(RuntimeError::Invalid(format!(
                "box \"{box_name}\" does not exist"
            )));
        }
        if let Some(a) = self.attachments.iter().find(|a| a.target == target) {
            return Err(RuntimeError::Invalid(format!(
                "{target:?} is already attached to box \"{}\"",
                a.box_name
            )));
        }
        let tids = self.target_threads(&target)?;
        if let Target::Pid(pid) = target {
            if pid as u32 == std::process::id() {
                return Err(RuntimeError::Invalid(
                    "cannot attach the daemon itself".into(),
                ));
            }
        }
        let n = self.add_threads(box_name, &tids);
        self.attachments.push(Attachment {
            box_name: box_name.to_string(),
            target,
        });
        Ok(n)
    }

    fn target_threads(&self, target: &Target) -> Result<Vec<i32>, RuntimeError> {
        match target {
            Target::Pid(pid) => Ok(procfs::threads_of(*pid)?),
            Target::Cgroup(dir) => {
                let f = if dir.join("cgroup.threads").exists() {
                    dir.join("cgroup.threads")
                } else {
                    dir.join("tasks")
                };
                let text = std::fs::read_to_string(&f)
                    .map_err(|e| RuntimeError::Invalid(format!("cgroup {}: {e}", dir.display())))?;
                Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
            }
        }
    }

    /// Detach: release the threads of a pid, a cgroup or a whole box.
    pub fn detach(
        &mut self,
        pid: Option<i32>,
        cgroup: Option<PathBuf>,
        box_name: Option<&str>,
    ) -> Result<usize, RuntimeError> {
        let tids: Vec<i32> = match (pid, cgroup, box_name) {
            (Some(pid), None, None) => {
                self.attachments.retain(|a| a.target != Target::Pid(pid));
                self.members
                    .iter()
                    .filter(|(_, m)| m.pid == pid)
                    .map(|(t, _)| *t)
                    .collect()
            }
            (None, Some(dir), None) => {
                let target = Target::Cgroup(dir);
                if !self.attachments.iter().any(|a| a.target == target) {
                    return Err(RuntimeError::Invalid(format!("{target:?} is not attached")));
                }
                self.attachments.retain(|a| a.target != target);
                let pids: BTreeSet<i32> = self.procs.keys().copied().collect();
                let _ = pids;
                let tids = self.target_threads(&target).unwrap_or_default();
                tids.into_iter()
                    .filter(|t| self.members.contains_key(t))
                    .collect()
            }
            (None, None, Some(b)) => {
                self.attachments.retain(|a| a.box_name != b);
                self.member_tids(b)
            }
            _ => {
                return Err(RuntimeError::Invalid(
                    "detach: give exactly one of pid, cgroup, box".into(),
                ))
            }
        };
        let n = tids.len();
        for t in tids {
            self.release(t);
        }
        self.release_empty_processes();
        Ok(n)
    }

    /// Take threads under control: journal first, then change them.
    fn add_threads(&mut self, box_name: &str, tids: &[i32]) -> usize {
        let mut fresh = Vec::new();
        for &tid in tids {
            if self.members.contains_key(&tid) {
                continue;
            }
            match ThreadSnapshot::capture(tid) {
                Ok(s) => fresh.push(s),
                Err(e) if e.is_gone() => {}
                Err(e) => self.log.push(format!("attach thread {tid}: {e}")),
            }
        }
        if fresh.is_empty() {
            return 0;
        }
        let mut new_pids = Vec::new();
        for s in &fresh {
            if !self.jstate.processes.contains_key(&s.pid) && !self.procs.contains_key(&s.pid) {
                // A child forked by a member starts inside the parent's freeze group: its
                // original cgroup is the one the parent had before rtbox moved it.
                let mut v2_original = s.cgroups.v2.clone();
                if v2_original
                    .as_deref()
                    .is_some_and(|p| p.starts_with("/rtbox/p"))
                {
                    let parent = procfs::stat(s.pid).ok().map(|st| st.ppid);
                    v2_original = parent
                        .and_then(|pp| self.jstate.processes.get(&pp))
                        .and_then(|e| e.v2_original.clone())
                        .or_else(|| Some("/".to_string()));
                }
                self.jstate.processes.insert(
                    s.pid,
                    ProcessEntry {
                        v2_original,
                        freeze_group: self.layout.v2.is_some(),
                    },
                );
                new_pids.push(s.pid);
            }
            self.jstate.threads.insert(s.tid, s.clone());
        }
        if let Err(e) = self.journal.save(&self.jstate) {
            self.log.push(format!("journal: {e}; not attaching"));
            for s in &fresh {
                self.jstate.threads.remove(&s.tid);
            }
            return 0;
        }
        for pid in new_pids {
            self.procs.insert(pid, box_name.to_string());
            if self.layout.v2.is_some() {
                if let Err(e) = cgroup::freeze_group_create(&self.layout, pid) {
                    self.log.push(format!("freeze group of process {pid}: {e}"));
                }
            }
        }
        let n = fresh.len();
        self.unplaced = true;
        for s in fresh {
            let tid = s.tid;
            if let Some(dir) = cgroup::freeze_dir(&self.layout, s.pid) {
                if dir.exists() {
                    if let Err(e) = cgroup::freeze_place_thread(&dir, tid) {
                        self.log.push(format!("freeze cgroup of thread {tid}: {e}"));
                    }
                }
            }
            if let Some(v1) = &s.cgroups.v1_cpu {
                if v1 != "/" && cgroup::v1_cpu_denies_rt(&self.layout, v1) {
                    if let Err(e) = cgroup::v1_cpu_move(&self.layout, tid, "/") {
                        self.log.push(format!("thread {tid}: v1 cpu cgroup {v1} has no RT runtime and moving it failed: {e}"));
                    }
                }
            }
            let local_prio = localprio::local_priority(&s.attr);
            let task = self.register(tid, box_name, local_prio);
            let clock = match TaskClock::open(tid) {
                Ok(c) => Some(Arc::new(c)),
                Err(e) => {
                    self.log.push(format!("perf task clock of {tid}: {e}"));
                    None
                }
            };
            let charge = MemberCharge::new(clock.as_ref().and_then(|c| c.read().ok()).unwrap_or(0));
            self.members.insert(
                tid,
                Member {
                    pid: s.pid,
                    box_name: box_name.to_string(),
                    task,
                    clock,
                    charge,
                    schedstat: procfs::SchedstatFile::open(tid).ok(),
                    paired_at: 0,
                    paired_frozen: false,
                    thawed_at: None,
                    local_prio,
                    charge_to: None,
                    last_server: None,
                    applied: None,
                    ready: false,
                    stat: procfs::StatFile::open(tid).ok(),
                    freeze: None,
                    snapshot: s,
                },
            );
        }
        n
    }

    /// Give a thread back its original state and forget it.
    fn release(&mut self, tid: i32) {
        let Some(m) = self.members.remove(&tid) else {
            return;
        };
        let now = self.now();
        let _ = self.sched.block(now, m.task);
        // No backstop may stop it once thawed: withdraw every plan (the next step publishes
        // new ones); a stop it made before is thawed just below.
        self.withdraw_backstop();
        if let Some(dir) = cgroup::freeze_dir(&self.layout, m.pid) {
            let _ = cgroup::freeze_thread(&dir, tid, false);
        }
        if let Err(e) = m.snapshot.restore(&self.layout) {
            self.log.push(format!("restore thread {tid}: {e}"));
        }
        self.jstate.threads.remove(&tid);
        if let Err(e) = self.journal.save(&self.jstate) {
            self.log.push(format!("journal: {e}"));
        }
    }

    /// Processes without members leave their freeze group and the journal.
    fn release_empty_processes(&mut self) {
        let live: BTreeSet<i32> = self.members.values().map(|m| m.pid).collect();
        let attached: BTreeSet<i32> = self
            .attachments
            .iter()
            .filter_map(|a| match a.target {
                Target::Pid(p) => Some(p),
                _ => None,
            })
            .collect();
        let empty: Vec<i32> = self
            .jstate
            .processes
            .keys()
            .copied()
            .filter(|p| !(live.contains(p) || attached.contains(p) && procfs::stat(*p).is_ok()))
            .collect();
        if empty.is_empty() {
            return;
        }
        let mut changed = false;
        for pid in empty {
            if let Some(p) = self.jstate.processes.get(&pid) {
                if p.freeze_group {
                    if let Err(e) =
                        cgroup::freeze_group_remove(&self.layout, pid, p.v2_original.as_deref())
                    {
                        // An exiting process may still be linked to its group: keep the entry
                        // and retry at the next scan (or at shutdown / by the watchdog).
                        // (Not logged: a zombie not yet reaped would log every scan.)
                        let _ = e;
                        self.procs.remove(&pid);
                        continue;
                    }
                }
            }
            self.jstate.processes.remove(&pid);
            changed = true;
            self.procs.remove(&pid);
            self.attachments.retain(|a| a.target != Target::Pid(pid));
        }
        if changed {
            if let Err(e) = self.journal.save(&self.jstate) {
                self.log.push(format!("journal: {e}"));
            }
        }
    }

    /// Restore everything and clear the journal (stop, SIGTERM, SIGINT).
    pub fn shutdown(&mut self) {
        // First the backstop threads, so that nothing is stopped after it is released.
        self.backstop = None;
        let tids: Vec<i32> = self.members.keys().copied().collect();
        for t in tids {
            self.release(t);
        }
        self.attachments.clear();
        self.release_empty_processes();
        let rep = self.jstate.restore_all();
        if !rep.errors.is_empty() {
            self.log.push(format!("shutdown: {:?}", rep.errors));
        }
        cgroup::remove_rtbox_root(&self.layout);
        let _ = self.journal.clear();
        self.unpin_loop();
    }

    // ---- where the loop runs -----------------------------------------------------------------

    /// The CPU whose running server will exhaust its budget first, if any server runs.
    pub fn next_exhaustion_cpu(&self) -> Option<u32> {
        (0..self.sched.cpu_count())
            .filter_map(|i| {
                let s = self.sched.running_at(i)?.server?;
                let info = self.sched.server(s);
                (!info.throttled).then_some((info.runtime, info.cpu))
            })
            .min()
            .map(|(_, cpu)| cpu)
    }

    /// Where the loop should sleep: on the CPU of the next budget exhaustion; with none pending,
    /// on a CPU where no member runs (so its polls do not preempt a reclaiming member), keeping
    /// the current CPU when it qualifies; `None` to stay where it is.
    pub fn loop_cpu(&self) -> Option<u32> {
        if let Some(c) = self.next_exhaustion_cpu() {
            return Some(c);
        }
        let quiet: Vec<u32> = (0..self.sched.cpu_count())
            .filter(|&i| self.sched.running_at(i).is_none())
            .filter_map(|i| self.sched.cpus().nth(i))
            .collect();
        match &self.loop_pin {
            Some((_, _, c)) if quiet.contains(c) => Some(*c),
            _ => quiet.first().copied(),
        }
    }

    /// Moves the calling thread (the enforcement loop) to [`Runtime::loop_cpu`], so that its
    /// timer fires on the CPU the member that will exhaust runs on. On a virtual machine a timer
    /// on an otherwise idle vCPU wakes the loop late (the host must first schedule the halted
    /// vCPU: up to ~0.5 ms measured here) while the member keeps running on the busy one; on the
    /// busy vCPU a late timer also means the member did not run. The step then preempts the
    /// member, so the time it takes is not consumed by it. Measured: worst overrun per period
    /// 300 -> 50 us for a 2/10 ms box (docs/benchmarks-runtime.md).
    pub fn follow_exhaustion(&mut self) {
        if !self.opts.follow {
            return;
        }
        let Some(cpu) = self.loop_cpu() else {
            return;
        };
        let tid = sched::gettid();
        match &mut self.loop_pin {
            Some((t, _, c)) if *t == tid => {
                if *c != cpu && sched::set_affinity(tid, &[cpu]).is_ok() {
                    *c = cpu;
                }
            }
            _ => {
                self.unpin_loop();
                if let Ok(orig) = sched::get_affinity(tid) {
                    if orig.contains(&cpu) && sched::set_affinity(tid, &[cpu]).is_ok() {
                        self.loop_pin = Some((tid, orig, cpu));
                    }
                }
            }
        }
    }

    /// Gives the loop thread its original affinity back.
    pub fn unpin_loop(&mut self) {
        if let Some((tid, orig, _)) = self.loop_pin.take() {
            let _ = sched::set_affinity(tid, &orig);
        }
    }

    // ---- membership scan ---------------------------------------------------------------------

    /// New threads of attached processes, new child processes of members, exited threads, and
    /// members that changed their own policy or affinity.
    pub fn scan(&mut self) {
        // Exited threads leave.
        let dead: Vec<i32> = self
            .members
            .iter()
            .filter(|(_, m)| !m.snapshot.alive())
            .map(|(t, _)| *t)
            .collect();
        for t in dead {
            self.forget_exited(t);
        }
        // New threads of member processes.
        let procs: Vec<(i32, String)> = self.procs.iter().map(|(p, b)| (*p, b.clone())).collect();
        for (pid, bx) in &procs {
            if let Ok(tids) = procfs::threads_of(*pid) {
                let new: Vec<i32> = tids
                    .into_iter()
                    .filter(|t| !self.members.contains_key(t))
                    .collect();
                if !new.is_empty() {
                    self.add_threads(bx, &new);
                }
            }
        }
        self.scan_cgroups();
        // New child processes of member processes: the children lists of the member threads
        // (one small read per member), or a scan of all of /proc when the kernel lacks them.
        let mut fresh: Vec<(i32, String)> = Vec::new();
        let mut fallback = false;
        for (tid, m) in &self.members {
            match procfs::children(*tid) {
                Ok(Some(kids)) => {
                    for c in kids {
                        if !self.procs.contains_key(&c) && !self.members.contains_key(&c) {
                            fresh.push((c, m.box_name.clone()));
                        }
                    }
                }
                Ok(None) => {
                    fallback = true;
                    break;
                }
                Err(_) => {}
            }
        }
        if fallback {
            fresh.clear();
            if let Ok(pids) = procfs::all_pids() {
                for p in &pids {
                    if self.seen_pids.contains(p) {
                        continue;
                    }
                    if let Ok(st) = procfs::stat(*p) {
                        if let Some(bx) = self.procs.get(&st.ppid) {
                            fresh.push((*p, bx.clone()));
                        }
                    }
                }
                self.seen_pids = pids.into_iter().collect();
            }
        }
        fresh.sort();
        fresh.dedup_by_key(|x| x.0);
        for (p, bx) in fresh {
            if let Ok(tids) = procfs::threads_of(p) {
                self.add_threads(&bx, &tids);
            }
        }
        self.release_empty_processes();
    }

    /// Members that changed their own policy or affinity (or had it changed) get the box's
    /// back at the next step: their recorded state is made to differ from the desired one.
    fn correct_drift(&mut self) {
        let mut drifted = false;
        let mut ranked = Vec::new();
        for (tid, m) in self.members.iter_mut() {
            if let Some(a) = &m.applied {
                let now_attr = sched::get_attr(*tid).ok();
                let attr_ok = now_attr
                    .as_ref()
                    .map(|x| x.same_policy(&a.attr))
                    .unwrap_or(true);
                // A member that set its own priority: the box's local policy at work.
                if let Some(p) = now_attr
                    .as_ref()
                    .and_then(|x| localprio::changed_by_member(x, &a.attr, m.local_prio))
                {
                    ranked.push((*tid, p));
                }
                let cpus_ok = sched::get_affinity(*tid)
                    .map(|c| c == a.cpus)
                    .unwrap_or(true);
                if !attr_ok || !cpus_ok {
                    drifted = true;
                    m.applied = Some(Applied {
                        attr: SchedAttr::other(0),
                        cpus: Vec::new(),
                        frozen: a.frozen,
                    });
                }
            }
        }
        for (tid, p) in ranked {
            self.rerank(tid, p);
        }
        // Put back by an extra step at once, like new members.
        self.unplaced |= drifted;
    }

    /// Gives a member a new local priority: the core task is replaced by one at the new
    /// priority (the core has no priority change); the next step wakes it if it is runnable.
    fn rerank(&mut self, tid: i32, prio: u32) {
        let now = self.now();
        let Some((old, bx)) = self.members.get(&tid).map(|m| (m.task, m.box_name.clone())) else {
            return;
        };
        let _ = self.sched.block(now, old);
        let task = self.register(tid, &bx, prio);
        if let Some(m) = self.members.get_mut(&tid) {
            m.task = task;
            m.local_prio = prio;
            m.ready = false;
        }
    }

    /// Drops an exited member (no restore: the thread is gone) and its journal entry.
    fn forget_exited(&mut self, tid: i32) {
        if let Some(m) = self.members.remove(&tid) {
            let _ = self.sched.block(self.now(), m.task);
            self.jstate.threads.remove(&tid);
        }
    }

    /// Threads that entered attached cgroups (moved there from outside, e.g. a process a
    /// container runtime started: no member forked it).
    fn scan_cgroups(&mut self) {
        let cg: Vec<Attachment> = self
            .attachments
            .iter()
            .filter(|a| matches!(a.target, Target::Cgroup(_)))
            .cloned()
            .collect();
        for a in cg {
            if let Ok(tids) = self.target_threads(&a.target) {
                let new: Vec<i32> = tids
                    .into_iter()
                    .filter(|t| !self.members.contains_key(t))
                    .collect();
                if !new.is_empty() {
                    self.add_threads(&a.box_name, &new);
                }
            }
        }
    }

    /// Applies the kernel's process events: a thread or process forked by a member joins the
    /// member's box at once; an exited member leaves. Lost events force a full scan.
    fn take_events(&mut self) {
        let Some(ev) = self.events.as_mut() else {
            return;
        };
        let drained = ev.drain();
        if drained.lost {
            self.log
                .push("process events lost (burst of forks); full scan".into());
            self.force_full_scan = true;
        }
        let mut joins: Vec<(String, i32)> = Vec::new();
        // Threads and processes joining in this batch: their own forks (later in the batch)
        // join too.
        let mut pending: BTreeMap<i32, String> = BTreeMap::new();
        for e in drained.events {
            match e {
                ProcEvent::Fork {
                    parent_tid,
                    parent_tgid,
                    child_tid,
                    child_tgid,
                } => {
                    let bx = self
                        .members
                        .get(&parent_tid)
                        .map(|m| m.box_name.clone())
                        .or_else(|| self.procs.get(&parent_tgid).cloned())
                        .or_else(|| pending.get(&parent_tid).cloned())
                        .or_else(|| pending.get(&parent_tgid).cloned());
                    if let Some(bx) = bx {
                        pending.insert(child_tid, bx.clone());
                        pending.insert(child_tgid, bx.clone());
                        joins.push((bx, child_tid));
                    }
                }
                ProcEvent::Exit { tid, .. } => {
                    // A thread that forked and exited between two steps never joined.
                    joins.retain(|(_, t)| *t != tid);
                    self.forget_exited(tid);
                }
                ProcEvent::Exec { .. } => {}
            }
        }
        for (bx, tid) in joins {
            if self.system.get(&bx).is_some() && !self.members.contains_key(&tid) {
                self.add_threads(&bx, &[tid]);
            }
        }
    }

    // ---- the enforcement step ----------------------------------------------------------------

    /// One step at core time `now`: charge measured CPU time, update readiness, fire the core's
    /// timers, apply its decisions to the threads, then scan for members.
    pub fn step(&mut self, now: Nanos) {
        if let Some(w) =
            self.loop_usage
                .step(now, rtbox_linux::thread_cpu_ns(), self.opts.step_cost)
        {
            self.log.push(w);
        }
        self.take_events();
        self.unplaced = false;
        let now = self.now().max(now);
        // 0. Members the backstop froze: frozen, so ready (/proc would show them sleeping).
        if let Some(b) = self.backstop.as_mut() {
            let report = b.take_report();
            self.take_backstop_report(now, &report);
        }
        // 1. Charge measured CPU time; wake/block by thread state.
        for (tid, m) in self.members.iter_mut() {
            let frozen = m.applied.as_ref().is_some_and(|a| a.frozen);
            if let Some(c) = &m.clock {
                if let Ok(v) = c.read() {
                    let d = m.charge.advance(v);
                    if d > 0 {
                        m.thawed_at = None;
                        if let Some(s) = m.charge_to {
                            let _ = self.sched.charge(now, s, d);
                        }
                    }
                    // Off CPU (frozen, or blocked when last seen): take a (perf, kernel) pair
                    // once per freeze, and at most every PAIR_EVERY while blocked.
                    let due = if frozen {
                        !m.paired_frozen
                    } else {
                        !m.ready && now.saturating_sub(m.paired_at) >= PAIR_EVERY
                    };
                    if due {
                        if let Some(steal) = m.take_pair(v) {
                            m.paired_at = now;
                            m.paired_frozen = frozen;
                            // Refund only where it cannot lift a period above Q: to the server
                            // that throttled the member (its budget is then the next period's,
                            // untouched, and the refund stops at Q). A member that blocked by
                            // itself keeps the charge: its server may be mid-period.
                            if let Some(s) = m.charge_to.or(m.last_server) {
                                if frozen && steal > 0 && self.sched.server(s).throttled {
                                    // The refund also lowers the server's consumed count, so
                                    // the period it falls in is measured net of the steal (the
                                    // kernel's view).
                                    let _ = self.sched.refund(s, steal);
                                }
                            }
                        }
                    }
                }
            }
            if !frozen {
                m.paired_frozen = false;
            }
            // A member thawed but not yet seen running counts as ready: its wake-up may still
            // wait on its (idle) vCPU, while /proc shows it sleeping.
            let thawing = m
                .thawed_at
                .is_some_and(|t| now.saturating_sub(t) < THAW_GRACE);
            let ready = frozen
                || thawing
                || match m.stat.as_mut() {
                    Some(f) => f.runnable(),
                    None => procfs::stat(*tid).map(|s| s.runnable()).unwrap_or(false),
                };
            if ready != m.ready {
                m.ready = ready;
                let _ = if ready {
                    self.sched.wake(now, m.task, None)
                } else {
                    self.sched.block(now, m.task)
                };
            }
        }
        // 2. Timers and decisions.
        self.sched.advance(now);
        while let Some(ev) = self.sched.poll_event() {
            if self.trace {
                self.log.push(format!("{ev:?}"));
            }
            if let Event::Throttled { server, .. } = ev {
                let info = self.sched.server(server);
                let key = (info.box_name.unwrap_or("").to_string(), info.cpu);
                let st = self.stats.entry(key).or_default();
                // The core replenishes on throttle: the new budget is Q minus the overrun.
                let over = i64::try_from(info.budget).unwrap_or(i64::MAX) - info.runtime;
                if st.detected.len() < 100_000 {
                    st.detected.push(over.max(0).unsigned_abs());
                }
            }
            if let Event::Renewed { server, .. } = ev {
                // A new server period without a throttle: the rest of the old budget was
                // consumed below Q, so only the new period is measured from here.
                let info = self.sched.server(server);
                let key = (info.box_name.unwrap_or("").to_string(), info.cpu);
                let st = self.stats.entry(key).or_default();
                st.last_replenish = Some((now, info.consumed));
                st.last_kernel = None;
            }
            if let Event::Replenished { server, .. } = ev {
                let info = self.sched.server(server);
                let key = (info.box_name.unwrap_or("").to_string(), info.cpu);
                let st = self.stats.entry(key).or_default();
                // Pinned boxes only, and only periods with the same members at both ends,
                // verifiably off CPU then: a member that moves between servers spends part of
                // its kernel time elsewhere.
                let pinned = || {
                    self.specs
                        .iter()
                        .find(|b| Some(b.name.as_str()) == info.box_name)
                        .is_some_and(|b| {
                            b.placement == rtbox_model::Placement::Pinned
                                || self.sched.box_servers(&b.name).len() == 1
                        })
                };
                let kernel = if self.opts.audit && pinned() {
                    let mut tids = Vec::new();
                    let sum = self
                        .members
                        .iter_mut()
                        .filter(|(_, m)| m.charge_to == Some(server))
                        .map(|(t, m)| {
                            tids.push(*t);
                            m.kernel_time_off_cpu()
                        })
                        .sum::<Option<u64>>();
                    sum.filter(|_| !tids.is_empty()).map(|k| (tids, k))
                } else {
                    None
                };
                // Consumption between two replenishments one period apart is one period's.
                if let Some((t, c)) = st.last_replenish {
                    let used = info.consumed.saturating_sub(c);
                    let gap = now - t;
                    if gap.abs_diff(info.period) <= info.period / 4 && st.overruns.len() < 100_000 {
                        let over = used.saturating_sub(info.budget);
                        st.overruns.push(over);
                        if let (Some((t1, k)), Some((t0, k0))) = (&kernel, &st.last_kernel) {
                            let kover = k.saturating_sub(*k0).saturating_sub(info.budget);
                            if t1 == t0 {
                                st.kernel_overruns.push(kover);
                                if over > 100_000 {
                                    st.outliers.push((now, over, kover));
                                }
                            }
                        }
                    }
                }
                st.last_replenish = Some((now, info.consumed));
                st.last_kernel = kernel;
            }
        }
        // 3. Decide; leave the backstop the plan for the new state (taking what it stopped
        // meanwhile); carry the decisions out; thaw under the backstop's lock.
        let changes = self.decide();
        let rethaw = self.publish_backstop(now);
        let mut thaws = self.execute(changes);
        for t in rethaw {
            if !thaws.contains(&t) {
                thaws.push(t);
            }
        }
        self.thaw_guarded(now, thaws);
        // 4. Membership scans last: a full /proc scan takes ~0.2 ms, which must not delay
        // charging and stopping (measured: a member ran 0.2 ms past its budget behind one).
        // New members are charged and placed by the next step, at once (`next_wakeup`).
        if self.force_full_scan || now.saturating_sub(self.last_scan) >= self.opts.scan {
            self.last_scan = now;
            let full = self.force_full_scan
                || self.events.is_none()
                || now.saturating_sub(self.last_full_scan) >= self.opts.full_scan;
            self.plans_withdrawn = false;
            if full {
                self.force_full_scan = false;
                self.last_full_scan = now;
                self.scan();
            } else {
                self.scan_cgroups();
                self.release_empty_processes();
            }
            self.correct_drift();
            // A release withdrew every plan: give the backstop the others' back.
            if self.plans_withdrawn {
                let again = self.publish_backstop(now);
                self.thaw_guarded(now, again);
            }
        }
    }

    /// Leaves each CPU's backstop the planned exhaustions of the hard-mode servers that run
    /// there (EDF order, each running its budget out in turn) with their members' freeze
    /// handles, for the state `decide` recorded, and takes back the members it stopped since
    /// the step began. Returns those of them the loop wants running (to thaw again).
    fn publish_backstop(&mut self, now: Nanos) -> Vec<i32> {
        if self.backstop.is_none() {
            return Vec::new();
        }
        // Per server: whether a member is ready, and the members' handles.
        let mut by_server: BTreeMap<ServerId, (bool, Vec<Handle>)> = BTreeMap::new();
        for (tid, m) in self.members.iter_mut() {
            let (Some(s), Some(a)) = (m.charge_to, m.applied.as_ref()) else {
                continue;
            };
            if a.frozen {
                continue;
            }
            if m.freeze.is_none() {
                m.freeze = cgroup::freeze_dir(&self.layout, m.pid)
                    .and_then(|d| cgroup::open_freeze(&d, *tid))
                    .map(Arc::new);
            }
            let e = by_server.entry(s).or_default();
            e.0 |= m.ready;
            if let (Some(f), Some(c)) = (&m.freeze, &m.clock) {
                e.1.push(Handle {
                    tid: *tid,
                    freeze: f.clone(),
                    clock: c.clone(),
                    charged: m.charge.last(),
                });
            }
        }
        let hard: BTreeSet<&str> = self
            .specs
            .iter()
            .filter(|b| b.mode == Mode::Hard && !b.interface.is_shared())
            .map(|b| b.name.as_str())
            .collect();
        let mut plans = Vec::new();
        for (cpu, servers) in self.edf_order() {
            let mut t = now;
            let mut stops = Vec::new();
            // Only servers with a ready member run, one after the other.
            for s in servers {
                let Some((true, _)) = by_server.get(&s) else {
                    continue;
                };
                let info = self.sched.server(s);
                let budget = u64::try_from(info.runtime.max(0)).unwrap_or(0);
                t += budget;
                if hard.contains(info.box_name.unwrap_or("")) {
                    if let Some((_, members)) = by_server.remove(&s) {
                        stops.push(Stop {
                            at: self.epoch + t,
                            budget,
                            members,
                        });
                    }
                }
            }
            plans.push((cpu, stops));
        }
        // Running members the core takes for blocked (a thread the backstop froze reads as
        // sleeping until the loop sees its report; a thread may wake between two polls): if
        // they run, they may spend their whole budget from now. Measured without this: a
        // member thawed while its server looked idle ran 1.04 ms unplanned.
        for (s, (_, members)) in by_server {
            let info = self.sched.server(s);
            if info.throttled || !hard.contains(info.box_name.unwrap_or("")) {
                continue;
            }
            let budget = u64::try_from(info.runtime.max(0)).unwrap_or(0);
            if let Some((_, stops)) = plans.iter_mut().find(|(c, _)| *c == info.cpu) {
                stops.push(Stop {
                    at: self.epoch + now + budget,
                    budget,
                    members,
                });
            }
        }
        // Each CPU also watches the others' stops, a little later: a vCPU whose timer
        // interrupt the host delivers late runs its member on while its own backstop (and the
        // loop, if there) sleep; measured: 300 us late wake-ups of both, and 340 us run.
        let all: Vec<(u32, Stop)> = plans
            .iter()
            .flat_map(|(c, v)| v.iter().map(move |st| (*c, st.clone())))
            .collect();
        for (cpu, stops) in plans.iter_mut() {
            for (home, st) in &all {
                if home != cpu {
                    stops.push(Stop {
                        at: st.at + backstop::WATCH_SLACK,
                        ..st.clone()
                    });
                }
            }
        }
        let Some(mut b) = self.backstop.take() else {
            return Vec::new();
        };
        let mut again = Vec::new();
        b.publish_then(plans, |report| {
            // Stopped by the last plan: thawed again if the loop wants it running (`decide`
            // already recorded what it wants; a member it wants frozen just stays so).
            for tid in &report {
                if let Some(a) = self.members.get(tid).and_then(|m| m.applied.as_ref()) {
                    if !a.frozen {
                        again.push(*tid);
                    }
                }
            }
            self.count_backstop_stops(now, &report);
        });
        self.backstop = Some(b);
        again
    }

    /// Thaws `tids` (recorded as running by `decide`) under the backstop's lock, except those
    /// the new plan stopped meanwhile: their budget is spent by the members' own clocks, so
    /// they stay frozen until the loop's next step charges them.
    fn thaw_guarded(&mut self, now: Nanos, mut tids: Vec<i32>) {
        let Some(mut b) = self.backstop.take() else {
            self.thaw(now, &tids);
            return;
        };
        b.locked(|report| {
            for tid in &report {
                if let Some(a) = self.members.get_mut(tid).and_then(|m| m.applied.as_mut()) {
                    a.frozen = true;
                }
                tids.retain(|t| t != tid);
            }
            self.count_backstop_stops(now, &report);
            self.thaw(now, &tids);
        });
        self.backstop = Some(b);
    }

    /// Withdraws every backstop plan (a member is being released); members it had stopped are
    /// recorded as frozen, so the next apply thaws them if they should run.
    fn withdraw_backstop(&mut self) {
        if let Some(b) = self.backstop.as_mut() {
            let report = b.publish(Vec::new());
            self.plans_withdrawn = true;
            let now = self.now();
            self.take_backstop_report(now, &report);
        }
    }

    fn take_backstop_report(&mut self, now: Nanos, report: &[i32]) {
        for tid in report {
            if let Some(a) = self.members.get_mut(tid).and_then(|m| m.applied.as_mut()) {
                a.frozen = true;
            }
        }
        self.count_backstop_stops(now, report);
    }

    /// Thaws members whose recorded state `decide` already set to running.
    fn thaw(&mut self, now: Nanos, tids: &[i32]) {
        let mut gone = Vec::new();
        for tid in tids {
            let Some(m) = self.members.get_mut(tid) else {
                continue;
            };
            let Some(dir) = cgroup::freeze_dir(&self.layout, m.pid) else {
                continue;
            };
            match freeze_fast(&mut m.freeze, &dir, *tid, false) {
                Ok(()) => {
                    m.thawed_at = Some(now);
                    // The next freeze needs its own pair, even if no step sees the member
                    // running in between (measured: a freeze, thaw and backstop freeze within
                    // one step left 3.25 ms of perf time, most of it a host stall, unrefunded).
                    m.paired_frozen = false;
                    if let Some(a) = m.applied.as_mut() {
                        a.frozen = false;
                    }
                }
                Err(e) if e.is_gone() => gone.push(*tid),
                Err(e) => self.log.push(format!("thread {tid}: {e}")),
            }
        }
        for t in gone {
            self.forget_exited(t);
        }
    }

    fn count_backstop_stops(&mut self, now: Nanos, report: &[i32]) {
        self.backstop_stops += report.len() as u64;
        if !report.is_empty() && self.backstop_times.len() < 10_000 {
            self.backstop_times.push(now);
        }
    }

    /// Sleeps until CLOCK_MONOTONIC `deadline`; a backstop stop wakes it early.
    pub fn sleep_until(&self, deadline: u64) {
        match &self.backstop {
            Some(b) => b.sleep_until(deadline),
            None => rtbox_linux::sleep_until(deadline),
        }
    }

    /// When the backstop's stops were taken back by the loop (core time), for figures.
    pub fn backstop_times(&self) -> &[Nanos] {
        &self.backstop_times
    }

    /// The enforcement loop's own CPU use (counted by [`Runtime::step`], on the loop thread).
    pub fn loop_usage(&self) -> &LoopUsage {
        &self.loop_usage
    }

    /// The step cost admission assumes (`--loop-step-us`), ns.
    pub fn admitted_step(&self) -> Nanos {
        self.opts.step_cost
    }

    /// Members the backstop stopped because the loop was late (see `backstop.rs`).
    pub fn backstop_stops(&self) -> u64 {
        self.backstop_stops
    }

    /// The non-throttled servers of each CPU in EDF order (absolute deadline, then id).
    fn edf_order(&self) -> BTreeMap<u32, Vec<ServerId>> {
        let mut by_cpu: BTreeMap<u32, Vec<(Nanos, ServerId)>> = BTreeMap::new();
        for i in 0..self.sched.server_count() {
            let info = self.sched.server(ServerId(i as u32));
            if !info.throttled {
                by_cpu
                    .entry(info.cpu)
                    .or_default()
                    .push((info.deadline, info.id));
            }
        }
        by_cpu
            .into_iter()
            .map(|(cpu, mut v)| {
                v.sort();
                (cpu, v.into_iter().map(|(_, s)| s).collect())
            })
            .collect()
    }

    /// Decides what each member must look like after the core's decisions and records it
    /// (`applied`, `charge_to`) before anything is done, so the backstop's plan covers the
    /// new state while [`Runtime::execute`] carries it out. Returns the changed members with
    /// their previous state.
    fn decide(&mut self) -> Vec<(i32, Option<Applied>)> {
        let by_cpu = self.edf_order();
        let mut slot: BTreeMap<ServerId, (u32, u32)> = BTreeMap::new(); // server -> (top, width)
        let range = PRIO_HI - PRIO_LO + 1;
        for v in by_cpu.values() {
            let width = (range / v.len().max(1) as u32).max(1);
            for (rank, s) in v.iter().enumerate() {
                let top = PRIO_HI.saturating_sub(rank as u32 * width).max(PRIO_LO);
                slot.insert(*s, (top, width));
            }
        }
        // Local ranks per box: distinct original priorities, highest first.
        let mut local: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for m in self.members.values() {
            local
                .entry(m.box_name.clone())
                .or_default()
                .push(m.local_prio);
        }
        for v in local.values_mut() {
            v.sort_unstable_by(|a, b| b.cmp(a));
            v.dedup();
        }
        let modes: BTreeMap<&str, (Mode, bool)> = self
            .specs
            .iter()
            .map(|b| (b.name.as_str(), (b.mode, b.interface.is_shared())))
            .collect();
        let max_weight = self
            .specs
            .iter()
            .filter_map(|b| match b.interface {
                rtbox_model::Interface::Shared { weight } => Some(weight),
                _ => None,
            })
            .max()
            .unwrap_or(1);
        let mut changes = Vec::new();
        for (tid, m) in self.members.iter_mut() {
            let (mode, shared) = modes
                .get(m.box_name.as_str())
                .copied()
                .unwrap_or((Mode::Hard, true));
            let servers = self.sched.box_servers(&m.box_name);
            if shared || servers.is_empty() {
                // Shared boxes run in what the reservations leave: as normal threads (their
                // own normal policy; an RT or deadline member would preempt every reservation,
                // so it runs as SCHED_OTHER while managed), on the box's CPUs, at a nice level
                // from their weight (one nice step is ~1.25x weight).
                m.charge_to = None;
                let Some(b) = self.system.get(&m.box_name) else {
                    continue;
                };
                let mut attr = m.snapshot.attr;
                if attr.is_rt() || attr.policy == sched::SCHED_DEADLINE {
                    attr = SchedAttr::other(attr.nice);
                }
                if let rtbox_model::Interface::Shared { weight } = b.spec.interface {
                    attr.nice = shared_nice(weight, max_weight);
                }
                let desired = Applied {
                    attr,
                    cpus: b.cpus.iter().collect(),
                    frozen: false,
                };
                if m.applied.as_ref() != Some(&desired) {
                    changes.push((*tid, m.applied.replace(desired)));
                }
                continue;
            }
            let placed = self.sched.placement(m.task);
            let live = |s: &ServerId| slot.contains_key(s);
            // A sleeping member keeps a vCPU with budget so it runs at once when it wakes.
            let server = placed.filter(live).or_else(|| {
                if m.ready {
                    None
                } else {
                    m.last_server
                        .filter(live)
                        .or_else(|| servers.iter().copied().find(live))
                }
            });
            let desired = match server {
                Some(s) => {
                    let (top, width) = slot[&s];
                    let lr = local[&m.box_name]
                        .iter()
                        .position(|&p| p == m.local_prio)
                        .unwrap_or(0) as u32;
                    let prio = top - lr.min(width - 1);
                    let prio = prio.max(PRIO_LO);
                    m.charge_to = Some(s);
                    m.last_server = Some(s);
                    Applied {
                        attr: SchedAttr::fifo(prio),
                        cpus: vec![self.sched.server(s).cpu],
                        frozen: false,
                    }
                }
                None => match mode {
                    Mode::Hard => {
                        // Charged to its last vCPU until the freeze takes effect.
                        m.charge_to = m.last_server.or(placed);
                        let prev = m.applied.clone().unwrap_or(Applied {
                            attr: SchedAttr::fifo(PRIO_LO),
                            cpus: m.snapshot.affinity.clone(),
                            frozen: true,
                        });
                        Applied {
                            frozen: true,
                            ..prev
                        }
                    }
                    Mode::Reclaim => {
                        m.charge_to = None;
                        let cpus: Vec<u32> =
                            servers.iter().map(|s| self.sched.server(*s).cpu).collect();
                        Applied {
                            attr: SchedAttr::idle(),
                            cpus,
                            frozen: false,
                        }
                    }
                },
            };
            if m.applied.as_ref() == Some(&desired) {
                continue;
            }
            changes.push((*tid, m.applied.replace(desired)));
        }
        changes
    }

    /// Carries out `decide`'s changes (each from its previous state), except thaws: returns
    /// the members to thaw.
    fn execute(&mut self, changes: Vec<(i32, Option<Applied>)>) -> Vec<i32> {
        let mut errors = Vec::new();
        let mut gone = Vec::new();
        let mut thaws = Vec::new();
        for (tid, prev) in changes {
            let Some(m) = self.members.get_mut(&tid) else {
                continue;
            };
            let Some(want) = m.applied.clone() else {
                continue;
            };
            let freeze_dir = cgroup::freeze_dir(&self.layout, m.pid);
            match apply_one(
                tid,
                prev.as_ref(),
                &want,
                freeze_dir.as_deref(),
                &mut m.freeze,
            ) {
                Ok(true) => thaws.push(tid),
                Ok(false) => {}
                Err(e) if e.is_gone() => gone.push(tid),
                Err(e) => errors.push(format!("thread {tid}: {e}")),
            }
        }
        self.log.extend(errors);
        for t in gone {
            thaws.retain(|&x| x != t);
            self.forget_exited(t);
        }
        thaws
    }

    /// When the loop must run next (absolute core time); the rules are [`wakeup_time`]'s. The
    /// budget left that bounds a poll is the smallest of the non-throttled servers that have a
    /// runnable member.
    pub fn next_wakeup(&self, now: Nanos) -> Nanos {
        if self.unplaced {
            return now + MIN_GRANT;
        }
        let budget_left = self
            .members
            .values()
            .filter_map(|m| m.charge_to.filter(|_| m.ready))
            .map(|s| self.sched.server(s))
            .filter(|info| !info.throttled && info.runtime > 0)
            .map(|info| info.runtime as u64)
            .min();
        wakeup_time(
            now,
            self.sched.next_timer(),
            self.sched.next_replenishment(),
            self.poll_interval(),
            budget_left,
        )
    }

    /// How long the loop may sleep without looking at the members. Between two steps a member
    /// may wake up, or block and let another member of its CPU run, unseen by the loop; what
    /// such a member can consume unseen is bounded by its server's budget left. So the loop
    /// polls after the smallest budget left of any non-throttled server, at least every
    /// `poll` (1 ms) and at most every `scan` interval (new threads must join quickly). With
    /// only throttled servers, or servers with plenty of budget, it sleeps longer: the poll
    /// was most of the loop's CPU use (docs/benchmarks-runtime.md).
    pub fn poll_interval(&self) -> Nanos {
        let lo = self.opts.poll;
        let hi = self.opts.scan.max(lo);
        (0..self.sched.server_count())
            .map(|i| self.sched.server(ServerId(i as u32)))
            .filter(|s| !s.throttled && s.box_name.is_some())
            .map(|s| u64::try_from(s.runtime).unwrap_or(0))
            .min()
            .unwrap_or(hi)
            .clamp(lo, hi)
    }

    /// Per-server view for status and metrics.
    pub fn server_rows(&self) -> Vec<ServerRow> {
        (0..self.sched.server_count())
            .map(|i| {
                let info = self.sched.server(ServerId(i as u32));
                let bx = info.box_name.unwrap_or("").to_string();
                let st = self.stats.get(&(bx.clone(), info.cpu));
                ServerRow {
                    members: self
                        .members
                        .iter()
                        .filter(|(_, m)| m.box_name == bx && m.charge_to == Some(info.id))
                        .map(|(t, _)| *t)
                        .collect(),
                    box_name: bx,
                    cpu: info.cpu,
                    budget: info.budget,
                    period: info.period,
                    runtime: info.runtime,
                    consumed: info.consumed,
                    throttled: info.throttled,
                    throttles: info.throttle_count,
                    max_overrun: st
                        .and_then(|s| s.overruns.iter().max().copied())
                        .unwrap_or(0),
                }
            })
            .collect()
    }

    /// Overrun samples (ns) of every finished period of a box's server on `cpu`.
    pub fn overruns(&self, box_name: &str, cpu: u32) -> Vec<u64> {
        self.stats
            .get(&(box_name.to_string(), cpu))
            .map(|s| s.overruns.clone())
            .unwrap_or_default()
    }

    /// Overrun at detection (ns) of every throttle of a box's server on `cpu`.
    /// Perf clock time of current members that the kernel says they did not run (host steal),
    /// found so far and kept out of their charges, ns.
    pub fn steal_found(&self) -> u64 {
        self.members.values().map(|m| m.charge.stolen()).sum()
    }

    pub fn detected_overruns(&self, box_name: &str, cpu: u32) -> Vec<u64> {
        self.stats
            .get(&(box_name.to_string(), cpu))
            .map(|s| s.detected.clone())
            .unwrap_or_default()
    }
}

/// One server's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServerRow {
    #[serde(rename = "box")]
    pub box_name: String,
    pub cpu: u32,
    pub budget: Nanos,
    pub period: Nanos,
    pub runtime: i64,
    pub consumed: Nanos,
    pub throttled: bool,
    pub throttles: u64,
    pub max_overrun: u64,
    pub members: Vec<i32>,
}

/// The nice level of a shared box: the heaviest box gets nice 0, a box with 1/1.25 of its
/// weight nice 1, and so on (CFS weights grow by ~1.25 per nice step), capped at 19.
pub fn shared_nice(weight: u32, max_weight: u32) -> i32 {
    let ratio = f64::from(max_weight.max(1)) / f64::from(weight.max(1));
    (ratio.ln() / 1.25f64.ln()).round().clamp(0.0, 19.0) as i32
}

/// Freeze or thaw through the member's kept-open `cgroup.freeze` (opened on first use); on any
/// failure the handle is dropped and the path-based write decides (and reports) the outcome.
fn freeze_fast(
    handle: &mut Option<Arc<std::fs::File>>,
    dir: &std::path::Path,
    tid: i32,
    frozen: bool,
) -> Result<(), LinuxError> {
    if handle.is_none() {
        *handle = cgroup::open_freeze(dir, tid).map(Arc::new);
    }
    if let Some(f) = handle.as_ref() {
        if cgroup::freeze_write(f, frozen).is_ok() {
            return Ok(());
        }
        *handle = None;
    }
    cgroup::freeze_thread(dir, tid, frozen)
}

/// Change one thread from `prev` to `want`, stopping first when stopping (fastest effect).
/// A thaw is left to the caller (returns `true`): it must happen under the backstop's lock.
fn apply_one(
    tid: i32,
    prev: Option<&Applied>,
    want: &Applied,
    freeze_dir: Option<&std::path::Path>,
    handle: &mut Option<Arc<std::fs::File>>,
) -> Result<bool, LinuxError> {
    let was_frozen = prev.is_some_and(|p| p.frozen);
    // A kept handle proves the freeze group exists (saves a stat per decision).
    let dir_ok =
        (want.frozen || was_frozen) && freeze_dir.is_some_and(|d| handle.is_some() || d.exists());
    if want.frozen && !was_frozen {
        if let Some(d) = freeze_dir.filter(|_| dir_ok) {
            return freeze_fast(handle, d, tid, true).map(|_| false);
        }
        // No cgroup v2: the closest stop is SCHED_IDLE (documented as not tight).
        return sched::set_attr(tid, &SchedAttr::idle()).map(|_| false);
    }
    // Without a freeze group the stop was SCHED_IDLE: the recorded attr is stale then.
    let idle_stop = was_frozen && !dir_ok;
    if idle_stop || prev.map(|p| &p.attr) != Some(&want.attr) {
        sched::set_attr(tid, &want.attr)?;
    }
    if prev.map(|p| &p.cpus) != Some(&want.cpus) && !want.cpus.is_empty() {
        sched::set_affinity(tid, &want.cpus)?;
    }
    Ok(was_frozen && !want.frozen && dir_ok)
}

/// When the enforcement loop must run next, from the core's timers (absolute core time).
///
/// - A replenishment that came due while the step ran (a step can take longer than the gap
///   between a throttle and another server's replenishment) runs at once. Issue 5: it used to
///   wait a whole poll interval, 4 ms with every server throttled, and 1 ms global boxes lost
///   a fifth of their periods to it.
/// - A future timer (exhaustion or replenishment) is kept, but every sleep is at least
///   [`MIN_GRANT`] and at most one `poll` interval.
/// - In Measured mode the core's exhaustion time assumes the running member consumed at full
///   rate; when it did not (preempted by a higher band or by RT throttling) that time lies in
///   the past, and the loop instead waits for the smallest budget left among servers with a
///   runnable member (at least [`MIN_SLEEP`], so it never spins), or for the next
///   replenishment if that comes first.
pub fn wakeup_time(
    now: Nanos,
    next_timer: Option<Nanos>,
    next_replenishment: Option<Nanos>,
    poll: Nanos,
    budget_left: Option<Nanos>,
) -> Nanos {
    if next_replenishment.is_some_and(|r| r <= now) {
        return now;
    }
    let poll = now + poll;
    match next_timer {
        Some(t) if t > now => t.max(now + MIN_GRANT).min(poll),
        Some(_) => {
            let est = budget_left
                .map_or(poll, |b| poll.min(now + b))
                .max(now + MIN_SLEEP);
            next_replenishment.map_or(est, |r| est.min(r.max(now + MIN_GRANT)))
        }
        None => poll,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;
    const US: Nanos = 1_000;

    #[test]
    fn a_replenishment_due_during_the_step_runs_at_once_issue_5() {
        // Every server throttled at 100 ms; one is replenished at 100.033 ms, but the step
        // ended at 100.067 ms. Before the fix the loop slept the 4 ms poll interval.
        let now = 100 * MS + 67 * US;
        let r = 100 * MS + 33 * US;
        assert_eq!(wakeup_time(now, Some(r), Some(r), 4 * MS, None), now);
    }

    #[test]
    fn future_timers_are_kept_within_the_grant_and_the_poll() {
        let now = 10 * MS;
        assert_eq!(
            wakeup_time(now, Some(now + 300 * US), Some(now + 300 * US), MS, None),
            now + 300 * US
        );
        assert_eq!(
            wakeup_time(now, Some(now + US), None, MS, Some(US)),
            now + MIN_GRANT,
            "never a sleep shorter than the grant"
        );
        assert_eq!(
            wakeup_time(now, Some(now + 9 * MS), None, MS, None),
            now + MS,
            "never longer than the poll"
        );
        assert_eq!(wakeup_time(now, None, None, 4 * MS, None), now + 4 * MS);
    }

    #[test]
    fn a_passed_exhaustion_estimate_polls_by_budget_left_but_not_past_a_replenishment() {
        let now = 10 * MS;
        let passed = Some(now - 5 * US);
        // The member was preempted: budget is left, the loop waits for it (not below MIN_SLEEP).
        assert_eq!(
            wakeup_time(now, passed, None, MS, Some(700 * US)),
            now + 700 * US
        );
        assert_eq!(
            wakeup_time(now, passed, None, MS, Some(US)),
            now + MIN_SLEEP
        );
        // Another server's replenishment comes first.
        assert_eq!(
            wakeup_time(now, passed, Some(now + 300 * US), MS, Some(700 * US)),
            now + 300 * US
        );
        // With nothing runnable, the poll interval bounds the sleep.
        assert_eq!(wakeup_time(now, passed, None, 4 * MS, None), now + 4 * MS);
    }
}
