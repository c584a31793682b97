//! How the enforcement loop leaves real-time priority before it restores anything.
//!
//! Rule: the stop never runs at the loop's SCHED_FIFO priority. Restoring the members, stopping
//! the backstop threads, emptying and removing stop groups and the process's own exit wait in
//! the kernel for other threads: the per-CPU backstop threads (FIFO 97) as they exit, kernel
//! workers, RCU. This kernel runs without kernel preemption (`Dynamic Preempt: none`), so a
//! thread in a kernel retry loop gives its CPU away only at `cond_resched()`, and only to a
//! thread above it. The loop at FIFO 98, pinned to the CPU of a backstop thread it waits for,
//! spun there without end (twice in the fidelity experiment: 193 s and 708 s of system time,
//! SIGKILL not acted on since the thread never left the kernel); lowering it to SCHED_OTHER by
//! hand let it finish at once. So the loop gives up its pin and its priority first: whatever it
//! waits for can then run. A normal thread still gets CPU beside real-time members (the kernel's
//! fair server gives normal threads 50 ms of every second on each CPU), so the stop cannot hang
//! on them, only slow down while they run.

use rtbox_linux::sched::{self, SchedAttr};

/// Gives the calling thread (the loop, unpinned by the caller first) `normal`: its policy
/// before it was raised, or SCHED_OTHER if that was real-time too.
pub fn leave_realtime(normal: &SchedAttr) {
    let attr = if sched::is_fair(normal.policy) {
        *normal
    } else {
        SchedAttr::other(0)
    };
    if let Err(e) = sched::set_attr(0, &attr) {
        tracing::warn!(error = %e, "stopping: cannot leave SCHED_FIFO; restoring at FIFO");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The loop thread leaves FIFO for its normal policy, and a real-time "normal" (a daemon
    /// started under chrt) still ends at SCHED_OTHER.
    #[test]
    fn the_loop_leaves_fifo_for_a_normal_policy() {
        if !rtbox_linux::is_root() {
            eprintln!("skipping: needs root (SCHED_FIFO)");
            return;
        }
        // A thread of its own: the test harness's thread keeps its policy.
        std::thread::spawn(|| {
            for before in [SchedAttr::other(0), SchedAttr::fifo(10)] {
                sched::set_attr(0, &SchedAttr::fifo(1)).expect("fifo");
                leave_realtime(&before);
                let now = sched::get_attr(0).unwrap();
                assert!(sched::is_fair(now.policy), "{now:?} after {before:?}");
            }
        })
        .join()
        .unwrap();
    }
}
