//! Global EDF on a supply with at most m - 1 carry-in jobs over an extended window: the test
//! of Shin, Easwaran & Lee (ECRTS 2008, "Hierarchical scheduling framework for virtual
//! clustering of multiprocessors", Theorem 1), itself Baruah's 2007 window argument checked
//! against a supply bound function, here in discrete time (1 ns) with exact integers.
//!
//! **Argument.** Let the job of task k released at r and due at d = r + D_k miss, d the first
//! miss. Let t0 <= r be the earliest instant such that in every slot of [t0, r) every supplied
//! CPU runs a job due at or before d; A = r - t0 and t = A + D_k. In the slot before t0 some
//! supplied CPU did not run such a job, so every pending job due by d was running there: at most
//! m - 1 tasks have a job released before t0 still pending at t0 (the carry-in tasks). In
//! [t0, d] the job runs at most C_k - 1 slots; in the other X >= t - C_k + 1 slots every supplied
//! CPU runs another job due by d. A task contributes at most min(W_i, X) to those slots (one
//! CPU at a time), earlier jobs of task k at most min(W'_k, A) (they finished by r). So
//! sbf(t) <= m (t - X) + sum_i min(W_i, X); the right side is concave in X, so the miss implies
//! the same at X = t - C_k + 1, i.e.
//!
//! ```text
//! DEM(t) = m (C_k - 1) + sum_i NC_i + sum_{m-1 largest} (CI_i - NC_i) >= sbf(t)
//! ```
//!
//! with NC_i = min(dbf_i(t), t - C_k + 1) (no carry-in: jobs released in the window),
//! CI_i = min(BCL workload of i at t, t - C_k + 1) (one carried-in job, Bertogna, Cirinei &
//! Lipari 2005), and for i = k the same minus the job itself, capped at A. The task passes if
//! **DEM(t) + 1 <= sbf(t)** for every A >= 0. The strict inequality is the boundary: with
//! equality allowed, four tasks (2, 3) pass on 3 dedicated CPUs and one of them misses
//! (`equality_is_not_enough_on_three_cpus` below).
//!
//! **Which A.** Beyond t_max, where DEM's linear upper bound
//! m (C_k - 1) + 1 + sum_i U_i (t + T_i - D_i) + sum_{m-1 largest} C_i meets the supply's
//! linear lower bound, every A passes. Below it, each term of DEM and the supply are
//! piecewise linear on the integers; between consecutive corners (dbf steps, BCL workload kinks,
//! where a term meets its cap, the supply's corners) the sum of the m - 1 largest differences is
//! convex and everything else linear, so sbf - DEM is concave there and its minimum is at a
//! corner. The test evaluates exactly those points.

use rtbox_model::Nanos;

use crate::demand::{dbf, utilization_scaled};
use crate::global::{edf_workload, require_all, with_prepared, Check, GlobalVerdict};
use crate::supply::{Supply, Work};
use crate::task::Task;

/// Scale of the conservative fixed-point sums (10^-18 CPU), as in `demand.rs`.
const SCALE: u128 = 1_000_000_000_000_000_000;

/// Check points per task beyond which the test gives up (and fails, which is safe).
const MAX_POINTS: usize = 2_000_000;

/// The window bound t_max of the module doc, or `None` when the utilization is not below the
/// supply's long-run rate (no finite window).
fn window_limit(tasks: &[Task], k: usize, supply: &dyn Supply) -> Option<Nanos> {
    let lin = supply.linear();
    if lin.rate_num == 0 {
        return None;
    }
    let u = utilization_scaled(tasks);
    let rate_lo = lin.rate_num * SCALE / lin.rate_den;
    let rate_hi = (lin.rate_num * SCALE).div_ceil(lin.rate_den);
    if u >= rate_lo {
        return None;
    }
    let m = supply.parallelism();
    let me = &tasks[k];
    let mut carry: Vec<Nanos> = tasks.iter().map(|t| t.wcet).collect();
    carry.sort_unstable_by(|a, b| b.cmp(a));
    let carried: u128 = carry
        .iter()
        .take(m.saturating_sub(1) as usize)
        .map(|&c| u128::from(c))
        .sum();
    let constant = u128::from(m) * u128::from(me.wcet - 1) + 1 + carried;
    let slack: u128 = tasks
        .iter()
        .map(|t| {
            let extra = u128::from(t.period.saturating_sub(t.deadline));
            (u128::from(t.wcet) * extra * SCALE).div_ceil(u128::from(t.period))
        })
        .sum();
    let num = constant * SCALE + slack + rate_hi * u128::from(lin.delay);
    let t = num.div_ceil(rate_lo - u);
    Some(u64::try_from(t).ok()?.max(me.deadline))
}

/// The window lengths t in [D_k, t_max] at which DEM and the supply have corners (module doc).
fn check_points(tasks: &[Task], k: usize, supply: &dyn Supply, t_max: Nanos) -> Option<Vec<Nanos>> {
    let me = &tasks[k];
    let estimate: u128 = tasks
        .iter()
        .map(|t| 10 * (u128::from(t_max / t.period) + 2))
        .sum();
    if estimate > MAX_POINTS as u128 {
        return None;
    }
    let mut pts = vec![me.deadline, t_max];
    for (i, t) in tasks.iter().enumerate() {
        let jobs = t_max / t.period + 2;
        for n in 0..=jobs {
            let base = n.saturating_mul(t.period);
            let step = t.deadline.saturating_add(base); // dbf step
            pts.extend([
                step.saturating_sub(1),
                step,
                base,
                base.saturating_add(t.wcet),
            ]);
            // Where a flat value n C_i meets its cap.
            let flat = n.saturating_mul(t.wcet);
            if i == k {
                pts.push(me.deadline.saturating_add(flat)); // (n+1) C_k - C_k = t - D_k
            } else {
                pts.push(flat.saturating_add(me.wcet - 1)); // n C_i = t - C_k + 1
            }
        }
    }
    let before = pts.len();
    if !supply.corners(me.deadline, t_max, &mut pts) || pts.len() - before > MAX_POINTS {
        return None;
    }
    pts.retain(|&t| t >= me.deadline && t <= t_max);
    pts.sort_unstable();
    pts.dedup();
    Some(pts)
}

/// DEM(t) + 1 of the module doc: the supply needed in a window of length t for the job of
/// task k to be sure to finish. `diffs` is scratch space.
fn demand(tasks: &[Task], k: usize, m: u32, t: Nanos, diffs: &mut Vec<Work>) -> Work {
    let me = &tasks[k];
    let a = u128::from(t - me.deadline);
    let cap = u128::from(t + 1 - me.wcet);
    let own = u128::from(me.wcet);
    let mut sum: Work = u128::from(m) * u128::from(me.wcet - 1) + 1;
    diffs.clear();
    for (i, task) in tasks.iter().enumerate() {
        let (nc, ci) = if i == k {
            let nc = (dbf(task, t) - own).min(a);
            let ci = (edf_workload(task, t) - own).min(a);
            (nc, ci)
        } else {
            (dbf(task, t).min(cap), edf_workload(task, t).min(cap))
        };
        debug_assert!(ci >= nc, "a carried-in job only adds work");
        sum += nc;
        diffs.push(ci - nc);
    }
    let carry = (m.saturating_sub(1) as usize).min(diffs.len());
    if carry > 0 {
        if carry < diffs.len() {
            diffs.select_nth_unstable_by(carry - 1, |x, y| y.cmp(x));
        }
        sum += diffs[..carry].iter().sum::<Work>();
    }
    sum
}

/// The limited carry-in test for task `k` (deadlines constrained, no jitter: see
/// [`crate::global::prepare`]). The check reported is the failing window, or the passing window
/// with the least slack.
pub fn limited_carry_in_task(tasks: &[Task], k: usize, supply: &dyn Supply) -> GlobalVerdict {
    let me = tasks[k];
    let m = supply.parallelism();
    let fail = |check| GlobalVerdict {
        schedulable: false,
        response: None,
        check,
    };
    if me.wcet == 0 || me.wcet > me.deadline || m == 0 {
        return fail(None);
    }
    let Some(t_max) = window_limit(tasks, k, supply) else {
        return fail(None);
    };
    let Some(points) = check_points(tasks, k, supply, t_max) else {
        return fail(None);
    };
    let mut diffs = Vec::with_capacity(tasks.len());
    let mut tightest: Option<Check> = None;
    for t in points {
        let check = Check {
            window: t,
            demand: demand(tasks, k, m, t, &mut diffs),
            supply: supply.sbf(t),
            k: None,
        };
        if !check.holds() {
            return fail(Some(check));
        }
        if tightest.is_none_or(|b| check.supply - check.demand < b.supply - b.demand) {
            tightest = Some(check);
        }
    }
    GlobalVerdict {
        schedulable: true,
        response: None,
        check: tightest,
    }
}

/// The limited carry-in test for every task (jitter folded in); one failure voids all.
pub fn limited_carry_in(tasks: &[Task], supply: &dyn Supply) -> Vec<GlobalVerdict> {
    require_all(with_prepared(tasks, |ts, i| {
        limited_carry_in_task(ts, i, supply)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::global::bcl;
    use crate::supply::{Dedicated, Mpr};

    fn all(v: &[GlobalVerdict]) -> bool {
        v.iter().all(|x| x.schedulable)
    }

    #[test]
    fn equality_is_not_enough_on_three_cpus() {
        // Four (2, 3) tasks on 3 CPUs: at t = 0 three run, the fourth starts at 2 and ends at
        // 4 > 3. At A = 0 the continuous form m C_k + sum min(I_i, t - C_k) = 6 + 3 equals
        // sbf(3) = 9, which a "<=" version accepts; the discrete form needs
        // 3 (C_k - 1) + sum min(I_i, t - C_k + 1) + 1 = 3 + 6 + 1 = 10 <= 9, and fails.
        let ts = vec![Task::new(2, 3); 4];
        let v = limited_carry_in(&ts, &Dedicated { m: 3 });
        assert!(!all(&v));
        let c = limited_carry_in_task(&ts, 0, &Dedicated { m: 3 })
            .check
            .unwrap();
        assert_eq!((c.window, c.demand, c.supply), (3, 10, 9));
        // One task less, one CPU more or a longer period, and it passes.
        assert!(all(&limited_carry_in(&ts[..3], &Dedicated { m: 3 })));
        assert!(all(&limited_carry_in(&ts, &Dedicated { m: 4 })));
        assert!(all(&limited_carry_in(
            &[Task::new(2, 4); 4],
            &Dedicated { m: 3 }
        )));
    }

    #[test]
    fn fewer_carry_ins_accept_what_bcl_refuses() {
        // U = 1.9 on 2 CPUs: BCL lets every task carry a job into the deadline window of the
        // (1, 5) tasks; with one carry-in over the extended window the set passes.
        let ts = vec![
            Task::new(1, 1),
            Task::new(1, 2),
            Task::new(1, 5),
            Task::new(1, 5),
        ];
        assert!(!all(&bcl(&ts, 2)));
        assert!(all(&limited_carry_in(&ts, &Dedicated { m: 2 })));
    }

    #[test]
    fn more_budget_never_hurts_on_mpr() {
        let ts = vec![
            Task::new(3, 20),
            Task::new(5, 25),
            Task::new(7, 40),
            Task::new(2, 10),
        ];
        let mut passed = false;
        for theta in 1..=30 {
            let ok = all(&limited_carry_in(
                &ts,
                &Mpr {
                    period: 10,
                    budget: theta,
                    m: 3,
                },
            ));
            assert!(!passed || ok, "theta {theta}");
            passed |= ok;
        }
        assert!(passed);
    }
}
