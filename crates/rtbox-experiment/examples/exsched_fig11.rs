//! Seed 001 Figure 11 in the simulator: success ratio of fp, fp-ff, fp-pm, g-fp and fp-us on
//! random task sets, for 2, 4 and 8 CPUs and the seed's three utilization ranges.
//!
//! Usage: cargo run --release -p rtbox-experiment --example exsched_fig11 -- OUTDIR [SETS] [SIM_MS]
//! Writes OUTDIR/fig11-<panel>.csv and .svg and prints each panel and the plug-ins' order.

use rtbox_experiment::exsched::{run, Fig11Spec, Panel};
use rtbox_model::PluginKind;

fn main() {
    let mut args = std::env::args().skip(1);
    let out = args
        .next()
        .unwrap_or_else(|| "target/experiments/exsched".into());
    let sets: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    let sim_ms: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("exsched_fig11: {out}: {e}");
        std::process::exit(2);
    }
    let loads: Vec<f64> = (3..=10).map(|i| f64::from(i) / 10.0).collect();
    let mut panels = Vec::new();
    for cpus in [2, 4, 8] {
        for (umin, umax) in [(0.1, 1.0), (0.1, 0.5), (0.5, 1.0)] {
            panels.push(Panel {
                cpus,
                umin,
                umax,
                loads: loads.clone(),
            });
        }
    }
    let spec = Fig11Spec {
        panels,
        plugins: PluginKind::ALL.to_vec(),
        sets_per_point: sets,
        duration: sim_ms * 1_000_000,
        seed: 2012,
        threads: 0,
    };
    let start = std::time::Instant::now();
    let results = run(&spec, &|done, total| {
        if done % 500 == 0 || done == total {
            eprintln!("{done}/{total} task sets");
        }
    });
    let secs = start.elapsed().as_secs_f64();
    for r in &results {
        let name = r.name();
        let write = |ext: &str, text: String| {
            let path = format!("{out}/fig11-{name}.{ext}");
            if let Err(e) = std::fs::write(&path, text) {
                eprintln!("exsched_fig11: {path}: {e}");
                std::process::exit(2);
            }
        };
        write("csv", r.to_csv());
        write("svg", r.to_svg());
        println!(
            "\n## {} CPUs, U in [{:.0} %, {:.0} %] ({} sets per point, {} ms simulated each)\n",
            r.cpus,
            r.umin * 100.0,
            r.umax * 100.0,
            r.sets,
            sim_ms
        );
        print!("{}", r.to_csv());
        let mean = r.mean_ratio();
        let mut order: Vec<usize> = (0..mean.len()).collect();
        order.sort_by(|&a, &b| mean[b].total_cmp(&mean[a]));
        let ranked: Vec<String> = order
            .iter()
            .map(|&k| format!("{} {:.3}", r.plugins[k].name(), mean[k]))
            .collect();
        println!("mean ratio, best first: {}", ranked.join(" > "));
    }
    println!(
        "\n{} panels, {} task sets x {} plug-ins in {secs:.1} s",
        results.len(),
        results.len() * 8 * sets,
        spec.plugins.len()
    );
}
