//! Seed 001 acceptance in the simulator: three tasks of 5.5 ms every 10 ms on 2 CPUs meet every
//! deadline under fp-pm and miss under fp-ff (the third task fits no CPU); every plug-in runs
//! through the same core.

use rtbox_model::{PluginKind, System};
use rtbox_sim::{simulate, SimOptions};

const THREE: &str = include_str!("../../../examples/exsched-three.toml");

fn with_plugin(kind: PluginKind) -> System {
    let text = THREE.replace(
        "plugin = \"fp-pm\"",
        &format!("plugin = \"{}\"", kind.name()),
    );
    rtbox_config::parse_str(&text).expect("example parses")
}

fn run(kind: PluginKind) -> rtbox_sim::SimReport {
    let opts = SimOptions {
        // 100 periods plus 5 ms, so the last job (done at its deadline, 1 s) completes in the run.
        duration: 1_005_000_000,
        record_jobs: true,
        ..SimOptions::default()
    };
    simulate(&with_plugin(kind), &opts).expect("simulates")
}

#[test]
fn fp_pm_meets_every_deadline_of_three_heavy_tasks() {
    let r = run(PluginKind::FpPm);
    assert_eq!(r.total_misses(), 0, "{:?}", r.tasks);
    for t in &r.tasks {
        assert_eq!(t.jobs, 100, "task {}", t.name);
        assert_eq!(t.plugin_verdict, Some("guaranteed"));
    }
    // The split task migrates twice per job (CPU 0 -> 1 at its budget, back at its release).
    let migrations: u64 = r.cpus.iter().map(|c| c.migrations).sum();
    assert!(migrations >= 100, "migrations {migrations}");
    // Its worst response is 4.5 ms on CPU 0 plus 1 ms on CPU 1: 5.5 ms.
    let c = r.task("c").unwrap();
    assert_eq!(c.response.max, 5_500_000);
}

#[test]
fn fp_ff_misses_with_the_third_task_in_the_background() {
    let r = run(PluginKind::FpFf);
    let c = r.task("c").unwrap();
    assert_eq!(c.plugin_verdict, Some("background"));
    assert!(c.misses > 0, "{c:?}");
    assert_eq!(r.task("a").unwrap().misses, 0);
    assert_eq!(r.task("b").unwrap().misses, 0);
}

#[test]
fn global_plugins_miss_the_case_too() {
    // Three equal jobs released together on two CPUs: whichever runs last finishes at 11 ms.
    for kind in [PluginKind::Fp, PluginKind::GFp, PluginKind::FpUs] {
        let r = run(kind);
        assert!(r.total_misses() > 0, "{}: {:?}", kind.name(), r.tasks);
    }
}
