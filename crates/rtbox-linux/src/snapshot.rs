//! A thread's original state, taken before rtbox touches it, and its restoration.

use serde::{Deserialize, Serialize};

use crate::cgroup::{self, Layout, ThreadCgroups};
use crate::{procfs, sched, LinuxError};

/// Everything rtbox may change on a thread, as it was before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadSnapshot {
    pub tid: i32,
    /// Its process.
    pub pid: i32,
    /// With `tid`, names the thread uniquely (tids are reused).
    pub starttime: u64,
    pub attr: sched::SchedAttr,
    pub affinity: Vec<u32>,
    pub cgroups: ThreadCgroups,
}

/// What `restore` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restored {
    /// The thread got its original state back.
    Done,
    /// The thread no longer exists (or its tid now names another thread): nothing to do.
    Gone,
}

impl ThreadSnapshot {
    /// Record thread `tid` as it is now.
    pub fn capture(tid: i32) -> Result<Self, LinuxError> {
        let st = procfs::stat(tid)?;
        Ok(ThreadSnapshot {
            tid,
            pid: procfs::tgid(tid)?,
            starttime: st.starttime,
            attr: sched::get_attr(tid)?,
            affinity: sched::get_affinity(tid)?,
            cgroups: cgroup::thread_cgroups(tid)?,
        })
    }

    /// Whether `tid` still names the thread of this snapshot.
    pub fn alive(&self) -> bool {
        procfs::stat(self.tid).is_ok_and(|s| s.starttime == self.starttime)
    }

    /// Give the thread back its policy, priority, flags, v1 cpu cgroup and affinity. (The v2
    /// cgroup is per process: see [`cgroup::freeze_group_remove`].) Every step is tried; the
    /// first error is returned.
    pub fn restore(&self, layout: &Layout) -> Result<Restored, LinuxError> {
        if !self.alive() {
            return Ok(Restored::Gone);
        }
        let mut first: Option<LinuxError> = None;
        // Policy first: an RT thread could not go back into a v1 cpu cgroup without RT runtime.
        if let Err(e) = sched::set_attr(self.tid, &self.attr) {
            first.get_or_insert(e);
        }
        if let Some(orig) = &self.cgroups.v1_cpu {
            let now = cgroup::thread_cgroups(self.tid).ok().and_then(|c| c.v1_cpu);
            if now.as_deref() != Some(orig.as_str()) {
                if let Err(e) = cgroup::v1_cpu_move(layout, self.tid, orig) {
                    first.get_or_insert(e);
                }
            }
        }
        if let Err(e) = sched::set_affinity(self.tid, &self.affinity) {
            first.get_or_insert(e);
        }
        match first {
            Some(e) if e.is_gone() || !self.alive() => Ok(Restored::Gone),
            Some(e) => Err(e),
            None => Ok(Restored::Done),
        }
    }
}
