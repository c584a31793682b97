//! Members named by the config file (`[[box]] members`), put into their boxes when the daemon
//! starts, after admission and before the socket opens.
//!
//! All or nothing: every pid, cgroup and process name is checked first; if one does not exist
//! the daemon refuses to start and has changed nothing. If an attach or a command start still
//! fails (a process exited in between), everything attached so far is restored by the caller
//! (`Runtime::shutdown`) and the daemon refuses to start.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rtbox_config::BoxMembers;
use rtbox_linux::gated::GatedChild;
use rtbox_linux::procfs;

use crate::runtime::{Runtime, Target};

/// A member that could not be put into its box: the config line, box and field, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberError(pub String);

impl std::fmt::Display for MemberError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MemberError {}

fn at(b: &BoxMembers, field: String, why: impl std::fmt::Display) -> MemberError {
    MemberError(format!(
        "config line {}: box \"{}\": {field}: {why}",
        b.line, b.box_name
    ))
}

/// A pid or cgroup to attach, with the field that named it (for messages).
struct Planned<'a> {
    from: &'a BoxMembers,
    field: String,
    target: Target,
}

/// Processes named `comm` (as in `/proc/PID/comm`), not this daemon nor its own children
/// (the watchdog) nor kernel threads.
fn pids_named(comm: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    procfs::all_pids()
        .unwrap_or_default()
        .into_iter()
        .filter(|&p| p != me && p != 2)
        .filter(|&p| {
            procfs::stat(p).is_ok_and(|s| s.ppid != me && s.ppid != 2)
                && std::fs::read_to_string(format!("/proc/{p}/comm"))
                    .is_ok_and(|c| c.trim_end_matches('\n') == comm)
        })
        .collect()
}

/// A cgroup directory the runtime can read members from.
fn cgroup_exists(dir: &Path) -> bool {
    dir.is_dir() && (dir.join("cgroup.threads").exists() || dir.join("tasks").exists())
}

/// Check every named pid, cgroup and name (nothing changes here).
fn plan(members: &[BoxMembers]) -> Result<Vec<Planned<'_>>, MemberError> {
    let mut out = Vec::new();
    let mut pids_taken: Vec<i32> = Vec::new();
    for b in members {
        for (i, &pid) in b.members.pids.iter().enumerate() {
            let field = format!("members.pids[{i}] = {pid}");
            if pid as u32 == std::process::id() {
                return Err(at(b, field, "is the daemon itself"));
            }
            if let Err(e) = procfs::threads_of(pid) {
                return Err(at(b, field, format!("no such process ({e})")));
            }
            pids_taken.push(pid);
            out.push(Planned {
                from: b,
                field,
                target: Target::Pid(pid),
            });
        }
        for (i, dir) in b.members.cgroups.iter().enumerate() {
            let field = format!("members.cgroups[{i}] = \"{}\"", dir.display());
            if !cgroup_exists(dir) {
                return Err(at(
                    b,
                    field,
                    "is not a cgroup directory (no cgroup.threads or tasks file)",
                ));
            }
            out.push(Planned {
                from: b,
                field,
                target: Target::Cgroup(PathBuf::from(dir)),
            });
        }
        for (i, comm) in b.members.comms.iter().enumerate() {
            let field = format!("members.comms[{i}] = \"{comm}\"");
            let found = pids_named(comm);
            if found.is_empty() {
                return Err(at(b, field, "no running process has this name"));
            }
            for pid in found {
                if pids_taken.contains(&pid) {
                    return Err(at(
                        b,
                        field,
                        format!("matches process {pid}, which the config already names"),
                    ));
                }
                pids_taken.push(pid);
                out.push(Planned {
                    from: b,
                    field: field.clone(),
                    target: Target::Pid(pid),
                });
            }
        }
    }
    Ok(out)
}

/// Attach the configured members and start the configured commands; returns the pids of the
/// started commands (children of the daemon). On error the caller must `rt.shutdown()`.
pub fn attach_members(rt: &mut Runtime, members: &[BoxMembers]) -> Result<Vec<i32>, MemberError> {
    for p in plan(members)? {
        let n = rt
            .attach(&p.from.box_name, p.target)
            .map_err(|e| at(p.from, p.field.clone(), e))?;
        tracing::info!(box_name = %p.from.box_name, field = %p.field, threads = n, "config: attached");
    }
    let mut started = Vec::new();
    for b in members {
        for (i, argv) in b.members.commands.iter().enumerate() {
            let field = format!("members.commands[{i}] = {argv:?}");
            match start_in_box(rt, &b.box_name, argv) {
                Ok(pid) => {
                    tracing::info!(box_name = %b.box_name, field = %field, pid, "config: command started");
                    started.push(pid);
                }
                Err(e) => {
                    stop_commands(&mut started);
                    return Err(at(b, field, e));
                }
            }
        }
    }
    Ok(started)
}

/// Start `argv` inside a box like `rtbox exec`: the child waits at a gate before `exec`, is
/// attached while it waits, then let through, so it never runs outside the box (and never
/// runs at all if the attach fails or the daemon dies first).
fn start_in_box(rt: &mut Runtime, box_name: &str, argv: &[String]) -> Result<i32, String> {
    let child = GatedChild::spawn(argv).map_err(|e| e.to_string())?;
    if let Err(e) = rt.attach(box_name, Target::Pid(child.pid)) {
        child.cancel();
        return Err(e.to_string());
    }
    Ok(child.release())
}

/// Reap started commands that exited (no zombies); returns what to log.
pub fn reap_commands(started: &mut Vec<i32>) -> Vec<String> {
    let mut log = Vec::new();
    started.retain(|&pid| {
        let mut status = 0;
        // SAFETY: non-blocking wait on our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            log.push(format!("config command {pid} exited (status {status:#x})"));
            false
        } else {
            r == 0
        }
    });
    log
}

/// Stop the started commands: SIGTERM, up to 1 s to exit, then SIGKILL; all reaped.
pub fn stop_commands(started: &mut Vec<i32>) {
    for &pid in started.iter() {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let t0 = Instant::now();
    while !started.is_empty() && t0.elapsed() < Duration::from_secs(1) {
        reap_commands(started);
        std::thread::sleep(Duration::from_millis(10));
    }
    for pid in started.drain(..) {
        let mut status = 0;
        // SAFETY: killing and reaping our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, &mut status, 0);
        }
    }
}
