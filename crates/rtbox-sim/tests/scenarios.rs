//! Issue 4 scenarios 1-3: golden hard-CBS trace, seed 002 Tables 1-3, seed 004 busy task.

use rtbox_model::{
    BoxSpec, Interface, Nanos, Placement, Platform, ServerSpec, System, TaskSpec, BW_ONE,
};
use rtbox_sim::{simulate, ModelKind, SimOptions};

const MS: Nanos = 1_000_000;

fn examples() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn golden_system() -> System {
    let server = |n: &str, q, p| {
        BoxSpec::new(
            n,
            Interface::Servers(vec![ServerSpec {
                cpu: 0,
                budget: q,
                period: p,
            }]),
        )
    };
    let mut a = TaskSpec::periodic("A", 5, 13);
    a.box_name = Some("S1".into());
    let mut b = TaskSpec::periodic("B", 7, 19);
    b.box_name = Some("S2".into());
    let mut platform = Platform::with_cpus(1);
    platform.cap = rtbox_model::Bandwidth::from_units(BW_ONE);
    System::new(
        platform,
        vec![server("S1", 3, 6), server("S2", 4, 9)],
        vec![a, b],
    )
    .unwrap()
}

/// Scenario 1: the golden hard-CBS trace of analysis-facts.md, exactly.
#[test]
fn issue4_scenario1_golden_trace() {
    let opts = SimOptions {
        duration: 13,
        record_trace: true,
        record_jobs: true,
        ..SimOptions::default()
    };
    let r = simulate(&golden_system(), &opts).unwrap();
    let trace = r.trace.as_ref().unwrap();
    let segs: Vec<(Nanos, Nanos, &str, &str)> = trace
        .segments
        .iter()
        .map(|s| {
            (
                s.start,
                s.end,
                s.task.as_str(),
                s.server.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        segs,
        vec![
            (0, 3, "A", "S1@0"),
            (3, 7, "B", "S2@0"),
            (7, 9, "A", "S1@0"),
            (9, 12, "B", "S2@0")
        ]
    );
    let thr: Vec<(&str, Nanos, Nanos)> = trace
        .throttles
        .iter()
        .map(|t| (t.server.as_str(), t.start, t.end))
        .collect();
    assert_eq!(thr, vec![("S1@0", 3, 6), ("S2@0", 7, 9)]);
    let jobs = r.jobs.as_ref().unwrap();
    let fin: Vec<(&str, Option<Nanos>)> =
        jobs.iter().map(|j| (j.task.as_str(), j.finish)).collect();
    assert_eq!(fin, vec![("A", Some(9)), ("B", Some(12))]);
    assert_eq!(r.total_misses(), 0);
    assert_eq!(r.servers[0].consumed, 5);
    assert_eq!(r.servers[1].consumed, 7);
}

/// Scenario 2: seed 002 Tables 1-3 on two CPUs for 120 s. With BDM boxes no application job
/// misses; RT throttling at the same budgets, with the background load of Table 3, misses.
#[test]
fn issue4_scenario2_seed002_bdm_vs_rt_throttling() {
    let system = rtbox_config::load_file(examples().join("bdm-validation.toml")).unwrap();
    let apps = ["tau1", "tau2", "tau3", "tau4", "tau5"];
    let mut rows = Vec::new();
    for model in [ModelKind::Rtbox, ModelKind::RtThrottling] {
        let opts = SimOptions {
            duration: 120_000 * MS,
            model,
            ..SimOptions::default()
        };
        let r = simulate(&system, &opts).unwrap();
        let misses: Vec<u64> = apps.iter().map(|a| r.task(a).unwrap().misses).collect();
        println!(
            "{:>14}: misses per task {:?} (seed 002 Table 4 with background: 210 222 5 0 0)",
            model.name(),
            misses
        );
        for a in apps {
            assert!(r.task(a).unwrap().jobs > 100, "{a} ran");
        }
        if model == ModelKind::Rtbox {
            // Every server got at least its PRM supply bound over every busy window.
            for sv in &r.servers {
                for w in &sv.supply {
                    if let Some(worst) = w.worst {
                        assert!(
                            worst >= w.sbf,
                            "{}: window {} got {worst} < sbf {}",
                            sv.name,
                            w.window,
                            w.sbf
                        );
                    }
                }
                assert!(
                    sv.supply.iter().any(|w| w.worst.is_some()),
                    "{} was measured",
                    sv.name
                );
            }
        }
        rows.push(misses);
    }
    assert_eq!(rows[0], vec![0; 5], "BDM boxes: no application misses");
    assert!(
        rows[1].iter().sum::<u64>() > 0,
        "RT throttling misses deadlines"
    );
}

fn vm(placement: Placement) -> System {
    let mut b = BoxSpec::new(
        "vm",
        Interface::PerCpu {
            budget: 10 * MS,
            period: 100 * MS,
        },
    );
    b.placement = placement;
    let mut busy = TaskSpec::periodic("busy", 1_000_000 * MS, 1_000_000 * MS);
    busy.box_name = Some("vm".into());
    System::new(Platform::with_cpus(4), vec![b], vec![busy]).unwrap()
}

/// Scenario 3: seed 004, one busy task in 4 vCPUs of 10 ms / 100 ms: 0.4 CPU global, 0.1 pinned.
#[test]
fn issue4_scenario3_seed004_global_vs_pinned() {
    for (placement, share) in [(Placement::Global, 0.4), (Placement::Pinned, 0.1)] {
        let opts = SimOptions {
            duration: 10_000 * MS,
            ..SimOptions::default()
        };
        let r = simulate(&vm(placement), &opts).unwrap();
        let got = r.task("busy").unwrap().executed as f64 / opts.duration as f64;
        println!("{placement:?}: busy task received {got:.3} CPU");
        assert!((got - share).abs() < 1e-9, "{placement:?}: {got}");
    }
    // Same through the example file.
    let system = rtbox_config::load_file(examples().join("container-4vcpu.toml")).unwrap();
    let r = simulate(
        &system,
        &SimOptions {
            duration: 1_000 * MS,
            ..SimOptions::default()
        },
    )
    .unwrap();
    assert_eq!(r.task("busy").unwrap().executed, 400 * MS);
    let migrations: u64 = r.cpus.iter().map(|c| c.migrations).sum();
    assert!(
        migrations >= 30,
        "the task moves at every throttle: {migrations}"
    );
}
