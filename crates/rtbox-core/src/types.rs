//! Identifiers, parameters, decisions and events of the scheduling core.

use std::fmt;

use rtbox_model::{digits_for, Bandwidth, Mode, Nanos, Placement, Policy, Refusal, TaskSpec};

/// A task (Linux: a thread) registered with [`crate::Scheduler::add_task`]; ids are dense from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId(pub u32);

/// A server: one per flattened server of `rtbox_model::admit` (per box and CPU, in the order of
/// `Admission::flat_servers()`), then one per task with a dedicated [`Reservation`]. Dense from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerId(pub u32);

impl TaskId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl ServerId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// How elapsed time is charged to servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Accounting {
    /// The driver follows every decision exactly (the simulator): `advance(now)` charges the time
    /// since the previous call to the server that was running on each CPU.
    #[default]
    Implicit,
    /// The driver measures what members really consumed and reports it with `charge`;
    /// `advance(now)` only fires timers and recomputes decisions.
    Measured,
}

/// Scheduler options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub accounting: Accounting,
    /// Round-robin quantum of the `fair` local policy (0: no rotation, plain FIFO order).
    pub timeslice: Nanos,
    /// Queue [`Event`]s for [`crate::Scheduler::poll_event`]. Off saves time in long simulations.
    pub record_events: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            accounting: Accounting::Implicit,
            timeslice: 4_000_000,
            record_events: true,
        }
    }
}

/// A dedicated hard CBS for one task (SCHED_DEADLINE-like), on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    pub cpu: u32,
    pub budget: Nanos,
    pub period: Nanos,
    /// Relative deadline, at most `period` (constrained deadlines use the revised wake-up rule).
    pub deadline: Nanos,
}

/// A task as the core sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskParams {
    pub name: String,
    /// Its box; `None` (or a shared box, which has no servers) runs it in the background, below
    /// every server.
    pub box_name: Option<String>,
    /// Local fixed priority (fifo policy and background), higher is more urgent.
    pub priority: u32,
    /// Pinned placement: the CPU whose vCPU (server of the box) hosts the task. `None` in a pinned
    /// box: the CPU of the scheduler's plan for (box, name) ([`crate::Scheduler::with_plan`]),
    /// else the vCPU with the fewest members ([`rtbox_model::least_loaded_vcpu`]). Ignored by
    /// global boxes.
    /// For background tasks: a CPU affinity.
    pub cpu: Option<u32>,
    /// A dedicated server instead of a box (then `box_name` must be `None`).
    pub reservation: Option<Reservation>,
}

impl TaskParams {
    /// The core's view of a model task; a missing priority becomes 0.
    pub fn from_spec(spec: &TaskSpec) -> Self {
        TaskParams {
            name: spec.name.clone(),
            box_name: spec.box_name.clone(),
            priority: spec.priority.unwrap_or(0),
            cpu: spec.cpu,
            reservation: None,
        }
    }
}

/// What runs on a CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Running {
    pub task: TaskId,
    /// The server charged for it; `None` for background tasks and reclaimed (throttled
    /// reclaim-mode) execution.
    pub server: Option<ServerId>,
}

/// One non-throttled server with work, in a CPU's EDF order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub server: ServerId,
    pub deadline: Nanos,
    /// Members placed on this vCPU, most urgent first (the first runs if the server runs).
    pub members: Vec<TaskId>,
}

/// The decision for one CPU: the EDF order of its eligible servers with their members, and what
/// runs now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuDecision {
    pub cpu: u32,
    pub order: Vec<Slot>,
    pub running: Option<Running>,
}

/// Something the core did, for traces and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The server exhausted its budget; it may run again at `until`.
    Throttled {
        at: Nanos,
        server: ServerId,
        until: Nanos,
    },
    /// The throttled server got its budget back.
    Replenished { at: Nanos, server: ServerId },
    /// The CBS wake-up rule gave a server that became active again a fresh budget and
    /// deadline (its old pair would have overflowed its bandwidth): a new server period
    /// begins here, as with a replenishment.
    Renewed { at: Nanos, server: ServerId },
    /// A global-placement task moved from one vCPU of its box to another.
    Migrated {
        at: Nanos,
        task: TaskId,
        from: ServerId,
        to: ServerId,
    },
    /// What runs on `cpu` changed.
    Dispatched {
        at: Nanos,
        cpu: u32,
        running: Option<Running>,
    },
}

/// A read-only view of one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo<'a> {
    pub id: ServerId,
    pub cpu: u32,
    /// The box it belongs to; `None` for a dedicated reservation.
    pub box_name: Option<&'a str>,
    /// The task of a dedicated reservation.
    pub task: Option<TaskId>,
    /// What its members may do while it is throttled (a dedicated reservation is `Hard`).
    pub mode: Mode,
    /// Whether its box's members may move between the box's vCPUs (a dedicated reservation is
    /// `Pinned`: its one task stays on it). A server never belongs to a shared box (those
    /// have none; see [`BoxInfo::shared`]).
    pub placement: Placement,
    pub budget: Nanos,
    pub period: Nanos,
    pub relative_deadline: Nanos,
    pub bandwidth: Bandwidth,
    /// Remaining budget (negative only after a measured overrun).
    pub runtime: i64,
    /// Absolute scheduling deadline.
    pub deadline: Nanos,
    pub throttled: bool,
    /// Total budget consumed so far.
    pub consumed: Nanos,
    pub throttle_count: u64,
    /// Members that came onto it from another server of their box (each `Event::Migrated`
    /// to it), also when events are not recorded.
    pub migrations: u64,
}

/// A read-only view of one box, so that drivers never look a box up in their own copy of the
/// configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoxInfo<'a> {
    pub name: &'a str,
    pub policy: Policy,
    pub placement: Placement,
    pub mode: Mode,
    /// A shared (weighted) box: no servers; its members run in the background.
    pub shared: bool,
    /// The weight of a shared box.
    pub weight: Option<u32>,
    /// Its servers (vCPUs), in CPU order of the flattening; empty for a shared box.
    pub servers: &'a [ServerId],
}

/// What [`crate::Scheduler::reconfigure`] did, for drivers to re-key their per-server data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reconfigured {
    /// `server_map[old.index()]`: the new id of every old server, `None` for a removed one.
    pub server_map: Vec<Option<ServerId>>,
    /// Old ids of the servers that no longer exist (box deleted, became shared, or lost its
    /// server on that CPU).
    pub removed: Vec<ServerId>,
    /// New ids of servers that did not exist before (they start fresh).
    pub added: Vec<ServerId>,
    /// New ids of kept servers whose budget, period or deadline changed (rule
    /// [`crate::rules::cbs_change`]).
    pub changed: Vec<ServerId>,
    /// Tasks whose box was deleted or became shared: now background tasks (same [`TaskId`]).
    pub released: Vec<TaskId>,
    /// Tasks of a shared box that now has servers: now its members.
    pub joined: Vec<TaskId>,
    /// The events that were queued before the change, with the OLD server ids: the queue is
    /// drained first so that no event is ever read against the wrong id.
    pub events: Vec<Event>,
}

impl Reconfigured {
    /// The new id of an old server, `None` if it was removed.
    pub fn map(&self, old: ServerId) -> Option<ServerId> {
        self.server_map.get(old.index()).copied().flatten()
    }
}

/// Why the core refused a system or a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// Admission control refused the system (the model's typed refusals, with the numbers).
    NotAdmitted(Vec<Refusal>),
    UnknownBox {
        task: String,
        box_name: String,
    },
    /// A pinned task names a CPU where its box has no server.
    NoServerOnCpu {
        task: String,
        box_name: String,
        cpu: u32,
    },
    /// The task's box has no server at all (all its bandwidth went to children).
    BoxWithoutServers {
        task: String,
        box_name: String,
    },
    UnknownCpu {
        task: String,
        cpu: u32,
    },
    /// Only members of pinned boxes can be moved between vCPUs (`Scheduler::move_member`).
    NotPinnedMember {
        task: String,
    },
    /// A dedicated reservation is invalid (zero, budget above deadline, deadline above period,
    /// or a box given too).
    BadReservation {
        task: String,
        reason: String,
    },
    /// A dedicated reservation would push the CPU's reserved bandwidth above the platform's
    /// cap (rule `rtbox_model::fits_cap`, the same as for boxes).
    CpuFull {
        task: String,
        cpu: u32,
        /// Already reserved on the CPU: its admitted boxes and earlier dedicated reservations.
        reserved: Bandwidth,
        /// This reservation's bandwidth, budget / min(deadline, period).
        requested: Bandwidth,
        cap: Bandwidth,
    },
    UnknownTask(TaskId),
    UnknownServer(ServerId),
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreError::NotAdmitted(r) => {
                let r: Vec<String> = r.iter().map(|x| x.to_string()).collect();
                write!(f, "admission refused: {}", r.join("; "))
            }
            CoreError::UnknownBox { task, box_name } => {
                write!(f, "task \"{task}\": box = \"{box_name}\" is not a box")
            }
            CoreError::NoServerOnCpu { task, box_name, cpu } => write!(
                f,
                "task \"{task}\": cpu = {cpu}: box \"{box_name}\" has no server on CPU {cpu}"
            ),
            CoreError::BoxWithoutServers { task, box_name } => write!(
                f,
                "task \"{task}\": box = \"{box_name}\" has no bandwidth of its own (children took all)"
            ),
            CoreError::NotPinnedMember { task } => {
                write!(f, "task \"{task}\" is not a member of a pinned box")
            }
            CoreError::UnknownCpu { task, cpu } => {
                write!(f, "task \"{task}\": cpu = {cpu} is not a CPU of the platform")
            }
            CoreError::BadReservation { task, reason } => {
                write!(f, "task \"{task}\": reservation: {reason}")
            }
            CoreError::CpuFull {
                task,
                cpu,
                reserved,
                requested,
                cap,
            } => {
                let total = *reserved + *requested;
                let d = digits_for(total, *cap);
                write!(
                    f,
                    "task \"{task}\": reservation: CPU {cpu}: reserved {} + this reservation {} = {} > cap {}",
                    reserved.format(d),
                    requested.format(d),
                    total.format(d),
                    cap.format(d)
                )
            }
            CoreError::UnknownTask(t) => write!(f, "unknown task id {}", t.0),
            CoreError::UnknownServer(s) => write!(f, "unknown server id {}", s.0),
        }
    }
}

impl std::error::Error for CoreError {}

impl TaskParams {
    /// A background task (no box, no reservation) with a priority; a base for struct update.
    pub fn background(name: impl Into<String>, priority: u32) -> Self {
        TaskParams {
            name: name.into(),
            box_name: None,
            priority,
            cpu: None,
            reservation: None,
        }
    }
}
