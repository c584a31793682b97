//! When the enforcement loop runs next, and on which CPU it sleeps (owns the loop's pinning).

use rtbox_linux::sched;
use rtbox_model::Nanos;

/// Shortest sleep of the loop when the core's timer is already due (no spinning).
pub const MIN_SLEEP: Nanos = 50_000;

/// Shortest sleep of the loop before a budget exhaustion. The loop sleeps on the member's CPU
/// (see [`LoopPin::follow`]); a sleep shorter than a context switch pair plus a timer
/// interrupt (~10-20 us here) would give the member no CPU at all, and the loop would wake again
/// and again to find the same few microseconds left. Granting at least this much bounds the
/// overrun it causes to this value; the core pays overruns back in the next period.
pub const MIN_GRANT: Nanos = 25_000;

/// When the enforcement loop must run next, from the core's timers (absolute core time).
///
/// - A replenishment that came due while the step ran (a step can take longer than the gap
///   between a throttle and another server's replenishment) runs at once. Issue 5: it used to
///   wait a whole poll interval, 4 ms with every server throttled, and 1 ms global boxes lost
///   a fifth of their periods to it.
/// - A future timer (exhaustion or replenishment) is kept, but every sleep is at least
///   [`MIN_GRANT`] and at most one `poll` interval.
/// - In Measured mode the core's exhaustion time assumes the running member consumed at full
///   rate; when it did not (preempted by a higher band or by RT throttling) that time lies in
///   the past, and the loop instead waits for the smallest budget left among servers with a
///   runnable member (at least [`MIN_SLEEP`], so it never spins), or for the next
///   replenishment if that comes first.
pub fn wakeup_time(
    now: Nanos,
    next_timer: Option<Nanos>,
    next_replenishment: Option<Nanos>,
    poll: Nanos,
    budget_left: Option<Nanos>,
) -> Nanos {
    if next_replenishment.is_some_and(|r| r <= now) {
        return now;
    }
    let poll = now + poll;
    match next_timer {
        Some(t) if t > now => t.max(now + MIN_GRANT).min(poll),
        Some(_) => {
            let est = budget_left
                .map_or(poll, |b| poll.min(now + b))
                .max(now + MIN_SLEEP);
            next_replenishment.map_or(est, |r| est.min(r.max(now + MIN_GRANT)))
        }
        None => poll,
    }
}

/// The exhaustion time `t` planned at the start of a step (`step_started`), moved by the step's
/// own length when the step ran on the CPU of the member that exhausts: the loop (FIFO 98)
/// preempted that member for the whole step, so its budget lasts that much longer. Without
/// this the loop woke to find the step's length of budget left, slept [`MIN_GRANT`], and did so
/// again 3-5 times per exhaustion (measured with the BPF sensor, 2 ms / 10 ms box on CPU 0:
/// 530 steps per second instead of ~200).
pub fn after_own_step(t: Nanos, step_started: Nanos, now: Nanos) -> Nanos {
    t + now.saturating_sub(step_started)
}

/// The loop's wake-up for an exhaustion at `t` whose stop the backstop owns (BPF sensor): the
/// backstop thread of the member's CPU acts at `t` itself, checks the members' clocks (a
/// memory read with the sensor), moves the stop if budget is left, freezes when it is spent,
/// and then wakes the loop, which throttles the server in the core. The loop's own timer is
/// only the fallback, [`OWNED_FALLBACK`] after `t`. Before, the loop woke at `t`
/// itself and, each of its own wake-ups costing the member's budget 20-40 us of switches
/// here, found a few tens of microseconds left and stepped 2-3 more times per exhaustion
/// (docs/benchmarks-runtime.md, "BPF sensor"). A quiet exhaustion (`backstop::Stop::quiet`)
/// has no such wake-up at all: the loop sleeps to the server's replenishment.
pub fn owned_stop(t: Nanos) -> Nanos {
    t + OWNED_FALLBACK
}

/// How long after an owned stop's planned time the loop looks by itself. The backstop wakes
/// it as soon as it stopped the members; a member preempted meanwhile has budget left, the
/// backstop moves its stop, and an earlier look by the loop would only find that budget (with
/// 100 us here the loop still stepped at ~3 of 4 exhaustions, finding 40-120 us left).
pub const OWNED_FALLBACK: Nanos = 400_000;

/// Where the loop should sleep: on the CPU of the next budget exhaustion; with none pending,
/// on a CPU where no member runs (so its polls do not preempt a reclaiming member), keeping
/// the `current` CPU when it qualifies; `None` to stay where it is.
pub fn loop_cpu(next_exhaustion: Option<u32>, quiet: &[u32], current: Option<u32>) -> Option<u32> {
    if next_exhaustion.is_some() {
        return next_exhaustion;
    }
    match current {
        Some(c) if quiet.contains(&c) => Some(c),
        _ => quiet.first().copied(),
    }
}

/// The loop thread pinned by [`LoopPin::follow`]: its tid, original affinity and current CPU.
#[derive(Debug, Default)]
pub struct LoopPin {
    pin: Option<(i32, Vec<u32>, u32)>,
}

impl LoopPin {
    /// The CPU the loop is pinned to, if it is.
    pub fn cpu(&self) -> Option<u32> {
        self.pin.as_ref().map(|p| p.2)
    }

    /// Moves the calling thread (the enforcement loop) to `cpu`, so that its timer fires on the
    /// CPU the member that will exhaust runs on. On a virtual machine a timer on an otherwise
    /// idle vCPU wakes the loop late (the host must first schedule the halted vCPU: up to
    /// ~0.5 ms measured here) while the member keeps running on the busy one; on the busy vCPU a
    /// late timer also means the member did not run. The step then preempts the member, so the
    /// time it takes is not consumed by it. Measured: worst overrun per period 300 -> 50 us for
    /// a 2/10 ms box (docs/benchmarks-runtime.md).
    pub fn follow(&mut self, cpu: u32) {
        let tid = sched::gettid();
        match &mut self.pin {
            Some((t, _, c)) if *t == tid => {
                if *c != cpu && sched::set_affinity(tid, &[cpu]).is_ok() {
                    *c = cpu;
                }
            }
            _ => {
                self.unpin();
                if let Ok(orig) = sched::get_affinity(tid) {
                    if orig.contains(&cpu) && sched::set_affinity(tid, &[cpu]).is_ok() {
                        self.pin = Some((tid, orig, cpu));
                    }
                }
            }
        }
    }

    /// Gives the loop thread its original affinity back.
    pub fn unpin(&mut self) {
        if let Some((tid, orig, _)) = self.pin.take() {
            let _ = sched::set_affinity(tid, &orig);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;
    const US: Nanos = 1_000;

    #[test]
    fn an_owned_stop_wakes_the_loop_only_after_the_backstop() {
        assert_eq!(owned_stop(10 * MS), 10 * MS + OWNED_FALLBACK);
        // The fallback is kept as a future timer, but never past a replenishment.
        let at = wakeup_time(10 * MS - 50 * US, Some(owned_stop(10 * MS)), None, MS, None);
        assert_eq!(at, 10 * MS + OWNED_FALLBACK);
    }

    #[test]
    fn an_exhaustion_moves_by_the_steps_own_length() {
        assert_eq!(
            after_own_step(10 * MS, 8 * MS, 8 * MS + 40 * US),
            10 * MS + 40 * US
        );
        assert_eq!(
            after_own_step(10 * MS, 8 * MS, 7 * MS),
            10 * MS,
            "clock skew moves nothing"
        );
    }

    #[test]
    fn a_replenishment_due_during_the_step_runs_at_once_issue_5() {
        // Every server throttled at 100 ms; one is replenished at 100.033 ms, but the step
        // ended at 100.067 ms. Before the fix the loop slept the 4 ms poll interval.
        let now = 100 * MS + 67 * US;
        let r = 100 * MS + 33 * US;
        assert_eq!(wakeup_time(now, Some(r), Some(r), 4 * MS, None), now);
    }

    #[test]
    fn future_timers_are_kept_within_the_grant_and_the_poll() {
        let now = 10 * MS;
        assert_eq!(
            wakeup_time(now, Some(now + 300 * US), Some(now + 300 * US), MS, None),
            now + 300 * US
        );
        assert_eq!(
            wakeup_time(now, Some(now + US), None, MS, Some(US)),
            now + MIN_GRANT,
            "never a sleep shorter than the grant"
        );
        assert_eq!(
            wakeup_time(now, Some(now + 9 * MS), None, MS, None),
            now + MS,
            "never longer than the poll"
        );
        assert_eq!(wakeup_time(now, None, None, 4 * MS, None), now + 4 * MS);
    }

    #[test]
    fn a_passed_exhaustion_estimate_polls_by_budget_left_but_not_past_a_replenishment() {
        let now = 10 * MS;
        let passed = Some(now - 5 * US);
        // The member was preempted: budget is left, the loop waits for it (not below MIN_SLEEP).
        assert_eq!(
            wakeup_time(now, passed, None, MS, Some(700 * US)),
            now + 700 * US
        );
        assert_eq!(
            wakeup_time(now, passed, None, MS, Some(US)),
            now + MIN_SLEEP
        );
        // Another server's replenishment comes first.
        assert_eq!(
            wakeup_time(now, passed, Some(now + 300 * US), MS, Some(700 * US)),
            now + 300 * US
        );
        // With nothing runnable, the poll interval bounds the sleep.
        assert_eq!(wakeup_time(now, passed, None, 4 * MS, None), now + 4 * MS);
    }

    #[test]
    fn the_loop_follows_the_exhaustion_else_keeps_a_quiet_cpu() {
        assert_eq!(loop_cpu(Some(1), &[0], Some(0)), Some(1));
        assert_eq!(loop_cpu(None, &[0, 1], Some(1)), Some(1), "current kept");
        assert_eq!(
            loop_cpu(None, &[0], Some(1)),
            Some(0),
            "moves off a busy CPU"
        );
        assert_eq!(loop_cpu(None, &[], Some(1)), None, "every CPU busy: stays");
    }
}
