//! Replenishments planned ahead: the short step the loop takes at a replenishment the core
//! said, at the last full step, would change nothing but start the replenished servers' frozen
//! members on their idle CPUs (`rtbox_core::Scheduler::quiet_periods`).
//!
//! Why: a busy box alone on its CPU costs the loop one full step per period, at the
//! replenishment (the exhaustion is the backstop's, `backstop::Stop::quiet`), and a full step
//! is ~100-160 us of this VM's CPU (charge every member, decide, plan, probe the core for quiet
//! exhaustions, publish, thaw). Planned ahead, the step at such a replenishment only replays
//! the quiet stops, runs the core to now, checks that it runs what the plan said, publishes
//! the stops planned for the period and thaws the members (issue 14).
//!
//! The plan is dropped by anything else: a wake-up that is not the deadline's (a sensor event,
//! a backstop stop that needs the loop, a request, a process event), a core that does not run
//! what was planned, a member that is not as planned (not frozen, another server, no handle).
//! The full step then runs as before, and plans again.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rtbox_core::{QuietPeriod, ServerId, TaskId};
use rtbox_model::Nanos;

use super::guard::{add_watch_copies, Planned};
use super::Runtime;
use crate::backstop::Handle;

/// At most this many replenishments are planned at one full step.
pub const MAX_AHEAD: usize = 32;

/// Full steps that do not plan after one that found nothing to plan.
pub const BACKOFF: u32 = 8;

/// A replenishment the loop makes with a short step.
#[derive(Debug, Clone)]
pub struct AheadPeriod {
    /// The core's plan of it.
    pub period: QuietPeriod,
    /// The members to thaw then (every ready member of the replenished servers; all frozen).
    pub thaw: Vec<(i32, ServerId)>,
}

/// The replenishments planned at the last full step, in time order.
#[derive(Debug, Default)]
pub struct Ahead {
    periods: VecDeque<AheadPeriod>,
    /// The last wake-up of the loop was its deadline's, nothing else readable.
    pub woke_on_time: bool,
    /// Full steps left that do not plan (see [`Runtime::plan_ahead`]).
    backoff: u32,
}

impl Ahead {
    pub fn clear(&mut self) {
        self.periods.clear();
    }
}

impl Runtime {
    /// Drops the replenishments planned ahead: something the plan did not count on happened
    /// between two steps (a request was handled, the configuration reloaded).
    pub fn forget_ahead(&mut self) {
        self.ahead.clear();
    }

    /// The daemon was stopped (SIGSTOP, a debugger) and continued. Meanwhile its watchdog gave
    /// every member its own scheduling back and thawed it, so what the members ran was not
    /// their boxes' reservation: charged now, it would throttle a box for as long again (a
    /// member that ran 2 s of a 0.2 box's time got 0.007 CPU for the next 10 s). The backstop's
    /// plans are withdrawn, every member's charge restarts from its clock now, and every member
    /// is placed again at once.
    pub fn resume_after_stop(&mut self) {
        let now = self.now();
        let _ = self.guard.withdraw(now);
        self.ahead.clear();
        self.members.take_back_after_stop();
    }

    /// Short steps taken so far (figures).
    pub fn short_steps(&self) -> u64 {
        self.loop_usage.short_steps
    }

    /// Plans the coming replenishments ahead when the core says they are quiet and every
    /// member they start is frozen on its server's CPU, at the priority it runs with: the
    /// only change a thaw makes. Called at the end of a full step; after a step that found
    /// nothing to plan, the next [`BACKOFF`] full steps do not look (a box whose members move
    /// between its vCPUs every period never has a plan, and looking cost it ~6 us per step).
    pub(super) fn plan_ahead(&mut self, now: Nanos) {
        self.ahead.clear();
        if self.ahead.backoff > 0 {
            self.ahead.backoff -= 1;
            return;
        }
        self.plan_periods(now);
        if self.ahead.periods.is_empty() {
            self.ahead.backoff = BACKOFF;
        }
    }

    /// [`Runtime::plan_ahead`]'s plan, when there is one.
    fn plan_periods(&mut self, now: Nanos) {
        if !self.guard.active()
            || self.sensor.is_none()
            || self.members.unplaced
            || now < self.watch_until
            || !self.plugins.is_empty()
            || self.jobs.live().next().is_some()
        {
            return;
        }
        // Every ready member is charged to an owned server whose exhaustion is quiet (running)
        // or which is throttled; every server with work is alone on its CPU (its band is the
        // CPU's top one, throttled or not: a thaw restores the member's priority as it was).
        // Per server its ready members, and whether they all wait (or run) on the server's
        // CPU, real-time, with the handles a stop needs: a thaw alone starts them there.
        let mut ready: BTreeMap<ServerId, (Vec<i32>, bool)> = BTreeMap::new();
        // The server each ready member's task is charged to.
        let mut task_server: BTreeMap<TaskId, ServerId> = BTreeMap::new();
        for (tid, m) in self.members.visited() {
            if !m.ready {
                continue;
            }
            let Some(s) = m.charge_to else {
                return;
            };
            task_server.insert(m.task, s);
            let cpu = self.sched.server(s).cpu;
            let placed = m
                .applied
                .as_ref()
                .is_some_and(|a| a.attr.is_rt() && a.cpus.len() == 1 && a.cpus[0] == cpu);
            let e = ready.entry(s).or_insert((Vec::new(), true));
            e.0.push(tid);
            e.1 &= placed && m.freeze.is_some() && m.clock.is_some();
        }
        if ready.is_empty() {
            return;
        }
        let mut per_cpu: BTreeMap<u32, u32> = BTreeMap::new();
        for i in 0..self.sched.server_count() {
            *per_cpu
                .entry(self.sched.server(ServerId(i as u32)).cpu)
                .or_default() += 1;
        }
        let mut exhausting: Vec<(Nanos, ServerId)> = Vec::new();
        for &s in ready.keys() {
            let info = self.sched.server(s);
            if !self.owned.contains(&s) || per_cpu.get(&info.cpu) != Some(&1) {
                return;
            }
            if !info.throttled {
                if !self.quiet.contains(&s) {
                    return;
                }
                exhausting.push((u64::try_from(info.runtime).unwrap_or(0), s));
            }
        }
        exhausting.sort_unstable();
        let exhausting: Vec<ServerId> = exhausting.into_iter().map(|(_, s)| s).collect();
        let until = now + self.poll_interval();
        let periods =
            self.probes
                .quiet_periods(&self.sched, &exhausting, until, MAX_AHEAD, |s, t| {
                    ready.get(&s).is_some_and(|(_, startable)| *startable)
                        && task_server.get(&t) == Some(&s)
                });
        for period in periods {
            let thaw = period
                .runs
                .iter()
                .flat_map(|r| {
                    ready
                        .get(&r.server)
                        .into_iter()
                        .flat_map(|(tids, _)| tids)
                        .map(|&tid| (tid, r.server))
                })
                .collect();
            self.ahead.periods.push_back(AheadPeriod { period, thaw });
        }
    }

    /// The short step at a replenishment planned ahead ([`Runtime::plan_ahead`]), after the
    /// quiet stops were replayed; whether it was taken (else the full step follows, and
    /// `stopped` holds what the backstop reported meanwhile, already marked frozen).
    pub(super) fn step_ahead(&mut self, now: Nanos, stopped: &mut Vec<i32>) -> bool {
        let on_time = std::mem::take(&mut self.ahead.woke_on_time);
        let due = self
            .ahead
            .periods
            .front()
            .is_some_and(|p| p.period.at <= now);
        if !on_time
            || !due
            || self.members.own_change
            || self.members.unplaced
            || self.members.escaped()
        {
            self.ahead.clear();
            return false;
        }
        let Some(p) = self.ahead.periods.pop_front() else {
            return false;
        };
        *stopped = self.guard.take_report(now);
        self.members.mark_frozen(stopped);
        // The members to thaw are frozen, ready and charged to the planned server; every other
        // ready member is frozen too (nothing else runs).
        let as_planned = p.thaw.iter().all(|&(tid, s)| {
            self.members
                .by_tid
                .get(&tid)
                .is_some_and(|m| m.ready && m.frozen() && m.charge_to == Some(s))
        }) && self.members.visited().all(|(_, m)| !m.ready || m.frozen());
        if !as_planned {
            self.ahead.clear();
            return false;
        }
        self.members.charge(&mut self.sched, now);
        // A stopped member's server overran: the full step looks at its stop group (charged
        // again at the same instant, it is charged nothing more).
        if self.members.escaped() {
            self.ahead.clear();
            return false;
        }
        self.settle_owned(now, stopped);
        self.sched.advance(now);
        self.record_events(now);
        let runs_as_planned = p.period.runs.iter().all(|r| {
            let info = self.sched.server(r.server);
            !info.throttled
                && self
                    .sched
                    .running(info.cpu)
                    .is_some_and(|x| x.task == r.task && x.server == Some(r.server))
        });
        if !runs_as_planned {
            self.ahead.clear();
            return false;
        }
        // The period's stops, from now (the core's plan counted from the replenishment).
        let mut plans: Vec<(u32, Vec<Planned<Handle>>)> =
            self.sched.cpus().map(|c| (c, Vec::new())).collect();
        let mut quiet = BTreeSet::new();
        for r in &p.period.runs {
            let info = self.sched.server(r.server);
            let budget = u64::try_from(info.runtime).unwrap_or(0);
            let members: Option<Vec<Handle>> = p
                .thaw
                .iter()
                .filter(|(_, s)| *s == r.server)
                .map(|&(tid, _)| {
                    let m = self.members.by_tid.get(&tid)?;
                    Some(Handle {
                        tid,
                        freeze: m.freeze.clone()?,
                        clock: m.clock.clone()?,
                        charged: m.charge.last(),
                    })
                })
                .collect();
            let Some(members) = members else {
                self.ahead.clear();
                return false;
            };
            if r.quiet_exhaustion {
                quiet.insert(r.server);
            }
            let stop = Planned {
                at: now + budget,
                home: info.cpu,
                budget,
                members,
                quiet: r.quiet_exhaustion,
            };
            if let Some((_, v)) = plans.iter_mut().find(|(c, _)| *c == info.cpu) {
                v.push(stop);
            }
        }
        add_watch_copies(&mut plans);
        self.quiet = quiet;
        let thawing: BTreeSet<i32> = p.thaw.iter().map(|&(t, _)| t).collect();
        let report = self
            .guard
            .publish(now, self.epoch, plans, self.sensor.is_some(), &thawing);
        self.members.mark_frozen(&report);
        self.thaw_guarded(now, thawing.into_iter().collect());
        self.loop_usage.short_steps += 1;
        true
    }
}
