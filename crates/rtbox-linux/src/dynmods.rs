//! The cgroup v2 mount option `favordynmods`: task migrations without an RCU grace period.
//!
//! Moving a thread or process between cgroups (`cgroup.threads`, `cgroup.procs`) takes the
//! kernel's global `cgroup_threadgroup_rwsem` for writing; by default that write lock waits
//! for an RCU grace period (the lock's readers, every fork and exit, stay cheap). Measured here
//! under other processes' builds: 13-64 ms per move, one move per new member, all of it in
//! the enforcement loop, so a member's new threads ran unplaced (their parent's CPU, their own
//! priority, uncharged) for 10-150 ms. With `favordynmods` the lock stays in its slow-reader
//! mode and a move takes ~0.06 ms (max 0.37 ms in 20 moves, against 9.8 ms without, idle
//! machine); forks and exits pay a little more (documented in the kernel's cgroup-v2 guide).
//! It is a property of the whole v2 hierarchy, changed by a remount (mount(2) `MS_REMOUNT`).

use std::ffi::CString;
use std::path::Path;

use crate::LinuxError;

const OPTION: &str = "favordynmods";

/// The v2 mount at `mount_point` in `/proc/self/mountinfo` text: (per-mount flags for a
/// remount, its super options without `rw`/`ro`).
fn mount_options(mountinfo: &str, mount_point: &Path) -> Option<(u64, Vec<String>)> {
    let mp = mount_point.to_str()?;
    mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let f: Vec<&str> = left.split_whitespace().collect();
        let r: Vec<&str> = right.split_whitespace().collect();
        if f.get(4) != Some(&mp) || r.first() != Some(&"cgroup2") {
            return None;
        }
        let flags = f.get(5)?.split(',').map(mount_flag).fold(0, |a, b| a | b);
        let sup = r
            .get(2)?
            .split(',')
            .filter(|o| *o != "rw" && *o != "ro")
            .map(String::from)
            .collect();
        Some((flags, sup))
    })
}

/// The mount(2) flag of a per-mount option (0 for `rw` and unknown ones).
fn mount_flag(o: &str) -> u64 {
    match o {
        "ro" => libc::MS_RDONLY,
        "nosuid" => libc::MS_NOSUID,
        "nodev" => libc::MS_NODEV,
        "noexec" => libc::MS_NOEXEC,
        "relatime" => libc::MS_RELATIME,
        "noatime" => libc::MS_NOATIME,
        "nodiratime" => libc::MS_NODIRATIME,
        _ => 0,
    }
}

/// Whether the v2 hierarchy at `mount_point` is mounted with `favordynmods`.
pub fn favored(mount_point: &Path) -> Result<bool, LinuxError> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| LinuxError::io("/proc/self/mountinfo", e))?;
    let (_, sup) = mount_options(&text, mount_point).ok_or_else(|| {
        LinuxError::Invalid(format!("{}: not a cgroup2 mount", mount_point.display()))
    })?;
    Ok(sup.iter().any(|o| o == OPTION))
}

/// Turns `favordynmods` on or off for the v2 hierarchy at `mount_point`, keeping its other
/// options and flags.
pub fn set(mount_point: &Path, on: bool) -> Result<(), LinuxError> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| LinuxError::io("/proc/self/mountinfo", e))?;
    let (flags, mut sup) = mount_options(&text, mount_point).ok_or_else(|| {
        LinuxError::Invalid(format!("{}: not a cgroup2 mount", mount_point.display()))
    })?;
    sup.retain(|o| o != OPTION);
    if on {
        sup.push(OPTION.to_string());
    }
    let target = CString::new(mount_point.as_os_str().as_encoded_bytes())
        .map_err(|_| LinuxError::Invalid("mount point with a NUL byte".into()))?;
    let data = CString::new(sup.join(",")).expect("options have no NUL");
    let fstype = CString::new("cgroup2").expect("static");
    // SAFETY: every pointer is a valid NUL-terminated string for the call's duration.
    let r = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_REMOUNT | flags,
            data.as_ptr().cast(),
        )
    };
    if r < 0 {
        return Err(LinuxError::last("mount(MS_REMOUNT, favordynmods)", 0));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "\
35 24 0:30 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
41 31 0:38 / /sys/fs/cgroup/unified rw,nosuid,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate,favordynmods
42 35 0:39 / /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup rw,cpu";

    #[test]
    fn the_v2_mounts_flags_and_super_options_are_read() {
        let (flags, sup) = mount_options(INFO, Path::new("/sys/fs/cgroup/unified")).unwrap();
        assert_eq!(flags, libc::MS_NOSUID | libc::MS_RELATIME);
        assert_eq!(sup, vec!["nsdelegate", "favordynmods"]);
        assert!(
            mount_options(INFO, Path::new("/sys/fs/cgroup/cpu")).is_none(),
            "v1"
        );
        assert!(mount_options(INFO, Path::new("/nowhere")).is_none());
    }
}
