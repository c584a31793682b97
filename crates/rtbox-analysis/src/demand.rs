//! Demand: the demand bound function and the check points of EDF tests.

use rtbox_model::Nanos;

use crate::supply::{Supply, Work};
use crate::task::Task;

/// Scale for conservative fixed-point utilization sums (10^-18 CPU).
const SCALE: u128 = 1_000_000_000_000_000_000;

/// Demand bound function of one task: the work of jobs with arrival and deadline inside any
/// window of length `t`, with release jitter J: (floor((t + J - D) / T) + 1) C when t + J >= D.
#[inline]
pub fn dbf(task: &Task, t: Nanos) -> Work {
    let reach = u128::from(t) + u128::from(task.jitter);
    let d = u128::from(task.deadline);
    if reach < d {
        return 0;
    }
    ((reach - d) / u128::from(task.period) + 1) * u128::from(task.wcet)
}

/// Total demand bound of a task set.
pub fn dbf_total(tasks: &[Task], t: Nanos) -> Work {
    tasks.iter().map(|x| dbf(x, t)).sum()
}

/// Request bound function: the work released in any window of length `t` (the window closed
/// on the left): ceil((t + J) / T) C.
#[inline]
pub fn rbf(task: &Task, t: Nanos) -> Work {
    (u128::from(t) + u128::from(task.jitter)).div_ceil(u128::from(task.period))
        * u128::from(task.wcet)
}

/// The largest EDF check point (absolute deadline k T + D - J of some task) strictly below `x`.
pub fn last_deadline_before(tasks: &[Task], x: Nanos) -> Option<Nanos> {
    tasks
        .iter()
        .filter_map(|t| {
            let first = t.deadline.checked_sub(t.jitter)?;
            if x == 0 || first > x - 1 {
                return None;
            }
            let k = (x - 1 - first) / t.period;
            Some(first + k * t.period)
        })
        .max()
}

/// Utilization sum rounded up, in 10^-18 CPU units.
pub fn utilization_scaled(tasks: &[Task]) -> u128 {
    tasks
        .iter()
        .map(|t| (u128::from(t.wcet) * SCALE).div_ceil(u128::from(t.period)))
        .sum()
}

/// Why no finite EDF check horizon exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Horizon {
    /// Check deadlines up to this length.
    Upto(Nanos),
    /// Utilization is not below the supply's long-run rate.
    Overloaded,
}

/// The length after which the supply's linear bound covers every task set demand:
/// dbf(t) <= U t + sum_i U_i (T_i - D_i + J_i) <= rate (t - delay) once
/// t >= (sum_i U_i (T_i - D_i + J_i) + rate delay) / (rate - U). Rounded so the horizon only grows.
pub fn edf_horizon(tasks: &[Task], supply: &dyn Supply) -> Horizon {
    let lin = supply.linear();
    let u = utilization_scaled(tasks);
    let rate_lo = lin.rate_num * SCALE / lin.rate_den;
    let rate_hi = (lin.rate_num * SCALE).div_ceil(lin.rate_den);
    if lin.rate_num == 0 || u >= rate_lo {
        if u == 0 {
            return Horizon::Upto(0);
        }
        return full_rate_horizon(tasks, lin);
    }
    let slack_terms: u128 = tasks
        .iter()
        .map(|t| {
            let extra = u128::from(t.period.saturating_sub(t.deadline)) + u128::from(t.jitter);
            (u128::from(t.wcet) * extra * SCALE).div_ceil(u128::from(t.period))
        })
        .sum();
    let num = slack_terms + rate_hi * u128::from(lin.delay);
    let den = rate_lo - u;
    let l = num.div_ceil(den);
    let max_d = tasks.iter().map(|t| t.deadline).max().unwrap_or(0);
    Horizon::Upto(u64::try_from(l).unwrap_or(u64::MAX).max(max_d))
}

/// Utilization equal to the rate of an exactly linear supply (delay 0: whole CPUs, full
/// servers): dbf(t) <= dbf(t - H) + U H and sbf(t) = sbf(t - H) + rate H, so checking up to
/// the hyperperiod H (plus the largest deadline) decides. Overloaded if U > rate or H is huge.
fn full_rate_horizon(tasks: &[Task], lin: crate::supply::Linear) -> Horizon {
    if lin.delay != 0 || lin.rate_num == 0 {
        return Horizon::Overloaded;
    }
    const LIMIT: u128 = 1 << 48;
    let mut h: u128 = 1;
    for t in tasks {
        let p = u128::from(t.period);
        h = h / gcd(h, p) * p;
        if h > LIMIT {
            return Horizon::Overloaded;
        }
    }
    let work: u128 = tasks
        .iter()
        .map(|t| u128::from(t.wcet) * (h / u128::from(t.period)))
        .sum();
    if work * lin.rate_den > lin.rate_num * h {
        return Horizon::Overloaded;
    }
    let max_d = tasks.iter().map(|t| t.deadline).max().unwrap_or(0);
    Horizon::Upto(h as Nanos + max_d)
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dbf_counts_whole_jobs() {
        let t = Task::with_deadline(2, 5, 10);
        assert_eq!(dbf(&t, 4), 0);
        assert_eq!(dbf(&t, 5), 2);
        assert_eq!(dbf(&t, 14), 2);
        assert_eq!(dbf(&t, 15), 4);
        assert_eq!(dbf(&t.jitter(1), 4), 2);
    }

    #[test]
    fn check_points_step_down() {
        let ts = [Task::with_deadline(1, 3, 5), Task::with_deadline(1, 4, 7)];
        assert_eq!(last_deadline_before(&ts, 12), Some(11));
        assert_eq!(last_deadline_before(&ts, 11), Some(8));
        assert_eq!(last_deadline_before(&ts, 3), None);
        assert_eq!(last_deadline_before(&ts, 4), Some(3));
    }

    #[test]
    fn rbf_includes_the_job_at_zero() {
        let t = Task::new(2, 5);
        assert_eq!(rbf(&t, 0), 0);
        assert_eq!(rbf(&t, 1), 2);
        assert_eq!(rbf(&t, 5), 2);
        assert_eq!(rbf(&t, 6), 4);
    }
}
