//! Which sensor tells the loop what its members do, and the members' clocks.
//!
//! - `bpf` (`rtbox_bpf`): the scheduler's tracepoints keep each member's runtime as the kernel
//!   counts it (`sum_exec_runtime` at every switch, plus the time since its switch-in while it
//!   runs) and its readiness, in memory the loop reads without a system call; a ring buffer
//!   wakes the loop only when a server gains its first or loses its last runnable member, or a
//!   member forks or exits. The loop sleeps until the core's next timer or such an event: no
//!   poll, no perf read per member, no /proc read on the hot path.
//! - `perf`: a perf task clock per member, `/proc/<tid>/stat` for readiness, and a poll every
//!   1-4 ms to notice wake-ups and blocks (docs/runtime.md, steps 1, 2, 6); a sleeping member
//!   is watched instead ([`PerfClock`]: its switch-in wakes the loop), not read at every step.
//!
//! `auto` takes `bpf` when the program loads (root with BTF), else `perf`.

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rtbox_bpf::{Event, Registration, Sensor};
use rtbox_core::{Scheduler, ServerId};
use rtbox_linux::perf::{SwitchIn, SwitchWatch, TaskClock};
use rtbox_linux::{procfs, LinuxError};
use rtbox_model::{LoopCost, Nanos, System};

use super::members::{Member, Members, THAW_GRACE};

/// The sensor asked for (`rtbox daemon --sensor`). The default is `auto`: BPF where its
/// program loads, else perf, saying so. The BPF loop took 1.5-2x less CPU than the perf loop
/// in every case measured (docs/benchmarks-runtime.md, "Sleeping members", "The loop on full
/// CPUs"), and with it Figure 11's real runs agree with the simulator for every plug-in
/// (docs/exsched.md). Admission follows the same choice (`rtbox check`, the Python package's
/// `check`: [`SensorChoice::probe`]). On a busy machine the BPF loop once lost a box up to
/// half its share to the kernel's fair server; the cause was the loop sleeping pinned beside
/// the box, which it no longer does ([`super::Runtime::loop_cpu`]); global boxes sharing
/// their CPUs overran by milliseconds with it until a thaw stopped being taken for a run
/// ([`thaw_taken`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SensorChoice {
    Bpf,
    Perf,
    #[default]
    Auto,
}

impl std::str::FromStr for SensorChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "bpf" => Ok(SensorChoice::Bpf),
            "perf" => Ok(SensorChoice::Perf),
            "auto" => Ok(SensorChoice::Auto),
            _ => Err(format!("unknown sensor {s:?} (bpf, perf or auto)")),
        }
    }
}

/// The sensor in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SensorKind {
    Bpf,
    Perf,
}

impl SensorKind {
    pub fn name(self) -> &'static str {
        match self {
            SensorKind::Bpf => "bpf",
            SensorKind::Perf => "perf",
        }
    }

    /// The loop's cost as admission counts it with this sensor.
    pub fn loop_cost(self) -> LoopCost {
        match self {
            SensorKind::Bpf => LoopCost::BPF,
            SensorKind::Perf => LoopCost::DEFAULT,
        }
    }
}

impl SensorChoice {
    /// The sensor `rtbox daemon` takes without `--sensor`: `RTBOX_SENSOR` when set (a wrong
    /// value is an error, not silently replaced), else the default. `rtbox check` admits with
    /// the same one, so that what it admits is what the daemon admits.
    pub fn daemon_default() -> Result<SensorChoice, String> {
        match std::env::var("RTBOX_SENSOR") {
            Ok(v) => v.parse().map_err(|e| format!("RTBOX_SENSOR={v:?}: {e}")),
            Err(_) => Ok(SensorChoice::default()),
        }
    }

    /// The sensor this choice means on a machine like this one, without loading anything
    /// (`rtbox check`): `auto` is bpf where this binary has the program and the kernel has BTF.
    pub fn probe(self) -> SensorKind {
        match self {
            SensorChoice::Perf => SensorKind::Perf,
            SensorChoice::Bpf => SensorKind::Bpf,
            SensorChoice::Auto if rtbox_bpf::available().is_ok() => SensorKind::Bpf,
            SensorChoice::Auto => SensorKind::Perf,
        }
    }

    /// The sensor `auto` would take on this machine now (loads and drops the program).
    pub fn resolve(self) -> SensorKind {
        match self {
            SensorChoice::Perf => SensorKind::Perf,
            SensorChoice::Bpf => SensorKind::Bpf,
            SensorChoice::Auto => match Sensor::load() {
                Ok(_) => SensorKind::Bpf,
                Err(_) => SensorKind::Perf,
            },
        }
    }
}

/// Loads the sensor for `choice`: `bpf` must load; `auto` falls back to perf, saying why.
pub fn load(choice: SensorChoice) -> Result<Option<Arc<Sensor>>, rtbox_bpf::SensorError> {
    match choice {
        SensorChoice::Perf => Ok(None),
        SensorChoice::Bpf => Sensor::load().map(|s| Some(Arc::new(s))),
        SensorChoice::Auto => match Sensor::load() {
            Ok(s) => Ok(Some(Arc::new(s))),
            Err(e) => {
                tracing::warn!(error = %e, "BPF sensor unavailable; using the perf sensor (polling)");
                Ok(None)
            }
        },
    }
}

/// The sensor's server slot of a core server (`None`: not placed).
pub fn slot(server: Option<ServerId>) -> u32 {
    server.map_or(rtbox_bpf::MAX_SERVERS as u32 - 1, |s| s.0)
}

/// A member's CPU clock: its perf task clock, or its figures in the BPF sensor.
#[derive(Debug, Clone)]
pub enum MemberClock {
    Perf(Arc<PerfClock>),
    Bpf(Arc<Registration>),
}

/// A member's perf task clock, and the watch of its switches (`SwitchIn`, where the kernel
/// gives it) that lets the perf loop leave it unread, unfrozen and undecided while it sleeps:
/// armed when a step finds it asleep, it makes the loop's watch readable the moment the
/// member runs, as the BPF sensor's ring buffer does (issue 14: with 500 sleeping members the
/// perf loop read, froze and thawed every one of them every period, and took the busy
/// member's share).
#[derive(Debug)]
pub struct PerfClock {
    clock: TaskClock,
    switches: Option<SwitchIn>,
    /// Armed on the loop's watch, asleep since (until a step sees it ran).
    watched: AtomicBool,
    /// Its event hung up (the thread exited or was replaced by an `execve`): never watched
    /// again, read at every step as without the watch.
    hung_up: AtomicBool,
}

impl PerfClock {
    pub fn new(clock: TaskClock, switches: Option<SwitchIn>) -> Self {
        PerfClock {
            clock,
            switches,
            watched: AtomicBool::new(false),
            hung_up: AtomicBool::new(false),
        }
    }

    /// Watched, and not switched in since it was armed.
    pub fn asleep(&self) -> bool {
        self.watched.load(Ordering::Acquire) && !self.ran()
    }

    pub fn watched(&self) -> bool {
        self.watched.load(Ordering::Acquire)
    }

    /// Switched since it was armed (a read of its mapped ring).
    pub fn ran(&self) -> bool {
        self.switches.as_ref().is_some_and(SwitchIn::ran)
    }

    /// Arms its watch on `watch` for a member found asleep with `charged` on its clock; it
    /// stays watched only if the clock still reads `charged` after the arming (it did not
    /// run between the look and the arming). Whether it is watched.
    pub fn watch(&self, watch: &SwitchWatch, charged: u64) -> bool {
        let Some(sw) = self
            .switches
            .as_ref()
            .filter(|_| !self.hung_up.load(Ordering::Acquire))
        else {
            return false;
        };
        if watch.arm(sw).is_err() {
            return false;
        }
        if self.clock.read().ok() != Some(charged) {
            watch.disarm(sw);
            return false;
        }
        self.watched.store(true, Ordering::Release);
        true
    }

    /// Its event hung up: off the watch for good.
    pub fn hang_up(&self, watch: &SwitchWatch) {
        self.hung_up.store(true, Ordering::Release);
        self.unwatch(watch);
    }

    /// Disarms its watch (it ran, or it leaves).
    pub fn unwatch(&self, watch: &SwitchWatch) {
        if self.watched.swap(false, Ordering::AcqRel) {
            if let Some(sw) = &self.switches {
                watch.disarm(sw);
            }
        }
    }
}

impl MemberClock {
    /// The member's clock from `sensor` when there is one (starting from the kernel's figure
    /// and readiness in /proc), else its perf task clock.
    /// `switches`: with perf, also open the watch of its switches ([`PerfClock`]).
    pub fn open(tid: i32, sensor: Option<&Arc<Sensor>>, switches: bool) -> Result<Self, String> {
        match sensor {
            Some(s) => {
                let runtime = procfs::SchedstatFile::open(tid)
                    .map_err(|e| e.to_string())?
                    .sum_exec_runtime()
                    .ok_or("schedstat unreadable")?;
                let ready = procfs::stat(tid).is_ok_and(|st| st.runnable());
                Registration::new(s, tid as u32, slot(None), runtime, ready)
                    .map(|r| MemberClock::Bpf(Arc::new(r)))
                    .map_err(|e| e.to_string())
            }
            None => TaskClock::open(tid)
                .map(|c| {
                    let sw = switches.then(|| SwitchIn::open(tid).ok()).flatten();
                    MemberClock::Perf(Arc::new(PerfClock::new(c, sw)))
                })
                .map_err(|e| e.to_string()),
        }
    }

    /// The same member's clock under its new tid (an exec by a thread other than its
    /// process's leader gave it the leader's): the BPF sensor knows members by tid and
    /// registers it again on the same server (its charge goes on from its last figure: the
    /// kernel's runtime is the same task's); a perf clock is bound to the task and is kept.
    pub fn renamed(self, tid: i32, sensor: Option<&Arc<Sensor>>) -> Result<Self, String> {
        let MemberClock::Bpf(old) = &self else {
            return Ok(self);
        };
        let (server, every) = old.placement();
        let clock = MemberClock::open(tid, sensor, false)?;
        if let MemberClock::Bpf(r) = &clock {
            r.set_server(server);
            r.set_every(every);
        }
        Ok(clock)
    }

    /// CPU time consumed so far, ns.
    pub fn read(&self) -> Result<u64, LinuxError> {
        match self {
            MemberClock::Perf(c) => c.clock.read(),
            MemberClock::Bpf(r) => Ok(r.runtime_now()),
        }
    }

    /// The loop is about to stop the member (its block wakes nobody).
    pub fn quiet(&self) {
        if let MemberClock::Bpf(r) = self {
            r.quiet();
        }
    }

    /// Blocked by its own doing, as the BPF sensor saw it last, or (perf) watched and not run
    /// since its watch was armed. Such a member is not stopped: it cannot run, and a freeze
    /// wakes it.
    pub fn asleep(&self) -> bool {
        match self {
            MemberClock::Perf(c) => c.asleep(),
            MemberClock::Bpf(r) => r.read(rtbox_bpf::now_ns()).state == rtbox_bpf::State::Blocked,
        }
    }

    /// A mark of what the member has done (BPF sensor: how often it was switched out, while it
    /// is blocked): two equal marks say it did not run between them. `None` while it may be
    /// running or has exited, and with perf (no such figure).
    pub fn idle_mark(&self) -> Option<u64> {
        match self {
            MemberClock::Perf(_) => None,
            MemberClock::Bpf(r) => {
                let x = r.read(rtbox_bpf::now_ns());
                (x.state == rtbox_bpf::State::Blocked).then_some(x.switches)
            }
        }
    }

    /// Tells the sensor the member's server, and whether its box places its members across
    /// vCPUs (`every`: each of its wake-ups and blocks is news to the loop).
    pub fn place(&self, server: Option<ServerId>, every: bool) {
        if let MemberClock::Bpf(r) = self {
            r.set_server(slot(server));
            r.set_every(every);
        }
    }
}

/// Charges a member whose clock is the BPF sensor's and tells the core whether it is
/// runnable (the sensor's step 1 and 2).
///
/// The figure of a running member is its kernel runtime at switch-in plus wall time since, so
/// host steal is charged while it runs; at its next switch the kernel's own figure (which
/// leaves steal out) comes back lower. That difference is the steal: the charge follows the
/// kernel's figure, and the steal is refunded by the rule of the perf path (`charge.rs`):
/// only to a server that throttled the member, whose budget is already the next period's.
/// Readiness: frozen (a frozen member is blocked for the kernel but wants to run), thawed and
/// not yet seen running ([`THAW_GRACE`]), or runnable or running for the kernel.
pub fn charge_bpf(m: &mut Member, r: rtbox_bpf::Reading, sched: &mut Scheduler, now: Nanos) {
    let frozen = m.frozen_ready();
    let last = m.charge.last();
    if r.runtime_ns > last {
        let d = m.charge.advance(r.runtime_ns);
        if let Some(s) = m.charge_to {
            let _ = sched.charge(now, s, d);
        }
    } else if r.runtime_ns < last && r.exact {
        let steal = m.charge.rewind(r.runtime_ns);
        if let Some(s) = m.charge_to.or(m.last_server) {
            if frozen && sched.server(s).throttled {
                let _ = sched.refund(s, steal);
            }
        }
    }
    if m.thawed_at.is_some() && thaw_taken(m.thaw_mark.unwrap_or(0), &r) {
        m.thawed_at = None;
    }
    let thawing = m
        .thawed_at
        .is_some_and(|t| now.saturating_sub(t) < THAW_GRACE);
    let ready = frozen || thawing || r.state.ready();
    if ready != m.ready {
        m.ready = ready;
        let _ = if ready {
            sched.wake(now, m.task, super::localprio::native_edf_key(m.local_prio))
        } else {
            sched.block(now, m.task)
        };
    }
}

/// Rule: the loop's thaw of a member has taken effect once the sensor shows a wake-up after
/// it (`woke_before`: the member's wake-up count read just before the thaw) or the member
/// runnable for the kernel (a freeze that had not taken hold wakes nothing on the thaw). Until
/// then the member counts as ready, within [`THAW_GRACE`] (a member that never entered the
/// freezer and blocked by itself wakes nothing either).
///
/// Growth of its figure is no such sign. After a thaw, a short run and a backstop freeze the
/// loop thaws the member again; the next step can read that run, exact, with the member still
/// blocked in the freezer. Taken as a sign of the second thaw, that reading made the member
/// blocked, it was put to rest, and when the thaw's wake-up came (no news to the loop: the
/// wake-up is its own doing) it ran unwatched: 2.04 ms on a 2 ms / 10 ms server, traced with
/// four global boxes on two CPUs (issue 14).
pub fn thaw_taken(woke_before: u64, r: &rtbox_bpf::Reading) -> bool {
    r.wakeups > woke_before || r.state.ready()
}

/// Takes the sensor's events (which woke the loop): a thread or process forked by a member
/// joins the member's box at once (the fork's parent is a member by the program's check); an
/// exited member leaves. Readiness changes need nothing here: the charge phase reads them.
/// Whether a thread joined.
pub fn take_events(
    sensor: &Sensor,
    members: &mut Members,
    sched: &mut Scheduler,
    system: &System,
    now: Nanos,
) -> bool {
    let mut joined = false;
    for e in sensor.drain() {
        tracing::trace!(event = ?e, "sensor event");
        match e {
            Event::Fork { tid, parent, .. } => {
                let (tid, parent) = (tid as i32, parent as i32);
                let Some(bx) = members.by_tid.get(&parent).map(|m| m.box_name.clone()) else {
                    continue;
                };
                if system.get(&bx).is_some() && !members.by_tid.contains_key(&tid) {
                    members.add_threads(sched, &bx, &[tid]);
                    joined = true;
                }
            }
            Event::Exit { tid, slot, .. } => {
                // The exit of the registration the member has now: an older one's (the
                // leader's, whose tid an exec gave to this member) is not this member's.
                let tid = tid as i32;
                let other = members.by_tid.get(&tid).is_some_and(
                    |m| matches!(&m.clock, Some(MemberClock::Bpf(r)) if r.slot() != slot),
                );
                if !other {
                    members.forget_exited(sched, now, tid);
                }
            }
            Event::Exec { tid, old, .. } => {
                members.exec_replaced(sched, now, old as i32, tid as i32, true);
            }
            Event::ServerActive { .. } | Event::ServerIdle { .. } => {}
        }
    }
    joined
}

/// The sensor's descriptor to sleep on, if the loop uses it.
pub fn wake_fd(sensor: Option<&Arc<Sensor>>) -> Option<BorrowedFd<'_>> {
    // SAFETY: the epoll descriptor lives as long as the sensor, which outlives the borrow.
    sensor.map(|s| unsafe { BorrowedFd::borrow_raw(s.fd()) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtbox_bpf::{Reading, State};

    #[test]
    fn a_thaw_takes_effect_with_a_wake_up_after_it_not_with_growth() {
        let r = |state, wakeups, runtime_ns| Reading {
            runtime_ns,
            state,
            cpu: 0,
            exact: state != State::Running,
            switches: 0,
            wakeups,
        };
        // The run between an earlier thaw and a backstop freeze, read after the second thaw:
        // grown, but still blocked with no wake-up since.
        assert!(!thaw_taken(7, &r(State::Blocked, 7, 1_002_900)));
        // The thaw's wake-up came, and the member blocked again by itself.
        assert!(thaw_taken(7, &r(State::Blocked, 8, 1_002_900)));
        // Woken or running (a freeze that never took hold wakes nothing).
        assert!(thaw_taken(7, &r(State::Runnable, 7, 1_000_000)));
        assert!(thaw_taken(7, &r(State::Running, 7, 1_000_000)));
    }

    #[test]
    fn choices_parse_and_kinds_have_their_loop_cost() {
        assert_eq!("bpf".parse::<SensorChoice>(), Ok(SensorChoice::Bpf));
        assert_eq!("perf".parse::<SensorChoice>(), Ok(SensorChoice::Perf));
        assert_eq!("auto".parse::<SensorChoice>(), Ok(SensorChoice::Auto));
        assert_eq!(SensorChoice::default(), SensorChoice::Auto);
        assert!("ebpf"
            .parse::<SensorChoice>()
            .unwrap_err()
            .contains("bpf, perf or auto"));
        assert_eq!(SensorChoice::Perf.resolve(), SensorKind::Perf);
        assert_eq!(SensorKind::Perf.loop_cost(), LoopCost::DEFAULT);
        assert!(
            SensorKind::Bpf.loop_cost().poll > LoopCost::DEFAULT.scan,
            "no poll with bpf"
        );
        assert_eq!(slot(Some(ServerId(3))), 3);
        assert_eq!(slot(None), rtbox_bpf::MAX_SERVERS as u32 - 1);
    }
}
