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
    /// Record thread `tid` as it is now. A fair thread whose slice is the kernel's default is
    /// recorded with `runtime` 0, so that restoring it asks for the default slice again instead
    /// of making the same value a custom slice ([`sched::base_slice`]). A custom slice equal to
    /// the default is recorded as the default too (the value is the same; only a later change of
    /// the kernel's default would tell them apart).
    pub fn capture(tid: i32) -> Result<Self, LinuxError> {
        let st = procfs::stat(tid)?;
        let mut attr = sched::get_attr(tid)?;
        if sched::is_fair(attr.policy)
            && attr.runtime > 0
            && Some(attr.runtime) == sched::base_slice()
        {
            attr.runtime = 0;
        }
        Ok(ThreadSnapshot {
            tid,
            pid: procfs::tgid(tid)?,
            starttime: st.starttime,
            attr,
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
        match self.restore_sched()? {
            Restored::Gone => Ok(Restored::Gone),
            Restored::Done => self.restore_cgroups(layout),
        }
    }

    /// Give the thread back its policy, priority, flags and affinity: plain system calls that
    /// never wait for another thread. Done before any cgroup write when many threads are
    /// restored at once ([`crate::journal::JournalState::restore_all`]): a cgroup move waits
    /// for an RCU grace period, whose kernel threads are normal threads, and members left at
    /// SCHED_FIFO on every CPU keep them off for ~1 s (the kernel's deferred fair server).
    pub fn restore_sched(&self) -> Result<Restored, LinuxError> {
        if !self.alive() {
            return Ok(Restored::Gone);
        }
        let mut first: Option<LinuxError> = None;
        // Policy first: an RT thread could not go back into a v1 cpu cgroup without RT runtime.
        if let Err(e) = sched::set_attr(self.tid, &self.attr) {
            first.get_or_insert(e);
        }
        if let Err(e) = sched::set_affinity(self.tid, &self.affinity) {
            first.get_or_insert(e);
        }
        self.outcome(first)
    }

    /// Give the thread back its v1 cpu cgroup (after [`ThreadSnapshot::restore_sched`]).
    pub fn restore_cgroups(&self, layout: &Layout) -> Result<Restored, LinuxError> {
        let mut first: Option<LinuxError> = None;
        if let Some(orig) = &self.cgroups.v1_cpu {
            let now = cgroup::thread_cgroups(self.tid).ok().and_then(|c| c.v1_cpu);
            if now.as_deref() != Some(orig.as_str()) {
                if let Err(e) = cgroup::v1_cpu_move(layout, self.tid, orig) {
                    first.get_or_insert(e);
                }
            }
        }
        self.outcome(first)
    }

    fn outcome(&self, first: Option<LinuxError>) -> Result<Restored, LinuxError> {
        match first {
            Some(e) if e.is_gone() || !self.alive() => Ok(Restored::Gone),
            Some(e) => Err(e),
            None => Ok(Restored::Done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::{SchedAttr, SCHED_OTHER};

    /// Issue 5 (never leave the system worse): a fair thread with the default slice is
    /// restored with the default slice, not with a custom one of the same length; a thread
    /// with its own custom slice gets that slice back.
    #[test]
    fn a_default_slice_is_not_restored_as_a_custom_one() {
        if !crate::is_root() {
            eprintln!("skipped: changing a thread's policy back from FIFO needs root");
            return;
        }
        let Some(base) = sched::base_slice() else {
            eprintln!("skipped: this kernel reports no fair time slice");
            return;
        };
        let layout = crate::cgroup::detect().expect("cgroup layout");
        for custom in [None, Some(base * 2 + 100_000)] {
            let (tx, rx) = std::sync::mpsc::channel();
            let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
            let t = std::thread::spawn(move || {
                if let Some(slice) = custom {
                    sched::set_attr(
                        0,
                        &SchedAttr {
                            runtime: slice,
                            ..SchedAttr::other(0)
                        },
                    )
                    .expect("custom slice");
                }
                tx.send(sched::gettid()).unwrap();
                done_rx.recv().ok();
            });
            let tid = rx.recv().unwrap();
            let snap = ThreadSnapshot::capture(tid).expect("capture");
            assert_eq!(snap.attr.policy, SCHED_OTHER);
            assert_eq!(
                snap.attr.runtime,
                custom.unwrap_or(0),
                "recorded slice (base {base})"
            );
            sched::set_attr(tid, &SchedAttr::fifo(10)).expect("promote");
            assert_eq!(snap.restore(&layout).expect("restore"), Restored::Done);
            let back = sched::get_attr(tid).expect("read back");
            assert_eq!(back.policy, SCHED_OTHER);
            assert_eq!(back.runtime, custom.unwrap_or(base), "slice after restore");
            done_tx.send(()).unwrap();
            t.join().unwrap();
        }
    }
}
