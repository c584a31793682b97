//! The write-ahead state file: every process and thread rtbox is about to touch is recorded
//! (with its original state) before it is touched, so that a watchdog or a restarted daemon can
//! undo everything after a crash.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cgroup::{self, Layout};
use crate::rtgrant;
use crate::snapshot::{Restored, ThreadSnapshot};
use crate::stopgroup;
use crate::LinuxError;

/// A process whose threads rtbox manages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessEntry {
    /// Its v2 cgroup before it was moved into a freeze group (None: not moved).
    pub v2_original: Option<String>,
    /// Whether a per-process freeze group `<v2>/rtbox/p<pid>` was (or may have been) created.
    /// Only daemons before per-thread stop groups made these; kept so that their journals are
    /// still repaired.
    pub freeze_group: bool,
}

/// The journal's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalState {
    pub layout: Layout,
    pub processes: BTreeMap<i32, ProcessEntry>,
    pub threads: BTreeMap<i32, ThreadSnapshot>,
    /// Stop groups (`crate::stopgroup`) by thread: recorded before each is made, removed
    /// (threads moved back to the parent, their original cgroup) on restore.
    #[serde(default)]
    pub groups: BTreeMap<i32, String>,
    /// RT runtime given to v1 cpu cgroups of members (`crate::rtgrant`), by the member's cgroup:
    /// recorded before it is written, taken back on restore after every policy is back.
    #[serde(default)]
    pub rt_grants: BTreeMap<String, Vec<rtgrant::Increment>>,
}

/// Outcome of undoing a journal.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RestoreReport {
    pub restored: usize,
    pub gone: usize,
    pub errors: Vec<String>,
}

impl JournalState {
    /// Every thread's own policy, priority and affinity back (no cgroup moves); how many got
    /// them back.
    fn restore_sched_all(&self) -> usize {
        self.threads
            .values()
            .filter(|t| matches!(t.restore_sched(), Ok(Restored::Done)))
            .count()
    }

    pub fn new(layout: Layout) -> Self {
        JournalState {
            layout,
            processes: BTreeMap::new(),
            threads: BTreeMap::new(),
            groups: BTreeMap::new(),
            rt_grants: BTreeMap::new(),
        }
    }

    /// Undo everything: first every thread's policy, priority, flags and affinity (so that no
    /// member is left at SCHED_FIFO while the rest waits), then thaw the stop groups, move
    /// their threads back to their original cgroups and remove them (and the per-process
    /// groups older daemons made), then every thread's v1 cpu cgroup.
    ///
    /// Scheduling first because the cgroup writes wait for an RCU grace period, driven by
    /// normal kernel threads: with members still at SCHED_FIFO on every CPU (a killed daemon
    /// no longer throttles them) those wait for the kernel's deferred fair server, ~1 s here.
    /// Measured by the kill -9 storm test before this order: 2 of 24 kills restored after
    /// 933 and 966 ms, the rest within 191 ms.
    pub fn restore_all(&self) -> RestoreReport {
        let mut rep = RestoreReport::default();
        let mut sched_done = Vec::with_capacity(self.threads.len());
        for snap in self.threads.values() {
            sched_done.push(snap.restore_sched());
        }
        // A thread that just exited is still linked to its group for a moment (the kernel
        // refuses the removal, EBUSY): retried, with sleeps, for up to a second (measured: the
        // stops right after rt-app's exit left 2 empty groups behind in 15 stops without the
        // retries).
        let mut left: Vec<(&i32, &String)> = self
            .groups
            .iter()
            .filter(|(_, g)| stopgroup::remove(&self.layout, g).is_err())
            .collect();
        retry_refused(&mut left, |(_, g)| {
            stopgroup::remove(&self.layout, g).is_err()
        });
        for (tid, group) in left {
            if let Err(e) = stopgroup::remove(&self.layout, group) {
                rep.errors
                    .push(format!("thread {tid}: stop group {group}: {e}"));
            }
        }
        for (pid, p) in &self.processes {
            if p.freeze_group {
                if let Err(e) =
                    cgroup::freeze_group_remove(&self.layout, *pid, p.v2_original.as_deref())
                {
                    rep.errors.push(format!("process {pid}: {e}"));
                }
            }
        }
        cgroup::remove_rtbox_root(&self.layout);
        // A member that just exited still holds its cgroup's RT runtime for a moment: the
        // refused take-backs are retried like the stop groups above.
        let mut grants: Vec<(&String, Vec<rtgrant::Increment>)> = self
            .rt_grants
            .iter()
            .map(|(cg, incs)| (cg, rtgrant::undo_partial(&self.layout, incs).0))
            .filter(|(_, left)| !left.is_empty())
            .collect();
        retry_refused(&mut grants, |(_, left)| {
            *left = rtgrant::undo_partial(&self.layout, left).0;
            !left.is_empty()
        });
        for (cg, left) in grants {
            if let Err(e) = rtgrant::undo(&self.layout, &left) {
                rep.errors
                    .push(format!("RT runtime of v1 cpu cgroup {cg}: {e}"));
            }
        }
        for (snap, first) in self.threads.values().zip(sched_done) {
            let r = match first {
                Ok(Restored::Done) => snap.restore_cgroups(&self.layout),
                Ok(Restored::Gone) => Ok(Restored::Gone),
                // Every step is tried; the first error is reported.
                Err(e) => snap.restore_cgroups(&self.layout).and(Err(e)),
            };
            match r {
                Ok(Restored::Done) => rep.restored += 1,
                Ok(Restored::Gone) => rep.gone += 1,
                Err(e) => rep.errors.push(format!("thread {}: {e}", snap.tid)),
            }
        }
        rep
    }
}

/// Retries of a refused stop-group removal or RT-runtime take-back at restore, 20 ms apart.
const GROUP_RETRIES: usize = 50;

/// Retries `refused` on each of `items` every 20 ms, [`GROUP_RETRIES`] times at most, keeping
/// the items the kernel still refuses (an exiting thread holds its cgroups for a moment).
fn retry_refused<T>(items: &mut Vec<T>, mut refused: impl FnMut(&mut T) -> bool) {
    for _ in 0..GROUP_RETRIES {
        if items.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        items.retain_mut(&mut refused);
    }
}

/// The state file on disk.
#[derive(Debug, Clone)]
pub struct Journal {
    path: PathBuf,
}

impl Journal {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Journal { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write atomically (a second file, then an atomic exchange with the state file): a crash of
    /// the daemon leaves the old or the new state, whole, for the watchdog or the next daemon.
    ///
    /// No fsync, on purpose. The enforcement loop saves the journal whenever a member joins
    /// (a thread forked by a member, at the step that sees the fork), and an fsync waits for a
    /// disk cache flush: measured on this VM's ext4 while other processes write, the loop stood
    /// in `blkdev_issue_flush` for ~1 s, and meanwhile the new threads ran unplaced at their own
    /// priorities on their parent's CPU (the lowest one starved: 30-70 deadline misses in the
    /// first second of an rt-app run). What the journal protects are live threads, which a power
    /// loss or kernel crash ends anyway; surviving a crash of the daemon's process needs only the
    /// page cache, which the exchange updates atomically for every later reader.
    pub fn save(&self, state: &JournalState) -> Result<(), LinuxError> {
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir).map_err(|e| LinuxError::io(dir, e))?;
        }
        let tmp = self.tmp_path();
        let text = serde_json::to_vec(state).map_err(|e| LinuxError::Invalid(e.to_string()))?;
        // Rewritten in place (no O_TRUNC) and then exchanged with the state file: no inode and
        // no block is freed per save. Freeing them made ext4 on this VM (mounted `discard`)
        // issue a synchronous discard inside the loop's save: measured 10-15 ms stalls.
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&tmp)
            .map_err(|e| LinuxError::io(&tmp, e))?;
        f.write_all(&text).map_err(|e| LinuxError::io(&tmp, e))?;
        f.set_len(text.len() as u64)
            .map_err(|e| LinuxError::io(&tmp, e))?;
        drop(f);
        exchange_or_rename(&tmp, &self.path).map_err(|e| LinuxError::io(&self.path, e))
    }

    /// The file each save writes before it becomes the state file (holds the previous state
    /// afterwards, which nothing reads).
    fn tmp_path(&self) -> PathBuf {
        self.path.with_extension("tmp")
    }

    /// Read the state file; `Ok(None)` when there is none.
    pub fn load(&self) -> Result<Option<JournalState>, LinuxError> {
        match fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| LinuxError::Parse {
                    path: self.path.clone(),
                    what: format!("journal ({e})"),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(LinuxError::io(&self.path, e)),
        }
    }

    /// Remove the state file (nothing left to undo) and the previous state kept beside it.
    pub fn clear(&self) -> Result<(), LinuxError> {
        let _ = fs::remove_file(self.tmp_path());
        match fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(LinuxError::io(&self.path, e)),
        }
    }

    /// Give every recorded thread back its policy, priority, flags and affinity, and leave the
    /// rest (cgroups, the file) for [`Journal::repair`]. For a daemon that is dying but not yet
    /// dead; returns how many threads were restored.
    pub fn restore_sched(&self) -> Result<usize, LinuxError> {
        Ok(self.load()?.map_or(0, |state| state.restore_sched_all()))
    }

    /// The daemon is stopped: every thread gets its own scheduling back (as
    /// [`Journal::restore_sched`]) and every stop group is thawed; nothing moves, and the
    /// journal stays for the daemon, which takes up its members again when it continues.
    /// Returns how many threads got their scheduling back.
    pub fn release_stopped(&self) -> Result<usize, LinuxError> {
        let Some(state) = self.load()? else {
            return Ok(0);
        };
        for group in state.groups.values() {
            if let Some(dir) = crate::stopgroup::dir(&state.layout, group) {
                let _ = crate::stopgroup::freeze(&dir, false);
            }
        }
        Ok(state.restore_sched_all())
    }

    /// Undo a leftover journal (a crashed daemon's) and remove it. `Ok(None)`: nothing left.
    pub fn repair(&self) -> Result<Option<RestoreReport>, LinuxError> {
        let Some(state) = self.load()? else {
            return Ok(None);
        };
        let rep = state.restore_all();
        self.clear()?;
        Ok(Some(rep))
    }
}

/// Atomically swaps `from` and `to` (`renameat2(RENAME_EXCHANGE)`), or renames `from` to `to`
/// when `to` does not exist yet or the file system cannot exchange.
fn exchange_or_rename(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let cstr = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes());
    let (a, b) = (cstr(from)?, cstr(to)?);
    // SAFETY: both paths are valid NUL-terminated strings for the duration of the call.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    fs::rename(from, to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_round_trips_and_clears() {
        let dir = std::env::temp_dir().join(format!("rtbox-journal-{}", std::process::id()));
        let j = Journal::new(dir.join("state.json"));
        assert_eq!(j.load().unwrap(), None);
        let mut s = JournalState::new(cgroup::parse_mounts(""));
        s.processes.insert(
            7,
            ProcessEntry {
                v2_original: Some("/a".into()),
                freeze_group: true,
            },
        );
        j.save(&s).unwrap();
        assert_eq!(j.load().unwrap(), Some(s.clone()));
        // A second, shorter save replaces the first whole (exchange with the kept file,
        // rewritten in place and cut to length).
        let mut shorter = s.clone();
        shorter.processes.clear();
        j.save(&shorter).unwrap();
        assert_eq!(j.load().unwrap(), Some(shorter.clone()));
        s.processes.insert(8, s.processes[&7].clone());
        j.save(&s).unwrap();
        assert_eq!(j.load().unwrap(), Some(s));
        j.save(&shorter).unwrap();
        assert_eq!(j.load().unwrap(), Some(shorter));
        j.clear().unwrap();
        assert!(!j.tmp_path().exists());
        assert_eq!(j.load().unwrap(), None);
        fs::write(j.path(), b"{not json").unwrap();
        assert!(matches!(j.load(), Err(LinuxError::Parse { .. })));
        let _ = fs::remove_dir_all(dir);
    }
}
