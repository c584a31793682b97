//! Issue 17 at scale:
//! `cargo run --release -p rtbox-experiment --example carry_in -- [SETS] [SEED] [MAX_SIM_MS] [few]`
//! draws SETS random implicit-deadline sets on MPR boxes (m = 2..4, default 1500), counts the
//! sets the BCL-interference test, the limited carry-in test and their union accept, and
//! simulates every accepted set under the adversarial supply of `rtbox_experiment::carry_in`.
//! Exit code 1 on any deadline miss of an accepted set.

use std::time::Instant;

use rtbox_experiment::carry_in::{run, CarryInParams};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sets = args.first().and_then(|s| s.parse().ok()).unwrap_or(1500);
    let seed = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(2026);
    let max_ms: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(4000);
    let params = CarryInParams {
        sets,
        seed,
        max_duration: max_ms * 1_000_000,
        threads: 0,
        few_tasks: args.get(3).is_some_and(|s| s == "few"),
    };
    let start = Instant::now();
    let report = run(&params, &|done, total| {
        if done.is_multiple_of(100) || done == total {
            eprint!("\r{done}/{total} sets");
        }
    });
    eprintln!();
    let pct = |x: usize| 100.0 * x as f64 / report.sets.max(1) as f64;
    println!("sets (implicit deadlines, MPR m = 2..4): {}", report.sets);
    println!(
        "tasks per set:                            {}",
        if params.few_tasks {
            "m+1 .. 3m+2"
        } else {
            "2m .. 5m"
        }
    );
    println!(
        "accepted by BCL interference (before):   {} ({:.1} %)",
        report.bcl,
        pct(report.bcl)
    );
    println!(
        "accepted by limited carry-in (SEL 2008):  {} ({:.1} %)",
        report.carry_in,
        pct(report.carry_in)
    );
    println!(
        "accepted by either (rtbox now):           {} ({:.1} %)",
        report.union,
        pct(report.union)
    );
    println!(
        "union / BCL:                              {:.2}x",
        report.gain()
    );
    println!("simulation runs (adversarial supply):     {}", report.runs);
    println!("jobs simulated:                           {}", report.jobs);
    println!(
        "simulated time:                           {:.1} s",
        report.simulated as f64 / 1e9
    );
    println!(
        "deadline misses of accepted sets:         {}",
        report.misses.len()
    );
    println!(
        "errors:                                   {}",
        report.errors.len()
    );
    println!(
        "wall time:                                {:.1} s",
        start.elapsed().as_secs_f64()
    );
    for m in &report.misses {
        println!("MISS {m}");
    }
    for e in &report.errors {
        println!("ERROR {e}");
    }
    if report.misses.is_empty() && report.errors.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
