//! The analysis view of a task: four integers and a priority level.

use rtbox_model::{Nanos, TaskSpec};

/// A sporadic task as the tests see it.
///
/// `deadline` is relative to the job's *arrival*; `jitter` is the largest delay between arrival
/// and release. Fixed-priority tests read `prio` (higher is more urgent, as Linux RT priorities):
/// every other task with `prio >=` this task's counts as interfering, so equal priorities are
/// analysed conservatively (each delays the other).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    pub wcet: Nanos,
    pub deadline: Nanos,
    pub period: Nanos,
    pub jitter: Nanos,
    pub prio: u32,
}

impl Task {
    /// An implicit-deadline task without jitter, priority 0.
    pub const fn new(wcet: Nanos, period: Nanos) -> Self {
        Task {
            wcet,
            deadline: period,
            period,
            jitter: 0,
            prio: 0,
        }
    }

    /// A constrained-deadline task without jitter, priority 0.
    pub const fn with_deadline(wcet: Nanos, deadline: Nanos, period: Nanos) -> Self {
        Task {
            wcet,
            deadline,
            period,
            jitter: 0,
            prio: 0,
        }
    }

    pub const fn prio(mut self, prio: u32) -> Self {
        self.prio = prio;
        self
    }

    pub const fn jitter(mut self, jitter: Nanos) -> Self {
        self.jitter = jitter;
        self
    }

    /// Whether `other` interferes with `self` under fixed priorities.
    #[inline]
    pub fn is_hp(&self, other: &Task) -> bool {
        other.prio >= self.prio
    }

    /// The jitter-free sporadic task that over-approximates this one for the global tests:
    /// releases at least `T - J` apart with deadline `D - J` after release. `None` when the
    /// jitter eats the deadline or the period.
    pub fn without_jitter(&self) -> Option<Task> {
        if self.jitter == 0 {
            return Some(*self);
        }
        if self.jitter >= self.deadline || self.jitter >= self.period {
            return None;
        }
        Some(Task {
            wcet: self.wcet,
            deadline: self.deadline - self.jitter,
            period: self.period - self.jitter,
            jitter: 0,
            prio: self.prio,
        })
    }
}

/// Sorts tasks highest priority first (stable).
pub fn sort_by_priority(tasks: &mut [Task]) {
    tasks.sort_by_key(|t| std::cmp::Reverse(t.prio));
}

/// Gives every task a distinct deadline-monotonic priority level (shorter deadline = higher),
/// ties broken by position. Returns the levels; `tasks[i].prio` is set too.
pub fn assign_deadline_monotonic(tasks: &mut [Task]) {
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    order.sort_by_key(|&i| (tasks[i].deadline, i));
    let n = tasks.len() as u32;
    for (rank, &i) in order.iter().enumerate() {
        tasks[i].prio = n - rank as u32;
    }
}

/// The analysis tasks of a box, with the box's priority rule:
/// explicit priorities are kept and rank above every task without one; tasks without a priority
/// are ordered deadline-monotonically below them.
pub fn from_specs<'a>(specs: impl IntoIterator<Item = &'a TaskSpec>) -> Vec<Task> {
    let specs: Vec<&TaskSpec> = specs.into_iter().collect();
    let mut tasks: Vec<Task> = specs
        .iter()
        .map(|s| Task {
            wcet: s.wcet,
            deadline: s.deadline,
            period: s.period,
            jitter: s.jitter,
            prio: 0,
        })
        .collect();
    let mut unset: Vec<usize> = (0..specs.len())
        .filter(|&i| specs[i].priority.is_none())
        .collect();
    unset.sort_by_key(|&i| (tasks[i].deadline, i));
    let n_unset = unset.len() as u32;
    for (rank, &i) in unset.iter().enumerate() {
        tasks[i].prio = n_unset - rank as u32;
    }
    for (i, s) in specs.iter().enumerate() {
        if let Some(p) = s.priority {
            // Explicit priorities sit above every deadline-monotonic level.
            tasks[i].prio = n_unset.saturating_add(1).saturating_add(p);
        }
    }
    tasks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_monotonic_orders_by_deadline() {
        let mut ts = vec![Task::new(1, 10), Task::new(1, 5), Task::new(1, 10)];
        assign_deadline_monotonic(&mut ts);
        assert!(ts[1].prio > ts[0].prio && ts[0].prio > ts[2].prio);
    }

    #[test]
    fn explicit_priorities_rank_above_unset() {
        let mut a = TaskSpec::periodic("a", 1, 10);
        a.priority = Some(1);
        let b = TaskSpec::periodic("b", 1, 5);
        let ts = from_specs([&a, &b]);
        assert!(ts[0].prio > ts[1].prio);
    }

    #[test]
    fn jitter_transform_is_conservative() {
        let t = Task::new(2, 10).jitter(3);
        let u = t.without_jitter().unwrap();
        assert_eq!((u.deadline, u.period), (7, 7));
        assert_eq!(Task::new(2, 10).jitter(10).without_jitter(), None);
    }
}
