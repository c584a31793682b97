//! Whole configurations: root admission plus, per box, the test matching its local policy and
//! placement.
//!
//! | interface            | placement | fifo (fixed priority)        | edf                     |
//! |----------------------|-----------|------------------------------|-------------------------|
//! | bdm                  | global    | seed 002 Theorem 1 on Y_k    | global EDF on Y_m       |
//! | mpr                  | global    | global FP RTA on MPR sbf     | global EDF on MPR sbf   |
//! | servers / per_cpu    | global    | Theorem 1 on the servers' Y_k| global EDF on sum of sbf|
//! | any, or one server   | pinned    | partition + FP RTA per vCPU  | partition + EDF per vCPU|
//!
//! `fair` boxes and `shared` boxes have no guaranteed supply or no real-time order: their tasks
//! are reported as not guaranteed.

use std::fmt;

use rtbox_model::{admit, Admission, Interface, Nanos, PinPlan, Placement, Policy, Role, System};

use crate::carry_in::limited_carry_in;
use crate::chain::{chain_verdict, ChainReport};
use crate::global::{global_edf, global_fp, theorem1, theorem1_schedulable, Check, GlobalVerdict};
use crate::partition::{partition_any, LocalPolicy};
use crate::supply::{Bdm, Mpr, MultiSupply, Prm, ServerSet, Supply};
use crate::task::{from_specs, Task};

/// The supply a box's tasks receive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    /// A BDM virtual platform (alpha, Delta) on m vCPUs.
    Bdm(Bdm),
    /// A multiprocessor periodic resource.
    Mpr(Mpr),
    /// Explicit hard CBS servers, one per vCPU (per_cpu, servers, or a box's remainder).
    Servers(ServerSet),
}

impl Reservation {
    /// The per-vCPU servers that implement the reservation (for partitioned analysis).
    pub fn vcpus(&self) -> Vec<Prm> {
        match self {
            Reservation::Bdm(b) => match b.server() {
                Some((q, p)) => vec![Prm::new(p, q); b.m as usize],
                None => Vec::new(),
            },
            Reservation::Mpr(m) => m.servers(),
            Reservation::Servers(s) => s.servers().to_vec(),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Reservation::Bdm(b) => MultiSupply::describe(b),
            Reservation::Mpr(m) => m.describe(),
            Reservation::Servers(s) => Supply::describe(s),
        }
    }
}

/// The test applied to a box.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestKind {
    /// Seed 002 Theorem 1 (G-FP) on the BDM interface's Y_k.
    Theorem1Bdm,
    /// Seed 002 Theorem 1 (G-FP) on the multi-supply of explicit servers.
    Theorem1Servers,
    /// Global FP response-time analysis on a supply with bounded parallelism.
    GlobalFp,
    /// Global EDF (BCL interference) on a supply with bounded parallelism.
    GlobalEdf,
    /// Global EDF with at most m - 1 carry-in jobs over an extended window (Shin, Easwaran &
    /// Lee 2008), used when the BCL form refuses.
    GlobalEdfCarryIn,
    /// One server holding one chain: the whole instance within ceil(W / Q) periods of a fresh
    /// server activation (`chain.rs`).
    ChainServerActivation,
    /// Partitioned: per-vCPU FP response-time analysis.
    PartitionedFp,
    /// Partitioned: per-vCPU EDF demand test.
    PartitionedEdf,
    /// No test applies (fair policy or shared box).
    NoGuarantee,
}

impl TestKind {
    pub fn describe(self) -> &'static str {
        match self {
            TestKind::Theorem1Bdm => "G-FP, seed 002 Theorem 1 on BDM Y_k",
            TestKind::Theorem1Servers => "G-FP, seed 002 Theorem 1 on the servers' Y_k",
            TestKind::GlobalFp => "G-FP response-time analysis on the supply",
            TestKind::GlobalEdf => "global EDF (BCL interference) on the supply",
            TestKind::GlobalEdfCarryIn => {
                "global EDF (at most m-1 carry-in jobs, extended window) on the supply"
            }
            TestKind::ChainServerActivation => {
                "one chain on one server: the instance within ceil(W/Q) server periods"
            }
            TestKind::PartitionedFp => "partitioned FP, response-time analysis per vCPU",
            TestKind::PartitionedEdf => "partitioned EDF, demand bound per vCPU",
            TestKind::NoGuarantee => "no real-time guarantee",
        }
    }
}

/// One task's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOutcome {
    pub schedulable: bool,
    /// Response-time bound from arrival, where the test gives one.
    pub response: Option<Nanos>,
    /// The inequality checked with its numbers (global tests).
    pub check: Option<Check>,
    /// The vCPU index the task was assigned to (partitioned boxes).
    pub vcpu: Option<usize>,
    /// A response-time lower bound found above the deadline (failed FP analyses).
    pub exceeds: Option<Nanos>,
}

impl From<GlobalVerdict> for TaskOutcome {
    fn from(v: GlobalVerdict) -> Self {
        TaskOutcome {
            schedulable: v.schedulable,
            response: v.response,
            check: v.check,
            vcpu: None,
            exceeds: None,
        }
    }
}

/// The verdict for one task set on one reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoxVerdict {
    pub test: TestKind,
    pub tasks: Vec<TaskOutcome>,
    /// Name of the partitioning heuristic used (partitioned boxes).
    pub heuristic: Option<&'static str>,
}

impl BoxVerdict {
    pub fn schedulable(&self) -> bool {
        self.test != TestKind::NoGuarantee && self.tasks.iter().all(|t| t.schedulable)
    }
}

/// The test for a task set with a local policy and placement on a reservation.
///
/// `pinned[i] = Some(v)` pins task i to vCPU v (partitioned boxes only; may be shorter than
/// `tasks`). FP uses `Task::prio` (higher is more urgent).
pub fn box_verdict(
    tasks: &[Task],
    pinned: &[Option<usize>],
    reservation: &Reservation,
    policy: Policy,
    placement: Placement,
) -> BoxVerdict {
    let local = match policy {
        Policy::Fifo => LocalPolicy::Fp,
        Policy::Edf => LocalPolicy::Edf,
        Policy::Fair => {
            return BoxVerdict {
                test: TestKind::NoGuarantee,
                tasks: vec![no_guarantee(); tasks.len()],
                heuristic: None,
            }
        }
    };
    let vcpus = reservation.vcpus();
    if placement == Placement::Pinned || vcpus.len() == 1 {
        let pins: Vec<Option<usize>> = if vcpus.len() == 1 {
            vec![Some(0); tasks.len()]
        } else {
            (0..tasks.len())
                .map(|i| pinned.get(i).copied().flatten())
                .collect()
        };
        let p = partition_any(tasks, &pins, &vcpus, local);
        let test = match local {
            LocalPolicy::Fp => TestKind::PartitionedFp,
            LocalPolicy::Edf => TestKind::PartitionedEdf,
        };
        let outcomes = (0..tasks.len())
            .map(|i| TaskOutcome {
                schedulable: p.schedulable[i],
                response: p.response[i],
                check: p.edf_failure[i],
                vcpu: p.vcpu[i],
                exceeds: p.exceeds[i],
            })
            .collect();
        return BoxVerdict {
            test,
            tasks: outcomes,
            heuristic: Some(p.heuristic.name()),
        };
    }
    let (test, verdicts) = match (reservation, local) {
        (Reservation::Bdm(b), LocalPolicy::Fp) => (TestKind::Theorem1Bdm, theorem1(tasks, b)),
        (Reservation::Bdm(b), LocalPolicy::Edf) => global_edf_union(tasks, b),
        (Reservation::Mpr(m), LocalPolicy::Fp) => (TestKind::GlobalFp, global_fp(tasks, m)),
        (Reservation::Mpr(m), LocalPolicy::Edf) => global_edf_union(tasks, m),
        (Reservation::Servers(s), LocalPolicy::Fp) => {
            (TestKind::Theorem1Servers, theorem1(tasks, s))
        }
        (Reservation::Servers(s), LocalPolicy::Edf) => global_edf_union(tasks, s),
    };
    BoxVerdict {
        test,
        tasks: verdicts.into_iter().map(TaskOutcome::from).collect(),
        heuristic: None,
    }
}

/// Global EDF on a supply: the BCL-interference test, and when it refuses the limited
/// carry-in test; the set is accepted when either accepts it (both are sufficient).
fn global_edf_union(tasks: &[Task], supply: &dyn Supply) -> (TestKind, Vec<GlobalVerdict>) {
    let bcl = global_edf(tasks, supply);
    if bcl.iter().all(|v| v.schedulable) {
        return (TestKind::GlobalEdf, bcl);
    }
    let carry_in = limited_carry_in(tasks, supply);
    if carry_in.iter().all(|v| v.schedulable) {
        return (TestKind::GlobalEdfCarryIn, carry_in);
    }
    (TestKind::GlobalEdf, bcl)
}

/// Yes/no form of [`box_verdict`] without response bounds: the same tests, faster (G-FP on
/// a multi-supply skips the response-bound search). Used by synthesis and sweeps.
pub fn box_schedulable_fast(
    tasks: &[Task],
    pinned: &[Option<usize>],
    reservation: &Reservation,
    policy: Policy,
    placement: Placement,
) -> bool {
    let multi = reservation.vcpus().len() > 1 && placement == Placement::Global;
    match (policy, reservation) {
        (Policy::Fifo, Reservation::Bdm(b)) if multi => theorem1_fast(tasks, b),
        (Policy::Fifo, Reservation::Servers(s)) if multi => theorem1_fast(tasks, s),
        _ => box_verdict(tasks, pinned, reservation, policy, placement).schedulable(),
    }
}

fn theorem1_fast(tasks: &[Task], platform: &dyn MultiSupply) -> bool {
    let prepared: Option<Vec<Task>> = crate::global::prepare(tasks).into_iter().collect();
    prepared.is_some_and(|ts| theorem1_schedulable(&ts, platform))
}

fn no_guarantee() -> TaskOutcome {
    TaskOutcome {
        schedulable: false,
        response: None,
        check: None,
        vcpu: None,
        exceeds: None,
    }
}

/// Why a box could not be analysed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnalysisError {
    UnknownBox(String),
    /// The box has no reserved supply (a shared box).
    NoReservation(String),
}

impl fmt::Display for AnalysisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnalysisError::UnknownBox(b) => write!(f, "box \"{b}\" does not exist"),
            AnalysisError::NoReservation(b) => {
                write!(
                    f,
                    "box \"{b}\" is shared: it has no reserved servers to analyse"
                )
            }
        }
    }
}

impl std::error::Error for AnalysisError {}

/// Per-box report: supply, test, and one line per task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoxReport {
    pub name: String,
    pub reservation: Option<Reservation>,
    /// CPU number of each vCPU of the reservation.
    pub vcpu_cpus: Vec<u32>,
    pub verdict: BoxVerdict,
    /// Task names, parallel to `verdict.tasks`.
    pub task_names: Vec<String>,
    /// Analysis tasks, parallel to `verdict.tasks` (`prio` is the internal level).
    pub tasks: Vec<Task>,
    /// The priorities as configured, parallel to `tasks`.
    pub priorities: Vec<Option<u32>>,
    /// End-to-end bounds of the box's chains (`after`), one per path (`chain.rs`).
    pub chains: Vec<ChainReport>,
}

impl BoxReport {
    pub fn schedulable(&self) -> bool {
        self.verdict.schedulable() || self.tasks.is_empty()
    }
}

/// Root admission plus every box's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemReport {
    pub admission: Admission,
    pub boxes: Vec<BoxReport>,
    /// Tasks outside every box (not analysed: no reservation protects them).
    pub background: Vec<String>,
}

impl SystemReport {
    /// Admitted, and every task in every box schedulable.
    pub fn schedulable(&self) -> bool {
        self.admission.admitted() && self.boxes.iter().all(BoxReport::schedulable)
    }
}

/// The reservation a box's own tasks receive: its interface, or, when children took part of
/// its servers, the flattened remainder servers.
pub fn box_reservation(
    system: &System,
    admission: &Admission,
    name: &str,
) -> Result<(Reservation, Vec<u32>), AnalysisError> {
    let rb = system
        .get(name)
        .ok_or_else(|| AnalysisError::UnknownBox(name.to_string()))?;
    let cpus: Vec<u32> = rb.servers.iter().map(|s| s.cpu).collect();
    let flat: Vec<_> = admission
        .flat_servers()
        .filter(|f| f.box_name == name)
        .collect();
    // Children carve their servers out of this box's: its own tasks get what is left.
    if system.children(name).next().is_some() || flat.iter().any(|f| f.role == Role::Remainder) {
        let servers: Vec<Prm> = flat
            .iter()
            .map(|f| Prm::new(f.period, f.budget.min(f.period)))
            .collect();
        let cpus = flat.iter().map(|f| f.cpu).collect();
        return Ok((Reservation::Servers(ServerSet::new(servers)), cpus));
    }
    let res = match &rb.spec.interface {
        Interface::Shared { .. } => return Err(AnalysisError::NoReservation(name.to_string())),
        Interface::Bdm { alpha, delta } => Reservation::Bdm(Bdm {
            alpha: *alpha,
            delta: *delta,
            m: rb.servers.len() as u32,
        }),
        Interface::Mpr { theta, pi, m } => Reservation::Mpr(Mpr {
            period: *pi,
            budget: *theta,
            m: *m,
        }),
        Interface::Servers(_) | Interface::PerCpu { .. } => {
            Reservation::Servers(ServerSet::from_servers(&rb.servers))
        }
    };
    Ok((res, cpus))
}

/// Analyses one box of a validated system.
pub fn analyze_box(system: &System, name: &str) -> Result<BoxReport, AnalysisError> {
    analyze_box_with(system, &admit(system), name)
}

fn analyze_box_with(
    system: &System,
    admission: &Admission,
    name: &str,
) -> Result<BoxReport, AnalysisError> {
    let rb = system
        .get(name)
        .ok_or_else(|| AnalysisError::UnknownBox(name.to_string()))?;
    let specs: Vec<_> = system.tasks_of(name).collect();
    let tasks = from_specs(specs.iter().copied());
    let task_names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let priorities: Vec<Option<u32>> = specs.iter().map(|s| s.priority).collect();
    let (reservation, vcpu_cpus) = match box_reservation(system, admission, name) {
        Ok(r) => r,
        Err(AnalysisError::NoReservation(_)) => {
            return Ok(BoxReport {
                name: rb.name().to_string(),
                reservation: None,
                vcpu_cpus: Vec::new(),
                verdict: BoxVerdict {
                    test: TestKind::NoGuarantee,
                    tasks: vec![no_guarantee(); tasks.len()],
                    heuristic: None,
                },
                task_names,
                tasks,
                priorities,
                chains: Vec::new(),
            })
        }
        Err(e) => return Err(e),
    };
    let pinned: Vec<Option<usize>> = specs
        .iter()
        .map(|s| s.cpu.and_then(|c| vcpu_cpus.iter().position(|&x| x == c)))
        .collect();
    // Chains inside the box: predecessor indices among its tasks.
    let preds: Vec<Option<usize>> = specs
        .iter()
        .map(|s| {
            s.after
                .as_deref()
                .and_then(|a| specs.iter().position(|o| o.name == a))
        })
        .collect();
    // A single task in a single server is the one-stage chain of `chain.rs`.
    // (A fair box has no real-time guarantee at all.)
    let chained = preds.iter().any(Option::is_some) || tasks.len() == 1;
    let (verdict, tasks, chains) = if chained && rb.spec.policy != Policy::Fair {
        chain_verdict(
            &tasks,
            &preds,
            &pinned,
            &reservation,
            rb.spec.policy,
            rb.spec.placement,
        )
    } else {
        let v = box_verdict(
            &tasks,
            &pinned,
            &reservation,
            rb.spec.policy,
            rb.spec.placement,
        );
        (v, tasks, Vec::new())
    };
    Ok(BoxReport {
        name: rb.name().to_string(),
        reservation: Some(reservation),
        vcpu_cpus,
        verdict,
        task_names,
        tasks,
        priorities,
        chains,
    })
}

/// The placement of every pinned box's tasks, as the partitioning of [`analyze_box`] chose it
/// (the CPU of each task's vCPU). The scheduling core follows it
/// (`rtbox_core::Scheduler::with_plan`), so the simulator runs each task on the vCPU whose
/// bound the analysis reports. Tasks no vCPU accepted, and boxes with no partitioned test
/// (fair, shared), are left out: the core's fallback places them.
pub fn pin_plan(system: &System) -> PinPlan {
    let admission = admit(system);
    let mut plan = PinPlan::default();
    for b in system.boxes() {
        if b.spec.placement != Placement::Pinned || system.tasks_of(b.name()).next().is_none() {
            continue;
        }
        let Ok(r) = analyze_box_with(system, &admission, b.name()) else {
            continue;
        };
        for (name, o) in r.task_names.iter().zip(&r.verdict.tasks) {
            if let Some(&cpu) = o.vcpu.and_then(|v| r.vcpu_cpus.get(v)) {
                plan.insert(b.name(), name, cpu);
            }
        }
    }
    plan
}

/// Whether one box's task set is schedulable under its interface, policy and placement.
pub fn box_schedulable(system: &System, name: &str) -> Result<bool, AnalysisError> {
    analyze_box(system, name).map(|r| r.schedulable())
}

/// Admission plus the verdict of every box that has tasks or a reservation.
pub fn analyze(system: &System) -> SystemReport {
    let admission = admit(system);
    let boxes = system
        .boxes()
        .iter()
        .filter_map(|b| analyze_box_with(system, &admission, b.name()).ok())
        .collect();
    let background = system
        .tasks
        .iter()
        .filter(|t| t.box_name.is_none())
        .map(|t| t.name.clone())
        .collect();
    SystemReport {
        admission,
        boxes,
        background,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtbox_model::{BoxSpec, Platform, TaskSpec};

    const MS: u64 = 1_000_000;

    fn parent_child(child_budget: u64) -> System {
        let mut parent = BoxSpec::new(
            "p",
            Interface::PerCpu {
                budget: 5 * MS,
                period: 10 * MS,
            },
        );
        parent.cpus = Some(rtbox_model::CpuSet::first(1));
        let mut child = BoxSpec::new(
            "p/c",
            Interface::PerCpu {
                budget: child_budget,
                period: 10 * MS,
            },
        );
        child.cpus = Some(rtbox_model::CpuSet::first(1));
        let mut t = TaskSpec::periodic("own", 2 * MS, 40 * MS);
        t.box_name = Some("p".into());
        System::new(Platform::with_cpus(1), vec![parent, child], vec![t]).unwrap()
    }

    #[test]
    fn the_pin_plan_is_the_partition_the_analysis_reports() {
        let mut b = BoxSpec::new(
            "p",
            Interface::PerCpu {
                budget: 9 * MS,
                period: 10 * MS,
            },
        );
        b.placement = Placement::Pinned;
        let tasks: Vec<TaskSpec> = [("big", 8), ("s1", 1), ("s2", 1)]
            .iter()
            .map(|&(n, c)| {
                let mut t = TaskSpec::periodic(n, c * MS, 10 * MS);
                t.box_name = Some("p".into());
                t
            })
            .collect();
        let s = System::new(Platform::with_cpus(2), vec![b], tasks).unwrap();
        let plan = pin_plan(&s);
        let r = analyze_box(&s, "p").unwrap();
        assert_eq!(plan.len(), 3);
        for (name, o) in r.task_names.iter().zip(&r.verdict.tasks) {
            let cpu = r.vcpu_cpus[o.vcpu.unwrap()];
            assert_eq!(plan.cpu("p", name), Some(cpu), "{name}");
        }
        // Decreasing utilization: big alone on one vCPU, the small ones away from it.
        assert_ne!(plan.cpu("p", "big"), plan.cpu("p", "s2"));
    }

    #[test]
    fn a_parent_task_runs_in_the_remainder_after_children() {
        // Issue 3: the parent's own tasks get only what its children leave.
        let s = parent_child(2 * MS);
        let r = analyze_box(&s, "p").unwrap();
        assert!(
            matches!(&r.reservation, Some(Reservation::Servers(set)) if set.servers()[0].budget == 3 * MS)
        );
        assert!(r.schedulable());
        let s = parent_child(5 * MS);
        let r = analyze_box(&s, "p").unwrap();
        assert!(!r.schedulable(), "children took everything: {r:?}");
    }

    #[test]
    fn fair_and_shared_boxes_get_no_guarantee() {
        let mut fair = BoxSpec::new(
            "f",
            Interface::PerCpu {
                budget: 5 * MS,
                period: 10 * MS,
            },
        );
        fair.policy = Policy::Fair;
        let shared = BoxSpec::new("s", Interface::Shared { weight: 1 });
        let mut a = TaskSpec::periodic("a", MS, 10 * MS);
        a.box_name = Some("f".into());
        let mut b = TaskSpec::periodic("b", MS, 10 * MS);
        b.box_name = Some("s".into());
        let sys = System::new(Platform::with_cpus(1), vec![fair, shared], vec![a, b]).unwrap();
        let rep = analyze(&sys);
        assert_eq!(rep.boxes.len(), 2);
        for b in &rep.boxes {
            assert_eq!(b.verdict.test, TestKind::NoGuarantee);
            assert!(!b.schedulable());
        }
        assert!(!rep.schedulable());
        assert_eq!(
            analyze_box(&sys, "x"),
            Err(AnalysisError::UnknownBox("x".into()))
        );
    }
}
