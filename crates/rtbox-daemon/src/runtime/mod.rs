//! The enforcement runtime: members, the scheduling core in Measured mode, and the mapping of
//! its decisions onto real threads.
//!
//! Per CPU the non-throttled servers are ranked by EDF (deadline, then server id) and each rank
//! gets a band of SCHED_FIFO priorities inside [`PRIO_LO`]..=[`PRIO_HI`], most urgent band on
//! top; inside a band members keep their relative priorities (by the rank of their original
//! RT priority within the box). A member whose server is throttled is frozen (hard mode, cgroup
//! v2 freeze of its own threaded cgroup) or demoted to SCHED_IDLE (reclaim mode). Budgets are
//! charged with the perf task clock of each member.
//!
//! [`Runtime`] owns the core and one part per kind of data, and [`Runtime::step`] runs the
//! phases in order (docs/runtime.md, "Module layout"):
//! - [`members`]: the members table, journal and membership scans; charging;
//! - [`bands`]: desired states from the core's state (pure);
//! - [`apply`]: a desired state onto one thread;
//! - [`periods`]: per-server figures across periods, monotonic counters;
//! - [`guard`]: the backstop's plans, publication, lock and figures;
//! - [`wakeup`]: when and on which CPU the loop sleeps;
//! - [`sensor`]: the BPF sensor or the perf clocks, and the members' clocks.

mod ahead;
pub mod apply;
pub mod bands;
pub mod error;
mod forkwait;
pub mod guard;
mod host;
pub mod jobs;
pub mod latency;
pub mod localprio;
pub mod members;
pub mod periods;
pub mod pinnames;
pub mod plugins;
pub mod rest;
pub mod rtgrants;
pub mod sensor;
pub mod stops;
pub mod wakeup;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::backstop::{Backstop, Handle};
use crate::loopcost::LoopUsage;
use rtbox_core::{Accounting, Event, Options, Probes, Scheduler, ServerId, TaskId};
use rtbox_linux::cgroup::{self, Layout};
use rtbox_linux::journal::Journal;
use rtbox_linux::procevents::ProcEvents;
use rtbox_linux::stopgroup::Stop;
use rtbox_model::{
    admit_on_host, BoxSpec, CpuSet, HostLoad, LoopCost, Mode, Nanos, Platform, PrioRange, System,
};

use apply::Applied;
use guard::{Guard, PlanServer, ServerMembers};
use members::Members;
use periods::{Counters, Periods, ServerFigures, ServerKey};
use sensor::{SensorChoice, SensorKind};
use wakeup::{LoopHome, LoopPin};

/// Per CPU its non-throttled servers in EDF order ([`Scheduler::edf_order`]).
type EdfOrder = BTreeMap<u32, Vec<ServerId>>;

pub use bands::{shared_nice, PRIO_HI, PRIO_LO};
pub use error::RuntimeError;
pub use members::Target;
pub use periods::ServerStats;
pub use wakeup::{wakeup_time, MIN_GRANT, MIN_SLEEP};

/// The full /proc scan's interval with the BPF sensor, or the perf loop with process events
/// and its watch of sleepers: only a safety net there (the sensor or the proc connector
/// reports members' forks and exits). At 100 ms a full scan of 500 sleeping members (their
/// stat, children and policy, ~20 us each) was most of the daemon's CPU (`perf record`).
pub const BPF_FULL_SCAN: Nanos = 1_000_000_000;

/// The daemon's enforcement loop priority (above members and the watchdog).
pub const LOOP_PRIO: u32 = 98;

/// Runtime options.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    pub state_file: PathBuf,
    /// Shortest poll interval of the loop (thread wake/block detection, requests): the loop
    /// polls after the smallest budget left of any running server, clamped to `poll..=scan`
    /// ([`Runtime::poll_interval`]).
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
    /// [`Runtime::follow_exhaustion`]); `None`: with the perf sensor only (see
    /// [`Runtime::loop_cpu`] for why not with BPF).
    pub follow: Option<bool>,
    /// When the loop does not follow: sleep on the servers' CPU when they are all on one
    /// ([`wakeup::home_cpu`], [`wakeup::LoopHome`]).
    pub home: bool,
    /// With the perf sensor, watch sleeping members' switches so that a step need not read,
    /// freeze or decide them while they sleep ([`sensor::PerfClock`], where the kernel gives
    /// per-thread switch records). Default on; `RTBOX_PERF_WATCH=0` turns it off (A/B).
    pub perf_watch: bool,
    /// Experiments: also measure every period with the kernel's accounting, read while the
    /// members are frozen (one schedstat read per member and replenishment).
    pub audit: bool,
    /// Per-CPU backstop threads that stop members at planned exhaustions when the loop is late
    /// (see `backstop.rs`).
    pub backstop: bool,
    /// The members' SCHED_FIFO band (`--priorities`); `None`: chosen from the host's threads
    /// (`hostwatch::default_band`).
    pub priorities: Option<PrioRange>,
    /// CPU time of one loop step admitted with the BPF sensor ([`LoopCost::BPF`]); with
    /// `step_cost` 0 the loop is not admitted with either sensor.
    pub bpf_step_cost: Nanos,
    /// Which sensor tells the loop what members do ([`sensor`]). Default: `RTBOX_SENSOR`
    /// (`bpf`, `perf`, `auto`; the test suites run once with each), else `auto`.
    pub sensor: SensorChoice,
    /// The CPU latency limit (microseconds) held while there are boxes ([`latency`]); `None`:
    /// idle states are left alone. Default 0: idle CPUs poll, so wake-ups from idle are fast.
    pub cpu_latency: Option<u32>,
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
            bpf_step_cost: LoopCost::BPF.step,
            follow: None,
            home: true,
            perf_watch: std::env::var("RTBOX_PERF_WATCH").map_or(true, |v| v != "0"),
            audit: false,
            backstop: true,
            priorities: None,
            sensor: std::env::var("RTBOX_SENSOR")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or_default(),
            cpu_latency: Some(0),
        }
    }
}

/// The runtime's whole state: the core and the parts that own the rest.
pub struct Runtime {
    pub layout: Layout,
    platform: Platform,
    specs: Vec<BoxSpec>,
    system: System,
    sched: Scheduler,
    /// CLOCK_MONOTONIC at core time 0.
    epoch: u64,
    members: Members,
    periods: Periods,
    guard: Guard,
    pin: LoopPin,
    /// Where the loop sleeps when it does not follow (see [`Runtime::follow_exhaustion`]).
    home: LoopHome,
    opts: RuntimeOptions,
    /// Log every core event at debug level (environment RTBOX_TRACE=1).
    trace: bool,
    /// The loop's own CPU use against the admitted step cost.
    loop_usage: LoopUsage,
    /// Periodic tasks of the task API and their job pages (`jobs.rs`).
    jobs: jobs::Jobs,
    /// The host's own real-time work and the members' band (`runtime/host.rs`).
    host: host::HostState,
    /// The BPF sensor, when the loop uses it (also held by the members table).
    sensor: Option<std::sync::Arc<rtbox_bpf::Sensor>>,
    /// When the last step began (core time): see [`Runtime::next_wakeup`].
    step_started: Nanos,
    /// Until when the loop polls fast for new members' own priority changes (`forkwait.rs`).
    watch_until: Nanos,
    /// Kicked by the socket thread for each request; wakes the loop's sleep (`forkwait.rs`).
    requests: Option<std::sync::Arc<rtbox_linux::fdwait::EventFd>>,
    /// When a request last woke the loop (CLOCK_MONOTONIC).
    requests_woke: u64,
    /// The plug-in groups of plug-in boxes (`plugins.rs`).
    plugins: plugins::PluginDriver,
    /// The servers whose stops the backstop owns (BPF sensor; see [`wakeup::owned_stop`]).
    owned: BTreeSet<ServerId>,
    /// The owned servers whose exhaustion needs no step ([`backstop::Stop::quiet`]).
    quiet: BTreeSet<ServerId>,
    /// The core's copies `quiet_servers` asks, kept between steps (their buffers reused).
    probes: Probes,
    /// Configured tasks of pinned boxes on the analysis's vCPUs (`pinnames.rs`).
    pin_names: pinnames::PinNames,
    /// The CPU latency limit held while there are boxes (`latency.rs`).
    latency: latency::IdleLatency,
    /// Replenishments planned ahead, made with a short step (`ahead.rs`).
    ahead: ahead::Ahead,
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

/// The members `changes` thaw: frozen before, running in the state `decide` recorded.
fn thawing(members: &Members, changes: &[(i32, Option<apply::Applied>)]) -> BTreeSet<i32> {
    changes
        .iter()
        .filter(|(_, prev)| prev.as_ref().is_some_and(|p| p.frozen))
        .filter(|(t, _)| members.by_tid.get(t).is_some_and(|m| !m.frozen()))
        .map(|(t, _)| *t)
        .collect()
}

/// A member as `bands::decide` sees it; `bpf`: the BPF sensor's rules (asleep members; with
/// perf, only a watched member is known asleep).
fn member_view<'a>(
    tid: i32,
    m: &'a members::Member,
    sched: &Scheduler,
    bpf: bool,
) -> bands::MemberView<'a> {
    bands::MemberView {
        tid,
        box_name: &m.box_name,
        local_prio: m.local_prio,
        ready: m.ready,
        asleep: (bpf || m.watched()) && !m.ready && !m.frozen(),
        placed: sched.placement(m.task),
        last_server: m.last_server,
        applied: m.applied.as_ref(),
        original: m.snapshot.attr,
        original_cpus: &m.snapshot.affinity,
    }
}

/// With the BPF sensor a placed member asleep keeps the server it is charged to (and its last
/// one), live or not, until it wakes: it sits on that server's CPU (its state is left as it
/// is), so a wake-up there is that server's news. On a throttled server it is the server's
/// first runnable member, and the sensor wakes the loop at once, which stops or moves it;
/// moved to a live server as before, it was counted where the busy member already ran, woke
/// nobody and ran on the throttled server's CPU unseen until the next step. And with its
/// server following its box's live servers, every throttle and replenishment moved every
/// sleeper (500 of them: most of the loop's CPU). One charged to none (a reclaim member asleep
/// while its box was spent) takes the decision's server.
fn keeps_server(m: &members::Member) -> bool {
    m.placed_asleep() && m.charge_to.is_some()
}

/// Whether a member just decided (with no change to carry out) may rest (`rest.rs`): asleep
/// and placed, so that `decide` leaves its state as it is, with the sensor's marks telling
/// when its figures move. Its server is then a fixed point of the decision until its box's
/// live servers change.
fn restful(m: &members::Member) -> bool {
    !m.ready
        && m.placed_asleep()
        && (matches!(m.clock, Some(sensor::MemberClock::Bpf(_))) || m.watched())
}

/// Debug builds: the decisions of a step that visited only the active members are the full
/// computation's. Each visited member's decision is the one `bands::decide` over every member
/// gives it, the cached local ranks are every member's, and for each resting member the full
/// decision changes nothing: asleep and placed, it keeps its state and its server
/// ([`keeps_server`]); one charged to no server rests on the same decision.
#[cfg(debug_assertions)]
fn check_rest(
    core: &bands::CoreView<'_>,
    boxes: &bands::BoxViews<'_>,
    members: &BTreeMap<i32, members::Member>,
    rest: &rest::Rest,
    decisions: &[bands::Decision],
    sched: &Scheduler,
    bpf: bool,
) {
    let all: Vec<_> = members
        .iter()
        .map(|(t, m)| member_view(*t, m, sched, bpf))
        .collect();
    assert_eq!(rest.len(), members.len(), "rest table out of date");
    assert_eq!(rest.ranks(), &bands::owned_ranks(&all), "local ranks");
    let full: BTreeMap<i32, bands::Decision> = bands::decide(core, boxes, &all)
        .into_iter()
        .map(|d| (d.tid, d))
        .collect();
    for d in decisions {
        assert_eq!(Some(d), full.get(&d.tid), "member {}", d.tid);
    }
    for tid in rest.resting() {
        let (m, d) = (&members[&tid], &full[&tid]);
        assert!(
            restful(m),
            "member {tid} rests but is not asleep and placed"
        );
        if m.charge_to.is_none() {
            assert_eq!(
                (d.charge_to, d.last_server),
                (m.charge_to, m.last_server),
                "member {tid} rests unbound on an outdated decision"
            );
        }
    }
}

/// A plug-in's timer or a plug-in task's next release (`plugins.rs`) brings the loop's
/// wake-up `at` forward, but never closer than [`MIN_GRANT`] (no spinning).
fn plugins_wakeup(at: Nanos, now: Nanos, plugin: Option<Nanos>) -> Nanos {
    plugin.map_or(at, |p| at.min(p.max(now + MIN_GRANT)))
}

/// The owned servers whose exhaustions need no loop step ([`backstop::Stop::quiet`]), asked of
/// the core ([`Scheduler::quiet_exhaustion`], which runs a copy of itself: ~10 us with a
/// few members) only where the answer can save a step. Each CPU's servers are asked in the
/// order of their planned exhaustions (`exhaustion`, the core's plan), each on the core as it
/// is after the one before (a chain: on a CPU two boxes fill, the first's exhaustion lets the
/// second's members run, which the kernel does by itself when they are `placed` there,
/// thawed: `placed(task, cpu)`; then the second's only stops it), and only while no step
/// comes first anyway: a replenishment (also a quiet server's own), or a loud exhaustion.
/// Asked for every server alone on its CPU, the copies were 8 % of the loop's CPU in seed 002
/// (`perf record`), where most exhaustions come after a job ends anyway. A server not asked
/// is loud: its stop wakes the loop, as before quiet stops.
fn quiet_servers(
    sched: &Scheduler,
    probes: &mut Probes,
    exhaustion: &BTreeMap<u32, Vec<(ServerId, Nanos)>>,
    owned: &BTreeSet<ServerId>,
    placed: impl Fn(TaskId, u32) -> bool,
    waiting: impl Fn(ServerId) -> bool,
) -> BTreeSet<ServerId> {
    let mut chains: Vec<&Vec<(ServerId, Nanos)>> =
        exhaustion.values().filter(|v| !v.is_empty()).collect();
    chains.sort_unstable_by_key(|v| v[0].1);
    let mut horizon = sched.next_replenishment().unwrap_or(Nanos::MAX);
    let mut quiet = BTreeSet::new();
    for chain in chains {
        probes.start_chain();
        for (i, &(s, at)) in chain.iter().enumerate() {
            // The CPU's next server in the plan must have a member already thawed there, or
            // its exhaustion is loud: not worth a copy of the core (seed 002's boxes, where
            // exhaustions are rare, paid ~10 % more per step for asking).
            let next_waits = chain.get(i + 1).is_none_or(|&(n, _)| waiting(n));
            let asked = at < horizon && next_waits && owned.contains(&s);
            if !(asked && probes.quiet_exhaustion(sched, s, &placed)) {
                horizon = horizon.min(at);
                break;
            }
            quiet.insert(s);
            horizon = horizon.min(sched.server(s).deadline);
        }
    }
    probes.finish();
    quiet
}

/// The loop's cost for `kind`: the options' step cost; the perf sensor polls at the options'
/// intervals, the BPF sensor only at its safety scan ([`LoopCost::BPF`]).
fn loop_cost(opts: &RuntimeOptions, kind: SensorKind) -> LoopCost {
    match kind {
        SensorKind::Perf => opts.loop_cost(),
        SensorKind::Bpf => LoopCost {
            step: if opts.step_cost == 0 {
                0
            } else {
                opts.bpf_step_cost
            },
            ..LoopCost::BPF
        },
    }
}

/// The system and a scheduler for `specs`, if admitted with the loop's cost.
fn build(
    platform: &Platform,
    specs: &[BoxSpec],
    cost: LoopCost,
    load: &HostLoad,
) -> Result<(System, Scheduler), RuntimeError> {
    let system = System::new(platform.clone(), specs.to_vec(), vec![])?;
    let adm = admit_on_host(&system, cost, load);
    if !adm.admitted() {
        return Err(RuntimeError::NotAdmitted(adm.refusals));
    }
    let sched = Scheduler::new(&system, core_options())?;
    Ok((system, sched))
}

/// Where the job pages of the task API live: `STATE.jobs/` beside the state file (one
/// directory per state file, as there is one daemon per state file).
fn jobs_dir(state_file: &std::path::Path) -> PathBuf {
    let mut name = state_file.as_os_str().to_owned();
    name.push(".jobs");
    PathBuf::from(name)
}

/// The live counters of every server of `sched`, by box and CPU.
fn live_counters(sched: &Scheduler) -> BTreeMap<ServerKey, Counters> {
    (0..sched.server_count())
        .map(|i| sched.server(ServerId(i as u32)))
        .map(|s| {
            (
                (s.box_name.unwrap_or("").to_string(), s.cpu),
                Counters::of(&s),
            )
        })
        .collect()
}

/// [`Scheduler::reconfigure`], with the per-server figures and cumulative counters carried
/// over ([`Periods::reconfigured`]). Pure.
fn reconfigure_counted(
    sched: &mut Scheduler,
    periods: &mut Periods,
    now: Nanos,
    system: &System,
    changed: &[String],
) -> Result<rtbox_core::Reconfigured, RuntimeError> {
    let before = live_counters(sched);
    let map = sched.reconfigure(now, system)?;
    periods.reconfigured(&before, &live_counters(sched), changed);
    Ok(map)
}

/// Per-server rows for status and metrics; counters are cumulative across box changes.
fn server_rows(
    sched: &Scheduler,
    periods: &Periods,
    members: &BTreeMap<i32, members::Member>,
) -> Vec<ServerRow> {
    (0..sched.server_count())
        .map(|i| {
            let info = sched.server(ServerId(i as u32));
            let key = (info.box_name.unwrap_or("").to_string(), info.cpu);
            let totals = periods.totals(&key, Counters::of(&info));
            ServerRow {
                members: members
                    .iter()
                    .filter(|(_, m)| m.box_name == key.0 && m.charge_to == Some(info.id))
                    .map(|(t, _)| *t)
                    .collect(),
                max_overrun: periods.get(&key).map_or(0, |s| s.max_overrun()),
                box_name: key.0,
                cpu: info.cpu,
                budget: info.budget,
                period: info.period,
                runtime: info.runtime,
                consumed: totals.consumed,
                throttled: info.throttled,
                throttles: totals.throttles,
                migrations: totals.migrations,
            }
        })
        .collect()
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
        match journal.repair() {
            Ok(Some(rep)) => tracing::warn!(
                restored = rep.restored,
                gone = rep.gone,
                errors = rep.errors.len(),
                "repaired the leftovers of a previous daemon"
            ),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "state file"),
        }
        let online = crate::host::online().unwrap_or_else(|_| platform.cpus.clone());
        let mut host = host::HostState::start(opts.priorities, online);
        let sensor = sensor::load(opts.sensor).map_err(RuntimeError::Sensor)?;
        let kind = if sensor.is_some() {
            SensorKind::Bpf
        } else {
            SensorKind::Perf
        };
        tracing::info!(sensor = kind.name(), "sensor");
        let (system, sched) = build(&platform, &specs, loop_cost(&opts, kind), &host.load())?;
        let swept = cgroup::sweep_stale(&layout) + rtbox_linux::stopgroup::sweep_orphans(&layout);
        if swept > 0 {
            tracing::info!(swept, "removed stale freeze groups");
        }
        // With the BPF sensor members' forks and exits come from the sensor: the proc
        // connector, which wakes the loop for every fork of the machine, is not opened.
        let events = match sensor.is_none().then(ProcEvents::open) {
            None => None,
            Some(Ok(e)) => Some(e),
            Some(Err(e)) => {
                tracing::warn!(error = %e, scan_ms = opts.scan / 1_000_000, "process events unavailable; scanning /proc every scan interval instead");
                None
            }
        };
        let mut members = Members::new(layout.clone(), journal, events);
        members.sensor = sensor.clone();
        if sensor.is_none() && opts.perf_watch {
            match rtbox_linux::perf::SwitchWatch::new() {
                Ok(w) => members.switch_watch = Some(w),
                Err(e) => {
                    tracing::info!(error = %e, "no watch of sleeping members; the perf loop reads every member at every step")
                }
            }
        }
        members.save_journal()?;
        // The backstop freezes, which needs cgroup v2.
        let backstop = if opts.backstop && layout.v2.is_some() {
            let cpus: Vec<u32> = platform.cpus.iter().collect();
            match Backstop::start(&cpus) {
                Ok(b) => Some(b),
                Err(e) => {
                    tracing::warn!(error = %e, "backstop threads unavailable; running without");
                    None
                }
            }
        } else {
            None
        };
        let mut latency = latency::IdleLatency::new(opts.cpu_latency);
        latency.keep(!specs.is_empty());
        Ok(Runtime {
            latency,
            ahead: ahead::Ahead::default(),
            jobs: jobs::Jobs::new(jobs_dir(&opts.state_file)),
            guard: Guard::new(backstop),
            host,
            loop_usage: LoopUsage::default(),
            layout,
            platform,
            specs,
            system,
            sched,
            epoch: rtbox_linux::monotonic_ns(),
            members,
            periods: Periods::default(),
            pin: LoopPin::default(),
            home: LoopHome::default(),
            opts,
            trace: std::env::var_os("RTBOX_TRACE").is_some(),
            sensor,
            step_started: 0,
            watch_until: 0,
            requests: None,
            requests_woke: 0,
            plugins: plugins::PluginDriver::default(),
            pin_names: pinnames::PinNames::default(),
            owned: BTreeSet::new(),
            quiet: BTreeSet::new(),
            probes: Probes::default(),
        })
    }

    /// The sensor in use.
    pub fn sensor_kind(&self) -> SensorKind {
        if self.sensor.is_some() {
            SensorKind::Bpf
        } else {
            SensorKind::Perf
        }
    }

    /// The CPU latency limit: asked, held, and why not (`rtbox status`).
    pub fn cpu_latency_status(&self) -> serde_json::Value {
        self.latency.status()
    }

    /// The CPU latency limit held now, if any.
    pub fn cpu_latency_held(&self) -> Option<u32> {
        self.latency.held_us()
    }

    /// The loop's cost as admission counts it, for the sensor in use.
    pub fn loop_cost(&self) -> LoopCost {
        loop_cost(&self.opts, self.sensor_kind())
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
        self.members.tids_of(box_name)
    }

    /// Each member of `box_name`: its tid, its process and how it is stopped when throttled
    /// (`rtbox status`).
    pub fn member_stops(&self, box_name: &str) -> Vec<(i32, i32, Option<Stop>)> {
        self.members
            .tids_of(box_name)
            .into_iter()
            .map(|t| {
                let pid = self.members.by_tid.get(&t).map_or(t, |m| m.pid);
                (t, pid, self.members.stops.get(t).cloned())
            })
            .collect()
    }

    /// The cgroup layout of this machine.
    pub fn layout(&self) -> Layout {
        self.members.layout.clone()
    }

    /// The cgroup directories attached to boxes.
    pub fn attached_cgroups(&self) -> Vec<PathBuf> {
        self.members.attached_cgroups()
    }

    pub fn member_count(&self) -> usize {
        self.members.by_tid.len()
    }

    // ---- box changes -------------------------------------------------------------------------

    /// Replace the whole box set (a reload): boxes whose definition differs are the changed
    /// ones; as [`Runtime::create_box`] and friends, a refusal changes nothing.
    pub fn replace_boxes(&mut self, specs: Vec<BoxSpec>) -> Result<(), RuntimeError> {
        let changed: Vec<String> = specs
            .iter()
            .filter(|s| !self.specs.contains(s))
            .map(|s| s.name.clone())
            .collect();
        self.set_boxes(specs, &changed)
    }

    /// Replace the box set (admission first; a refusal changes nothing). The core keeps the
    /// state of every server whose box and CPU stay (budget left, deadline, throttle,
    /// statistics; [`Scheduler::reconfigure`]); members keep their tasks, and their servers
    /// follow the core's old -> new map. Members of boxes that no longer exist are released.
    /// Counters shown as totals never go back (see [`Periods::reconfigured`]); the period
    /// measurement of `changed` boxes starts again.
    fn set_boxes(&mut self, specs: Vec<BoxSpec>, changed: &[String]) -> Result<(), RuntimeError> {
        let system = System::new(self.platform.clone(), specs.clone(), vec![])?;
        let load = self.host.load();
        let adm = admit_on_host(&system, self.loop_cost(), &load);
        if !adm.admitted() {
            return Err(RuntimeError::NotAdmitted(adm.refusals));
        }
        let now = self.now().max(self.sched.now());
        // Events up to now under the old servers' ids, into the figures first.
        self.sched.advance(now);
        self.record_events(now);
        let map = reconfigure_counted(&mut self.sched, &mut self.periods, now, &system, changed)?;
        if !map.events.is_empty() {
            // Fired between the advance and the change (none expected): old ids, not counted.
            tracing::debug!(
                events = map.events.len(),
                "core events at a box change not counted"
            );
        }
        self.specs = specs;
        self.system = system;
        self.plugins.invalidate();
        self.members.remap(&|s| map.map(s));
        for tid in self.members.orphans(&self.system) {
            self.release(tid);
        }
        self.members.drop_processes_outside(&self.system);
        self.latency.keep(!self.specs.is_empty());
        tracing::info!(boxes = self.specs.len(), changed = ?changed, kept = map.server_map.iter().flatten().count(), "box set changed");
        Ok(())
    }

    /// Create a box.
    pub fn create_box(&mut self, spec: BoxSpec) -> Result<(), RuntimeError> {
        if self.specs.iter().any(|b| b.name == spec.name) {
            return Err(RuntimeError::BoxExists { name: spec.name });
        }
        let name = spec.name.clone();
        let mut specs = self.specs.clone();
        specs.push(spec);
        self.set_boxes(specs, &[name])
    }

    /// Change a box's parameters.
    pub fn set_box(&mut self, spec: BoxSpec) -> Result<(), RuntimeError> {
        let mut specs = self.specs.clone();
        let Some(slot) = specs.iter_mut().find(|b| b.name == spec.name) else {
            return Err(RuntimeError::NoSuchBox { name: spec.name });
        };
        let name = spec.name.clone();
        *slot = spec;
        self.set_boxes(specs, &[name])
    }

    /// Delete a box (refused while it has children); its members get their original state back.
    pub fn delete_box(&mut self, name: &str) -> Result<(), RuntimeError> {
        if !self.specs.iter().any(|b| b.name == name) {
            return Err(RuntimeError::NoSuchBox { name: name.into() });
        }
        if let Some(c) = self
            .specs
            .iter()
            .find(|b| b.parent.as_deref() == Some(name))
        {
            return Err(RuntimeError::HasChildren {
                name: name.into(),
                child: c.name.clone(),
            });
        }
        let specs = self
            .specs
            .iter()
            .filter(|b| b.name != name)
            .cloned()
            .collect();
        self.set_boxes(specs, &[name.to_string()])
    }

    // ---- members -----------------------------------------------------------------------------

    /// Attach a process (all its threads, and later its children) or a cgroup to a box.
    pub fn attach(&mut self, box_name: &str, target: Target) -> Result<usize, RuntimeError> {
        if self.system.get(box_name).is_none() {
            return Err(RuntimeError::NoSuchBox {
                name: box_name.into(),
            });
        }
        self.members.attach(&mut self.sched, box_name, target)
    }

    /// Detach: release the threads of a pid, a cgroup or a whole box.
    pub fn detach(
        &mut self,
        pid: Option<i32>,
        cgroup: Option<PathBuf>,
        box_name: Option<&str>,
    ) -> Result<usize, RuntimeError> {
        let tids = self.members.detach_targets(pid, cgroup, box_name)?;
        let n = tids.len();
        for t in tids {
            self.release(t);
        }
        self.members.release_empty_processes();
        Ok(n)
    }

    /// Give a thread back its original state and forget it. No backstop may stop it once
    /// thawed: every plan is withdrawn first (the next step publishes new ones); members the
    /// backstop had stopped are recorded as frozen, so the next step thaws them if they should
    /// run.
    fn release(&mut self, tid: i32) {
        let now = self.now();
        if self.members.by_tid.contains_key(&tid) {
            let report = self.guard.withdraw(now);
            self.members.mark_frozen(&report);
        }
        self.members.release(&mut self.sched, now, tid);
    }

    /// Restore everything and clear the journal (stop, SIGTERM, SIGINT).
    pub fn shutdown(&mut self) {
        // First the backstop threads, so that nothing is stopped after it is released.
        self.guard.stop();
        let tids: Vec<i32> = self.members.by_tid.keys().copied().collect();
        for t in tids {
            self.release(t);
        }
        self.members.finish();
        self.pin.unpin();
        self.latency.keep(false);
    }

    // ---- where the loop runs -----------------------------------------------------------------

    /// Whether the loop follows the exhaustions ([`RuntimeOptions::follow`]; by default with
    /// the perf sensor only).
    fn follows(&self) -> bool {
        self.opts.follow.unwrap_or(self.sensor.is_none())
    }

    /// Where the loop should sleep (see [`wakeup::loop_cpu`]); `None` where it should not
    /// pin itself at all. With the BPF sensor it never does: the backstops make the stops on
    /// time on each CPU (the loop sleeps through the quiet ones), so following them buys
    /// nothing, and a loop pinned beside a box makes this kernel's fair server take CPU from
    /// the box. Measured (`a_box_beside_an_unmanaged_fifo_hog_gets_its_share` on a busy
    /// machine): with the loop following, the 0.5 box got 0.27-0.45 in 10 runs of 37, the
    /// normal hog beside it up to 0.50 of the CPU where the fair server lends 0.05; unpinned,
    /// 0.4999 in 44 runs of 44. `experiments/fair-server.sh` shows the kernel's side without
    /// rtbox: short real-time wake-ups on a CPU full of real-time work.
    pub fn loop_cpu(&self) -> Option<u32> {
        if !self.follows() {
            return None;
        }
        let quiet: Vec<u32> = (0..self.sched.cpu_count())
            .filter(|&i| self.sched.running_at(i).is_none())
            .filter_map(|i| self.sched.cpus().nth(i))
            .collect();
        wakeup::loop_cpu(self.sched.next_exhaustion_cpu(), &quiet, self.pin.cpu())
    }

    /// Moves the calling thread (the enforcement loop) to [`Runtime::loop_cpu`] (see
    /// [`LoopPin::follow`] for why). A loop that does not follow goes back to the servers'
    /// CPU when they are all on one ([`wakeup::home_cpu`]), unless the kernel moved it off
    /// there lately ([`wakeup::LoopHome`]).
    pub fn follow_exhaustion(&mut self) {
        if self.follows() {
            if let Some(cpu) = self.loop_cpu() {
                self.pin.follow(cpu);
            }
        } else if self.opts.home {
            let home = wakeup::home_cpu(
                (0..self.sched.server_count()).map(|i| self.sched.server(ServerId(i as u32)).cpu),
            );
            let on = rtbox_linux::sched::current_cpu();
            if let Some(cpu) = self.home.before_sleep(self.now(), on, home) {
                self.pin.nudge(cpu);
            }
        }
    }

    /// The partition of the configuration's pinned boxes (`rtbox_analysis::pin_plan`): members
    /// named after a planned task go to its vCPU (`pinnames.rs`).
    pub fn set_pin_plan(&mut self, plan: rtbox_model::PinPlan) {
        self.pin_names.set_plan(plan);
    }

    /// Gives the loop thread its original affinity back.
    pub fn unpin_loop(&mut self) {
        self.pin.unpin();
    }

    /// New threads of attached processes, new child processes of members, exited threads.
    pub fn scan(&mut self) {
        let now = self.now();
        self.members.scan(&mut self.sched, now);
    }

    // ---- the enforcement step ----------------------------------------------------------------

    /// One step at core time `now`: charge measured CPU time, update readiness, fire the core's
    /// timers, apply its decisions to the threads, then scan for members.
    pub fn step(&mut self, now: Nanos) {
        self.measure_loop(now);
        let now = self.now().max(now);
        self.step_started = now;
        // Before anything else touches the core at `now`: quiet stops happened earlier.
        self.replay_quiet_stops(now);
        // A replenishment planned ahead needs only a short step.
        let mut stopped = Vec::new();
        if self.step_ahead(now, &mut stopped) {
            return;
        }
        self.members.take_events(&mut self.sched, &self.system, now);
        if let Some(s) = &self.sensor {
            if sensor::take_events(s, &mut self.members, &mut self.sched, &self.system, now) {
                // From after the joins: a new member's stop-group move can take tens of ms.
                self.watch_until = self.now() + forkwait::WATCH;
            }
            // New members may set their own priority right after they start (rt-app does):
            // without stat reads, their policy is looked at by every step of the watch, and
            // before the first placement of members a scan added (`own_change`).
            if now < self.watch_until || self.members.unplaced {
                self.members.correct_drift(&mut self.sched, now);
            }
        }
        self.members.unplaced = false;
        // Members the backstop froze: frozen, so ready (/proc would show them sleeping).
        stopped.extend(self.guard.take_report(now));
        self.members.mark_frozen(&stopped);
        self.members.charge(&mut self.sched, now);
        // After the backstop's report was taken: a member found outside its stop group is no
        // longer taken as frozen by a stop made in its old one.
        self.members.check_stop_groups();
        self.settle_owned(now, &stopped);
        // A member changed its own policy (seen in its stat): re-ranked and put back now.
        if std::mem::take(&mut self.members.own_change) {
            self.members.correct_drift(&mut self.sched, now);
            // A thread that sets its priority has usually named itself already.
            if self.pin_names.place(&self.members, &mut self.sched, now) {
                self.members.rest.stale();
            }
        }
        self.drive_plugins(now);
        self.sched.advance(now);
        self.plugins.observe(now, &self.sched);
        self.record_events(now);
        // Decide and record first, so the backstop's plan covers the new state (taking what it
        // stopped meanwhile); carry the decisions out; thaw under the backstop's lock.
        // The core does not change from here to the plans: one EDF order serves both.
        let edf = self.sched.edf_order();
        let changes = self.decide(&edf);
        let thawing = thawing(&self.members, &changes);
        let rethaw = self.publish_plans(now, &thawing, &edf);
        let (mut thaws, gone) = self.members.execute(changes);
        self.forget(now, &gone);
        for t in rethaw {
            if !thaws.contains(&t) {
                thaws.push(t);
            }
        }
        self.thaw_guarded(now, thaws);
        self.check_host();
        // Membership scans last: a full /proc scan takes ~0.2 ms, which must not delay
        // charging and stopping (measured: a member ran 0.2 ms past its budget behind one).
        // New members are charged and placed by the next step, at once (`next_wakeup`).
        self.scan_members(now);
        self.plan_ahead(now);
    }

    /// Replays the exhaustions the backstop made at quiet stops while the loop slept
    /// ([`backstop::Stop::quiet`]), each at its own time: the stopped members are charged there
    /// (their figures stopped with them), so the core throttles their server at the stop and
    /// replenishes it at its deadline, as if the loop had stepped at the stop. Charged at the
    /// later step instead, the server would have looked spent only then, after its deadline,
    /// and restarted from there (the lagging rule), a period shifted per period.
    fn replay_quiet_stops(&mut self, now: Nanos) {
        let stops = self.guard.take_quiet(self.epoch);
        let mut k = 0;
        while k < stops.len() {
            let at = stops[k].1;
            let n = stops[k..].iter().take_while(|s| s.1 == at).count();
            let tids: Vec<i32> = stops[k..k + n].iter().map(|s| s.0).collect();
            k += n;
            let frozen = self.still_frozen(&tids, at);
            // Never before the core's own time (a request handled before the step may have
            // moved it), never after the step.
            let floor = self.sched.now();
            let at = at.max(floor).min(now.max(floor));
            self.members.mark_frozen(&frozen);
            self.members.charge_these(&mut self.sched, at, &tids);
            self.settle_owned(at, &tids);
            self.sched.advance(at);
            self.plugins.observe(at, &self.sched);
            self.record_events(at);
        }
    }

    /// The members of a quiet stop at core time `at` that no thaw has undone since. The
    /// backstop reports every freeze twice: in its report, which the loop may take in the
    /// middle of a step (`publish_plans`) and thaw again at once when its decision, made from
    /// readings before the freeze, still has the member run; and in its list of quiet stops,
    /// replayed at the next step. Marked frozen there regardless, such a member ran with the
    /// loop taking it for frozen: it never stopped again, its server's budget went to -1.35 s
    /// and the other box on its CPU got nothing (two full CPUs, 1 ms and 3.5 ms of 5 ms
    /// boxes, BPF sensor: half of the runs, `experiments/loop-cost.sh`). Freezes and thaws
    /// are stamped under the backstop's lock, so the stamps are in their true order.
    fn still_frozen(&self, tids: &[i32], at: Nanos) -> Vec<i32> {
        let stamp = at + self.epoch;
        tids.iter()
            .copied()
            .filter(|t| {
                self.members
                    .by_tid
                    .get(t)
                    .is_none_or(|m| m.thawed_mono <= stamp)
            })
            .collect()
    }

    /// A server whose members the backstop stopped at an owned stop, with less than
    /// [`crate::backstop::STOP_GRAIN`] twice left by the kernel's figures, is spent: the
    /// backstop judged by the members' running figures, which include the steal and interrupt
    /// time the kernel's own figures leave out, and thawing the members again for that rest
    /// only made them stop again, one step each (see `STOP_GRAIN`).
    fn settle_owned(&mut self, now: Nanos, stopped: &[i32]) {
        if stopped.is_empty() || self.owned.is_empty() {
            return;
        }
        let servers: BTreeSet<ServerId> = stopped
            .iter()
            .filter_map(|t| self.members.by_tid.get(t).and_then(|m| m.charge_to))
            .filter(|s| self.owned.contains(s))
            .collect();
        for s in servers {
            let info = self.sched.server(s);
            let rest = u64::try_from(info.runtime).unwrap_or(0);
            if !info.throttled && rest > 0 && rest < 2 * crate::backstop::STOP_GRAIN {
                let _ = self.sched.charge(now, s, rest);
            }
        }
    }

    /// Counts the step against the admitted step cost; warns once when above it.
    fn measure_loop(&mut self, now: Nanos) {
        let admitted = self.loop_cost().step;
        if let Some(w) = self
            .loop_usage
            .step_with(now, admitted, rtbox_linux::thread_cpu_ns)
        {
            tracing::warn!("{w}");
        }
    }

    /// Takes the core's events into the per-server figures.
    fn record_events(&mut self, now: Nanos) {
        while let Some(ev) = self.sched.poll_event() {
            if self.trace {
                tracing::debug!(event = ?ev, "core event");
            }
            let (Event::Throttled { server, .. }
            | Event::Renewed { server, .. }
            | Event::Replenished { server, .. }) = ev
            else {
                continue;
            };
            let info = self.sched.server(server);
            let key = (info.box_name.unwrap_or("").to_string(), info.cpu);
            let fig = ServerFigures {
                budget: info.budget,
                period: info.period,
                runtime: info.runtime,
                consumed: info.consumed,
            };
            match ev {
                Event::Throttled { .. } => self.periods.entry(key).throttled(fig),
                Event::Renewed { .. } => self.periods.entry(key).renewed(now, fig),
                _ => {
                    // Pinned boxes only, and only periods with the same members at both
                    // ends, verifiably off CPU then: a member that moves between servers
                    // spends part of its kernel time elsewhere.
                    let pinned = info.placement == rtbox_model::Placement::Pinned
                        || self.sched.box_servers(&key.0).len() == 1;
                    let kernel = (self.opts.audit && pinned)
                        .then(|| self.members.kernel_time_of(server))
                        .flatten();
                    self.periods.entry(key).replenished(now, fig, kernel);
                }
            }
        }
    }

    /// The membership scans when due; a release there withdrew every plan: publish again.
    fn scan_members(&mut self, now: Nanos) {
        // The perf loop that watches its sleepers and has the kernel's process events is in
        // the same place: membership comes from the events (with 700 sleeping members the
        // 100 ms scan was 12 % of the daemon's samples).
        let events_cover = self.members.switch_watch.is_some() && self.members.has_events();
        let full_scan = if self.sensor.is_some() || events_cover {
            self.opts.full_scan.max(BPF_FULL_SCAN)
        } else {
            self.opts.full_scan
        };
        let Some(full) = self.members.scan_due(now, self.opts.scan, full_scan) else {
            return;
        };
        self.host.share_members(&self.members);
        self.guard.take_withdrawn();
        // With the BPF sensor the frequent scan only looks for threads moved into attached
        // cgroups from outside, and drift is checked at the slow full scan (and while new
        // members are watched, `step`): 2 system calls per member per scan were most of the
        // cost of sleeping members.
        let bpf = self.sensor.is_some();
        if full {
            self.members.scan(&mut self.sched, now);
        } else if !bpf || self.members.has_cgroup_attachments() {
            self.members.scan_cgroups(&mut self.sched);
            self.members.release_empty_processes();
        }
        if full || !bpf {
            self.members.correct_drift(&mut self.sched, now);
        }
        if self.pin_names.place(&self.members, &mut self.sched, now) {
            self.members.unplaced = true;
            self.members.rest.stale();
        }
        if self.guard.take_withdrawn() {
            let edf = self.sched.edf_order();
            let again = self.publish_plans(now, &BTreeSet::new(), &edf);
            self.thaw_guarded(now, again);
        }
    }

    fn forget(&mut self, now: Nanos, gone: &[i32]) {
        for t in gone {
            self.members.forget_exited(&mut self.sched, now, *t);
        }
    }

    /// Decides what each member must look like after the core's decisions ([`bands::decide`])
    /// and records it (`applied`, `charge_to`) before anything is done, so the backstop's plan
    /// covers the new state while `execute` carries it out. Returns the changed members with
    /// their previous state.
    fn decide(&mut self, edf: &EdfOrder) -> Vec<(i32, Option<Applied>)> {
        let sched = &self.sched;
        let cpu_of = |s: ServerId| sched.server(s).cpu;
        let hosts = |s: ServerId| sched.hosts_member(s);
        let core = bands::CoreView {
            prio: self.host.band,
            edf,
            cpu_of: &cpu_of,
            hosts: &hosts,
        };
        let system = &self.system;
        static NO_CPUS: CpuSet = CpuSet::new();
        let boxes: bands::BoxViews<'_> = sched
            .boxes()
            .map(|b| {
                let view = bands::BoxView {
                    mode: b.mode,
                    placement: b.placement,
                    shared: b.weight.filter(|_| b.shared),
                    cpus: system.get(b.name).map_or(&NO_CPUS, |r| &r.cpus),
                    servers: b.servers,
                };
                (b.name, view)
            })
            .collect();
        // With BPF, or perf watching its sleepers: members at rest are not visited (`rest.rs`).
        let bpf = self.sensor.is_some();
        let lazy = bpf || self.members.switch_watch.is_some();
        // Plug-in groups set priorities and vCPUs every step: every member is visited.
        if self.system.boxes().iter().any(|b| b.spec.plugin.is_some()) {
            self.members.rest.stale();
        }
        let full = !lazy || self.members.rest.is_stale();
        let members = &self.members.by_tid;
        let rest = &mut self.members.rest;
        // Every member is decided on, asleep or not, or rests on a decision that still holds
        // (`rest.rs`); every member counts in its box's local ranks: a sleeping member left out
        // of them let the members below it take its priority, so that on waking it queued
        // behind them at the same SCHED_FIFO priority until the next step (measured: seed
        // 002's tau1 missed 27-61 of 500 jobs).
        // A full visit decides everyone (always with perf, which keeps no rest table).
        let all: Option<Vec<_>> = full.then(|| {
            members
                .iter()
                .map(|(t, m)| member_view(*t, m, sched, bpf))
                .collect()
        });
        let mut ranks = None;
        if let Some(all) = &all {
            let r = bands::owned_ranks(all);
            if lazy {
                rest.reset(members.keys().copied(), r);
            } else {
                ranks = Some(r);
            }
        }
        if lazy {
            // The live servers are those in the EDF order (not throttled).
            for (name, b) in boxes.iter() {
                let live = b
                    .servers
                    .iter()
                    .copied()
                    .filter(|&s| !sched.is_throttled(s));
                rest.live_servers(name, live);
            }
        }
        let rest = &*rest;
        let views: Vec<bands::MemberView<'_>> = all.unwrap_or_else(|| {
            rest.active()
                .iter()
                .filter_map(|t| members.get(t).map(|m| member_view(*t, m, sched, bpf)))
                .collect()
        });
        let ranks = ranks.as_ref().unwrap_or_else(|| rest.ranks());
        let decisions = bands::decide_ranked(&core, &boxes, ranks, &views);
        #[cfg(debug_assertions)]
        if !full {
            check_rest(&core, &boxes, members, rest, &decisions, sched, bpf);
        }
        drop(views);
        let mut changes = Vec::new();
        for d in decisions {
            let m = self.members.by_tid.get_mut(&d.tid).expect("member");
            // A watched perf member asleep is left as it is, as with BPF.
            let known_asleep = bpf || m.watched();
            if !(known_asleep && keeps_server(m)) {
                if m.charge_to != d.charge_to {
                    if let Some(c) = &m.clock {
                        let global = system
                            .get(&m.box_name)
                            .is_some_and(|b| b.spec.placement == rtbox_model::Placement::Global);
                        c.place(d.charge_to, global);
                    }
                }
                m.charge_to = d.charge_to;
                m.last_server = d.last_server;
            }
            if let Some(want) = d.want {
                // With the BPF sensor a blocked member that was placed once is left as it is
                // (`Member::placed_asleep`: no freeze, no new band or CPU): it cannot run, and
                // when it wakes the loop carries out its state at its next step (at once when
                // it is its server's first runnable member, or its server is throttled: the
                // sensor wakes the loop). Re-ranking, freezing and thawing every sleeping
                // member at every throttle and replenishment cost ~8 us per member per step.
                // A member whose drift the scan found (`correct_drift` leaves it without
                // CPUs) is put back, asleep or not.
                let sleeping = known_asleep && m.placed_asleep();
                if !sleeping && m.applied.as_ref() != Some(&want) {
                    let was_frozen = m.frozen();
                    changes.push((d.tid, m.applied.replace(want)));
                    if !m.frozen() {
                        m.frozen_asleep = false;
                    } else if !was_frozen {
                        m.frozen_asleep = !m.ready;
                    }
                    continue;
                }
            }
            if lazy && restful(m) {
                self.members.rest.rest(d.tid, &m.box_name, m.charge_to);
            }
        }
        changes
    }

    /// Leaves each CPU's backstop the plan ([`guard::plan`]) for the state `decide` recorded,
    /// and takes back the members it stopped since the step began. Returns those of them the
    /// loop wants running (to thaw again); one it wants frozen just stays so.
    fn publish_plans(&mut self, now: Nanos, thawing: &BTreeSet<i32>, edf: &EdfOrder) -> Vec<i32> {
        if !self.guard.active() {
            return Vec::new();
        }
        self.members.open_freeze_handles();
        let mut by_server: BTreeMap<ServerId, ServerMembers<Handle>> = BTreeMap::new();
        let mut unguarded = BTreeSet::new();
        // A resting member adds its server, with nothing ready and no one to stop, as below.
        for s in self.members.resting_servers() {
            by_server.entry(s).or_default();
        }
        for (tid, m) in self.members.visited() {
            let (Some(s), Some(false)) = (m.charge_to, m.applied.as_ref().map(|a| a.frozen)) else {
                continue;
            };
            let e = by_server.entry(s).or_default();
            e.ready |= m.ready;
            // A member asleep is left out of the plan: it cannot run, and the backstop's check
            // at a stop reads every member's clock (with 500 sleeping members and the BPF
            // sensor that check took longer than the ~20 us of budget it was checking, and the
            // backstop re-armed itself for ever; with perf clocks, a system call each, 50 were
            // enough). One that wakes is charged at the loop's next step (BPF: at once when it
            // is its server's first runnable member, else at the latest the step after the
            // others' stop; perf: the next poll) and planned from then on.
            if !m.ready && !m.frozen() {
                continue;
            }
            if let (Some(f), Some(c)) = (&m.freeze, &m.clock) {
                e.members.push(Handle {
                    tid,
                    freeze: f.clone(),
                    clock: c.clone(),
                    charged: m.charge.last(),
                });
            } else {
                unguarded.insert(s);
            }
        }
        let owns = self.sensor.is_some();
        self.owned = by_server
            .keys()
            .filter(|s| owns && !unguarded.contains(s))
            .filter(|&&s| {
                let info = self.sched.server(s);
                info.mode == Mode::Hard && info.box_name.is_some()
            })
            .copied()
            .collect();
        let exhaustion = self
            .sched
            .exhaustion_plan_in(edf, now, |s| by_server.get(&s).is_some_and(|m| m.ready));
        // Members the kernel runs by itself once the members above them on their CPU stop
        // (thawed, real-time, on one CPU), and the servers with such a member on their CPU.
        let mut placed: BTreeMap<TaskId, u32> = BTreeMap::new();
        let mut waiting: BTreeSet<ServerId> = BTreeSet::new();
        for (_, m) in self.members.visited() {
            let Some(a) = m.applied.as_ref() else {
                continue;
            };
            if a.frozen || !a.attr.is_rt() || a.cpus.len() != 1 {
                continue;
            }
            placed.insert(m.task, a.cpus[0]);
            if let Some(s) = m
                .charge_to
                .filter(|&s| self.sched.server(s).cpu == a.cpus[0])
            {
                waiting.insert(s);
            }
        }
        self.quiet = quiet_servers(
            &self.sched,
            &mut self.probes,
            &exhaustion,
            &self.owned,
            |t, c| placed.get(&t) == Some(&c),
            |s| waiting.contains(&s),
        );
        let sched = &self.sched;
        let plans = guard::plan(now, &exhaustion, by_server, !owns, &self.quiet, |s| {
            let info = sched.server(s);
            PlanServer {
                cpu: info.cpu,
                runtime: info.runtime,
                throttled: info.throttled,
                // Box servers only (a dedicated reservation has no members here).
                hard: info.mode == Mode::Hard && info.box_name.is_some(),
            }
        });
        let report = self.guard.publish(now, self.epoch, plans, owns, thawing);
        report
            .into_iter()
            .filter(|t| {
                self.members
                    .by_tid
                    .get(t)
                    .and_then(|m| m.applied.as_ref())
                    .is_some_and(|a| !a.frozen)
            })
            .collect()
    }

    /// Thaws `tids` (recorded as running by `decide`) under the backstop's lock, except those
    /// the new plan stopped meanwhile: their budget is spent by the members' own clocks, so
    /// they stay frozen until the loop's next step charges them.
    fn thaw_guarded(&mut self, now: Nanos, mut tids: Vec<i32>) {
        let gone = {
            let mut lock = self.guard.lock(now);
            if let Some(l) = &lock {
                self.members.mark_frozen(&l.report);
                tids.retain(|t| !l.report.contains(t));
            }
            // No member thawed here runs before this instant: the lower bound of the move of
            // its pending stop (a later reading would let a member thawed first run unwatched).
            let before = rtbox_linux::monotonic_ns();
            let gone = self.members.thaw(now, before, &tids);
            if let Some(l) = lock.as_mut() {
                tids.retain(|t| !gone.contains(t));
                l.thawed(&tids, before);
            }
            gone
        };
        self.forget(now, &gone);
    }

    /// Requests kick `fd` (the socket thread, after queueing one): the loop's sleep wakes for
    /// them ([`forkwait::REQUEST_GAP`] apart at most).
    pub fn wake_on_requests(&mut self, fd: std::sync::Arc<rtbox_linux::fdwait::EventFd>) {
        self.requests = Some(fd);
    }

    /// Sleeps until CLOCK_MONOTONIC `deadline`; a backstop stop or a sensor event wakes it
    /// early.
    pub fn sleep_until(&mut self, deadline: u64) {
        let sensor_fd: Vec<_> = sensor::wake_fd(self.sensor.as_ref()).into_iter().collect();
        let woke = self.guard.sleep_until(deadline, &sensor_fd);
        // Only a wake-up at the deadline with nothing else to see may take a short step
        // (`ahead.rs`).
        self.ahead.woke_on_time = !woke.backstop
            && !woke.extra.iter().any(|&r| r)
            && rtbox_linux::monotonic_ns() >= deadline;
        if tracing::enabled!(tracing::Level::TRACE) {
            let woke = rtbox_linux::monotonic_ns();
            tracing::trace!(
                early_us = deadline.saturating_sub(woke) / 1000,
                late_us = woke.saturating_sub(deadline) / 1000,
                "loop woke"
            );
        }
    }

    /// When the backstop's stops were taken back by the loop (core time), for figures.
    pub fn backstop_times(&self) -> &[Nanos] {
        self.guard.times()
    }

    /// The enforcement loop's own CPU use (counted by [`Runtime::step`]; call on the loop
    /// thread: its total is brought up to the thread's CPU clock now).
    pub fn loop_usage(&mut self) -> &LoopUsage {
        self.loop_usage.refresh(rtbox_linux::thread_cpu_ns());
        &self.loop_usage
    }

    /// The step cost admission assumes (`--loop-step-us`), ns.
    pub fn admitted_step(&self) -> Nanos {
        self.loop_cost().step
    }

    /// Members the backstop stopped because the loop was late (see `backstop.rs`).
    pub fn backstop_stops(&self) -> u64 {
        self.guard.stops()
    }

    /// When the loop must run next (absolute core time); the rules are [`wakeup_time`]'s. The
    /// budget left that bounds a poll is the smallest of the non-throttled servers that have a
    /// runnable member. Members not yet placed run unmanaged: the loop steps again at once.
    pub fn next_wakeup(&self, now: Nanos) -> Nanos {
        if self.members.unplaced {
            return now + MIN_GRANT;
        }
        // Resting members are not ready.
        let with_work: BTreeSet<ServerId> = self
            .members
            .visited()
            .filter_map(|(_, m)| m.charge_to.filter(|_| m.ready))
            .collect();
        let budget_left = self
            .sched
            .min_budget_left_with_work(|s| with_work.contains(&s));
        // Quiet exhaustions need no step: their servers' replenishments do.
        let loud = |s: ServerId| !self.quiet.contains(&s);
        let (next_timer, quiet_replenishment) = if self.quiet.is_empty() {
            (self.sched.next_timer(), None)
        } else {
            self.sched.timers_with_quiet(|s| !loud(s))
        };
        let next_exhaustion_cpu = self.sched.next_exhaustion_cpu_of(loud);
        let exhausting_here = self.pin.cpu().is_some() && self.pin.cpu() == next_exhaustion_cpu;
        let owned = next_exhaustion_cpu
            .and_then(|c| self.sched.running(c))
            .and_then(|r| r.server)
            .is_some_and(|s| self.owned.contains(&s));
        let timer = next_timer.map(|t| {
            if self.sched.next_replenishment() == Some(t) {
                return t;
            }
            let t = if exhausting_here {
                wakeup::after_own_step(t, self.step_started, now)
            } else {
                t
            };
            if owned {
                // Never past another server's replenishment.
                let r = self.sched.next_replenishment().unwrap_or(Nanos::MAX);
                wakeup::owned_stop(t).min(r.max(t))
            } else {
                t
            }
        });
        let timer = [timer, quiet_replenishment].into_iter().flatten().min();
        tracing::trace!(
            now,
            timer = ?timer.map(|t| t as i64 - now as i64),
            step_us = now.saturating_sub(self.step_started) / 1000,
            exhausting_here,
            budget_left = ?budget_left,
            "next wake-up"
        );
        let at = wakeup_time(
            now,
            timer,
            self.sched.next_replenishment(),
            self.poll_interval(),
            budget_left,
        );
        let at = plugins_wakeup(at, now, self.plugins.next_timer());
        forkwait::watch_new_members(at, now, self.watch_until)
    }

    /// How long the loop may sleep without looking at the members. Between two steps a member
    /// may wake up, or block and let another member of its CPU run, unseen by the loop; what
    /// such a member can consume unseen is bounded by its server's budget left. So the loop
    /// polls after the smallest budget left of any non-throttled server, at least every
    /// `poll` (1 ms) and at most every `scan` interval (new threads must join quickly): the
    /// core's [`Scheduler::poll_interval`], by the rule admission counts the polls with. With
    /// only throttled servers, or servers with plenty of budget, it sleeps longer: the poll
    /// was most of the loop's CPU use (docs/benchmarks-runtime.md).
    pub fn poll_interval(&self) -> Nanos {
        let poll = self.sched.poll_interval(&self.loop_cost());
        // With the BPF sensor only threads entering attached cgroups from outside go unseen.
        if self.sensor.is_some() && self.members.has_cgroup_attachments() {
            poll.min(self.opts.scan)
        } else {
            poll
        }
    }

    /// Per-server view for status and metrics (counters cumulative across box changes).
    /// Members the perf loop watches while they sleep (`sensor::PerfClock`; 0 with BPF).
    pub fn perf_watching(&self) -> usize {
        self.members.by_tid.values().filter(|m| m.watched()).count()
    }

    pub fn server_rows(&self) -> Vec<ServerRow> {
        server_rows(&self.sched, &self.periods, &self.members.by_tid)
    }

    /// The figures of a box's server on `cpu`.
    pub fn server_stats(&self, box_name: &str, cpu: u32) -> Option<&ServerStats> {
        self.periods.get(&(box_name.to_string(), cpu))
    }

    /// Overrun samples (ns) of every finished period of a box's server on `cpu`.
    pub fn overruns(&self, box_name: &str, cpu: u32) -> Vec<u64> {
        self.server_stats(box_name, cpu)
            .map(|s| s.overruns.clone())
            .unwrap_or_default()
    }

    /// Overrun at detection (ns) of every throttle of a box's server on `cpu`.
    pub fn detected_overruns(&self, box_name: &str, cpu: u32) -> Vec<u64> {
        self.server_stats(box_name, cpu)
            .map(|s| s.detected.clone())
            .unwrap_or_default()
    }

    /// Perf clock time of current members that the kernel says they did not run (host steal),
    /// found so far and kept out of their charges, ns.
    pub fn steal_found(&self) -> u64 {
        self.members
            .by_tid
            .values()
            .map(|m| m.charge.stolen())
            .sum()
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
    /// Members that came onto this vCPU from another vCPU of their box.
    pub migrations: u64,
    pub max_overrun: u64,
    pub members: Vec<i32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtbox_core::TaskParams;
    use rtbox_model::{Interface, ServerSpec};

    #[test]
    fn plugin_boxes_are_admitted_and_plugin_timers_bring_the_loop_forward() {
        let mut b = BoxSpec::new(
            "g",
            Interface::PerCpu {
                budget: 4_750_000,
                period: 5_000_000,
            },
        );
        b.plugin = Some(rtbox_model::PluginKind::FpPm);
        b.placement = rtbox_model::Placement::Pinned;
        let cost = LoopCost {
            step: 0,
            ..LoopCost::DEFAULT
        };
        let (system, _) = build(&Platform::with_cpus(2), &[b], cost, &HostLoad::default())
            .expect("a plug-in box is run by the daemon");
        assert!(system.boxes().iter().any(|b| b.spec.plugin.is_some()));
        let (now, at) = (MS, 5 * MS);
        assert_eq!(plugins_wakeup(at, now, None), at);
        assert_eq!(plugins_wakeup(at, now, Some(3 * MS)), 3 * MS);
        assert_eq!(plugins_wakeup(at, now, Some(9 * MS)), at);
        assert_eq!(plugins_wakeup(at, now, Some(0)), now + MIN_GRANT);
    }

    const MS: Nanos = 1_000_000;

    fn boxes(b_budget: Nanos, with_a: bool) -> System {
        let b = |name: &str, budget| {
            BoxSpec::new(
                name,
                Interface::Servers(vec![ServerSpec {
                    cpu: 0,
                    budget,
                    period: 10 * MS,
                }]),
            )
        };
        let mut v = vec![b("B", b_budget)];
        if with_a {
            v.push(b("A", 2 * MS));
        }
        System::new(Platform::with_cpus(1), v, vec![]).unwrap()
    }

    /// Issue 14: the core is asked about quiet exhaustions in the order of each CPU's planned
    /// exhaustions, each on the core after the one before, until one is loud (the loop steps
    /// there anyway): a server alone is quiet; two boxes on one CPU are quiet one after the
    /// other when the second's member is already placed there (the kernel runs it once the
    /// first's stop), else the first is loud and the second not asked.
    #[test]
    fn quiet_servers_are_asked_in_exhaustion_order_before_any_other_step() {
        // Box B alone on CPU 0 (3 ms of 10 ms); box A beside it when `with_a`; `placed`: A's
        // and B's members run-ready on CPU 0.
        let run = |with_a: bool, placed: bool| {
            let mut sched = Scheduler::new(&boxes(3 * MS, with_a), core_options()).unwrap();
            let member = |name: &str, b: &str| TaskParams {
                box_name: Some(b.into()),
                ..TaskParams::background(name, 1)
            };
            let mut tasks = vec![sched.add_task(member("b", "B")).unwrap()];
            if with_a {
                tasks.push(sched.add_task(member("a", "A")).unwrap());
            }
            for t in tasks {
                sched.wake(0, t, None).unwrap();
            }
            sched.advance(0);
            let owned: BTreeSet<ServerId> = (0..sched.server_count())
                .map(|i| ServerId(i as u32))
                .collect();
            let plan = sched.exhaustion_plan(0, |_| true);
            let quiet = quiet_servers(
                &sched,
                &mut Probes::default(),
                &plan,
                &owned,
                |_, cpu| placed && cpu == 0,
                |_| placed,
            );
            (quiet, sched)
        };
        let (quiet, sched) = run(false, false);
        let b = sched.box_servers("B")[0];
        assert_eq!(
            quiet,
            BTreeSet::from([b]),
            "B alone: its exhaustion only stops it"
        );
        let (quiet, _) = run(true, false);
        assert!(quiet.is_empty(), "the other box runs next on CPU 0: loud");
        let (quiet, sched) = run(true, true);
        let a = sched.box_servers("A")[0];
        assert_eq!(
            quiet,
            BTreeSet::from([a, b]),
            "the other box's member is placed: both stops are quiet"
        );
    }

    /// The `_total` samples of a metrics text, by series.
    fn totals(text: &str) -> BTreeMap<String, f64> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once(' '))
            .filter(|(name, _)| name.contains("_total"))
            .map(|(name, v)| (name.to_string(), v.parse().unwrap()))
            .collect()
    }

    /// Issue: every box change rebuilt the scheduler and the Prometheus counters fell back to
    /// zero. Across a change of another box, a change of the box itself, and a delete and
    /// re-create, no `_total` series may go back, and the untouched box keeps its budget left.
    #[test]
    fn metrics_counters_never_go_back_across_box_changes() {
        let mut sched = Scheduler::new(&boxes(3 * MS, true), core_options()).unwrap();
        let mut periods = Periods::default();
        let none = BTreeMap::new();
        let a = sched
            .add_task(TaskParams {
                box_name: Some("A".into()),
                ..TaskParams::background("a", 0)
            })
            .unwrap();
        sched.wake(0, a, None).unwrap();
        sched.advance(0);
        let sa = sched.box_servers("A")[0];
        // 2.5 ms charged to A's 2 ms: a throttle, then 1 ms into its next period.
        sched.charge(MS, sa, 2_500_000).unwrap();
        sched.advance(MS);
        sched.advance(10 * MS);
        sched
            .charge(11 * MS, sched.box_servers("A")[0], MS)
            .unwrap();
        sched.advance(11 * MS);
        let mut last = totals(&crate::metrics::render(&server_rows(
            &sched, &periods, &none,
        )));
        let a_total = "rtbox_server_consumed_seconds_total{box=\"A\",cpu=\"0\"}".to_string();
        assert!(last[&a_total] > 0.003, "A consumed: {last:?}");
        let a_left = sched.server(sched.box_servers("A")[0]).runtime;
        let steps: [(System, &[&str]); 3] = [
            (boxes(4 * MS, true), &["B"]),
            (boxes(4 * MS, false), &["A"]),
            (boxes(4 * MS, true), &["A"]),
        ];
        for (i, (system, changed)) in steps.into_iter().enumerate() {
            let changed: Vec<String> = changed.iter().map(|s| s.to_string()).collect();
            reconfigure_counted(&mut sched, &mut periods, 12 * MS, &system, &changed).unwrap();
            if i == 0 {
                let now_left = sched.server(sched.box_servers("A")[0]).runtime;
                assert_eq!(now_left, a_left, "another box's change refilled A");
            }
            let now = totals(&crate::metrics::render(&server_rows(
                &sched, &periods, &none,
            )));
            for (series, v) in &now {
                if let Some(before) = last.get(series) {
                    assert!(v >= before, "step {i}: {series} went back: {before} -> {v}");
                }
            }
            last.extend(now);
        }
        assert!(last[&a_total] > 0.003, "A re-created continues its total");
    }
}
