//! The loop's spin guard: a thread that lowers the enforcement loop when it spins in the kernel
//! waiting for a thread below it on its own CPU, and lets the loop take its priority back.
//!
//! Why (issue 20, reproduced): this kernel runs without kernel preemption (`Dynamic Preempt:
//! none`), so a thread in a kernel retry loop gives its CPU away only at `cond_resched()`, and
//! only to a thread above it. When a member exits, the loop's next look at its /proc entries
//! (`/proc/<tid>/stat` by path) finds their cached dentries stale and invalidates them; the
//! invalidation (`d_invalidate` -> `shrink_dcache_parent`) retries until entries another task is
//! tearing down are gone. Caught with `perf record -g` on the spinning loop: the loop (FIFO 98,
//! pinned to CPU 0) in `openat` -> `d_invalidate` -> `shrink_dcache_parent` -> `d_walk`, for
//! 600+ s of system time, while the exiting member (rt-app at FIFO 89 in the box's band,
//! allowed only on CPU 0) waited preempted in its `exit_mmap`. Lowering the loop below the
//! member (`chrt -f -p 1`) let the member finish and the loop at once. Any /proc path the loop
//! reads can meet this, and an exiting thread can be on the loop's CPU below it at any time, so
//! the loop cannot avoid it by what it reads; the guard undoes it when it happens.
//!
//! Rule: when the loop has used [`SPIN_CPU`] of CPU without finishing an iteration (it spins, it
//! does not sleep: its steps take well under 1 ms of CPU), it is lowered to SCHED_FIFO 1 (below
//! every member and backstop thread); after another [`SPIN_CPU`] still inside that iteration, to
//! SCHED_OTHER (below normal threads too: a normal thread is what it waits for). The loop takes
//! its priority back at the start of its next iteration ([`SpinGuard::beat`]).
//!
//! The guard runs at SCHED_FIFO 99, not pinned, so it runs beside a loop that spins on one CPU.
//! It sleeps on an alarm on the loop's CPU clock ([`CpuAlarm`]), so it wakes once per
//! [`SPIN_CPU`] of the loop's CPU (every 3-20 s for the loop's usual 0.4-3 %), not on a wall
//! clock: each wake-up costs ~50 us on this VM, and waking every 100 ms was 0.0005 CPU, half the
//! daemon's budget for a 20 ms / 100 ms box (issue 14). A spin is caught after one to two
//! [`SPIN_CPU`] of it (the alarm may have been armed before the iteration began).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use rtbox_linux::cpuclock::{AlarmWaker, CpuAlarm, CpuClock};
use rtbox_linux::sched::{self, SchedAttr};

/// CPU time the loop may use inside one iteration before it counts as spinning. Its steps take
/// well under 1 ms; a cgroup move may wait 13-64 ms for an RCU grace period, but sleeping, so it
/// uses no CPU.
pub const SPIN_CPU: u64 = 80_000_000;

/// Priority of the guard thread: above the loop, so that it runs beside (or preempts) it.
pub const GUARD_PRIO: u32 = 99;

/// The level the guard lowers the loop to after `windows` spinning windows in a row.
pub fn lowered_to(windows: u32) -> Option<SchedAttr> {
    match windows {
        0 => None,
        1 => Some(SchedAttr::fifo(1)),
        _ => Some(SchedAttr::other(0)),
    }
}

#[derive(Default)]
struct Shared {
    /// CLOCK_MONOTONIC of the loop's last iteration start.
    beat: AtomicU64,
    /// Set by the guard when it lowered the loop; taken back by the loop.
    lowered: AtomicBool,
    /// Times the loop was found spinning (and lowered).
    caught: AtomicU64,
    stop: AtomicBool,
}

/// The guard thread and what it shares with the loop.
pub struct SpinGuard {
    shared: Arc<Shared>,
    loop_tid: i32,
    loop_attr: SchedAttr,
    /// Ends the guard's wait when it is dropped.
    waker: AlarmWaker,
    thread: Option<JoinHandle<()>>,
}

impl SpinGuard {
    /// Starts guarding the calling thread (the loop), whose normal priority is `loop_attr`.
    pub fn start(loop_attr: SchedAttr) -> Option<SpinGuard> {
        let clock = CpuClock::of_this_thread()?;
        let loop_tid = sched::gettid();
        let shared = Arc::new(Shared::default());
        shared
            .beat
            .store(rtbox_linux::monotonic_ns(), Ordering::SeqCst);
        let s = shared.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("rtbox-spinguard".into())
            .spawn(move || {
                let _ = sched::set_attr(0, &SchedAttr::fifo(GUARD_PRIO));
                match CpuAlarm::new(clock) {
                    Ok(alarm) => {
                        let _ = ready_tx.send(Some(alarm.waker()));
                        watch(&s, alarm, loop_tid);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "no spin guard: its CPU-time alarm failed");
                        let _ = ready_tx.send(None);
                    }
                }
            })
            .ok()?;
        let waker = ready_rx.recv().ok().flatten()?;
        Some(SpinGuard {
            shared,
            loop_tid,
            loop_attr,
            waker,
            thread: Some(thread),
        })
    }

    /// The loop starts an iteration: it takes back its priority if the guard lowered it.
    pub fn beat(&self) {
        self.shared
            .beat
            .store(rtbox_linux::monotonic_ns(), Ordering::SeqCst);
        if self.shared.lowered.swap(false, Ordering::SeqCst) {
            let _ = sched::set_attr(self.loop_tid, &self.loop_attr);
            tracing::warn!(
                times = self.caught(),
                "the loop spun in the kernel waiting for a thread below it on its CPU; it was \
                 lowered until it got through, and has its priority back"
            );
        }
    }

    /// Times the guard found the loop spinning.
    pub fn caught(&self) -> u64 {
        self.shared.caught.load(Ordering::SeqCst)
    }
}

impl Drop for SpinGuard {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The guard thread: each time the loop has used [`SPIN_CPU`] more, did it beat meanwhile? If
/// not, lower it a level.
fn watch(s: &Shared, mut alarm: CpuAlarm, loop_tid: i32) {
    let mut beat_seen = s.beat.load(Ordering::SeqCst);
    let mut windows = 0u32;
    while !s.stop.load(Ordering::SeqCst) {
        if let Err(e) = alarm.arm_after(SPIN_CPU).and_then(|()| alarm.wait()) {
            tracing::warn!(error = %e, "the spin guard stops: its CPU-time alarm failed");
            return;
        }
        if s.stop.load(Ordering::SeqCst) {
            return;
        }
        let beat = s.beat.load(Ordering::SeqCst);
        if beat != beat_seen {
            // The loop got through an iteration: the CPU was spread over several.
            beat_seen = beat;
            windows = 0;
            continue;
        }
        windows += 1;
        if windows == 1 {
            s.caught.fetch_add(1, Ordering::SeqCst);
        }
        if let Some(attr) = lowered_to(windows) {
            // Flagged before and after: a beat between the two takes its priority back early
            // (harmless), and a lowering is never left unflagged.
            s.lowered.store(true, Ordering::SeqCst);
            let _ = sched::set_attr(loop_tid, &attr);
            s.lowered.store(true, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spin_lowers_to_fifo_1_then_to_a_normal_policy() {
        assert_eq!(lowered_to(0), None);
        assert_eq!(lowered_to(1), Some(SchedAttr::fifo(1)));
        assert_eq!(lowered_to(2), Some(SchedAttr::other(0)));
        assert_eq!(lowered_to(7), Some(SchedAttr::other(0)));
    }

    /// A "loop" at FIFO 50 that spins without an iteration (here in user space, as it would in
    /// the kernel) is lowered within a few windows, and takes its priority back at its next
    /// beat.
    #[test]
    fn a_spinning_loop_is_lowered_and_takes_its_priority_back() {
        if !rtbox_linux::is_root() {
            eprintln!("skipping: needs root (SCHED_FIFO)");
            return;
        }
        // A real FIFO thread spinning: the machine-wide real-runtime turn.
        let _turn = rtbox_linux::lock::realtime_turn().expect("real-runtime lock");
        std::thread::spawn(|| {
            let fifo = SchedAttr::fifo(50);
            sched::set_attr(0, &fifo).expect("fifo");
            let g = SpinGuard::start(fifo).expect("guard");
            let t0 = rtbox_linux::monotonic_ns();
            let mut lowered_after = None;
            while rtbox_linux::monotonic_ns() - t0 < 10 * SPIN_CPU {
                std::hint::spin_loop();
                if !sched::get_attr(0).unwrap().same_policy(&fifo) {
                    lowered_after = Some(rtbox_linux::monotonic_ns() - t0);
                    break;
                }
            }
            let after = lowered_after.expect("a spinning loop was not lowered");
            // One to two SPIN_CPU of spinning, plus a tick for the alarm; a FIFO 50 thread
            // has its CPU even beside hogs of normal policy.
            assert!(after <= 4 * SPIN_CPU, "lowered after {after} ns");
            assert_eq!(g.caught(), 1);
            g.beat();
            assert!(
                sched::get_attr(0).unwrap().same_policy(&fifo),
                "priority back"
            );
            drop(g);
            let _ = sched::set_attr(0, &SchedAttr::other(0));
        })
        .join()
        .unwrap();
    }
}
