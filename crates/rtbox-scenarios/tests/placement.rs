//! Pinned boxes: the simulator runs every task on the vCPU the analysis placed it on, so each
//! analysed bound is a bound for what runs. Before the placement was shared, the analysis
//! partitioned by decreasing utilization while the core placed tasks round robin: `s2` below
//! was analysed on vCPU 1 (bound 4 ms) and simulated on vCPU 0 behind `big` (9 ms).

use rtbox_model::{BoxSpec, CpuSet, Interface, Placement, Platform, Policy, System, TaskSpec};
use rtbox_sim::{simulate, SimOptions};
use rtbox_workload::rng::Rng;
use rtbox_workload::taskset::TaskSetParams;

const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000_000_000;

fn pinned_box(cpus: u32, budget: u64, period: u64, policy: Policy) -> BoxSpec {
    let mut b = BoxSpec::new("p", Interface::PerCpu { budget, period });
    b.cpus = Some(CpuSet::first(cpus));
    b.placement = Placement::Pinned;
    b.policy = policy;
    b
}

/// Per task: (name, analysed CPU, analysed bound: the response bound, else the deadline for
/// EDF vCPUs, whose test gives none).
fn analysed(system: &System) -> Vec<(String, u32, u64)> {
    let report = rtbox_analysis::analyze(system);
    assert!(report.schedulable(), "analysis refuses: {report:?}");
    let b = &report.boxes[0];
    b.task_names
        .iter()
        .zip(&b.verdict.tasks)
        .zip(&b.tasks)
        .map(|((name, o), t)| {
            let cpu = b.vcpu_cpus[o.vcpu.expect("placed")];
            (name.clone(), cpu, o.response.unwrap_or(t.deadline))
        })
        .collect()
}

/// Simulates and checks each task's CPU and worst response against the analysis.
fn simulate_and_compare(system: &System, duration: u64) -> usize {
    let expected = analysed(system);
    let report = simulate(
        system,
        &SimOptions {
            duration,
            ..SimOptions::default()
        },
    )
    .expect("simulation runs");
    for (name, cpu, bound) in &expected {
        let t = report.task(name).expect("task in the report");
        assert_eq!(t.cpu, Some(*cpu), "{name}: simulated on another vCPU");
        assert!(t.jobs > 0, "{name} completed no job");
        assert!(
            t.response.max <= *bound,
            "{name}: simulated response {} ns above the analysed bound {bound} ns",
            t.response.max
        );
        assert_eq!(t.misses, 0, "{name} missed deadlines");
    }
    expected.len()
}

#[test]
fn the_reproducer_runs_where_it_was_analysed() {
    let b = pinned_box(2, 9 * MS, 10 * MS, Policy::Fifo);
    let task = |name: &str, wcet: u64| {
        let mut t = TaskSpec::periodic(name, wcet * MS, 10 * MS);
        t.box_name = Some("p".into());
        t
    };
    let tasks = vec![task("big", 8), task("s1", 1), task("s2", 1)];
    let system = System::new(Platform::with_cpus(2), vec![b], tasks).unwrap();
    let a = analysed(&system);
    let (big, s2) = (&a[0], &a[2]);
    assert_ne!(big.1, s2.1, "the analysis keeps s2 away from big");
    simulate_and_compare(&system, SECOND);
}

#[test]
fn random_pinned_sets_run_where_they_were_analysed() {
    let mut compared = 0;
    for seed in 1..=8u64 {
        let mut rng = Rng::seed(seed);
        let cpus = 2 + (seed % 3) as u32;
        let policy = if seed % 2 == 0 {
            Policy::Edf
        } else {
            Policy::Fifo
        };
        let params = TaskSetParams {
            tasks: 3 * cpus as usize,
            utilization: 0.45 * f64::from(cpus),
            max_task_util: 0.6,
            period_min: 5 * MS,
            period_max: 40 * MS,
            box_name: Some("p".into()),
            ..TaskSetParams::default()
        };
        let tasks = params.generate(&mut rng).expect("task set");
        let b = pinned_box(cpus, 9 * MS, 10 * MS, policy);
        let system = System::new(Platform::with_cpus(cpus), vec![b], tasks).unwrap();
        if !rtbox_analysis::analyze(&system).schedulable() {
            eprintln!("seed {seed}: not schedulable by the analysis, skipped");
            continue;
        }
        compared += simulate_and_compare(&system, 5 * SECOND);
    }
    assert!(compared >= 20, "only {compared} tasks compared");
}
