//! Typed errors of the Linux primitives.

use std::fmt;
use std::path::PathBuf;

/// What went wrong talking to the kernel.
#[derive(Debug)]
pub enum LinuxError {
    /// A system call failed with `errno` for thread/process `tid` (0: not thread specific).
    Syscall {
        op: &'static str,
        tid: i32,
        errno: i32,
    },
    /// A file in /proc, /sys or the state directory could not be read or written.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A kernel file had content we could not parse.
    Parse { path: PathBuf, what: String },
    /// The thread is gone (exited, or its tid was reused by another thread).
    NoSuchThread(i32),
    /// A request the kernel interface cannot express (e.g. priority out of range).
    Invalid(String),
    /// A user or group name the system's name service does not know.
    UnknownName { kind: NameKind, name: String },
    /// Another process holds the exclusive lock on `path`; `holder` is the pid it wrote there
    /// (`None` when it could not be read).
    Locked { path: PathBuf, holder: Option<i32> },
}

/// What a name names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    User,
    Group,
}

impl LinuxError {
    /// The last OS error as a syscall error.
    pub fn last(op: &'static str, tid: i32) -> Self {
        LinuxError::Syscall {
            op,
            tid,
            errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        LinuxError::Io {
            path: path.into(),
            source,
        }
    }

    /// Whether the error means the thread no longer exists (ESRCH / ENOENT).
    pub fn is_gone(&self) -> bool {
        match self {
            LinuxError::NoSuchThread(_) => true,
            LinuxError::Syscall { errno, .. } => *errno == libc::ESRCH,
            LinuxError::Io { source, .. } => {
                matches!(
                    source.raw_os_error(),
                    Some(libc::ENOENT) | Some(libc::ESRCH)
                )
            }
            _ => false,
        }
    }
}

impl fmt::Display for LinuxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinuxError::Syscall { op, tid, errno } => write!(
                f,
                "{op}(tid {tid}): {}",
                std::io::Error::from_raw_os_error(*errno)
            ),
            LinuxError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            LinuxError::Parse { path, what } => {
                write!(f, "{}: cannot parse {what}", path.display())
            }
            LinuxError::NoSuchThread(t) => write!(f, "thread {t} no longer exists"),
            LinuxError::Invalid(s) => write!(f, "{s}"),
            LinuxError::UnknownName { kind, name } => {
                let (what, call) = match kind {
                    NameKind::User => ("user", "getpwnam"),
                    NameKind::Group => ("group", "getgrnam"),
                };
                write!(
                    f,
                    "{what} \"{name}\" is neither a number nor known to the system ({call})"
                )
            }
            LinuxError::Locked { path, holder } => {
                write!(f, "{} is locked by ", path.display())?;
                match holder {
                    Some(p) => write!(f, "process {p}"),
                    None => write!(f, "another process"),
                }
            }
        }
    }
}

impl std::error::Error for LinuxError {}
