//! Prints the acceptance figures of issue 5 (items 1-4, 7 loop overhead) measured on this
//! machine: `cargo run --release -p rtbox-harness --example acceptance [SECONDS] [FILTER]`.
//! Needs root; restores everything it touches.

use rtbox_harness::{acceptance_cases, daemon_admits, percentile, run_case};

fn main() {
    if !rtbox_linux::is_root() {
        eprintln!("acceptance: needs root (real SCHED_FIFO threads, cgroups, perf); skipped");
        std::process::exit(0);
    }
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let filter = args.next().unwrap_or_default();
    let state = std::env::temp_dir().join(format!("rtbox-acceptance-{}.json", std::process::id()));
    println!("| case | box | expected CPU | measured CPU | error |");
    println!("|---|---|---|---|---|");
    let mut over = Vec::new();
    let mut lat = Vec::new();
    let mut audit = Vec::new();
    for (case, expect) in acceptance_cases((secs * 1e9) as u64) {
        if !case.name.contains(&filter) {
            continue;
        }
        match run_case(&case, &state) {
            Ok(o) => {
                // Time the host ran something else on this VM's vCPUs: stalls of the loop, the
                // backstop and the members alike; the outliers below coincide with it.
                println!(
                    "| {} | (host steal during the measurement, all vCPUs, /proc/stat) | | {:.4} | |",
                    case.name, o.host_steal
                );
                for ((b, got), want) in o.per_box.iter().zip(&expect.per_box) {
                    println!(
                        "| {} | {b} | {want:.3} | {got:.4} | {:+.4} |",
                        case.name,
                        got - want
                    );
                }
                if !o.unmanaged.is_empty() {
                    let u: Vec<String> = o.unmanaged.iter().map(|x| format!("{x:.3}")).collect();
                    println!(
                        "| {} | unmanaged hogs | rest | {} | |",
                        case.name,
                        u.join(" / ")
                    );
                }
                println!(
                    "| {} | (enforcement loop CPU) | | {:.4} | |",
                    case.name, o.loop_cpu
                );
                if let Err(why) = daemon_admits(&case) {
                    println!(
                        "| {} | (refused by the daemon's admission: {why}) | | | |",
                        case.name
                    );
                }
                if o.steal_ns > 0 {
                    println!(
                        "| {} | (perf time outside the kernel's accounting: steal, switch edges) | | {:.3} ms | |",
                        case.name,
                        o.steal_ns as f64 / 1e6
                    );
                }
                if o.backstop_stops > 0 {
                    println!(
                        "| {} | (members stopped by the backstop, loop late) | | {} | |",
                        case.name, o.backstop_stops
                    );
                    if std::env::var_os("RTBOX_CHARGED").is_some() {
                        println!("backstop stops at (s): {:.3?}", o.backstop_times);
                    }
                }
                if std::env::var_os("RTBOX_CHARGED").is_some() {
                    println!("charged by the core: {:?}", o.charged);
                }
                for ((b, cpu, v), (_, _, d)) in o.overruns.into_iter().zip(o.detected) {
                    over.push((case.name.clone(), b, cpu, v, d));
                }
                lat.push((case.name.clone(), o.wake_late, o.step_ns));
                for a in o.audit {
                    audit.push((case.name.clone(), a));
                }
            }
            Err(e) => println!("| {} | error: {e} | | | |", case.name),
        }
    }
    println!();
    println!("Budget overrun per throttled period (consumption beyond Q), microseconds;");
    println!("'at detection' is the part already consumed when the loop saw the exhaustion:");
    println!("| case | server | periods | p50 | p90 | p99 | max | max at detection |");
    println!("|---|---|---|---|---|---|---|---|");
    let us = |v: &[u64], p: f64| format!("{:.1}", percentile(v, p) as f64 / 1000.0);
    for (c, b, cpu, v, d) in over {
        println!(
            "| {c} | {b}@cpu{cpu} | {} | {} | {} | {} | {} | {} |",
            v.len(),
            us(&v, 50.0),
            us(&v, 90.0),
            us(&v, 99.0),
            us(&v, 100.0),
            us(&d, 100.0)
        );
    }
    println!();
    println!("The same periods by the kernel's accounting (sum_exec_runtime, read while frozen;");
    println!("excludes time stolen from the vCPU), microseconds, and periods charged > 100 us:");
    println!(
        "| case | server | periods | p50 | p99 | max | charged > 100 us: (t s, charged, kernel) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (c, a) in audit {
        let (b, cpu, k) = (&a.box_name, a.cpu, &a.overruns);
        let o: Vec<String> = a
            .outliers
            .iter()
            .map(|(t, a, b)| {
                format!(
                    "({:.3}, {:.1}, {:.1})",
                    *t as f64 / 1e9,
                    *a as f64 / 1e3,
                    *b as f64 / 1e3
                )
            })
            .collect();
        println!(
            "| {c} | {b}@cpu{cpu} | {} | {} | {} | {} | {} |",
            k.len(),
            us(k, 50.0),
            us(k, 99.0),
            us(k, 100.0),
            o.join(" ")
        );
    }
    println!();
    println!("Enforcement loop: wake-up lateness and step duration, microseconds:");
    println!("| case | steps | late p50 | late p99 | late max | step p50 | step p99 | step max |");
    println!("|---|---|---|---|---|---|---|---|");
    for (c, w, s) in lat {
        println!(
            "| {c} | {} | {} | {} | {} | {} | {} | {} |",
            s.len(),
            us(&w, 50.0),
            us(&w, 99.0),
            us(&w, 100.0),
            us(&s, 50.0),
            us(&s, 99.0),
            us(&s, 100.0)
        );
    }
}
