//! End-to-end bounds of chains (`after`) inside one box.
//!
//! A chained task releases a job when its predecessor's job completes; its deadline counts from
//! the chain head's arrival (the simulator's semantics). Two analyses, the tighter that applies:
//!
//! - **Server activation** (one server holding one chain tree, or a single task): the box is a
//!   single hard CBS (Q, P) on one CPU and all its tasks are one head and its successors. When the head's job
//!   arrives the server is idle with its deadline passed (the previous instance finished within
//!   one head period, see below), so the CBS wake-up rule gives it a fresh budget Q and deadline
//!   t + P (seed 000, 1.1); stages release one another at completion, so the server stays
//!   backlogged until the instance's total work W is done. EDF between the CPU's admitted servers
//!   (total bandwidth <= 1) hands each server job its budget by its deadline, so the instance
//!   ends within ceil(W / Q) P of the release ([`activation_bound`]), plus the head's release
//!   jitter J. If J + ceil(W / Q) P <= T the instance is over, and the server's deadline passed,
//!   before the next head release: the premise holds by induction from the first release.
//!   Seed 004 Eq. 3 is the case W <= Q, P = D. Used when it proves the box schedulable.
//! - **Holistic** (any box, Tindell & Clark 1994): every chained task is analysed as a task of
//!   the head's period whose release jitter is its predecessor's response bound from the head's
//!   arrival, with the box's own test; bounds are recomputed until the jitters stop changing
//!   (they only grow). A test without response bounds (global EDF) bounds a passing task by its
//!   deadline.

use rtbox_model::{Nanos, Placement, Policy};

use crate::supply::Prm;
use crate::system::{box_verdict, BoxVerdict, Reservation, TaskOutcome, TestKind};
use crate::task::Task;

/// How a chain's bound was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainMethod {
    /// One server, one chain: the whole instance in `periods` server periods of a fresh
    /// activation.
    ServerActivation {
        server: Prm,
        work: Nanos,
        periods: u64,
    },
    /// Jitter inheritance, fixed point after `iterations` rounds.
    Holistic { iterations: u32 },
}

/// One path of a chain tree, head first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainReport {
    /// Indices into the box's tasks, head first.
    pub stages: Vec<usize>,
    /// End-to-end bound from the head's arrival to the last stage's completion.
    pub bound: Option<Nanos>,
    /// The last stage's (end-to-end) deadline.
    pub deadline: Nanos,
    pub schedulable: bool,
    pub method: ChainMethod,
}

/// The time a freshly activated hard CBS (Q, P) needs to serve `work` when nothing else runs
/// in it: ceil(work / Q) server periods (each budget arrives by its deadline under EDF between
/// admitted servers). Also the per-stage bound of one SCHED_DEADLINE reservation per stage.
pub fn activation_bound(work: Nanos, budget: Nanos, period: Nanos) -> Option<Nanos> {
    if budget == 0 {
        return None;
    }
    work.div_ceil(budget).checked_mul(period)
}

/// Every root-to-leaf path of the `after` trees among the tasks (`preds[i]` the index of task
/// i's predecessor in the same box). Tasks in no chain are left out.
pub fn chain_paths(preds: &[Option<usize>]) -> Vec<Vec<usize>> {
    let n = preds.len();
    let has_succ: Vec<bool> = (0..n).map(|i| preds.contains(&Some(i))).collect();
    let mut paths = Vec::new();
    for leaf in (0..n).filter(|&i| !has_succ[i] && preds[i].is_some()) {
        let mut path = vec![leaf];
        let mut cur = leaf;
        while let Some(p) = preds[cur] {
            if path.len() > n {
                break; // a loop; the model refuses them
            }
            path.push(p);
            cur = p;
        }
        path.reverse();
        paths.push(path);
    }
    paths
}

fn head_of(preds: &[Option<usize>], mut i: usize) -> usize {
    let mut steps = 0;
    while let Some(p) = preds[i] {
        i = p;
        steps += 1;
        if steps > preds.len() {
            break;
        }
    }
    i
}

/// The server-activation analysis, when it applies (one vCPU, one head, J + ceil(W/Q) P <= T).
fn server_activation(
    tasks: &[Task],
    preds: &[Option<usize>],
    reservation: &Reservation,
) -> Option<(BoxVerdict, Nanos, ChainMethod)> {
    let vcpus = reservation.vcpus();
    let [server] = vcpus.as_slice() else {
        return None;
    };
    let heads: Vec<usize> = (0..tasks.len()).filter(|&i| preds[i].is_none()).collect();
    let [head] = heads.as_slice() else {
        return None;
    };
    let head = &tasks[*head];
    let work: Nanos = tasks.iter().map(|t| t.wcet).sum();
    let bound = head
        .jitter
        .checked_add(activation_bound(work, server.budget, server.period)?)?;
    if bound > head.period {
        return None;
    }
    let outcomes = tasks
        .iter()
        .map(|t| TaskOutcome {
            schedulable: bound <= t.deadline,
            response: Some(bound),
            check: None,
            vcpu: None,
            exceeds: None,
        })
        .collect();
    let verdict = BoxVerdict {
        test: TestKind::ChainServerActivation,
        tasks: outcomes,
        heuristic: None,
    };
    let method = ChainMethod::ServerActivation {
        server: *server,
        work,
        periods: work.div_ceil(server.budget),
    };
    Some((verdict, bound, method))
}

/// The box's verdict with its chains analysed (module doc), and one report per chain path.
/// `tasks` are the box's tasks as configured; `preds[i]` is task i's predecessor in the box.
pub fn chain_verdict(
    tasks: &[Task],
    preds: &[Option<usize>],
    pinned: &[Option<usize>],
    reservation: &Reservation,
    policy: Policy,
    placement: Placement,
) -> (BoxVerdict, Vec<Task>, Vec<ChainReport>) {
    let paths = chain_paths(preds);
    let report = |verdict: &BoxVerdict, method: ChainMethod| -> Vec<ChainReport> {
        paths
            .iter()
            .map(|p| {
                let last = *p.last().expect("a path has a stage");
                ChainReport {
                    stages: p.clone(),
                    bound: verdict.tasks[last].response,
                    deadline: tasks[last].deadline,
                    schedulable: p.iter().all(|&i| verdict.tasks[i].schedulable),
                    method,
                }
            })
            .collect()
    };
    if let Some((verdict, _, method)) = server_activation(tasks, preds, reservation) {
        if verdict.schedulable() {
            let chains = report(&verdict, method);
            return (verdict, tasks.to_vec(), chains);
        }
    }
    // Holistic: chained tasks take the head's period and inherit jitter.
    let mut ts: Vec<Task> = tasks.to_vec();
    for i in 0..ts.len() {
        if preds[i].is_some() {
            ts[i].period = tasks[head_of(preds, i)].period;
        }
    }
    let mut iterations = 0;
    let verdict = loop {
        iterations += 1;
        let mut verdict = box_verdict(&ts, pinned, reservation, policy, placement);
        for (o, t) in verdict.tasks.iter_mut().zip(&ts) {
            if o.schedulable && o.response.is_none() {
                o.response = Some(t.deadline);
            }
        }
        let mut changed = false;
        let mut stuck = false;
        for i in 0..ts.len() {
            let Some(p) = preds[i] else { continue };
            match verdict.tasks[p].response {
                Some(r) => {
                    let j = tasks[i].jitter.saturating_add(r);
                    if j != ts[i].jitter {
                        ts[i].jitter = j;
                        changed = true;
                    }
                }
                None => stuck = true,
            }
        }
        if stuck {
            // A predecessor without a bound: its successors have none either.
            for path in &paths {
                let mut lost = false;
                for &i in path {
                    lost |= verdict.tasks[i].response.is_none();
                    if lost {
                        verdict.tasks[i].schedulable = false;
                        verdict.tasks[i].response = None;
                    }
                }
            }
            break verdict;
        }
        if !changed || iterations >= 64 {
            if changed {
                for o in &mut verdict.tasks {
                    o.schedulable = false;
                    o.response = None;
                }
            }
            break verdict;
        }
    };
    let chains = report(&verdict, ChainMethod::Holistic { iterations });
    (verdict, ts, chains)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supply::ServerSet;

    const US: Nanos = 1_000;

    /// Seed 004's JACK pipeline in one server of period D = 2902.5 us.
    fn jack(budget: Nanos) -> (Vec<Task>, Vec<Option<usize>>, Reservation) {
        let d = 2_902_500;
        let tasks = vec![
            Task::new(58_050, d).prio(3),
            Task::new(290 * US, d).prio(2),
            Task::new(290 * US, d).prio(1),
        ];
        let preds = vec![None, Some(0), Some(1)];
        let r = Reservation::Servers(ServerSet::new(vec![Prm::new(d, budget)]));
        (tasks, preds, r)
    }

    #[test]
    fn jack_needs_exactly_the_sum_of_wcets() {
        let (ts, preds, r) = jack(638_050);
        let (v, _, chains) = chain_verdict(&ts, &preds, &[], &r, Policy::Fifo, Placement::Global);
        assert!(v.schedulable());
        assert_eq!(chains.len(), 1);
        assert_eq!(chains[0].stages, vec![0, 1, 2]);
        assert_eq!(chains[0].bound, Some(2_902_500));
        // One nanosecond less: two server periods, past the period; the holistic analysis on
        // the PRM cannot prove it either.
        let (ts, preds, r) = jack(638_049);
        let (v, _, chains) = chain_verdict(&ts, &preds, &[], &r, Policy::Fifo, Placement::Global);
        assert!(!v.schedulable());
        assert!(matches!(chains[0].method, ChainMethod::Holistic { .. }));
    }

    #[test]
    fn holistic_inherits_jitter_on_a_dedicated_server() {
        // A full server on one CPU: stage 2 starts when stage 1 ends.
        let tasks = vec![Task::new(2, 20).prio(2), Task::new(3, 20).prio(1)];
        let r = Reservation::Servers(ServerSet::new(vec![Prm::new(10, 10), Prm::new(10, 10)]));
        let (v, ts, chains) = chain_verdict(
            &tasks,
            &[None, Some(0)],
            &[],
            &r,
            Policy::Fifo,
            Placement::Global,
        );
        assert!(v.schedulable());
        assert_eq!(ts[1].jitter, v.tasks[0].response.unwrap());
        assert!(chains[0].bound.unwrap() >= 5);
        assert!(matches!(chains[0].method, ChainMethod::Holistic { .. }));
    }

    #[test]
    fn per_stage_reservations_need_eq2_bandwidth() {
        // Seed 004 Eq. 1: Q_i = C_i, P_i = C_i / sum C * D; the stages' bounds add up to D.
        let c = [58_050u64, 290 * US, 290 * US];
        let (sum, d) = (c.iter().sum::<u64>(), 2_902_500u64);
        let total: u64 = c
            .iter()
            .map(|&ci| activation_bound(ci, ci, ci * d / sum).unwrap())
            .sum();
        assert!(total <= d);
        // Budgets scaled below C_i: every stage needs two of its periods.
        let scaled: u64 = c
            .iter()
            .map(|&ci| activation_bound(ci, ci * 9 / 10, ci * d / sum).unwrap())
            .sum();
        assert!(scaled > d);
    }
}
