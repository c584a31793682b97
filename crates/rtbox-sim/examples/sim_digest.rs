//! Prints a digest of full simulation outputs (the JSON report with every job, and the trace)
//! for every example configuration under every model and for the standard benchmark scenario
//! under several seeds. Two builds that print the same lines produced the same schedules, so
//! a performance change can be checked for unchanged semantics by diffing this output. Each run
//! is done with the trace (the core queues its events) and without (the benchmark's path: no
//! events queued, so the core takes its shortcuts for that case).
//!
//! Usage: cargo run --release -p rtbox-sim --example sim_digest -- [EXAMPLES_DIR] [SECONDS]

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use rtbox_model::System;
use rtbox_sim::bench::standard_system;
use rtbox_sim::{simulate, ModelKind, SimOptions};

fn digest(label: &str, system: &System, model: ModelKind, secs: u64, with_trace: bool) {
    let opts = SimOptions {
        duration: secs * 1_000_000_000,
        model,
        record_jobs: true,
        record_trace: with_trace,
        trace_until: 1_000_000_000,
        ..SimOptions::default()
    };
    match simulate(system, &opts) {
        Ok(r) => {
            let json = serde_json::to_string(&r).expect("report serializes");
            let trace = serde_json::to_string(&r.trace).expect("trace serializes");
            let mut h = DefaultHasher::new();
            json.hash(&mut h);
            trace.hash(&mut h);
            println!(
                "{label} {}{}: {} events, {} misses, {} bytes, digest {:016x}",
                model.name(),
                if with_trace { "" } else { " (no trace)" },
                r.events,
                r.total_misses(),
                json.len() + trace.len(),
                h.finish()
            );
        }
        Err(e) => println!("{label} {}: error {e}", model.name()),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| "examples".into());
    let secs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(3);
    let models = [
        ModelKind::Rtbox,
        ModelKind::Deadline,
        ModelKind::RtThrottling,
        ModelKind::Fp,
    ];
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    for f in files {
        let label = f
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        match rtbox_config::load_file(&f) {
            Ok(system) => {
                for m in models {
                    for trace in [true, false] {
                        digest(&label, &system, m, secs, trace);
                    }
                }
            }
            Err(e) => println!("{label}: not loaded ({e})"),
        }
    }
    for seed in 1..=4 {
        let system = standard_system(seed);
        for m in models {
            for trace in [true, false] {
                digest(&format!("standard seed {seed}"), &system, m, secs, trace);
            }
        }
    }
}
