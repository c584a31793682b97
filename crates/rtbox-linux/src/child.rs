//! Waiting for and signalling this process's own children (the commands the daemon starts).

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::LinuxError;

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

/// Reaps `pid` if it has ended (never blocks): `Ok(None)` while it runs.
pub fn try_reap(pid: i32) -> Result<Option<Exit>, LinuxError> {
    match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::Exited(_, code)) => Ok(Some(Exit::Code(code))),
        Ok(WaitStatus::Signaled(_, sig, _)) => Ok(Some(Exit::Signal(sig as i32))),
        Ok(_) => Ok(None),
        Err(e) => Err(LinuxError::Syscall {
            op: "waitpid",
            tid: pid,
            errno: e as i32,
        }),
    }
}

/// Asks `pid` to end (SIGTERM).
pub fn terminate(pid: i32) -> Result<(), LinuxError> {
    send(pid, Signal::SIGTERM)
}

/// Kills `pid` (SIGKILL) and waits until it is reaped.
pub fn kill_and_reap(pid: i32) -> Result<Exit, LinuxError> {
    let _ = send(pid, Signal::SIGKILL);
    loop {
        match waitpid(Pid::from_raw(pid), None) {
            Ok(WaitStatus::Exited(_, code)) => return Ok(Exit::Code(code)),
            Ok(WaitStatus::Signaled(_, sig, _)) => return Ok(Exit::Signal(sig as i32)),
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => {
                return Err(LinuxError::Syscall {
                    op: "waitpid",
                    tid: pid,
                    errno: e as i32,
                })
            }
        }
    }
}

fn send(pid: i32, sig: Signal) -> Result<(), LinuxError> {
    kill(Pid::from_raw(pid), sig).map_err(|e| LinuxError::Syscall {
        op: "kill",
        tid: pid,
        errno: e as i32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reaped through `child` on purpose, not `Child::wait`.
    #[allow(clippy::zombie_processes)]
    #[test]
    fn a_child_is_reaped_with_its_code_and_a_killed_one_with_its_signal() {
        let done = std::process::Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        let pid = done.id() as i32;
        let mut exit = None;
        for _ in 0..500 {
            exit = try_reap(pid).unwrap();
            if exit.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(exit, Some(Exit::Code(3)));
        let sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = sleeper.id() as i32;
        assert_eq!(try_reap(pid).unwrap(), None);
        assert_eq!(kill_and_reap(pid).unwrap(), Exit::Signal(libc::SIGKILL));
        // Reaped: nothing is left to wait for.
        assert!(try_reap(pid).is_err());
    }
}
