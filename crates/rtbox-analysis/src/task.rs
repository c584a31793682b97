//! The analysis view of a task: four integers and a priority level.

use rtbox_model::{deadline_monotonic_order, priority_levels, Nanos, TaskSpec};

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

/// Gives every task a distinct deadline-monotonic priority level with the model's one rule
/// (`rtbox_model::priority`: shorter deadline higher, then shorter period, then position).
pub fn assign_deadline_monotonic(tasks: &mut [Task]) {
    let keys: Vec<(Nanos, Nanos)> = tasks.iter().map(|t| (t.deadline, t.period)).collect();
    let n = tasks.len() as u32;
    for (rank, i) in deadline_monotonic_order(&keys).into_iter().enumerate() {
        tasks[i].prio = n - rank as u32;
    }
}

/// The analysis tasks of a box, ranked by the model's priority rule
/// ([`rtbox_model::priority_levels`]): explicit priorities kept and above every task without
/// one, deadline-monotonic below them. Equal explicit priorities keep equal levels, which
/// [`Task::is_hp`] counts as interfering both ways (Linux runs them in arrival order).
pub fn from_specs<'a>(specs: impl IntoIterator<Item = &'a TaskSpec>) -> Vec<Task> {
    let specs: Vec<&TaskSpec> = specs.into_iter().collect();
    let levels = priority_levels(specs.iter().copied());
    specs
        .iter()
        .zip(levels)
        .map(|(s, prio)| Task {
            wcet: s.wcet,
            deadline: s.deadline,
            period: s.period,
            jitter: s.jitter,
            prio,
        })
        .collect()
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
    fn equal_deadlines_tie_on_period_then_position() {
        let mut ts = vec![
            Task::with_deadline(1, 10, 20),
            Task::with_deadline(1, 10, 10),
            Task::with_deadline(1, 10, 20),
        ];
        assign_deadline_monotonic(&mut ts);
        assert_eq!([ts[0].prio, ts[1].prio, ts[2].prio], [2, 3, 1]);
    }

    #[test]
    fn equal_explicit_priorities_interfere_both_ways() {
        let mut a = TaskSpec::periodic("a", 1, 10);
        a.priority = Some(5);
        let mut b = a.clone();
        b.name = "b".into();
        let ts = from_specs([&a, &b]);
        assert!(ts[0].is_hp(&ts[1]) && ts[1].is_hp(&ts[0]));
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
