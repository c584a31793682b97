//! Generator throughput: `cargo run --release -p rtbox-workload --example gen_rate` prints
//! task sets generated per second (one core) for each utilization method (UUniFast-Discard
//! gives up after 1000 draws per set).

use std::time::Instant;

use rtbox_workload::taskset::{TaskSetParams, UtilMethod};
use rtbox_workload::Rng;

fn main() {
    let sets = 20_000;
    for (n, u) in [(10usize, 2.0f64), (50, 10.0), (10, 8.0)] {
        for method in [
            UtilMethod::UUniFast,
            UtilMethod::UUniFastDiscard,
            UtilMethod::RandFixedSum,
        ] {
            let params = TaskSetParams {
                tasks: n,
                utilization: u,
                method,
                max_task_util: 1.0,
                period_min: 1_000_000,
                period_max: 100_000_000,
                granularity: 1_000_000,
                max_attempts: 1_000,
                ..TaskSetParams::default()
            };
            let mut rng = Rng::seed(1);
            let start = Instant::now();
            let mut tasks = 0usize;
            let mut failed = 0usize;
            for _ in 0..sets {
                match params.generate(&mut rng) {
                    Ok(s) => tasks += s.len(),
                    Err(_) => failed += 1,
                }
            }
            let secs = start.elapsed().as_secs_f64();
            println!(
                "n={n:>3} U={u:>4}: {:<16} {:>10.0} sets/s ({tasks} tasks, {failed} gave up)",
                method.name(),
                sets as f64 / secs
            );
        }
    }
}
