//! Prints the figures of the HCBS-style cases of issue 19 (hog bandwidth for every
//! runtime/period pair and shape, a box beside an unmanaged FIFO hog) measured on this machine:
//! `cargo run --release -p rtbox-harness --example hcbs [SECONDS]`. Needs root; restores
//! everything it touches. Run it through experiments/runtime-hcbs.sh (takes the machine-wide
//! real-runtime lock).

use rtbox_harness::hcbs::{bandwidth_cases, fifo_neighbour_case};
use rtbox_harness::run_case;

fn main() {
    if !rtbox_linux::is_root() {
        eprintln!("hcbs: needs root (real SCHED_FIFO threads, cgroups, perf); skipped");
        std::process::exit(0);
    }
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10.0);
    let ns = (secs * 1e9) as u64;
    let state = std::env::temp_dir().join(format!("rtbox-hcbs-{}.json", std::process::id()));
    println!("| case | expected CPU | measured CPU | error | host steal | loop CPU |");
    println!("|---|---|---|---|---|---|");
    let mut worst: f64 = 0.0;
    for (case, expect) in bandwidth_cases(ns) {
        match run_case(&case, &state) {
            Ok(o) => {
                let got = o.per_box[0].1;
                let err = got - expect.per_box[0];
                worst = worst.max(err.abs());
                println!(
                    "| {} | {:.3} | {got:.4} | {err:+.4} | {:.4} | {:.4} |",
                    case.name, expect.per_box[0], o.host_steal, o.loop_cpu
                );
            }
            Err(e) => println!("| {} | error: {} | | | | |", case.name, e.0),
        }
    }
    println!("\nworst |error| over the bandwidth cases: {worst:.4} CPU\n");
    let (case, expect) = fifo_neighbour_case(ns);
    match run_case(&case, &state) {
        Ok(o) => println!(
            "{}: box {:.4} of {:.3}; FIFO 10 hog {:.4} (host steal {:.4}, loop {:.4})",
            case.name, o.per_box[0].1, expect.per_box[0], o.unmanaged[0], o.host_steal, o.loop_cpu
        ),
        Err(e) => println!("{}: error: {}", case.name, e.0),
    }
}
