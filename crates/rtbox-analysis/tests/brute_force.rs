//! Issue 3 property tests: the analyses against a discrete-time brute-force scheduler on small
//! integer task sets, and "more budget never breaks schedulability".

use proptest::prelude::*;
use rtbox_analysis::global::{bc_rta, bcl, gfb, global_edf, global_fp, theorem1};
use rtbox_analysis::supply::{mpr_sbf, Bdm, Dedicated, Mpr, Prm, ServerSet, Supply};
use rtbox_analysis::task::assign_deadline_monotonic;
use rtbox_analysis::uni::{edf, fp_response};
use rtbox_analysis::Task;
use rtbox_model::{Bandwidth, BW_ONE};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sched {
    Fp,
    Edf,
}

struct SimResult {
    /// Per task: the largest response seen (completed jobs), and whether a job missed.
    max_response: Vec<u64>,
    missed: Vec<bool>,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn hyperperiod(tasks: &[Task]) -> u64 {
    tasks.iter().fold(1, |h, t| h / gcd(h, t.period) * t.period)
}

/// Synchronous periodic releases; in each slot the `avail(slot)` supplied CPUs run the highest
/// ranked ready jobs (global, one job per CPU).
fn simulate(tasks: &[Task], sched: Sched, horizon: u64, avail: impl Fn(u64) -> u64) -> SimResult {
    struct Job {
        task: usize,
        release: u64,
        deadline: u64,
        left: u64,
    }
    let n = tasks.len();
    let mut jobs: Vec<Job> = Vec::new();
    let mut res = SimResult {
        max_response: vec![0; n],
        missed: vec![false; n],
    };
    for slot in 0..horizon {
        for (i, t) in tasks.iter().enumerate() {
            if slot % t.period == 0 {
                jobs.push(Job {
                    task: i,
                    release: slot,
                    deadline: slot + t.deadline,
                    left: t.wcet,
                });
            }
        }
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by_key(|&j| {
            let job = &jobs[j];
            match sched {
                Sched::Fp => (
                    u64::from(u32::MAX - tasks[job.task].prio),
                    job.release,
                    job.task as u64,
                ),
                Sched::Edf => (job.deadline, job.release, job.task as u64),
            }
        });
        let cpus = avail(slot) as usize;
        for &j in order.iter().take(cpus) {
            jobs[j].left -= 1;
        }
        jobs.retain(|job| {
            if job.left == 0 {
                let r = slot + 1 - job.release;
                let t = job.task;
                res.max_response[t] = res.max_response[t].max(r);
                if slot + 1 > job.deadline {
                    res.missed[t] = true;
                }
                false
            } else {
                true
            }
        });
    }
    for job in &jobs {
        if job.deadline < horizon {
            res.missed[job.task] = true;
        }
    }
    res
}

/// Server supply pattern: budget `q` every `p`, phase `phase`, placed at the period's end
/// (`late`) or start.
fn server_slot(p: u64, q: u64, phase: u64, late: bool, slot: u64) -> bool {
    let off = (slot + p - phase % p) % p;
    if late {
        off >= p - q
    } else {
        off < q
    }
}

const PERIODS: [u64; 8] = [2, 3, 4, 5, 6, 8, 10, 12];

fn task_strategy() -> impl Strategy<Value = Task> {
    (0usize..PERIODS.len(), 1u64..=12, 0u64..=12).prop_map(|(pi, c, d)| {
        let t = PERIODS[pi];
        let c = 1 + (c - 1) % t;
        let d = c + d % (t - c + 1);
        Task::with_deadline(c, d, t)
    })
}

/// Random sets of 1..=max tasks with deadline-monotonic priorities.
fn set_strategy(max: usize) -> impl Strategy<Value = Vec<Task>> {
    prop::collection::vec(task_strategy(), 1..=max).prop_map(|mut ts| {
        assign_deadline_monotonic(&mut ts);
        ts
    })
}

/// sum C/T <= num (in CPUs), exactly.
fn util_at_most(tasks: &[Task], num: u64) -> bool {
    let h = hyperperiod(tasks);
    let work: u64 = tasks.iter().map(|t| t.wcet * (h / t.period)).sum();
    work <= num * h
}

/// Drops tasks from the end until the utilization is at most one CPU.
fn fit_one_cpu(mut ts: Vec<Task>) -> Vec<Task> {
    while !util_at_most(&ts, 1) {
        ts.pop();
    }
    ts
}

fn horizon(tasks: &[Task]) -> u64 {
    2 * hyperperiod(tasks) + tasks.iter().map(|t| t.deadline).max().unwrap_or(0)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn uni_edf_is_exact_on_a_dedicated_cpu(ts in set_strategy(4)) {
        let ts = fit_one_cpu(ts);
        let sim = simulate(&ts, Sched::Edf, horizon(&ts), |_| 1);
        let missed = sim.missed.iter().any(|&m| m);
        prop_assert_eq!(edf(&ts, &Dedicated { m: 1 }).schedulable(), !missed);
    }

    #[test]
    fn uni_fp_rta_is_exact_on_a_dedicated_cpu(ts in set_strategy(4)) {
        let ts = fit_one_cpu(ts);
        let sim = simulate(&ts, Sched::Fp, horizon(&ts), |_| 1);
        for i in 0..ts.len() {
            match fp_response(&ts, i, &Dedicated { m: 1 }) {
                Ok(r) => {
                    prop_assert!(!sim.missed[i]);
                    prop_assert_eq!(r.from_arrival, sim.max_response[i], "task {}", i);
                }
                Err(_) => prop_assert!(sim.missed[i], "task {} passes in simulation", i),
            }
        }
    }

    #[test]
    fn uni_tests_on_a_server_are_safe(
        ts in set_strategy(3), p in 2u64..=6, q in 1u64..=6, phase in 0u64..6, late in any::<bool>()
    ) {
        let q = 1 + (q - 1) % p;
        let prm = Prm::new(p, q);
        let avail = |s: u64| u64::from(server_slot(p, q, phase, late, s));
        let h = horizon(&ts).max(4 * p);
        let fp_sim = simulate(&ts, Sched::Fp, h, avail);
        for i in 0..ts.len() {
            if let Ok(r) = fp_response(&ts, i, &prm) {
                prop_assert!(!fp_sim.missed[i]);
                prop_assert!(fp_sim.max_response[i] <= r.from_arrival, "task {} sim {} > bound {}", i, fp_sim.max_response[i], r.from_arrival);
            }
        }
        if edf(&ts, &prm).schedulable() {
            let sim = simulate(&ts, Sched::Edf, h, avail);
            prop_assert!(sim.missed.iter().all(|&m| !m));
        }
    }

    #[test]
    fn global_tests_are_safe_on_dedicated_cpus(ts in set_strategy(5)) {
        let m = 2;
        let h = horizon(&ts);
        let edf_sim = simulate(&ts, Sched::Edf, h, |_| m);
        let fp_sim = simulate(&ts, Sched::Fp, h, |_| m);
        if gfb(&ts, m as u32) || bcl(&ts, m as u32).iter().all(|v| v.schedulable) {
            prop_assert!(edf_sim.missed.iter().all(|&x| !x));
        }
        // Per-task verdicts already require every higher-priority task to pass.
        for (name, verdicts) in [("BC RTA", bc_rta(&ts, m as u32)), ("Theorem 1", theorem1(&ts, &Dedicated { m: m as u32 }))] {
            for (i, v) in verdicts.iter().enumerate() {
                if v.schedulable {
                    prop_assert!(!fp_sim.missed[i], "{} task {}", name, i);
                    prop_assert!(fp_sim.max_response[i] <= v.response.unwrap(), "{} task {}", name, i);
                }
            }
        }
    }

    #[test]
    fn global_tests_are_safe_on_servers(
        ts in set_strategy(4), p in 2u64..=6, qa in 1u64..=6, qb in 1u64..=6,
        pa in 0u64..6, pb in 0u64..6, late in any::<bool>()
    ) {
        let (qa, qb) = (1 + (qa - 1) % p, 1 + (qb - 1) % p);
        let set = ServerSet::new(vec![Prm::new(p, qa), Prm::new(p, qb)]);
        let avail = |s: u64| u64::from(server_slot(p, qa, pa, late, s)) + u64::from(server_slot(p, qb, pb, !late, s));
        let h = horizon(&ts).max(4 * p);
        let fp_sim = simulate(&ts, Sched::Fp, h, avail);
        let edf_sim = simulate(&ts, Sched::Edf, h, avail);
        for verdicts in [theorem1(&ts, &set), global_fp(&ts, &set)] {
            for (i, v) in verdicts.iter().enumerate() {
                if v.schedulable {
                    prop_assert!(!fp_sim.missed[i], "task {}", i);
                    if let Some(r) = v.response {
                        prop_assert!(fp_sim.max_response[i] <= r, "task {}", i);
                    }
                }
            }
        }
        if global_edf(&ts, &set).iter().all(|v| v.schedulable) {
            prop_assert!(edf_sim.missed.iter().all(|&x| !x));
        }
        // The same two servers as rtbox's MPR (theta = qa + qb split evenly).
        let mpr = Mpr { period: p, budget: qa + qb, m: 2 };
        let split = rtbox_model::mpr_budgets(qa + qb, 2);
        let avail_mpr = |s: u64| u64::from(server_slot(p, split[0], pa, late, s)) + u64::from(server_slot(p, split[1], pb, late, s));
        let sim = simulate(&ts, Sched::Edf, h, avail_mpr);
        if global_edf(&ts, &mpr).iter().all(|v| v.schedulable) {
            prop_assert!(sim.missed.iter().all(|&x| !x));
        }
        let sim = simulate(&ts, Sched::Fp, h, avail_mpr);
        for (i, v) in global_fp(&ts, &mpr).iter().enumerate() {
            if v.schedulable {
                prop_assert!(!sim.missed[i]);
            }
        }
    }

    #[test]
    fn rtbox_mpr_servers_supply_at_least_the_mpr_bound(p in 1u64..40, theta in 1u64..160, m in 1u32..5, t in 0u64..400) {
        let theta = 1 + (theta - 1) % (u64::from(m) * p);
        let servers = ServerSet::new(Mpr { period: p, budget: theta, m }.servers());
        prop_assert!(mpr_sbf(p, theta, m, t) <= servers.sbf(t));
    }

    #[test]
    fn more_budget_never_breaks_schedulability(ts in set_strategy(4), p in 2u64..=12, q in 1u64..=12, a in 1u64..999, extra in 1u64..200) {
        let q = 1 + (q - 1) % p;
        if q < p {
            let (lo, hi) = (Prm::new(p, q), Prm::new(p, q + 1));
            if edf(&ts, &lo).schedulable() {
                prop_assert!(edf(&ts, &hi).schedulable());
            }
            for i in 0..ts.len() {
                if let Ok(r) = fp_response(&ts, i, &lo) {
                    let r2 = fp_response(&ts, i, &hi);
                    prop_assert!(r2.is_ok_and(|r2| r2.from_arrival <= r.from_arrival));
                }
            }
        }
        let alpha = Bandwidth::from_units(a * 1_000_000_000);
        let more = Bandwidth::from_units((a * 1_000_000_000 + extra * 1_000_000_000).min(BW_ONE - 1));
        let b = |al| Bdm { alpha: al, delta: 1, m: 2 };
        let v1 = theorem1(&ts, &b(alpha));
        let v2 = theorem1(&ts, &b(more));
        for (x, y) in v1.iter().zip(&v2) {
            prop_assert!(!x.schedulable || y.schedulable);
        }
        if q < p {
            let s1 = ServerSet::new(vec![Prm::new(p, q), Prm::new(p + 1, q)]);
            let s2 = ServerSet::new(vec![Prm::new(p, q + 1), Prm::new(p + 1, q)]);
            for (x, y) in theorem1(&ts, &s1).iter().zip(&theorem1(&ts, &s2)) {
                prop_assert!(!x.schedulable || y.schedulable);
            }
            for (x, y) in global_edf(&ts, &s1).iter().zip(&global_edf(&ts, &s2)) {
                prop_assert!(!x.schedulable || y.schedulable);
            }
        }
        let theta = q * 2 - 1;
        let (m1, m2) = (Mpr { period: p, budget: theta, m: 2 }, Mpr { period: p, budget: theta + 1, m: 2 });
        for (x, y) in global_edf(&ts, &m1).iter().zip(&global_edf(&ts, &m2)) {
            prop_assert!(!x.schedulable || y.schedulable);
        }
        for (x, y) in global_fp(&ts, &m1).iter().zip(&global_fp(&ts, &m2)) {
            prop_assert!(!x.schedulable || y.schedulable);
        }
    }

    #[test]
    fn servers_on_one_cpu_under_edf_iff_total_bandwidth_at_most_one(
        servers in prop::collection::vec((0usize..PERIODS.len(), 1u64..=12), 1..=4)
    ) {
        // analysis-facts.md: hard CBS servers under EDF on one CPU are schedulable iff
        // sum Q/P <= 1 (servers as implicit-deadline tasks).
        let ts: Vec<Task> = servers.iter().map(|&(pi, q)| {
            let p = PERIODS[pi];
            Task::new(1 + (q - 1) % p, p)
        }).collect();
        prop_assert_eq!(edf(&ts, &Dedicated { m: 1 }).schedulable(), util_at_most(&ts, 1));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn fast_verdict_agrees_with_full_verdict(
        ts in set_strategy(5), q in 1u64..=10, a in 1u64..999, edf_policy in any::<bool>(), pinned in any::<bool>()
    ) {
        use rtbox_analysis::{box_schedulable_fast, box_verdict, Reservation};
        use rtbox_model::{Placement, Policy};
        let policy = if edf_policy { Policy::Edf } else { Policy::Fifo };
        let placement = if pinned { Placement::Pinned } else { Placement::Global };
        let reservations = [
            Reservation::Bdm(Bdm { alpha: Bandwidth::from_units(a * 1_000_000_000), delta: 2, m: 2 }),
            Reservation::Servers(ServerSet::new(vec![Prm::new(10, q), Prm::new(10, 10)])),
            Reservation::Mpr(Mpr { period: 10, budget: 10 + q, m: 2 }),
        ];
        for r in &reservations {
            prop_assert_eq!(
                box_schedulable_fast(&ts, &[], r, policy, placement),
                box_verdict(&ts, &[], r, policy, placement).schedulable()
            );
        }
    }
}

/// Server pattern with the PRM's worst blackout: budget at the start of even periods and at the
/// end of odd ones (2 (P - Q) without supply across each even/odd boundary).
fn server_slot_alternating(p: u64, q: u64, phase: u64, slot: u64) -> bool {
    let off = slot + p - phase % p;
    let (k, o) = (off / p, off % p);
    if k % 2 == 0 {
        o < q
    } else {
        o >= p - q
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    /// Issue 17: the limited carry-in global EDF test (Shin, Easwaran & Lee 2008) never accepts
    /// a set that misses, on dedicated CPUs and on rtbox's MPR servers under early, late and
    /// alternating supply with random phases.
    #[test]
    fn limited_carry_in_is_safe(
        ts in set_strategy(6), m in 2u32..=3, p in 2u64..=6, theta in 1u64..=18,
        phases in prop::collection::vec(0u64..6, 3), pattern in 0u8..3
    ) {
        use rtbox_analysis::carry_in::limited_carry_in;
        let h = horizon(&ts);
        if limited_carry_in(&ts, &Dedicated { m }).iter().all(|v| v.schedulable) {
            let sim = simulate(&ts, Sched::Edf, h, |_| u64::from(m));
            prop_assert!(sim.missed.iter().all(|&x| !x), "dedicated m = {}", m);
        }
        let theta = 1 + (theta - 1) % (u64::from(m) * p);
        let mpr = Mpr { period: p, budget: theta, m };
        if limited_carry_in(&ts, &mpr).iter().all(|v| v.schedulable) {
            let split = rtbox_model::mpr_budgets(theta, m);
            let avail = |s: u64| -> u64 {
                split.iter().zip(&phases).map(|(&q, &ph)| u64::from(match pattern {
                    0 => server_slot(p, q, ph, false, s),
                    1 => server_slot(p, q, ph, true, s),
                    _ => server_slot_alternating(p, q, ph, s),
                })).sum()
            };
            let sim = simulate(&ts, Sched::Edf, h.max(8 * p), avail);
            prop_assert!(sim.missed.iter().all(|&x| !x), "MPR({}, {}, {})", p, theta, m);
        }
    }
}
