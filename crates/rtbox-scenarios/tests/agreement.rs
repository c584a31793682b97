//! Analysis and simulation agree on the seed configurations (issues 3 and 4): every task the
//! analysis declares schedulable meets all its deadlines in simulation, and no simulated
//! response time exceeds the analysed bound; every server supplies at least its supply bound.

use rtbox_model::{Arrival, System};
use rtbox_scenarios::load_example;
use rtbox_sim::{simulate, SimOptions};

const SECOND: u64 = 1_000_000_000;

/// Analysed response-time bounds of every boxed task, by name.
fn analysed_bounds(system: &System) -> Vec<(String, u64)> {
    let report = rtbox_analysis::analyze(system);
    assert!(report.schedulable(), "analysis refuses the configuration");
    let mut out = Vec::new();
    for b in &report.boxes {
        for (name, outcome) in b.task_names.iter().zip(&b.verdict.tasks) {
            assert!(outcome.schedulable, "{name} not schedulable");
            let bound = outcome
                .response
                .unwrap_or_else(|| panic!("{name}: no bound"));
            out.push((name.clone(), bound));
        }
    }
    out
}

fn check_against_simulation(system: &System, seed: u64, bounds: &[(String, u64)]) {
    let options = SimOptions {
        duration: 120 * SECOND,
        seed,
        ..SimOptions::default()
    };
    let report = simulate(system, &options).expect("simulation runs");
    for (name, bound) in bounds {
        let t = report.task(name).expect("task in report");
        assert!(t.jobs > 0, "{name} completed no job");
        assert_eq!(
            t.misses, 0,
            "{name} missed deadlines in simulation (seed {seed})"
        );
        assert!(
            t.response.max <= *bound,
            "{name}: simulated response {} ns above the analysed bound {bound} ns (seed {seed})",
            t.response.max
        );
    }
    for s in &report.servers {
        for w in &s.supply {
            if let Some(worst) = w.worst {
                assert!(
                    worst >= w.sbf,
                    "server {}: supply {worst} ns over {} ns is below its bound {} ns",
                    s.name,
                    w.window,
                    w.sbf
                );
            }
        }
    }
}

#[test]
fn seed_002_platforms_bounds_cover_simulated_responses() {
    let system = load_example("bdm-validation.toml");
    let bounds = analysed_bounds(&system);
    assert_eq!(
        bounds.len(),
        5,
        "the five application tasks of seed 002 Table 2"
    );
    check_against_simulation(&system, 1, &bounds);
}

#[test]
fn seed_002_platforms_sporadic_arrivals_stay_within_bounds() {
    let system = load_example("bdm-validation.toml");
    let bounds = analysed_bounds(&system);
    let mut tasks = system.tasks.clone();
    for t in &mut tasks {
        t.arrival = Arrival::Sporadic;
    }
    let sporadic = System::new(system.platform.clone(), system.specs(), tasks).expect("valid");
    for seed in 1..=3 {
        check_against_simulation(&sporadic, seed, &bounds);
    }
}
