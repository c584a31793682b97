//! The members table: threads under rtbox's control, the processes and cgroups they came from,
//! the crash journal that records their original state, and the membership scans (process
//! events, /proc, attached cgroups, policy drift).

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;
use std::sync::Arc;

use rtbox_core::{Scheduler, ServerId, TaskId, TaskParams};
use rtbox_linux::cgroup::{self, Layout};
use rtbox_linux::journal::{Journal, JournalState, ProcessEntry};
use rtbox_linux::procevents::{ProcEvent, ProcEvents};
use rtbox_linux::sched::{self, SchedAttr};
use rtbox_linux::snapshot::ThreadSnapshot;
use rtbox_linux::stopgroup::Stop;
use rtbox_linux::{procfs, LinuxError};
use rtbox_model::{Nanos, System};

use super::apply::{self, Applied};
use super::error::RuntimeError;
use super::localprio;
use super::rest::Rest;
use super::rtgrants::{self, RtGrants};
use super::sensor::{MemberClock, PerfClock};
use super::stops::Stops;
use crate::charge::MemberCharge;
use rtbox_linux::perf::SwitchWatch;

/// How long a member the loop thawed counts as ready without being seen running. A thaw wakes
/// the thread at once, but on an idle vCPU the wake-up waits until the host runs that vCPU
/// (measured up to ~1 ms here), and /proc shows the thread sleeping meanwhile; taken as
/// blocked, it then ran unseen until the next poll: one period 933-958 us over Q.
pub(super) const THAW_GRACE: Nanos = 2_000_000;

/// How often a blocked member's charge is reconciled with the kernel's accounting.
const PAIR_EVERY: Nanos = 20_000_000;

/// Perf sensor: how many members last seen asleep, whose clocks have not moved since (or
/// watched and not switched in since), a step reads from `/proc/<tid>/stat`, in turn. A
/// sleeper that wakes runs, and its clock or its watch shows it at once, unless a higher band
/// holds its CPU: only then is it seen late, at its turn. The read of every member was most of
/// the perf loop's CPU with sleeping members (`do_task_stat`, 56 % of the daemon's samples with
/// 200 sleepers), and the loop, above every member, took the box's busy member's share; 16 a
/// step were still a fifth of it with 500 (issue 14).
const ASLEEP_READS: usize = 2;

/// The stat reads of sleepers left in this step, and where the next step's turn begins.
#[derive(Debug)]
struct AsleepReads {
    left: usize,
    last: Option<i32>,
}

impl AsleepReads {
    fn new(left: usize) -> Self {
        AsleepReads { left, last: None }
    }

    /// Whether sleeper `tid` is read now (and counts it).
    fn take(&mut self, tid: i32) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        self.last = Some(tid);
        true
    }
}

/// What one step's charge carries from member to member.
struct Visit<'a> {
    /// Set when a member's stat shows a policy it set itself.
    own_change: &'a mut bool,
    asleep: AsleepReads,
    /// The perf loop's watch of sleeping members' switches.
    watch: Option<&'a SwitchWatch>,
    /// Stopped members whose server ran more than [`ESCAPE`] over its budget: their stop
    /// group is looked at ([`Members::check_stop_groups`]).
    escaped: &'a mut Vec<i32>,
}

/// How far a stopped member's server may run over its budget before the member's stop group
/// is looked at. A freeze takes hold within microseconds (the freezer kicks a running thread
/// out of user space; overrun per period p99 4-11 us, worst 6-28 us here); more means the
/// stop did not hold: another program moved the thread out of its group (a process moved to
/// another v2 cgroup takes its threads along, thawed). Looked at once per stop: a host stall
/// that overran the server costs one read.
pub const ESCAPE: Nanos = 2_000_000;

/// How often the /proc membership scan runs when the BPF sensor's events cover membership
/// ([`Members::scan`]; sooner when the sensor lost events).
pub const PROC_SCAN: Nanos = 10_000_000_000;

/// A thread under rtbox's control.
#[derive(Debug)]
pub struct Member {
    pub pid: i32,
    pub box_name: String,
    pub task: TaskId,
    /// Its CPU clock: perf task clock, or its figures in the BPF sensor.
    pub clock: Option<MemberClock>,
    /// Its perf clock readings turned into charges, less steal found off CPU.
    pub charge: MemberCharge,
    /// Its schedstat kept open: the kernel's CPU time, read when it is off CPU.
    schedstat: Option<procfs::SchedstatFile>,
    /// When the last (perf, kernel) pair was taken; whether one was taken in this freeze.
    paired_at: Nanos,
    paired_frozen: bool,
    /// When the loop thawed it, until it is seen running (see [`THAW_GRACE`]).
    pub(super) thawed_at: Option<Nanos>,
    /// CLOCK_MONOTONIC just before the loop's last thaw of it, read under the backstop's lock
    /// (0: never): a quiet stop stamped earlier was undone by that thaw
    /// (`Runtime::replay_quiet_stops`).
    pub(super) thawed_mono: u64,
    /// Just before the loop's last thaw: its wake-up count (BPF sensor) or how often it was
    /// switched in (perf, from schedstat). The thaw has taken effect once it grew
    /// (`sensor::thaw_taken`, [`Member::perf_thaw_taken`]).
    pub(super) thaw_mark: Option<u64>,
    /// Frozen by the loop while it slept (its server spent): it does not count as ready for
    /// being frozen. A freeze wakes a sleeping thread into the freezer, where it stays until
    /// thawed; counted as ready, dozens of sleeping members took the places of a busy member
    /// of a global box (perf sensor: it got 0.003 of its 0.4 with 50 sleepers).
    pub(super) frozen_asleep: bool,
    /// Original RT priority (0 for normal threads): the box keeps their relative order.
    pub local_prio: u32,
    /// The server charged for its CPU time until the next decision.
    pub charge_to: Option<ServerId>,
    /// Its last vCPU: charged for what runs after a throttle until the stop takes effect.
    pub last_server: Option<ServerId>,
    pub applied: Option<Applied>,
    pub ready: bool,
    /// Its stat file kept open (state polled without reopening).
    stat: Option<procfs::StatFile>,
    /// Its own (policy, RT priority) as the last stat read showed them.
    pub own_policy: Option<(u32, u32)>,
    /// A local priority it set itself just before its first placement wrote the band over
    /// it (seen by the read right before that write): the next step ranks it so.
    pending_rank: Option<u32>,
    /// Its own (policy, RT priority) as last recorded before its first placement (at its join,
    /// then at each own change seen before it): what an own change is told by until rtbox
    /// sets its policy ([`localprio::own_change`]).
    joined_policy: (u32, u32),
    /// Its freeze group's `cgroup.freeze`, opened at the first stop and kept.
    pub freeze: Option<Arc<std::fs::File>>,
    /// Its stop group was looked at during this stop (see [`ESCAPE`]).
    escape_looked: bool,
    /// It took its leader's tid by an exec that the proc connector has not reported yet: an
    /// exit of that tid reported before it is the old leader's, not this member's.
    exec_pending: bool,
    pub snapshot: ThreadSnapshot,
    /// Its [`MemberClock::idle_mark`] at the last look at its policy and affinity
    /// ([`Members::correct_drift`]) and at the last /proc membership scan ([`Members::scan`]).
    drift_mark: Option<u64>,
    proc_mark: Option<u64>,
}

impl Member {
    /// Reads the kernel's CPU time between two perf reads; if the perf clock did not move, the
    /// member was off CPU throughout and the pair is exact: returns the steal found with it.
    fn take_pair(&mut self, perf: u64) -> Option<u64> {
        let kernel = self.kernel_time_if_still(perf)?;
        Some(self.charge.reconcile(perf, kernel))
    }

    /// The kernel's CPU time if the member is verifiably off CPU now (see [`Member::take_pair`]).
    pub fn kernel_time_off_cpu(&mut self) -> Option<u64> {
        let perf = self.clock.as_ref()?.read().ok()?;
        self.kernel_time_if_still(perf)
    }

    /// The kernel's CPU time, if the perf clock still reads `perf` after it was read: the
    /// member did not run around the read, so the (tick-updated) kernel figure is exact.
    fn kernel_time_if_still(&mut self, perf: u64) -> Option<u64> {
        let kernel = self.schedstat.as_mut()?.sum_exec_runtime()?;
        (self.clock.as_ref()?.read().ok()? == perf).then_some(kernel)
    }

    pub fn frozen(&self) -> bool {
        self.applied.as_ref().is_some_and(|a| a.frozen)
    }

    /// Perf clock: whether the loop's last thaw has taken effect, the member switched in since
    /// (the rule of `sensor::thaw_taken`: growth of its clock may be a run between an earlier
    /// thaw and a backstop freeze). Without schedstat, any growth counts, as before.
    fn perf_thaw_taken(&mut self) -> bool {
        match (
            self.thaw_mark,
            self.schedstat.as_mut().and_then(|s| s.switch_ins()),
        ) {
            (Some(before), Some(now)) => now > before,
            _ => true,
        }
    }

    /// Not ready, and placed once (running state on some CPUs, not frozen): with the BPF
    /// sensor such a member is left as it is while it sleeps (`Runtime::decide`). One whose
    /// drift the scan found has no CPUs (`correct_drift`) and is put back, asleep or not.
    pub fn placed_asleep(&self) -> bool {
        !self.ready
            && self
                .applied
                .as_ref()
                .is_some_and(|a| !a.frozen && !a.cpus.is_empty())
    }

    /// Its [`MemberClock::idle_mark`] now (`None`: no clock, or it may have run). With perf,
    /// its clock's last reading while the loop last saw it not ready: a sleeper's reading
    /// moves only when it runs. (The drift check read two system calls per member every 4 ms
    /// with perf, a sixth of the loop's CPU with 500 sleeping members.)
    fn idle_mark(&self) -> Option<u64> {
        match &self.clock {
            Some(MemberClock::Perf(_)) => (!self.ready).then_some(self.charge.last()),
            Some(c) => c.idle_mark(),
            None => None,
        }
    }

    /// Not placed yet: the local priority of a policy it set itself since its join's record
    /// (which then follows it), if it did ([`localprio::own_change`]).
    fn changed_since_join(&mut self, tid: i32) -> Option<u32> {
        let x = sched::get_attr(tid)
            .ok()
            .filter(|x| localprio::own_policy(x) != self.joined_policy)?;
        self.joined_policy = localprio::own_policy(&x);
        Some(localprio::local_priority(&x))
    }

    /// Its new local priority `p` (it set its own): the core ranks its task by it, and a ready
    /// member's EDF key follows at once. `when`: when the change was seen, for the log.
    fn rerank(&mut self, tid: i32, sched: &mut Scheduler, now: Nanos, p: u32, when: &'static str) {
        tracing::debug!(
            tid,
            local_prio = p,
            when,
            "member set its own priority; ranked by it"
        );
        if sched.set_priority(now, self.task, p).is_ok() {
            self.local_prio = p;
            if self.ready {
                let _ = sched.wake(now, self.task, localprio::native_edf_key(p));
            }
        }
    }

    /// Frozen while it wanted to run: a frozen thread reads as sleeping but counts as ready,
    /// unless the loop froze it asleep ([`Member::frozen_asleep`]).
    pub fn frozen_ready(&self) -> bool {
        self.frozen() && !self.frozen_asleep
    }

    /// Whether it should count as runnable now: frozen (a frozen thread reads as sleeping but
    /// wants to run), thawed but not yet seen running (its wake-up may still wait on its idle
    /// vCPU while /proc shows it sleeping), or runnable by /proc. `ran`: its clock moved since
    /// the last look (or it has none). Not read: one frozen asleep (it cannot wake before its
    /// thaw), and one last seen asleep that has not run since, when `asleep` has no read left.
    fn runnable(&mut self, tid: i32, now: Nanos, ran: bool, asleep: &mut AsleepReads) -> bool {
        let thawing = self
            .thawed_at
            .is_some_and(|t| now.saturating_sub(t) < THAW_GRACE);
        if self.frozen_ready() || thawing {
            return true;
        }
        if self.frozen() || (!ran && !self.ready && !asleep.take(tid)) {
            return false;
        }
        self.stat_runnable(tid)
    }

    /// Runnable by its `/proc/<tid>/stat` (read now; its own policy noted).
    fn stat_runnable(&mut self, tid: i32) -> bool {
        match self.stat.as_mut() {
            Some(f) => f.sample().is_some_and(|s| {
                self.own_policy = s.policy;
                s.runnable()
            }),
            None => procfs::stat(tid).map(|s| s.runnable()).unwrap_or(false),
        }
    }

    /// Its perf clock and switch watch (`None` with BPF or without a clock).
    pub fn perf(&self) -> Option<&Arc<PerfClock>> {
        match &self.clock {
            Some(MemberClock::Perf(c)) => Some(c),
            _ => None,
        }
    }

    /// Perf: watched while it sleeps ([`PerfClock`]); with BPF, never.
    pub fn watched(&self) -> bool {
        self.perf().is_some_and(|c| c.watched())
    }
}

/// Charges one member's measured CPU time to its server and tells the core whether it is
/// runnable (see [`Members::charge`]); `own_change` is set when its stat shows a policy it
/// set itself. Off CPU (frozen, or blocked when last seen) a perf member's (perf, kernel) pair
/// is taken once per freeze, and at most every [`PAIR_EVERY`] while blocked, to find host steal.
fn charge_one(
    tid: i32,
    m: &mut Member,
    sched: &mut Scheduler,
    now: Nanos,
    mono: u64,
    visit: &mut Visit<'_>,
) {
    let stopped = m.frozen();
    charge_member(tid, m, sched, now, mono, visit);
    if !(stopped && m.frozen()) {
        m.escape_looked = false;
    } else if !m.escape_looked {
        let overrun = m
            .charge_to
            .or(m.last_server)
            .is_some_and(|s| sched.server(s).runtime < -(ESCAPE as i64));
        if overrun {
            m.escape_looked = true;
            visit.escaped.push(tid);
        }
    }
}

fn charge_member(
    tid: i32,
    m: &mut Member,
    sched: &mut Scheduler,
    now: Nanos,
    mono: u64,
    visit: &mut Visit<'_>,
) {
    if let Some(MemberClock::Bpf(r)) = &m.clock {
        let reading = r.read(mono);
        super::sensor::charge_bpf(m, reading, sched, now);
        return;
    }
    // Perf: a watched member that has not run since its watch was armed reads as charged and
    // is still asleep, unless it woke and waits for its CPU, which only its turn at a stat read
    // finds. No read, no decision to change.
    if let (Some(w), Some(c)) = (visit.watch, m.perf().filter(|c| c.watched()).cloned()) {
        let woke = c.ran() || (visit.asleep.take(tid) && m.stat_runnable(tid));
        if !woke {
            return;
        }
        c.unwatch(w);
    }
    let frozen = m.frozen();
    let mut ran = true;
    if let Some(v) = m.clock.as_ref().and_then(|c| c.read().ok()) {
        let d = m.charge.advance(v);
        ran = d > 0;
        if d > 0 {
            if m.thawed_at.is_some() && m.perf_thaw_taken() {
                m.thawed_at = None;
            }
            if let Some(s) = m.charge_to {
                let _ = sched.charge(now, s, d);
            }
        }
        let due = if frozen {
            !m.paired_frozen
        } else {
            !m.ready && now.saturating_sub(m.paired_at) >= PAIR_EVERY
        };
        // A member that has not run since its last pair would give the same pair: no read.
        if due && m.charge.paired_perf() == Some(v) {
            m.paired_at = now;
            m.paired_frozen = frozen;
        } else if due {
            if let Some(steal) = m.take_pair(v) {
                m.paired_at = now;
                m.paired_frozen = frozen;
                // Refund only where it cannot lift a period above Q: to the server that
                // throttled the member (its budget is then the next period's, untouched, and
                // the refund stops at Q). A member that blocked by itself keeps the charge:
                // its server may be mid-period.
                if let Some(s) = m.charge_to.or(m.last_server) {
                    if frozen && steal > 0 && sched.server(s).throttled {
                        // The refund also lowers the server's consumed count, so the period it
                        // falls in is measured net of the steal (the kernel's view).
                        let _ = sched.refund(s, steal);
                    }
                }
            }
        }
    }
    if !frozen {
        m.paired_frozen = false;
    }
    let ready = m.runnable(tid, now, ran, &mut visit.asleep);
    *visit.own_change |= localprio::own_change(m.own_policy, m.applied.as_ref(), m.joined_policy);
    set_ready(m, sched, now, ready);
    // Asleep, placed and not frozen: watched from now until it runs.
    if !m.ready && !m.frozen() && m.applied.is_some() {
        if let (Some(c), Some(w)) = (m.perf(), visit.watch) {
            c.watch(w, m.charge.last());
        }
    }
}

/// Tells the core a perf member's readiness when it changed.
fn set_ready(m: &mut Member, sched: &mut Scheduler, now: Nanos, ready: bool) {
    if ready != m.ready {
        m.ready = ready;
        let _ = if ready {
            sched.wake(now, m.task, localprio::native_edf_key(m.local_prio))
        } else {
            sched.block(now, m.task)
        };
    }
}

/// What a box is attached to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Pid(i32),
    /// A cgroup directory (v1 or v2); its threads join.
    Cgroup(PathBuf),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Pid(p) => write!(f, "process {p}"),
            Target::Cgroup(d) => write!(f, "cgroup {}", d.display()),
        }
    }
}

#[derive(Debug, Clone)]
struct Attachment {
    box_name: String,
    target: Target,
}

/// The targets attached to boxes, and how many of them are cgroups: asked at every scan (250
/// times a second), which with 500 attached processes walked the list each time.
#[derive(Debug, Default)]
struct Attachments {
    list: Vec<Attachment>,
    cgroups: usize,
}

impl Attachments {
    fn push(&mut self, a: Attachment) {
        self.cgroups += usize::from(matches!(a.target, Target::Cgroup(_)));
        self.list.push(a);
    }

    fn retain(&mut self, keep: impl FnMut(&Attachment) -> bool) {
        self.list.retain(keep);
        self.cgroups = self
            .list
            .iter()
            .filter(|a| matches!(a.target, Target::Cgroup(_)))
            .count();
    }

    fn clear(&mut self) {
        self.retain(|_| false);
    }

    fn iter(&self) -> std::slice::Iter<'_, Attachment> {
        self.list.iter()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// Rule: a member whose idle mark `now` equals the one taken `then` ([`MemberClock::idle_mark`]:
/// blocked throughout, not switched since) did nothing that a look at it could find: it forked
/// no thread or process, did not exit, and set no policy or affinity of its own; one another
/// process changed has not run with the change yet. Looking at it again can wait until it
/// runs, and 500 sleeping members no longer cost the loop two system calls each every second
/// and three /proc reads each every ten.
fn idle_since(now: Option<u64>, then: Option<u64>) -> bool {
    now.is_some() && now == then
}

/// Registers a member's task with the core: in its box, or (should the core refuse that) as a
/// background task, so the member is still tracked and released.
pub fn register(sched: &mut Scheduler, tid: i32, box_name: &str, prio: u32) -> TaskId {
    let p = TaskParams {
        box_name: Some(box_name.to_string()),
        ..TaskParams::background(format!("t{tid}"), prio)
    };
    match sched.add_task(p) {
        Ok(t) => t,
        Err(_) => sched
            .add_task(TaskParams::background(format!("t{tid}"), prio))
            .expect("background task"),
    }
}

/// The threads of an attach target now.
fn target_threads(target: &Target) -> Result<Vec<i32>, RuntimeError> {
    match target {
        Target::Pid(pid) => Ok(procfs::threads_of(*pid)?),
        // The whole subtree: members stay inside it (in their stop groups).
        Target::Cgroup(dir) => Ok(cgroup::subtree_threads(dir)?),
    }
}

/// When the membership scans ran.
#[derive(Debug, Default)]
struct ScanClock {
    last_scan: Nanos,
    /// When the last full scan ran (with process events, the frequent scan only looks at
    /// attached cgroups).
    last_full_scan: Nanos,
    /// Process events were lost: the next step scans everything.
    force_full: bool,
    /// When drift was last looked for in every member, idle ones too (`Members::correct_drift`).
    last_drift_sweep: Option<Nanos>,
}

/// The members and everything that records or finds them.
pub struct Members {
    pub layout: Layout,
    pub by_tid: BTreeMap<i32, Member>,
    /// Member processes and their boxes.
    procs: BTreeMap<i32, String>,
    attachments: Attachments,
    journal: Journal,
    jstate: JournalState,
    /// Every pid seen by the last /proc scan (the fallback finds new children by it).
    seen_pids: BTreeSet<i32>,
    /// The sensor's lost-event count at the last /proc membership scan, and that scan's time
    /// (see [`Members::scan`]).
    proc_scan: Option<(u64, Nanos)>,
    /// Forks and exits from the kernel's proc connector; `None` where it is unavailable (then
    /// every scan is a full /proc scan).
    events: Option<ProcEvents>,
    scans: ScanClock,
    /// How each member is stopped: its own stop group inside its cgroup, or SCHED_IDLE.
    pub stops: Stops,
    /// RT runtime given to members' v1 cpu cgroups that had none.
    rt: RtGrants,
    /// Members joined, or changed their own policy or affinity, since the last step: they run
    /// unmanaged until a step places them, so the loop steps again at once.
    pub unplaced: bool,
    /// The BPF sensor, when the loop uses it (`runtime/sensor.rs`).
    pub sensor: Option<Arc<rtbox_bpf::Sensor>>,
    /// A member's stat showed a policy other than the one rtbox set (see
    /// [`localprio::own_change`]): the step corrects drift at once instead of at the next scan.
    pub own_change: bool,
    /// Joins and departures so far: the host scan's copy of the member set is renewed when
    /// this moves (`HostState::share_members`).
    pub changes: u64,
    /// Members at rest and the others (BPF sensor): whom the step visits (`rest.rs`).
    pub rest: Rest,
    /// Perf sensor: the tid from which the next step's stat reads of sleepers go in turn
    /// ([`ASLEEP_READS`]).
    asleep_turn: i32,
    /// Perf sensor: the watch of sleeping members' switches (`PerfClock`), where the kernel
    /// gives per-thread switch records; the loop sleeps on it too.
    pub switch_watch: Option<SwitchWatch>,
    /// The watch woke the loop (a watched member ran): the step looks at every resting one.
    pub watch_woke: bool,
    /// Stopped members whose server overran (see [`ESCAPE`]), looked at after the step's
    /// charge.
    escaped: Vec<i32>,
}

impl Members {
    pub fn new(layout: Layout, journal: Journal, events: Option<ProcEvents>) -> Self {
        Members {
            jstate: JournalState::new(layout.clone()),
            layout,
            by_tid: BTreeMap::new(),
            procs: BTreeMap::new(),
            attachments: Attachments::default(),
            journal,
            seen_pids: BTreeSet::new(),
            proc_scan: None,
            events,
            scans: ScanClock::default(),
            stops: Stops::default(),
            rt: RtGrants::default(),
            unplaced: false,
            sensor: None,
            own_change: false,
            changes: 0,
            rest: Rest::default(),
            asleep_turn: 0,
            switch_watch: None,
            watch_woke: false,
            escaped: Vec::new(),
        }
    }

    /// Writes the (empty) journal: from here a crash leaves a record.
    pub fn save_journal(&self) -> Result<(), LinuxError> {
        self.journal.save(&self.jstate)
    }

    pub fn tids_of(&self, box_name: &str) -> Vec<i32> {
        self.by_tid
            .iter()
            .filter(|(_, m)| m.box_name == box_name)
            .map(|(t, _)| *t)
            .collect()
    }

    /// The cgroup directories attached to boxes.
    pub fn attached_cgroups(&self) -> Vec<PathBuf> {
        self.attachments
            .iter()
            .filter_map(|a| match &a.target {
                Target::Cgroup(d) => Some(d.clone()),
                Target::Pid(_) => None,
            })
            .collect()
    }

    /// Records that the backstop froze these members.
    pub fn mark_frozen(&mut self, tids: &[i32]) {
        for tid in tids {
            if let Some(m) = self.by_tid.get_mut(tid) {
                self.rest.stir(*tid, &m.box_name);
                if let Some(a) = m.applied.as_mut() {
                    a.frozen = true;
                    // The backstop stops members that ran.
                    m.frozen_asleep = false;
                }
            }
        }
    }

    // ---- attach and detach -------------------------------------------------------------------

    /// Attach a process (all its threads, and later its children) or a cgroup to a box (which
    /// the caller checked exists).
    pub fn attach(
        &mut self,
        sched: &mut Scheduler,
        box_name: &str,
        target: Target,
    ) -> Result<usize, RuntimeError> {
        if let Some(a) = self.attachments.iter().find(|a| a.target == target) {
            return Err(RuntimeError::AlreadyAttached {
                target,
                box_name: a.box_name.clone(),
            });
        }
        let tids = target_threads(&target)?;
        if let Target::Pid(pid) = target {
            if pid as u32 == std::process::id() {
                return Err(RuntimeError::AttachSelf);
            }
            if procfs::stat(pid).is_ok_and(|s| s.kernel_thread()) {
                return Err(RuntimeError::KernelThread { pid });
            }
        }
        let mut n = self.add_threads(sched, box_name, &tids);
        // Threads made while the first list was taken and registered had no member parent the
        // sensor knew, so no fork event: read the list again until it holds no stranger (seen:
        // a worker's last thread, made during its process's attach, ran outside its box for a
        // second until the next scan, and its plug-in group was built again mid-run).
        for _ in 0..3 {
            let Ok(again) = target_threads(&target) else {
                break;
            };
            let strangers: Vec<i32> = again
                .into_iter()
                .filter(|t| !self.by_tid.contains_key(t))
                .collect();
            if strangers.is_empty() {
                break;
            }
            n += self.add_threads(sched, box_name, &strangers);
        }
        self.attachments.push(Attachment {
            box_name: box_name.to_string(),
            target,
        });
        Ok(n)
    }

    /// The members to release for a detach of a pid, a cgroup or a whole box; the attachment
    /// is dropped.
    pub fn detach_targets(
        &mut self,
        pid: Option<i32>,
        cgroup: Option<PathBuf>,
        box_name: Option<&str>,
    ) -> Result<Vec<i32>, RuntimeError> {
        Ok(match (pid, cgroup, box_name) {
            (Some(pid), None, None) => {
                self.attachments.retain(|a| a.target != Target::Pid(pid));
                self.by_tid
                    .iter()
                    .filter(|(_, m)| m.pid == pid)
                    .map(|(t, _)| *t)
                    .collect()
            }
            (None, Some(dir), None) => {
                let target = Target::Cgroup(dir);
                if !self.attachments.iter().any(|a| a.target == target) {
                    return Err(RuntimeError::NotAttached { target });
                }
                self.attachments.retain(|a| a.target != target);
                let tids = target_threads(&target).unwrap_or_default();
                tids.into_iter()
                    .filter(|t| self.by_tid.contains_key(t))
                    .collect()
            }
            (None, None, Some(b)) => {
                self.attachments.retain(|a| a.box_name != b);
                self.tids_of(b)
            }
            _ => return Err(RuntimeError::DetachWhat),
        })
    }

    /// Take threads under control: journal first, then change them.
    pub fn add_threads(&mut self, sched: &mut Scheduler, box_name: &str, tids: &[i32]) -> usize {
        self.rest.stale();
        let mut fresh = Vec::new();
        let mut renamed = 0;
        for &tid in tids {
            // Kernel threads (in an attached cgroup) cannot be stopped: not taken.
            if self.by_tid.contains_key(&tid) || procfs::stat(tid).is_ok_and(|s| s.kernel_thread())
            {
                continue;
            }
            match ThreadSnapshot::capture(tid) {
                Ok(s) => match self.replaced_by_exec(&s) {
                    Some(old) => renamed += usize::from(self.rename(old, tid)),
                    // A member is charged through its clock: one without is not taken (it
                    // would run at its box's band, charged nothing), and stays as it is.
                    None => match MemberClock::open(
                        tid,
                        self.sensor.as_ref(),
                        self.switch_watch.is_some(),
                    ) {
                        Ok(c) => fresh.push((s, c)),
                        Err(e) => {
                            tracing::warn!(tid, box_name, error = %e, "thread not taken: its CPU clock cannot be opened")
                        }
                    },
                },
                Err(e) if e.is_gone() => {}
                Err(e) => tracing::warn!(tid, error = %e, "attach: cannot record thread"),
            }
        }
        if fresh.is_empty() {
            return renamed;
        }
        let mut new_pids = Vec::new();
        let want = rtgrants::want_us(sched, box_name);
        let granted: BTreeSet<String> = self.jstate.rt_grants.keys().cloned().collect();
        for (s, _) in &fresh {
            if !self.jstate.processes.contains_key(&s.pid) && !self.procs.contains_key(&s.pid) {
                // Processes are never moved: only their threads, inside their own cgroups.
                self.jstate.processes.insert(
                    s.pid,
                    ProcessEntry {
                        v2_original: None,
                        freeze_group: false,
                    },
                );
                new_pids.push(s.pid);
            }
            self.jstate.threads.insert(s.tid, s.clone());
            self.stops.plan(&self.layout, s, &mut self.jstate.groups);
            self.rt
                .plan(&self.layout, s, want, &mut self.jstate.rt_grants);
        }
        let new_grants: Vec<String> = self
            .jstate
            .rt_grants
            .keys()
            .filter(|k| !granted.contains(*k))
            .cloned()
            .collect();
        if let Err(e) = self.journal.save(&self.jstate) {
            tracing::warn!(error = %e, threads = fresh.len(), "journal not written; not attaching");
            for g in &new_grants {
                self.jstate.rt_grants.remove(g);
            }
            for (s, _) in &fresh {
                self.jstate.threads.remove(&s.tid);
                self.jstate.groups.remove(&s.tid);
                self.rt
                    .release(&self.layout, s.tid, &mut self.jstate.rt_grants);
            }
            return 0;
        }
        for pid in new_pids {
            self.procs.insert(pid, box_name.to_string());
        }
        self.rt
            .apply(&self.layout, &new_grants, &mut self.jstate.rt_grants);
        let n = fresh.len();
        self.unplaced = true;
        for (s, clock) in fresh {
            let tid = s.tid;
            self.stops.make(&self.layout, tid, &mut self.jstate.groups);
            let local_prio = localprio::local_priority(&s.attr);
            let task = register(sched, tid, box_name, local_prio);
            let clock = Some(clock);
            let charge = MemberCharge::new(clock.as_ref().and_then(|c| c.read().ok()).unwrap_or(0));
            tracing::debug!(tid, pid = s.pid, box_name, "member joined");
            self.changes += 1;
            self.by_tid.insert(
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
                    thawed_mono: 0,
                    thaw_mark: None,
                    frozen_asleep: false,
                    local_prio,
                    charge_to: None,
                    last_server: None,
                    applied: None,
                    ready: false,
                    stat: procfs::StatFile::open(tid).ok(),
                    own_policy: None,
                    pending_rank: None,
                    drift_mark: None,
                    proc_mark: None,
                    joined_policy: localprio::own_policy(&s.attr),
                    freeze: None,
                    escape_looked: false,
                    exec_pending: false,
                    snapshot: s,
                },
            );
        }
        n
    }

    /// Give a thread back its original state and forget it. The caller withdrew the backstop's
    /// plans first (no backstop may stop it once thawed).
    pub fn release(&mut self, sched: &mut Scheduler, now: Nanos, tid: i32) {
        let Some(m) = self.by_tid.remove(&tid) else {
            return;
        };
        self.changes += 1;
        self.rest.stale();
        self.unwatch(&m);
        let _ = sched.block(now, m.task);
        if let Some(dir) = self.stops.dir(tid) {
            let _ = rtbox_linux::stopgroup::freeze(dir, false);
        }
        if let Err(e) = m.snapshot.restore(&self.layout) {
            tracing::warn!(tid, error = %e, "cannot restore thread");
        }
        self.stops
            .release(&self.layout, tid, &mut self.jstate.groups);
        self.rt
            .release(&self.layout, tid, &mut self.jstate.rt_grants);
        self.jstate.threads.remove(&tid);
        if let Err(e) = self.journal.save(&self.jstate) {
            tracing::warn!(error = %e, "journal not written");
        }
    }

    /// A member leaving: its switches no longer wake the loop.
    fn unwatch(&self, m: &Member) {
        if let (Some(c), Some(w)) = (m.perf(), &self.switch_watch) {
            c.unwatch(w);
        }
    }

    /// Drops an exited member (no restore: the thread is gone) and its journal entry.
    pub fn forget_exited(&mut self, sched: &mut Scheduler, now: Nanos, tid: i32) {
        if let Some(m) = self.by_tid.remove(&tid) {
            self.changes += 1;
            self.rest.stale();
            self.unwatch(&m);
            let _ = sched.block(now, m.task);
            self.jstate.threads.remove(&tid);
            // Its empty stop group goes now, or at a later scan while the kernel still
            // links the exiting thread to it.
            self.stops
                .release(&self.layout, tid, &mut self.jstate.groups);
            self.rt
                .release(&self.layout, tid, &mut self.jstate.rt_grants);
        }
    }

    /// Member `old`, a thread other than its process's leader, called exec. The kernel ended
    /// every other thread of the process and gave it the leader's tid, `new` (`de_thread`,
    /// fs/exec.c); it kept its scheduling policy, affinity and cgroups. So the member goes on
    /// under `new` ([`Members::rename`]); the old leader's member, if still on record, has
    /// exited.
    /// `reported`: called for the exec's own report (the sensor's, or the proc connector's);
    /// else a scan found it first, and the proc connector may still report the old leader's
    /// exit under `new` ([`Member::exec_pending`]).
    pub fn exec_replaced(
        &mut self,
        sched: &mut Scheduler,
        now: Nanos,
        old: i32,
        new: i32,
        reported: bool,
    ) {
        if old != new && self.by_tid.contains_key(&old) {
            self.forget_exited(sched, now, new);
            if !self.rename(old, new) {
                // Gone too by now.
                self.forget_exited(sched, now, old);
            }
        }
        if reported {
            if let Some(m) = self.by_tid.get_mut(&new) {
                m.exec_pending = false;
            }
        }
    }

    /// Member `old` goes on as thread `new`, not yet a member (see [`Members::exec_replaced`]):
    /// with its original state (from before it joined: not the leader's, and not the band
    /// rtbox gave it, which it carries across the exec), its stop group, its grants and its
    /// charges. Taken as a new thread instead, it was recorded with rtbox's band as its
    /// original state and left at SCHED_FIFO when it left; with the BPF sensor it was not found
    /// at all, and stayed frozen under a clock that no switch moved. False if `new` is gone.
    fn rename(&mut self, old: i32, new: i32) -> bool {
        debug_assert!(
            !self.by_tid.contains_key(&new),
            "thread {new} is a member already"
        );
        let Ok(st) = procfs::stat(new) else {
            return false;
        };
        let Some(mut m) = self.by_tid.remove(&old) else {
            return false;
        };
        tracing::debug!(
            old,
            new,
            pid = m.pid,
            "member called exec: it now has its leader's tid"
        );
        self.changes += 1;
        self.rest.stale();
        self.unplaced = true;
        m.snapshot.tid = new;
        m.snapshot.starttime = st.starttime;
        m.exec_pending = true;
        m.stat = procfs::StatFile::open(new).ok();
        m.schedstat = procfs::SchedstatFile::open(new).ok();
        if let Some(c) = m.clock.take() {
            m.clock = match c.renamed(new, self.sensor.as_ref()) {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::warn!(tid = new, error = %e, "member clock unavailable");
                    None
                }
            };
        }
        self.stops
            .rename(&self.layout, old, new, &mut self.jstate.groups);
        self.rt.rename(old, new);
        self.jstate.threads.remove(&old);
        self.jstate.threads.insert(new, m.snapshot.clone());
        self.by_tid.insert(new, m);
        if let Err(e) = self.journal.save(&self.jstate) {
            tracing::warn!(error = %e, "journal not written");
        }
        true
    }

    /// The member that thread `s`, found new, replaced by an exec ([`Members::rename`]): it is
    /// its process's leader by tid, sits in the stop group of a member of its process (a
    /// thread keeps its cgroups across an exec) and that member's thread is gone. A thread or
    /// process forked by a member also starts in the member's group, but is not its process's
    /// leader, or is another process.
    fn replaced_by_exec(&self, s: &ThreadSnapshot) -> Option<i32> {
        if s.tid != s.pid {
            return None;
        }
        let owner = self.group_owner_in(s.pid, s.cgroups.v2.as_deref())?;
        (!self.by_tid[&owner].snapshot.alive()).then_some(owner)
    }

    /// The member of process `pid`, other than its leader, whose stop group the v2 cgroup
    /// `v2` (the leader tid's) is: a thread that took the leader's tid by an exec keeps its
    /// cgroups, its own stop group among them.
    fn group_owner_in(&self, pid: i32, v2: Option<&str>) -> Option<i32> {
        let owner = v2.and_then(rtbox_linux::stopgroup::owner_of)?;
        let m = self.by_tid.get(&owner)?;
        (owner != pid && m.pid == pid).then_some(owner)
    }

    /// Processes without members leave their freeze group and the journal.
    pub fn release_empty_processes(&mut self) {
        self.stops
            .retry_removals(&self.layout, &mut self.jstate.groups);
        self.rt.retry(&self.layout, &mut self.jstate.rt_grants);
        let live: BTreeSet<i32> = self.by_tid.values().map(|m| m.pid).collect();
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
                // An exiting process may still be linked to its group: keep the entry and
                // retry at the next scan (or at shutdown / by the watchdog). Not logged: a
                // zombie not yet reaped would log every scan.
                if p.freeze_group
                    && cgroup::freeze_group_remove(&self.layout, pid, p.v2_original.as_deref())
                        .is_err()
                {
                    self.procs.remove(&pid);
                    continue;
                }
            }
            self.jstate.processes.remove(&pid);
            changed = true;
            self.procs.remove(&pid);
            self.attachments.retain(|a| a.target != Target::Pid(pid));
        }
        if changed {
            if let Err(e) = self.journal.save(&self.jstate) {
                tracing::warn!(error = %e, "journal not written");
            }
        }
    }

    /// Every member left; restore what the journal still holds and clear it.
    pub fn finish(&mut self) {
        self.attachments.clear();
        self.release_empty_processes();
        // Also removes `<v2>/rtbox` and sweeps orphaned stop groups (`remove_rtbox_root`).
        let rep = self.jstate.restore_all();
        for e in &rep.errors {
            tracing::warn!(error = %e, "shutdown: restore failed");
        }
        let _ = self.journal.clear();
    }

    /// After a box change: members of boxes that no longer exist are returned (to release);
    /// attachments and processes of such boxes are dropped.
    pub fn orphans(&mut self, system: &System) -> Vec<i32> {
        self.attachments
            .retain(|a| system.get(&a.box_name).is_some());
        self.by_tid
            .iter()
            .filter(|(_, m)| system.get(&m.box_name).is_none())
            .map(|(t, _)| *t)
            .collect()
    }

    /// After a box change: each member's servers by the core's old -> new map (`None` for a
    /// server that is gone: the next decision picks another).
    pub fn remap(&mut self, map: &dyn Fn(ServerId) -> Option<ServerId>) {
        self.rest.stale();
        for m in self.by_tid.values_mut() {
            m.charge_to = m.charge_to.and_then(map);
            m.last_server = m.last_server.and_then(map);
        }
    }

    /// Drops member processes of boxes the system no longer has.
    pub fn drop_processes_outside(&mut self, system: &System) {
        self.procs.retain(|_, b| system.get(b).is_some());
        self.release_empty_processes();
    }

    // ---- charging -----------------------------------------------------------------------------

    /// Charges each member's measured CPU time to its server and tells the core which members
    /// are runnable. With the BPF sensor and a fresh rest table only the members not at rest
    /// and those whose figures the sensor marked are read (`rest.rs`); a resting member that
    /// became ready is visited by the rest of the step.
    pub fn charge(&mut self, sched: &mut Scheduler, now: Nanos) {
        // One clock reading for every member's figures: a reading per member was 7 % of the
        // loop's CPU with 500 members (issue 14, `perf record`).
        let mono = rtbox_bpf::now_ns();
        // The marks are taken at every step: a full visit reads everyone anyway.
        let dirty = self.sensor.as_ref().map(|s| s.take_dirty());
        if let Some(dirty) = dirty.filter(|_| !self.rest.is_stale()) {
            self.charge_visited(sched, now, mono, &dirty);
            return;
        }
        // Perf with its watch: the resting members to look at are those that may have run (all
        // of them, when the watch woke the loop: which one ran is in each one's ring), and a
        // few in turn for a stat read (a sleeper that woke but waits for its CPU).
        let woke = std::mem::take(&mut self.watch_woke);
        // A hung-up event (its thread exited, or an `execve` replaced it) keeps the watch
        // readable: off the watch, and visited as without it.
        if let Some(w) = self.switch_watch.as_ref().filter(|_| woke) {
            for tid in w.hung_up() {
                if let Some(m) = self.by_tid.get(&tid) {
                    if let Some(c) = m.perf() {
                        c.hang_up(w);
                    }
                    self.rest.stir(tid, &m.box_name);
                }
            }
        }
        if self.switch_watch.is_some() && !self.rest.is_stale() {
            let look: Vec<u32> = self
                .rest
                .resting_from(self.asleep_turn)
                .take(if woke { usize::MAX } else { ASLEEP_READS })
                .map(|t| t as u32)
                .collect();
            self.charge_visited(sched, now, mono, &look);
            return;
        }
        // Perf: the sleepers' reads go in turn from where the last step's ended.
        let mut visit = Visit {
            own_change: &mut self.own_change,
            asleep: AsleepReads::new(ASLEEP_READS),
            watch: self.switch_watch.as_ref(),
            escaped: &mut self.escaped,
        };
        let from = self.asleep_turn;
        for (tid, m) in self.by_tid.range_mut(from..) {
            charge_one(*tid, m, sched, now, mono, &mut visit);
        }
        for (tid, m) in self.by_tid.range_mut(..from) {
            charge_one(*tid, m, sched, now, mono, &mut visit);
        }
        if let Some(t) = visit.asleep.last {
            self.asleep_turn = t + 1;
        }
    }

    /// Charges `tids` alone at core time `at`: members the backstop froze at `at`, whose
    /// figures stopped there (`Runtime::replay_quiet_stops`).
    pub fn charge_these(&mut self, sched: &mut Scheduler, at: Nanos, tids: &[i32]) {
        let mono = rtbox_bpf::now_ns();
        let mut visit = Visit {
            own_change: &mut self.own_change,
            asleep: AsleepReads::new(usize::MAX),
            watch: self.switch_watch.as_ref(),
            escaped: &mut self.escaped,
        };
        for tid in tids {
            if let Some(m) = self.by_tid.get_mut(tid) {
                charge_one(*tid, m, sched, at, mono, &mut visit);
            }
        }
    }

    /// The charge with a fresh rest table: resting members the sensor marked (stirred when
    /// they became ready), then every active member.
    fn charge_visited(&mut self, sched: &mut Scheduler, now: Nanos, mono: u64, dirty: &[u32]) {
        // BPF: no stat reads to ration, no switches to watch. Perf: its resting members' stat
        // reads go in turn.
        let mut visit = Visit {
            own_change: &mut self.own_change,
            asleep: AsleepReads::new(if self.switch_watch.is_some() {
                ASLEEP_READS
            } else {
                usize::MAX
            }),
            watch: self.switch_watch.as_ref(),
            escaped: &mut self.escaped,
        };
        for &tid in dirty {
            let tid = tid as i32;
            let Some(m) = self.by_tid.get_mut(&tid) else {
                continue;
            };
            if !self.rest.is_resting(tid) {
                continue;
            }
            charge_one(tid, m, sched, now, mono, &mut visit);
            // Perf: one that ran and could not be watched again (it ran on meanwhile) is
            // visited until a step finds it asleep and watched.
            if m.ready || (visit.watch.is_some() && !m.watched()) {
                self.rest.stir(tid, &m.box_name);
            }
        }
        if let Some(t) = visit.asleep.last {
            self.asleep_turn = t + 1;
        }
        for tid in self.rest.active() {
            if let Some(m) = self.by_tid.get_mut(tid) {
                charge_one(*tid, m, sched, now, mono, &mut visit);
            }
        }
        #[cfg(debug_assertions)]
        self.check_resting_unchanged(mono);
    }

    /// After the daemon was stopped and continued (`Runtime::resume_after_stop`): every stop
    /// group thawed (the watchdog did it, unless the stop was shorter than its look), every
    /// charge restarted from the member's clock now, and every member's policy and CPUs looked
    /// at by the next step (`correct_drift`): the watchdog gave them back their own, or, after
    /// a short stop, left rtbox's. Not taken as unknown: a policy read against an unknown one
    /// is taken for the member's own choice, and rtbox's band would become its rank.
    pub fn take_back_after_stop(&mut self) {
        for (tid, m) in self.by_tid.iter_mut() {
            if let Some(dir) = self.stops.dir(*tid) {
                let _ = rtbox_linux::stopgroup::freeze(dir, false);
            }
            m.charge = MemberCharge::new(m.clock.as_ref().and_then(|c| c.read().ok()).unwrap_or(0));
            m.escape_looked = false;
            m.thawed_at = None;
            m.frozen_asleep = false;
            m.drift_mark = None;
            if let Some(a) = m.applied.as_mut() {
                a.frozen = false;
            }
        }
        self.changes += 1;
        self.unplaced = true;
        self.rest.stale();
    }

    /// Stopped members whose server overran wait for [`Members::check_stop_groups`].
    pub fn escaped(&self) -> bool {
        !self.escaped.is_empty()
    }

    /// Stopped members whose server overran (see [`ESCAPE`]): one that is no longer in its stop
    /// group, because another process moved it to another v2 cgroup, gets a new group inside
    /// that cgroup (the move was the other process's to make; rtbox follows it, as it leaves
    /// every cgroup choice to its owner), and is placed again at once. Without this the
    /// member ran free of its box: a hog moved out of a 0.2 box ran at its band, SCHED_FIFO 89,
    /// for 0.95 of its CPU until it left.
    pub fn check_stop_groups(&mut self) {
        for tid in std::mem::take(&mut self.escaped) {
            let Some(Stop::Freeze { group }) = self.stops.get(tid) else {
                continue;
            };
            let Ok(now) = cgroup::thread_cgroups(tid) else {
                continue;
            };
            if now.v2.as_deref() == Some(group.as_str()) {
                continue;
            }
            tracing::warn!(tid, group, now = ?now.v2, "member moved out of its stop group by another process; given a new one where it is now");
            self.rehome(tid, now);
        }
    }

    /// Member `tid` now sits in cgroups `now`, outside its stop group: the old group goes (its
    /// other threads, if any, back to its parent), a new one is made inside the member's new
    /// v2 cgroup, journal first, and the next decision stops it there if its box is spent.
    fn rehome(&mut self, tid: i32, now: cgroup::ThreadCgroups) {
        let Some(m) = self.by_tid.get_mut(&tid) else {
            return;
        };
        m.snapshot.cgroups.v2 = now.v2;
        m.freeze = None;
        if let Some(a) = m.applied.as_mut() {
            // Not frozen any more (it left the frozen group): the decision freezes it again
            // in its new group if its box is spent. Its policy and CPUs are as they were (a
            // change of them is drift, looked at as always).
            a.frozen = false;
        }
        let snap = m.snapshot.clone();
        self.stops
            .release(&self.layout, tid, &mut self.jstate.groups);
        self.stops
            .plan(&self.layout, &snap, &mut self.jstate.groups);
        self.jstate.threads.insert(tid, snap);
        if let Err(e) = self.journal.save(&self.jstate) {
            tracing::warn!(error = %e, "journal not written");
        }
        self.stops.make(&self.layout, tid, &mut self.jstate.groups);
        self.changes += 1;
        self.unplaced = true;
        self.rest.stale();
    }

    /// Debug builds: every resting member reads as it was charged (nothing to charge, still
    /// asleep), unless the sensor marked it since the marks were taken (it is read at the
    /// next step). The mark follows the write by a few instructions: waited for briefly.
    #[cfg(debug_assertions)]
    fn check_resting_unchanged(&self, mono: u64) {
        for tid in self.rest.resting() {
            let m = &self.by_tid[&tid];
            if let Some(c) = m.perf() {
                // Not switched in since its watch was armed: its clock reads as charged. The
                // switch record is written at the switch, before the clock can move.
                let read = m.clock.as_ref().and_then(|c| c.read().ok());
                assert!(c.watched(), "member {tid} at rest unwatched");
                assert!(
                    read.is_none_or(|r| r == m.charge.last()) || c.ran(),
                    "member {tid} at rest ran unseen: {read:?}, charged {}",
                    m.charge.last()
                );
                continue;
            }
            let Some(MemberClock::Bpf(reg)) = &m.clock else {
                panic!("member {tid} at rest without a sensor's clock");
            };
            let r = reg.read(mono);
            if r.runtime_ns == m.charge.last() && !r.state.ready() {
                continue;
            }
            let deadline = rtbox_bpf::now_ns() + 10_000_000;
            while !reg.dirty() && rtbox_bpf::now_ns() < deadline {
                std::hint::spin_loop();
            }
            assert!(
                reg.dirty(),
                "member {tid} at rest changed unmarked: {r:?}, charged {}",
                m.charge.last()
            );
        }
    }

    /// With the audit: the members charged to `server` and the sum of their kernel CPU time,
    /// if every one is verifiably off CPU now.
    pub fn kernel_time_of(&mut self, server: ServerId) -> Option<(Vec<i32>, u64)> {
        let mut tids = Vec::new();
        let sum = self
            .by_tid
            .iter_mut()
            .filter(|(_, m)| m.charge_to == Some(server))
            .map(|(t, m)| {
                tids.push(*t);
                m.kernel_time_off_cpu()
            })
            .sum::<Option<u64>>();
        sum.filter(|_| !tids.is_empty()).map(|k| (tids, k))
    }

    // ---- carrying decisions out ---------------------------------------------------------------

    /// Carries out changes (each member's new state is already in `applied`, `prev` its
    /// previous one), except thaws: returns the members to thaw and those found gone.
    pub fn execute(&mut self, changes: Vec<(i32, Option<Applied>)>) -> (Vec<i32>, Vec<i32>) {
        let mut gone = Vec::new();
        let mut thaws = Vec::new();
        for (tid, prev) in changes {
            let Some(m) = self.by_tid.get_mut(&tid) else {
                continue;
            };
            let Some(want) = m.applied.clone() else {
                continue;
            };
            if prev.is_none() && !want.frozen {
                // The first placement writes the band over the thread's own priority: a
                // priority it set since the step's read is looked at right before
                // (`localprio::own_change`; the gap left is two system calls).
                if let Some(p) = m.changed_since_join(tid) {
                    m.pending_rank = Some(p);
                    self.own_change = true;
                    self.unplaced = true;
                }
            }
            let freeze_dir = self.stops.dir(tid);
            if want.frozen {
                if let Some(c) = &m.clock {
                    c.quiet();
                }
            }
            match apply::apply_one(tid, prev.as_ref(), &want, freeze_dir, &mut m.freeze) {
                Ok(true) => thaws.push(tid),
                Ok(false) => {}
                Err(e) if e.is_gone() => gone.push(tid),
                Err(e) => tracing::warn!(tid, error = %e, "cannot apply the decision"),
            }
        }
        thaws.retain(|t| !gone.contains(t));
        (thaws, gone)
    }

    /// Thaws members whose recorded state `decide` already set to running; returns those
    /// found gone. `mono`: CLOCK_MONOTONIC before the first thaw (see [`Member::thawed_mono`]).
    pub fn thaw(&mut self, now: Nanos, mono: u64, tids: &[i32]) -> Vec<i32> {
        let mut gone = Vec::new();
        for tid in tids {
            let Some(m) = self.by_tid.get_mut(tid) else {
                continue;
            };
            let Some(dir) = self.stops.dir(*tid) else {
                continue;
            };
            // Read before the write: the thaw's wake-up counts after it.
            let mark = match &m.clock {
                Some(MemberClock::Bpf(r)) => Some(r.read(mono).wakeups),
                _ => m.schedstat.as_mut().and_then(|s| s.switch_ins()),
            };
            match apply::freeze_fast(&mut m.freeze, dir, false) {
                Ok(()) => {
                    m.thaw_mark = mark;
                    self.rest.stir(*tid, &m.box_name);
                    m.thawed_at = Some(now);
                    m.thawed_mono = mono;
                    // The next freeze needs its own pair, even if no step sees the member
                    // running in between (measured: a freeze, thaw and backstop freeze within
                    // one step left 3.25 ms of perf time, most of it a host stall, unrefunded).
                    m.paired_frozen = false;
                    if let Some(a) = m.applied.as_mut() {
                        a.frozen = false;
                    }
                }
                Err(e) if e.is_gone() => gone.push(*tid),
                Err(e) => tracing::warn!(tid, error = %e, "cannot thaw"),
            }
        }
        gone
    }

    /// Opens the kept freeze handle of every running member that has none yet (the backstop
    /// needs one to stop it).
    pub fn open_freeze_handles(&mut self) {
        // A resting member's was opened while it was active (and it is not planned).
        let tids: Vec<i32> = self.visited().map(|(t, _)| t).collect();
        for tid in &tids {
            let Some(m) = self.by_tid.get_mut(tid) else {
                continue;
            };
            if m.freeze.is_none()
                && m.charge_to.is_some()
                && m.applied.as_ref().is_some_and(|a| !a.frozen)
            {
                m.freeze = self
                    .stops
                    .dir(*tid)
                    .and_then(rtbox_linux::stopgroup::open_freeze)
                    .map(Arc::new);
            }
        }
    }

    /// The members a step looks at: with a fresh rest table the active ones (`rest.rs`),
    /// else all.
    /// With perf, all but the watched sleepers (perf's members at rest).
    pub fn visited(&self) -> Box<dyn Iterator<Item = (i32, &Member)> + '_> {
        if self.rest.is_stale() {
            Box::new(
                self.by_tid
                    .iter()
                    .filter(|(_, m)| !m.watched())
                    .map(|(t, m)| (*t, m)),
            )
        } else {
            Box::new(
                self.rest
                    .active()
                    .iter()
                    .filter_map(|t| self.by_tid.get(t).map(|m| (*t, m))),
            )
        }
    }

    /// The servers resting members are charged to (with perf: watched sleepers; with BPF none
    /// while the rest table is stale).
    pub fn resting_servers(&self) -> Vec<ServerId> {
        if self.rest.is_stale() {
            let watched: BTreeSet<ServerId> = self
                .by_tid
                .values()
                .filter(|m| m.watched())
                .filter_map(|m| m.charge_to)
                .collect();
            watched.into_iter().collect()
        } else {
            self.rest.servers().collect()
        }
    }

    // ---- membership scans ---------------------------------------------------------------------

    /// Whether a scan is due at `now`, and whether it must be a full one; records it.
    pub fn scan_due(&mut self, now: Nanos, scan: Nanos, full_scan: Nanos) -> Option<bool> {
        if !(self.scans.force_full || now.saturating_sub(self.scans.last_scan) >= scan) {
            return None;
        }
        self.scans.last_scan = now;
        // Without events of either kind (proc connector, BPF sensor) every scan is full.
        let full = self.scans.force_full
            || (self.events.is_none() && self.sensor.is_none())
            || now.saturating_sub(self.scans.last_full_scan) >= full_scan;
        if full {
            self.scans.force_full = false;
            self.scans.last_full_scan = now;
        }
        Some(full)
    }

    /// Rule: with the BPF sensor, membership comes from its events (a member's fork, a
    /// member's exit), so the /proc membership scan (each member's stat and children, each
    /// process's threads: two or three reads per member, 23 % of the loop's CPU with 500
    /// sleeping members, `perf record`) is only a safety net run every [`PROC_SCAN`], or at
    /// once when the ring buffer lost events since the last one.
    fn proc_scan_due(&self, now: Nanos) -> bool {
        if self.sensor.is_none() {
            return true;
        }
        self.lost_since_proc_scan()
            || self
                .proc_scan
                .is_some_and(|(_, at)| now.saturating_sub(at) >= PROC_SCAN)
    }

    /// Whether the sensor lost events since the last /proc scan (true without a sensor or
    /// before the first scan): that scan must then read every member.
    fn lost_since_proc_scan(&self) -> bool {
        match (&self.sensor, self.proc_scan) {
            (Some(sensor), Some((lost, _))) => sensor.lost_events() != lost,
            _ => true,
        }
    }

    /// New threads of attached processes, new child processes of members, exited threads.
    pub fn scan(&mut self, sched: &mut Scheduler, now: Nanos) {
        if !self.proc_scan_due(now) {
            // The sensor's events cover forks and exits; threads moved into attached cgroups
            // from outside are not its news.
            self.scan_cgroups(sched);
            self.release_empty_processes();
            return;
        }
        // Every member when the sensor lost events (or there is none); else only those that ran
        // since the last scan (`idle_since`).
        let every = self.lost_since_proc_scan();
        if let Some(sensor) = &self.sensor {
            self.proc_scan = Some((sensor.lost_events(), now));
        }
        let mut active: Vec<i32> = Vec::new();
        for (t, m) in self.by_tid.iter_mut() {
            let mark = m.idle_mark();
            if every || !idle_since(mark, m.proc_mark) {
                active.push(*t);
            }
            m.proc_mark = mark;
        }
        // Exited threads leave.
        let dead: Vec<i32> = active
            .iter()
            .copied()
            .filter(|t| !self.by_tid[t].snapshot.alive())
            .collect();
        for t in dead {
            match self.exec_successor(t) {
                Some(leader) => self.exec_replaced(sched, now, t, leader, false),
                None => self.forget_exited(sched, now, t),
            }
        }
        active.retain(|t| self.by_tid.contains_key(t));
        let active_pids: BTreeSet<i32> = active.iter().map(|t| self.by_tid[t].pid).collect();
        // New threads of member processes.
        let procs: Vec<(i32, String)> = self
            .procs
            .iter()
            .filter(|(p, _)| every || active_pids.contains(p))
            .map(|(p, b)| (*p, b.clone()))
            .collect();
        for (pid, bx) in &procs {
            if let Ok(tids) = procfs::threads_of(*pid) {
                let new: Vec<i32> = tids
                    .into_iter()
                    .filter(|t| !self.by_tid.contains_key(t))
                    .collect();
                if !new.is_empty() {
                    self.add_threads(sched, bx, &new);
                }
            }
        }
        self.scan_cgroups(sched);
        // New child processes of member processes: the children lists of the member threads
        // (one small read per member), or a scan of all of /proc when the kernel lacks them.
        let mut fresh: Vec<(i32, String)> = Vec::new();
        let mut fallback = false;
        for tid in &active {
            let m = &self.by_tid[tid];
            match procfs::children(*tid) {
                Ok(Some(kids)) => {
                    for c in kids {
                        if !self.procs.contains_key(&c) && !self.by_tid.contains_key(&c) {
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
                self.add_threads(sched, &bx, &tids);
            }
        }
        self.release_empty_processes();
    }

    /// Threads that entered attached cgroups (moved there from outside, e.g. a process a
    /// container runtime started: no member forked it).
    pub fn scan_cgroups(&mut self, sched: &mut Scheduler) {
        let cg: Vec<Attachment> = self
            .attachments
            .iter()
            .filter(|a| matches!(a.target, Target::Cgroup(_)))
            .cloned()
            .collect();
        for a in cg {
            if let Ok(tids) = target_threads(&a.target) {
                let new: Vec<i32> = tids
                    .into_iter()
                    .filter(|t| !self.by_tid.contains_key(t))
                    .collect();
                if !new.is_empty() {
                    self.add_threads(sched, &a.box_name, &new);
                }
            }
        }
    }

    /// Members that changed their own policy or affinity (or had it changed) get the box's
    /// back at the next step: their recorded state is made to differ from the desired one,
    /// and the next step comes at once, as for new members.
    /// A member that set its own RT priority gets that local rank ([`localprio`]): it is put
    /// back into its box's band at the new rank instead of losing the change.
    ///
    /// A member that has not run since its last look (`idle_since`) is looked at again
    /// only every [`PROC_SCAN`], the slow safety sweep: a change another process made to a
    /// sleeping member is put back at the first look after it runs, or by the sweep.
    pub fn correct_drift(&mut self, sched: &mut Scheduler, now: Nanos) {
        let mut drifted = false;
        let mut reranked = false;
        let sweep = self
            .scans
            .last_drift_sweep
            .is_none_or(|at| now.saturating_sub(at) >= PROC_SCAN);
        if sweep {
            self.scans.last_drift_sweep = Some(now);
        }
        for (tid, m) in self.by_tid.iter_mut() {
            if let Some(p) = m.pending_rank.take() {
                m.rerank(*tid, sched, now, p, "at its placement");
                reranked = true;
            }
            if m.applied.is_none() {
                // Not placed yet: a priority it set after its join is its rank before its
                // first placement writes the band over it (`localprio::own_change`).
                if let Some(p) = m.changed_since_join(*tid) {
                    m.rerank(*tid, sched, now, p, "before its placement");
                    reranked = true;
                }
                continue;
            }
            let mark = m.idle_mark();
            if !sweep && idle_since(mark, m.drift_mark) {
                continue;
            }
            if let Some(a) = m.applied.clone() {
                let current = sched::get_attr(*tid).ok();
                if let Some(p) = current
                    .as_ref()
                    .and_then(|x| localprio::changed_by_member(x, &a.attr, m.local_prio))
                {
                    m.rerank(*tid, sched, now, p, "while managed");
                    reranked = true;
                }
                let attr_ok = current
                    .as_ref()
                    .map(|x| x.same_policy(&a.attr))
                    .unwrap_or(true);
                let cpus_ok = sched::get_affinity(*tid)
                    .map(|c| c == a.cpus)
                    .unwrap_or(true);
                m.drift_mark = mark;
                if !attr_ok || !cpus_ok {
                    m.drift_mark = None;
                    drifted = true;
                    tracing::debug!(tid, "member changed its policy or affinity; put back");
                    m.applied = Some(Applied {
                        attr: SchedAttr::other(0),
                        cpus: Vec::new(),
                        frozen: a.frozen,
                    });
                }
            }
        }
        self.unplaced |= drifted;
        if drifted || reranked {
            self.rest.stale();
        }
    }

    /// Applies the kernel's process events: a thread or process forked by a member joins the
    /// member's box at once; an exited member leaves. Lost events force a full scan.
    pub fn take_events(&mut self, sched: &mut Scheduler, system: &System, now: Nanos) {
        let Some(ev) = self.events.as_mut() else {
            return;
        };
        let drained = ev.drain();
        if drained.lost {
            tracing::warn!("process events lost (burst of forks); full scan");
            self.scans.force_full = true;
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
                    // A new thread of a member process joins whoever its kernel "parent"
                    // is (the process's parent, not the creating thread: see
                    // `forkwait::thread_of_process`).
                    let own = super::forkwait::thread_of_process(child_tid, child_tgid);
                    let bx = own
                        .and_then(|p| self.procs.get(&p).or_else(|| pending.get(&p)).cloned())
                        .or_else(|| self.by_tid.get(&parent_tid).map(|m| m.box_name.clone()))
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
                    // Before the exec's report, an exit of a member's tid is the old
                    // leader's, whose tid a scan already gave the member (`rename`).
                    if !self.by_tid.get(&tid).is_some_and(|m| m.exec_pending) {
                        self.forget_exited(sched, now, tid);
                    }
                }
                ProcEvent::Exec { tid, tgid } => {
                    if let Some(m) = self.by_tid.get_mut(&tid).filter(|m| m.exec_pending) {
                        m.exec_pending = false;
                    } else if tid == tgid && self.procs.contains_key(&tgid) {
                        if let Some(old) = self.exec_caller(tid) {
                            self.exec_replaced(sched, now, old, tid, true);
                        }
                    }
                }
            }
        }
        for (bx, tid) in joins {
            if system.get(&bx).is_some() && !self.by_tid.contains_key(&tid) {
                self.add_threads(sched, &bx, &[tid]);
            }
        }
    }

    /// The thread that member `tid`, found gone, became by an exec: its process's leader by
    /// tid, if that thread sits in `tid`'s stop group (the leader's own member, if any, is
    /// in its own group until it exits).
    fn exec_successor(&self, tid: i32) -> Option<i32> {
        let pid = self.by_tid.get(&tid)?.pid;
        if pid == tid {
            return None;
        }
        let v2 = cgroup::thread_cgroups(pid).ok()?.v2;
        (self.group_owner_in(pid, v2.as_deref()) == Some(tid)).then_some(pid)
    }

    /// Which member of process `pid` called the exec the kernel reported for it (the proc
    /// connector names only the process): the member whose stop group the process's one thread
    /// is in (a thread keeps its cgroups across an exec), else the only other member of the
    /// process. `None` when its leader called it (nothing changed hands).
    fn exec_caller(&self, pid: i32) -> Option<i32> {
        let v2 = cgroup::thread_cgroups(pid).ok()?.v2;
        if v2
            .as_deref()
            .and_then(rtbox_linux::stopgroup::owner_of)
            .is_some()
        {
            return self.group_owner_in(pid, v2.as_deref());
        }
        let mut others = self
            .by_tid
            .iter()
            .filter(|(t, m)| m.pid == pid && **t != pid && !m.snapshot.alive())
            .map(|(t, _)| *t);
        match (others.next(), others.next()) {
            (Some(t), None) => Some(t),
            _ => None,
        }
    }

    /// Whether cgroups are attached (threads may enter them without a fork by a member).
    pub fn has_cgroup_attachments(&self) -> bool {
        self.attachments.cgroups > 0
    }

    /// The process events' socket, readable when events are queued.
    pub fn events_fd(&self) -> Option<BorrowedFd<'_>> {
        self.events.as_ref().map(|e| e.as_fd())
    }

    /// Whether process events are available.
    pub fn has_events(&self) -> bool {
        self.events.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtbox_model::{BoxSpec, Interface, Platform, ServerSpec};

    /// A test's own directory for its journal, removed with it.
    struct TestDir(std::path::PathBuf);

    impl Drop for TestDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn table() -> (Members, Scheduler, TestDir) {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let layout = cgroup::parse_mounts("");
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("rtbox-members-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.json");
        let b = BoxSpec::new(
            "A",
            Interface::Servers(vec![ServerSpec {
                cpu: 0,
                budget: 1_000_000,
                period: 10_000_000,
            }]),
        );
        let system = System::new(Platform::with_cpus(1), vec![b], vec![]).unwrap();
        let sched = Scheduler::new(&system, rtbox_core::Options::default()).unwrap();
        (
            Members::new(layout, Journal::new(path), None),
            sched,
            TestDir(dir),
        )
    }

    #[test]
    fn sleepers_are_read_in_turn_up_to_the_budget() {
        let mut a = AsleepReads::new(2);
        assert!(a.take(10));
        assert!(a.take(11));
        assert!(!a.take(12), "the third sleeper waits for the next step");
        assert_eq!(a.last, Some(11), "the next step's turn begins after 11");
        let mut none = AsleepReads::new(0);
        assert!(!none.take(1));
        assert_eq!(
            none.last, None,
            "a step that read no sleeper keeps the turn"
        );
    }

    #[test]
    fn bad_attach_and_detach_requests_change_nothing() {
        let (mut m, mut sched, _dir) = table();
        let me = Target::Pid(std::process::id() as i32);
        assert!(matches!(
            m.attach(&mut sched, "A", me),
            Err(RuntimeError::AttachSelf)
        ));
        let cg = Target::Cgroup("/nonexistent/cgroup".into());
        assert!(matches!(
            m.detach_targets(None, Some("/nonexistent/cgroup".into()), None),
            Err(RuntimeError::NotAttached { target }) if target == cg
        ));
        assert!(matches!(
            m.detach_targets(Some(1), None, Some("A")),
            Err(RuntimeError::DetachWhat)
        ));
        assert!(matches!(
            m.attach(&mut sched, "A", cg),
            Err(RuntimeError::Linux(_))
        ));
        // kthreadd (pid 2): the freezer cannot stop a kernel thread.
        if procfs::stat(2).is_ok_and(|s| s.kernel_thread()) {
            assert!(matches!(
                m.attach(&mut sched, "A", Target::Pid(2)),
                Err(RuntimeError::KernelThread { pid: 2 })
            ));
        } else {
            eprintln!("kernel thread case skipped: pid 2 is not kthreadd here (a pid namespace)");
        }
        assert!(m.by_tid.is_empty() && m.attachments.is_empty());
        assert_eq!(sched.task_count(), 0, "no task registered");
        assert!(!m.unplaced);
    }

    /// Issue 20: a new thread that sets its own priority after its join but before its first
    /// placement (rt-app and `rtbox load` threads do, while the daemon is still making the
    /// thread's stop group) is ranked by that priority; before, the placement wrote the band
    /// of its old rank over it and it stayed at rank 0 for good.
    #[test]
    fn a_priority_set_before_the_first_placement_is_the_members_rank() {
        if !rtbox_linux::is_root() {
            eprintln!("skipped: setting SCHED_FIFO needs root");
            return;
        }
        let (mut m, mut sched, _dir) = table();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (end_tx, end_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tid_tx.send(sched::gettid()).unwrap();
            let _ = end_rx.recv();
        });
        let tid = tid_rx.recv().unwrap();
        assert_eq!(m.add_threads(&mut sched, "A", &[tid]), 1);
        assert_eq!(m.by_tid[&tid].local_prio, 0, "joined as a normal thread");
        // A rank from a declaration (the task API's rt_set_priority) is not its own change.
        m.by_tid.get_mut(&tid).unwrap().local_prio = 12;
        m.correct_drift(&mut sched, 500);
        assert_eq!(m.by_tid[&tid].local_prio, 12, "the declared rank stays");
        // Its own change, between the join and the first placement.
        sched::set_attr(tid, &SchedAttr::fifo(7)).unwrap();
        m.charge(&mut sched, 1_000);
        assert!(m.own_change, "the step's stat read sees the change");
        m.correct_drift(&mut sched, 1_000);
        assert_eq!(m.by_tid[&tid].local_prio, 7, "ranked by its own priority");
        assert!(m.by_tid[&tid].applied.is_none(), "still to be placed");

        // Again, after the step's read and before the placement's write.
        sched::set_attr(tid, &SchedAttr::fifo(9)).unwrap();
        m.own_change = false;
        m.unplaced = false;
        m.by_tid.get_mut(&tid).unwrap().applied = Some(Applied {
            attr: SchedAttr::fifo(60),
            cpus: Vec::new(),
            frozen: false,
        });
        let (thaws, gone) = m.execute(vec![(tid, None)]);
        assert!(thaws.is_empty() && gone.is_empty());
        assert_eq!(sched::get_attr(tid).unwrap().priority, 60, "placed");
        assert!(m.own_change && m.unplaced, "the next step comes at once");
        m.correct_drift(&mut sched, 1_500);
        assert_eq!(
            m.by_tid[&tid].local_prio, 9,
            "ranked by the priority it set"
        );
        m.release(&mut sched, 2_000, tid);
        end_tx.send(()).unwrap();
        t.join().unwrap();
    }

    #[test]
    fn a_detach_of_a_box_without_members_releases_nothing() {
        let (mut m, _, _dir) = table();
        assert_eq!(
            m.detach_targets(None, None, Some("A")).unwrap(),
            Vec::<i32>::new()
        );
        assert_eq!(
            m.detach_targets(Some(4242), None, None).unwrap(),
            Vec::<i32>::new()
        );
    }
}
