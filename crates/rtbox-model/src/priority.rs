//! Fixed priorities: the one rule by which the analysis, the simulator, the task-set generator
//! and the rt-app export rank tasks. Written once so that a tie cannot be broken one way in the
//! analysis and the other way in the simulation.
//!
//! **Rule.** A task's explicit `priority` is kept, and every task with one ranks above every task
//! without one. Tasks without one get distinct deadline-monotonic levels (Leung and Whitehead
//! 1982: shorter relative deadline, more urgent), ties broken by the shorter period, then by
//! declaration order (earlier first), so the order is total and does not depend on names.
//! Tasks with the *same* explicit priority keep the same level: Linux runs equal SCHED_FIFO
//! priorities in FIFO order of arrival, so the analysis counts each as interference for the
//! other and the simulator dispatches them in arrival order.

use std::cmp::Ordering;
use std::fmt;

use crate::system::TaskSpec;
use crate::time::Nanos;

/// The deadline-monotonic order of two tasks without an explicit priority: `Less` means `a` is
/// more urgent. `ia`, `ib` are their declaration positions (the last tie-break).
pub fn deadline_monotonic_cmp(
    (deadline_a, period_a, ia): (Nanos, Nanos, usize),
    (deadline_b, period_b, ib): (Nanos, Nanos, usize),
) -> Ordering {
    (deadline_a, period_a, ia).cmp(&(deadline_b, period_b, ib))
}

/// Positions of `keys` (relative deadline, period), most urgent first, by
/// [`deadline_monotonic_cmp`].
pub fn deadline_monotonic_order(keys: &[(Nanos, Nanos)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&a, &b| {
        deadline_monotonic_cmp((keys[a].0, keys[a].1, a), (keys[b].0, keys[b].1, b))
    });
    order
}

/// The fixed-priority level of every task, in input order; a higher level is more urgent, equal
/// levels only for equal explicit priorities.
///
/// With `n` tasks lacking a priority, those get levels `n` (most urgent) down to `1` by
/// [`deadline_monotonic_order`]; a task with explicit priority `p` gets `n + 1 + p`. Only the
/// order matters (the numbers depend on which tasks are ranked together), and the order of two
/// tasks is the same whichever set they are ranked in, e.g. one box or the whole system.
pub fn priority_levels<'a>(tasks: impl IntoIterator<Item = &'a TaskSpec>) -> Vec<u32> {
    let tasks: Vec<&TaskSpec> = tasks.into_iter().collect();
    let unset: Vec<usize> = (0..tasks.len())
        .filter(|&i| tasks[i].priority.is_none())
        .collect();
    let keys: Vec<(Nanos, Nanos)> = unset
        .iter()
        .map(|&i| (tasks[i].deadline, tasks[i].period))
        .collect();
    let n = unset.len() as u32;
    let mut levels: Vec<u32> = tasks
        .iter()
        .map(|t| {
            t.priority
                .map_or(0, |p| n.saturating_add(1).saturating_add(p))
        })
        .collect();
    for (rank, k) in deadline_monotonic_order(&keys).into_iter().enumerate() {
        levels[unset[k]] = n - rank as u32;
    }
    debug_assert!(levels.iter().all(|&l| l > 0), "every task has a level");
    levels
}

/// Why tasks cannot be given SCHED_FIFO priorities with the order of [`priority_levels`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FifoPriorityError {
    /// An explicit priority outside SCHED_FIFO's 1..=99.
    OutOfRange { task: usize, priority: u32 },
    /// The tasks without a priority need `needed` distinct levels below the lowest explicit
    /// one, and only `available` (1 up to that lowest minus one, or 99) exist.
    TooFewLevels { needed: usize, available: u32 },
}

impl fmt::Display for FifoPriorityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FifoPriorityError::OutOfRange { priority, .. } => {
                write!(f, "= {priority} is not a SCHED_FIFO priority (1..99)")
            }
            FifoPriorityError::TooFewLevels { needed, available } => write!(
                f,
                "{needed} tasks without a priority need distinct SCHED_FIFO priorities below \
                 the explicit ones, but only {available} are free"
            ),
        }
    }
}

impl std::error::Error for FifoPriorityError {}

/// Linux SCHED_FIFO priorities (1..=99) in the order of [`priority_levels`]: explicit ones are
/// kept as written; the tasks without one get distinct priorities counting down, by
/// [`deadline_monotonic_order`], from just below the lowest explicit one (from 99 when no task
/// has one). Refused when an explicit priority is out of range or the levels do not fit, rather
/// than giving two tasks the same priority that the analysis ranked apart.
pub fn fifo_priorities(tasks: &[TaskSpec]) -> Result<Vec<u32>, FifoPriorityError> {
    let mut top = 99u32;
    for (i, t) in tasks.iter().enumerate() {
        if let Some(p) = t.priority {
            if !(1..=99).contains(&p) {
                return Err(FifoPriorityError::OutOfRange {
                    task: i,
                    priority: p,
                });
            }
            top = top.min(p - 1);
        }
    }
    let needed = tasks.iter().filter(|t| t.priority.is_none()).count();
    if needed > top as usize {
        return Err(FifoPriorityError::TooFewLevels {
            needed,
            available: top,
        });
    }
    // Levels 1..=needed are the deadline-monotonic ones: level l becomes top - (needed - l).
    let levels = priority_levels(tasks);
    Ok(tasks
        .iter()
        .zip(levels)
        .map(|(t, l)| t.priority.unwrap_or_else(|| top - (needed as u32 - l)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, deadline: Nanos, period: Nanos, priority: Option<u32>) -> TaskSpec {
        let mut t = TaskSpec::periodic(name, 1, period);
        t.deadline = deadline;
        t.priority = priority;
        t
    }

    #[test]
    fn deadline_monotonic_with_period_then_position_ties() {
        let ts = [
            t("a", 10, 20, None),
            t("b", 5, 20, None),
            t("c", 10, 10, None),
            t("d", 10, 20, None),
        ];
        // b (D 5) > c (D 10, T 10) > a (D 10, T 20, first) > d.
        assert_eq!(priority_levels(&ts), vec![2, 4, 3, 1]);
    }

    #[test]
    fn explicit_priorities_rank_above_and_equal_ones_stay_equal() {
        let ts = [
            t("a", 5, 5, None),
            t("b", 50, 50, Some(1)),
            t("c", 50, 50, Some(1)),
            t("d", 50, 50, Some(7)),
            t("e", 9, 9, None),
        ];
        let l = priority_levels(&ts);
        assert_eq!(l, vec![2, 4, 4, 10, 1]);
        // The order of two tasks does not depend on the set they are ranked in.
        let sub = priority_levels([&ts[0], &ts[4]]);
        assert!(sub[0] > sub[1]);
    }

    #[test]
    fn fifo_priorities_keep_explicit_ones_and_fit_the_rest_below() {
        let ts = [t("a", 5, 5, None), t("b", 9, 9, None)];
        assert_eq!(fifo_priorities(&ts), Ok(vec![99, 98]));
        let ts = [
            t("a", 5, 5, None),
            t("x", 50, 50, Some(40)),
            t("b", 9, 9, None),
            t("y", 50, 50, Some(40)),
        ];
        assert_eq!(fifo_priorities(&ts), Ok(vec![39, 40, 38, 40]));
        let ts = [
            t("a", 5, 5, None),
            t("b", 9, 9, None),
            t("x", 1, 1, Some(2)),
        ];
        assert_eq!(
            fifo_priorities(&ts),
            Err(FifoPriorityError::TooFewLevels {
                needed: 2,
                available: 1
            })
        );
        assert_eq!(
            fifo_priorities(&[t("x", 1, 1, Some(100))]),
            Err(FifoPriorityError::OutOfRange {
                task: 0,
                priority: 100
            })
        );
    }
}
