//! Issue 4 scenario 5 at scale:
//! `cargo run --release -p rtbox-experiment --example agreement -- [BOXES] [SEED] [PROFILE]`
//! draws BOXES random boxes (default 3000; PROFILE standard or stress), simulates every one the
//! analysis declares schedulable (synchronous WCET releases and a sporadic variant) and prints
//! the figures and any disagreement. Exit code 1 if analysis and simulation disagree.

use std::time::Instant;

use rtbox_experiment::agreement::{check_agreement, AgreementParams, Profile};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let boxes = args.first().and_then(|s| s.parse().ok()).unwrap_or(3000);
    let seed = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(2026);
    let profile = match args.get(2).map(String::as_str) {
        Some("stress") => Profile::Stress,
        _ => Profile::Standard,
    };
    let params = AgreementParams {
        boxes,
        seed,
        max_duration: 20_000_000_000,
        threads: 0,
        profile,
    };
    let start = Instant::now();
    let report = check_agreement(&params, &|done, total| {
        if done.is_multiple_of(100) || done == total {
            eprint!("\r{done}/{total} boxes");
        }
    });
    eprintln!();
    let wall = start.elapsed().as_secs_f64();
    println!("profile:                      {}", profile.name());
    println!("boxes drawn:                  {}", report.boxes);
    println!("declared schedulable:         {}", report.schedulable);
    println!("jobs simulated (synchronous): {}", report.jobs_synchronous);
    println!("jobs simulated (sporadic):    {}", report.jobs_sporadic);
    println!(
        "simulated time:               {:.1} s",
        report.simulated as f64 / 1e9
    );
    println!("response bounds compared:     {}", report.bounds_checked);
    println!(
        "rejected by the analysis:     {} ({} of them missed deadlines in simulation)",
        report.boxes - report.schedulable,
        report.rejected_and_missed
    );
    println!(
        "disagreements:                {}",
        report.disagreements.len()
    );
    println!("errors:                       {}", report.errors.len());
    println!("wall time:                    {wall:.1} s");
    for d in &report.disagreements {
        println!(
            "DISAGREEMENT box {} ({}): {}\n  case: {}",
            d.index, d.variant, d.detail, d.case
        );
    }
    for e in &report.errors {
        println!("ERROR {e}");
    }
    if report.disagreements.is_empty() && report.errors.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(1)
    }
}
