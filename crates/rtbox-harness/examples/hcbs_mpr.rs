//! Prints the figures of the HCBS-style MPR case of issue 19: seeded random task sets, one box
//! per CPU sized by rtbox's MPR synthesis to 0.9 of the CPU, 2 hogs each, under the real
//! runtime: `cargo run --release -p rtbox-harness --example hcbs_mpr [SECONDS] [SEEDS]`.
//! Needs root; restores everything it touches. Run it through experiments/runtime-hcbs.sh
//! (takes the machine-wide real-runtime lock).

use rtbox_harness::hcbs::{mpr_case, mpr_figures, overrun_slack};
use rtbox_harness::run_case;

fn main() {
    if !rtbox_linux::is_root() {
        eprintln!("hcbs_mpr: needs root (real SCHED_FIFO threads, cgroups, perf); skipped");
        std::process::exit(0);
    }
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10.0);
    let seeds: u64 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let ns = (secs * 1e9) as u64;
    let state = std::env::temp_dir().join(format!("rtbox-hcbs-mpr-{}.json", std::process::id()));
    println!(
        "overrun: a period charged more than {} us beyond Theta (one loop step + stop latency)\n",
        overrun_slack() / 1000
    );
    println!("| seed | box | tasks, U | MPR (Theta/Pi, m) | delivered CPU | periods | overrun p99 us | worst us | beyond slack | loop stalls > slack | longest stall us | loop CPU | host steal |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for seed in 1..=seeds {
        let (case, expect, sized) = match mpr_case(seed, ns) {
            Ok(c) => c,
            Err(e) => {
                println!("| {seed} | error: {e} |||||||||");
                continue;
            }
        };
        let o = match run_case(&case, &state) {
            Ok(o) => o,
            Err(e) => {
                println!("| {seed} | error: {} |||||||||", e.0);
                continue;
            }
        };
        let f = mpr_figures(&o);
        for (i, b) in sized.iter().enumerate() {
            let got = o
                .per_box
                .iter()
                .find(|x| x.0 == b.name)
                .map_or(0.0, |x| x.1);
            let s = f.servers.iter().find(|s| s.0 == b.name);
            let (n, p99, worst, beyond) = s.map_or((0, 0, 0, 0), |s| (s.2, s.3, s.4, s.5));
            println!(
                "| {seed} | {} (CPU {}) | {}, {:.3} | {:.3}/{:.0} ms, {} | {got:.4} of {:.4} | {n} | {:.1} | {:.1} | {beyond} | {} | {:.1} | {:.4} | {:.4} |",
                b.name,
                b.cpu,
                b.tasks,
                b.utilization,
                b.theta as f64 / 1e6,
                b.pi as f64 / 1e6,
                b.m,
                expect.per_box[i],
                p99 as f64 / 1e3,
                worst as f64 / 1e3,
                f.late_wakes,
                f.worst_unseen as f64 / 1e3,
                o.loop_cpu,
                o.host_steal
            );
        }
    }
}
