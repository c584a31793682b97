//! A plug-in group: the plug-in, the state it reads and changes, and the driver's entry points.

use std::fmt;

use rtbox_model::{Nanos, PluginKind, System};

use super::builtin::builtin;
use super::{levels, FpTest, PeriodicTask, Plugin, Scope, Verdict};
use crate::{CoreError, Scheduler, TaskId};

/// What a plug-in may not do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupError {
    /// The CPU is not one of the group's vCPUs.
    NotAGroupCpu(u32),
    /// A global-scope plug-in leaves placement to the scheduler.
    GlobalScope,
}

impl fmt::Display for GroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupError::NotAGroupCpu(c) => write!(f, "CPU {c} is not a vCPU of the group"),
            GroupError::GlobalScope => {
                f.write_str("a global plug-in leaves placement to the scheduler")
            }
        }
    }
}

/// The group as a plug-in sees and changes it: ExSched's task descriptors plus its primitives.
#[derive(Debug, Clone)]
pub struct GroupCtx {
    now: Nanos,
    scope: Scope,
    cpus: Vec<u32>,
    tasks: Vec<PeriodicTask>,
    cpu: Vec<Option<u32>>,
    priority: Vec<u32>,
    ready: Vec<bool>,
    running: Vec<bool>,
    /// Execution left before `budget_used` fires (counted while the task runs).
    budget: Vec<Option<Nanos>>,
    /// Since when `running` and `budget` are accounted.
    since: Nanos,
    timers: Vec<(Nanos, u64)>,
    changed: Vec<bool>,
}

impl GroupCtx {
    pub fn now(&self) -> Nanos {
        self.now
    }
    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }
    pub fn scope(&self) -> Scope {
        self.scope
    }
    /// The group's CPU count, the m of the multiprocessor rules.
    pub fn m(&self) -> usize {
        self.cpus.len()
    }
    pub fn len(&self) -> usize {
        self.tasks.len()
    }
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
    pub fn task(&self, t: usize) -> &PeriodicTask {
        &self.tasks[t]
    }
    pub fn cpu_of(&self, t: usize) -> Option<u32> {
        self.cpu[t]
    }
    pub fn priority_of(&self, t: usize) -> u32 {
        self.priority[t]
    }
    /// A job of `t` is released and not completed.
    pub fn is_ready(&self, t: usize) -> bool {
        self.ready[t]
    }
    /// `t` ran at the last decision the driver reported.
    pub fn is_running(&self, t: usize) -> bool {
        self.running[t]
    }

    /// The most urgent ready task placed on `cpu`, other than `except`: what that CPU runs
    /// once the scheduler decides (fixed priority per CPU; ties by index).
    pub fn top(&self, cpu: u32, except: Option<usize>) -> Option<usize> {
        (0..self.tasks.len())
            .filter(|&t| Some(t) != except && self.ready[t] && self.cpu[t] == Some(cpu))
            .max_by_key(|&t| (self.priority[t], std::cmp::Reverse(t)))
    }

    /// ExSched's `migrate_task`: `t` runs on `cpu` from the next decision.
    pub fn migrate(&mut self, t: usize, cpu: u32) -> Result<(), GroupError> {
        if self.scope == Scope::Global {
            return Err(GroupError::GlobalScope);
        }
        if !self.cpus.contains(&cpu) {
            return Err(GroupError::NotAGroupCpu(cpu));
        }
        if self.cpu[t] != Some(cpu) {
            self.cpu[t] = Some(cpu);
            self.changed[t] = true;
        }
        Ok(())
    }

    pub fn set_priority(&mut self, t: usize, priority: u32) {
        if self.priority[t] != priority {
            self.priority[t] = priority;
            self.changed[t] = true;
        }
    }

    /// `budget_used(t)` fires once `t` has executed `ns` more (on whatever CPU it runs).
    pub fn arm_budget(&mut self, t: usize, ns: Nanos) {
        self.budget[t] = Some(ns);
    }

    pub fn disarm_budget(&mut self, t: usize) {
        self.budget[t] = None;
    }

    /// `timer(key)` fires at `at`.
    pub fn start_timer(&mut self, at: Nanos, key: u64) {
        self.timers.push((at, key));
    }

    /// The CPU with the fewest tasks placed on it (lowest id on ties).
    pub fn least_loaded_cpu(&self) -> u32 {
        *self
            .cpus
            .iter()
            .min_by_key(|&&c| (self.cpu.iter().filter(|&&x| x == Some(c)).count(), c))
            .expect("a group has CPUs")
    }
}

/// Rule: a plug-in ranks its tasks by their rank in the group, not by the raw priority a
/// driver gave (DM levels 1..n from `rtbox_model::priority_levels`, or a configuration's
/// explicit priorities, any values in 1..99). [`levels`] puts background, admitted and "highest
/// priority" tasks in three disjoint bands only when every level is in 1..n: with raw values
/// FP-PM's migratory task at `top(3, n)` could sit below an admitted task at `normal(50, n)`.
/// Each task's priority becomes its dense rank (1 = least urgent; equal priorities share a
/// rank), which keeps the order and the ties.
fn ranked(mut tasks: Vec<PeriodicTask>) -> Vec<PeriodicTask> {
    let mut values: Vec<u32> = tasks.iter().map(|t| t.priority).collect();
    values.sort_unstable();
    values.dedup();
    for t in &mut tasks {
        let rank = values.partition_point(|&v| v < t.priority) + 1;
        t.priority = rank as u32;
    }
    debug_assert!(tasks
        .iter()
        .all(|t| (1..=tasks.len() as u32).contains(&t.priority)));
    tasks
}

/// A plug-in over the periodic tasks of one box, with the state the drivers feed.
pub struct PluginGroup {
    plugin: Box<dyn Plugin>,
    ctx: GroupCtx,
    verdicts: Vec<Verdict>,
}

impl fmt::Debug for PluginGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginGroup")
            .field("plugin", &self.plugin.name())
            .field("ctx", &self.ctx)
            .field("verdicts", &self.verdicts)
            .finish()
    }
}

impl PluginGroup {
    /// Admits every task in decreasing DM priority (ties by index), as the seed's first-fit
    /// plug-ins take tasks in priority order (Kato and Yamasaki 2009, DM-PM). Tasks start at
    /// their DM level; a pinned plug-in that leaves a task unplaced gets it on the least
    /// loaded CPU.
    pub fn new(
        plugin: Box<dyn Plugin>,
        cpus: Vec<u32>,
        tasks: Vec<PeriodicTask>,
        test: &dyn FpTest,
    ) -> Self {
        assert!(!cpus.is_empty(), "a plug-in group needs at least one CPU");
        let tasks = ranked(tasks);
        let n = tasks.len();
        let ctx = GroupCtx {
            now: 0,
            scope: plugin.scope(),
            cpus,
            priority: tasks
                .iter()
                .map(|t| levels::normal(t.priority, n))
                .collect(),
            tasks,
            cpu: vec![None; n],
            ready: vec![false; n],
            running: vec![false; n],
            budget: vec![None; n],
            since: 0,
            timers: Vec::new(),
            changed: vec![true; n],
        };
        let mut g = PluginGroup {
            plugin,
            ctx,
            verdicts: vec![Verdict::Unproven; n],
        };
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&t| (std::cmp::Reverse(g.ctx.tasks[t].priority), t));
        for t in order {
            g.verdicts[t] = g.plugin.task_admitted(&mut g.ctx, t, test);
            if g.ctx.scope == Scope::Pinned && g.ctx.cpu[t].is_none() {
                let c = g.ctx.least_loaded_cpu();
                g.ctx.cpu[t] = Some(c);
            }
        }
        g
    }

    /// The group of a box with a `plugin`: its tasks (indices into `system.tasks`, in system
    /// order) at their DM levels `priorities`, on the CPUs of the box's servers in `sched`.
    /// `None` for a box without a plug-in or without servers. Both drivers build groups here.
    pub fn for_box(
        system: &System,
        box_name: &str,
        sched: &Scheduler,
        priorities: &[u32],
        test: &dyn FpTest,
    ) -> Option<(PluginGroup, Vec<usize>)> {
        let kind = system.get(box_name)?.spec.plugin?;
        let members: Vec<usize> = (0..system.tasks.len())
            .filter(|&t| system.tasks[t].box_name.as_deref() == Some(box_name))
            .collect();
        let tasks = members
            .iter()
            .map(|&t| {
                let s = &system.tasks[t];
                PeriodicTask {
                    name: s.name.clone(),
                    wcet: s.wcet,
                    period: s.period,
                    deadline: s.deadline,
                    priority: priorities[t],
                }
            })
            .collect();
        let group = PluginGroup::on_box(kind, box_name, sched, tasks, test)?;
        Some((group, members))
    }

    /// The built-in plug-in `kind` over `tasks` on the vCPUs of `box_name`'s servers in
    /// `sched`; `None` when the box has no servers. The daemon builds its groups here from the
    /// tasks that entered through the task API ([`PluginGroup::for_box`] from a system's tasks).
    pub fn on_box(
        kind: PluginKind,
        box_name: &str,
        sched: &Scheduler,
        tasks: Vec<PeriodicTask>,
        test: &dyn FpTest,
    ) -> Option<PluginGroup> {
        let cpus: Vec<u32> = sched
            .box_servers(box_name)
            .iter()
            .map(|&s| sched.server(s).cpu)
            .collect();
        if cpus.is_empty() {
            return None;
        }
        Some(PluginGroup::new(builtin(kind), cpus, tasks, test))
    }

    pub fn plugin_name(&self) -> &str {
        self.plugin.name()
    }
    pub fn scope(&self) -> Scope {
        self.ctx.scope
    }
    pub fn ctx(&self) -> &GroupCtx {
        &self.ctx
    }
    #[cfg(test)]
    pub(super) fn ctx_mut(&mut self) -> &mut GroupCtx {
        &mut self.ctx
    }
    pub fn verdict(&self, t: usize) -> Verdict {
        self.verdicts[t]
    }
    pub fn cpu(&self, t: usize) -> Option<u32> {
        self.ctx.cpu[t]
    }
    pub fn priority(&self, t: usize) -> u32 {
        self.ctx.priority[t]
    }

    /// Counts the execution since the last observation against armed budgets.
    pub fn charge(&mut self, now: Nanos) {
        debug_assert!(now >= self.ctx.since, "time went backwards");
        let dt = now - self.ctx.since;
        for t in 0..self.ctx.len() {
            if let (true, Some(b)) = (self.ctx.running[t], self.ctx.budget[t]) {
                self.ctx.budget[t] = Some(b.saturating_sub(dt));
            }
        }
        self.ctx.since = now;
        self.ctx.now = now;
    }

    /// A job of `t` became ready at `now`.
    pub fn job_released(&mut self, now: Nanos, t: usize) {
        self.ctx.now = now;
        self.ctx.ready[t] = true;
        self.plugin.job_released(&mut self.ctx, t);
    }

    /// The job of `t` completed at `now`; `more` when its next job is already pending (it stays
    /// ready and that job is released at once).
    pub fn job_completed(&mut self, now: Nanos, t: usize, more: bool) {
        self.ctx.now = now;
        self.ctx.ready[t] = false;
        self.ctx.budget[t] = None;
        self.plugin.job_completed(&mut self.ctx, t);
        if more {
            self.job_released(now, t);
        }
    }

    /// Runs the budget and time timers due at `now` (call after [`PluginGroup::charge`]).
    pub fn fire(&mut self, now: Nanos) {
        self.ctx.now = now;
        // A plug-in may arm again from a timer; a bounded number of rounds keeps a plug-in
        // that arms zero forever from looping.
        for _ in 0..=self.ctx.len() + self.ctx.timers.len() {
            let due_budget = (0..self.ctx.len()).find(|&t| self.ctx.budget[t] == Some(0));
            if let Some(t) = due_budget {
                self.ctx.budget[t] = None;
                self.plugin.budget_used(&mut self.ctx, t);
                continue;
            }
            let due_timer = self.ctx.timers.iter().position(|&(at, _)| at <= now);
            if let Some(i) = due_timer {
                let (_, key) = self.ctx.timers.swap_remove(i);
                self.plugin.timer(&mut self.ctx, key);
                continue;
            }
            break;
        }
    }

    /// Records which tasks run after the scheduler decided at `now`.
    pub fn observe(&mut self, now: Nanos, running: impl Fn(usize) -> bool) {
        self.charge(now);
        for t in 0..self.ctx.len() {
            self.ctx.running[t] = running(t);
        }
    }

    /// The earliest timer: a time timer, or when a running task's armed budget runs out.
    pub fn next_timer(&self) -> Option<Nanos> {
        let budgets = (0..self.ctx.len()).filter_map(|t| match self.ctx.budget[t] {
            Some(b) if self.ctx.running[t] || b == 0 => Some(self.ctx.since + b),
            _ => None,
        });
        let timers = self.ctx.timers.iter().map(|&(at, _)| at);
        budgets.chain(timers).min()
    }

    /// Tasks whose priority or CPU changed since the last call.
    pub fn take_changes(&mut self) -> Vec<usize> {
        let out = (0..self.ctx.len())
            .filter(|&t| self.ctx.changed[t])
            .collect();
        self.ctx.changed.iter_mut().for_each(|c| *c = false);
        out
    }

    /// Hands the changed priorities and vCPUs to the scheduler (`ids[t]` is task `t`'s id
    /// there; a pinned plug-in's tasks are members of a pinned `fifo` box).
    pub fn apply(
        &mut self,
        sched: &mut Scheduler,
        now: Nanos,
        ids: &[TaskId],
    ) -> Result<(), CoreError> {
        for t in self.take_changes() {
            sched.set_priority(now, ids[t], self.ctx.priority[t])?;
            if let (Scope::Pinned, Some(c)) = (self.ctx.scope, self.ctx.cpu[t]) {
                sched.move_member(now, ids[t], c)?;
            }
        }
        Ok(())
    }
}
