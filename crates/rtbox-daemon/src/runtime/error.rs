//! The runtime's typed errors: what a request asked that cannot be done, and why.

use std::fmt;

use rtbox_core::CoreError;
use rtbox_linux::LinuxError;
use rtbox_model::{ModelError, Refusal};

use super::members::Target;

/// Why the runtime refused or failed a request (nothing changed).
#[derive(Debug)]
pub enum RuntimeError {
    NoSuchBox {
        name: String,
    },
    BoxExists {
        name: String,
    },
    /// A box with children cannot be deleted.
    HasChildren {
        name: String,
        child: String,
    },
    /// Admission control refused the box set (with the numbers).
    NotAdmitted(Vec<Refusal>),
    /// The core refused the box set for another reason.
    Core(CoreError),
    AlreadyAttached {
        target: Target,
        box_name: String,
    },
    NotAttached {
        target: Target,
    },
    /// The daemon's own process cannot be a member.
    AttachSelf,
    /// A kernel thread cannot be a member: the cgroup freezer does not stop kernel threads,
    /// so its box could not be enforced.
    KernelThread {
        pid: i32,
    },
    /// A detach names none, or more than one, of pid, cgroup and box.
    DetachWhat,
    /// A box definition is invalid.
    Model(ModelError),
    /// A box request names a CPU the host does not have online.
    UnknownCpu(crate::host::UnknownCpu),
    /// A request the protocol could not turn into an action (its message names the field).
    BadRequest(String),
    /// A request only root may make.
    NeedsRoot {
        what: &'static str,
    },
    /// A client may only attach or detach processes it could signal.
    NotOwner {
        pid: i32,
        uid: u32,
    },
    /// A box's `users` does not list the client.
    NotUser {
        box_name: String,
        uid: u32,
    },
    Linux(LinuxError),
    /// A request of the periodic-task API (`runtime/jobs.rs`).
    Task(super::jobs::TaskError),
    /// `--sensor bpf` was asked for and the BPF sensor cannot be used.
    Sensor(rtbox_bpf::SensorError),
    /// A container named in a request could not be found or used.
    Container(crate::container::ContainerError),
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::NoSuchBox { name } => write!(f, "box \"{name}\" does not exist"),
            RuntimeError::BoxExists { name } => write!(f, "box \"{name}\" exists"),
            RuntimeError::HasChildren { name, child } => {
                write!(f, "box \"{name}\" has child \"{child}\"; delete it first")
            }
            RuntimeError::NotAdmitted(why) => {
                write!(f, "refused: ")?;
                for (i, r) in why.iter().enumerate() {
                    if i > 0 {
                        write!(f, "; ")?;
                    }
                    write!(f, "{r}")?;
                }
                Ok(())
            }
            RuntimeError::Core(e) => write!(f, "refused: {e}"),
            RuntimeError::AlreadyAttached { target, box_name } => {
                write!(f, "{target} is already attached to box \"{box_name}\"")
            }
            RuntimeError::NotAttached { target } => write!(f, "{target} is not attached"),
            RuntimeError::AttachSelf => write!(f, "cannot attach the daemon itself"),
            RuntimeError::KernelThread { pid } => write!(
                f,
                "pid {pid} is a kernel thread: rtbox cannot stop kernel threads (the cgroup freezer leaves them running), so it does not take them"
            ),
            RuntimeError::DetachWhat => write!(f, "detach: give exactly one of pid, cgroup, box"),
            RuntimeError::Model(e) => write!(f, "invalid: {e}"),
            RuntimeError::UnknownCpu(e) => write!(f, "refused: {e}"),
            RuntimeError::BadRequest(e) => write!(f, "invalid: {e}"),
            RuntimeError::NeedsRoot { what } => write!(f, "refused: {what} needs root"),
            RuntimeError::NotOwner { pid, uid } => {
                write!(f, "refused: process {pid} does not belong to uid {uid}")
            }
            RuntimeError::NotUser { box_name, uid } => write!(
                f,
                "refused: box \"{box_name}\" does not list uid {uid} in its users"
            ),
            RuntimeError::Linux(e) => write!(f, "{e}"),
            RuntimeError::Task(e) => write!(f, "{e}"),
            RuntimeError::Sensor(e) => write!(f, "{e} (use --sensor perf or auto)"),
            RuntimeError::Container(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RuntimeError {}

impl From<LinuxError> for RuntimeError {
    fn from(e: LinuxError) -> Self {
        RuntimeError::Linux(e)
    }
}

impl From<ModelError> for RuntimeError {
    fn from(e: ModelError) -> Self {
        RuntimeError::Model(e)
    }
}

/// The core's admission refusal is the same refusal as the runtime's own (one variant).
impl From<CoreError> for RuntimeError {
    fn from(e: CoreError) -> Self {
        match e {
            CoreError::NotAdmitted(why) => RuntimeError::NotAdmitted(why),
            e => RuntimeError::Core(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_box_and_the_target() {
        let e = RuntimeError::HasChildren {
            name: "a".into(),
            child: "b".into(),
        };
        assert_eq!(e.to_string(), "box \"a\" has child \"b\"; delete it first");
        let e = RuntimeError::AlreadyAttached {
            target: Target::Pid(42),
            box_name: "a".into(),
        };
        assert_eq!(e.to_string(), "process 42 is already attached to box \"a\"");
        let e = RuntimeError::NotAttached {
            target: Target::Cgroup("/sys/fs/cgroup/x".into()),
        };
        assert_eq!(e.to_string(), "cgroup /sys/fs/cgroup/x is not attached");
    }
}
