//! A member's local priority: its rank inside its box. Boxes keep the order of their members'
//! own priorities (any policy inside a box is the box's local policy, OXC), so a member that
//! sets its own RT priority while managed changes its local priority; rtbox then puts it back
//! into its box's band at the new rank instead of forgetting the change.
//!
//! Why this matters, measured: rt-app (like most RT programs) creates its threads and each
//! thread sets its own SCHED_FIFO priority after it starts. rtbox captures a forked thread's
//! policy at the step that sees the fork, usually before the thread sets it, so three of four
//! rt-app threads were captured as normal threads (local priority 0), the same rank as the
//! idle main thread: in a global FIFO box the rate-monotonic order was lost, and t0 (period
//! 25 ms) waited behind t2 and t3 (periods 40 and 50 ms) and missed deadlines.

use rtbox_linux::sched::SchedAttr;

use super::apply::Applied;

/// The local priority a thread's own policy stands for: its RT priority for SCHED_FIFO/RR,
/// 0 for every other policy (normal threads rank below every RT member of the box).
pub fn local_priority(attr: &SchedAttr) -> u32 {
    if attr.is_rt() {
        attr.priority
    } else {
        0
    }
}

/// Rule: the key the core's `edf` local policy orders a member by, when the daemon does not
/// see its jobs' deadlines (native threads: rt-app, `rtbox load`, any program): its local
/// priority, higher first (the core orders smaller keys first). So the core's choice of which
/// ready members of an EDF box get its vCPUs follows the same order as the FIFO ranks inside
/// each vCPU's band. Before (issue 20): every such member had key 0, so the core placed an EDF
/// box's members by wake-up order, and a high-priority member that woke last could wait on a
/// throttled vCPU while lower ones ran on the box's other vCPU (the fidelity experiment's
/// set 14: the top-priority task 2.7-6.5 ms late with no machine stall). An EDF box's native
/// members therefore run as a fixed-priority box of their own priorities (docs/runtime.md,
/// "Known limits").
pub fn native_edf_key(local_prio: u32) -> Option<u64> {
    Some(u64::from(u32::MAX - local_prio))
}

/// The new local priority of a member whose policy reads `current` while rtbox last set
/// `applied`, when the difference is a change of its own (or its program's) priority: `None`
/// when rtbox's setting is still in place, or when the new local priority equals `local`.
pub fn changed_by_member(current: &SchedAttr, applied: &SchedAttr, local: u32) -> Option<u32> {
    if current.same_policy(applied) {
        return None;
    }
    let p = local_priority(current);
    (p != local).then_some(p)
}

/// Whether a member's own (policy, RT priority), as its stat file shows them at every step,
/// differ from what rtbox last set: then it (or its program) changed them, and the step puts it
/// back (re-ranked) at once. Measured: rt-app's threads set their FIFO priority right after
/// they start; found only by the 4 ms scan, they ran that long at their own priority, above or
/// below the box's band.
///
/// Not placed yet (`applied` is `None`): a change is an own (policy, RT priority) other than
/// `joined`, what its join recorded. A new thread is recorded when its fork is seen and placed
/// only after its stop group is made (a cgroup move, 13-64 ms under load), and it usually sets
/// its own priority in between; the first placement then wrote the band priority of the old
/// rank over it and the change was lost for good (issue 20: the fidelity experiment's set 54,
/// whose top-priority task ran at rank 0 and waited behind every lower one for the whole run).
/// Compared with the join's record, not with the local priority: a task-API or plug-in member
/// gets its rank from its declaration, not from its own policy. Unknown (short read): no change.
pub fn own_change(own: Option<(u32, u32)>, applied: Option<&Applied>, joined: (u32, u32)) -> bool {
    match (own, applied) {
        (Some(own), Some(a)) => own != own_policy(&a.attr),
        (Some(own), None) => own != joined,
        _ => false,
    }
}

/// A thread's own (policy, RT priority) as [`own_change`] compares them.
pub fn own_policy(attr: &SchedAttr) -> (u32, u32) {
    (attr.policy, attr.priority)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_setting_its_own_fifo_priority_gets_that_rank() {
        let applied = SchedAttr::fifo(88);
        let own = SchedAttr {
            flags: 0,
            ..SchedAttr::fifo(47)
        };
        assert_eq!(changed_by_member(&own, &applied, 0), Some(47));
    }

    #[test]
    fn rtbox_own_setting_or_an_unchanged_rank_is_no_change() {
        let applied = SchedAttr::fifo(88);
        assert_eq!(changed_by_member(&applied, &applied, 0), None);
        let own = SchedAttr {
            flags: 0,
            ..SchedAttr::fifo(47)
        };
        assert_eq!(changed_by_member(&own, &applied, 47), None);
    }

    #[test]
    fn a_stat_policy_other_than_rtboxs_is_an_own_change() {
        let a = Applied {
            attr: SchedAttr::fifo(62),
            cpus: vec![0],
            frozen: false,
        };
        assert!(!own_change(Some((1, 62)), Some(&a), (0, 0)));
        assert!(
            own_change(Some((1, 50)), Some(&a), (0, 0)),
            "rt-app set FIFO 50"
        );
        assert!(own_change(Some((0, 0)), Some(&a), (0, 0)), "back to normal");
        assert!(!own_change(None, Some(&a), (0, 0)));
    }

    /// Issue 20: a thread that sets its priority between its join and its first placement;
    /// a task-API member's declared rank is no own change.
    #[test]
    fn an_unplaced_member_changes_when_its_policy_differs_from_its_join() {
        let other = (0, 0);
        assert!(own_change(Some((1, 5)), None, other), "set FIFO 5 first");
        assert!(!own_change(Some((1, 5)), None, (1, 5)), "joined at FIFO 5");
        assert!(!own_change(Some(other), None, other), "declared, not set");
        assert!(own_change(Some(other), None, (1, 7)), "went back to normal");
        assert!(!own_change(None, None, (1, 5)), "unknown");
    }

    #[test]
    fn a_higher_local_priority_is_an_earlier_edf_key() {
        assert!(native_edf_key(50) < native_edf_key(49));
        assert!(native_edf_key(99) < native_edf_key(0));
    }

    #[test]
    fn a_member_going_back_to_a_normal_policy_ranks_as_normal() {
        let applied = SchedAttr::fifo(88);
        assert_eq!(
            changed_by_member(&SchedAttr::other(0), &applied, 47),
            Some(0)
        );
        assert_eq!(local_priority(&SchedAttr::idle()), 0);
    }
}
