//! What a member's server is charged for its CPU time.
//!
//! The loop reads each member's perf task clock every step: exact to the nanosecond at every
//! read, so budget exhaustion is seen at once. But that clock runs on wall time while the thread
//! is current, and a vCPU stolen by the host leaves the thread current without running it. The
//! kernel's own accounting (`sum_exec_runtime`, the clock SCHED_DEADLINE charges its servers
//! with) leaves steal out, but it is exact only while the thread is off CPU.
//!
//! So the two are combined: every read of the perf clock is charged at once, and whenever the
//! member is seen off CPU the pair (perf, kernel) is taken; the perf time since the last pair
//! that the kernel did not count is steal (and the perf clock's share of context switches),
//! refunded to the server (`Scheduler::refund`, never beyond a full budget) once the member's
//! server has throttled. Measured here: a 282 us steal
//! charged as a budget overrun that the kernel showed as none.

/// One member's charge state. Pure: readings come in, charges and steal come out.
#[derive(Debug, Clone, Default)]
pub struct MemberCharge {
    /// The last perf clock reading charged.
    last: u64,
    /// The last consistent (perf, kernel) pair, taken off CPU.
    exact: Option<(u64, u64)>,
    /// Steal found so far (figures).
    stolen: u64,
}

impl MemberCharge {
    /// Starts from the perf clock reading `perf`.
    pub fn new(perf: u64) -> Self {
        MemberCharge {
            last: perf,
            ..Self::default()
        }
    }

    /// A new perf reading; returns the time to charge since the previous one.
    pub fn advance(&mut self, perf: u64) -> u64 {
        let d = perf.saturating_sub(self.last);
        self.last = self.last.max(perf);
        d
    }

    /// A reading below the last one charged: the kernel's own figure at a switch, after an
    /// extrapolation on wall time while the member ran (BPF sensor). Returns the difference,
    /// host steal, counted as found; the charge continues from `exact`.
    pub fn rewind(&mut self, exact: u64) -> u64 {
        let steal = self.last.saturating_sub(exact);
        self.stolen += steal;
        self.last = self.last.min(exact);
        steal
    }

    /// The last perf clock reading charged.
    pub fn last(&self) -> u64 {
        self.last
    }

    /// A pair read while the member was off CPU (the perf clock did not move around the kernel
    /// read). Returns the steal since the previous pair: perf time the kernel did not count.
    pub fn reconcile(&mut self, perf: u64, kernel: u64) -> u64 {
        let steal = match self.exact {
            // The kernel can count a few ns more than perf over a stretch (the two clocks stamp
            // the same context switches): that is no steal.
            Some((p0, k0)) => perf
                .saturating_sub(p0)
                .saturating_sub(kernel.saturating_sub(k0)),
            None => 0,
        };
        debug_assert!(
            self.exact.is_none_or(|(p0, k0)| perf >= p0 && kernel >= k0),
            "a CPU clock went back"
        );
        self.stolen += steal;
        self.exact = Some((perf, kernel));
        steal
    }

    /// The perf figure of the last pair: a member whose clock still reads it has not run
    /// since, so a new pair would find the same kernel figure and no steal.
    pub fn paired_perf(&self) -> Option<u64> {
        self.exact.map(|(p, _)| p)
    }

    /// Steal found so far, ns.
    pub fn stolen(&self) -> u64 {
        self.stolen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_steal_nothing_is_found() {
        let mut c = MemberCharge::new(1_000);
        assert_eq!(c.reconcile(1_000, 50_000), 0);
        assert_eq!(c.advance(3_000), 2_000);
        assert_eq!(c.advance(3_000), 0);
        // Off CPU: the kernel counted the same 2 us.
        assert_eq!(c.reconcile(3_000, 52_000), 0);
        assert_eq!(c.advance(4_500), 1_500);
        assert_eq!(c.stolen(), 0);
    }

    /// Issue 5, item 3: a 282 us steal while the member was current was charged as an overrun.
    #[test]
    fn perf_time_the_kernel_did_not_count_is_steal() {
        let mut c = MemberCharge::new(0);
        assert_eq!(
            c.reconcile(0, 0),
            0,
            "the first pair only sets the baseline"
        );
        // Ran 2 ms by perf, of which the host stole 282 us.
        assert_eq!(c.advance(2_000_000), 2_000_000);
        assert_eq!(c.reconcile(2_000_000, 1_718_000), 282_000);
        // Next stretch: no steal.
        assert_eq!(c.advance(4_000_000), 2_000_000);
        assert_eq!(c.reconcile(4_000_000, 3_718_000), 0);
        assert_eq!(c.stolen(), 282_000);
    }

    #[test]
    fn the_last_pair_is_remembered_by_its_perf_figure() {
        let mut c = MemberCharge::new(0);
        assert_eq!(c.paired_perf(), None, "no pair yet");
        c.reconcile(0, 0);
        c.advance(5_000);
        c.reconcile(5_000, 5_000);
        assert_eq!(c.paired_perf(), Some(5_000));
        // Not run since: the same pair again would find nothing.
        assert_eq!(c.reconcile(5_000, 5_000), 0);
    }

    #[test]
    fn a_kernel_ahead_of_perf_is_not_negative_steal() {
        let mut c = MemberCharge::new(0);
        c.reconcile(0, 0);
        c.advance(1_000);
        assert_eq!(c.reconcile(1_000, 1_010), 0);
        assert_eq!(c.advance(2_000), 1_000);
    }
}
