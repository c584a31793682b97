//! How each member is stopped when its servers are throttled: `cgroup.freeze` of its own stop
//! group, a threaded child of the cgroup it already belongs to (`rtbox_linux::stopgroup`), or,
//! where the kernel refuses such a child, SCHED_IDLE, which moves nothing.
//!
//! Every stop group is recorded in the journal (`JournalState::groups`) before it is made and
//! dropped from it once removed, so a crash of the daemon leaves the watchdog (or the next
//! daemon) the list of groups to empty back into their parents and remove.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rtbox_linux::cgroup::Layout;
use rtbox_linux::snapshot::ThreadSnapshot;
use rtbox_linux::stopgroup::{self, Stop};

/// Each member's stop mechanism, and stop groups still to remove.
#[derive(Debug, Default)]
pub struct Stops {
    by_tid: BTreeMap<i32, Stop>,
    /// The directory of each member's stop group, joined once when it is made: a step looks
    /// it up for every change and thaw (joined each time, 1.7 % of a step, issue 14).
    dirs: BTreeMap<i32, PathBuf>,
    /// Groups of threads that left whose removal failed (an exiting thread is still linked to
    /// its cgroup for a moment): retried at each scan.
    leftover: BTreeSet<i32>,
}

impl Stops {
    /// Before the journal is saved: records in `groups` where the thread's stop group will be
    /// (inside its original v2 cgroup), or its idle stop when there is no v2 cgroup.
    pub fn plan(
        &mut self,
        layout: &Layout,
        snap: &ThreadSnapshot,
        groups: &mut BTreeMap<i32, String>,
    ) {
        let tid = snap.tid;
        match (&layout.v2, &snap.cgroups.v2) {
            (Some(_), Some(current)) => {
                let original = stopgroup::original_of(current);
                groups.insert(tid, stopgroup::group_of(&original, tid));
            }
            (None, _) => {
                self.by_tid.insert(
                    tid,
                    Stop::Idle {
                        reason: "no cgroup v2 hierarchy".into(),
                    },
                );
            }
            (Some(_), None) => {
                self.by_tid.insert(
                    tid,
                    Stop::Idle {
                        reason: "the thread has no cgroup v2 line".into(),
                    },
                );
            }
        }
    }

    /// After the journal is saved: makes the stop group [`Stops::plan`] recorded and moves the
    /// thread into it; where the kernel refuses, the member is stopped by SCHED_IDLE instead.
    pub fn make(&mut self, layout: &Layout, tid: i32, groups: &mut BTreeMap<i32, String>) {
        let Some(group) = groups.get(&tid).cloned() else {
            return;
        };
        let original = stopgroup::original_of(&group);
        let stop = match stopgroup::create(layout, &original, tid) {
            Ok(group) => {
                match stopgroup::dir(layout, &group) {
                    Some(d) => self.dirs.insert(tid, d),
                    None => self.dirs.remove(&tid),
                };
                Stop::Freeze { group }
            }
            Err(e) => {
                groups.remove(&tid);
                let reason = format!("no threaded child allowed in {original} ({e})");
                tracing::info!(tid, %reason, "member stopped by SCHED_IDLE");
                Stop::Idle { reason }
            }
        };
        self.leftover.remove(&tid);
        self.by_tid.insert(tid, stop);
    }

    /// The member's stop mechanism.
    pub fn get(&self, tid: i32) -> Option<&Stop> {
        self.by_tid.get(&tid)
    }

    /// The directory of the member's stop group (`None`: it is stopped by SCHED_IDLE).
    pub fn dir(&self, tid: i32) -> Option<&Path> {
        match self.by_tid.get(&tid)? {
            Stop::Freeze { .. } => self.dirs.get(&tid).map(PathBuf::as_path),
            Stop::Idle { .. } => None,
        }
    }

    /// The member left: its stop group is emptied into its original cgroup and removed (or
    /// kept for [`Stops::retry_removals`] while the kernel refuses).
    pub fn release(&mut self, layout: &Layout, tid: i32, groups: &mut BTreeMap<i32, String>) {
        self.by_tid.remove(&tid);
        self.dirs.remove(&tid);
        let Some(group) = groups.get(&tid) else {
            return;
        };
        match stopgroup::remove(layout, group) {
            Ok(()) => {
                groups.remove(&tid);
                self.leftover.remove(&tid);
            }
            Err(_) => {
                self.leftover.insert(tid);
            }
        }
    }

    /// Member `old` is now thread `new` (an exec by a thread other than its process's
    /// leader, which the kernel ended): its stop group, named after `old`, stays its own. A
    /// group still on record under `new` was the leader's: it is removed first (the leader is
    /// released before the exec completes), and left to the orphan sweep if the kernel still
    /// refuses.
    pub fn rename(
        &mut self,
        layout: &Layout,
        old: i32,
        new: i32,
        groups: &mut BTreeMap<i32, String>,
    ) {
        if let Some(group) = groups.remove(&new) {
            if let Err(e) = stopgroup::remove(layout, &group) {
                tracing::warn!(group, error = %e, "the exec'ed leader's stop group stays until the orphan sweep");
            }
        }
        self.leftover.remove(&new);
        self.by_tid.remove(&new);
        self.dirs.remove(&new);
        if let Some(g) = groups.remove(&old) {
            groups.insert(new, g);
        }
        if let Some(s) = self.by_tid.remove(&old) {
            self.by_tid.insert(new, s);
        }
        if let Some(d) = self.dirs.remove(&old) {
            self.dirs.insert(new, d);
        }
        if self.leftover.remove(&old) {
            self.leftover.insert(new);
        }
    }

    /// Retries the removal of groups whose threads left.
    pub fn retry_removals(&mut self, layout: &Layout, groups: &mut BTreeMap<i32, String>) {
        for tid in std::mem::take(&mut self.leftover) {
            if !self.by_tid.contains_key(&tid) {
                self.release(layout, tid, groups);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtbox_linux::cgroup::{parse_mounts, ThreadCgroups};
    use rtbox_linux::sched::SchedAttr;

    fn snap(tid: i32, v2: Option<&str>) -> ThreadSnapshot {
        ThreadSnapshot {
            tid,
            pid: tid,
            starttime: 1,
            attr: SchedAttr::other(0),
            affinity: vec![0],
            cgroups: ThreadCgroups {
                v2: v2.map(str::to_string),
                v1_cpu: None,
            },
        }
    }

    #[test]
    fn a_group_is_planned_inside_the_original_cgroup_or_the_stop_is_idle() {
        let v2 = parse_mounts("cgroup2 /nonexistent/cg cgroup2 rw 0 0\n");
        let mut s = Stops::default();
        let mut groups = BTreeMap::new();
        s.plan(&v2, &snap(5, Some("/box/app")), &mut groups);
        // A thread a member forked starts in the member's group; its own goes beside it.
        s.plan(&v2, &snap(6, Some("/box/app/rtbox-t5")), &mut groups);
        assert_eq!(groups[&5], "/box/app/rtbox-t5");
        assert_eq!(groups[&6], "/box/app/rtbox-t6");
        // The kernel refuses (here: the cgroup does not exist): idle, nothing recorded.
        s.make(&v2, 5, &mut groups);
        assert_eq!(s.get(5).map(Stop::name), Some("idle"));
        assert!(!groups.contains_key(&5));
        assert!(s.dir(5).is_none());
        let v1 = parse_mounts("cgroup /c/cpu cgroup rw,cpu 0 0\n");
        s.plan(&v1, &snap(7, None), &mut groups);
        assert_eq!(s.get(7).map(Stop::name), Some("idle"));
        assert!(!groups.contains_key(&7));
        // Release of a group that does not exist is not an error and forgets it.
        s.release(&v2, 6, &mut groups);
        assert!(!groups.contains_key(&6));
        assert!(s.get(6).is_none());
    }
}
