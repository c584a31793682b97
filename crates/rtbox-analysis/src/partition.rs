//! Partitioned boxes (pinned placement): each task stays on one vCPU (one hard CBS server).
//! Tasks are assigned by first-, worst- or best-fit in decreasing utilization, and a vCPU
//! accepts a task only if the exact one-CPU test (EDF demand or FP response times against the
//! server's PRM supply) still passes with it.

use rtbox_model::Nanos;

use crate::global::Check;
use crate::supply::Prm;
use crate::task::Task;
use crate::uni::{edf, fp_response, EdfVerdict, FpFailure};

/// Local scheduling on each vCPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalPolicy {
    Edf,
    Fp,
}

/// Bin-packing heuristic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heuristic {
    /// The first vCPU (in CPU order) that accepts the task.
    FirstFit,
    /// The vCPU with the most spare bandwidth that accepts it.
    WorstFit,
    /// The vCPU with the least spare bandwidth that accepts it.
    BestFit,
}

impl Heuristic {
    pub const ALL: [Heuristic; 3] = [Heuristic::FirstFit, Heuristic::BestFit, Heuristic::WorstFit];

    pub fn name(self) -> &'static str {
        match self {
            Heuristic::FirstFit => "first-fit",
            Heuristic::WorstFit => "worst-fit",
            Heuristic::BestFit => "best-fit",
        }
    }
}

/// The result of partitioning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub heuristic: Heuristic,
    /// vCPU index per task (`None`: no vCPU accepted it).
    pub vcpu: Vec<Option<usize>>,
    /// Per task: schedulable on its vCPU.
    pub schedulable: Vec<bool>,
    /// Per task: FP response bound from arrival on its vCPU.
    pub response: Vec<Option<Nanos>>,
    /// Per failing task: the FP response bound found above its deadline, if one was found.
    pub exceeds: Vec<Option<Nanos>>,
    /// Per task on a failing EDF vCPU: the window where demand exceeds supply.
    pub edf_failure: Vec<Option<Check>>,
}

impl Partition {
    pub fn all_schedulable(&self) -> bool {
        self.schedulable.iter().all(|&s| s)
    }
}

/// Whether the tasks `members` pass the exact one-CPU test on `server`.
pub fn fits(tasks: &[Task], members: &[usize], server: &Prm, policy: LocalPolicy) -> bool {
    let set: Vec<Task> = members.iter().map(|&i| tasks[i]).collect();
    match policy {
        LocalPolicy::Edf => edf(&set, server).schedulable(),
        LocalPolicy::Fp => (0..set.len()).all(|i| fp_response(&set, i, server).is_ok()),
    }
}

const SCALE: i128 = 1_000_000_000_000_000_000;

fn spare(server: &Prm, load: i128) -> i128 {
    i128::from(server.budget) * SCALE / i128::from(server.period) - load
}

fn util(t: &Task) -> i128 {
    i128::from(t.wcet) * SCALE / i128::from(t.period)
}

/// Assigns `tasks` to `vcpus`. `pinned[i] = Some(v)` forces task i onto vCPU v (checked, not
/// moved). Returns the assignment with per-task verdicts.
pub fn partition(
    tasks: &[Task],
    pinned: &[Option<usize>],
    vcpus: &[Prm],
    policy: LocalPolicy,
    heuristic: Heuristic,
) -> Partition {
    let n = tasks.len();
    let mut vcpu: Vec<Option<usize>> = vec![None; n];
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); vcpus.len()];
    let mut load: Vec<i128> = vec![0; vcpus.len()];
    for i in 0..n {
        if let Some(v) = pinned.get(i).copied().flatten() {
            if v < vcpus.len() {
                vcpu[i] = Some(v);
                members[v].push(i);
                load[v] += util(&tasks[i]);
            }
        }
    }
    let mut order: Vec<usize> = (0..n).filter(|&i| vcpu[i].is_none()).collect();
    // Decreasing utilization: C_i T_j > C_j T_i, ties by position.
    order.sort_by(|&a, &b| {
        let (x, y) = (&tasks[a], &tasks[b]);
        (u128::from(y.wcet) * u128::from(x.period))
            .cmp(&(u128::from(x.wcet) * u128::from(y.period)))
            .then(a.cmp(&b))
    });
    for i in order {
        let mut candidates: Vec<usize> = (0..vcpus.len()).collect();
        match heuristic {
            Heuristic::FirstFit => {}
            Heuristic::WorstFit => {
                candidates.sort_by_key(|&v| (std::cmp::Reverse(spare(&vcpus[v], load[v])), v))
            }
            Heuristic::BestFit => candidates.sort_by_key(|&v| (spare(&vcpus[v], load[v]), v)),
        }
        for v in candidates {
            members[v].push(i);
            if fits(tasks, &members[v], &vcpus[v], policy) {
                vcpu[i] = Some(v);
                load[v] += util(&tasks[i]);
                break;
            }
            members[v].pop();
        }
    }
    let mut schedulable = vec![false; n];
    let mut response = vec![None; n];
    let mut exceeds = vec![None; n];
    let mut edf_failure = vec![None; n];
    for (v, list) in members.iter().enumerate() {
        let set: Vec<Task> = list.iter().map(|&i| tasks[i]).collect();
        match policy {
            LocalPolicy::Edf => {
                let verdict = edf(&set, &vcpus[v]);
                let failure = match verdict {
                    EdfVerdict::DemandExceedsSupply { t, demand, supply } => Some(Check {
                        window: t,
                        demand,
                        supply,
                        k: None,
                    }),
                    _ => None,
                };
                for &i in list {
                    schedulable[i] = verdict.schedulable();
                    edf_failure[i] = failure;
                }
            }
            LocalPolicy::Fp => {
                for (pos, &i) in list.iter().enumerate() {
                    match fp_response(&set, pos, &vcpus[v]) {
                        Ok(r) => {
                            schedulable[i] = true;
                            response[i] = Some(r.from_arrival);
                        }
                        Err(FpFailure::DeadlineMiss { bound }) => exceeds[i] = Some(bound),
                        Err(FpFailure::Unbounded) => {}
                    }
                }
            }
        }
    }
    Partition {
        heuristic,
        vcpu,
        schedulable,
        response,
        exceeds,
        edf_failure,
    }
}

/// Tries first-fit, best-fit, then worst-fit; returns the first fully schedulable partition,
/// or the first-fit attempt if none is.
pub fn partition_any(
    tasks: &[Task],
    pinned: &[Option<usize>],
    vcpus: &[Prm],
    policy: LocalPolicy,
) -> Partition {
    let mut first = None;
    for h in Heuristic::ALL {
        let p = partition(tasks, pinned, vcpus, policy, h);
        if p.all_schedulable() {
            return p;
        }
        first.get_or_insert(p);
    }
    first.expect("three heuristics tried")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_fills_in_order_and_reports_the_assignment() {
        let ts = vec![Task::new(4, 10), Task::new(4, 10), Task::new(4, 10)];
        let vcpus = vec![Prm::new(10, 9), Prm::new(10, 9)];
        let p = partition(
            &ts,
            &[None; 3],
            &vcpus,
            LocalPolicy::Edf,
            Heuristic::FirstFit,
        );
        assert!(p.all_schedulable());
        let on0 = p.vcpu.iter().filter(|v| **v == Some(0)).count();
        assert_eq!(on0, 2);
    }

    #[test]
    fn worst_fit_spreads() {
        let ts = vec![Task::new(2, 10), Task::new(2, 10)];
        let vcpus = vec![Prm::new(10, 9), Prm::new(10, 9)];
        let p = partition(
            &ts,
            &[None; 2],
            &vcpus,
            LocalPolicy::Fp,
            Heuristic::WorstFit,
        );
        assert_ne!(p.vcpu[0], p.vcpu[1]);
        assert!(p.response.iter().all(|r| r.is_some()));
    }

    #[test]
    fn an_unplaceable_task_is_reported() {
        let ts = vec![Task::new(6, 10), Task::new(6, 10), Task::new(6, 10)];
        let vcpus = vec![Prm::new(10, 10), Prm::new(10, 10)];
        let p = partition_any(&ts, &[None; 3], &vcpus, LocalPolicy::Edf);
        assert!(!p.all_schedulable());
        assert_eq!(p.vcpu.iter().filter(|v| v.is_none()).count(), 1);
    }
}
