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

/// The CPU where the loop sleeps when it does not follow the exhaustions (BPF sensor): the CPU
/// of every server, when all are on one; `None` when the servers are on several CPUs (or there
/// are none).
///
/// Why: the kernel wakes a real-time thread where it slept unless a pinned real-time task runs
/// there, so the loop stays wherever the last such wake-up left it, often on the other CPU.
/// From there each replenishment wakes an idle CPU for the loop and then, to thaw the member
/// and to re-arm that CPU's backstop (a kick: its timer must be armed from its own CPU), the
/// member's CPU too. Asleep on the servers' CPU the loop thaws and arms there. Measured (box on
/// CPU 0, three interleaved rounds, docs/benchmarks-runtime.md, "The loop sleeps on its
/// servers' CPU"): 200 us / 1 ms 0.043-0.050 CPU against 0.067-0.080, 2 ms / 10 ms
/// 0.011-0.012 against 0.013-0.016. With servers on two CPUs the loop would move at every step,
/// and that cost more than the kicks (0.027-0.035 against 0.021-0.023).
pub fn home_cpu(server_cpus: impl IntoIterator<Item = u32>) -> Option<u32> {
    let mut cpus = server_cpus.into_iter();
    let first = cpus.next()?;
    cpus.all(|c| c == first).then_some(first)
}

/// The shortest and the longest time the loop leaves its home CPU alone after the kernel moved
/// it away from there ([`LoopHome::before_sleep`]).
pub const HOME_BACKOFF_MIN: Nanos = 1_000_000_000;
pub const HOME_BACKOFF_MAX: Nanos = 64_000_000_000;

/// Whether the loop goes back to its home CPU ([`home_cpu`]) before it sleeps.
///
/// The kernel moves a waking real-time thread away from a CPU whose running task is real-time
/// and pinned there: a member, or an unmanaged thread. On a CPU that real-time work keeps busy,
/// this kernel's fair server lent starving normal threads several times its budget when
/// real-time threads woke there now and then, taking it from the box (docs/benchmarks-runtime.md,
/// "The kernel's fair server"); the loop must not keep coming back to such a CPU. So when the
/// loop finds itself moved off the CPU it slept on, it leaves that CPU alone for a while,
/// twice as long each time in a row, from [`HOME_BACKOFF_MIN`] up to [`HOME_BACKOFF_MAX`].
#[derive(Debug, Default)]
pub struct LoopHome {
    /// The CPU the loop went to sleep on, when it went home.
    slept_on: Option<u32>,
    /// Until when home is left alone (core time), and the last back-off.
    shun_until: Nanos,
    backoff: Nanos,
}

impl LoopHome {
    /// At the end of a step at `now`, on CPU `on`: the CPU to move to before sleeping, if any
    /// (`home`: [`home_cpu`]).
    pub fn before_sleep(&mut self, now: Nanos, on: Option<u32>, home: Option<u32>) -> Option<u32> {
        if let (Some(slept), Some(on)) = (self.slept_on, on) {
            if slept == on {
                self.backoff = 0;
            } else {
                self.backoff = (self.backoff * 2).clamp(HOME_BACKOFF_MIN, HOME_BACKOFF_MAX);
                self.shun_until = now + self.backoff;
            }
        }
        self.slept_on = home.filter(|_| now >= self.shun_until);
        // Where it runs unknown (no rseq): no move, rather than two system calls every step.
        self.slept_on.filter(|&h| on.is_some_and(|c| c != h))
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

    /// Moves the calling thread (the loop, not pinned) to `cpu` and gives it its affinity back
    /// at once: it runs and sleeps there until the kernel moves it (see [`LoopHome`]).
    pub fn nudge(&self, cpu: u32) {
        let tid = sched::gettid();
        if let Ok(orig) = sched::get_affinity(tid) {
            if orig.contains(&cpu) && sched::set_affinity(tid, &[cpu]).is_ok() {
                let _ = sched::set_affinity(tid, &orig);
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
    fn the_loop_has_a_home_only_when_every_server_is_on_one_cpu() {
        assert_eq!(home_cpu([1, 1, 1]), Some(1));
        assert_eq!(home_cpu([0]), Some(0));
        assert_eq!(home_cpu([0, 1]), None);
        assert_eq!(home_cpu([]), None);
    }

    /// The loop goes home unless the kernel moved it off there; then it stays away, longer
    /// each time in a row, and the back-off ends once a sleep at home held.
    #[test]
    fn a_loop_moved_off_its_home_leaves_it_alone_for_a_while() {
        const S: Nanos = 1_000_000_000;
        let mut h = LoopHome::default();
        // Away from home: go there; already there: stay.
        assert_eq!(h.before_sleep(0, Some(1), Some(0)), Some(0));
        assert_eq!(h.before_sleep(MS, Some(0), Some(0)), None);
        // Moved off home by the kernel: not back for a second, then twice as long.
        assert_eq!(h.before_sleep(2 * MS, Some(1), Some(0)), None);
        assert_eq!(h.before_sleep(2 * MS + S - 1, Some(1), Some(0)), None);
        assert_eq!(h.before_sleep(2 * MS + S, Some(1), Some(0)), Some(0));
        let t = 3 * MS + S;
        assert_eq!(h.before_sleep(t, Some(1), Some(0)), None);
        assert_eq!(h.before_sleep(t + 2 * S - 1, Some(1), Some(0)), None);
        assert_eq!(h.before_sleep(t + 2 * S, Some(1), Some(0)), Some(0));
        // A sleep at home that held ends the back-off: the next move costs a second again.
        let t = t + 2 * S + MS;
        assert_eq!(h.before_sleep(t, Some(0), Some(0)), None);
        assert_eq!(h.before_sleep(t + MS, Some(1), Some(0)), None);
        assert_eq!(h.before_sleep(t + MS + S, Some(1), Some(0)), Some(0));
        // No home (servers on several CPUs): nowhere to go, and no move to judge later.
        let mut h = LoopHome::default();
        assert_eq!(h.before_sleep(0, Some(1), None), None);
        assert_eq!(h.before_sleep(MS, Some(1), Some(0)), Some(0));
        // Where the loop runs unknown: it stays.
        let mut h = LoopHome::default();
        assert_eq!(h.before_sleep(0, None, Some(0)), None);
        // The back-off never exceeds its longest.
        let mut h = LoopHome::default();
        let mut t = 0;
        for _ in 0..20 {
            h.before_sleep(t, Some(0), Some(0));
            t += MS;
            h.before_sleep(t, Some(1), Some(0));
            t = h.shun_until;
        }
        assert_eq!(h.backoff, HOME_BACKOFF_MAX);
    }

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
