//! The hard CBS rules, one small function each, in the style of the kernel's `deadline.c`.
//!
//! Every function is pure: it takes the server's state and the time and returns the new state.
//! All arithmetic is on integer nanoseconds; products are taken in 128 bits.

use rtbox_model::Nanos;

use crate::types::ServerId;

/// The dynamic state of one CBS server: remaining budget (`runtime`, may be negative only in
/// measured accounting after an overrun) and absolute scheduling deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CbsState {
    pub runtime: i64,
    pub deadline: Nanos,
}

/// The static parameters of a server: budget Q every period P, relative deadline D <= P.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CbsParams {
    pub budget: Nanos,
    pub period: Nanos,
    pub deadline: Nanos,
}

impl CbsParams {
    pub fn implicit(budget: Nanos, period: Nanos) -> Self {
        CbsParams {
            budget,
            period,
            deadline: period,
        }
    }

    fn constrained(&self) -> bool {
        self.deadline < self.period
    }
}

fn q(n: Nanos) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Whether the remaining budget would let the server run above its reserved density if it kept
/// its current deadline: `c / (d - t) > Q / D`, i.e. `c * D > (d - t) * Q`.
///
/// Rule: the CBS overflow check (seed 000, section 1.1, with D = P; the kernel's
/// `dl_entity_overflow` uses the relative deadline D).
pub fn cbs_overflow(s: CbsState, p: CbsParams, now: Nanos) -> bool {
    if s.runtime <= 0 {
        return false;
    }
    let laxity = s.deadline.saturating_sub(now);
    u128::from(s.runtime as u64) * u128::from(p.deadline)
        > u128::from(laxity) * u128::from(p.budget)
}

/// CBS wake-up rule for a server that becomes active at `now` (seed 000, section 1.1): if its
/// deadline has passed or `c > (d - t) Q / P`, it gets a fresh budget and deadline
/// (`d := t + P`, `c := Q`); otherwise it keeps `(c, d)`.
///
/// For constrained deadlines (D < P) whose deadline has not passed, the revised wake-up rule
/// applies instead (Abeni, Lipari, Lelli 2015, "Constant bandwidth server revisited"; the kernel's
/// `update_dl_revised_wakeup`): keep `d` and cut the budget to `c := (d - t) Q / D`, so the
/// server's density never exceeds Q / D.
pub fn cbs_wakeup(s: CbsState, p: CbsParams, now: Nanos) -> CbsState {
    let passed = s.deadline <= now;
    if !passed && !cbs_overflow(s, p, now) {
        return s;
    }
    if !passed && p.constrained() {
        return cbs_revised_wakeup(s, p, now);
    }
    CbsState {
        runtime: q(p.budget),
        deadline: now + p.deadline,
    }
}

/// Revised wake-up rule for constrained deadlines (Abeni, Lipari, Lelli 2015): the deadline is
/// kept and the budget reduced to what the density Q / D allows until it: `c := (d - t) Q / D`
/// (rounded down).
pub fn cbs_revised_wakeup(s: CbsState, p: CbsParams, now: Nanos) -> CbsState {
    let laxity = s.deadline.saturating_sub(now);
    let runtime = u128::from(laxity) * u128::from(p.budget) / u128::from(p.deadline.max(1));
    CbsState {
        runtime: q(u64::try_from(runtime).unwrap_or(u64::MAX)).min(s.runtime),
        deadline: s.deadline,
    }
}

/// Charges `ns` of execution to the server's budget (seed 000, section 1.1: the budget decreases
/// while the server executes). The budget may go negative only with measured accounting.
pub fn cbs_charge(s: CbsState, ns: Nanos) -> CbsState {
    CbsState {
        runtime: s.runtime - q(ns),
        deadline: s.deadline,
    }
}

/// Gives back `ns` that was charged but, by the kernel's own accounting, never executed (time
/// stolen from the vCPU while a member was current), never beyond a full budget `Q`. A kernel
/// CBS charges its servers with the task clock, which leaves steal out (`update_curr_dl` uses
/// `rq_clock_task`); a driver that must charge a wall-time clock first returns the difference
/// here once it knows it. The cap keeps one period's real consumption within `Q` plus the
/// enforcement delay, as without the refund.
pub fn cbs_refund(s: CbsState, p: CbsParams, ns: Nanos) -> CbsState {
    CbsState {
        runtime: s
            .runtime
            .saturating_add(q(ns))
            .min(q(p.budget))
            .max(s.runtime),
        deadline: s.deadline,
    }
}

/// Whether the server must be throttled: its budget is exhausted (hard CBS, seed 000 section
/// 1.1: a server with no budget may not run until its replenishment).
pub fn cbs_exhausted(s: CbsState) -> bool {
    s.runtime <= 0
}

/// Replenishment of a hard CBS (seed 000, section 1.1): at the current deadline the budget is
/// recharged and the deadline postponed, `d += P`, `c += Q` (repeated while an overrun leaves
/// `c <= 0`, as the kernel's `replenish_dl_entity`). rtbox applies it when the server throttles
/// and keeps the server throttled until the old deadline, which gives the same schedule and
/// shows the post-replenishment values at once.
pub fn cbs_replenish(s: CbsState, p: CbsParams) -> CbsState {
    let mut out = s;
    loop {
        out.deadline += p.period;
        out.runtime += q(p.budget);
        if out.runtime > 0 {
            return out;
        }
    }
}

/// A lagging server's restart (its replenished deadline has already passed): the deadline
/// moves to `t + D`, the budget stays as replenished. The kernel's `replenish_dl_entity` also
/// resets a lagging entity's budget to Q, forgiving its overrun; rtbox keeps the overrun owed,
/// because its overruns are enforcement delay that the next period must pay back.
pub fn cbs_restart(s: CbsState, p: CbsParams, now: Nanos) -> CbsState {
    CbsState {
        runtime: s.runtime,
        deadline: now + p.deadline,
    }
}

/// Hard CBS throttling on exhaustion (seed 000, section 1.1): the server is suspended until its
/// current deadline `d`, when it is replenished. Returns the replenished state and the time the
/// server may run again, or `None` when `d` has already passed (then the replenished server may
/// run at once, as the kernel does when its timer would be in the past).
///
/// A server that throttles so late that even its replenished deadline has passed (its driver
/// stalled for more than a period) restarts from now instead ([`cbs_restart`]): postponing `d`
/// one period at a time would hand it one budget per missed period back to back, with a
/// deadline in the past that beats every other server under EDF.
pub fn cbs_throttle(s: CbsState, p: CbsParams, now: Nanos) -> (CbsState, Option<Nanos>) {
    let until = s.deadline;
    let next = cbs_replenish(s, p);
    if until > now {
        (next, Some(until))
    } else if next.deadline <= now {
        (cbs_restart(next, p, now), None)
    } else {
        (next, None)
    }
}

/// The EDF order of the servers of one CPU (Liu and Layland 1973; the kernel's `dl_time_before`
/// on absolute deadlines): the earlier absolute deadline first, equal deadlines by
/// [`ServerId`], so the order is total and the same in every driver. Every place that picks or
/// lists servers in EDF order sorts by this key.
pub fn edf_key(deadline: Nanos, server: ServerId) -> (Nanos, ServerId) {
    (deadline, server)
}

/// New parameters for a server that exists before and after a reconfiguration (its box's
/// budget or period changed) at `now`.
///
/// Model: the kernel applies a `sched_setattr` on a queued deadline entity by dequeuing it and
/// enqueuing it with `ENQUEUE_RESTORE` (kernel/sched/deadline.c, `enqueue_dl_entity`): it keeps
/// its runtime and deadline (the new parameters apply from the next replenishment) unless the
/// deadline has passed, in which case `setup_new_dl_entity` gives it `d = t + D`, `c = Q`.
/// rtbox does the same, but also cuts a kept budget with the revised wake-up rule under the new
/// parameters (`c := min(c, (d - t) Q' / D')`, [`cbs_revised_wakeup`]), so that a reduced
/// bandwidth already holds for the rest of the current period: admission only checked the new
/// bandwidths. A throttled server (`throttled_until` = its replenishment time) stays throttled
/// until then; its replenished pair becomes `(min(c, Q'), until + D')`.
pub fn cbs_change(
    s: CbsState,
    new: CbsParams,
    now: Nanos,
    throttled_until: Option<Nanos>,
) -> CbsState {
    if let Some(until) = throttled_until {
        return CbsState {
            runtime: s.runtime.min(q(new.budget)),
            deadline: until + new.deadline,
        };
    }
    if s.deadline <= now {
        return CbsState {
            runtime: q(new.budget),
            deadline: now + new.deadline,
        };
    }
    cbs_revised_wakeup(s, new, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S1: CbsParams = CbsParams {
        budget: 3,
        period: 6,
        deadline: 6,
    };

    #[test]
    fn a_lagging_server_gets_one_fresh_period_not_one_budget_per_missed_period() {
        // Exhausted at 40 with deadline 6 (its driver stalled): one replenishment gives d = 12,
        // still past; the server restarts from now, not with budgets for 12, 18, .. 42.
        let s = CbsState {
            runtime: -1,
            deadline: 6,
        };
        let (st, until) = cbs_throttle(s, S1, 40);
        assert_eq!(until, None);
        assert_eq!(
            st,
            CbsState {
                runtime: 2,
                deadline: 46
            },
            "restarted from 40, the overrun of 1 still owed"
        );
        // Late but within the next period: the usual replenishment (d = 12 > 10), at once.
        let (st, until) = cbs_throttle(s, S1, 10);
        assert_eq!(
            (st, until),
            (
                CbsState {
                    runtime: 2,
                    deadline: 12
                },
                None
            )
        );
    }

    #[test]
    fn refund_restores_an_overrun_but_never_beyond_q() {
        // Throttled with an overrun of 2 (replenished to 3 - 2 = 1): a refund of 1 gives 2.
        let s = CbsState {
            runtime: 1,
            deadline: 12,
        };
        assert_eq!(cbs_refund(s, S1, 1).runtime, 2);
        // A refund larger than the overrun stops at Q.
        assert_eq!(cbs_refund(s, S1, 5).runtime, 3);
        assert_eq!(cbs_refund(s, S1, 5).deadline, 12);
        // A budget already above Q (cannot happen, but) is never cut by a refund.
        let full = CbsState {
            runtime: 3,
            deadline: 12,
        };
        assert_eq!(cbs_refund(full, S1, 1), full);
    }

    #[test]
    fn wakeup_keeps_a_budget_that_fits() {
        // c = 1, d = 6, t = 4: 1 <= (6 - 4) * 3 / 6 = 1, keep.
        let s = CbsState {
            runtime: 1,
            deadline: 6,
        };
        assert_eq!(cbs_wakeup(s, S1, 4), s);
    }

    #[test]
    fn wakeup_resets_an_overflowing_budget() {
        // c = 3, d = 12, t = 7: 3 > 5 * 0.5, reset to d = 13, c = 3.
        let s = CbsState {
            runtime: 3,
            deadline: 12,
        };
        assert_eq!(
            cbs_wakeup(s, S1, 7),
            CbsState {
                runtime: 3,
                deadline: 13
            }
        );
    }

    #[test]
    fn wakeup_after_deadline_resets() {
        let s = CbsState {
            runtime: 1,
            deadline: 6,
        };
        assert_eq!(
            cbs_wakeup(s, S1, 6),
            CbsState {
                runtime: 3,
                deadline: 12
            }
        );
    }

    #[test]
    fn revised_wakeup_cuts_budget_for_constrained_deadlines() {
        // Q = 2, D = 4, P = 10; at t = 2 with c = 2, d = 4: 2 * 4 > 2 * 2 overflows;
        // the revised rule keeps d = 4 and cuts c to (4 - 2) * 2 / 4 = 1.
        let p = CbsParams {
            budget: 2,
            period: 10,
            deadline: 4,
        };
        let s = CbsState {
            runtime: 2,
            deadline: 4,
        };
        assert_eq!(
            cbs_wakeup(s, p, 2),
            CbsState {
                runtime: 1,
                deadline: 4
            }
        );
        // Past the deadline the plain rule applies.
        assert_eq!(
            cbs_wakeup(s, p, 5),
            CbsState {
                runtime: 2,
                deadline: 9
            }
        );
    }

    #[test]
    fn throttle_replenishes_and_waits_for_the_deadline() {
        let s = CbsState {
            runtime: 0,
            deadline: 6,
        };
        assert_eq!(
            cbs_throttle(s, S1, 3),
            (
                CbsState {
                    runtime: 3,
                    deadline: 12
                },
                Some(6)
            )
        );
        // An overrun of 4 (c = -4) needs two replenishments.
        let s = CbsState {
            runtime: -4,
            deadline: 6,
        };
        assert_eq!(
            cbs_throttle(s, S1, 3),
            (
                CbsState {
                    runtime: 2,
                    deadline: 18
                },
                Some(6)
            )
        );
        // Deadline already passed: no suspension.
        assert_eq!(
            cbs_throttle(
                CbsState {
                    runtime: 0,
                    deadline: 6
                },
                S1,
                8
            )
            .1,
            None
        );
    }

    #[test]
    fn a_changed_server_keeps_its_deadline_within_the_new_density() {
        let s = CbsState {
            runtime: 3,
            deadline: 6,
        };
        // Halved to 1.5 / 6 at t = 2: (6 - 2) * 1.5 / 6 = 1 < 3, cut to 1, deadline kept.
        let half = CbsParams::implicit(15, 60);
        assert_eq!(
            cbs_change(
                CbsState {
                    runtime: 30,
                    deadline: 60
                },
                half,
                20,
                None
            ),
            CbsState {
                runtime: 10,
                deadline: 60
            }
        );
        // Raised: the smaller old budget is kept for this period.
        let more = CbsParams::implicit(5, 6);
        assert_eq!(cbs_change(s, more, 2, None), s);
        // Deadline passed: a fresh pair from now, as setup_new_dl_entity.
        assert_eq!(
            cbs_change(s, more, 7, None),
            CbsState {
                runtime: 5,
                deadline: 13
            }
        );
        // Throttled until 6 with a replenished (3, 12): stays throttled, then (min(3, 2), 6 + 4).
        let small = CbsParams::implicit(2, 4);
        let st = CbsState {
            runtime: 3,
            deadline: 12,
        };
        assert_eq!(
            cbs_change(st, small, 2, Some(6)),
            CbsState {
                runtime: 2,
                deadline: 10
            }
        );
    }

    #[test]
    fn edf_key_orders_by_deadline_then_id() {
        assert!(edf_key(5, ServerId(9)) < edf_key(6, ServerId(0)));
        assert!(edf_key(5, ServerId(1)) < edf_key(5, ServerId(2)));
    }

    #[test]
    fn charge_and_exhaustion() {
        let s = cbs_charge(
            CbsState {
                runtime: 3,
                deadline: 6,
            },
            3,
        );
        assert!(cbs_exhausted(s));
        assert!(!cbs_exhausted(cbs_charge(s, 0)) || s.runtime == 0);
    }
}
