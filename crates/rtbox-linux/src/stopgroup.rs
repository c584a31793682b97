//! A member thread's own stop group, inside the cgroup it already belongs to.
//!
//! Hard-mode throttling must stop single threads. cgroup v2 freezes whole cgroups, so each
//! member thread gets a cgroup of its own: a *threaded* child `rtbox-t<tid>` of the thread's
//! own v2 cgroup (`Documentation/admin-guide/cgroup-v2.rst`, "Threads": inside a threaded
//! subtree the threads of one process may sit in different cgroups, and the parent stays the
//! resource domain that every controller and every count of the subtree is charged to). The
//! thread never leaves its original cgroup's subtree, so the memory and pids limits, `cpu.stat`
//! and the container runtime's accounting (`podman stats`) keep counting it, and its v1 lines
//! are never touched.
//!
//! The kernel refuses a threaded child ([`create`] fails, nothing is left behind) where the
//! parent cannot become a threaded domain: it has populated domain (non-threaded) children,
//! or non-threaded controllers enabled for its children (`cgroup_can_be_thread_root()` in
//! `kernel/cgroup/cgroup.c`). Such a member is stopped without moving it ([`Stop::Idle`]).
//! While a threaded child exists its parent cannot get new populated domain children (they are
//! "domain invalid"); the groups are removed when the members are released.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cgroup::Layout;
use crate::LinuxError;

/// The name of a member's stop group: this prefix and its tid.
pub const PREFIX: &str = "rtbox-t";

/// How a member is stopped when its servers are throttled (hard mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mechanism", rename_all = "lowercase")]
pub enum Stop {
    /// `cgroup.freeze` of its own threaded child `group` (relative to the v2 root) of its
    /// original v2 cgroup.
    Freeze { group: String },
    /// No group could be made (`reason`): the member is demoted to SCHED_IDLE while throttled.
    /// Nothing is moved; the stop is not tight (it runs when its CPU is otherwise idle).
    Idle { reason: String },
}

impl Stop {
    /// The mechanism's name as `rtbox status` shows it.
    pub fn name(&self) -> &'static str {
        match self {
            Stop::Freeze { .. } => "freeze",
            Stop::Idle { .. } => "idle",
        }
    }
}

fn join(root: &Path, rel: &str) -> PathBuf {
    root.join(rel.trim_start_matches('/'))
}

/// Whether a path component is a stop group's name.
fn is_group_name(name: &str) -> bool {
    name.strip_prefix(PREFIX)
        .is_some_and(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
}

/// The cgroup a thread belongs to apart from rtbox: its v2 path with trailing stop groups
/// removed. A thread or process forked by a member starts in the member's stop group; its
/// original cgroup is the member's.
pub fn original_of(rel: &str) -> String {
    let mut parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    while parts.last().is_some_and(|p| is_group_name(p)) {
        parts.pop();
    }
    format!("/{}", parts.join("/"))
}

/// The thread whose stop group a thread in v2 cgroup `rel` sits in: the last component's tid
/// (`None` outside stop groups). A thread forked by a member starts in the member's group, and
/// one that called exec stays in its own.
pub fn owner_of(rel: &str) -> Option<i32> {
    let last = rel.trim_end_matches('/').rsplit('/').next()?;
    if !is_group_name(last) {
        return None;
    }
    last.strip_prefix(PREFIX)?.parse().ok()
}

/// The stop group of thread `tid` whose original v2 cgroup is `original` (relative path).
pub fn group_of(original: &str, tid: i32) -> String {
    let base = original.trim_end_matches('/');
    format!("{base}/{PREFIX}{tid}")
}

fn write(path: &Path, value: &str) -> Result<(), LinuxError> {
    fs::write(path, value).map_err(|e| LinuxError::io(path, e))
}

/// Make `tid`'s stop group inside its original cgroup `original` and move the thread into it.
/// On refusal nothing is left behind (the new directory is removed) and the error names the
/// file the kernel refused.
pub fn create(layout: &Layout, original: &str, tid: i32) -> Result<String, LinuxError> {
    let v2 = layout
        .v2
        .as_ref()
        .ok_or_else(|| LinuxError::Invalid("no cgroup v2 hierarchy".into()))?;
    let rel = group_of(original, tid);
    let dir = join(v2, &rel);
    let made = match fs::create_dir(&dir) {
        Ok(()) => true,
        // Left by a thread with the same tid that exited while managed: reused.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(LinuxError::io(&dir, e)),
    };
    let placed = write(&dir.join("cgroup.type"), "threaded")
        .and_then(|()| write(&dir.join("cgroup.threads"), &tid.to_string()));
    match placed {
        Ok(()) => Ok(rel),
        Err(e) => {
            if made {
                let _ = fs::remove_dir(&dir);
            }
            Err(e)
        }
    }
}

/// The directory of a stop group (`None` without a v2 hierarchy).
pub fn dir(layout: &Layout, group: &str) -> Option<PathBuf> {
    Some(join(layout.v2.as_ref()?, group))
}

/// The kept-open `cgroup.freeze` of the stop group at `dir` (`None` when it does not exist).
/// Freezing and thawing up to every period through a kept file saves the path lookup, open and
/// close of each stop and restart.
pub fn open_freeze(dir: &Path) -> Option<fs::File> {
    fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.freeze"))
        .ok()
}

/// Freeze or thaw the stop group at `dir` by its path.
pub fn freeze(dir: &Path, frozen: bool) -> Result<(), LinuxError> {
    write(&dir.join("cgroup.freeze"), if frozen { "1" } else { "0" })
}

/// Thaw a stop group, move every thread in it (the member, and any thread or process it forked
/// that was not yet taken over) back to its parent, the original cgroup, and remove it.
/// A group that no longer exists is not an error.
pub fn remove(layout: &Layout, group: &str) -> Result<(), LinuxError> {
    let Some(v2) = layout.v2.as_ref() else {
        return Ok(());
    };
    let dir = join(v2, group);
    if !dir.is_dir() {
        return Ok(());
    }
    let parent = dir.parent().map(Path::to_path_buf).unwrap_or(v2.clone());
    let _ = fs::write(dir.join("cgroup.freeze"), "0");
    let mut first: Option<LinuxError> = None;
    // A thread may fork while it is moved: read the list until it is empty (bounded).
    for _ in 0..8 {
        let Ok(text) = fs::read_to_string(dir.join("cgroup.threads")) else {
            break;
        };
        let tids: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        if tids.is_empty() {
            break;
        }
        for t in tids {
            if let Err(e) = write(&parent.join("cgroup.threads"), t) {
                // ESRCH: the thread is gone, nothing to move back.
                if !e.is_gone() {
                    first.get_or_insert(e);
                }
            }
        }
    }
    if let Err(e) = fs::remove_dir(&dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            first.get_or_insert(LinuxError::io(&dir, e));
        }
    }
    match first {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Removes stop groups that outlived their thread anywhere in the v2 hierarchy: named like a
/// stop group, holding no thread, and the thread of that name gone. A daemon that stopped while
/// the kernel still linked an exiting member to its group (rmdir refused with EBUSY), or one
/// that was killed before its watchdog ran, leaves such groups; each one keeps its parent a
/// threaded domain, so the parent cannot get new populated domain children (a container
/// runtime's next cgroup there would fail). Called at the daemon's start and stop. Returns how
/// many were removed.
pub fn sweep_orphans(layout: &Layout) -> usize {
    let Some(v2) = layout.v2.as_ref() else {
        return 0;
    };
    let mut removed = 0;
    let mut stack = vec![v2.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        for e in rd.filter_map(|e| e.ok()) {
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            if !is_group_name(&name) {
                stack.push(e.path());
                continue;
            }
            if is_orphan(&e.path(), &name) && fs::remove_dir(e.path()).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

/// A stop group no thread needs: empty, and its thread gone (a live thread's group may be
/// empty for an instant between its creation and the thread's move into it).
fn is_orphan(dir: &Path, name: &str) -> bool {
    let tid = &name[PREFIX.len()..];
    let empty = fs::read_to_string(dir.join("cgroup.threads")).is_ok_and(|t| t.trim().is_empty());
    empty && !Path::new("/proc").join(tid).exists()
}

/// The rule membership keeps, checked on two readings of `/proc/PID/cgroup` (before rtbox
/// touched the thread, and now): every v1 line is unchanged, and the v2 line is the original
/// cgroup or inside its subtree. The error names the line that breaks it.
pub fn keeps_cgroups(before: &str, now: &str) -> Result<(), String> {
    let split = |t: &str| -> (Vec<String>, Option<String>) {
        let mut v1 = Vec::new();
        let mut v2 = None;
        for l in t.lines().filter(|l| !l.is_empty()) {
            match l.strip_prefix("0::") {
                Some(p) => v2 = Some(p.to_string()),
                None => v1.push(l.to_string()),
            }
        }
        (v1, v2)
    };
    let (b1, b2) = split(before);
    let (n1, n2) = split(now);
    if let Some((b, n)) = b1.iter().zip(&n1).find(|(b, n)| b != n) {
        return Err(format!("v1 line changed: {b} -> {n}"));
    }
    if b1.len() != n1.len() {
        return Err(format!("v1 lines changed: {b1:?} -> {n1:?}"));
    }
    match (b2, n2) {
        (None, None) => Ok(()),
        (Some(b), Some(n)) => {
            let inside = n == b
                || b == "/"
                || n.strip_prefix(b.as_str())
                    .is_some_and(|rest| rest.starts_with('/'));
            if inside {
                Ok(())
            } else {
                Err(format!("v2 line left its cgroup: 0::{b} -> 0::{n}"))
            }
        }
        (b, n) => Err(format!("v2 line changed: {b:?} -> {n:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_accepts_the_subtree_and_nothing_else() {
        let before = "4:memory:/m\n1:cpu:/c\n0::/box/app\n";
        assert!(keeps_cgroups(before, before).is_ok());
        assert!(keeps_cgroups(before, "4:memory:/m\n1:cpu:/c\n0::/box/app/rtbox-t5\n").is_ok());
        let e = keeps_cgroups(before, "4:memory:/m\n1:cpu:/\n0::/box/app\n").unwrap_err();
        assert!(e.contains("v1 line changed: 1:cpu:/c -> 1:cpu:/"), "{e}");
        let e = keeps_cgroups(before, "4:memory:/m\n1:cpu:/c\n0::/rtbox/p5\n").unwrap_err();
        assert!(e.contains("left its cgroup"), "{e}");
        assert!(keeps_cgroups(before, "4:memory:/m\n1:cpu:/c\n0::/box/application\n").is_err());
        assert!(keeps_cgroups("0::/\n", "0::/rtbox-t9\n").is_ok());
    }

    #[test]
    fn the_original_cgroup_is_the_path_without_stop_groups() {
        assert_eq!(original_of("/"), "/");
        assert_eq!(original_of("/rtbox-t42"), "/");
        assert_eq!(original_of("/a/b/rtbox-t42"), "/a/b");
        assert_eq!(original_of("/a/rtbox-t42/rtbox-t43"), "/a");
        assert_eq!(original_of("/a/rtbox-tx"), "/a/rtbox-tx", "not ours");
        assert_eq!(original_of("/a/rtbox-t"), "/a/rtbox-t", "not ours");
        assert_eq!(original_of("/rtbox-t1/app"), "/rtbox-t1/app");
        assert_eq!(group_of("/", 7), "/rtbox-t7");
        assert_eq!(group_of("/a/b", 7), "/a/b/rtbox-t7");
        assert_eq!(owner_of("/a/b/rtbox-t42"), Some(42));
        assert_eq!(owner_of("/rtbox-t42/"), Some(42));
        assert_eq!(owner_of("/rtbox-t1/app"), None, "inside another cgroup");
        assert_eq!(owner_of("/a/rtbox-tx"), None, "not ours");
        assert_eq!(owner_of("/"), None);
        assert_eq!(original_of(&group_of("/a/b", 7)), "/a/b");
    }

    #[test]
    fn mechanisms_serialize_with_their_name() {
        let f = Stop::Freeze {
            group: "/x/rtbox-t1".into(),
        };
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["mechanism"], "freeze");
        assert_eq!(v["group"], "/x/rtbox-t1");
        assert_eq!(f.name(), "freeze");
        let i = Stop::Idle {
            reason: "no v2".into(),
        };
        assert_eq!(serde_json::to_value(&i).unwrap()["mechanism"], "idle");
    }

    /// The cgroup layout and its v2 hierarchy for a test that creates cgroups; `None`, saying
    /// why, when not root or without v2.
    fn root_v2() -> Option<(Layout, PathBuf)> {
        if !crate::is_root() {
            eprintln!("skipped: creating cgroups needs root");
            return None;
        }
        let layout = crate::cgroup::detect().unwrap();
        let Some(v2) = layout.v2.clone() else {
            eprintln!("skipped: no cgroup v2 hierarchy on this machine");
            return None;
        };
        Some((layout, v2))
    }

    /// The sweep removes an empty group whose thread is gone and keeps one whose thread lives
    /// (it may be empty for an instant before its thread moves in).
    #[test]
    fn the_sweep_removes_groups_of_gone_threads_only() {
        let Some((layout, v2)) = root_v2() else {
            return;
        };
        let base = join(&v2, &format!("/rtbox-sweep-test-{}", std::process::id()));
        fs::create_dir(&base).unwrap();
        // A tid above every live one: pid_max is at most 2^22.
        let gone = (4_194_000..4_194_300)
            .find(|t| !Path::new(&format!("/proc/{t}")).exists())
            .unwrap();
        let live = std::process::id();
        let gone_dir = base.join(format!("{PREFIX}{gone}"));
        let live_dir = base.join(format!("{PREFIX}{live}"));
        fs::create_dir(&gone_dir).unwrap();
        fs::create_dir(&live_dir).unwrap();
        let removed = sweep_orphans(&layout);
        let (gone_left, live_left) = (gone_dir.exists(), live_dir.exists());
        let _ = fs::remove_dir(&gone_dir);
        let _ = fs::remove_dir(&live_dir);
        let _ = fs::remove_dir(&base);
        assert!(!gone_left, "the group of a gone thread stays");
        assert!(live_left, "the group of a live thread was removed");
        assert!(removed >= 1);
    }

    /// The rules this module relies on, on this kernel (root, cgroup v2): a thread's stop
    /// group lives inside its own cgroup, and a parent with populated domain children refuses
    /// one, leaving nothing behind.
    #[test]
    fn a_stop_group_stays_inside_the_cgroup_and_is_refused_where_the_kernel_says_so() {
        let Some((layout, v2)) = root_v2() else {
            return;
        };
        let base = format!("/rtbox-stopgroup-test-{}", std::process::id());
        let bdir = join(&v2, &base);
        fs::create_dir(&bdir).unwrap();
        let mut member = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = member.id() as i32;
        write(&bdir.join("cgroup.procs"), &pid.to_string()).unwrap();
        let g = create(&layout, &base, pid).expect("threaded child of a leaf cgroup");
        let line = crate::cgroup::thread_cgroups(pid).unwrap().v2.unwrap();
        assert_eq!(line, format!("{base}/rtbox-t{pid}"));
        assert_eq!(original_of(&line), base);
        let gdir = dir(&layout, &g).unwrap();
        freeze(&gdir, true).unwrap();
        let f = open_freeze(&gdir).expect("kept handle");
        crate::cgroup::freeze_write(&f, false).unwrap();
        remove(&layout, &g).unwrap();
        assert_eq!(
            crate::cgroup::thread_cgroups(pid).unwrap().v2.unwrap(),
            base
        );
        assert!(!join(&v2, &g).exists());
        // A populated domain child: the kernel refuses the threaded child.
        let cdir = bdir.join("c");
        fs::create_dir(&cdir).unwrap();
        write(&cdir.join("cgroup.procs"), &other.id().to_string()).unwrap();
        let refused = create(&layout, &base, pid);
        assert!(refused.is_err(), "{refused:?}");
        assert!(!join(&v2, &group_of(&base, pid)).exists(), "nothing left");
        assert_eq!(
            crate::cgroup::thread_cgroups(pid).unwrap().v2.unwrap(),
            base
        );
        member.kill().unwrap();
        other.kill().unwrap();
        member.wait().unwrap();
        other.wait().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let _ = fs::remove_dir(&cdir);
        let _ = fs::remove_dir(&bdir);
    }
}
