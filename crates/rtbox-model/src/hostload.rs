//! What the host's own real-time work takes before any box is admitted, and what the Linux
//! runtime can enforce at all (docs/runtime.md, "Coexistence with the host's real-time work").
//!
//! Three rules, one home each:
//! - [`deadline_interference`]: the CPU time unmanaged SCHED_DEADLINE tasks can take from one
//!   CPU (they preempt every SCHED_FIFO thread, members and the enforcement loop included);
//!   [`root_domain_share`] is the kernel's own accounting of the same tasks, shown beside it.
//! - [`min_enforceable_budget`]: the smallest budget a user-space loop can stop in time.
//! - [`MAX_RUNTIME_PERIOD`]: the longest period the runtime accepts.
//!
//! [`admit_on_host`] applies them on top of [`admit_with_loop`]. The analysis and the simulator
//! model the kernel-free schedule and use none of them.

use std::collections::BTreeMap;

use crate::admission::{admit_with_loop, fits_cap, Admission, LoopCost, Refusal};
use crate::bandwidth::Bandwidth;
use crate::cpuset::CpuSet;
use crate::system::System;
use crate::time::Nanos;

/// Worst time from the loop's (or a backstop's) decision to stop a member until the member is
/// stopped: a cgroup v2 freeze took 34 us on average and 55 us at most on the project VM
/// (docs/runtime.md, enforcement loop step 4).
pub const STOP_LATENCY: Nanos = 55_000;

/// The longest server period the runtime accepts: the kernel's default maximum SCHED_DEADLINE
/// period (`/proc/sys/kernel/sched_deadline_period_max_us` = 2^22 us). The runtime's
/// guarantees are measured against the kernel's real-time limits, which are per second (RT
/// throttling, the fair server's 50 ms per second); a server whose budget outlasts several of
/// those windows is refused, as the kernel refuses such deadline tasks.
pub const MAX_RUNTIME_PERIOD: Nanos = 4_194_304_000;

/// Rule: the smallest budget the Linux runtime can enforce. A member can run unseen for one
/// loop step before its exhaustion is noticed (the loop's own step, `cost.step`) and until the
/// stop takes effect ([`STOP_LATENCY`]). A budget below that sum could be overrun by more than a
/// whole budget in one period, so the core's pay-back would take more than the next period and
/// the reservation would no longer be the one asked for. With a step of 0 (reservations alone,
/// the kernel-free schedule) there is no minimum beyond a positive budget.
pub fn min_enforceable_budget(cost: &LoopCost) -> Nanos {
    if cost.step == 0 {
        return 1;
    }
    cost.step + STOP_LATENCY
}

/// An unmanaged SCHED_DEADLINE task as admission needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadlineTask {
    pub tid: i32,
    pub comm: String,
    pub runtime: Nanos,
    pub period: Nanos,
    /// The CPUs it may run on (its affinity, which the kernel makes cover its root domain).
    pub cpus: CpuSet,
}

impl DeadlineTask {
    /// The kernel's bandwidth of a deadline task: runtime / period (`to_ratio` in
    /// kernel/sched/core.c), rounded up like every reserved bandwidth.
    pub fn bandwidth(&self) -> Bandwidth {
        Bandwidth::of(self.runtime, self.period.max(1))
    }
}

/// Rule (the kernel's accounting, kernel/sched/deadline.c `__dl_add`): a deadline task's
/// bandwidth is added to its root domain's total, and the root domain admits while the total
/// fits `cap x CPUs of the domain`; per CPU that is the domain's total spread evenly over its
/// CPUs. Tasks with the same CPU set share one root domain (without exclusive cpusets every
/// task's set is all online CPUs). Shown in status; not what a box on one CPU can count on,
/// see [`deadline_interference`].
pub fn root_domain_share(tasks: &[DeadlineTask]) -> BTreeMap<u32, Bandwidth> {
    let mut domains: BTreeMap<Vec<u32>, Bandwidth> = BTreeMap::new();
    for t in tasks {
        let e = domains.entry(t.cpus.iter().collect()).or_default();
        *e = *e + t.bandwidth();
    }
    let mut out = BTreeMap::new();
    for (span, total) in domains {
        if span.is_empty() {
            continue;
        }
        let each = Bandwidth::from_units(total.units().div_ceil(span.len() as u64));
        for cpu in span {
            let e: &mut Bandwidth = out.entry(cpu).or_default();
            *e = *e + each;
        }
    }
    out
}

/// Rule: what unmanaged deadline tasks can take from one CPU. The kernel schedules them by
/// global EDF inside their root domain, above every SCHED_FIFO thread, and moves a task to any
/// CPU of its set that runs no deadline task, whatever FIFO work runs there. So one task of
/// bandwidth U may spend all of its U on any single CPU of its set, and the tasks allowed on a
/// CPU may together take the sum of their bandwidths from it (at most the whole CPU). The
/// kernel's spread ([`root_domain_share`]) would admit a box that then loses its guarantee
/// whenever the tasks happen to run on its CPU.
pub fn deadline_interference(tasks: &[DeadlineTask]) -> BTreeMap<u32, Bandwidth> {
    let mut out: BTreeMap<u32, Bandwidth> = BTreeMap::new();
    for t in tasks {
        for cpu in t.cpus.iter() {
            let e = out.entry(cpu).or_default();
            *e = (*e + t.bandwidth()).min(Bandwidth::ONE);
        }
    }
    out
}

/// The host's own real-time work on one CPU, as admission counts it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostCpu {
    /// [`deadline_interference`] of the unmanaged deadline tasks.
    pub deadline: Bandwidth,
    /// How many unmanaged deadline tasks may run here.
    pub deadline_tasks: usize,
    /// Measured CPU use of fixed-priority kernel threads (threaded interrupts, ...) that run
    /// above some member here.
    pub kernel_threads: Bandwidth,
    /// How many such kernel threads were counted.
    pub kernel_thread_count: usize,
}

impl HostCpu {
    pub fn total(&self) -> Bandwidth {
        self.deadline + self.kernel_threads
    }
}

/// The host's real-time work per CPU (CPUs without any are absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostLoad {
    pub cpus: BTreeMap<u32, HostCpu>,
}

impl HostLoad {
    /// The load of `tasks` and of measured kernel threads (per CPU: bandwidth, count).
    pub fn new(tasks: &[DeadlineTask], kernel_threads: &BTreeMap<u32, (Bandwidth, usize)>) -> Self {
        let mut cpus: BTreeMap<u32, HostCpu> = BTreeMap::new();
        for (cpu, bw) in deadline_interference(tasks) {
            let c = cpus.entry(cpu).or_default();
            c.deadline = bw;
            c.deadline_tasks = tasks.iter().filter(|t| t.cpus.contains(cpu)).count();
        }
        for (cpu, (bw, n)) in kernel_threads {
            let c = cpus.entry(*cpu).or_default();
            c.kernel_threads = *bw;
            c.kernel_thread_count = *n;
        }
        HostLoad { cpus }
    }

    /// What is taken from `cpu`.
    pub fn on(&self, cpu: u32) -> Bandwidth {
        self.cpus.get(&cpu).map_or(Bandwidth::ZERO, HostCpu::total)
    }
}

/// [`admit_with_loop`] on a real host: every server's budget must be at least
/// [`min_enforceable_budget`] and its period at most [`MAX_RUNTIME_PERIOD`], and on every CPU
/// the reservations, the loop and the host's own real-time work ([`HostLoad`]) must fit the cap
/// together ([`fits_cap`]).
pub fn admit_on_host(system: &System, cost: LoopCost, host: &HostLoad) -> Admission {
    let mut adm = admit_with_loop(system, cost);
    let minimum = min_enforceable_budget(&cost);
    for b in system.boxes() {
        for s in &b.servers {
            if s.budget < minimum {
                adm.refusals.push(Refusal::BudgetBelowMinimum {
                    box_name: b.name().to_string(),
                    cpu: s.cpu,
                    budget: s.budget,
                    minimum,
                    step: cost.step,
                    stop: STOP_LATENCY,
                });
            }
            if s.period > MAX_RUNTIME_PERIOD {
                adm.refusals.push(Refusal::PeriodTooLong {
                    box_name: b.name().to_string(),
                    cpu: s.cpu,
                    period: s.period,
                    maximum: MAX_RUNTIME_PERIOD,
                });
            }
        }
    }
    for c in &mut adm.cpus {
        c.host = host.on(c.cpu);
        if c.servers.is_empty() || c.host == Bandwidth::ZERO {
            continue;
        }
        let own = c.total + c.loop_share;
        // A CPU over the cap already is refused for that.
        if fits_cap(own, c.cap) && !fits_cap(own + c.host, c.cap) {
            let h = host.cpus.get(&c.cpu).cloned().unwrap_or_default();
            adm.refusals.push(Refusal::HostOverCap {
                cpu: c.cpu,
                reservations: c.total,
                loop_share: c.loop_share,
                deadline: h.deadline,
                deadline_tasks: h.deadline_tasks,
                kernel_threads: h.kernel_threads,
                cap: c.cap,
            });
        }
    }
    adm
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::{BoxSpec, Interface, Platform};

    fn dl(tid: i32, runtime: Nanos, period: Nanos, cpus: &str) -> DeadlineTask {
        DeadlineTask {
            tid,
            comm: format!("dl{tid}"),
            runtime,
            period,
            cpus: CpuSet::parse(cpus).unwrap(),
        }
    }

    fn one_box(q: Nanos, p: Nanos, cpus: &str) -> System {
        let mut b = BoxSpec::new(
            "b",
            Interface::PerCpu {
                budget: q,
                period: p,
            },
        );
        b.cpus = Some(CpuSet::parse(cpus).unwrap());
        System::new(Platform::with_cpus(2), vec![b], vec![]).unwrap()
    }

    #[test]
    fn the_kernel_spreads_a_root_domain_but_one_cpu_can_get_a_whole_task() {
        let tasks = [dl(1, 4_000_000, 10_000_000, "0-1")];
        let spread = root_domain_share(&tasks);
        assert_eq!(spread[&0], Bandwidth::of(2, 10));
        assert_eq!(spread[&1], Bandwidth::of(2, 10));
        let worst = deadline_interference(&tasks);
        assert_eq!(worst[&1], Bandwidth::of(4, 10));
        // Two tasks on both CPUs: the kernel counts 0.4 per CPU, one CPU may lose 0.8.
        let two = [dl(1, 4, 10, "0-1"), dl(2, 4, 10, "0-1")];
        assert_eq!(root_domain_share(&two)[&0], Bandwidth::of(4, 10));
        assert_eq!(deadline_interference(&two)[&0], Bandwidth::of(8, 10));
        // Separate root domains (exclusive cpusets) stay apart; the sum never exceeds a CPU.
        let split = [dl(1, 6, 10, "0"), dl(2, 6, 10, "0"), dl(3, 1, 10, "1")];
        assert_eq!(deadline_interference(&split)[&0], Bandwidth::ONE);
        assert_eq!(root_domain_share(&split)[&1], Bandwidth::of(1, 10));
    }

    /// Issue 19 acceptance, the admission half: a 4 ms / 10 ms deadline task allowed on both
    /// CPUs makes a box of 0.6 on CPU 1 refused with both numbers, and a box of 0.5 admitted.
    #[test]
    fn a_deadline_task_is_counted_before_boxes() {
        let host = HostLoad::new(&[dl(77, 4_000_000, 10_000_000, "0-1")], &BTreeMap::new());
        let refused = admit_on_host(
            &one_box(60_000_000, 100_000_000, "1"),
            LoopCost::DEFAULT,
            &host,
        );
        assert_eq!(refused.refusals.len(), 1, "{:?}", refused.refusals);
        assert_eq!(
            refused.refusals[0].to_string(),
            "CPU 1: reservations 0.6000 + enforcement loop 0.0270 + host real-time work 0.4000 (SCHED_DEADLINE tasks outside rtbox 0.4000 (1 task), kernel threads 0.0000) = 1.0270 > cap 0.9500"
        );
        let ok = admit_on_host(
            &one_box(50_000_000, 100_000_000, "1"),
            LoopCost::DEFAULT,
            &host,
        );
        assert!(ok.admitted(), "{:?}", ok.refusals);
        assert_eq!(ok.cpus[1].host, Bandwidth::of(4, 10));
        // Without the task the 0.6 box fits.
        assert!(admit_on_host(
            &one_box(60_000_000, 100_000_000, "1"),
            LoopCost::DEFAULT,
            &HostLoad::default()
        )
        .admitted());
    }

    #[test]
    fn kernel_threads_count_on_their_cpus() {
        let mut k = BTreeMap::new();
        k.insert(1, (Bandwidth::of(1, 10), 2));
        let host = HostLoad::new(&[], &k);
        assert_eq!(host.on(0), Bandwidth::ZERO);
        let a = admit_on_host(
            &one_box(85_000_000, 100_000_000, "1"),
            LoopCost::DEFAULT,
            &host,
        );
        assert!(
            matches!(&a.refusals[..], [Refusal::HostOverCap { cpu: 1, kernel_threads, .. }] if *kernel_threads == Bandwidth::of(1, 10)),
            "{:?}",
            a.refusals
        );
        assert!(admit_on_host(
            &one_box(85_000_000, 100_000_000, "0"),
            LoopCost::DEFAULT,
            &host
        )
        .admitted());
    }

    /// Issue 19: a 10 us budget is refused with the minimum and its derivation; analysis-only
    /// admission (step 0) keeps any positive budget.
    #[test]
    fn budgets_below_what_the_loop_can_stop_are_refused() {
        assert_eq!(min_enforceable_budget(&LoopCost::DEFAULT), 155_000);
        let tiny = one_box(10_000, 1_000_000, "0");
        let a = admit_on_host(&tiny, LoopCost::DEFAULT, &HostLoad::default());
        assert_eq!(
            a.refusals[0].to_string(),
            "box \"b\" on CPU 0: budget 10us is below the 155us the runtime can enforce (one loop step of 100us + stop latency 55us)"
        );
        let free = admit_on_host(&tiny, LoopCost::with_step(0), &HostLoad::default());
        assert!(free.admitted(), "{:?}", free.refusals);
        let at_min = admit_on_host(
            &one_box(155_000, 1_000_000, "0"),
            LoopCost::DEFAULT,
            &HostLoad::default(),
        );
        assert!(at_min.admitted(), "{:?}", at_min.refusals);
    }

    #[test]
    fn periods_above_the_kernels_deadline_maximum_are_refused() {
        let long = one_box(1_000_000_000, 5_000_000_000, "0");
        let a = admit_on_host(&long, LoopCost::DEFAULT, &HostLoad::default());
        assert_eq!(
            a.refusals[0].to_string(),
            "box \"b\" on CPU 0: period 5s is longer than the 4194304us the runtime accepts (the kernel's maximum SCHED_DEADLINE period)"
        );
        let ok = one_box(1_000_000_000, MAX_RUNTIME_PERIOD, "0");
        assert!(admit_on_host(&ok, LoopCost::DEFAULT, &HostLoad::default()).admitted());
    }
}
