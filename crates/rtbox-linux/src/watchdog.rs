//! A supervising process that restores everything when the daemon dies, even by `kill -9`.
//!
//! The daemon forks the watchdog first thing (while still single-threaded). The child keeps the
//! read end of a pipe whose write end only the daemon holds; when the daemon dies for any reason
//! the kernel closes the write end, the child's `read` returns 0, and it undoes the journal and
//! exits. It sleeps at a high SCHED_FIFO priority so that members left boosted by the dead
//! daemon cannot starve it. A daemon that stops cleanly clears the journal first, so the
//! watchdog then finds nothing to do.
//!
//! A killed daemon is not dead while one of its threads is inside a cgroup write: the write
//! waits for an RCU grace period, driven by normal kernel threads, which members left at
//! SCHED_FIFO on every CPU keep off until the kernel's deferred fair server lets them run
//! (~1 s; measured by the kill -9 storm test: the daemon took 872 ms to die after SIGKILL, and
//! nothing was restored meanwhile). So the watchdog also looks every [`DYING_POLL_MS`] for a
//! fatal signal pending on the daemon, and then gives every thread its scheduling back at once
//! (which lets the kernel threads run, and the daemon die); the full repair follows its death.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

use crate::journal::Journal;
use crate::sched::{self, SchedAttr};
use crate::LinuxError;

/// The watchdog's SCHED_FIFO priority (above rtbox's member range, below the daemon's loop).
pub const WATCHDOG_PRIORITY: u32 = 97;

/// How often the watchdog looks whether the daemon is dying (a fatal signal pending), ms.
/// Each look reads one small /proc file; at 20 ms the looks cost ~0.0045 CPU of a FIFO thread
/// (measured, 2-vCPU VM), as much as the loop may spend on a small box (issue 14). A kill -9
/// that leaves the daemon dying for ~1 s is still seen within 0.1 s.
pub const DYING_POLL_MS: i32 = 100;

/// The daemon's side: holds the pipe's write end. Dropping it releases the watchdog.
#[derive(Debug)]
pub struct Watchdog {
    _pipe: OwnedFd,
    pid: i32,
}

impl Watchdog {
    /// Fork the watchdog for `journal`. Call while the process is single-threaded.
    pub fn spawn(journal: PathBuf) -> Result<Self, LinuxError> {
        let mut fds = [0i32; 2];
        // SAFETY: fds is a valid 2-int array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(LinuxError::last("pipe2", 0));
        }
        // SAFETY: both are fresh descriptors we own.
        let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: getpid has no preconditions.
        let daemon = unsafe { libc::getpid() };
        // SAFETY: fork; the child only reads a pipe, files and /proc, then _exits.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(LinuxError::last("fork", 0));
        }
        if pid == 0 {
            drop(wr);
            watch(rd, Journal::new(journal), daemon);
        }
        drop(rd);
        Ok(Watchdog { _pipe: wr, pid })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }
}

/// What the watchdog sees of the daemon at a look (one read of its `/proc` status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Look {
    /// SIGKILL pending (the kernel queues it on every thread for any fatal signal), or its
    /// main thread already gone (a zombie while other threads finish), or no status at all.
    dying: bool,
    /// Stopped by SIGSTOP (`T`) or by a debugger (`t`).
    stopped: bool,
}

fn look(pid: i32) -> Look {
    match std::fs::read_to_string(format!("/proc/{pid}/status")) {
        Ok(status) => parse_status(&status),
        Err(_) => Look {
            dying: true,
            stopped: false,
        },
    }
}

fn parse_status(status: &str) -> Look {
    let sigkill = 1u64 << (libc::SIGKILL - 1);
    let mut seen = Look {
        dying: false,
        stopped: false,
    };
    for l in status.lines() {
        let (key, val) = l.split_once(':').unwrap_or((l, ""));
        let val = val.trim();
        match key {
            "State" => {
                seen.dying |= val.starts_with('Z') || val.starts_with('X');
                seen.stopped |= val.starts_with('T') || val.starts_with('t');
            }
            "SigPnd" | "ShdPnd" => {
                seen.dying |= u64::from_str_radix(val, 16).is_ok_and(|m| m & sigkill != 0);
            }
            _ => {}
        }
    }
    seen
}

/// The child: wait for the pipe to close, then undo the journal. Never returns.
fn watch(rd: OwnedFd, journal: Journal, daemon: i32) -> ! {
    // SAFETY: plain libc calls on our own process.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::prctl(
            libc::PR_SET_NAME,
            c"rtbox-watchdog".as_ptr() as libc::c_ulong,
            0,
            0,
            0,
        );
    }
    let _ = sched::set_attr(0, &SchedAttr::fifo(WATCHDOG_PRIORITY));
    let mut buf = [0u8; 64];
    let mut demoted = false;
    let mut released = false;
    loop {
        let mut pfd = libc::pollfd {
            fd: rd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, DYING_POLL_MS) };
        if r == 0 {
            let seen = look(daemon);
            if !demoted && seen.dying {
                demoted = true;
                if let Ok(n) = journal.restore_sched() {
                    eprintln!("rtbox-watchdog: daemon dying; scheduling of {n} threads restored");
                }
            }
            // Stopped (SIGSTOP, a debugger, a job control stop it could not catch), the daemon
            // neither stops nor restarts its members: they would run at their band for up to
            // 0.95 of a CPU, above everything below it, or stay frozen. Each gets its own
            // scheduling back and is thawed, once per stop; the daemon, continued, finds
            // them changed and puts its boxes back in force at its next steps.
            match (released, seen.stopped) {
                (false, true) => {
                    released = true;
                    if let Ok(n) = journal.release_stopped() {
                        eprintln!("rtbox-watchdog: daemon stopped; {n} threads given their own scheduling back and thawed until it continues");
                    }
                }
                (true, false) => released = false,
                _ => {}
            }
            continue;
        }
        if r < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            break;
        }
        // SAFETY: buf is valid for its length.
        let n = unsafe {
            libc::read(
                rd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
            )
        };
        if n == 0 {
            break;
        }
        if n < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    let code = match journal.repair() {
        Ok(Some(rep)) => {
            tracing::warn!(
                restored = rep.restored,
                gone = rep.gone,
                errors = %rep.errors.join("; "),
                "watchdog: daemon gone; its threads restored"
            );
            0
        }
        Ok(None) => 0,
        Err(e) => {
            tracing::error!(error = %e, "watchdog: cannot restore the daemon's threads");
            1
        }
    };
    // SAFETY: leave without running the parent's atexit handlers or destructors.
    unsafe { libc::_exit(code) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_is_seen_dying_or_stopped_from_its_status() {
        let st = |state: &str, pending: &str| {
            parse_status(&format!(
                "Name:\trtbox\nState:\t{state}\nSigPnd:\t{pending}\nShdPnd:\t0000000000000000\n"
            ))
        };
        let quiet = "0000000000000000";
        assert_eq!(
            st("S (sleeping)", quiet),
            Look {
                dying: false,
                stopped: false
            }
        );
        assert_eq!(
            st("T (stopped)", quiet),
            Look {
                dying: false,
                stopped: true
            }
        );
        assert_eq!(
            st("t (tracing stop)", quiet),
            Look {
                dying: false,
                stopped: true
            }
        );
        assert_eq!(
            st("Z (zombie)", quiet),
            Look {
                dying: true,
                stopped: false
            }
        );
        // SIGKILL is signal 9: bit 8.
        assert_eq!(
            st("R (running)", "0000000000000100"),
            Look {
                dying: true,
                stopped: false
            }
        );
        assert_eq!(
            st("R (running)", "0000000000000080"),
            Look {
                dying: false,
                stopped: false
            }
        );
    }
}
