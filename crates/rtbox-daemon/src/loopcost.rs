//! The enforcement loop's own CPU use, measured while it runs and held against what admission
//! assumed (`rtbox_model::LoopCost::step`, `--loop-step-us`).
//!
//! The admitted step cost is a figure measured on one machine on one day (the project VM gave
//! 23-45 us per step on quiet days and 60-85 us on a day of heavy host steal). A daemon on
//! another machine may need another, and only the loop itself can tell: it counts its steps and
//! its thread's CPU time, and over every [`WINDOW`] compares the CPU time per step with the
//! admitted one. Above it, boxes with periods of a few milliseconds may get less than reserved
//! (docs/runtime.md, "Admission of the loop's own time"), so the daemon says so in its log,
//! `rtbox status` and the metrics. Pure: time and CPU readings come in as numbers.

use rtbox_model::Nanos;
use serde::Serialize;

/// Length of one comparison window.
pub const WINDOW: Nanos = 10_000_000_000;

/// Fewer steps than this in a window say nothing about the cost of a step (an idle loop sleeps
/// up to the scan interval; its few steps are dominated by their wake-ups).
pub const MIN_STEPS: u64 = 100;

/// Counters of the loop's CPU use.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LoopUsage {
    /// Steps since the daemon started.
    pub steps: u64,
    /// Of them, short steps at replenishments planned ahead (`runtime/ahead.rs`).
    pub short_steps: u64,
    /// CPU time of the loop thread since its first step, ns.
    pub cpu_ns: u64,
    /// CPU time per step in the last complete window, ns (`None` before the first one, or when
    /// it had fewer than [`MIN_STEPS`] steps).
    pub window_step_ns: Option<u64>,
    /// The loop's CPU use in the last complete window, in CPUs.
    pub window_cpu: Option<f64>,
    /// The window's step cost is above the admitted one (warned once until it drops back).
    pub over: bool,
    #[serde(skip)]
    first_cpu: Option<u64>,
    #[serde(skip)]
    window: Option<(Nanos, u64, u64)>,
}

impl LoopUsage {
    /// Brings `cpu_ns` up to the loop thread's CPU clock reading `cpu` (status, metrics).
    pub fn refresh(&mut self, cpu: u64) {
        if let Some(first) = self.first_cpu {
            self.cpu_ns = cpu.saturating_sub(first);
        }
    }

    /// Records one step at time `now` with the loop thread's CPU clock reading `cpu` (ns).
    /// When a window closes with a step cost above `admitted` (ns; 0: nothing admitted, no
    /// check), returns the warning to log; it is given once, and again only after a window
    /// back at or below the admitted cost.
    pub fn step(&mut self, now: Nanos, cpu: u64, admitted: Nanos) -> Option<String> {
        self.step_with(now, admitted, || cpu)
    }

    /// [`LoopUsage::step`], reading the CPU clock (`cpu`) only at the first step and when a
    /// window closes: the loop thread's CPU clock is a system call that updates the run queue's
    /// clock, ~7 us here, which was 9 % of a step's CPU time (issue 14, `perf record`). Between
    /// those readings `cpu_ns` stays as last read ([`LoopUsage::refresh`]).
    pub fn step_with(
        &mut self,
        now: Nanos,
        admitted: Nanos,
        cpu: impl FnOnce() -> u64,
    ) -> Option<String> {
        self.steps += 1;
        let Some((t0, c0, s0)) = self.window else {
            let cpu = cpu();
            self.first_cpu = Some(cpu);
            self.window = Some((now, cpu, self.steps));
            return None;
        };
        let span = now.saturating_sub(t0);
        if span < WINDOW {
            return None;
        }
        let cpu = cpu();
        self.refresh(cpu);
        self.window = Some((now, cpu, self.steps));
        let steps = self.steps - s0;
        let used = cpu.saturating_sub(c0);
        self.window_cpu = Some(used as f64 / span as f64);
        if steps < MIN_STEPS {
            self.window_step_ns = None;
            return None;
        }
        let per_step = used / steps;
        self.window_step_ns = Some(per_step);
        let over = admitted > 0 && per_step > admitted;
        let warn = over && !self.over;
        self.over = over;
        warn.then(|| {
            format!(
                "enforcement loop: {:.1} us of CPU per step over the last {} s ({steps} steps, {:.3} CPU), \
                 above the {:.1} us that admission assumes (--loop-step-us); boxes with periods of \
                 a few ms may get less than reserved: restart with --loop-step-us {} to admit with \
                 this machine's figure",
                per_step as f64 / 1e3,
                span / 1_000_000_000,
                used as f64 / span as f64,
                admitted as f64 / 1e3,
                per_step.div_ceil(1000),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives `n` steps evenly over one window, each costing `cost` ns of CPU.
    fn window(
        u: &mut LoopUsage,
        start: Nanos,
        cpu0: u64,
        n: u64,
        cost: u64,
        admitted: Nanos,
    ) -> Vec<String> {
        (1..=n)
            .filter_map(|i| u.step(start + i * WINDOW / n, cpu0 + i * cost, admitted))
            .collect()
    }

    #[test]
    fn a_step_cost_above_the_admitted_one_is_reported_once() {
        let mut u = LoopUsage::default();
        u.step(0, 5_000, 100_000);
        let w = window(&mut u, 0, 5_000, 1000, 80_000, 100_000);
        assert!(w.is_empty(), "80 us per step is within 100 us: {w:?}");
        assert_eq!(u.window_step_ns, Some(80_000));
        assert!((u.window_cpu.unwrap() - 0.008).abs() < 1e-9);
        assert!(!u.over);
        let cpu = u.cpu_ns + 5_000;
        let w = window(&mut u, WINDOW, cpu, 1000, 150_000, 100_000);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("150.0 us of CPU per step") && w[0].contains("--loop-step-us 150"),
            "{}",
            w[0]
        );
        assert!(u.over);
        // Still above: no second warning; back below: cleared.
        let cpu = u.cpu_ns + 5_000;
        assert!(window(&mut u, 2 * WINDOW, cpu, 1000, 150_000, 100_000).is_empty());
        let cpu = u.cpu_ns + 5_000;
        assert!(window(&mut u, 3 * WINDOW, cpu, 1000, 50_000, 100_000).is_empty());
        assert!(!u.over);
        assert_eq!(u.steps, 4001);
    }

    #[test]
    fn idle_windows_and_no_admission_give_no_verdict() {
        let mut u = LoopUsage::default();
        u.step(0, 0, 30_000);
        // An idle loop: 20 steps of 1 ms each say nothing about a step's cost.
        assert!(window(&mut u, 0, 0, 20, 1_000_000, 30_000).is_empty());
        assert_eq!(u.window_step_ns, None);
        assert!(u.window_cpu.is_some());
        // Admission without a loop term (step 0): measured, never compared.
        let mut u = LoopUsage::default();
        u.step(0, 0, 0);
        assert!(window(&mut u, 0, 0, 1000, 500_000, 0).is_empty());
        assert_eq!(u.window_step_ns, Some(500_000));
        assert_eq!(u.cpu_ns, 1000 * 500_000);
    }
}
