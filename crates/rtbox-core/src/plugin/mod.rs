//! Scheduler plug-ins (seed 001, ExSched): policies written above a few primitives, deciding
//! each periodic task's fixed priority and CPU.
//!
//! A plug-in sees a *group*: the periodic members of one box and the box's vCPUs. It is called
//! at the seed's three hooks ([`Plugin::task_admitted`] = ExSched's `task_run_plugin`,
//! [`Plugin::job_released`], [`Plugin::job_completed`]) and at timers it armed
//! ([`Plugin::budget_used`] after a task executed an armed amount on its CPU, [`Plugin::timer`]
//! at a time). Through [`GroupCtx`] it reads the group (tasks, readiness, where each runs) and
//! acts with the seed's primitives: [`GroupCtx::migrate`] (`migrate_task`),
//! [`GroupCtx::set_priority`], [`GroupCtx::arm_budget`], [`GroupCtx::start_timer`].
//!
//! Pure like the rest of the core: admission tests come in through [`FpTest`] (the analysis
//! implements it, `rtbox_analysis::plugin`), and a driver (the simulator, the daemon) applies
//! the resulting priorities and vCPUs to the [`crate::Scheduler`] with
//! [`crate::Scheduler::set_priority`] and [`crate::Scheduler::move_member`]
//! ([`PluginGroup::apply`]).
//!
//! Driver protocol, at each instant `now`:
//! 1. [`PluginGroup::charge`]`(now)`: execution since the last [`PluginGroup::observe`] counts
//!    against armed budgets;
//! 2. for each job that became ready / finished: `Scheduler::wake` + [`PluginGroup::job_released`],
//!    `Scheduler::block` + [`PluginGroup::job_completed`];
//! 3. [`PluginGroup::fire`]`(now)` runs due timers; [`PluginGroup::apply`] hands the changes to
//!    the scheduler; `Scheduler::advance(now)`; [`PluginGroup::observe`] records who runs;
//! 4. come back no later than [`PluginGroup::next_timer`].

pub mod builtin;
mod group;

use std::fmt;

use rtbox_model::Nanos;

pub use group::{GroupCtx, GroupError, PluginGroup};

/// A periodic member as the plug-in sees it (seed 001 section III: C <= D <= T).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeriodicTask {
    pub name: String,
    pub wcet: Nanos,
    pub period: Nanos,
    pub deadline: Nanos,
    /// Its fixed priority (higher is more urgent): a deadline-monotonic level
    /// (`rtbox_model::priority_levels`) or an explicit one. In a group ([`GroupCtx::task`]) it
    /// is the task's rank in the group, 1..=n, the form [`levels`] needs.
    pub priority: u32,
}

impl PeriodicTask {
    /// Whether `U = C/T >= num/den`, exactly in integers.
    pub fn utilization_at_least(&self, num: u64, den: u64) -> bool {
        u128::from(self.wcet) * u128::from(den) >= u128::from(num) * u128::from(self.period)
    }
}

/// A piece of demand on one CPU for a fixed-priority test: a task, or the part of a split task
/// that runs on that CPU (released up to `jitter` after the job's arrival).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    pub wcet: Nanos,
    pub period: Nanos,
    /// Relative to the job's arrival.
    pub deadline: Nanos,
    pub jitter: Nanos,
    pub priority: u32,
}

impl Load {
    pub fn of(t: &PeriodicTask, priority: u32) -> Self {
        Load {
            wcet: t.wcet,
            period: t.period,
            deadline: t.deadline,
            jitter: 0,
            priority,
        }
    }
}

/// The schedulability tests a plug-in admits with, supplied by the driver from the analysis
/// (the core stays free of it). `cpu` is a CPU of the group.
pub trait FpTest {
    /// The worst-case response time from arrival of `loads[i]` under fixed priorities on
    /// `cpu` (every load with a priority `>=` interferes), or `None` when it exceeds the
    /// load's deadline.
    fn response(&self, cpu: u32, loads: &[Load], i: usize) -> Option<Nanos>;
    /// Per load: whether a global fixed-priority test over the group's CPUs proves it.
    fn global(&self, loads: &[Load]) -> Vec<bool>;
}

/// Whether every load on one CPU meets its deadline by [`FpTest::response`].
pub fn cpu_schedulable(test: &dyn FpTest, cpu: u32, loads: &[Load]) -> bool {
    (0..loads.len()).all(|i| test.response(cpu, loads, i).is_some())
}

/// What a plug-in's admission decided for a task (reported in status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The plug-in's test proves the task meets its deadlines where it was placed.
    Guaranteed,
    /// Runs at the plug-in's priority, but the (sufficient) test could not prove it.
    Unproven,
    /// Failed the plug-in's test and runs below every admitted task (seed 001 section V:
    /// FP-FF runs it "in the background", FP-PM gives it "the lowest priority").
    Background,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Guaranteed => "guaranteed",
            Verdict::Unproven => "unproven",
            Verdict::Background => "background",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a plug-in lets its tasks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Each task sits on one vCPU the plug-in chose and moves only when the plug-in migrates it.
    Pinned,
    /// The scheduler's own global placement decides (the `fp` baseline: Linux's SCHED_FIFO
    /// push/pull); [`GroupCtx::migrate`] is refused.
    Global,
}

/// A scheduler plug-in. Tasks are the group's indices `0..n`. Hooks other than
/// `task_admitted` have empty defaults.
pub trait Plugin {
    fn name(&self) -> &str;
    fn scope(&self) -> Scope {
        Scope::Pinned
    }
    /// ExSched's `task_run_plugin`: place task `t` (priority, CPU) and decide its verdict.
    /// Called once per task, in decreasing DM priority.
    fn task_admitted(&mut self, ctx: &mut GroupCtx, t: usize, test: &dyn FpTest) -> Verdict;
    /// A job of `t` became ready (released, or the next job of a late task).
    fn job_released(&mut self, _ctx: &mut GroupCtx, _t: usize) {}
    /// A job of `t` completed; `t` is no longer ready unless another job is pending.
    fn job_completed(&mut self, _ctx: &mut GroupCtx, _t: usize) {}
    /// `t` executed the amount armed with [`GroupCtx::arm_budget`] on its current CPU.
    fn budget_used(&mut self, _ctx: &mut GroupCtx, _t: usize) {}
    /// A timer started with [`GroupCtx::start_timer`] is due.
    fn timer(&mut self, _ctx: &mut GroupCtx, _key: u64) {}
}

/// The priority levels a plug-in uses, above and below the tasks' own levels, so that every
/// plug-in priority is still a plain SCHED_FIFO-like number (higher runs first). `dm` is the
/// task's rank in its group, 1..=n (`PluginGroup::new` ranks the tasks): the three bands
/// (background 1..=n, admitted n+2..=2n+1, highest 2n+3..=3n+2) then never overlap.
pub mod levels {
    /// Tasks demoted to the background: below every admitted task.
    pub fn background(dm: u32) -> u32 {
        dm
    }
    /// Admitted tasks at their DM level.
    pub fn normal(dm: u32, n: usize) -> u32 {
        dm + n as u32 + 1
    }
    /// The plug-in's "highest priority" tasks (FP-PM migratory, FP-US heavy), still in DM order
    /// among themselves.
    pub fn top(dm: u32, n: usize) -> u32 {
        dm + 2 * (n as u32 + 1)
    }
}

#[cfg(test)]
mod tests;
