//! A child process that waits at a gate before `exec`: it is forked, put in place (attached to
//! a box) while it waits, then let through. If the parent dies or drops the gate first, the
//! child reads end-of-file and exits without running the command, so nothing is left stopped
//! or running outside its box. (Plain fork + execvp: `std::process::Command` waits for the
//! exec, which would deadlock against the gate.)

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::LinuxError;

/// Exit status of a child whose gate closed without the go-ahead.
pub const CANCELLED: i32 = 126;

/// A forked child waiting at its gate.
#[derive(Debug)]
pub struct GatedChild {
    pub pid: i32,
    go: Option<OwnedFd>,
}

impl GatedChild {
    /// Forks a child that runs `argv` (program first, looked up in PATH) once let through.
    pub fn spawn(argv: &[String]) -> Result<GatedChild, LinuxError> {
        let args: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.as_str()))
            .collect::<Result<_, _>>()
            .map_err(|_| LinuxError::Invalid("command contains a NUL byte".into()))?;
        if args.is_empty() {
            return Err(LinuxError::Invalid("empty command".into()));
        }
        let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let mut fds = [0i32; 2];
        // SAFETY: fds is a valid 2-int array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(LinuxError::io("pipe", std::io::Error::last_os_error()));
        }
        // SAFETY: both descriptors were just created and are owned here.
        let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let open_files = crate::open_files_before();
        // SAFETY: the child only calls async-signal-safe functions (close, read, getrlimit,
        // setrlimit, execvp, _exit).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(LinuxError::io("fork", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            // SAFETY: see above; ptrs is a NUL-terminated argv of valid C strings.
            unsafe {
                libc::close(wr.as_raw_fd());
                let mut b = 0u8;
                let n = loop {
                    let n = libc::read(rd.as_raw_fd(), &mut b as *mut u8 as *mut libc::c_void, 1);
                    if n >= 0 || *libc::__errno_location() != libc::EINTR {
                        break n;
                    }
                };
                if n != 1 || b != b'g' {
                    libc::_exit(CANCELLED);
                }
                // The command gets the limit of open files the daemon was started with.
                if let Some(soft) = open_files {
                    let mut lim = libc::rlimit {
                        rlim_cur: 0,
                        rlim_max: 0,
                    };
                    if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
                        lim.rlim_cur = soft.min(lim.rlim_max);
                        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                    }
                }
                libc::execvp(ptrs[0], ptrs.as_ptr());
                libc::_exit(127);
            }
        }
        drop(rd);
        Ok(GatedChild { pid, go: Some(wr) })
    }

    /// Lets the child run its command.
    pub fn release(mut self) -> i32 {
        if let Some(go) = self.go.take() {
            // SAFETY: writing one byte to our own pipe.
            unsafe { libc::write(go.as_raw_fd(), b"g".as_ptr() as *const libc::c_void, 1) };
        }
        self.pid
    }

    /// Closes the gate: the child exits with [`CANCELLED`]; reaps it.
    pub fn cancel(mut self) {
        self.go = None;
        let mut status = 0;
        // SAFETY: reaping our own child.
        while unsafe { libc::waitpid(self.pid, &mut status, 0) } < 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
    }
}

/// Waits for a child and returns its exit code as a shell would (128 + signal if killed).
pub fn wait_exit_code(pid: i32) -> Result<i32, LinuxError> {
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child.
        if unsafe { libc::waitpid(pid, &mut status, 0) } >= 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(LinuxError::io("waitpid", e));
        }
    }
    Ok(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_runs_only_once_released() {
        let dir = std::env::temp_dir().join(format!("rtbox-gated-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let marker = dir.join("ran");
        let cmd = vec![
            "sh".to_string(),
            "-c".to_string(),
            format!("touch {}; exit 3", marker.display()),
        ];
        let c = GatedChild::spawn(&cmd).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!marker.exists(), "ran before the gate opened");
        let pid = c.release();
        assert_eq!(wait_exit_code(pid).unwrap(), 3);
        assert!(marker.exists());
        std::fs::remove_file(&marker).unwrap();
        // A closed gate: the command never runs.
        let c = GatedChild::spawn(&cmd).unwrap();
        let pid = c.pid;
        c.cancel();
        assert!(!marker.exists());
        assert!(wait_exit_code(pid).is_err(), "already reaped");
        assert!(GatedChild::spawn(&["a\0b".to_string()]).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
