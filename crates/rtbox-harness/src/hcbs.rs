//! The cases of the in-kernel HCBS test suite, reimplemented for rtbox from their description
//! (issue 19): hogs in a reservation get its bandwidth (1-4 hogs on 1-2 CPUs, several
//! runtime/period pairs), and a box sharing its CPU with an unmanaged SCHED_FIFO hog gets its
//! share. The deadline-task case runs through the daemon binary
//! (`crates/rtbox-cli/tests/daemon_coexist.rs`), which counts the task at admission.

use rtbox_model::Placement;

use super::{per_cpu_us, Case, Expect, Unmanaged};

/// (budget us, period us) pairs of the bandwidth cases.
pub const PAIRS: [(u64, u64); 3] = [(10_000, 100_000), (30_000, 100_000), (5_000, 10_000)];

/// (hogs, CPUs) of the bandwidth cases.
pub const SHAPES: [(usize, u32); 4] = [(1, 1), (2, 1), (2, 2), (4, 2)];

/// One bandwidth case: `hogs` hogs in one pinned box of `q_us`/`p_us` on CPUs `0..cpus`;
/// the box gets `cpus x Q/P` (every vCPU has a hog, as hogs >= CPUs).
pub fn bandwidth_case(
    q_us: u64,
    p_us: u64,
    hogs: usize,
    cpus: u32,
    measure_ns: u64,
) -> (Case, Expect) {
    let list = if cpus == 1 {
        "0".to_string()
    } else {
        format!("0-{}", cpus - 1)
    };
    let mut b = per_cpu_us("H", q_us, p_us, &list);
    b.placement = Placement::Pinned;
    (
        Case {
            name: format!("{hogs} hogs, {cpus} CPUs, {}/{} us", q_us, p_us),
            cpus: 2,
            boxes: vec![b],
            hogs: vec![("H".into(), hogs)],
            unmanaged: vec![],
            warmup_ns: 300_000_000,
            measure_ns,
        },
        Expect {
            per_box: vec![f64::from(cpus) * q_us as f64 / p_us as f64],
        },
    )
}

/// Every bandwidth case ([`PAIRS`] x [`SHAPES`]).
pub fn bandwidth_cases(measure_ns: u64) -> Vec<(Case, Expect)> {
    PAIRS
        .iter()
        .flat_map(|&(q, p)| {
            SHAPES
                .iter()
                .map(move |&(h, c)| bandwidth_case(q, p, h, c, measure_ns))
        })
        .collect()
}

/// A box of 50/100 ms on CPU 1 with one hog, beside an unmanaged SCHED_FIFO 10 hog pinned to
/// CPU 1: the box gets 0.5 (it runs above the hog), the FIFO hog what is left.
pub fn fifo_neighbour_case(measure_ns: u64) -> (Case, Expect) {
    (
        Case {
            name: "box 50/100 ms on CPU 1 beside an unmanaged FIFO 10 hog".into(),
            cpus: 2,
            boxes: vec![per_cpu_us("B", 50_000, 100_000, "1")],
            hogs: vec![("B".into(), 1)],
            unmanaged: vec![Unmanaged {
                fifo: Some(10),
                cpu: Some(1),
            }],
            warmup_ns: 300_000_000,
            measure_ns,
        },
        Expect { per_box: vec![0.5] },
    )
}
