//! Per-CPU backstop: stops members whose budget ran out while the enforcement loop cannot run.
//!
//! The loop is one thread on one CPU, and there it can be kept from running: when RT threads
//! fill a CPU, the kernel's deferred fair server runs the starving normal threads above every RT
//! thread for up to 50 ms. Measured in the isolation experiment: one 53 ms stall of the loop per
//! 10 s run, during which a member on the other CPU overran its budget by 5.6 ms.
//!
//! So after every step the loop leaves each CPU a plan: the times at which the hard-mode servers
//! running there exhaust their budgets if their members run without pause, each with the freeze
//! handles of those members. A thread per CPU (SCHED_FIFO [`BACKSTOP_PRIO`], pinned there) sleeps
//! on timerfds set to the earliest time plus [`SLACK`] (one for its own servers' stops, one for
//! the copies of other CPUs' stops it watches), armed only from its own CPU so that they fire
//! there whatever happens to the loop's CPU. While the loop keeps up, the thread only
//! wakes to re-arm for a plan that moved later; when the loop is late by the slack, it checks
//! the members' clocks, freezes those whose budget is spent and reports them. The loop takes the report, publishes the next plan and
//! thaws the members it wants running all under one lock, so it sees every backstop freeze and
//! undoes it if its own decision differs (a plan may be stale by one step), and no member runs
//! unguarded.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::runtime::sensor::MemberClock;
use rtbox_linux::fdwait::{self, EventFd, TimerFd};
#[cfg(test)]
use rtbox_linux::perf::TaskClock;
use rtbox_linux::pimutex::{PiGuard, PiMutex};
use rtbox_linux::sched::{self, SchedAttr};
use rtbox_linux::{cgroup, LinuxError};

/// Priority of the backstop threads: above every member (40..89), below the loop (98).
pub const BACKSTOP_PRIO: u32 = 97;

/// How late the loop may be past a planned exhaustion before the backstop stops the members.
/// The loop's own wake-up is 10-50 us late here (p99); the slack, the backstop's own wake-up
/// (up to ~100 us seen) and a freeze (~35-55 us) should stay within 200 us. A shorter slack
/// (70 us) made the backstop act ten times as often and, measured, did not shorten the tail.
pub const SLACK: u64 = 100_000;

/// How much later than its own CPU another CPU's backstop checks a stop: only when the stop's
/// own CPU did not act (its timer interrupt came late), and soon enough that slack, this and
/// a freeze (~35-55 us) stay within 200 us.
pub const WATCH_SLACK: u64 = 40_000;

/// Budget left below which an owned stop ([`Stop::owned`]) counts as spent. While a member
/// runs, its BPF figure grows with wall time, and the loop later charges the kernel's figure,
/// which leaves out steal and interrupts: a few microseconds less. Waiting for such a rest
/// re-armed the backstop every few microseconds (the thawed member often had not run yet), and
/// the loop thawed the member again for the rest the kernel still showed, stepping every
/// ~100 us until the period ended (measured, 2 ms / 10 ms box). The loop settles such a rest
/// the same way (`Runtime::settle_owned`).
pub const STOP_GRAIN: u64 = 20_000;

/// The most a kick's measured length may move a stop (see `settle_deferred`): a kick delayed
/// by a host stall must not leave the loop's own CPU unwatched for the stall's length.
const MAX_KICK_NS: u64 = 30_000;

/// A member as the backstop knows it.
#[derive(Debug, Clone)]
pub struct Handle {
    pub tid: i32,
    /// Its kept-open `cgroup.freeze`.
    pub freeze: Arc<File>,
    /// Its CPU clock (perf task clock or BPF sensor), and the reading the loop last charged.
    pub clock: MemberClock,
    pub charged: u64,
}

/// One planned exhaustion: the members of a server with `budget` left (ns of their perf clocks
/// beyond the readings already charged) stop at CLOCK_MONOTONIC `at` if they ran without pause.
/// When the backstop fires it checks the clocks: members preempted meanwhile (by the loop
/// itself, or a more urgent server) have budget left, and their stop moves later instead.
#[derive(Debug, Clone)]
pub struct Stop {
    pub at: u64,
    /// How long past `at` the backstop acts: [`SLACK`] while it only guards the loop's own
    /// stop, 0 where the stop is the backstop's ([`Stop::owned`]).
    pub slack: u64,
    pub budget: u64,
    pub members: Vec<Handle>,
    /// The CPU of the members' server (a copy watched from another CPU keeps it).
    pub home: u32,
    /// Every member was frozen when the plan was made and the same step thaws them: they
    /// cannot run before that thaw, so the stop is neither armed nor checked until
    /// [`Locked::thawed`] moves it by the time the step took ([`Shared::planned_at`]). Planned
    /// from the step's start, such a stop woke its backstop ~0.1-0.2 ms before the members had
    /// spent anything like their budget, re-armed, and woke again (and the copy on the other
    /// CPU with it): two extra wake-ups per CPU and period, measured with `perf sched` (issue 14).
    pub pending: bool,
    /// The loop need not look at this stop: the exhaustion changes nothing but stopping these
    /// members (`rtbox_core::Scheduler::exhaustion_is_quiet`). The backstop then stops them
    /// without waking a sleeping loop, and notes when ([`Backstop::take_quiet`]); the loop
    /// replays the exhaustion at that time at its next step (its replenishment, at the
    /// latest). One loop step per period fewer (issue 14).
    pub quiet: bool,
}

impl Stop {
    /// A stop the backstop owns: it acts at `at` itself, and the loop steps only after it
    /// (with the BPF sensor, the members' clocks cost a memory read, so the check at the
    /// exhaustion is cheap; see `runtime::wakeup::owned_stop`).
    pub fn owned(&self) -> bool {
        self.slack == 0
    }

    /// When the backstop acts on this stop.
    fn due(&self) -> u64 {
        self.at + self.slack
    }

    /// When the backstop acts on this stop, if it watches it yet (not [`Stop::pending`]).
    fn armed_due(&self) -> Option<u64> {
        (!self.pending).then(|| self.due())
    }

    /// Budget left now by the members' clocks (0 when spent; an unreadable clock counts as
    /// spent).
    fn left(&self) -> u64 {
        let used = self
            .members
            .iter()
            .map(|h| {
                h.clock
                    .read()
                    .map_or(u64::MAX, |v| v.saturating_sub(h.charged))
            })
            .fold(0u64, |a, b| a.saturating_add(b));
        self.budget.saturating_sub(used)
    }
}

#[derive(Default)]
struct Shared {
    /// Per CPU (index into `cpus`), the stops (in plan order; each is checked on its own).
    plans: Vec<Vec<Stop>>,
    /// CLOCK_MONOTONIC the plans count from: a pending stop moves by the time from then to
    /// its members' thaw.
    planned_at: u64,
    /// Members frozen by a backstop thread since the loop last looked.
    report: Vec<i32>,
    /// Members frozen by a quiet stop ([`Stop::quiet`]) and when (CLOCK_MONOTONIC), until the
    /// loop's next step takes them.
    quiet: Vec<(i32, u64)>,
    /// Times a backstop thread stopped members.
    fired: u64,
    /// Per CPU: the times its thread's timers are armed for. They are armed only from that
    /// CPU (by its thread, or by the loop while it runs there), so the timers fire there: a
    /// timer armed by the loop elsewhere would sit on the loop's CPU and fire late with it
    /// (measured: a vCPU stalled by the host for 2 ms held the loop and the other CPU's
    /// backstop timer alike, and a member on the running CPU overran by 1.06 ms).
    armed: Vec<Armed>,
    stop: bool,
}

/// What a CPU's two timers are armed for (CLOCK_MONOTONIC, 0: disarmed): its own servers'
/// stops, and the copies of other CPUs' stops it watches. Apart, so that the CPU that acts
/// on a stop can disarm the copy's timer elsewhere (disarming may be done from any CPU, arming
/// not) without leaving that CPU's own stops unwatched: with one timer for both, every stop
/// made on time woke the other CPU's thread once more, 40 us later (`WATCH_SLACK`), for a
/// copy already done (seed 002's platforms: 650 backstop timer wake-ups a second for 212
/// exhaustions, `perf record -e sched:sched_wakeup`).
#[derive(Debug, Clone, Copy, Default)]
struct Armed {
    own: u64,
    watch: u64,
}

/// A CPU's thread's two timers (see [`Armed`]).
struct Timers {
    own: TimerFd,
    watch: TimerFd,
}

/// The backstop's lock, held while the loop thaws (see [`Backstop::lock`]).
pub struct Locked<'a> {
    held: PiGuard<'a, Shared>,
    owner: &'a Backstop,
    /// The members frozen since the loop last looked.
    pub report: Vec<i32>,
}

impl Locked<'_> {
    /// Rule: the loop thawed `tids`, none before CLOCK_MONOTONIC `now`, and the members of a
    /// pending stop ([`Stop::pending`]) could not run before their thaw, so such a stop whose
    /// members were all thawed moves later by the time since the plan. On the loop's own CPU
    /// they cannot run before the loop sleeps either (it is above them): those stops wait for
    /// [`Backstop::sleep_until`] to move them by the time until then (the rest of the step,
    /// ~20-30 us, was enough for the backstop to wake before the budget was spent). Every
    /// other pending stop is watched from now on, and the backstops are armed for the plans as
    /// they now are.
    pub fn thawed(&mut self, tids: &[i32], now: u64) {
        let here = sched::current_cpu();
        let g = &mut *self.held;
        let shift = now.saturating_sub(g.planned_at);
        let mut any = false;
        for stop in g.plans.iter_mut().flatten().filter(|s| s.pending) {
            let all = stop.members.iter().all(|h| tids.contains(&h.tid));
            if all && Some(stop.home) == here {
                self.owner.deferred.store(true, Ordering::Relaxed);
                continue;
            }
            stop.pending = false;
            any = true;
            if all {
                stop.at += shift;
            }
        }
        if any {
            self.owner.arm_plans(g);
        }
    }
}

/// Rule: a server cannot be spent before `now` plus the budget its members' clocks leave it,
/// so an owned stop of this CPU is armed no earlier than that. Woken by a kick, the backstop
/// runs just before the members the loop thawed here: the loop's plan counted from before the
/// thaw, its wake-up and this thread's, and fired 20-40 us before the budget was spent, found
/// it unspent and woke again (two wake-ups per exhaustion, `perf sched`, issue 14). The
/// clocks of owned stops (BPF) are memory reads; copies watched for other CPUs keep their time.
fn rebase_owned(plan: &mut [Stop], cpu: u32, now: u64) {
    for stop in plan
        .iter_mut()
        .filter(|s| s.owned() && !s.pending && s.home == cpu)
    {
        stop.at = stop.at.max(now + stop.left());
    }
}

/// Rule: a copy of `cpu`'s stop watched from another CPU is due `WATCH_SLACK` after the stop
/// itself (`guard::plan` plans it so); when `cpu`'s thread moves its own stop later (its
/// members were preempted, or it rebased it at a kick: both lower bounds of when their budget
/// can be spent), the copy moves with it, to the stop's new time. Left where it was, it woke
/// the other CPU early only to move itself (seed 002's platforms: about 80 such wake-ups a
/// second per CPU). Kept `WATCH_SLACK` behind (tried 29 Nov), the backstops woke 7 % less in
/// seed 002's platforms, but a 200 us / 1 ms member got ~0.0006 CPU less in most runs, for a
/// reason not found: not kept (docs/benchmarks-runtime.md, "Fewer allocations per step").
/// `own`: the stops' first member and new time.
fn follow_own(plan: &mut [Stop], cpu: u32, own: &[(i32, u64)]) {
    for copy in plan.iter_mut().filter(|s| s.home == cpu) {
        let Some(first) = copy.members.first() else {
            continue;
        };
        if let Some(&(_, at)) = own.iter().find(|(t, _)| *t == first.tid) {
            copy.at = copy.at.max(at);
        }
    }
}

/// Disarms CPU `j`'s watch timer when it is set earlier than the earliest copy `j` now
/// watches (its copies done, or moved later), so that it does not wake for nothing; `j`'s
/// thread arms it again at its next wake-up. Disarming may be done from any CPU, arming only
/// from the timer's own (see [`Shared::armed`]). `j`'s own stops' timer is never touched.
fn disarm_early_watch(sh: &mut Shared, timers: &[Timers], cpus: &[u32], j: usize) {
    let want = earliest(&sh.plans[j], cpus[j]);
    let armed = &mut sh.armed[j];
    if armed.watch != 0 && (want.watch == 0 || want.watch > armed.watch) {
        arm(&timers[j].watch, 0);
        armed.watch = 0;
    }
}

/// The times a CPU's backstop acts on `plan` next, its own servers' stops and the copies
/// apart (0: nothing to watch).
fn earliest(plan: &[Stop], cpu: u32) -> Armed {
    Armed {
        own: earliest_own(plan, cpu),
        watch: plan
            .iter()
            .filter(|s| s.home != cpu)
            .filter_map(Stop::armed_due)
            .min()
            .unwrap_or(0),
    }
}

/// Arms both timers of a CPU for `want` where they are not armed for it already.
fn arm_both(timers: &Timers, armed: &mut Armed, want: Armed) {
    if want.own != armed.own {
        arm(&timers.own, want.own);
        armed.own = want.own;
    }
    if want.watch != armed.watch {
        arm(&timers.watch, want.watch);
        armed.watch = want.watch;
    }
}

/// [`earliest`] among the stops of `cpu`'s own servers (not the copies it watches).
fn earliest_own(plan: &[Stop], cpu: u32) -> u64 {
    plan.iter()
        .filter(|s| s.home == cpu)
        .filter_map(Stop::armed_due)
        .min()
        .unwrap_or(0)
}

/// What ended a sleep of the loop ([`Backstop::sleep_until`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Woke {
    /// A backstop thread stopped members: the loop must take its report now (a stop that
    /// changes what runs elsewhere, or one made while the loop was not asleep).
    pub backstop: bool,
    /// Which of the extra descriptors were readable.
    pub extra: Vec<bool>,
}

impl Woke {
    /// The deadline came (or the wait failed): nothing readable.
    pub fn nothing(extra: usize) -> Woke {
        Woke {
            backstop: false,
            extra: vec![false; extra],
        }
    }
}

/// The per-CPU backstop threads and their plans.
pub struct Backstop {
    cpus: Vec<u32>,
    /// Written by a backstop thread after it stopped members: wakes the loop (if it can run,
    /// its plan was stale, and it must look at once).
    wake: Arc<EventFd>,
    /// Priority-inheriting: the loop holds it while it thaws members, and a loop preempted
    /// there (by the member it thawed, when the loop is not above it) must not keep the
    /// backstop threads waiting while that member runs (see `rtbox_linux::pimutex`).
    shared: Arc<PiMutex<Shared>>,
    /// Per CPU: an eventfd that makes its thread re-read its plan (an earlier stop).
    kicks: Vec<Arc<EventFd>>,
    /// Per CPU: its thread's timers, armed by the loop only while the loop runs on that CPU.
    timers: Arc<Vec<Timers>>,
    /// How long the loop's last kicks of other CPUs took, ns (see `settle_deferred`).
    kick_ns: AtomicU64,
    /// Pending stops are left for [`Backstop::sleep_until`]: their members were thawed on the
    /// loop's own CPU, where they run only once the loop sleeps. Outside the lock, so that a
    /// sleep with nothing to settle does not take it (a backstop thread holding it made the
    /// loop block on it, measured with the perf sensor at 1 ms periods).
    deferred: AtomicBool,
    /// The loop is in [`Backstop::sleep_until`]: a quiet stop need not wake it (its sleep ends
    /// by the stop's replenishment at the latest). Outside a sleep every stop wakes it, so a
    /// stop made during a step is seen at once.
    asleep: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// Arms a backstop timer. A failure (only with a bad descriptor or time, neither possible
/// here) leaves the old time armed; the thread re-arms at its next wake-up.
fn arm(timer: &TimerFd, at: u64) {
    let _ = timer.arm_at(at);
}

fn lock(m: &PiMutex<Shared>) -> PiGuard<'_, Shared> {
    m.lock()
}

impl Backstop {
    /// Starts one backstop thread on each of `cpus`.
    pub fn start(cpus: &[u32]) -> Result<Backstop, LinuxError> {
        let shared = Arc::new(PiMutex::new(Shared {
            plans: vec![Vec::new(); cpus.len()],
            planned_at: 0,
            armed: vec![Armed::default(); cpus.len()],
            ..Shared::default()
        }));
        let mut b = Backstop {
            wake: Arc::new(EventFd::new()?),
            cpus: cpus.to_vec(),
            shared,
            kicks: Vec::new(),
            timers: Arc::new(Vec::new()),
            kick_ns: AtomicU64::new(0),
            deferred: AtomicBool::new(false),
            asleep: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        };
        let mut timers = Vec::new();
        for _ in cpus {
            timers.push(Timers {
                own: TimerFd::new()?,
                watch: TimerFd::new()?,
            });
        }
        b.timers = Arc::new(timers);
        let timers = b.timers.clone();
        for (i, &cpu) in cpus.iter().enumerate() {
            let kick = Arc::new(EventFd::new()?);
            let (shared, kicked, wake) = (b.shared.clone(), kick.clone(), b.wake.clone());
            let asleep = b.asleep.clone();
            let timers = timers.clone();
            let all_cpus = cpus.to_vec();
            let (tx, rx) = std::sync::mpsc::channel();
            let h = std::thread::Builder::new()
                .name(format!("rtbox-backstop{cpu}"))
                .spawn(move || {
                    let tid = sched::gettid();
                    let ok = sched::set_affinity(tid, &[cpu])
                        .and_then(|_| sched::set_attr(tid, &SchedAttr::fifo(BACKSTOP_PRIO)));
                    let _ = tx.send(ok);
                    watch(i, &all_cpus, &shared, &timers, &kicked, &wake, &asleep);
                })
                .map_err(|e| LinuxError::Invalid(format!("backstop thread: {e}")))?;
            b.kicks.push(kick);
            b.threads.push(h);
            match rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(LinuxError::Invalid("backstop thread died".into())),
            }
        }
        Ok(b)
    }

    /// Replaces every CPU's plan (CPUs not named get none) and returns the members the
    /// backstop froze since the last call.
    pub fn publish(&mut self, plans: Vec<(u32, Vec<Stop>)>) -> Vec<i32> {
        self.publish_from(plans, rtbox_linux::monotonic_ns())
    }

    /// [`Backstop::publish`] for plans made at CLOCK_MONOTONIC `base` (the time their stops
    /// count from). The other CPUs are kicked under the lock: kicked after it (29 Nov), a
    /// 200 us / 1 ms member got 0.0001-0.0005 CPU less in three runs of three, inside the
    /// noise but not kept without a reason to.
    pub fn publish_from(&mut self, plans: Vec<(u32, Vec<Stop>)>, base: u64) -> Vec<i32> {
        let mut g = lock(&self.shared);
        let report = std::mem::take(&mut g.report);
        for p in g.plans.iter_mut() {
            p.clear();
        }
        for (cpu, stops) in plans {
            if let Some(i) = self.cpus.iter().position(|&c| c == cpu) {
                g.plans[i] = stops;
            }
        }
        g.planned_at = base;
        self.deferred.store(false, Ordering::Relaxed);
        self.arm_plans(&mut g);
        report
    }

    /// Arms each CPU's backstop for its earliest watched stop. The timer of the CPU the loop
    /// runs on is re-armed here (it then fires on that CPU). Another CPU's thread whose timer
    /// is set for later (or not at all) is kicked to re-arm now; one set for earlier wakes
    /// anyway, finds nothing due and re-arms itself.
    fn arm_plans(&self, g: &mut Shared) {
        let here = sched::current_cpu();
        self.arm_here(g, here);
        self.kick_others(g, here);
    }

    /// Arms the timer of the CPU the loop runs on (`here`) for its earliest watched stop.
    fn arm_here(&self, g: &mut Shared, here: Option<u32>) {
        if let Some(i) = self.cpus.iter().position(|&c| Some(c) == here) {
            let want = earliest(&g.plans[i], self.cpus[i]);
            arm_both(&self.timers[i], &mut g.armed[i], want);
        }
    }

    /// Kicks each other CPU's thread whose timer is set later than the earliest stop of its
    /// own servers (or not at all), so it re-arms from its own CPU. The copies of other CPUs'
    /// stops it watches are armed at its next wake-up, not worth one of their own: a kick for
    /// a copy alone was about one wake-up in ten of the backstop threads (2 ms / 10 ms box on
    /// two CPUs, one busy member: 548-577 wake-ups/s with copies left to the next wake-up,
    /// 578-628 with kicks for them; loop 9.1-9.4 ms/s against 10-21; the 4-box 2 / 10 ms
    /// case's overrun p99 stayed at most 26 us in three runs of each).
    fn kick_others(&self, g: &Shared, here: Option<u32>) {
        for i in self.kicks_needed(g, here) {
            self.kicks[i].kick();
        }
    }

    /// The other CPUs whose thread must re-arm (see [`Backstop::kick_others`]): their own
    /// stops' timer is set later than their earliest own stop. A copy's timer set earlier does
    /// not count: another CPU's thread may disarm it (its copy done), and the own stop would
    /// then go unwatched.
    fn kicks_needed(&self, g: &Shared, here: Option<u32>) -> Vec<usize> {
        (0..g.plans.len())
            .filter(|&i| Some(self.cpus[i]) != here)
            .filter(|&i| {
                let at = earliest_own(&g.plans[i], self.cpus[i]);
                let armed = g.armed[i].own;
                at != 0 && (armed == 0 || at < armed)
            })
            .collect()
    }

    /// The members frozen since the last call, with no backstop thread acting until the
    /// returned lock is dropped: the loop thaws its members while holding it, so a freeze can
    /// never land between its look at the report and its thaw (the thaw would undo it unseen,
    /// and the loop would take a running member for frozen; issue 5: one server ran 2 ms past
    /// its budget that way).
    pub fn lock(&self) -> Locked<'_> {
        let mut g = lock(&self.shared);
        let report = std::mem::take(&mut g.report);
        Locked {
            held: g,
            owner: self,
            report,
        }
    }

    /// Sleeps until CLOCK_MONOTONIC `deadline`, or until a backstop thread stopped members, or
    /// one of `extra` (the BPF sensor's events, process events) is readable; which woke it.
    pub fn sleep_until(&self, deadline: u64, extra: &[BorrowedFd<'_>]) -> Woke {
        self.settle_deferred();
        let now = rtbox_linux::monotonic_ns();
        if deadline <= now {
            return Woke::nothing(extra.len());
        }
        let mut fds = vec![self.wake.as_fd()];
        fds.extend_from_slice(extra);
        self.asleep.store(true, Ordering::SeqCst);
        let woke = fdwait::wait_readable(&fds, Some(deadline - now));
        self.asleep.store(false, Ordering::SeqCst);
        match woke {
            Ok(r) => {
                if r[0] {
                    self.wake.take();
                }
                Woke {
                    backstop: r[0],
                    extra: r[1..].to_vec(),
                }
            }
            Err(_) => Woke::nothing(extra.len()),
        }
    }

    /// The loop is about to sleep: the stops [`Locked::thawed`] left pending move by the time
    /// since their plan (their members start when the loop sleeps) and are watched from now
    /// on. Other CPUs are kicked after the lock is let go (kicked under it, a thread woke only
    /// to wait for the lock, a system call more on each side), so the kicks' own time, which
    /// delays the loop's sleep too, is counted with the length of the last ones.
    fn settle_deferred(&self) {
        // Set and cleared by the loop thread itself (this one), under the lock or not.
        if !self.deferred.swap(false, Ordering::Relaxed) {
            return;
        }
        let mut g = lock(&self.shared);
        let here = sched::current_cpu();
        // `thawed` left pending only the stops it deferred to here.
        let mut deferred = Vec::new();
        for (i, plan) in g.plans.iter_mut().enumerate() {
            for (k, stop) in plan.iter_mut().enumerate().filter(|(_, s)| s.pending) {
                stop.pending = false;
                deferred.push((i, k));
            }
        }
        let kicks = self.kicks_needed(&g, here);
        let kick_ns = if kicks.is_empty() {
            0
        } else {
            self.kick_ns.load(Ordering::Relaxed)
        };
        let shift = (rtbox_linux::monotonic_ns() + kick_ns).saturating_sub(g.planned_at);
        for (i, k) in deferred {
            g.plans[i][k].at += shift;
        }
        self.arm_here(&mut g, here);
        drop(g);
        if !kicks.is_empty() {
            let t = rtbox_linux::monotonic_ns();
            for i in kicks {
                self.kicks[i].kick();
            }
            let took = rtbox_linux::monotonic_ns().saturating_sub(t);
            self.kick_ns.store(took.min(MAX_KICK_NS), Ordering::Relaxed);
        }
    }

    /// The members quiet stops froze since the last call, and when (CLOCK_MONOTONIC).
    pub fn take_quiet(&self) -> Vec<(i32, u64)> {
        std::mem::take(&mut lock(&self.shared).quiet)
    }

    /// How many times a backstop thread stopped members (the loop was late by more than
    /// [`SLACK`] at a planned exhaustion).
    pub fn fired(&self) -> u64 {
        lock(&self.shared).fired
    }
}

/// A backstop thread: sleep on its timers (armed from here, so they fire on this CPU) or a kick;
/// stop every planned group that is due, then re-arm for the next one.
fn watch(
    i: usize,
    cpus: &[u32],
    shared: &PiMutex<Shared>,
    timers: &[Timers],
    kicked: &EventFd,
    wake: &EventFd,
    asleep: &AtomicBool,
) {
    let (cpu, mine) = (cpus[i], &timers[i]);
    loop {
        let fds = [mine.own.as_fd(), mine.watch.as_fd(), kicked.as_fd()];
        let Ok(ready) = fdwait::wait_readable(&fds, None) else {
            return;
        };
        // Only what woke it is read (a read is a system call). A timer that expires after the
        // wait is read at the next one, which then returns at once.
        let own_expired = ready[0] && mine.own.take_expired();
        let watch_expired = ready[1] && mine.watch.take_expired();
        let expired = own_expired || watch_expired;
        if ready[2] {
            kicked.take();
        }
        let mut g = lock(shared);
        if g.stop {
            return;
        }
        if own_expired {
            g.armed[i].own = 0;
        }
        if watch_expired {
            g.armed[i].watch = 0;
        }
        let now = rtbox_linux::monotonic_ns();
        let mut froze = Vec::new();
        // Whether one of this CPU's own stops moved later (its copies elsewhere follow).
        let mut moved = false;
        // Whether every stop made here was quiet (the loop need not wake for them).
        let mut quiet = true;
        // Every due stop is checked: a server planned after another may run first when the
        // other's members do not (blocked, or not yet woken).
        let mut k = 0;
        while k < g.plans[i].len() {
            let stop = &mut g.plans[i][k];
            if stop.pending || stop.due() > now {
                k += 1;
                continue;
            }
            let left = stop.left();
            if left > 0 && !(stop.owned() && left < STOP_GRAIN) {
                // Not spent: preempted meanwhile. It cannot be spent before `left` from now.
                stop.at = (now + left).saturating_sub(stop.slack).max(now + 1);
                moved |= stop.home == cpu;
                k += 1;
                continue;
            }
            let s = g.plans[i].remove(k);
            quiet &= s.quiet;
            let first = froze.len();
            for h in s.members {
                // A member asleep by the sensor cannot run: freezing it would only wake it (the
                // freezer signals it), and it would then count as ready. The sensor tells the
                // loop when it wakes on a spent server.
                if h.clock.asleep() {
                    continue;
                }
                // The block and the thaw's wake-up are the runtime's own doing: no sensor event.
                h.clock.quiet();
                if cgroup::freeze_write(&h.freeze, true).is_ok() {
                    froze.push(h.tid);
                }
            }
            if s.quiet {
                g.quiet.extend(froze[first..].iter().map(|&t| (t, now)));
            }
        }
        if !expired {
            rebase_owned(&mut g.plans[i], cpu, now);
            moved = true;
        }
        let next = earliest(&g.plans[i], cpu);
        let sh = &mut *g;
        arm_both(mine, &mut sh.armed[i], next);
        // A wake-up that neither stopped nor moved anything has no copies to tell about (most
        // of them: a timer left earlier than a plan published since).
        if froze.is_empty() && !moved {
            continue;
        }
        // Where this CPU's own stops are now (moved because unspent, or rebased at a kick):
        // their copies on other CPUs follow (`follow_own`).
        let own: Vec<(i32, u64)> = sh.plans[i]
            .iter()
            .filter(|s| s.home == cpu && !s.pending)
            .filter_map(|s| Some((s.members.first()?.tid, s.at)))
            .collect();
        // The same members may be watched from other CPUs too: the copies of stops made here
        // are done, those of stops moved here move with them. A CPU whose watch timer was set
        // for a copy done or moved has it disarmed from here (disarming, unlike arming, may be
        // done from any CPU), so it does not wake for nothing; its copies are armed at its
        // next wake-up, as a copy is that arrives with a new plan (`Backstop::kick_others`).
        // Its own servers' timer is left as it is.
        for j in (0..sh.plans.len()).filter(|&j| j != i) {
            let plan = &mut sh.plans[j];
            plan.retain(|s| !s.members.iter().any(|h| froze.contains(&h.tid)));
            follow_own(plan, cpu, &own);
            disarm_early_watch(sh, timers, cpus, j);
            let armed = &mut sh.armed[j];
            if sh.plans[j].is_empty() && armed.own != 0 {
                arm(&timers[j].own, 0);
                armed.own = 0;
            }
        }
        if froze.is_empty() {
            continue;
        }
        g.fired += 1;
        for t in froze {
            if !g.report.contains(&t) {
                g.report.push(t);
            }
        }
        drop(g);
        if !(quiet && asleep.load(Ordering::SeqCst)) {
            wake.kick();
        }
    }
}

impl Drop for Backstop {
    fn drop(&mut self) {
        lock(&self.shared).stop = true;
        for k in &self.kicks {
            k.kick();
        }
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's perf task clock, standing in for a member's; `None` (with the
    /// reason printed) without root, which the SCHED_FIFO backstop threads need, or perf.
    fn root_and_clock() -> Option<MemberClock> {
        if !rtbox_linux::is_root() {
            eprintln!("skipping: needs root (SCHED_FIFO backstop threads)");
            return None;
        }
        match TaskClock::open(sched::gettid()) {
            Ok(c) => Some(MemberClock::Perf(Arc::new(
                crate::runtime::sensor::PerfClock::new(c, None),
            ))),
            Err(e) => {
                eprintln!("skipping: perf task clock unavailable here ({e})");
                None
            }
        }
    }

    /// A stand-in for a member's `cgroup.freeze`: a plain file in the temporary directory
    /// that records what was written ("0" at first), removed on drop, also when a test fails.
    struct FreezeFile {
        path: std::path::PathBuf,
        file: Arc<File>,
    }

    impl FreezeFile {
        fn new(tag: &str) -> Self {
            let name = format!("rtbox-backstop-{tag}-{}", std::process::id());
            let path = std::env::temp_dir().join(name);
            std::fs::write(&path, b"0").unwrap();
            let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            FreezeFile {
                path,
                file: Arc::new(file),
            }
        }

        fn reset(&self) {
            std::fs::write(&self.path, b"0").unwrap();
        }

        /// What was last written.
        fn read(&self) -> Vec<u8> {
            std::fs::read(&self.path).unwrap()
        }

        /// A member `tid` stopped through this file, charged up to `clock`'s reading now.
        fn handle(&self, tid: i32, clock: &MemberClock) -> Handle {
            Handle {
                tid,
                freeze: self.file.clone(),
                clock: clock.clone(),
                charged: clock.read().unwrap(),
            }
        }
    }

    impl Drop for FreezeFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// Issue 14: copies follow their own stop later, never earlier, and only copies of that
    /// CPU's stops with the same members.
    #[test]
    fn copies_follow_their_own_stops_later() {
        let Some(clock) = root_and_clock() else {
            return;
        };
        let f = FreezeFile::new("follow");
        // Copies as `guard::plan` makes them: `WATCH_SLACK` after their own stop.
        let stop = |tid, home, at| Stop {
            at,
            slack: 0,
            budget: 1,
            members: vec![f.handle(tid, &clock)],
            home,
            pending: false,
            quiet: false,
        };
        let w = WATCH_SLACK;
        let mut plan = vec![
            stop(1, 0, 100 + w),
            stop(2, 0, 100 + w),
            stop(1, 2, 100 + w),
        ];
        follow_own(&mut plan, 0, &[(1, 100 + 3 * w), (2, 50)]);
        let at: Vec<u64> = plan.iter().map(|s| s.at).collect();
        assert_eq!(
            at,
            vec![100 + 3 * w, 100 + w, 100 + w],
            "later: moved to the stop's time; earlier: kept; another CPU's: kept"
        );
    }

    /// Issue 14: a stop made on time disarms the other CPU's watch timer set for its copy
    /// (that CPU's thread would wake 40 us later for nothing), and leaves that CPU's timer for
    /// its own servers armed. Published from either CPU (the loop arms the timers of the CPU it
    /// runs on and kicks the other's thread, which then re-arms its own).
    #[test]
    fn a_stop_made_on_time_disarms_its_copy_elsewhere_not_the_own_stops() {
        let Some(clock) = root_and_clock() else {
            return;
        };
        let me = sched::gettid();
        let online = sched::get_affinity(me).expect("affinity");
        if !(online.contains(&0) && online.contains(&1)) {
            eprintln!("skipping: needs CPUs 0 and 1");
            return;
        }
        for cpu in [0, 1] {
            sched::set_affinity(me, &[cpu]).expect("the publishing thread's CPU");
            stop_on_time_disarms_the_copy(&clock, cpu);
        }
        let _ = sched::set_affinity(me, &online);
    }

    fn stop_on_time_disarms_the_copy(clock: &MemberClock, cpu: u32) {
        let mut b = Backstop::start(&[0, 1]).expect("backstop");
        let f = FreezeFile::new(&format!("copy-{cpu}"));
        let handle = |tid| f.handle(tid, clock);
        let now = rtbox_linux::monotonic_ns();
        let spent = Stop {
            at: now + 100_000_000,
            slack: 0,
            budget: 0,
            members: vec![handle(4242)],
            home: 0,
            pending: false,
            quiet: false,
        };
        // CPU 1: the copy of CPU 0's stop, 40 us later (as `guard::plan` makes it), and a
        // stop of its own 10 s away.
        let copy = Stop {
            at: spent.at + WATCH_SLACK,
            members: vec![handle(4242)],
            ..spent.clone()
        };
        let own_at = now + 10_000_000_000;
        let own = Stop {
            at: own_at,
            budget: 1_000_000_000,
            members: vec![handle(4343)],
            home: 1,
            ..spent.clone()
        };
        b.publish(vec![(0, vec![spent]), (1, vec![copy, own])]);
        // CPU 1's thread arms its timers when the kick reaches it.
        std::thread::sleep(std::time::Duration::from_millis(20));
        {
            let g = lock(&b.shared);
            assert_eq!(
                g.armed[1].watch,
                now + 100_000_000 + WATCH_SLACK,
                "copy watched"
            );
            assert_eq!(g.armed[1].own, own_at, "own stop armed");
        }
        std::thread::sleep(std::time::Duration::from_millis(130));
        assert_eq!(f.read(), b"1", "stopped by CPU 0");
        let g = lock(&b.shared);
        assert_eq!(g.armed[1].watch, 0, "the done copy's timer still armed");
        assert_eq!(g.armed[1].own, own_at, "CPU 1's own stop left unwatched");
        assert_eq!(g.plans[1].len(), 1, "the copy is not dropped");
        drop(g);
        drop(b);
    }

    /// Issue 5: with the loop silent, a planned exhaustion is enforced by the backstop within
    /// the slack and reported once; a server whose members did not spend their budget (they
    /// were preempted) is not stopped; a withdrawn plan never fires.
    #[test]
    fn a_spent_budget_is_stopped_and_reported_an_unspent_one_is_not() {
        let Some(clock) = root_and_clock() else {
            return;
        };
        let mut b = Backstop::start(&[0]).expect("backstop");
        let f = FreezeFile::new("spent");
        let stop = |budget: u64| Stop {
            at: rtbox_linux::monotonic_ns() + 2_000_000,
            slack: SLACK,
            budget,
            members: vec![f.handle(4242, &clock)],
            home: 0,
            pending: false,
            quiet: false,
        };
        // Spent: this thread sleeps, so its clock barely moves; a budget of 0 is spent.
        assert!(b.publish(vec![(0, vec![stop(0)])]).is_empty());
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(f.read(), b"1", "the member was stopped");
        assert_eq!(b.fired(), 1);
        assert_eq!(b.publish(vec![]), vec![4242], "reported once");
        assert!(b.publish(vec![]).is_empty());
        // Not spent: 1 s of budget, and the "member" (this thread) hardly runs.
        f.reset();
        b.publish(vec![(0, vec![stop(1_000_000_000)])]);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(f.read(), b"0", "an unspent budget was stopped");
        assert!(b.publish(vec![]).is_empty());
        // Withdrawn before it is due: never fires.
        b.publish(vec![(0, vec![stop(0)])]);
        b.publish(vec![]);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(f.read(), b"0");
        assert_eq!(b.fired(), 1);
        drop(b);
    }

    /// Issue 5: a stop planned behind one whose members did not run is still checked (a
    /// member thawed while its server looked idle ran 1.04 ms unplanned), and a plan published
    /// from another CPU reaches the thread (its timer is armed from its own CPU).
    #[test]
    fn every_due_stop_is_checked_and_a_plan_from_another_cpu_arms_the_timer() {
        let Some(clock) = root_and_clock() else {
            return;
        };
        let me = sched::gettid();
        let orig = sched::get_affinity(me).expect("affinity");
        let mut b = Backstop::start(&[0]).expect("backstop");
        // Publish from CPU 1 where there is one: the kick path.
        let away = orig.contains(&1) && sched::set_affinity(me, &[1]).is_ok();
        let files = [FreezeFile::new("idle"), FreezeFile::new("behind")];
        let at = rtbox_linux::monotonic_ns() + 2_000_000;
        let stop = |tid: i32, f: &FreezeFile, budget: u64| Stop {
            at,
            slack: SLACK,
            budget,
            members: vec![f.handle(tid, &clock)],
            home: 0,
            pending: false,
            quiet: false,
        };
        // First in plan order: 1 s left, not spent. Behind it: nothing left.
        let plan = vec![stop(1, &files[0], 1_000_000_000), stop(2, &files[1], 0)];
        assert!(b.publish(vec![(0, plan)]).is_empty());
        std::thread::sleep(std::time::Duration::from_millis(50));
        let _ = sched::set_affinity(me, &orig);
        assert_eq!(files[0].read(), b"0", "unspent budget stopped");
        assert_eq!(
            files[1].read(),
            b"1",
            "spent budget behind an unspent one not stopped (published from CPU 1: {away})"
        );
        assert_eq!(b.publish(vec![]), vec![2]);
        drop(b);
    }

    /// Issue 14: a stop whose members the step is thawing is not watched before the thaw (they
    /// cannot run), is watched after it, and one on the loop's own CPU only once the loop
    /// sleeps ([`Locked::thawed`], [`Backstop::sleep_until`]).
    #[test]
    fn a_pending_stop_waits_for_the_thaw_and_on_the_loops_cpu_for_its_sleep() {
        let Some(clock) = root_and_clock() else {
            return;
        };
        let me = sched::gettid();
        let orig = sched::get_affinity(me).expect("affinity");
        sched::set_affinity(me, &[0]).expect("this thread on CPU 0");
        let mut b = Backstop::start(&[0]).expect("backstop");
        let f = FreezeFile::new("pending");
        let reset = || f.reset();
        let stop = |home: u32| Stop {
            at: rtbox_linux::monotonic_ns() + 1_000_000,
            slack: 0,
            budget: 0,
            members: vec![f.handle(4242, &clock)],
            home,
            pending: true,
            quiet: false,
        };
        let frozen = || f.read() == b"1";
        let pause = || std::thread::sleep(std::time::Duration::from_millis(20));
        // Home on another CPU than the loop's: watched from the thaw on.
        reset();
        b.publish_from(vec![(0, vec![stop(7)])], rtbox_linux::monotonic_ns());
        pause();
        assert!(!frozen(), "a pending stop fired before its members' thaw");
        b.lock().thawed(&[4242], rtbox_linux::monotonic_ns());
        pause();
        assert!(frozen(), "the stop was not watched after the thaw");
        assert_eq!(b.publish(vec![]), vec![4242]);
        // Home on the loop's CPU: still pending after the thaw, watched once the loop sleeps.
        reset();
        b.publish_from(vec![(0, vec![stop(0)])], rtbox_linux::monotonic_ns());
        b.lock().thawed(&[4242], rtbox_linux::monotonic_ns());
        pause();
        assert!(
            !frozen(),
            "a stop on the loop's CPU fired before the loop slept"
        );
        b.sleep_until(rtbox_linux::monotonic_ns() + 20_000_000, &[]);
        pause();
        assert!(frozen(), "the stop was not watched after the loop slept");
        drop(b);
        let _ = sched::set_affinity(me, &orig);
    }
}
