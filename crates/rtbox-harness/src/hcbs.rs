//! The cases of the in-kernel HCBS test suite, reimplemented for rtbox from their description
//! (issue 19): hogs in a reservation get its bandwidth (1-4 hogs on 1-2 CPUs, several
//! runtime/period pairs), and a box sharing its CPU with an unmanaged SCHED_FIFO hog gets its
//! share; MPR-sized random task sets at 0.9 of the platform overrun no period beyond the
//! runtime's enforcement slack. The deadline-task case runs through the daemon binary
//! (`crates/rtbox-cli/tests/daemon_coexist.rs`), which counts the task at admission.

use rtbox_analysis::synth::{synthesize_box, Request};
use rtbox_model::{BoxSpec, CpuSet, Interface, Nanos, Placement, TaskSpec};
use rtbox_workload::rng::Rng;
use rtbox_workload::taskset::{Priorities, TaskSetParams, UtilMethod};

use super::fidelity::config_text;
use super::{daemon_admits, per_cpu_us, percentile, Case, Expect, Outcome, Unmanaged};

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

/// The MPR period every set's box is synthesized for (`rtbox analyze --synthesize mpr`'s Pi).
/// 10 ms, the tasks' shortest period: 0.9 of a CPU plus the loop's admitted cost at that
/// period (2 steps of 100 us per period and a poll every 4 ms: 0.045) is 0.945, under the
/// daemon's cap of 0.95; at 5 ms the loop's 0.065 would push 0.9 over the cap.
pub const MPR_PI: Nanos = 10_000_000;
/// The share of each CPU the sized boxes should take (the HCBS suite's 0.9 of the platform).
pub const MPR_TARGET: f64 = 0.9;

/// The runtime's documented enforcement slack: a member runs unseen for up to one loop step
/// and until the stop takes effect (`min_enforceable_budget`, docs/runtime.md). A period
/// whose overrun is above it is an overrun of the reservation.
pub fn overrun_slack() -> Nanos {
    rtbox_model::min_enforceable_budget(&rtbox_model::LoopCost::DEFAULT)
}

/// Set `index` of stream `seed` at total utilization `u`: 3-5 periodic tasks, periods
/// 10-100 ms, deadline-monotonic, in a FIFO box "A".
fn mpr_tasks(seed: u64, index: u64, u: f64) -> Result<Vec<TaskSpec>, String> {
    let mut rng = Rng::stream(seed, index);
    let n = rng.range_inclusive(3, 5) as usize;
    TaskSetParams {
        tasks: n,
        utilization: u,
        method: UtilMethod::RandFixedSum,
        max_task_util: 0.6,
        priorities: Priorities::DeadlineMonotonic,
        box_name: Some("A".into()),
        ..TaskSetParams::default()
    }
    .generate(&mut rng)
    .map_err(|e| e.to_string())
}

/// The least MPR interface (period [`MPR_PI`]) rtbox's synthesis finds for `tasks` in a box
/// on CPU `cpu` alone (so m = 1: the periodic resource model).
fn mpr_size(tasks: &[TaskSpec], cpu: u32) -> Result<(Nanos, Nanos, u32), String> {
    // The fidelity sets' configuration, moved from CPUs 0-1 to `cpu`.
    let probe = config_text(tasks, "interface.bdm = { alpha = 0.99, delta = \"5ms\" }")
        .replace("cpus = \"0-1\"", &format!("cpus = \"{cpu}\""));
    let system = rtbox_config::parse_str(&probe).map_err(|e| e.to_string())?;
    let syn =
        synthesize_box(&system, "A", Request::Mpr { pi: MPR_PI }).map_err(|e| e.to_string())?;
    match syn.interface {
        Interface::Mpr { theta, pi, m } => Ok((theta, pi, m)),
        other => Err(format!("synthesis gave a {} interface", other.kind())),
    }
}

/// One box of the MPR case: its set's utilization and the synthesized interface.
#[derive(Debug, Clone)]
pub struct MprBox {
    pub name: String,
    pub cpu: u32,
    pub tasks: usize,
    pub utilization: f64,
    pub theta: Nanos,
    pub pi: Nanos,
    pub m: u32,
}

/// The set of stream `seed` for CPU `cpu`, at the largest utilization (bisection) whose
/// MPR box stays within [`MPR_TARGET`] of the CPU.
fn mpr_box(seed: u64, cpu: u32) -> Result<MprBox, String> {
    let size = |u: f64| -> Result<MprBox, String> {
        let tasks = mpr_tasks(seed, u64::from(cpu), u)?;
        let (theta, pi, m) = mpr_size(&tasks, cpu)?;
        Ok(MprBox {
            name: format!("M{cpu}"),
            cpu,
            tasks: tasks.len(),
            utilization: tasks.iter().map(|t| t.wcet as f64 / t.period as f64).sum(),
            theta,
            pi,
            m,
        })
    };
    let (mut lo, mut hi) = (0.05, MPR_TARGET);
    let mut best = None;
    for _ in 0..14 {
        let mid = 0.5 * (lo + hi);
        match size(mid) {
            Ok(b) if (b.theta as f64 / b.pi as f64) <= MPR_TARGET => {
                best = Some(b);
                lo = mid;
            }
            _ => hi = mid,
        }
    }
    best.ok_or_else(|| format!("seed {seed}, CPU {cpu}: no set fits {MPR_TARGET} of the CPU"))
}

/// MPR-sized task sets at 0.9 of the platform: per CPU of the 2, one seeded random set in its
/// own box on that CPU, sized by rtbox's MPR synthesis (Pi [`MPR_PI`]), at the largest
/// utilization whose Theta/Pi stays within [`MPR_TARGET`]; so the boxes total about 0.9 of
/// the platform, which the daemon's admission with the loop counted still takes (checked).
/// Each box runs 2 hogs (always runnable: the worst case for overruns), so each should get
/// Theta/Pi.
pub fn mpr_case(seed: u64, measure_ns: u64) -> Result<(Case, Expect, Vec<MprBox>), String> {
    let sized = (0..2)
        .map(|cpu| mpr_box(seed, cpu))
        .collect::<Result<Vec<_>, _>>()?;
    let total: f64 = sized.iter().map(|b| b.theta as f64 / b.pi as f64).sum();
    let boxes = sized
        .iter()
        .map(|b| {
            let mut spec = BoxSpec::new(
                &b.name,
                Interface::Mpr {
                    theta: b.theta,
                    pi: b.pi,
                    m: b.m,
                },
            );
            spec.cpus = Some(CpuSet::parse(&b.cpu.to_string()).expect("cpu list"));
            spec
        })
        .collect();
    let case = Case {
        name: format!("MPR seed {seed}: {total:.3} of 2 CPUs"),
        cpus: 2,
        hogs: sized.iter().map(|b| (b.name.clone(), 2)).collect(),
        boxes,
        unmanaged: vec![],
        warmup_ns: 300_000_000,
        measure_ns,
    };
    daemon_admits(&case).map_err(|e| format!("seed {seed}: refused: {e}"))?;
    let expect = Expect {
        per_box: sized.iter().map(|b| b.theta as f64 / b.pi as f64).collect(),
    };
    Ok((case, expect, sized))
}

/// Per-server overrun figures of an MPR run, and how many periods went past the slack.
#[derive(Debug, Clone)]
pub struct MprFigures {
    /// (box, cpu, periods, p99 ns, worst ns, periods above [`overrun_slack`]).
    pub servers: Vec<(String, u32, usize, u64, u64, usize)>,
    /// Periods above the slack, all servers.
    pub beyond: usize,
    /// Loop wake-ups later than the slack and steps longer than it (host stalls: the loop, at
    /// SCHED_FIFO above every member, could not run), each of which may let every server
    /// overrun once.
    pub late_wakes: usize,
    /// The latest loop wake-up plus the longest step, ns: an overrun beyond the slack longer
    /// than this was not the host's doing.
    pub worst_unseen: u64,
}

/// The overrun figures of `o` (charged by the loop, per finished throttled period).
pub fn mpr_figures(o: &Outcome) -> MprFigures {
    let slack = overrun_slack();
    let servers: Vec<_> = o
        .overruns
        .iter()
        .map(|(b, cpu, v)| {
            (
                b.clone(),
                *cpu,
                v.len(),
                percentile(v, 99.0),
                percentile(v, 100.0),
                v.iter().filter(|&&x| x > slack).count(),
            )
        })
        .collect();
    MprFigures {
        beyond: servers.iter().map(|s| s.5).sum(),
        late_wakes: o.wake_late.iter().filter(|&&l| l > slack).count()
            + o.step_ns.iter().filter(|&&l| l > slack).count(),
        worst_unseen: percentile(&o.wake_late, 100.0) + percentile(&o.step_ns, 100.0),
        servers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sized boxes total close to (and not above) 0.9 of the 2 CPUs, the daemon admits
    /// them, and each box's bandwidth covers its set's utilization.
    #[test]
    fn mpr_sets_are_sized_to_0_9_of_the_platform_and_admitted() {
        for seed in [1, 2] {
            let (case, expect, sized) = mpr_case(seed, 1).expect("sized");
            let total: f64 = expect.per_box.iter().sum();
            assert!(
                total <= 1.8 + 1e-9 && total > 1.7,
                "seed {seed}: total {total}"
            );
            assert!(daemon_admits(&case).is_ok());
            for (b, want) in sized.iter().zip(&expect.per_box) {
                assert!(
                    *want >= b.utilization,
                    "{}: {want} < {}",
                    b.name,
                    b.utilization
                );
                assert!(b.theta >= overrun_slack() * u64::from(b.m));
            }
        }
    }
}
