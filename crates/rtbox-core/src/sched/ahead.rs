//! The core's near future when nothing but budgets and timers happen: the periods a driver can
//! carry out from a plan made in advance, without asking the core at each replenishment.
//!
//! A server alone on its CPU with a busy member repeats one pattern: replenished at its
//! deadline (hard CBS, rule `cbs_replenish`), it runs its member for its budget, runs out
//! (rule `cbs_throttle`) and waits for the next deadline. The Linux runtime's backstop already
//! makes the exhaustion without the loop when it is quiet ([`Scheduler::quiet_exhaustion`]);
//! this answers the same question for the replenishment that follows, several periods ahead,
//! so the loop can make each one as a short step (thaw what the plan says, publish the next
//! stop) and take the core along at its next full step. Answered by running the core itself
//! on a copy, so the rules stay the core's.

use rtbox_model::Nanos;

use super::Scheduler;
use crate::types::{Accounting, ServerId, TaskId};

/// One replenishment instant the core can be run through without a decision of the driver:
/// at `at`, the servers of `runs` (replenished then) start running their tasks on CPUs that ran
/// nothing, and nothing else changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuietPeriod {
    /// The replenishment instant (core time).
    pub at: Nanos,
    /// Per server that starts running at `at`: the task it runs, its budget then, and whether
    /// its exhaustion after that budget is quiet too ([`Scheduler::quiet_exhaustion`] with no
    /// task waiting to take over).
    pub runs: Vec<QuietRun>,
}

/// A server that starts running at a [`QuietPeriod`]'s instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuietRun {
    pub server: ServerId,
    pub task: TaskId,
    pub budget: Nanos,
    pub quiet_exhaustion: bool,
}

impl Scheduler {
    /// The next replenishments, up to `max` of them and none after `until`, through which the
    /// core would only start the replenished servers on idle CPUs, when the running servers
    /// `exhausting` (in the order they run out) run out quietly first and every replenished
    /// server's member then runs for its whole budget. Each period's servers must all run out
    /// quietly for the next period to be looked at; the last period returned may have a loud
    /// exhaustion (the driver steps there). Empty when a CPU still runs something once the
    /// `exhausting` servers ran out, when a replenishment starts nothing or something other
    /// than a replenished server (a background task), or when an exhaustion of `exhausting`
    /// is not quiet. `startable(server, task)`: the driver can start `task` on `server` by
    /// itself (the Linux runtime: its member waits frozen on the server's CPU, at the priority
    /// it runs with); the periods end before the first one that starts another. Only for drivers that measure what runs (`Accounting::Measured`): with
    /// implicit accounting the core charges the time itself and there is no one to ask ahead.
    pub fn quiet_periods(
        &self,
        exhausting: &[ServerId],
        until: Nanos,
        max: usize,
        startable: impl Fn(ServerId, TaskId) -> bool,
    ) -> Vec<QuietPeriod> {
        let (mut probe, mut spare) = (self.clone(), self.clone());
        self.quiet_periods_in(exhausting, until, max, startable, &mut probe, &mut spare)
    }

    /// [`Scheduler::quiet_periods`] on two copies of this core, `probe` and `spare`, whose
    /// buffers are reused (`probe` is made a copy of `self` first; [`crate::Probes`]).
    pub(crate) fn quiet_periods_in(
        &self,
        exhausting: &[ServerId],
        until: Nanos,
        max: usize,
        startable: impl Fn(ServerId, TaskId) -> bool,
        probe: &mut Scheduler,
        spare: &mut Scheduler,
    ) -> Vec<QuietPeriod> {
        let mut out = Vec::new();
        if self.opts.accounting != Accounting::Measured {
            return out;
        }
        probe.refill_from(self);
        for &s in exhausting {
            if !probe.quiet_exhaustion_into(s, |_, _| false, spare) {
                return out;
            }
            std::mem::swap(probe, spare);
        }
        while out.len() < max {
            if probe.cpus.iter().any(|c| c.running.is_some()) {
                break;
            }
            let Some(at) = probe.next_replenish.filter(|&r| r <= until) else {
                break;
            };
            if probe.next_timer != Some(at) {
                break;
            }
            probe.advance(at);
            let mut runs = Vec::new();
            for c in &probe.cpus {
                let Some(r) = c.running else { continue };
                let Some(server) = r.server.filter(|&x| startable(x, r.task)) else {
                    return out;
                };
                runs.push(QuietRun {
                    server,
                    task: r.task,
                    budget: probe.budget_left(server),
                    quiet_exhaustion: false,
                });
            }
            if runs.is_empty() {
                break;
            }
            // Run out in budget order (ties: CPU order), each from the state the previous left.
            let mut order: Vec<usize> = (0..runs.len()).collect();
            order.sort_by_key(|&i| runs[i].budget);
            let mut all_quiet = true;
            for i in order {
                if !all_quiet {
                    break;
                }
                let quiet = probe.quiet_exhaustion_into(runs[i].server, |_, _| false, spare);
                if quiet {
                    std::mem::swap(probe, spare);
                }
                runs[i].quiet_exhaustion = quiet;
                all_quiet = quiet;
            }
            out.push(QuietPeriod { at, runs });
            if !all_quiet {
                break;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Options, TaskParams};

    use rtbox_model::{Bandwidth, BoxSpec, Interface, Placement, Platform, ServerSpec, System};

    const MS: Nanos = 1_000_000;

    /// Pinned boxes `(name, cpu, budget, period)`, each with one member woken at 0.
    fn sched(boxes: &[(&str, u32, Nanos, Nanos)]) -> (Scheduler, Vec<TaskId>) {
        let specs = boxes
            .iter()
            .map(|&(n, cpu, budget, period)| {
                let mut b = BoxSpec::new(
                    n,
                    Interface::Servers(vec![ServerSpec {
                        cpu,
                        budget,
                        period,
                    }]),
                );
                b.placement = Placement::Pinned;
                b
            })
            .collect();
        let mut platform = Platform::with_cpus(2);
        platform.cap = Bandwidth::ONE;
        let sys = System::new(platform, specs, vec![]).unwrap();
        let opts = Options {
            accounting: Accounting::Measured,
            ..Options::default()
        };
        let mut s = Scheduler::new(&sys, opts).unwrap();
        let mut tasks = Vec::new();
        for &(n, ..) in boxes {
            let t = s
                .add_task(TaskParams {
                    box_name: Some(n.into()),
                    ..TaskParams::background(format!("{n}-m"), 1)
                })
                .unwrap();
            s.wake(0, t, None).unwrap();
            tasks.push(t);
        }
        s.advance(0);
        (s, tasks)
    }

    #[test]
    fn a_lone_busy_server_repeats_quiet_periods_up_to_the_horizon() {
        let (s, tasks) = sched(&[("A", 0, 2 * MS, 10 * MS)]);
        let a = s.box_servers("A")[0];
        let p = s.quiet_periods(&[a], 45 * MS, 16, |_, _| true);
        let at: Vec<Nanos> = p.iter().map(|q| q.at).collect();
        assert_eq!(at, vec![10 * MS, 20 * MS, 30 * MS, 40 * MS]);
        for q in &p {
            assert_eq!(
                q.runs,
                vec![QuietRun {
                    server: a,
                    task: tasks[0],
                    budget: 2 * MS,
                    quiet_exhaustion: true
                }]
            );
        }
        assert_eq!(
            s.quiet_periods(&[a], 45 * MS, 2, |_, _| true).len(),
            2,
            "max"
        );
        // The core asked is left as it was.
        assert_eq!(s.now(), 0);
        assert!(!s.is_throttled(a));
    }

    #[test]
    fn servers_of_two_cpus_replenished_together_are_one_period() {
        let (s, _) = sched(&[("A", 0, MS, 10 * MS), ("B", 1, 3 * MS, 10 * MS)]);
        let (a, b) = (s.box_servers("A")[0], s.box_servers("B")[0]);
        let p = s.quiet_periods(&[a, b], 25 * MS, 16, |_, _| true);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].at, 10 * MS);
        let servers: Vec<(ServerId, Nanos, bool)> = p[0]
            .runs
            .iter()
            .map(|r| (r.server, r.budget, r.quiet_exhaustion))
            .collect();
        assert_eq!(servers, vec![(a, MS, true), (b, 3 * MS, true)]);
    }

    #[test]
    fn the_periods_end_before_a_task_the_driver_cannot_start() {
        let (s, tasks) = sched(&[("A", 0, 2 * MS, 10 * MS)]);
        let a = s.box_servers("A")[0];
        assert!(s.quiet_periods(&[a], 45 * MS, 16, |_, _| false).is_empty());
        let p = s.quiet_periods(&[a], 45 * MS, 16, |srv, t| srv == a && t == tasks[0]);
        assert_eq!(p.len(), 4);
    }

    #[test]
    fn nothing_ahead_while_another_server_runs_or_the_exhaustion_is_loud() {
        // Two boxes on CPU 0: when A runs out, B takes the CPU, which the driver must do.
        let (s, _) = sched(&[("A", 0, 2 * MS, 10 * MS), ("B", 0, 3 * MS, 10 * MS)]);
        let a = s.box_servers("A")[0];
        assert!(s.quiet_periods(&[a], 100 * MS, 16, |_, _| true).is_empty());
        // A running server left out of `exhausting` still runs at the replenishment.
        let (s, _) = sched(&[("A", 0, 2 * MS, 10 * MS), ("B", 1, 3 * MS, 20 * MS)]);
        let a = s.box_servers("A")[0];
        assert!(s.quiet_periods(&[a], 100 * MS, 16, |_, _| true).is_empty());
    }
}
