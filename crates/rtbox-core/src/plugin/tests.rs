//! Plug-in rules on small cases worked out by hand (dedicated CPUs, exact RTA with jitter).

use super::builtin::{builtin, gfp_pull_to, gfp_release_cpu, is_heavy};
use super::*;
use rtbox_model::PluginKind;

const MS: Nanos = 1_000_000;

/// Exact RTA on a dedicated CPU (Tindell's jitter form, one job per busy window: enough for
/// D <= T - J, which these cases keep) and a global test that proves nothing.
struct Rta;

impl FpTest for Rta {
    fn response(&self, _cpu: u32, loads: &[Load], i: usize) -> Option<Nanos> {
        let me = loads[i];
        let mut r = me.wcet;
        loop {
            let hp: Nanos = loads
                .iter()
                .enumerate()
                .filter(|&(j, l)| j != i && l.priority >= me.priority)
                .map(|(_, l)| (r + l.jitter).div_ceil(l.period) * l.wcet)
                .sum();
            let next = me.wcet + hp;
            if next + me.jitter > me.deadline {
                return None;
            }
            if next == r {
                return Some(r + me.jitter);
            }
            r = next;
        }
    }
    fn global(&self, loads: &[Load]) -> Vec<bool> {
        vec![false; loads.len()]
    }
}

fn tasks(specs: &[(Nanos, Nanos)]) -> Vec<PeriodicTask> {
    // DM levels: shorter deadline first, ties by index, as rtbox_model::priority_levels.
    let n = specs.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (specs[i].1, i));
    let mut level = vec![0; n];
    for (rank, &i) in order.iter().enumerate() {
        level[i] = (n - rank) as u32;
    }
    specs
        .iter()
        .enumerate()
        .map(|(i, &(c, t))| PeriodicTask {
            name: format!("t{i}"),
            wcet: c,
            period: t,
            deadline: t,
            priority: level[i],
        })
        .collect()
}

fn group(kind: PluginKind, m: u32, specs: &[(Nanos, Nanos)]) -> PluginGroup {
    PluginGroup::new(builtin(kind), (0..m).collect(), tasks(specs), &Rta)
}

const THREE: [(Nanos, Nanos); 3] = [(5_500_000, 10 * MS); 3];

#[test]
fn fp_ff_puts_the_third_heavy_task_in_the_background() {
    let g = group(PluginKind::FpFf, 2, &THREE);
    assert_eq!((g.cpu(0), g.cpu(1)), (Some(0), Some(1)));
    assert_eq!(g.verdict(0), Verdict::Guaranteed);
    assert_eq!(g.verdict(1), Verdict::Guaranteed);
    assert_eq!(g.verdict(2), Verdict::Background);
    assert!(g.priority(2) < g.priority(0).min(g.priority(1)));
}

#[test]
fn fp_pm_splits_the_third_task_by_rta_budgets() {
    let mut g = group(PluginKind::FpPm, 2, &THREE);
    assert_eq!(g.verdict(2), Verdict::Guaranteed);
    // Highest priority: above both partitioned tasks.
    assert!(g.priority(2) > g.priority(0).max(g.priority(1)));
    assert_eq!(g.cpu(2), Some(0));
    g.take_changes();
    // A job starts on CPU 0 with a budget of 10 - 5.5 = 4.5 ms there (the task below it needs
    // 5.5 ms of every 10), then moves to CPU 1 for the remaining 1 ms.
    g.job_released(0, 2);
    g.observe(0, |t| t == 2);
    assert_eq!(g.next_timer(), Some(4_500_000));
    g.charge(4_500_000);
    g.fire(4_500_000);
    assert_eq!(g.cpu(2), Some(1));
    assert_eq!(g.take_changes(), vec![2]);
    g.observe(4_500_000, |t| t == 2);
    assert_eq!(
        g.next_timer(),
        None,
        "the last share arms no further migration"
    );
    // The next job starts on CPU 0 again.
    g.job_completed(5_500_000, 2, false);
    g.job_released(10 * MS, 2);
    assert_eq!(g.cpu(2), Some(0));
}

#[test]
fn fp_pm_budget_counts_only_execution() {
    let mut g = group(PluginKind::FpPm, 2, &THREE);
    g.job_released(0, 2);
    g.observe(0, |_| false);
    assert_eq!(
        g.next_timer(),
        None,
        "not running: the budget does not run out"
    );
    g.observe(2 * MS, |t| t == 2);
    assert_eq!(g.next_timer(), Some(6_500_000));
}

#[test]
fn fp_pm_gives_up_with_the_lowest_priority() {
    // Three tasks of 9 ms every 10 ms cannot be split over 2 CPUs (total 2.7).
    let g = group(PluginKind::FpPm, 2, &[(9 * MS, 10 * MS); 3]);
    assert_eq!(g.verdict(2), Verdict::Background);
    assert!(g.priority(2) < g.priority(0));
}

#[test]
fn utilization_separation_threshold_is_m_over_3m_minus_2() {
    // m = 2: threshold 1/2; m = 4: 4/10.
    let g = group(
        PluginKind::FpUs,
        2,
        &[(5 * MS, 10 * MS), (4_999_999, 10 * MS)],
    );
    assert!(is_heavy(g.ctx(), 0));
    assert!(!is_heavy(g.ctx(), 1));
    let g4 = group(
        PluginKind::FpUs,
        4,
        &[(4 * MS, 10 * MS), (3_999_999, 10 * MS)],
    );
    assert!(is_heavy(g4.ctx(), 0) && !is_heavy(g4.ctx(), 1));
    // Heavy tasks go above every light one even with a longer deadline.
    let g = group(PluginKind::FpUs, 2, &[(MS, 5 * MS), (60 * MS, 100 * MS)]);
    assert!(g.priority(1) > g.priority(0));
    let g = group(PluginKind::GFp, 2, &[(MS, 5 * MS), (60 * MS, 100 * MS)]);
    assert!(g.priority(1) < g.priority(0));
}

#[test]
fn g_fp_releases_to_an_idle_cpu_then_preempts_the_least_urgent() {
    // Four tasks, DM levels: t0 (5 ms) most urgent ... t3 (40 ms) least.
    let specs = [(MS, 5 * MS), (MS, 10 * MS), (MS, 20 * MS), (MS, 40 * MS)];
    let mut g = group(PluginKind::GFp, 2, &specs);
    // Admission spreads tasks: t0 -> 0, t1 -> 1, t2 -> 0, t3 -> 1.
    assert_eq!(
        (0..4).map(|t| g.cpu(t)).collect::<Vec<_>>(),
        vec![Some(0), Some(1), Some(0), Some(1)]
    );
    g.job_released(0, 3);
    g.job_released(0, 1);
    // t3 stayed on its idle CPU 1; t1's CPU 1 is busy with t3 but CPU 0 is idle.
    assert_eq!(g.cpu(3), Some(1));
    assert_eq!(g.cpu(1), Some(0));
    // t0: no idle CPU; CPU 1 runs t3, the least urgent: t0 moves there.
    g.job_released(0, 0);
    assert_eq!(
        gfp_release_cpu(g.ctx(), 2),
        None,
        "t2 would not preempt anything"
    );
    assert_eq!(g.cpu(0), Some(1));
    // t3 now waits on CPU 1. When t1 completes on CPU 0, t3 is pulled there.
    assert_eq!(gfp_pull_to(g.ctx(), 0), None, "CPU 0 still runs t1");
    g.job_completed(MS, 1, false);
    assert_eq!(g.cpu(3), Some(0));
}

#[test]
fn fp_is_global_and_keeps_dm_order() {
    let mut g = group(PluginKind::Fp, 2, &THREE);
    assert_eq!(g.scope(), Scope::Global);
    assert!((0..3).all(|t| g.cpu(t).is_none()));
    assert!(g.priority(0) > g.priority(1) && g.priority(1) > g.priority(2));
    g.job_released(0, 0);
    assert!((0..3).all(|t| g.cpu(t).is_none()));
}

/// The user plug-in of docs/exsched.md, "Writing a plug-in".
#[derive(Default)]
struct WorstFit {
    /// Utilization placed on each CPU of the group, in parts per million.
    load: Vec<u64>,
}

impl Plugin for WorstFit {
    fn name(&self) -> &str {
        "worst-fit"
    }
    fn task_admitted(&mut self, ctx: &mut GroupCtx, t: usize, _test: &dyn FpTest) -> Verdict {
        self.load.resize(ctx.m(), 0);
        let (wcet, period, dm) = (ctx.task(t).wcet, ctx.task(t).period, ctx.task(t).priority);
        let u = wcet * 1_000_000 / period;
        let k = (0..ctx.m()).min_by_key(|&k| (self.load[k], k)).unwrap();
        self.load[k] += u;
        let cpu = ctx.cpus()[k];
        ctx.migrate(t, cpu).expect("a CPU of the group");
        ctx.set_priority(t, levels::normal(dm, ctx.len()));
        Verdict::Unproven
    }
}

#[test]
fn a_user_plugin_places_by_worst_fit() {
    // DM order: t1 (5 ms), t0 (10 ms), t2 (20 ms). Worst fit: t1 -> 0 (0.4), t0 -> 1 (0.3),
    // t2 -> 1 (0.3 < 0.4).
    let specs = [(3 * MS, 10 * MS), (2 * MS, 5 * MS), (2 * MS, 20 * MS)];
    let mut g = PluginGroup::new(Box::<WorstFit>::default(), vec![0, 1], tasks(&specs), &Rta);
    assert_eq!(g.plugin_name(), "worst-fit");
    assert_eq!((g.cpu(0), g.cpu(1), g.cpu(2)), (Some(1), Some(0), Some(1)));
    assert_eq!(g.verdict(0), Verdict::Unproven);
    assert_eq!(g.take_changes(), vec![0, 1, 2]);
    assert!(g.take_changes().is_empty());
}

#[test]
fn migrate_is_refused_outside_the_group_and_for_global_plugins() {
    let mut g = group(PluginKind::FpFf, 2, &THREE);
    assert_eq!(g.ctx_mut().migrate(0, 5), Err(GroupError::NotAGroupCpu(5)));
    let mut f = group(PluginKind::Fp, 2, &THREE);
    assert_eq!(f.ctx_mut().migrate(0, 1), Err(GroupError::GlobalScope));
}

#[test]
fn fp_pm_migratory_task_is_above_every_task_whatever_the_configured_priorities() {
    // Explicit priorities far above the group's size, the split task the least urgent: its
    // "highest priority" must still be above the two partitioned tasks (raw levels would give
    // it top(3) = 3 + 2 (3 + 1) = 11 against normal(50) = 54).
    let mut ts = tasks(&THREE);
    for (t, p) in ts.iter_mut().zip([50, 10, 3]) {
        t.priority = p;
    }
    let g = PluginGroup::new(builtin(PluginKind::FpPm), vec![0, 1], ts, &Rta);
    assert_eq!(g.verdict(2), Verdict::Guaranteed);
    assert!(
        g.priority(2) > g.priority(0).max(g.priority(1)),
        "{:?}",
        (0..3).map(|t| g.priority(t)).collect::<Vec<_>>()
    );
    // The configured order holds among the others and the plug-in saw ranks 3, 2, 1.
    assert!(g.priority(0) > g.priority(1));
    assert_eq!(
        (0..3).map(|t| g.ctx().task(t).priority).collect::<Vec<_>>(),
        [3, 2, 1]
    );
    // Same decisions as with DM levels 3, 2, 1: the split is the same.
    let dm = group(PluginKind::FpPm, 2, &THREE);
    assert_eq!(
        (0..3).map(|t| g.cpu(t)).collect::<Vec<_>>(),
        (0..3).map(|t| dm.cpu(t)).collect::<Vec<_>>()
    );
    // Equal explicit priorities share a rank; a background task stays below admitted ones.
    let mut ts = tasks(&THREE);
    for (t, p) in ts.iter_mut().zip([90, 90, 20]) {
        t.priority = p;
    }
    let g = PluginGroup::new(builtin(PluginKind::FpFf), vec![0, 1], ts, &Rta);
    assert_eq!(
        (0..3).map(|t| g.ctx().task(t).priority).collect::<Vec<_>>(),
        [2, 2, 1]
    );
    assert_eq!(g.verdict(2), Verdict::Background);
    assert!(g.priority(2) < g.priority(0).min(g.priority(1)));
}
