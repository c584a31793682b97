//! Cgroup layouts and the two cgroup mechanisms rtbox uses.
//!
//! - cgroup v2 freeze (pure v2 at `/sys/fs/cgroup`, or the controller-less `unified` tree of a
//!   hybrid layout): each member thread gets a threaded child of its own cgroup
//!   (`crate::stopgroup`). The per-process groups `<v2>/rtbox/p<pid>` of older daemons
//!   (`freeze_group_remove`, `sweep_stale`) are kept only to repair their journals.
//! - The v1 `cpu` controller with RT group scheduling: a thread whose v1 cpu cgroup has
//!   `cpu.rt_runtime_us` = 0 cannot become SCHED_FIFO (EPERM), so it is moved to the root cpu
//!   cgroup while managed and put back on restore.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::LinuxError;

/// Which cgroup hierarchies are mounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LayoutKind {
    /// Only v1 controllers.
    V1,
    /// Only the unified v2 hierarchy.
    V2,
    /// v1 controllers plus a (controller-less) v2 tree.
    Hybrid,
    /// No cgroup filesystem at all.
    None,
}

/// Where the hierarchies rtbox needs are mounted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub kind: LayoutKind,
    /// Mount point of the v2 hierarchy.
    pub v2: Option<PathBuf>,
    /// Mount point of the v1 hierarchy carrying the `cpu` controller.
    pub v1_cpu: Option<PathBuf>,
}

/// Parse /proc/self/mounts content into a layout.
pub fn parse_mounts(text: &str) -> Layout {
    let mut v2 = None;
    let mut v1_cpu = None;
    let mut any_v1 = false;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        match f[2] {
            "cgroup2" => v2 = Some(PathBuf::from(f[1])),
            "cgroup" => {
                any_v1 = true;
                if f[3].split(',').any(|o| o == "cpu") {
                    v1_cpu = Some(PathBuf::from(f[1]));
                }
            }
            _ => {}
        }
    }
    let kind = match (any_v1, v2.is_some()) {
        (true, true) => LayoutKind::Hybrid,
        (true, false) => LayoutKind::V1,
        (false, true) => LayoutKind::V2,
        (false, false) => LayoutKind::None,
    };
    Layout { kind, v2, v1_cpu }
}

/// Detect the layout of this machine.
pub fn detect() -> Result<Layout, LinuxError> {
    let text = fs::read_to_string("/proc/self/mounts")
        .map_err(|e| LinuxError::io("/proc/self/mounts", e))?;
    Ok(parse_mounts(&text))
}

/// A thread's cgroup paths (relative to their hierarchy roots).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ThreadCgroups {
    pub v2: Option<String>,
    pub v1_cpu: Option<String>,
}

/// Parse `/proc/<tid>/cgroup` content.
pub fn parse_proc_cgroup(text: &str) -> ThreadCgroups {
    let mut out = ThreadCgroups::default();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if id == "0" && ctrls.is_empty() {
            out.v2 = Some(path.to_string());
        } else if ctrls.split(',').any(|c| c == "cpu") {
            out.v1_cpu = Some(path.to_string());
        }
    }
    out
}

/// The cgroups of thread `tid`.
pub fn thread_cgroups(tid: i32) -> Result<ThreadCgroups, LinuxError> {
    let path = format!("/proc/{tid}/cgroup");
    let text = fs::read_to_string(&path).map_err(|_| LinuxError::NoSuchThread(tid))?;
    Ok(parse_proc_cgroup(&text))
}

fn join(root: &Path, rel: &str) -> PathBuf {
    root.join(rel.trim_start_matches('/'))
}

fn write(path: &Path, value: &str) -> Result<(), LinuxError> {
    fs::write(path, value).map_err(|e| LinuxError::io(path, e))
}

/// The threads of cgroup directory `dir` and of every cgroup below it (v2 `cgroup.threads`, v1
/// `tasks`). Members stay in their cgroup's subtree (their stop groups are threaded children,
/// `crate::stopgroup`), so a cgroup's members are found in its subtree, not in it alone. A
/// missing `dir` is an error; a child that disappears while it is read is skipped.
pub fn subtree_threads(dir: &Path) -> Result<Vec<i32>, LinuxError> {
    let list = |d: &Path| -> Result<Vec<i32>, LinuxError> {
        let f = if d.join("cgroup.threads").exists() {
            d.join("cgroup.threads")
        } else {
            d.join("tasks")
        };
        let text = fs::read_to_string(&f).map_err(|e| LinuxError::io(&f, e))?;
        Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
    };
    let mut out = list(dir)?;
    let mut todo: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.filter_map(|e| e.ok()) {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let c = e.path();
                if let Ok(t) = list(&c) {
                    out.extend(t);
                }
                todo.push(c);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Whether the v1 cpu cgroup `rel` denies RT runtime (`cpu.rt_runtime_us` = 0).
pub fn v1_cpu_denies_rt(layout: &Layout, rel: &str) -> bool {
    let Some(root) = &layout.v1_cpu else {
        return false;
    };
    let f = join(root, rel).join("cpu.rt_runtime_us");
    fs::read_to_string(f)
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        == Some(0)
}

/// Move thread `tid` into v1 cpu cgroup `rel` (per-thread `tasks` file).
pub fn v1_cpu_move(layout: &Layout, tid: i32, rel: &str) -> Result<(), LinuxError> {
    let root = layout
        .v1_cpu
        .as_ref()
        .ok_or_else(|| LinuxError::Invalid("no v1 cpu hierarchy".into()))?;
    write(&join(root, rel).join("tasks"), &tid.to_string())
}

/// The per-process freeze group `<v2>/rtbox/p<pid>`.
pub fn freeze_dir(layout: &Layout, pid: i32) -> Option<PathBuf> {
    Some(layout.v2.as_ref()?.join("rtbox").join(format!("p{pid}")))
}

/// Move process `pid` into its freeze group (creating it). Returns the directory.
pub fn freeze_group_create(layout: &Layout, pid: i32) -> Result<PathBuf, LinuxError> {
    let dir = freeze_dir(layout, pid)
        .ok_or_else(|| LinuxError::Invalid("no cgroup v2 hierarchy: cannot freeze".into()))?;
    fs::create_dir_all(&dir).map_err(|e| LinuxError::io(&dir, e))?;
    write(&dir.join("cgroup.procs"), &pid.to_string())?;
    Ok(dir)
}

/// Put thread `tid` into its own threaded child of the freeze group `dir`.
pub fn freeze_place_thread(dir: &Path, tid: i32) -> Result<(), LinuxError> {
    let t = dir.join(format!("t{tid}"));
    if !t.exists() {
        fs::create_dir(&t).map_err(|e| LinuxError::io(&t, e))?;
        write(&t.join("cgroup.type"), "threaded")?;
    }
    write(&t.join("cgroup.threads"), &tid.to_string())
}

/// Freeze or thaw thread `tid` of the freeze group `dir`.
pub fn freeze_thread(dir: &Path, tid: i32, frozen: bool) -> Result<(), LinuxError> {
    write(
        &dir.join(format!("t{tid}")).join("cgroup.freeze"),
        if frozen { "1" } else { "0" },
    )
}

/// Open thread `tid`'s `cgroup.freeze` in freeze group `dir` for repeated writes (`None` when
/// the group does not exist). The loop freezes and thaws members up to every period: writing a
/// kept-open file saves the path lookup, open and close of each stop and restart.
pub fn open_freeze(dir: &Path, tid: i32) -> Option<fs::File> {
    fs::OpenOptions::new()
        .write(true)
        .open(dir.join(format!("t{tid}")).join("cgroup.freeze"))
        .ok()
}

/// Freeze or thaw through a file from [`open_freeze`].
pub fn freeze_write(file: &fs::File, frozen: bool) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_at(if frozen { b"1" } else { b"0" }, 0)
        .map(|_| ())
}

/// Thaw everything in the freeze group, move process `pid` back to v2 cgroup `original` and
/// remove the group. Missing pieces are not errors (the process may have exited).
pub fn freeze_group_remove(
    layout: &Layout,
    pid: i32,
    original: Option<&str>,
) -> Result<(), LinuxError> {
    let Some(dir) = freeze_dir(layout, pid) else {
        return Ok(());
    };
    if !dir.exists() {
        return Ok(());
    }
    let _ = fs::write(dir.join("cgroup.freeze"), "0");
    let children: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    for c in &children {
        let _ = fs::write(c.join("cgroup.freeze"), "0");
    }
    let mut first_err = None;
    if let (Some(root), Some(orig)) = (&layout.v2, original) {
        if let Err(e) = write(&join(root, orig).join("cgroup.procs"), &pid.to_string()) {
            // ESRCH: the process is gone, nothing to move back.
            if !e.is_gone() {
                first_err = Some(e);
            }
        }
    }
    for c in &children {
        let _ = fs::remove_dir(c);
    }
    if let Err(e) = fs::remove_dir(&dir) {
        first_err.get_or_insert(LinuxError::io(&dir, e));
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Remove freeze groups of processes that no longer exist (a group whose removal failed because
/// the exiting process was still linked to it). Returns how many were removed.
pub fn sweep_stale(layout: &Layout) -> usize {
    let Some(v2) = &layout.v2 else { return 0 };
    let Ok(rd) = fs::read_dir(v2.join("rtbox")) else {
        return 0;
    };
    let mut n = 0;
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(pid) = name.strip_prefix('p').and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if let Ok(children) = fs::read_dir(e.path()) {
            for c in children.filter_map(|c| c.ok()) {
                if c.path().is_dir() {
                    let _ = fs::remove_dir(c.path());
                }
            }
        }
        if fs::remove_dir(e.path()).is_ok() {
            n += 1;
        }
    }
    n
}

/// Remove `<v2>/rtbox` if empty (best effort), and stop groups whose thread is gone.
pub fn remove_rtbox_root(layout: &Layout) {
    sweep_stale(layout);
    crate::stopgroup::sweep_orphans(layout);
    if let Some(v2) = &layout.v2 {
        let _ = fs::remove_dir(v2.join("rtbox"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_told_apart() {
        let hybrid = "cgroup /sys/fs/cgroup/cpu cgroup rw,nosuid,cpu 0 0\n\
                      cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
        let l = parse_mounts(hybrid);
        assert_eq!(l.kind, LayoutKind::Hybrid);
        assert_eq!(l.v1_cpu.as_deref(), Some(Path::new("/sys/fs/cgroup/cpu")));
        assert_eq!(l.v2.as_deref(), Some(Path::new("/sys/fs/cgroup/unified")));
        let v2 = parse_mounts("cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n");
        assert_eq!(v2.kind, LayoutKind::V2);
        assert!(v2.v1_cpu.is_none());
        let v1 = parse_mounts("cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n");
        assert_eq!(v1.kind, LayoutKind::V1);
        assert_eq!(
            parse_mounts("proc /proc proc rw 0 0").kind,
            LayoutKind::None
        );
    }

    #[test]
    fn proc_cgroup_lines_are_split_by_hierarchy() {
        let t = "4:memory:/m\n2:cpu,cpuacct:/docker/abc\n0::/user.slice\n";
        let c = parse_proc_cgroup(t);
        assert_eq!(c.v1_cpu.as_deref(), Some("/docker/abc"));
        assert_eq!(c.v2.as_deref(), Some("/user.slice"));
        assert_eq!(parse_proc_cgroup("garbage"), ThreadCgroups::default());
    }

    #[test]
    fn this_machine_has_a_layout() {
        let l = detect().unwrap();
        let c = thread_cgroups(crate::sched::gettid()).unwrap();
        if l.v2.is_some() {
            assert!(c.v2.is_some(), "{l:?} {c:?}");
        }
    }
}
