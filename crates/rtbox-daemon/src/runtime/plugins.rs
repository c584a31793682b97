//! Plug-in boxes in the daemon (seed 001, docs/exsched.md): the same
//! [`rtbox_core::plugin::PluginGroup`] the simulator feeds decides each periodic task's
//! priority and vCPU here; this module only feeds it what the daemon knows and hands its
//! decisions to the core, whose placement and local priorities the bands then carry out on the
//! real threads (affinity, SCHED_FIFO priority inside the box's band).
//!
//! What the daemon knows of a task of the task API (`jobs.rs`): its declaration at `task_run`
//! and, from its job page, when its first job was released and how many jobs completed. The
//! task releases job k at `first + k T` (rtbox-task's `wait_for_period` keeps releases nominal),
//! so the releases due by `now` are known without a request: a job is ready from its nominal
//! release until the page counts it completed, the simulator's rule. The loop wakes at each
//! nominal release and at the group's timers ([`PluginDriver::next_timer`]).
//!
//! [`PluginDriver`] is pure (no clock, no I/O): the scenario test `rtbox-scenarios/tests/plugins.rs`
//! drives it in virtual time against the simulator. The [`Runtime`] glue at the bottom reads
//! the pages and the members table.
//!
//! Protocol per loop step (the core's driver protocol, `rtbox_core::plugin`):
//! [`PluginDriver::set_tasks`] (groups rebuilt when tasks come or go), [`PluginDriver::feed`]
//! before `Scheduler::advance` (charge, job hooks, timers, apply), [`PluginDriver::observe`]
//! after it (who runs, for the budgets).

use rtbox_core::plugin::{PeriodicTask, PluginGroup, Verdict};
use rtbox_core::{CoreError, Scheduler, TaskId};
use rtbox_model::{priority_levels, Nanos, System, TaskSpec};
use rtbox_sim::plugin::AnalysisTest;

use super::Runtime;

/// A periodic task of a plug-in box, as declared at `task_run`. The plug-in decides its
/// priority from deadline-monotonic levels (ties: shorter period, then the lower thread id,
/// usually the task that entered first), as the seed's plug-ins assign DM priorities; a priority the task declared
/// (`rt_set_priority`) is shown in status but not used in a plug-in box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupTask {
    /// The task's thread id (the key of its member and of its job page).
    pub key: i32,
    /// Its member's task in the core.
    pub task: TaskId,
    pub box_name: String,
    pub wcet: Nanos,
    pub period: Nanos,
    pub deadline: Nanos,
}

/// A task's jobs at a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobCounts {
    /// Jobs released by now (nominal releases).
    pub released: u64,
    /// Jobs completed (the job page's counter).
    pub completed: u64,
    /// The next nominal release after now (core time), once the task runs.
    pub next: Option<Nanos>,
}

impl JobCounts {
    /// The counts of a task whose first job was released at `first` (core time; `None`: not
    /// started) with period `period`: job k is released at `first + k period`.
    pub fn nominal(first: Option<Nanos>, period: Nanos, now: Nanos, completed: u64) -> JobCounts {
        debug_assert!(period > 0, "a declared period is above 0");
        let Some(first) = first else {
            return JobCounts {
                completed,
                ..JobCounts::default()
            };
        };
        let released = if now < first {
            0
        } else {
            (now - first) / period + 1
        };
        JobCounts {
            // A job completes only after its release (a late reading may see it first).
            released: released.max(completed),
            completed,
            next: Some(first + released * period),
        }
    }

    fn pending(&self) -> bool {
        self.released > self.completed
    }
}

/// The group hooks for a task whose counts went from `seen` to `now_counts`: completions first
/// (with `more` when a later job is already due, as the simulator wakes a task whose next job
/// is pending), then a release if the task became ready. A whole job between two steps is
/// released and completed at once.
fn feed_jobs(group: &mut PluginGroup, now: Nanos, t: usize, seen: JobCounts, c: JobCounts) {
    if c.completed > seen.completed {
        if !group.ctx().is_ready(t) {
            group.job_released(now, t);
        }
        group.job_completed(now, t, c.pending());
    } else if c.pending() && !group.ctx().is_ready(t) {
        group.job_released(now, t);
    }
}

/// Whether group task `t` runs now, for its armed budget. A pinned plug-in's task runs when
/// its job is ready (nominal release reached, completion not yet counted), it is the most
/// urgent ready task the plug-in placed on its vCPU, and that vCPU's server is not throttled:
/// what the kernel does with the priorities and affinities the daemon set. The core's own
/// view (`core_runs`) learns a member's wake-up only at the loop's next look (up to a poll
/// later with the perf sensor), which let a migratory task run that much past its budget on
/// its first CPU (measured: FP-PM's split task stayed on CPU 0 and the task below it there
/// missed most deadlines). A global plug-in's tasks run where the core places them.
pub fn runs_now(
    ctx: &rtbox_core::plugin::GroupCtx,
    t: usize,
    core_runs: bool,
    live: impl Fn(u32) -> bool,
) -> bool {
    if ctx.scope() == rtbox_core::plugin::Scope::Global {
        return core_runs;
    }
    ctx.is_ready(t)
        && ctx
            .cpu_of(t)
            .is_some_and(|c| live(c) && ctx.top(c, None) == Some(t))
}

/// Whether the server of `box_name` on `cpu` may run members now (not throttled).
fn live_vcpu(sched: &Scheduler, box_name: &str, cpu: u32) -> bool {
    sched
        .box_servers(box_name)
        .iter()
        .map(|&s| sched.server(s))
        .any(|s| s.cpu == cpu && !s.throttled)
}

/// One plug-in box's group and, per group task, its key, core task and last counts.
#[derive(Debug)]
struct Group {
    box_name: String,
    group: PluginGroup,
    keys: Vec<i32>,
    ids: Vec<TaskId>,
    seen: Vec<JobCounts>,
}

/// The plug-in groups of the daemon's plug-in boxes.
#[derive(Debug, Default)]
pub struct PluginDriver {
    groups: Vec<Group>,
    /// The tasks the groups were built from.
    tasks: Vec<GroupTask>,
    /// The box set changed since: rebuild at the next [`PluginDriver::set_tasks`].
    stale: bool,
}

impl PluginDriver {
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.tasks.is_empty()
    }

    /// The box set changed (servers renumbered): the groups are rebuilt at the next step.
    pub fn invalidate(&mut self) {
        self.stale = true;
    }

    /// The plug-in tasks now (every box's, by thread id). When they differ from
    /// the last call's, every group is built again (ExSched's `task_run_plugin` for each task,
    /// in decreasing DM priority: `PluginGroup::new`), keeping what was seen of each task's
    /// jobs; a task with a pending job is released again so the plug-in places it. Returns
    /// whether it rebuilt.
    pub fn set_tasks(
        &mut self,
        now: Nanos,
        sched: &mut Scheduler,
        system: &System,
        tasks: Vec<GroupTask>,
    ) -> Result<bool, CoreError> {
        if !self.stale && tasks == self.tasks {
            return Ok(false);
        }
        let old: Vec<(i32, JobCounts)> = self
            .groups
            .iter()
            .flat_map(|g| g.keys.iter().copied().zip(g.seen.iter().copied()))
            .collect();
        self.groups.clear();
        for b in system.boxes() {
            let (name, Some(kind)) = (&b.spec.name, b.spec.plugin) else {
                continue;
            };
            let mine: Vec<&GroupTask> = tasks.iter().filter(|t| &t.box_name == name).collect();
            if mine.is_empty() {
                continue;
            }
            let specs: Vec<TaskSpec> = mine
                .iter()
                .map(|t| TaskSpec {
                    deadline: t.deadline,
                    ..TaskSpec::periodic(t.key.to_string(), t.wcet, t.period)
                })
                .collect();
            let levels = priority_levels(&specs);
            let periodic = specs
                .iter()
                .zip(&levels)
                .map(|(s, &priority)| PeriodicTask {
                    name: s.name.clone(),
                    wcet: s.wcet,
                    period: s.period,
                    deadline: s.deadline,
                    priority,
                })
                .collect();
            let test = AnalysisTest::for_box(sched, name);
            let Some(mut group) = PluginGroup::on_box(kind, name, sched, periodic, &test) else {
                continue;
            };
            group.charge(now);
            let keys: Vec<i32> = mine.iter().map(|t| t.key).collect();
            let seen: Vec<JobCounts> = keys
                .iter()
                .map(|k| {
                    old.iter()
                        .find(|(o, _)| o == k)
                        .map_or_else(JobCounts::default, |o| o.1)
                })
                .collect();
            for (t, s) in seen.iter().enumerate() {
                if s.pending() {
                    group.job_released(now, t);
                }
            }
            let ids: Vec<TaskId> = mine.iter().map(|t| t.task).collect();
            group.apply(sched, now, &ids)?;
            tracing::info!(
                box_name = name.as_str(),
                plugin = group.plugin_name(),
                tasks = keys.len(),
                verdicts = ?(0..keys.len()).map(|t| (keys[t], group.verdict(t).name(), group.cpu(t), group.priority(t))).collect::<Vec<_>>(),
                "plug-in group built"
            );
            self.groups.push(Group {
                box_name: name.clone(),
                group,
                keys,
                ids,
                seen,
            });
        }
        self.tasks = tasks;
        self.stale = false;
        Ok(true)
    }

    /// Before `Scheduler::advance(now)`: execution since the last observation counts against
    /// armed budgets, then each task's new jobs go to the plug-in's hooks (`counts` of a task
    /// by key; `None` leaves it as it was), then due timers fire, and the plug-ins' changed
    /// priorities and vCPUs go to the core.
    pub fn feed(
        &mut self,
        now: Nanos,
        sched: &mut Scheduler,
        counts: impl Fn(i32) -> Option<JobCounts>,
    ) -> Result<(), CoreError> {
        for g in &mut self.groups {
            g.group.charge(now);
            for t in 0..g.keys.len() {
                let Some(c) = counts(g.keys[t]) else { continue };
                tracing::trace!(now, task = g.keys[t], ?c, seen = ?g.seen[t], "plug-in task jobs");
                feed_jobs(&mut g.group, now, t, g.seen[t], c);
                g.seen[t] = c;
            }
            let before: Vec<Option<u32>> = (0..g.keys.len()).map(|t| g.group.cpu(t)).collect();
            g.group.fire(now);
            g.group.apply(sched, now, &g.ids)?;
            if tracing::enabled!(tracing::Level::DEBUG) {
                for (t, b) in before.into_iter().enumerate() {
                    if g.group.cpu(t) != b {
                        tracing::debug!(now, task = g.keys[t], from = ?b, to = ?g.group.cpu(t), "plug-in moved a task");
                    }
                }
            }
        }
        Ok(())
    }

    /// After `Scheduler::advance(now)`: which group tasks run now (their budgets count), by
    /// [`runs_now`].
    pub fn observe(&mut self, now: Nanos, sched: &Scheduler) {
        if self.groups.is_empty() {
            return;
        }
        let running: Vec<TaskId> = (0..sched.cpu_count())
            .filter_map(|c| sched.running_at(c).map(|r| r.task))
            .collect();
        for g in &mut self.groups {
            let ctx = g.group.ctx();
            let flags: Vec<bool> = (0..g.keys.len())
                .map(|t| {
                    runs_now(ctx, t, running.contains(&g.ids[t]), |c| {
                        live_vcpu(sched, &g.box_name, c)
                    })
                })
                .collect();
            g.group.observe(now, |t| flags[t]);
        }
    }

    /// When the loop must look again: a plug-in timer (an armed budget running out) or a plug-in
    /// task's next nominal release.
    pub fn next_timer(&self) -> Option<Nanos> {
        let timers = self.groups.iter().filter_map(|g| g.group.next_timer());
        let releases = self
            .groups
            .iter()
            .flat_map(|g| g.seen.iter().filter_map(|s| s.next));
        timers.chain(releases).min()
    }

    /// Each plug-in task's priority (its local priority in the box), by key.
    pub fn priorities(&self) -> impl Iterator<Item = (i32, u32)> + '_ {
        self.groups.iter().flat_map(|g| {
            g.keys
                .iter()
                .enumerate()
                .map(|(t, &k)| (k, g.group.priority(t)))
        })
    }

    /// A task's plug-in, verdict and current vCPU.
    pub fn placement(&self, key: i32) -> Option<(&str, Verdict, Option<u32>)> {
        self.groups.iter().find_map(|g| {
            let t = g.keys.iter().position(|&k| k == key)?;
            Some((g.group.plugin_name(), g.group.verdict(t), g.group.cpu(t)))
        })
    }
}

impl Runtime {
    /// The tasks of plug-in boxes that declared their timing, whose thread is a member.
    fn plugin_tasks(&self) -> Vec<GroupTask> {
        self.jobs
            .live()
            .filter(|t| {
                self.system
                    .get(&t.box_name)
                    .is_some_and(|b| b.spec.plugin.is_some())
            })
            .filter_map(|t| {
                let d = t.declared?;
                let m = self.members.by_tid.get(&t.tid)?;
                Some(GroupTask {
                    key: t.tid,
                    task: m.task,
                    box_name: t.box_name.clone(),
                    wcet: d.wcet,
                    period: d.period,
                    deadline: d.deadline,
                })
            })
            .collect()
    }

    /// The plug-in half of a step, before the core advances: groups follow the tasks, take
    /// the jobs the pages show, fire their timers and move and re-rank their tasks in the core;
    /// each task's member gets the plug-in's priority as its local priority (the bands rank
    /// members by it).
    pub(super) fn drive_plugins(&mut self, now: Nanos) {
        if self.plugins.is_empty() && !self.system.boxes().iter().any(|b| b.spec.plugin.is_some()) {
            return;
        }
        let tasks = self.plugin_tasks();
        let result = self
            .plugins
            .set_tasks(now, &mut self.sched, &self.system, tasks)
            .and_then(|_| {
                let (jobs, epoch) = (&self.jobs, self.epoch);
                self.plugins.feed(now, &mut self.sched, |tid| {
                    jobs.get(tid).and_then(|t| t.job_counts(epoch, now))
                })
            });
        if let Err(e) = result {
            tracing::warn!(error = %e, "plug-in decision not applied");
        }
        for (tid, p) in self.plugins.priorities() {
            if let Some(m) = self.members.by_tid.get_mut(&tid) {
                m.local_prio = p;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtbox_core::{Accounting, Options, TaskParams};
    use rtbox_model::{BoxSpec, Interface, Platform, PluginKind};

    const MS: Nanos = 1_000_000;

    #[test]
    fn nominal_releases_follow_the_first_release_and_the_period() {
        let c = JobCounts::nominal(None, 10 * MS, 5 * MS, 0);
        assert_eq!((c.released, c.next), (0, None));
        let c = JobCounts::nominal(Some(2 * MS), 10 * MS, MS, 0);
        assert_eq!((c.released, c.next), (0, Some(2 * MS)));
        let c = JobCounts::nominal(Some(2 * MS), 10 * MS, 2 * MS, 0);
        assert_eq!((c.released, c.next), (1, Some(12 * MS)));
        let c = JobCounts::nominal(Some(2 * MS), 10 * MS, 31 * MS, 2);
        assert_eq!((c.released, c.completed, c.next), (3, 2, Some(32 * MS)));
        assert!(c.pending());
    }

    fn three_heavy(kind: PluginKind) -> (System, Scheduler, Vec<GroupTask>) {
        let mut b = BoxSpec::new(
            "g",
            Interface::PerCpu {
                budget: 10 * MS,
                period: 10 * MS,
            },
        );
        b.plugin = Some(kind);
        b.placement = kind.placement();
        let mut platform = Platform::with_cpus(2);
        platform.cap = rtbox_model::Bandwidth::ONE;
        let system = System::new(platform, vec![b], vec![]).unwrap();
        let opts = Options {
            accounting: Accounting::Measured,
            ..Options::default()
        };
        let mut sched = Scheduler::new(&system, opts).unwrap();
        let tasks = (0..3)
            .map(|i| {
                let task = sched
                    .add_task(TaskParams {
                        box_name: Some("g".into()),
                        ..TaskParams::background(format!("t{i}"), 0)
                    })
                    .unwrap();
                GroupTask {
                    key: 100 + i,
                    task,
                    box_name: "g".into(),
                    wcet: 5_500_000,
                    period: 10 * MS,
                    deadline: 10 * MS,
                }
            })
            .collect();
        (system, sched, tasks)
    }

    #[test]
    fn fp_pm_splits_the_third_task_and_moves_it_when_its_budget_is_used() {
        let (system, mut sched, tasks) = three_heavy(PluginKind::FpPm);
        let mut d = PluginDriver::default();
        assert!(d.set_tasks(0, &mut sched, &system, tasks.clone()).unwrap());
        assert!(!d.set_tasks(0, &mut sched, &system, tasks.clone()).unwrap());
        let verdicts: Vec<_> = (100..103).map(|k| d.placement(k).unwrap().1).collect();
        assert_eq!(verdicts, vec![Verdict::Guaranteed; 3]);
        // All three release at 1 ms: the third runs on CPU 0 first, at the top priority.
        let counts = |now| move |_k| Some(JobCounts::nominal(Some(MS), 10 * MS, now, 0));
        d.feed(MS, &mut sched, counts(MS)).unwrap();
        for t in &tasks {
            sched.wake(MS, t.task, None).unwrap();
        }
        sched.advance(MS);
        d.observe(MS, &sched);
        assert_eq!(d.placement(102).unwrap().2, Some(0));
        let prio: std::collections::BTreeMap<i32, u32> = d.priorities().collect();
        assert!(
            prio[&102] > prio[&100] && prio[&100] > prio[&101],
            "{prio:?}"
        );
        assert_eq!(sched.running(0).map(|r| r.task), Some(tasks[2].task));
        // Its 4.5 ms share on CPU 0 is the next timer; at it, it moves to CPU 1.
        let at = d.next_timer().unwrap();
        assert_eq!(at, MS + 4_500_000);
        d.feed(at, &mut sched, counts(at)).unwrap();
        assert_eq!(d.placement(102).unwrap().2, Some(1));
        assert_eq!(
            sched.placement(tasks[2].task).map(|s| sched.server(s).cpu),
            Some(1)
        );
        // Its job completes at 6.5 ms; the next release (11 ms) brings it back to CPU 0.
        let done = |now| {
            move |k| {
                Some(JobCounts::nominal(
                    Some(MS),
                    10 * MS,
                    now,
                    (k == 102) as u64,
                ))
            }
        };
        d.feed(6_500_000, &mut sched, done(6_500_000)).unwrap();
        assert_eq!(d.next_timer(), Some(11 * MS));
        let c = |k| {
            Some(JobCounts::nominal(
                Some(MS),
                10 * MS,
                11 * MS,
                (k == 102) as u64,
            ))
        };
        d.feed(11 * MS, &mut sched, c).unwrap();
        assert_eq!(d.placement(102).unwrap().2, Some(0));
    }

    #[test]
    fn fp_ff_runs_the_third_task_in_the_background_and_a_leaving_task_rebuilds() {
        let (system, mut sched, mut tasks) = three_heavy(PluginKind::FpFf);
        let mut d = PluginDriver::default();
        d.set_tasks(0, &mut sched, &system, tasks.clone()).unwrap();
        let v: Vec<_> = (100..103).map(|k| d.placement(k).unwrap()).collect();
        assert_eq!(
            v,
            vec![
                ("fp-ff", Verdict::Guaranteed, Some(0)),
                ("fp-ff", Verdict::Guaranteed, Some(1)),
                ("fp-ff", Verdict::Background, Some(0)),
            ]
        );
        let prio: std::collections::BTreeMap<i32, u32> = d.priorities().collect();
        assert!(
            prio[&102] < prio[&100] && prio[&102] < prio[&101],
            "{prio:?}"
        );
        // The second task leaves: the third now fits CPU 1.
        tasks.remove(1);
        assert!(d.set_tasks(5, &mut sched, &system, tasks).unwrap());
        assert_eq!(
            d.placement(102).unwrap(),
            ("fp-ff", Verdict::Guaranteed, Some(1))
        );
        assert_eq!(d.placement(101), None);
    }
}
