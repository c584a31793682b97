//! Issue 4 scenario 5 (CI sample): boxes the analysis declares schedulable show no deadline
//! miss and no response time above the analysis bound in simulation, with synchronous WCET
//! releases and with a random sporadic variant. The full run (>= 1000 boxes) is
//! `experiments/agreement.sh`.

use rtbox_experiment::agreement::{check_agreement, AgreementParams, Profile};

#[test]
fn analysis_agrees_with_simulation_on_random_boxes() {
    let params = AgreementParams {
        boxes: 400,
        seed: 4,
        max_duration: 5_000_000_000,
        threads: 0,
        profile: Profile::Standard,
    };
    let r = check_agreement(&params, &|_, _| {});
    assert!(r.errors.is_empty(), "{:#?}", r.errors);
    for d in &r.disagreements {
        eprintln!(
            "box {} ({}): {}\n  {}",
            d.index, d.variant, d.detail, d.case
        );
    }
    assert!(
        r.disagreements.is_empty(),
        "{} disagreements",
        r.disagreements.len()
    );
    // The sample must exercise the claim: enough schedulable boxes, real job counts, bounds
    // compared, and the control shows the simulator does report misses when they happen.
    assert!(
        r.schedulable >= 100,
        "only {} schedulable boxes",
        r.schedulable
    );
    assert!(
        r.jobs_synchronous > 10_000 && r.jobs_sporadic > 5_000,
        "{r:?}"
    );
    assert!(r.bounds_checked > 100, "{r:?}");
    assert!(r.rejected_and_missed > 0, "{r:?}");
}

#[test]
fn analysis_agrees_with_simulation_on_boxes_near_the_limit() {
    let params = AgreementParams {
        boxes: 60,
        seed: 5,
        max_duration: 1_000_000_000,
        threads: 0,
        profile: Profile::Stress,
    };
    let r = check_agreement(&params, &|_, _| {});
    assert!(r.errors.is_empty(), "{:#?}", r.errors);
    for d in &r.disagreements {
        eprintln!(
            "box {} ({}): {}\n  {}",
            d.index, d.variant, d.detail, d.case
        );
    }
    assert!(
        r.disagreements.is_empty(),
        "{} disagreements",
        r.disagreements.len()
    );
    assert!(r.schedulable >= 3, "{r:?}");
}
