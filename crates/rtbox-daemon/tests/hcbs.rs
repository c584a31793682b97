//! Issue 19: the HCBS suite's cases as rtbox tests, short CI variants (full durations with
//! figures: experiments/runtime-hcbs.sh, docs/benchmarks-runtime.md). Real hogs, real
//! SCHED_FIFO, real freezing. Needs root; otherwise prints why and skips. Takes the
//! machine-wide real-runtime lock.

use std::sync::{Mutex, MutexGuard};

use rtbox_harness::hcbs::{bandwidth_case, fifo_neighbour_case, PAIRS, SHAPES};
use rtbox_harness::run_case;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial(name: &str) -> Option<(MutexGuard<'static, ()>, rtbox_linux::lock::PidLock)> {
    if !rtbox_linux::is_root() {
        eprintln!("{name}: skipped: needs root (real SCHED_FIFO threads, cgroups, perf)");
        return None;
    }
    let local = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let machine = rtbox_linux::lock::realtime_turn().expect("machine-wide real-runtime lock");
    Some((local, machine))
}

fn state_file(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rtbox-hcbs-{tag}-{}.json", std::process::id()))
}

/// A hard reservation gives at most its bandwidth (overruns are paid back in the next
/// period) and at least that minus what the host took from the vCPUs meanwhile (no guest
/// thread runs on a stolen vCPU).
fn within(what: &str, got: f64, want: f64, tolerance: f64, host_steal: f64) {
    assert!(
        got <= want + tolerance && got >= want - tolerance - host_steal,
        "{what}: {got:.4} CPU, expected {want:.4} +- {tolerance} (host steal {host_steal:.4})"
    );
}

/// Hogs get their reservation within 0.01 CPU (2 s windows) for 1-4 hogs on 1-2 CPUs, one
/// shape per runtime/period pair and both the shortest and the longest period on 4 hogs; the
/// experiment runs every pair with every shape for 10 s.
#[test]
fn hog_bandwidth_matches_the_reservation() {
    let Some(_g) = serial("hog_bandwidth_matches_the_reservation") else {
        return;
    };
    let mut cases = Vec::new();
    for (i, &(q, p)) in PAIRS.iter().enumerate() {
        let (h, c) = SHAPES[i % SHAPES.len()];
        cases.push(bandwidth_case(q, p, h, c, 2_000_000_000));
    }
    let (h, c) = SHAPES[3];
    cases.push(bandwidth_case(PAIRS[2].0, PAIRS[2].1, h, c, 2_000_000_000));
    for (case, expect) in &cases {
        let o = run_case(case, &state_file("bw")).expect("run");
        let got = o.per_box[0].1;
        eprintln!(
            "{}: {got:.4} CPU of {:.4} (host steal {:.4} CPU, loop {:.4} CPU)",
            case.name, expect.per_box[0], o.host_steal, o.loop_cpu
        );
        within(&case.name, got, expect.per_box[0], 0.01, o.host_steal);
    }
}

/// A box sharing its CPU with an unmanaged SCHED_FIFO hog below the members' band gets its
/// share within 2.5 %, and the FIFO hog gets what the box, the loop, the kernel's fair server
/// (50 ms a second while normal threads wait) and the host leave, within 2.5 % of that.
#[test]
fn a_box_beside_an_unmanaged_fifo_hog_gets_its_share() {
    let Some(_g) = serial("a_box_beside_an_unmanaged_fifo_hog_gets_its_share") else {
        return;
    };
    let (case, expect) = fifo_neighbour_case(3_000_000_000);
    let o = run_case(&case, &state_file("fifo")).expect("run");
    let got = o.per_box[0].1;
    let fifo = o.unmanaged[0];
    // What the FIFO hog can get at most: the CPU minus the box; at least that minus the loop
    // (wherever it ran), the fair server's 5 % and the host's steal.
    let rest = 1.0 - expect.per_box[0];
    eprintln!(
        "box {got:.4} of 0.5; FIFO hog {fifo:.4} of at most {rest:.4} (loop {:.4}, host steal {:.4}, background on CPU 1 {:.4})",
        o.loop_cpu,
        o.host_steal,
        o.background_on(1)
    );
    within("box", got, expect.per_box[0], 0.5 * 0.025, o.host_steal);
    let floor = (rest - o.loop_cpu - 0.05 - o.host_steal) * (1.0 - 0.025);
    assert!(
        fifo <= rest + 0.5 * 0.025 && fifo >= floor,
        "FIFO hog {fifo:.4}, expected between {floor:.4} and {rest:.4}"
    );
}
