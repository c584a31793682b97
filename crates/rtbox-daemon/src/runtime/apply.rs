//! The mapping of a desired state onto one thread: policy, priority, affinity, freeze.

use std::path::Path;
use std::sync::Arc;

use rtbox_linux::cgroup;
use rtbox_linux::sched::{self, SchedAttr};
use rtbox_linux::stopgroup;
use rtbox_linux::LinuxError;

/// What rtbox last set on a member (or, once decided, wants set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub attr: SchedAttr,
    pub cpus: Vec<u32>,
    pub frozen: bool,
}

/// What a change needs done to the thread, from its previous state `prev` to `want`, given
/// whether its freeze group can be used (`dir_ok`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Stop it at once (the fastest effect first): freeze, or SCHED_IDLE without a group.
    Freeze,
    IdleStop,
    /// Set what differs; `thaw`: the caller thaws it afterwards (under the backstop's lock).
    Set {
        attr: bool,
        cpus: bool,
        thaw: bool,
    },
}

/// The steps from `prev` to `want`. Stopping comes before anything else; without a freeze
/// group the stop was SCHED_IDLE, so the recorded attr is stale and is set again.
pub fn plan(prev: Option<&Applied>, want: &Applied, dir_ok: bool) -> Action {
    let was_frozen = prev.is_some_and(|p| p.frozen);
    if want.frozen && !was_frozen {
        return if dir_ok {
            Action::Freeze
        } else {
            Action::IdleStop
        };
    }
    let idle_stop = was_frozen && !dir_ok;
    Action::Set {
        attr: idle_stop || prev.map(|p| &p.attr) != Some(&want.attr),
        cpus: prev.map(|p| &p.cpus) != Some(&want.cpus) && !want.cpus.is_empty(),
        thaw: was_frozen && !want.frozen && dir_ok,
    }
}

/// Freeze or thaw through the member's kept-open `cgroup.freeze` of its stop group `dir`
/// (opened on first use); on any failure the handle is dropped and the path-based write decides
/// (and reports) the outcome.
pub fn freeze_fast(
    handle: &mut Option<Arc<std::fs::File>>,
    dir: &Path,
    frozen: bool,
) -> Result<(), LinuxError> {
    if handle.is_none() {
        *handle = stopgroup::open_freeze(dir).map(Arc::new);
    }
    if let Some(f) = handle.as_ref() {
        if cgroup::freeze_write(f, frozen).is_ok() {
            return Ok(());
        }
        *handle = None;
    }
    stopgroup::freeze(dir, frozen)
}

/// Change one thread from `prev` to `want`, stopping first when stopping (fastest effect).
/// `freeze_dir` is the member's stop group (`None`: it is stopped by SCHED_IDLE).
/// A thaw is left to the caller (returns `true`): it must happen under the backstop's lock.
pub fn apply_one(
    tid: i32,
    prev: Option<&Applied>,
    want: &Applied,
    freeze_dir: Option<&Path>,
    handle: &mut Option<Arc<std::fs::File>>,
) -> Result<bool, LinuxError> {
    let changing_freeze = want.frozen || prev.is_some_and(|p| p.frozen);
    // A kept handle proves the freeze group exists (saves a stat per decision).
    let dir = freeze_dir.filter(|d| changing_freeze && (handle.is_some() || d.exists()));
    match plan(prev, want, dir.is_some()) {
        Action::Freeze => {
            freeze_fast(handle, dir.expect("dir_ok"), true)?;
            Ok(false)
        }
        // No cgroup v2: the closest stop is SCHED_IDLE (documented as not tight).
        Action::IdleStop => sched::set_attr(tid, &SchedAttr::idle()).map(|_| false),
        Action::Set { attr, cpus, thaw } => {
            if attr {
                sched::set_attr(tid, &want.attr)?;
            }
            if cpus {
                sched::set_affinity(tid, &want.cpus)?;
            }
            Ok(thaw)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fifo(prio: u32, cpus: &[u32], frozen: bool) -> Applied {
        Applied {
            attr: SchedAttr::fifo(prio),
            cpus: cpus.to_vec(),
            frozen,
        }
    }

    #[test]
    fn a_stop_comes_first_and_alone() {
        let prev = fifo(80, &[0], false);
        assert_eq!(
            plan(Some(&prev), &fifo(70, &[1], true), true),
            Action::Freeze
        );
        assert_eq!(
            plan(Some(&prev), &fifo(80, &[0], true), false),
            Action::IdleStop,
            "without a freeze group the stop is SCHED_IDLE"
        );
    }

    #[test]
    fn only_what_differs_is_set_and_a_thaw_is_left_to_the_caller() {
        let prev = fifo(80, &[0], true);
        assert_eq!(
            plan(Some(&prev), &fifo(80, &[1], false), true),
            Action::Set {
                attr: false,
                cpus: true,
                thaw: true
            }
        );
        assert_eq!(
            plan(Some(&prev), &fifo(80, &[0], false), false),
            Action::Set {
                attr: true,
                cpus: false,
                thaw: false
            },
            "an idle stop is undone by setting the attr again"
        );
        assert_eq!(
            plan(None, &fifo(80, &[], false), true),
            Action::Set {
                attr: true,
                cpus: false,
                thaw: false
            },
            "no CPUs: the affinity is left alone"
        );
    }
}
