//! What one question about a quiet exhaustion costs the daemon's loop (issue 14): a fresh
//! copy of the core per question (`Scheduler::quiet_exhaustion`) against the kept copies the
//! runtime asks now (`Probes`), on the cores of three daemon cases. Prints ns per question.
//! usage: cargo run --release -p rtbox-core --example probe_cost [QUESTIONS=200000]

use std::time::Instant;

use rtbox_core::{Accounting, Options, Probes, Scheduler, ServerId, TaskParams};
use rtbox_model::{BoxSpec, Interface, Placement, Platform, ServerSpec, System};

/// A box: its name, placement and servers `(cpu, budget, period)`.
type BoxDef<'a> = (&'a str, Placement, &'a [(u32, u64, u64)]);

/// Boxes with `(n, awake)` members each (the first `awake` of the `n` awake, the others
/// asleep), measured accounting as the daemon.
fn core(boxes: &[BoxDef], members: &[(u32, u32)]) -> Scheduler {
    let specs = boxes
        .iter()
        .map(|&(n, placement, servers)| {
            let srv = servers
                .iter()
                .map(|&(cpu, budget, period)| ServerSpec {
                    cpu,
                    budget,
                    period,
                })
                .collect();
            let mut b = BoxSpec::new(n, Interface::Servers(srv));
            b.placement = placement;
            b
        })
        .collect();
    let sys = System::new(Platform::with_cpus(2), specs, vec![]).expect("system");
    let opts = Options {
        accounting: Accounting::Measured,
        ..Options::default()
    };
    let mut s = Scheduler::new(&sys, opts).expect("admitted");
    for (b, &(n, awake)) in boxes.iter().zip(members) {
        for i in 0..n {
            let t = s
                .add_task(TaskParams {
                    box_name: Some(b.0.into()),
                    ..TaskParams::background(format!("{}-{i}", b.0), 10)
                })
                .expect("task");
            if i < awake {
                s.wake(0, t, None).expect("wake");
            }
        }
    }
    s.advance(0);
    s
}

fn main() {
    let questions: u32 = std::env::args()
        .nth(1)
        .map_or(200_000, |a| a.parse().expect("QUESTIONS: a whole number"));
    let ms = 1_000_000;
    let cases = [
        (
            "2 ms / 10 ms on CPU 0, 1 member",
            core(
                &[("B", Placement::Pinned, &[(0, 2 * ms, 10 * ms)])],
                &[(1, 1)],
            ),
        ),
        (
            "2 ms / 10 ms on CPUs 0-1, 1 busy member, 500 asleep",
            core(
                &[(
                    "B",
                    Placement::Global,
                    &[(0, 2 * ms, 10 * ms), (1, 2 * ms, 10 * ms)],
                )],
                &[(501, 1)],
            ),
        ),
        (
            "seed 002's platforms (global-bdm), 2 busy members each",
            core(
                &[
                    (
                        "Y1",
                        Placement::Global,
                        &[(0, 25_714_000, 35_714_000), (1, 25_714_000, 35_714_000)],
                    ),
                    (
                        "Y2",
                        Placement::Global,
                        &[(0, 2_821_000, 12_821_000), (1, 2_821_000, 12_821_000)],
                    ),
                ],
                &[(2, 2), (2, 2)],
            ),
        ),
    ];
    println!("| core | fresh copy, ns per question | kept copies, ns per question |");
    println!("|---|---|---|");
    for (name, s) in &cases {
        let asked: Vec<ServerId> = (0..2).filter_map(|c| s.running(c)?.server).collect();
        assert!(!asked.is_empty(), "{name}: nothing runs");
        let placed = |_, _| true;
        let t = Instant::now();
        let mut quiet = 0u32;
        for q in 0..questions {
            let srv = asked[q as usize % asked.len()];
            quiet += u32::from(s.quiet_exhaustion(srv, placed).is_some());
        }
        let fresh = t.elapsed().as_nanos() as f64 / f64::from(questions);
        let mut probes = Probes::default();
        let t = Instant::now();
        let mut kept_quiet = 0u32;
        for q in 0..questions {
            let srv = asked[q as usize % asked.len()];
            probes.start_chain();
            kept_quiet += u32::from(probes.quiet_exhaustion(s, srv, placed));
            probes.finish();
        }
        let kept = t.elapsed().as_nanos() as f64 / f64::from(questions);
        assert_eq!(quiet, kept_quiet, "{name}: the two answered otherwise");
        println!("| {name} | {fresh:.0} | {kept:.0} |");
    }
}
