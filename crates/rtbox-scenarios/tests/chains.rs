//! Issue 17: end-to-end analysis of chains (`after`) agrees with simulation. Seed 004's JACK
//! pipeline: the analysis accepts exactly the group budgets the simulation shows working; random
//! chains in one server beside an interfering box, and on two vCPUs (holistic): every chain the
//! analysis accepts meets its end-to-end deadline in simulation, below the analysed bound.

use rtbox_analysis::analyze_box;
use rtbox_analysis::chain::ChainMethod;
use rtbox_model::{Arrival, BoxSpec, CpuSet, Interface, Platform, Policy, System, TaskSpec};
use rtbox_scenarios::load_example;
use rtbox_sim::jack::{group_misses, sum_c, PERIOD};
use rtbox_sim::{simulate, SimOptions};
use rtbox_workload::Rng;

const US: u64 = 1_000;
const SECOND: u64 = 1_000_000_000;

fn with_budget(base: &System, name: &str, budget: u64, period: u64) -> System {
    let mut specs = base.specs();
    for b in specs.iter_mut().filter(|b| b.name == name) {
        b.interface = Interface::PerCpu { budget, period };
    }
    System::new(base.platform.clone(), specs, base.tasks.clone()).unwrap()
}

#[test]
fn jack_pipeline_analysis_and_simulation_agree_on_every_budget() {
    let base = load_example("jack-pipeline.toml");
    let report = rtbox_analysis::analyze(&base);
    assert!(report.schedulable(), "the example as given is schedulable");
    let jack = report.boxes.iter().find(|b| b.name == "jack").unwrap();
    assert_eq!(jack.chains.len(), 1);
    assert_eq!(jack.chains[0].bound, Some(PERIOD));
    for budget in [
        sum_c() - 10 * US,
        sum_c() - 1,
        sum_c(),
        sum_c() + 1,
        sum_c() + 100 * US,
    ] {
        let analysed = analyze_box(&with_budget(&base, "jack", budget, PERIOD), "jack")
            .unwrap()
            .schedulable();
        let misses = group_misses(&base, budget, SECOND).unwrap();
        assert_eq!(analysed, misses == 0, "budget {budget} ns: {misses} misses");
    }
}

/// A random chain of 1-4 stages in box `c` on CPU 0, beside a hog box on the same CPU; with
/// `two_cpus` the chain's box has a server on CPUs 0 and 1 (holistic analysis).
fn random_system(rng: &mut Rng, two_cpus: bool, sporadic: bool) -> Option<System> {
    let mut platform = Platform::with_cpus(2);
    platform.cap = rtbox_model::Bandwidth::ONE;
    let p = rng.range_inclusive(2, 20) * 1_000 * US;
    let q = p * rng.range_inclusive(10, 60) / 100;
    let mut c = BoxSpec::new(
        "c",
        Interface::PerCpu {
            budget: q,
            period: p,
        },
    );
    c.cpus = Some(if two_cpus {
        CpuSet::parse("0-1").ok()?
    } else {
        CpuSet::parse("0").ok()?
    });
    c.policy = Policy::Fifo;
    let hp = p * rng.range_inclusive(1, 4) + rng.range_inclusive(0, p);
    let hog_q = hp * rng.range_inclusive(5, 100 - (100 * q / p)) / 100;
    let mut hog = BoxSpec::new(
        "hog",
        Interface::PerCpu {
            budget: hog_q.max(1),
            period: hp,
        },
    );
    hog.cpus = Some(CpuSet::parse("0").ok()?);
    let stages = rng.range_inclusive(1, 4) as usize;
    let t = p * rng.range_inclusive(1, 3);
    let mut tasks = Vec::new();
    for i in 0..stages {
        let wcet = (q * rng.range_inclusive(5, 80) / 100 / stages as u64).max(1);
        let mut s = TaskSpec::periodic(format!("s{i}"), wcet, t);
        s.box_name = Some("c".into());
        s.deadline = t * rng.range_inclusive(50, 100) / 100;
        s.priority = Some(50 - i as u32);
        if i > 0 {
            s.after = Some(format!("s{}", i - 1));
        } else if sporadic {
            s.arrival = Arrival::Sporadic;
            s.jitter = rng.range_inclusive(0, t / 10);
        }
        tasks.push(s);
    }
    let mut h = TaskSpec::periodic("h", hp, hp);
    h.box_name = Some("hog".into());
    tasks.push(h);
    System::new(platform, vec![c, hog], tasks).ok()
}

#[test]
fn accepted_chains_meet_end_to_end_deadlines_in_simulation() {
    let mut rng = Rng::stream(17, 4);
    let (mut accepted, mut activation, mut holistic) = (0, 0, 0);
    for case in 0..240 {
        let two = case % 2 == 0;
        let Some(system) = random_system(&mut rng, two, (case / 2) % 2 == 1) else {
            continue;
        };
        if !rtbox_model::admit(&system).admitted() {
            continue;
        }
        let r = analyze_box(&system, "c").unwrap();
        if !r.schedulable() {
            continue;
        }
        accepted += 1;
        let chain = r.chains.last().map(|c| (c.bound.unwrap(), c.method));
        match chain.map(|c| c.1) {
            Some(ChainMethod::ServerActivation { .. }) => activation += 1,
            Some(ChainMethod::Holistic { .. }) => holistic += 1,
            None => {}
        }
        let sim = simulate(
            &system,
            &SimOptions {
                duration: 2 * SECOND,
                seed: case,
                ..SimOptions::default()
            },
        )
        .unwrap();
        for (i, name) in r.task_names.iter().enumerate() {
            let t = sim.task(name).unwrap();
            assert_eq!(
                t.misses, 0,
                "case {case}: {name} missed; {:?}",
                system.tasks
            );
            let bound = r.verdict.tasks[i].response.unwrap();
            assert!(
                t.response.max <= bound,
                "case {case}: {name} response {} above bound {bound}",
                t.response.max
            );
        }
    }
    assert!(
        activation > 10 && holistic > 3,
        "accepted {accepted}: {activation} / {holistic}"
    );
}
