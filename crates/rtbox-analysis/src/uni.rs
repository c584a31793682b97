//! One CPU inside a reservation: EDF (demand against supply) and fixed priority (response-time
//! analysis against supply).

use rtbox_model::Nanos;

use crate::demand::{dbf_total, edf_horizon, last_deadline_before, rbf, Horizon};
use crate::supply::{Supply, Work};
use crate::task::Task;

/// Outcome of the EDF test on one supply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EdfVerdict {
    /// Every check point up to `horizon` has demand <= supply.
    Schedulable { horizon: Nanos, checked: u64 },
    /// At window length `t` the demand exceeds the supply.
    DemandExceedsSupply {
        t: Nanos,
        demand: Work,
        supply: Work,
    },
    /// Utilization is not below the supply rate (no finite check horizon).
    Overloaded,
    /// A task's jitter is not below its deadline.
    JitterTooLarge { task: usize },
}

impl EdfVerdict {
    pub fn schedulable(&self) -> bool {
        matches!(self, EdfVerdict::Schedulable { .. })
    }
}

/// EDF on one CPU with a supply bound function: schedulable iff dbf(t) <= sbf(t) at every
/// absolute deadline t up to the horizon of [`edf_horizon`] (Shin & Lee 2003, Theorem for EDF;
/// dedicated CPU: Baruah et al. 1990).
///
/// Check points are visited QPA style (Zhang & Burns 2009), generalised to a supply: from the
/// largest deadline t downward, with h = dbf(t) <= sbf(t), every point in [sbf^-1(h), t] passes
/// (dbf there is <= h and sbf >= h), so the next point tested is the last deadline before
/// sbf^-1(h).
pub fn edf(tasks: &[Task], supply: &dyn Supply) -> EdfVerdict {
    if let Some(i) = tasks.iter().position(|t| t.jitter >= t.deadline) {
        return EdfVerdict::JitterTooLarge { task: i };
    }
    let horizon = match edf_horizon(tasks, supply) {
        Horizon::Upto(h) => h,
        Horizon::Overloaded => return EdfVerdict::Overloaded,
    };
    let mut checked = 0u64;
    let mut next = last_deadline_before(tasks, horizon.saturating_add(1));
    while let Some(t) = next {
        checked += 1;
        let demand = dbf_total(tasks, t);
        let supplied = supply.sbf(t);
        if demand > supplied {
            return EdfVerdict::DemandExceedsSupply {
                t,
                demand,
                supply: supplied,
            };
        }
        let reach = supply.time_to_supply(demand).unwrap_or(t).min(t);
        next = last_deadline_before(tasks, reach);
    }
    EdfVerdict::Schedulable { horizon, checked }
}

/// Response-time bounds of one task under fixed priorities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// Worst-case response time from the job's arrival (includes its release jitter); compared
    /// with the deadline.
    pub from_arrival: Nanos,
    /// Worst-case response time from the job's release.
    pub from_release: Nanos,
}

/// Why a fixed-priority response-time analysis failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FpFailure {
    /// The bound found exceeds the deadline (`bound` is a response time at least this large).
    DeadlineMiss { bound: Nanos },
    /// The supply never covers the demand (overload).
    Unbounded,
}

/// Demand of task `i`'s first `jobs` jobs plus higher-or-equal-priority interference in a window
/// of length `w`: jobs C_i + sum_{j in hp(i)} ceil((w + J_j) / T_j) C_j.
fn level_i_demand(tasks: &[Task], i: usize, jobs: u64, w: Nanos) -> Work {
    let me = &tasks[i];
    let mut d = u128::from(jobs) * u128::from(me.wcet);
    for (j, other) in tasks.iter().enumerate() {
        if j != i && me.is_hp(other) {
            d += rbf(other, w);
        }
    }
    d
}

/// Most jobs examined in one level-i busy window before giving up.
const MAX_JOBS: u64 = 1_000_000;

/// Fixed-priority response-time analysis of task `i` on a supply (Lehoczky 1990 arbitrary
/// deadlines, Tindell release jitter, supply bound per Shin & Lee 2003 / Almeida & Pedreiras):
/// for the q-th job of a level-i busy window (q = 0, 1, ...), w_q is the least t with
/// sbf(t) >= (q+1) C_i + sum_hp ceil((t + J_j)/T_j) C_j; the job arrives no earlier than
/// qT_i - J_i and is released no earlier than max(0, qT_i - J_i), so
/// R_arrival = max_q (w_q - q T_i + J_i) and R_release = max_q (w_q - max(0, q T_i - J_i)).
/// The window closes at the first q with w_q <= (q+1) T_i - J_i.
pub fn fp_response(tasks: &[Task], i: usize, supply: &dyn Supply) -> Result<Response, FpFailure> {
    let me = tasks[i];
    let mut best = Response {
        from_arrival: 0,
        from_release: 0,
    };
    let mut w: Nanos = 0;
    for q in 0..MAX_JOBS {
        // Least fixed point of w = sbf^-1(demand(w)), iterated from below (w_{q-1} <= w_q).
        let arrival_q = i128::from(q) * i128::from(me.period) - i128::from(me.jitter);
        loop {
            let need = level_i_demand(tasks, i, q + 1, w);
            let next = supply.time_to_supply(need).ok_or(FpFailure::Unbounded)?;
            debug_assert!(next >= w, "response iteration went backwards");
            if next == w {
                break;
            }
            w = next;
            if i128::from(w) - arrival_q > i128::from(me.deadline) {
                let bound = (i128::from(w) - arrival_q) as Nanos;
                return Err(FpFailure::DeadlineMiss { bound });
            }
        }
        let r_arr = (i128::from(w) - arrival_q).max(0) as Nanos;
        let r_rel = (i128::from(w) - arrival_q.max(0)).max(0) as Nanos;
        best.from_arrival = best.from_arrival.max(r_arr);
        best.from_release = best.from_release.max(r_rel);
        if best.from_arrival > me.deadline {
            return Err(FpFailure::DeadlineMiss {
                bound: best.from_arrival,
            });
        }
        let next_release = i128::from(q + 1) * i128::from(me.period) - i128::from(me.jitter);
        if i128::from(w) <= next_release {
            return Ok(best);
        }
    }
    Err(FpFailure::Unbounded)
}

/// Fixed-priority analysis of every task; `Ok` bounds or the first failure per task.
pub fn fp(tasks: &[Task], supply: &dyn Supply) -> Vec<Result<Response, FpFailure>> {
    (0..tasks.len())
        .map(|i| fp_response(tasks, i, supply))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supply::{Dedicated, Prm};
    use crate::task::assign_deadline_monotonic;

    fn ordered(mut ts: Vec<Task>) -> Vec<Task> {
        let n = ts.len() as u32;
        for (i, t) in ts.iter_mut().enumerate() {
            t.prio = n - i as u32;
        }
        ts
    }

    #[test]
    fn rm_response_times_facts_vector() {
        // analysis-facts.md: (1,4),(1,5),(3,9),(3,18) in RM order -> R = 1,2,7,18.
        let ts = ordered(vec![
            Task::new(1, 4),
            Task::new(1, 5),
            Task::new(3, 9),
            Task::new(3, 18),
        ]);
        let r: Vec<Nanos> = fp(&ts, &Dedicated { m: 1 })
            .into_iter()
            .map(|r| r.unwrap().from_arrival)
            .collect();
        assert_eq!(r, vec![1, 2, 7, 18]);
    }

    #[test]
    fn lehoczky_arbitrary_deadlines_facts_vector() {
        // (52,100),(52,140) with D > T allowed -> R = 52, 156.
        let mut ts = ordered(vec![Task::new(52, 100), Task::new(52, 140)]);
        ts[1].deadline = 1000;
        let r: Vec<Nanos> = fp(&ts, &Dedicated { m: 1 })
            .into_iter()
            .map(|r| r.unwrap().from_arrival)
            .collect();
        assert_eq!(r, vec![52, 156]);
    }

    #[test]
    fn jitter_inside_prm_facts_vector() {
        // WCET 2, every 5, jitter 2, inside PRM(5,3): worst-case response 7 (from release).
        let mut t = Task::new(2, 5).jitter(2);
        t.deadline = 100;
        let r = fp_response(&[t], 0, &Prm::new(5, 3)).unwrap();
        assert_eq!(r.from_release, 7);
        assert_eq!(r.from_arrival, 8);
    }

    #[test]
    fn edf_constrained_facts_vector() {
        let mut ts = vec![
            Task::with_deadline(6000, 18000, 31000),
            Task::with_deadline(2000, 9000, 9800),
            Task::with_deadline(1000, 12000, 17000),
            Task::with_deadline(90, 3000, 4200),
            Task::with_deadline(8, 78, 96),
            Task::with_deadline(2, 16, 12),
            Task::with_deadline(10, 120, 280),
            Task::with_deadline(26, 160, 660),
        ];
        assert!(edf(&ts, &Dedicated { m: 1 }).schedulable());
        ts.push(Task::with_deadline(10, 15, 100));
        assert!(matches!(
            edf(&ts, &Dedicated { m: 1 }),
            EdfVerdict::DemandExceedsSupply { .. }
        ));
    }

    #[test]
    fn edf_reports_overload() {
        let ts = [Task::new(3, 5), Task::new(3, 5)];
        assert_eq!(edf(&ts, &Dedicated { m: 1 }), EdfVerdict::Overloaded);
        assert_eq!(edf(&ts, &Prm::new(10, 9)), EdfVerdict::Overloaded);
    }

    #[test]
    fn fp_fails_with_a_bound_above_the_deadline() {
        let mut ts = vec![Task::new(2, 4), Task::with_deadline(3, 4, 10)];
        assert_eq!(ts.len(), 2);
        assign_deadline_monotonic(&mut ts);
        assert!(matches!(
            fp_response(&ts, 1, &Dedicated { m: 1 }),
            Err(FpFailure::DeadlineMiss { .. })
        ));
    }
}
