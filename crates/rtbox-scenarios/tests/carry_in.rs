//! Issue 17: the limited carry-in global EDF test on MPR boxes. Every set the analysis accepts
//! meets its deadlines in simulation under an adversarial supply (the PRM's worst blackout on
//! every vCPU at once), the union accepts more than the BCL-interference test alone, and the
//! strict boundary of the test is needed: the set a "<=" version accepts misses on 3 CPUs.
//! (`experiments/carry-in.sh` runs the 1,500-set version.)

use rtbox_analysis::carry_in::limited_carry_in;
use rtbox_analysis::{analyze_box, Dedicated, Task, TestKind};
use rtbox_experiment::carry_in::{
    adversarial_system, describe, random_case, run, verdicts, CarryInParams,
};
use rtbox_model::{Bandwidth, BoxSpec, Interface, Placement, Platform, Policy, System, TaskSpec};
use rtbox_sim::{simulate, SimOptions};

const MS: u64 = 1_000_000;

#[test]
fn accepted_sets_meet_deadlines_under_the_adversarial_supply() {
    let report = run(
        &CarryInParams {
            sets: 150,
            seed: 17,
            max_duration: 1_000 * MS,
            threads: 0,
            few_tasks: false,
        },
        &|_, _| {},
    );
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.misses.is_empty(), "{:#?}", report.misses);
    assert!(report.runs > 0 && report.jobs > 0);
    assert!(report.union >= report.bcl);
    assert!(
        report.carry_in > report.bcl,
        "the limited carry-in test adds nothing: {report:?}"
    );
}

/// Four (2 ms, 3 ms) tasks under global EDF on 3 whole CPUs.
fn four_on_three() -> System {
    let mut platform = Platform::with_cpus(3);
    platform.cap = Bandwidth::ONE;
    let mut b = BoxSpec::new(
        "b",
        Interface::PerCpu {
            budget: 3 * MS,
            period: 3 * MS,
        },
    );
    b.policy = Policy::Edf;
    b.placement = Placement::Global;
    let tasks = (0..4)
        .map(|i| {
            let mut t = TaskSpec::periodic(format!("t{i}"), 2 * MS, 3 * MS);
            t.box_name = Some("b".into());
            t
        })
        .collect();
    System::new(platform, vec![b], tasks).expect("valid system")
}

#[test]
fn equality_at_the_boundary_misses_on_three_cpus() {
    let system = four_on_three();
    let report = simulate(
        &system,
        &SimOptions {
            duration: 30 * MS,
            ..SimOptions::default()
        },
    )
    .expect("simulation runs");
    assert!(report.total_misses() > 0, "the boundary set must miss");
    // The discrete test refuses it, by one unit at A = 0.
    let ts = vec![Task::new(2 * MS, 3 * MS); 4];
    let v = limited_carry_in(&ts, &Dedicated { m: 3 });
    assert!(v.iter().all(|x| !x.schedulable));
    let c = v[0].check.expect("failing check");
    assert_eq!(c.demand, c.supply + 1);
    assert!(!analyze_box(&system, "b").unwrap().schedulable());
}

#[test]
fn analyze_reports_the_carry_in_test_when_bcl_refuses() {
    // The first random case that only the limited carry-in test accepts, as a whole system:
    // `rtbox analyze` names the test, and the simulation agrees.
    let case = (0..500)
        .map(|i| random_case(17, i, false))
        .find(|c| verdicts(c) == (false, true))
        .expect("a case only the carry-in test accepts");
    let system = adversarial_system(&case, 0, false).expect("valid system");
    let r = analyze_box(&system, "b").unwrap();
    assert!(r.schedulable(), "{}", describe(&case));
    assert_eq!(r.verdict.test, TestKind::GlobalEdfCarryIn);
    let sim = simulate(
        &system,
        &SimOptions {
            duration: 2_000 * MS,
            ..SimOptions::default()
        },
    )
    .expect("simulation runs");
    for t in &case.tasks {
        assert_eq!(sim.task(&t.name).unwrap().misses, 0, "{}", t.name);
    }
}
