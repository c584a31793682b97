//! Benchmark of the standard scenario (issue 4): events per second, simulated seconds per wall
//! second, and peak memory for two durations (memory must not grow with the duration).
//!
//! Usage: cargo run --release -p rtbox-sim --example bench_sim -- [SECONDS] [MODEL]

use std::time::Instant;

use rtbox_sim::bench::standard_system;
use rtbox_sim::{simulate, ModelKind, SimOptions};

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// CPU time this thread has run, in ns (Linux schedstat), so a busy shared machine does not
/// distort the rate.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(3600);
    let model = args
        .next()
        .and_then(|m| ModelKind::from_name(&m))
        .unwrap_or(ModelKind::Rtbox);
    let system = standard_system(1);
    for (label, duration) in [("short", secs / 10), ("full", secs)] {
        let opts = SimOptions {
            duration: duration.max(1) * 1_000_000_000,
            model,
            ..SimOptions::default()
        };
        let start = Instant::now();
        let cpu0 = cpu_ns();
        let r = simulate(&system, &opts).expect("simulate");
        let wall = start.elapsed().as_secs_f64();
        let cpu = match (cpu0, cpu_ns()) {
            (Some(a), Some(b)) => (b - a) as f64 / 1e9,
            _ => wall,
        };
        let jobs: u64 = r.tasks.iter().map(|t| t.jobs).sum();
        println!(
            "{label:>5}: model {} simulated {} s in {wall:.2} s wall ({cpu:.2} s on CPU): {:.1} simulated s per CPU s, {} events, {:.2} M events per CPU s, {jobs} jobs, {} misses, peak RSS {} KiB",
            model.name(),
            duration,
            duration as f64 / cpu,
            r.events,
            r.events as f64 / cpu / 1e6,
            r.total_misses(),
            peak_rss_kib().map_or("?".into(), |k| k.to_string()),
        );
    }
}
