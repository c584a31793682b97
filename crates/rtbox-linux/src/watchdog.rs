//! A supervising process that restores everything when the daemon dies, even by `kill -9`.
//!
//! The daemon forks the watchdog first thing (while still single-threaded). The child keeps the
//! read end of a pipe whose write end only the daemon holds; when the daemon dies for any reason
//! the kernel closes the write end, the child's `read` returns 0, and it undoes the journal and
//! exits. It sleeps at a high SCHED_FIFO priority so that members left boosted by the dead
//! daemon cannot starve it. A daemon that stops cleanly clears the journal first, so the
//! watchdog then finds nothing to do.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

use crate::journal::Journal;
use crate::sched::{self, SchedAttr};
use crate::LinuxError;

/// The watchdog's SCHED_FIFO priority (above rtbox's member range, below the daemon's loop).
pub const WATCHDOG_PRIORITY: u32 = 97;

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
        // SAFETY: fork; the child only reads a pipe, files and /proc, then _exits.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(LinuxError::last("fork", 0));
        }
        if pid == 0 {
            drop(wr);
            watch(rd, Journal::new(journal));
        }
        drop(rd);
        Ok(Watchdog { _pipe: wr, pid })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }
}

/// The child: wait for the pipe to close, then undo the journal. Never returns.
fn watch(rd: OwnedFd, journal: Journal) -> ! {
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
    loop {
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
