//! Exclusive advisory locks (`flock`) that say who holds them: the holder writes its pid into
//! the lock file, so a refused contender can name it.
//!
//! The lock belongs to the open file description, so a child forked without `exec` (the
//! daemon's watchdog) keeps it until it exits too: a restarted daemon waits until a crashed
//! one's threads are restored.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::LinuxError;

/// A held lock; dropping it (in every process sharing the descriptor) releases it.
#[derive(Debug)]
pub struct PidLock {
    _file: File,
    path: PathBuf,
}

impl PidLock {
    /// Takes the lock on `path` (created, with its directory, if missing) without waiting and
    /// writes this process's pid into it; [`LinuxError::Locked`] names the holder if another
    /// process has it.
    pub fn try_acquire(path: &Path) -> Result<PidLock, LinuxError> {
        let mut file = open_lock_file(path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(LinuxError::Locked {
                    path: path.to_path_buf(),
                    holder: text.trim().parse().ok(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(LinuxError::io(path, e)),
        }
        held(file, path)
    }

    /// Takes the lock on `path`, waiting for any holder to let go, and writes this process's
    /// pid into it. Used where waiting is right: the real-runtime tests of several checkouts
    /// (or of a test run beside an experiment) take turns on one machine's CPUs and cgroups.
    pub fn acquire(path: &Path) -> Result<PidLock, LinuxError> {
        let file = open_lock_file(path)?;
        file.lock().map_err(|e| LinuxError::io(path, e))?;
        held(file, path)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The machine-wide lock that real-runtime tests and experiments hold while they run: one
/// reservation experiment at a time per machine, whichever checkout or script it comes from
/// (`flock /tmp/rtbox-realtime.lock CMD` from a shell).
pub const REALTIME_LOCK: &str = "/tmp/rtbox-realtime.lock";

/// Waits for and takes [`REALTIME_LOCK`].
pub fn realtime_turn() -> Result<PidLock, LinuxError> {
    PidLock::acquire(Path::new(REALTIME_LOCK))
}

/// Opens (creating it, and its directory) the lock file at `path`.
fn open_lock_file(path: &Path) -> Result<File, LinuxError> {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| LinuxError::io(path, e))
}

/// The lock on `file`, just taken: this process's pid written into it.
fn held(mut file: File, path: &Path) -> Result<PidLock, LinuxError> {
    let pid = std::process::id();
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{pid}"))
        .map_err(|e| LinuxError::io(path, e))?;
    Ok(PidLock {
        _file: file,
        path: path.to_path_buf(),
    })
}

/// `PATH.lock`: the lock file that guards `path`.
pub fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_is_refused_with_the_holders_pid_until_the_first_lets_go() {
        let dir = std::env::temp_dir().join(format!("rtbox-lock-{}", std::process::id()));
        let path = lock_path(&dir.join("x.sock"));
        assert!(path.ends_with("x.sock.lock"));
        let held = PidLock::try_acquire(&path).expect("first");
        assert_eq!(held.path(), path);
        // flock conflicts between open file descriptions, also within one process.
        match PidLock::try_acquire(&path) {
            Err(LinuxError::Locked { path: p, holder }) => {
                assert_eq!(p, path);
                assert_eq!(holder, Some(std::process::id() as i32));
            }
            other => panic!("second lock: {other:?}"),
        }
        drop(held);
        PidLock::try_acquire(&path).expect("free again");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
