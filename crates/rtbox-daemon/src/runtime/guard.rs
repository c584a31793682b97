//! The guard owns the backstop (see `backstop.rs`): it builds each CPU's plan of planned
//! exhaustions from the core's state, publishes it, hands out its lock for thaws, withdraws it,
//! and counts the backstop's stops. It returns data (the members the backstop stopped); the
//! runtime acts on it.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::BorrowedFd;

use rtbox_core::ServerId;
use rtbox_model::Nanos;

use crate::backstop::{self, Backstop, Handle, Locked, Stop, Woke};

/// A server as the plan needs it.
#[derive(Debug, Clone, Copy)]
pub struct PlanServer {
    pub cpu: u32,
    /// Budget left (negative after an overrun).
    pub runtime: i64,
    pub throttled: bool,
    /// A hard-mode, non-shared box's server: only those are stopped by the backstop.
    pub hard: bool,
}

/// The members of one server: whether one is ready, and what the backstop needs of each.
#[derive(Debug, Clone)]
pub struct ServerMembers<H> {
    pub ready: bool,
    pub members: Vec<H>,
}

impl<H> Default for ServerMembers<H> {
    fn default() -> Self {
        ServerMembers {
            ready: false,
            members: Vec::new(),
        }
    }
}

/// One planned stop: the members of a server with `budget` left stop at `at` (core time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned<H> {
    pub at: Nanos,
    /// The CPU of the server (a copy watched from another CPU keeps it).
    pub home: u32,
    pub budget: u64,
    pub members: Vec<H>,
    /// The server's exhaustion needs no loop step ([`Stop::quiet`]); never for a copy.
    pub quiet: bool,
}

/// Each CPU's plan from the core's exhaustion plan (`exhaustion`: per CPU, the servers with a
/// ready member in EDF order, each with the time it runs out if they run one after the other,
/// [`rtbox_core::Scheduler::exhaustion_plan`]) and the running members of each server
/// (`by_server`), at core time `now`:
/// - a hard-mode server's members stop when its budget would be spent;
/// - a hard-mode server whose members all read as blocked may still run (a thread the
///   backstop froze reads as sleeping until the loop sees its report; a thread may wake
///   between two polls) and spend its whole budget from now: it stops then. Measured without
///   this: a member thawed while its server looked idle ran 1.04 ms unplanned. Only with
///   `idle_stops`: with the BPF sensor a member's wake-up on an idle server wakes the loop,
///   which plans it then, and such stops woke the backstop every budget for nothing;
/// - every CPU also watches the other CPUs' stops, [`backstop::WATCH_SLACK`] later: a vCPU
///   whose timer interrupt the host delivers late runs its member on while its own backstop
///   (and the loop, if there) sleep; measured: 300 us late wake-ups of both, and 340 us run.
///   A copy that acts wakes the loop (its CPU was late), so copies are never quiet;
/// - the stops of the `quiet` servers are quiet ([`Stop::quiet`]).
pub fn plan<H: Clone>(
    now: Nanos,
    exhaustion: &BTreeMap<u32, Vec<(ServerId, Nanos)>>,
    mut by_server: BTreeMap<ServerId, ServerMembers<H>>,
    idle_stops: bool,
    quiet: &BTreeSet<ServerId>,
    server: impl Fn(ServerId) -> PlanServer,
) -> Vec<(u32, Vec<Planned<H>>)> {
    let left = |info: &PlanServer| u64::try_from(info.runtime.max(0)).unwrap_or(0);
    let mut plans = Vec::new();
    for (&cpu, order) in exhaustion {
        let mut stops = Vec::new();
        for &(s, at) in order {
            let info = server(s);
            if !info.hard {
                continue;
            }
            if let Some(m) = by_server.remove(&s) {
                stops.push(Planned {
                    at,
                    home: cpu,
                    budget: left(&info),
                    members: m.members,
                    quiet: quiet.contains(&s),
                });
            }
        }
        plans.push((cpu, stops));
    }
    for (s, m) in by_server.into_iter().filter(|_| idle_stops) {
        let info = server(s);
        if info.throttled || !info.hard {
            continue;
        }
        let budget = left(&info);
        if let Some((_, stops)) = plans.iter_mut().find(|(c, _)| *c == info.cpu) {
            stops.push(Planned {
                at: now + budget,
                home: info.cpu,
                budget,
                members: m.members,
                quiet: false,
            });
        }
    }
    add_watch_copies(&mut plans);
    plans
}

/// Adds to each CPU's plan (its own stops) the copies of every other CPU's stops, watched
/// [`backstop::WATCH_SLACK`] later and never quiet (see [`plan`]); own stops come first.
pub fn add_watch_copies<H: Clone>(plans: &mut [(u32, Vec<Planned<H>>)]) {
    let own: Vec<usize> = plans.iter().map(|(_, v)| v.len()).collect();
    for i in 0..plans.len() {
        for j in (0..plans.len()).filter(|&j| j != i) {
            for k in 0..own[j] {
                let st = &plans[j].1[k];
                let copy = Planned {
                    at: st.at + backstop::WATCH_SLACK,
                    home: st.home,
                    budget: st.budget,
                    members: st.members.clone(),
                    quiet: false,
                };
                plans[i].1.push(copy);
            }
        }
    }
}

/// What the backstop stopped, as the loop took it back.
#[derive(Debug, Default)]
struct Stops {
    /// Members the backstop stopped (the loop was late).
    count: u64,
    /// When the loop took the backstop's stops back (core time), for figures (capped list).
    times: Vec<Nanos>,
}

impl Stops {
    fn add(&mut self, now: Nanos, report: &[i32]) {
        self.count += report.len() as u64;
        if !report.is_empty() && self.times.len() < 10_000 {
            self.times.push(now);
        }
    }
}

/// The backstop and its figures.
#[derive(Default)]
pub struct Guard {
    backstop: Option<Backstop>,
    stops: Stops,
    /// A release withdrew every plan: the step that did it publishes them again.
    withdrawn: bool,
}

impl Guard {
    pub fn new(backstop: Option<Backstop>) -> Self {
        Guard {
            backstop,
            ..Guard::default()
        }
    }

    pub fn active(&self) -> bool {
        self.backstop.is_some()
    }

    /// The members quiet stops froze since the loop last looked, and when (core time, from
    /// `epoch`: CLOCK_MONOTONIC at core time 0), in time order.
    pub fn take_quiet(&mut self, epoch: u64) -> Vec<(i32, Nanos)> {
        let Some(b) = &self.backstop else {
            return Vec::new();
        };
        let mut v: Vec<(i32, Nanos)> = b
            .take_quiet()
            .into_iter()
            .map(|(t, at)| (t, at.saturating_sub(epoch)))
            .collect();
        v.sort_by_key(|&(t, at)| (at, t));
        v
    }

    /// The members the backstop stopped since the loop last looked.
    pub fn take_report(&mut self, now: Nanos) -> Vec<i32> {
        let report = match &self.backstop {
            Some(b) => b.lock().report,
            None => return Vec::new(),
        };
        self.stops.add(now, &report);
        report
    }

    /// Publishes the plans (`epoch`: CLOCK_MONOTONIC at core time 0); returns the members the
    /// last plans stopped meanwhile. `owned`: the backstop takes every stop at its planned time
    /// ([`Stop::owned`]; with the BPF sensor), else only [`backstop::SLACK`] after it, when the
    /// loop was late. `thawing`: members frozen now that this step thaws; a stop of only such
    /// members waits for their thaw ([`Stop::pending`], [`Locked::thawed`]).
    pub fn publish(
        &mut self,
        now: Nanos,
        epoch: u64,
        plans: Vec<(u32, Vec<Planned<Handle>>)>,
        owned: bool,
        thawing: &BTreeSet<i32>,
    ) -> Vec<i32> {
        let Some(b) = self.backstop.as_mut() else {
            return Vec::new();
        };
        let plans = plans
            .into_iter()
            .map(|(cpu, stops)| {
                let stops = stops
                    .into_iter()
                    .map(|p| Stop {
                        at: epoch + p.at,
                        home: p.home,
                        slack: if owned { 0 } else { backstop::SLACK },
                        budget: p.budget,
                        pending: owned
                            && !p.members.is_empty()
                            && p.members.iter().all(|h| thawing.contains(&h.tid)),
                        members: p.members,
                        quiet: owned && p.quiet,
                    })
                    .collect();
                (cpu, stops)
            })
            .collect();
        let report = b.publish_from(plans, epoch + now);
        self.stops.add(now, &report);
        report
    }

    /// Withdraws every plan (a member is being released: no backstop may stop it once
    /// thawed); returns the members it had stopped.
    pub fn withdraw(&mut self, now: Nanos) -> Vec<i32> {
        let Some(b) = self.backstop.as_mut() else {
            return Vec::new();
        };
        let report = b.publish(Vec::new());
        self.withdrawn = true;
        self.stops.add(now, &report);
        report
    }

    /// Whether a release withdrew the plans since the last call.
    pub fn take_withdrawn(&mut self) -> bool {
        std::mem::take(&mut self.withdrawn)
    }

    /// The backstop's lock for a thaw (see [`Backstop::lock`]), with the members it stopped;
    /// `None` without a backstop.
    pub fn lock(&mut self, now: Nanos) -> Option<Locked<'_>> {
        let b = self.backstop.as_ref()?;
        let locked = b.lock();
        self.stops.add(now, &locked.report);
        Some(locked)
    }

    /// Sleeps until CLOCK_MONOTONIC `deadline`; a backstop stop, or one of `extra` becoming
    /// readable (the BPF sensor's events, process events), wakes it early. Which of `extra`
    /// were readable.
    pub fn sleep_until(&self, deadline: u64, extra: &[BorrowedFd<'_>]) -> Woke {
        match &self.backstop {
            Some(b) => b.sleep_until(deadline, extra),
            None if extra.is_empty() => {
                rtbox_linux::sleep_until(deadline);
                Woke::nothing(0)
            }
            None => {
                let now = rtbox_linux::monotonic_ns();
                if deadline <= now {
                    return Woke::nothing(extra.len());
                }
                Woke {
                    backstop: false,
                    extra: rtbox_linux::fdwait::wait_readable(extra, Some(deadline - now))
                        .unwrap_or_else(|_| vec![false; extra.len()]),
                }
            }
        }
    }

    /// Stops the backstop threads (nothing is stopped after this).
    pub fn stop(&mut self) {
        self.backstop = None;
    }

    pub fn stops(&self) -> u64 {
        self.stops.count
    }

    pub fn times(&self) -> &[Nanos] {
        &self.stops.times
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Nanos = 1_000;

    fn info(cpu: u32, runtime: i64, hard: bool) -> PlanServer {
        PlanServer {
            cpu,
            runtime,
            throttled: false,
            hard,
        }
    }

    fn members(ready: bool, tids: &[i32]) -> ServerMembers<i32> {
        ServerMembers {
            ready,
            members: tids.to_vec(),
        }
    }

    #[test]
    fn hard_servers_stop_at_their_planned_exhaustion() {
        // CPU 0 in EDF order: server 2 (reclaim, never stopped), then 1, then 0, as the core
        // plans them.
        let exhaustion = BTreeMap::from([(
            0,
            vec![
                (ServerId(2), 1_100 * US),
                (ServerId(1), 1_400 * US),
                (ServerId(0), 1_900 * US),
            ],
        )]);
        let by = BTreeMap::from([
            (ServerId(0), members(true, &[10])),
            (ServerId(1), members(true, &[11])),
            (ServerId(2), members(true, &[12])),
        ]);
        let servers = |s: ServerId| match s.0 {
            0 => info(0, 500_000, true),
            1 => info(0, 300_000, true),
            _ => info(0, 100_000, false),
        };
        let p = plan(1_000 * US, &exhaustion, by, true, &BTreeSet::new(), servers);
        assert_eq!(
            p,
            vec![(
                0,
                vec![
                    Planned {
                        at: 1_400 * US,
                        home: 0,
                        budget: 300_000,
                        members: vec![11],
                        quiet: false,
                    },
                    Planned {
                        at: 1_900 * US,
                        home: 0,
                        budget: 500_000,
                        members: vec![10],
                        quiet: false,
                    },
                ]
            )]
        );
    }

    #[test]
    fn a_server_without_ready_members_is_planned_from_now_and_watched_from_other_cpus() {
        // Server 0 has no ready member, so the core's plan leaves it out.
        let exhaustion = BTreeMap::from([(0, vec![]), (1, vec![(ServerId(1), 400 * US)])]);
        let by = BTreeMap::from([
            (ServerId(0), members(false, &[10])),
            (ServerId(1), members(true, &[11])),
        ]);
        let servers = |s: ServerId| info(s.0, 200_000 * (1 + i64::from(s.0)), true);
        let p = plan(0, &exhaustion, by, true, &BTreeSet::new(), servers);
        let cpu0 = &p[0].1;
        let cpu1 = &p[1].1;
        // Server 0 (blocked) is still stopped after its whole budget from now.
        assert_eq!(cpu0[0].at, 200 * US);
        assert_eq!(cpu0[0].members, vec![10]);
        // Server 1's own stop, and CPU 0's copy of it, later by the watch slack.
        assert_eq!(cpu1[0].at, 400 * US);
        assert_eq!(cpu0[1].at, 400 * US + backstop::WATCH_SLACK);
        assert_eq!(cpu1[1].at, 200 * US + backstop::WATCH_SLACK);
        assert_eq!((cpu0.len(), cpu1.len()), (2, 2));
    }

    #[test]
    fn throttled_or_reclaim_servers_are_never_planned() {
        let exhaustion = BTreeMap::from([(0, vec![(ServerId(1), 100)])]);
        let by = BTreeMap::from([
            (ServerId(0), members(false, &[10])),
            (ServerId(1), members(true, &[11])),
        ]);
        let servers = |s: ServerId| PlanServer {
            cpu: 0,
            runtime: 100,
            throttled: s.0 == 0,
            hard: s.0 == 0,
        };
        assert_eq!(
            plan(0, &exhaustion, by, true, &BTreeSet::new(), servers),
            vec![(0, vec![])]
        );
    }
}
