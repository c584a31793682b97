//! Several CPUs inside a box with global scheduling: seed 002 Theorem 1 (G-FP on a
//! multi-supply such as BDM), global EDF and global FP on a supply with bounded parallelism
//! (MPR, a box's servers) and on dedicated CPUs (GFB, BCL, Bertogna-Cirinei G-FP RTA).
//!
//! All global tests assume constrained deadlines: a deadline above the period is analysed as
//! the period (conservative), and release jitter J is folded in as the sporadic task
//! (C, D - J, T - J) (see [`Task::without_jitter`]). Time is discrete (1 ns).

use rtbox_model::Nanos;

use crate::supply::{Dedicated, MultiSupply, Supply, Work};
use crate::task::Task;

/// The numbers of one inequality `demand <= supply` over a window (with k CPUs counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check {
    pub window: Nanos,
    pub demand: Work,
    pub supply: Work,
    /// The parallelism k of Y_k, for multi-supply tests.
    pub k: Option<u32>,
}

impl Check {
    pub fn holds(&self) -> bool {
        self.demand <= self.supply
    }
}

/// Outcome of a global test for one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlobalVerdict {
    pub schedulable: bool,
    /// Response-time bound from arrival, when the test yields one.
    pub response: Option<Nanos>,
    /// The inequality at the deadline (the passing one, or the closest failing one).
    pub check: Option<Check>,
}

impl GlobalVerdict {
    fn failed(check: Option<Check>) -> Self {
        GlobalVerdict {
            schedulable: false,
            response: None,
            check,
        }
    }
}

/// Tasks prepared for the global tests: jitter folded in, deadlines capped at periods.
/// `None` at a position whose jitter swallows the deadline.
pub fn prepare(tasks: &[Task]) -> Vec<Option<Task>> {
    tasks
        .iter()
        .map(|t| {
            t.without_jitter().map(|mut u| {
                u.deadline = u.deadline.min(u.period);
                u
            })
        })
        .collect()
}

/// Carry-in workload of a higher-priority task j in a window of length `x` for G-FP, with j's
/// jobs finishing by their deadlines (Bertogna & Cirinei 2007 with R_j = D_j; seed 002
/// Theorem 1): N = floor((x + D_j - C_j) / T_j), W = N C_j + min(C_j, x + D_j - C_j - N T_j).
#[inline]
pub fn fp_workload(j: &Task, x: Nanos) -> Work {
    let reach = (x + j.deadline).saturating_sub(j.wcet);
    let n = reach / j.period;
    let rest = reach - n * j.period;
    u128::from(n) * u128::from(j.wcet) + u128::from(j.wcet.min(rest))
}

/// EDF interference bound of task i on the job of task k in its window [r_k, d_k]
/// (Bertogna, Cirinei & Lipari 2005): jobs of i with deadlines in the window,
/// N = floor((D_k - D_i) / T_i) + 1, beta = N C_i + min(C_i, max(0, D_k - N T_i)).
#[inline]
pub fn edf_workload(i: &Task, dk: Nanos) -> Work {
    let (dk, di, ti, ci) = (
        i128::from(dk),
        i128::from(i.deadline),
        i128::from(i.period),
        i128::from(i.wcet),
    );
    let n = crate::math::floor_div(dk - di, ti) + 1;
    let n = n.max(0);
    let v = n * ci + ci.min((dk - n * ti).max(0));
    v as Work
}

// ---------------------------------------------------------------------------------------------
// seed 002 Theorem 1

/// Interfering workload of Theorem 1 for task `i` in a window of length `x`:
/// W_i(x) = sum_{j in hp(i)} N_ji C_j + min(C_j, x + D_j - C_j - N_ji T_j),
/// N_ji = floor((x + D_j - C_j) / T_j); Theorem 1 uses x = D_i.
#[inline]
pub fn theorem1_interference(tasks: &[Task], i: usize, x: Nanos) -> Work {
    let me = &tasks[i];
    let mut w: Work = 0;
    for (j, other) in tasks.iter().enumerate() {
        if j != i && me.is_hp(other) {
            w += fp_workload(other, x);
        }
    }
    w
}

/// Seed 002 Theorem 1 for task `i`: schedulable if some k in 1..=m has
/// k C_i + W_i <= Y_k(D_i). Also gives a response bound: the least window x <= D_i with
/// k C_i + W_i(x) <= Y_k(x) for some k (the theorem's argument applied to a window of length x),
/// found per k as the least fixed point of x = Y_k^-1(k C_i + W_i(x)).
pub fn theorem1_task(tasks: &[Task], i: usize, platform: &dyn MultiSupply) -> GlobalVerdict {
    let me = tasks[i];
    if me.wcet > me.deadline {
        return GlobalVerdict::failed(None);
    }
    let w = theorem1_interference(tasks, i, me.deadline);
    let mut passing: Option<Check> = None;
    let mut closest: Option<Check> = None;
    for k in 1..=platform.m() {
        let c = Check {
            window: me.deadline,
            demand: u128::from(k) * u128::from(me.wcet) + w,
            supply: platform.y(k, me.deadline),
            k: Some(k),
        };
        if c.holds() {
            passing = Some(c);
            break;
        }
        // Closest failure: smallest demand excess.
        if closest.is_none_or(|b| c.demand - c.supply < b.demand - b.supply) {
            closest = Some(c);
        }
    }
    let Some(pass) = passing else {
        return GlobalVerdict::failed(closest);
    };
    let mut response = me.deadline;
    for k in 1..=platform.m() {
        if let Some(x) = theorem1_window(tasks, i, platform, k) {
            response = response.min(x);
        }
    }
    GlobalVerdict {
        schedulable: true,
        response: Some(response),
        check: Some(pass),
    }
}

/// Least x <= D_i with k C_i + W_i(x) <= Y_k(x), by fixed-point iteration from below.
fn theorem1_window(tasks: &[Task], i: usize, platform: &dyn MultiSupply, k: u32) -> Option<Nanos> {
    let me = &tasks[i];
    let own = u128::from(k) * u128::from(me.wcet);
    let mut x = platform.time_to_y(k, own)?;
    loop {
        if x > me.deadline {
            return None;
        }
        let next = platform.time_to_y(k, own + theorem1_interference(tasks, i, x))?;
        if next <= x {
            return Some(x);
        }
        x = next;
    }
}

/// Fast yes/no form of Theorem 1 for a whole task set (no allocation, no response bounds):
/// the G-FP-on-BDM test used for synthesis and throughput benchmarks.
pub fn theorem1_schedulable(tasks: &[Task], platform: &dyn MultiSupply) -> bool {
    (0..tasks.len()).all(|i| {
        let me = &tasks[i];
        if me.wcet > me.deadline {
            return false;
        }
        let w = theorem1_interference(tasks, i, me.deadline);
        (1..=platform.m())
            .any(|k| u128::from(k) * u128::from(me.wcet) + w <= platform.y(k, me.deadline))
    })
}

/// Seed 002 Theorem 1 for every task (jitter folded in, see [`prepare`]). A task's verdict
/// counts only if every higher-or-equal-priority task passes too (its carry-in bound assumes
/// they meet their deadlines), see [`require_hp`].
pub fn theorem1(tasks: &[Task], platform: &dyn MultiSupply) -> Vec<GlobalVerdict> {
    require_hp(
        tasks,
        with_prepared(tasks, |ts, i| theorem1_task(ts, i, platform)),
    )
}

/// G-FP interference bounds assume the interfering tasks meet their deadlines: a task is
/// guaranteed only if all tasks of higher or equal priority are.
pub fn require_hp(tasks: &[Task], mut verdicts: Vec<GlobalVerdict>) -> Vec<GlobalVerdict> {
    let ok: Vec<bool> = verdicts.iter().map(|v| v.schedulable).collect();
    for (i, v) in verdicts.iter_mut().enumerate() {
        let hp_fails = tasks
            .iter()
            .enumerate()
            .any(|(j, o)| j != i && tasks[i].is_hp(o) && !ok[j]);
        if hp_fails {
            v.schedulable = false;
            v.response = None;
        }
    }
    verdicts
}

/// Global EDF interference bounds assume every other task meets its deadlines: one failure
/// voids every guarantee of the set.
pub fn require_all(mut verdicts: Vec<GlobalVerdict>) -> Vec<GlobalVerdict> {
    if verdicts.iter().any(|v| !v.schedulable) {
        for v in &mut verdicts {
            v.schedulable = false;
            v.response = None;
        }
    }
    verdicts
}

pub(crate) fn with_prepared(
    tasks: &[Task],
    f: impl Fn(&[Task], usize) -> GlobalVerdict,
) -> Vec<GlobalVerdict> {
    let prepared = prepare(tasks);
    // A task whose jitter swallows its deadline fails itself; as an interferer it is kept
    // with the deadline shrunk to its WCET (its carry-in is then as large as possible).
    let ts: Vec<Task> = prepared
        .iter()
        .zip(tasks)
        .map(|(p, t)| {
            p.unwrap_or(Task {
                deadline: t.wcet,
                period: t.period.saturating_sub(t.jitter).max(1),
                jitter: 0,
                ..*t
            })
        })
        .collect();
    (0..ts.len())
        .map(|i| {
            if prepared[i].is_none() {
                GlobalVerdict::failed(None)
            } else {
                f(&ts, i)
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Global EDF / FP on a supply with bounded parallelism

/// The supply-side condition shared by the global tests on a single supply of parallelism m
/// (derived from Shin, Easwaran & Lee 2008 with the Bertogna-Cirinei-Lipari interference
/// bound): if the job of task k is not finished x after its release, it ran c < C_k and was
/// ready but not running for X >= x - C_k + 1 instants, in which every supplied CPU ran other
/// jobs; so sbf(x) <= m (x - X) + sum_i min(I_i, X). The right side is concave in X, so it
/// suffices that m (C_k - 1) + sum_i min(I_i, x - C_k + 1) + 1 <= sbf(x).
/// On m dedicated CPUs this is exactly the discrete BCL / Bertogna-Cirinei condition.
#[inline]
fn global_demand(m: u32, wcet: Nanos, x: Nanos, interference: impl Iterator<Item = Work>) -> Work {
    let cap = u128::from(x + 1 - wcet);
    let sum: Work = interference.map(|i| i.min(cap)).sum();
    u128::from(m) * u128::from(wcet - 1) + sum + 1
}

/// Global EDF on a supply (MPR, a box's servers, BDM's Y_m, dedicated CPUs) for task `k`,
/// checked at its deadline.
pub fn global_edf_task(tasks: &[Task], k: usize, supply: &dyn Supply) -> GlobalVerdict {
    let me = tasks[k];
    if me.wcet > me.deadline {
        return GlobalVerdict::failed(None);
    }
    let m = supply.parallelism();
    let demand = global_demand(
        m,
        me.wcet,
        me.deadline,
        tasks
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != k)
            .map(|(_, t)| edf_workload(t, me.deadline)),
    );
    let check = Check {
        window: me.deadline,
        demand,
        supply: supply.sbf(me.deadline),
        k: None,
    };
    GlobalVerdict {
        schedulable: check.holds(),
        response: None,
        check: Some(check),
    }
}

/// Global EDF on a supply, every task.
pub fn global_edf(tasks: &[Task], supply: &dyn Supply) -> Vec<GlobalVerdict> {
    require_all(with_prepared(tasks, |ts, i| global_edf_task(ts, i, supply)))
}

/// Global FP response-time analysis on a supply for task `k`: the least x with
/// m (C_k - 1) + sum_{hp} min(W_j(x), x - C_k + 1) + 1 <= sbf(x), where W_j is the
/// carry-in workload with R_j = D_j ("no slack", interference capped at x - C_k + 1).
/// On m dedicated CPUs: R = C_k + floor(sum min(W_j(R), R - C_k + 1) / m), the capped
/// Bertogna-Cirinei 2007 variant.
pub fn global_fp_task(tasks: &[Task], k: usize, supply: &dyn Supply) -> GlobalVerdict {
    let me = tasks[k];
    if me.wcet > me.deadline {
        return GlobalVerdict::failed(None);
    }
    let m = supply.parallelism();
    let demand_at = |x: Nanos| {
        global_demand(
            m,
            me.wcet,
            x,
            tasks
                .iter()
                .enumerate()
                .filter(|&(j, o)| j != k && me.is_hp(o))
                .map(|(_, o)| fp_workload(o, x)),
        )
    };
    let mut x = me.wcet;
    loop {
        let need = demand_at(x);
        let next = supply.time_to_supply(need);
        match next {
            Some(n) if n <= x => {
                return GlobalVerdict {
                    schedulable: true,
                    response: Some(x),
                    check: Some(Check {
                        window: x,
                        demand: need,
                        supply: supply.sbf(x),
                        k: None,
                    }),
                }
            }
            Some(n) if n <= me.deadline => {
                // No window in [n, skip) can pass; go straight past it.
                let skip = saturation_end(tasks, k, m, n);
                if skip > me.deadline {
                    return GlobalVerdict::failed(Some(Check {
                        window: me.deadline,
                        demand: demand_at(me.deadline),
                        supply: supply.sbf(me.deadline),
                        k: None,
                    }));
                }
                x = skip;
            }
            _ => {
                let need = demand_at(me.deadline);
                return GlobalVerdict::failed(Some(Check {
                    window: me.deadline,
                    demand: need,
                    supply: supply.sbf(me.deadline),
                    k: None,
                }));
            }
        }
    }
}

/// Skips windows that cannot pass. W_j(y) grows with slope at most 1, so W_j(y) - (y - C + 1)
/// never increases: once an interferer falls below the cap it stays below. While at least m
/// interferers are at the cap, the demand is >= m (C - 1) + m (y - C + 1) + 1 > m y >= sbf(y),
/// so no such y passes. Returns the first y >= x with fewer than m capped interferers (x if
/// there already are fewer).
fn saturation_end(tasks: &[Task], k: usize, m: u32, x: Nanos) -> Nanos {
    let me = &tasks[k];
    let capped_until = |o: &Task| -> Option<Nanos> {
        let capped = |y: Nanos| fp_workload(o, y) >= u128::from(y + 1 - me.wcet);
        if !capped(x) {
            return None;
        }
        // Last y in [x, D] still capped (monotone predicate).
        let (mut lo, mut hi) = (x, me.deadline.saturating_add(1));
        if capped(hi) {
            return Some(hi);
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if capped(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(lo)
    };
    let hp: Vec<&Task> = tasks
        .iter()
        .enumerate()
        .filter(|&(j, o)| j != k && me.is_hp(o))
        .map(|(_, o)| o)
        .collect();
    let capped_now = hp
        .iter()
        .filter(|o| fp_workload(o, x) >= u128::from(x + 1 - me.wcet))
        .count();
    if capped_now < m as usize {
        return x;
    }
    let mut ends: Vec<Nanos> = hp.iter().filter_map(|o| capped_until(o)).collect();
    ends.sort_unstable_by(|a, b| b.cmp(a));
    // With the m-th largest end e, at every y <= e at least m interferers are capped.
    ends.get(m as usize - 1)
        .map_or(x, |&e| e.saturating_add(1).max(x))
}

/// Global FP on a supply, every task.
pub fn global_fp(tasks: &[Task], supply: &dyn Supply) -> Vec<GlobalVerdict> {
    require_hp(
        tasks,
        with_prepared(tasks, |ts, i| global_fp_task(ts, i, supply)),
    )
}

// ---------------------------------------------------------------------------------------------
// Dedicated CPUs

/// Density test GFB (Goossens, Funk & Baruah 2003, with densities for constrained deadlines):
/// global EDF on m CPUs is schedulable if sum C_i/D_i <= m - (m - 1) max C_i/D_i.
/// Densities are summed in 10^-18 units rounded up, so the test never passes wrongly.
pub fn gfb(tasks: &[Task], m: u32) -> bool {
    const S: u128 = 1_000_000_000_000_000_000;
    let prepared = prepare(tasks);
    if prepared.iter().any(Option::is_none) {
        return false;
    }
    let dens: Vec<u128> = prepared
        .iter()
        .flatten()
        .map(|t| (u128::from(t.wcet) * S).div_ceil(u128::from(t.deadline)))
        .collect();
    let max = dens.iter().copied().max().unwrap_or(0);
    if max > S {
        return false;
    }
    let sum: u128 = dens.iter().sum();
    let m = u128::from(m);
    sum + (m - 1) * max <= m * S
}

/// BCL (Bertogna, Cirinei & Lipari 2005) for global EDF on m dedicated CPUs.
pub fn bcl(tasks: &[Task], m: u32) -> Vec<GlobalVerdict> {
    global_edf(tasks, &Dedicated { m })
}

/// Bertogna-Cirinei 2007 G-FP response-time analysis on m dedicated CPUs, variant
/// "no slack, interference capped at R - C + 1".
pub fn bc_rta(tasks: &[Task], m: u32) -> Vec<GlobalVerdict> {
    global_fp(tasks, &Dedicated { m })
}

/// Variants of the Bertogna-Cirinei 2007 G-FP response-time analysis on m dedicated CPUs
/// (`analysis-facts.md` lists one vector for each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BcVariant {
    /// Carry-in of a higher-priority task uses its response bound R_j instead of D_j.
    pub slack: bool,
    /// Each interferer's workload is capped at R - C_k + 1.
    pub capped: bool,
}

/// Bertogna-Cirinei G-FP RTA on m dedicated CPUs in the chosen variant:
/// R_k = C_k + floor(sum_{hp} I_j(R_k) / m) with I_j = W_j or min(W_j, R - C_k + 1) and
/// W_j(L) = N C_j + min(C_j, L + X_j - C_j - N T_j), N = floor((L + X_j - C_j) / T_j),
/// X_j = R_j (slack) or D_j; with fewer than m interferers R_k = C_k. Returns the bound per task, `None` when it exceeds the deadline.
/// [`bc_rta`] is the variant {slack: false, capped: true}.
pub fn bc_rta_variant(tasks: &[Task], m: u32, variant: BcVariant) -> Vec<Option<Nanos>> {
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(tasks[i].prio));
    let mut bound: Vec<Option<Nanos>> = vec![None; tasks.len()];
    let mut done = vec![false; tasks.len()];
    for &k in &order {
        let me = tasks[k];
        let interferers: Vec<Task> = tasks
            .iter()
            .enumerate()
            .filter(|&(j, o)| j != k && me.is_hp(o))
            .map(|(j, o)| {
                let mut o = *o;
                if variant.slack && done[j] {
                    if let Some(r) = bound[j] {
                        o.deadline = r; // carry-in window uses R_j
                    }
                }
                o
            })
            .collect();
        let mut r = me.wcet;
        // Fewer interferers than CPUs: one CPU is always free for the task.
        let result = loop {
            if interferers.len() < m as usize {
                break Some(me.wcet).filter(|&c| c <= me.deadline);
            }
            let cap = u128::from(r + 1 - me.wcet);
            let sum: Work = interferers
                .iter()
                .map(|o| {
                    let w = fp_workload(o, r);
                    if variant.capped {
                        w.min(cap)
                    } else {
                        w
                    }
                })
                .sum();
            let next = u128::from(me.wcet) + sum / u128::from(m);
            if next > u128::from(me.deadline) {
                break None;
            }
            let next = next as Nanos;
            if next == r {
                break Some(r);
            }
            r = next;
        };
        // Only valid if every interferer is schedulable.
        let hp_ok = tasks
            .iter()
            .enumerate()
            .all(|(j, o)| j == k || !me.is_hp(o) || !done[j] || bound[j].is_some());
        bound[k] = result.filter(|_| hp_ok);
        done[k] = true;
    }
    // Equal priorities interfere both ways: a failure voids its peers too.
    let failed: Vec<bool> = bound.iter().map(Option::is_none).collect();
    for (k, b) in bound.iter_mut().enumerate() {
        if (0..tasks.len()).any(|j| j != k && tasks[k].is_hp(&tasks[j]) && failed[j]) {
            *b = None;
        }
    }
    bound
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supply::Bdm;
    use rtbox_model::Bandwidth;

    fn ordered(mut ts: Vec<Task>) -> Vec<Task> {
        let n = ts.len() as u32;
        for (i, t) in ts.iter_mut().enumerate() {
            t.prio = n - i as u32;
        }
        ts
    }

    const MS: u64 = 1_000_000;

    fn table2_y1() -> Vec<Task> {
        vec![
            Task::new(10 * MS, 60 * MS).prio(13),
            Task::new(140 * MS, 270 * MS).prio(12),
            Task::new(90 * MS, 520 * MS).prio(11),
        ]
    }

    fn table2_y2() -> Vec<Task> {
        vec![
            Task::new(40 * MS, 270 * MS).prio(15),
            Task::new(40 * MS, 520 * MS).prio(14),
        ]
    }

    fn bdm(alpha: &str) -> Bdm {
        Bdm {
            alpha: Bandwidth::parse_decimal(alpha).unwrap(),
            delta: 20 * MS,
            m: 2,
        }
    }

    #[test]
    fn seed002_table2_schedulable_and_not_with_lower_alpha() {
        assert!(theorem1(&table2_y1(), &bdm("0.72"))
            .iter()
            .all(|v| v.schedulable));
        assert!(theorem1(&table2_y2(), &bdm("0.22"))
            .iter()
            .all(|v| v.schedulable));
        assert!(!theorem1_schedulable(&table2_y1(), &bdm("0.67")));
        assert!(!theorem1_schedulable(&table2_y2(), &bdm("0.17")));
    }

    #[test]
    fn seed002_task2_hand_computation() {
        // analysis-facts.md: task 2, W = 60 ms, k = 2: 340 <= 360.
        let ts = table2_y1();
        assert_eq!(theorem1_interference(&ts, 1, 270 * MS), 60 * u128::from(MS));
        let v = theorem1_task(&ts, 1, &bdm("0.72"));
        let c = v.check.unwrap();
        assert_eq!(
            (c.k, c.demand, c.supply),
            (Some(2), 340 * u128::from(MS), 360 * u128::from(MS))
        );
        assert!(v.response.unwrap() <= 270 * MS);
    }

    #[test]
    fn bertogna_cirinei_capped_variant_facts_vector() {
        // (1,4),(1,5),(3,9),(9,18), no slack, capped min(W, R-C+1), m = 3 -> 1,1,3,13.
        let ts = ordered(vec![
            Task::new(1, 4),
            Task::new(1, 5),
            Task::new(3, 9),
            Task::new(9, 18),
        ]);
        let r: Vec<Nanos> = bc_rta(&ts, 3).iter().map(|v| v.response.unwrap()).collect();
        assert_eq!(r, vec![1, 1, 3, 13]);
    }

    #[test]
    fn bertogna_cirinei_other_variants_facts_vectors() {
        let ts = ordered(vec![
            Task::new(1, 4),
            Task::new(1, 5),
            Task::new(3, 9),
            Task::new(9, 18),
        ]);
        let v = |slack, capped, m| bc_rta_variant(&ts, m, BcVariant { slack, capped });
        let some = |x: [u64; 4]| x.map(Some).to_vec();
        assert_eq!(v(false, false, 3), some([1, 1, 3, 14]));
        assert_eq!(v(true, false, 2), some([1, 1, 4, 15]));
        assert_eq!(v(false, true, 3), some([1, 1, 3, 13]));
        // The capped no-slack variant is the one `bc_rta` implements on a supply.
        let r: Vec<Option<Nanos>> = bc_rta(&ts, 3).iter().map(|x| x.response).collect();
        assert_eq!(r, v(false, true, 3));
    }

    proptest::proptest! {
        #[test]
        fn skipping_saturated_windows_changes_no_result(
            raw in proptest::collection::vec((1u64..6, 2u64..30), 2..6), m in 1u32..4
        ) {
            let ts = ordered(raw.iter().map(|&(c, t)| Task::new(c.min(t), t)).collect());
            let supply = Dedicated { m };
            for k in 0..ts.len() {
                let fast = global_fp_task(&ts, k, &supply);
                // Plain iteration: x = sbf^-1(demand(x)) from C_k.
                let me = ts[k];
                let demand = |x: Nanos| global_demand(m, me.wcet, x, ts.iter().enumerate()
                    .filter(|&(j, o)| j != k && me.is_hp(o)).map(|(_, o)| fp_workload(o, x)));
                let mut x = me.wcet;
                let slow = loop {
                    let n = supply.time_to_supply(demand(x)).unwrap();
                    if n <= x { break Some(x); }
                    if n > me.deadline { break None; }
                    x = n;
                };
                proptest::prop_assert_eq!(fast.response, slow);
            }
        }
    }

    #[test]
    fn global_edf_facts_vectors() {
        let three = vec![Task::new(2, 3); 3];
        assert!(!bcl(&three, 2).iter().all(|v| v.schedulable));
        assert!(bcl(&three, 3).iter().all(|v| v.schedulable));
        let set = vec![Task::new(20, 30), Task::new(20, 30), Task::new(5, 30)];
        assert!(!gfb(&set, 2));
        assert!(bcl(&set, 2).iter().all(|v| v.schedulable));
    }
}
