//! Issue 4 `rtbox sweep`: success ratios from analysis and simulation over random task sets.

use rtbox_experiment::sweep::{evaluate_range, run_sweep, Evaluator, SweepError, SweepSpec};
use rtbox_model::{BoxSpec, Interface, Placement, Platform, Policy, System};
use rtbox_sim::ModelKind;
use rtbox_workload::TaskSetParams;

fn spec(placement: Placement, threads: usize) -> SweepSpec {
    let mut b = BoxSpec::new(
        "app",
        Interface::PerCpu {
            budget: 9_000_000,
            period: 10_000_000,
        },
    );
    b.policy = Policy::Fifo;
    b.placement = placement;
    let base = System::new(Platform::with_cpus(2), vec![b], vec![]).unwrap();
    SweepSpec {
        base,
        box_name: "app".into(),
        generator: TaskSetParams {
            tasks: 6,
            period_min: 10_000_000,
            period_max: 100_000_000,
            granularity: 10_000_000,
            ..TaskSetParams::default()
        },
        utilizations: vec![0.2, 0.8, 1.4, 1.8],
        sets_per_point: 20,
        evaluators: vec![
            Evaluator::Analysis,
            Evaluator::Sim(ModelKind::Rtbox),
            Evaluator::Sim(ModelKind::Fp),
        ],
        sim_duration: 0,
        seed: 9,
        threads,
    }
}

#[test]
fn ratios_fall_with_utilization_and_analysis_is_safe() {
    for placement in [Placement::Global, Placement::Pinned] {
        let r = run_sweep(&spec(placement, 0), &|_, _| {}).unwrap();
        assert_eq!(r.evaluators, ["analysis", "sim-rtbox", "sim-fp"]);
        let first = &r.points[0];
        let last = &r.points[3];
        // At 0.2 of 1.8 CPUs everything passes; at 1.8 (the whole reservation) the
        // analysis accepts nothing.
        assert_eq!(first.successes[0], 20, "{placement:?} {r:?}");
        assert_eq!(first.successes[1], 20);
        assert_eq!(last.successes[0], 0, "{placement:?} {r:?}");
        for p in &r.points {
            // Safety: the analysis never accepts more sets than run clean in simulation of
            // the same scheduler.
            assert!(p.successes[0] <= p.successes[1], "{placement:?} {p:?}");
        }
        let ratios: Vec<f64> = r.points.iter().map(|p| p.ratio(0)).collect();
        assert!(ratios.windows(2).all(|w| w[0] >= w[1]), "{ratios:?}");
    }
}

#[test]
fn results_do_not_depend_on_the_thread_count_and_outputs_are_well_formed() {
    let a = run_sweep(&spec(Placement::Global, 1), &|_, _| {}).unwrap();
    let b = run_sweep(&spec(Placement::Global, 3), &|_, _| {}).unwrap();
    assert_eq!(a, b);
    let csv = a.to_csv();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "utilization,sets,analysis,sim-rtbox,sim-fp");
    assert_eq!(lines.len(), 5);
    assert!(lines[1].starts_with("0.2,20,1.0000,1.0000,"), "{csv}");
    let svg = a.to_svg("sweep");
    assert_eq!(svg.matches("<polyline").count(), 3);
}

#[test]
fn bad_settings_are_named() {
    let mut s = spec(Placement::Global, 1);
    s.box_name = "nope".into();
    assert!(
        matches!(run_sweep(&s, &|_, _| {}), Err(SweepError::Setting { field, .. }) if field == "box")
    );
    let mut s = spec(Placement::Global, 1);
    s.sets_per_point = 0;
    assert!(
        matches!(run_sweep(&s, &|_, _| {}), Err(SweepError::Setting { field, .. }) if field == "sets")
    );
    let mut s = spec(Placement::Global, 1);
    s.generator.granularity = 0;
    assert!(
        matches!(run_sweep(&s, &|_, _| {}), Err(SweepError::Setting { field, .. }) if field == "granularity")
    );
}

#[test]
fn chunks_evaluated_apart_tally_to_the_whole_run() {
    let s = spec(Placement::Global, 2);
    let whole = run_sweep(&s, &|_, _| {}).unwrap();
    let total = s.total_sets();
    // Uneven chunks, as remote workers would get them.
    let mut verdicts = Vec::new();
    for (a, b) in [(0, 7), (7, 7), (7, 33), (33, total)] {
        verdicts.extend(evaluate_range(&s, a..b, &|_, _| {}).unwrap());
    }
    assert_eq!(s.tally(&verdicts).unwrap(), whole);
    assert!(s.tally(&verdicts[1..]).is_err());
    assert!(matches!(
        evaluate_range(&s, 0..total + 1, &|_, _| {}),
        Err(SweepError::Setting { field, .. }) if field == "range"
    ));
}
