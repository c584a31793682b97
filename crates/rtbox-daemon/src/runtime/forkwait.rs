//! The loop's sleep also waits on process events, so a thread a member creates is placed when
//! its fork is reported, not at the next step.
//!
//! Why: the kernel reports a fork (proc connector, sent from `copy_process` before the child
//! is first woken) to the loop's socket; drained only at each step, a new thread ran for up to
//! a poll interval (1-4 ms, longer when every server was throttled) in its parent's place with
//! whatever priority it gave itself, uncharged. The loop runs at FIFO 98, above every member,
//! so when it wakes on the event it usually places the child before the child's first
//! instruction on the same CPU, or within the wake-up latency of another vCPU.
//!
//! The proc connector reports every fork and exit of the machine, not only the members'
//! (a busy build forks thousands of times a second): a wake-up that changes no membership
//! only drains the socket and goes back to sleep, without a step.

use std::os::fd::AsFd;

use rtbox_model::Nanos;

use super::Runtime;

impl Runtime {
    /// Sleeps until CLOCK_MONOTONIC `deadline`, a backstop stop, a BPF sensor event, a
    /// process event that changes membership (a member's fork joins, a member exits), or a
    /// socket request (at most one wake-up per [`REQUEST_GAP`]): then the caller's next step
    /// places the new members, or answers the request, at once.
    pub fn wait_until(&mut self, deadline: u64) {
        self.ahead.woke_on_time = false;
        for _ in 0..MAX_IDLE_WAKEUPS {
            let now = rtbox_linux::monotonic_ns();
            let gap_end = self.requests_woke.saturating_add(REQUEST_GAP);
            let requests = self
                .requests
                .as_ref()
                .filter(|_| now >= gap_end)
                .map(|r| r.as_fd());
            // Requests wait for the gap's end (or the deadline) before they may wake it.
            let until = match (&self.requests, requests) {
                (Some(_), None) => deadline.min(gap_end),
                _ => deadline,
            };
            // The BPF sensor's ring buffer, or the perf loop's watch of sleeping members: a
            // member that runs wakes the loop (there is at most one of the two).
            let sensor = super::sensor::wake_fd(self.sensor.as_ref())
                .or_else(|| self.members.switch_watch.as_ref().map(|w| w.fd()));
            let events = self.members.events_fd();
            let (has_sensor, has_events) = (sensor.is_some(), events.is_some());
            let fds: Vec<_> = sensor.into_iter().chain(events).chain(requests).collect();
            let woke = self.guard.sleep_until(until, &fds);
            let woke_at = |i: usize| woke.extra.get(i) == Some(&true);
            let sensor_woke = has_sensor && woke_at(0);
            // Perf's watch: one of the watched sleepers ran (`Members::charge`). Noted whatever
            // else woke the loop: this poll took the watch's readiness (a perf descriptor's is
            // taken by the first poll), so the next sleep would not return for it.
            if sensor_woke && self.sensor.is_none() {
                self.members.watch_woke = true;
            }
            // A backstop stop: the step takes its report now (before, the wake-up was drained
            // and the loop slept on to its own fallback, 0.3-0.4 ms later, a wake-up more).
            if woke.backstop {
                return;
            }
            let events_woke = has_events && woke_at(usize::from(has_sensor));
            let request_woke =
                requests.is_some() && woke_at(usize::from(has_sensor) + usize::from(has_events));
            if request_woke {
                if let Some(r) = &self.requests {
                    r.take();
                }
                self.requests_woke = rtbox_linux::monotonic_ns();
                return;
            }
            if sensor_woke {
                return;
            }
            if events_woke {
                let now = self.now();
                if self.take_membership_events(now) {
                    self.watch_until = now + WATCH;
                    return;
                }
            }
            if rtbox_linux::monotonic_ns() >= deadline {
                // Only a wake-up at the deadline with nothing else to see may take a short
                // step (`ahead.rs`).
                self.ahead.woke_on_time = !woke.backstop && !woke.extra.iter().any(|&r| r);
                return;
            }
        }
        // The socket kept waking the loop with nothing for it: sleep the rest without process
        // events, so a storm of foreign forks (or a socket that stays readable) cannot keep
        // the loop, at FIFO 98, spinning on its CPU.
        self.sleep_until(deadline);
    }

    /// Drains process events now; whether membership changed (joins or exits).
    fn take_membership_events(&mut self, now: Nanos) -> bool {
        let before = (self.members.by_tid.len(), self.members.unplaced);
        self.members.take_events(&mut self.sched, &self.system, now);
        let after = (self.members.by_tid.len(), self.members.unplaced);
        membership_changed(before, after)
    }
}

/// The shortest time between two wake-ups of the loop by socket requests. A request is
/// answered after the step that follows it (`rtbox exec` starts its command placed); waiting
/// for the loop's own wake-up took 4-50 ms (a task's `rt_run` then came after the first release
/// it asked for, measured in the real-kernel Figure 11). Woken by every request, a client that
/// floods the socket would keep the loop, at FIFO 98, stepping without pause: at most one
/// request wake-up per 2 ms bounds that to ~3 % of a CPU (a step costs 40-100 us).
pub const REQUEST_GAP: u64 = 2_000_000;

/// Wake-ups without a membership change one sleep takes before it ignores process events
/// for the rest of that sleep (one sleep lasts at most a poll interval, 1-4 ms).
const MAX_IDLE_WAKEUPS: usize = 32;

/// How long after a member's fork the loop polls fast, and how fast: a new thread usually sets
/// its own policy within its first microseconds to milliseconds (rt-app: right after it starts);
/// seen at the next step (its stat shows the policy), it is re-ranked there. Measured before: a
/// poll interval (1-4 ms) at its own priority, placed and charged but out of its box's order.
pub const WATCH: Nanos = 5_000_000;
pub const WATCH_POLL: Nanos = 250_000;

/// The loop's next wake-up `at`, no later than [`WATCH_POLL`] from `now` while new members are
/// watched (until `watch_until`).
pub fn watch_new_members(at: Nanos, now: Nanos, watch_until: Nanos) -> Nanos {
    if now < watch_until {
        at.min(now + WATCH_POLL)
    } else {
        at
    }
}

/// The process a forked thread belongs to, when the fork created a thread (not a process).
/// Its membership follows that process: the proc connector names as parent the *process's*
/// parent (`task->real_parent`, e.g. the shell or `rtbox exec`), not the thread that called
/// `clone`, so looking the parent up found no member and a member's new threads joined only
/// at the next full /proc scan (measured: 47-160 ms after `pthread_create`).
pub fn thread_of_process(child_tid: i32, child_tgid: i32) -> Option<i32> {
    (child_tid != child_tgid).then_some(child_tgid)
}

/// Membership changed between two (member count, unplaced) readings: a member joined or left,
/// or one is waiting to be placed.
fn membership_changed(before: (usize, bool), after: (usize, bool)) -> bool {
    before.0 != after.0 || (after.1 && !before.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_thread_belongs_to_its_process_a_new_process_to_its_parent() {
        assert_eq!(thread_of_process(101, 100), Some(100));
        assert_eq!(thread_of_process(200, 200), None);
    }

    #[test]
    fn new_members_are_watched_for_a_while() {
        assert_eq!(
            watch_new_members(4_000_000, 1_000_000, 5_000_000),
            1_250_000
        );
        assert_eq!(
            watch_new_members(1_100_000, 1_000_000, 5_000_000),
            1_100_000
        );
        assert_eq!(
            watch_new_members(9_000_000, 6_000_000, 5_000_000),
            9_000_000
        );
    }

    #[test]
    fn only_joins_and_exits_wake_the_step() {
        assert!(
            !membership_changed((3, false), (3, false)),
            "a stranger forked"
        );
        assert!(
            membership_changed((3, false), (4, true)),
            "a member's thread joined"
        );
        assert!(
            membership_changed((3, false), (2, false)),
            "a member exited"
        );
        assert!(
            !membership_changed((3, true), (3, true)),
            "already due for a step"
        );
    }
}
