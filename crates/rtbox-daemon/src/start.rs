//! Members named by the config file (`[[box]] members`), put into their boxes when the daemon
//! starts (after admission, before the socket opens) and again at each accepted reload.
//!
//! All or nothing where it can be: every pid, cgroup and process name is checked first
//! ([`plan`]); if one does not exist the daemon refuses to start (or the reload is refused)
//! and has changed nothing. If an attach or a command start still fails at start (a process
//! exited in between), everything attached so far is restored by the caller
//! (`Runtime::shutdown`) and the daemon refuses to start.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rtbox_config::BoxMembers;
use rtbox_linux::child::{self, Exit};
use rtbox_linux::gated::GatedChild;
use rtbox_linux::{procfs, LinuxError};

use crate::runtime::{Runtime, RuntimeError, Target};

/// A member that could not be put into its box: the config line, the box, the field
/// (`members.pids[0] = 42`) and why.
#[derive(Debug)]
pub struct MemberError {
    pub line: usize,
    pub box_name: String,
    pub field: String,
    pub problem: MemberProblem,
}

/// Why a configured member could not join.
#[derive(Debug)]
pub enum MemberProblem {
    IsTheDaemon,
    NoSuchProcess(LinuxError),
    NotACgroup,
    NoProcessNamed,
    /// A process name matched this process, which the config already names.
    NamedTwice(i32),
    /// Boxed: the runtime error is large and this travels in every `Result` of the start path.
    Attach(Box<RuntimeError>),
    Start(LinuxError),
    /// A container named by `members.containers` could not be found or is not running.
    Container(crate::container::ContainerError),
}

impl std::fmt::Display for MemberError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "config line {}: box \"{}\": {}: ",
            self.line, self.box_name, self.field
        )?;
        match &self.problem {
            MemberProblem::IsTheDaemon => write!(f, "is the daemon itself"),
            MemberProblem::NoSuchProcess(e) => write!(f, "no such process ({e})"),
            MemberProblem::NotACgroup => write!(
                f,
                "is not a cgroup directory (no cgroup.threads or tasks file)"
            ),
            MemberProblem::NoProcessNamed => write!(f, "no running process has this name"),
            MemberProblem::NamedTwice(p) => {
                write!(f, "matches process {p}, which the config already names")
            }
            MemberProblem::Attach(e) => write!(f, "{e}"),
            MemberProblem::Start(e) => write!(f, "{e}"),
            MemberProblem::Container(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for MemberError {}

fn at(b: &BoxMembers, field: String, problem: MemberProblem) -> MemberError {
    MemberError {
        line: b.line,
        box_name: b.box_name.clone(),
        field,
        problem,
    }
}

/// A pid or cgroup to attach, with the field that named it (for messages).
pub struct Planned<'a> {
    from: &'a BoxMembers,
    field: String,
    target: Target,
}

/// A command the config started: its box and argv (a reload keeps it running when the new
/// config still names it) and its pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pub box_name: String,
    pub argv: Vec<String>,
    pub pid: i32,
}

/// What the config put into boxes, so that a reload attaches only what is new.
#[derive(Debug, Default)]
pub struct ConfigMembers {
    /// Pids and cgroups attached from the config, with their box.
    pub attached: Vec<(String, Target)>,
    pub commands: Vec<Started>,
}

/// Processes named `comm` (as in `/proc/PID/comm`), not this daemon nor its own children
/// (the watchdog, started commands) nor kernel threads.
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
pub fn plan(members: &[BoxMembers]) -> Result<Vec<Planned<'_>>, MemberError> {
    let mut out = Vec::new();
    let mut pids_taken: Vec<i32> = Vec::new();
    for b in members {
        for (i, &pid) in b.members.pids.iter().enumerate() {
            let field = format!("members.pids[{i}] = {pid}");
            if pid as u32 == std::process::id() {
                return Err(at(b, field, MemberProblem::IsTheDaemon));
            }
            if let Err(e) = procfs::threads_of(pid) {
                return Err(at(b, field, MemberProblem::NoSuchProcess(e)));
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
                return Err(at(b, field, MemberProblem::NotACgroup));
            }
            out.push(Planned {
                from: b,
                field,
                target: Target::Cgroup(PathBuf::from(dir)),
            });
        }
        for (i, name) in b.members.containers.iter().enumerate() {
            let field = format!("members.containers[{i}] = \"{name}\"");
            let layout = rtbox_linux::cgroup::detect()
                .map_err(|e| at(b, field.clone(), MemberProblem::Start(e)))?;
            let found = crate::container::find(&layout, name)
                .map_err(|e| at(b, field.clone(), MemberProblem::Container(e)))?;
            out.push(Planned {
                from: b,
                field,
                target: Target::Cgroup(found.cgroup),
            });
        }
        for (i, comm) in b.members.comms.iter().enumerate() {
            let field = format!("members.comms[{i}] = \"{comm}\"");
            let found = pids_named(comm);
            if found.is_empty() {
                return Err(at(b, field, MemberProblem::NoProcessNamed));
            }
            for pid in found {
                if pids_taken.contains(&pid) {
                    return Err(at(b, field, MemberProblem::NamedTwice(pid)));
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

/// Attach the planned members and start the configured commands that `done` does not
/// already hold; both are recorded in `done`. On error at start the caller must
/// `rt.shutdown()`; at a reload what joined before the error stays.
pub fn attach_members(
    rt: &mut Runtime,
    members: &[BoxMembers],
    planned: Vec<Planned<'_>>,
    done: &mut ConfigMembers,
) -> Result<(), MemberError> {
    for p in planned {
        let key = (p.from.box_name.clone(), p.target.clone());
        if done.attached.contains(&key) {
            continue;
        }
        let n = rt
            .attach(&p.from.box_name, p.target)
            .map_err(|e| at(p.from, p.field.clone(), MemberProblem::Attach(Box::new(e))))?;
        tracing::info!(box_name = %p.from.box_name, member = %p.field, threads = n, "config member attached");
        done.attached.push(key);
    }
    for b in members {
        for i in commands_to_start(&b.box_name, &b.members.commands, &done.commands) {
            let argv = &b.members.commands[i];
            let field = format!("members.commands[{i}]");
            let pid = start_in_box(rt, &b.box_name, argv).map_err(|e| at(b, field.clone(), e))?;
            tracing::info!(box_name = %b.box_name, member = %field, command = %argv.join(" "), pid, "config command started");
            done.commands.push(Started {
                box_name: b.box_name.clone(),
                argv: argv.clone(),
                pid,
            });
        }
    }
    Ok(())
}

/// The indices of `box_name`'s configured commands to start, given the commands started
/// before (`running`): the k-th of several equal commands starts unless k of them run already.
/// Equal commands are that many members (two workers of one program), and a reload starts only
/// what is missing (an exited command again, nothing twice).
fn commands_to_start(
    box_name: &str,
    configured: &[Vec<String>],
    running: &[Started],
) -> Vec<usize> {
    (0..configured.len())
        .filter(|&i| {
            let argv = &configured[i];
            let nth = configured[..=i].iter().filter(|a| *a == argv).count();
            let up = running
                .iter()
                .filter(|c| c.box_name == box_name && &c.argv == argv)
                .count();
            up < nth
        })
        .collect()
}

/// Forget config attachments whose box is gone (the runtime released them).
pub fn forget_removed(done: &mut ConfigMembers, rt: &Runtime) {
    done.attached
        .retain(|(b, _)| rt.specs().iter().any(|s| &s.name == b));
}

/// Start `argv` inside a box like `rtbox exec`: the child waits at a gate before `exec`, is
/// attached while it waits, then let through, so it never runs outside the box (and never
/// runs at all if the attach fails or the daemon dies first).
fn start_in_box(rt: &mut Runtime, box_name: &str, argv: &[String]) -> Result<i32, MemberProblem> {
    let child = GatedChild::spawn(argv).map_err(MemberProblem::Start)?;
    if let Err(e) = rt.attach(box_name, Target::Pid(child.pid)) {
        child.cancel();
        return Err(MemberProblem::Attach(Box::new(e)));
    }
    Ok(child.release())
}

/// Reap started commands that exited (no zombies), logging each.
pub fn reap_commands(started: &mut Vec<Started>) {
    started.retain(|c| match child::try_reap(c.pid) {
        Ok(None) => true,
        Ok(Some(exit)) => {
            log_exit(c, exit);
            false
        }
        Err(_) => false,
    });
}

fn log_exit(c: &Started, exit: Exit) {
    match exit {
        Exit::Code(code) => {
            tracing::info!(pid = c.pid, box_name = %c.box_name, code, "config command exited")
        }
        Exit::Signal(signal) => {
            tracing::info!(pid = c.pid, box_name = %c.box_name, signal, "config command killed")
        }
    }
}

/// Stop the started commands: SIGTERM, up to 1 s to exit, then SIGKILL; all reaped.
pub fn stop_commands(started: &mut Vec<Started>) {
    for c in started.iter() {
        let _ = child::terminate(c.pid);
    }
    let t0 = Instant::now();
    while !started.is_empty() && t0.elapsed() < Duration::from_secs(1) {
        reap_commands(started);
        std::thread::sleep(Duration::from_millis(10));
    }
    for c in started.drain(..) {
        if let Ok(exit) = child::kill_and_reap(c.pid) {
            log_exit(&c, exit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &str) -> Vec<String> {
        a.split(' ').map(String::from).collect()
    }

    fn started(box_name: &str, a: &str) -> Started {
        Started {
            box_name: box_name.into(),
            argv: argv(a),
            pid: 1,
        }
    }

    /// Two equal commands are two members; a reload starts only those not running.
    #[test]
    fn equal_commands_each_start_once() {
        let cfg = [argv("spin"), argv("spin"), argv("rt-app a.json")];
        assert_eq!(commands_to_start("A", &cfg, &[]), vec![0, 1, 2]);
        assert_eq!(
            commands_to_start("A", &cfg, &[started("A", "spin")]),
            vec![1, 2]
        );
        let all = [
            started("A", "spin"),
            started("A", "rt-app a.json"),
            started("A", "spin"),
        ];
        assert!(commands_to_start("A", &cfg, &all).is_empty());
        // Another box's equal command is not one of these.
        let other = [started("B", "spin"), started("B", "spin")];
        assert_eq!(commands_to_start("A", &cfg, &other), vec![0, 1, 2]);
    }
}
