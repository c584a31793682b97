//! The periodic-task API: a thread becomes a periodic real-time task inside an rtbox box,
//! declares its timing, and marks its job boundaries. The calls and their meaning follow the
//! ExSched API (Asberg et al., "ExSched: an External CPU Scheduler Framework for Real-Time
//! Systems", RTCSA 2012, Table II and Figure 2); the C ABI (`crates/rtbox-c`, `librtbox.so`)
//! is a thin layer over this crate. docs/api.md describes both.
//!
//! ```no_run
//! use rtbox_task::PeriodicTask;
//! let mut t = PeriodicTask::new();
//! t.set_box("rt")?;
//! t.enter()?;
//! t.set_wcet(2_000_000)?;
//! t.set_period(10_000_000)?;
//! t.set_deadline(10_000_000)?;
//! t.set_priority(50)?;
//! t.run(0)?;
//! for _ in 0..100 {
//!     // the job's work
//!     t.wait_for_period()?;
//! }
//! t.exit()?;
//! # Ok::<(), rtbox_task::TaskError>(())
//! ```
//!
//! Order of calls (anything else is [`TaskError::State`], and changes nothing):
//! `set_box`/`set_socket` (optional, before `enter`) -> `enter` -> `set_wcet`, `set_period`,
//! `set_deadline` (optional, default: the period), `set_priority` (optional) -> `run` ->
//! `wait_for_period`* -> `exit`. `exit` is also allowed right after `enter`.
//!
//! Sockets are used at `enter`, `run` and `exit` only. Between them, job boundaries go through
//! the task's job page (`rtbox_daemon::jobpage`): `wait_for_period` writes the finished job's
//! record and counters (a few atomic stores), reads the thread CPU clock and sleeps with
//! `clock_nanosleep(TIMER_ABSTIME)`.

use std::path::{Path, PathBuf};

use rtbox_daemon::client::{self, ClientError};
use rtbox_daemon::jobpage::{Declared, JobPage, JobRecord, PageState};
use rtbox_daemon::protocol::Request;
use rtbox_daemon::runtime::jobs::{check_declaration, TaskError as DeclError};

pub mod load;

/// Environment variable naming the box to join when `set_box` was not called.
pub const ENV_BOX: &str = "RTBOX_BOX";
/// Environment variable naming the daemon's socket (default `rtbox_daemon::DEFAULT_SOCKET`).
pub const ENV_SOCKET: &str = "RTBOX_SOCKET";

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not a real-time task (before `enter`, after `exit`).
    Idle,
    /// Member of its box, declaring its timing.
    Entered,
    /// Releasing jobs.
    Running,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Idle => "not entered",
            State::Entered => "entered",
            State::Running => "running",
        }
    }
}

/// Why a call failed; the task's state is unchanged unless the variant says otherwise.
#[derive(Debug)]
pub enum TaskError {
    /// The call is not allowed in this state (`what` says which call is expected first).
    State {
        call: &'static str,
        state: State,
        what: &'static str,
    },
    /// A value out of range; `field` names it.
    Invalid { field: &'static str, why: String },
    /// The daemon cannot be reached.
    NoDaemon(String),
    /// The daemon refused (its message: no such box, not a user of the box, ...).
    Refused(String),
    /// A system call or the job page failed.
    System(String),
}

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskError::State { call, state, what } => {
                write!(
                    f,
                    "{call}: not allowed while the task is {}: {what}",
                    state.name()
                )
            }
            TaskError::Invalid { field, why } => write!(f, "{field}: {why}"),
            TaskError::NoDaemon(s) | TaskError::Refused(s) | TaskError::System(s) => {
                write!(f, "{s}")
            }
        }
    }
}

impl std::error::Error for TaskError {}

impl From<DeclError> for TaskError {
    fn from(e: DeclError) -> Self {
        match e {
            DeclError::Field { field, why } => TaskError::Invalid { field, why },
            e => TaskError::Refused(e.to_string()),
        }
    }
}

/// A thread's periodic task. Each thread that wants to be a task has its own.
pub struct PeriodicTask {
    state: State,
    socket: PathBuf,
    box_name: Option<String>,
    wcet: Option<u64>,
    period: Option<u64>,
    deadline: Option<u64>,
    priority: Option<u32>,
    pid: i32,
    tid: i32,
    page: Option<JobPage>,
    declared: Declared,
    /// The current job: its number, nominal release, start, and thread CPU time at start.
    job: u64,
    release: u64,
    start: u64,
    cpu_at_start: u64,
}

impl Default for PeriodicTask {
    fn default() -> Self {
        Self::new()
    }
}

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

fn positive(field: &'static str, v: u64) -> Result<u64, TaskError> {
    if v == 0 {
        return Err(TaskError::Invalid {
            field,
            why: "must be above 0 ns".into(),
        });
    }
    Ok(v)
}

impl PeriodicTask {
    /// A task of the calling thread; box and socket from `RTBOX_BOX` and `RTBOX_SOCKET`.
    pub fn new() -> Self {
        PeriodicTask {
            state: State::Idle,
            socket: std::env::var_os(ENV_SOCKET)
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(rtbox_daemon::DEFAULT_SOCKET)),
            box_name: std::env::var(ENV_BOX).ok().filter(|s| !s.is_empty()),
            wcet: None,
            period: None,
            deadline: None,
            priority: None,
            pid: std::process::id() as i32,
            tid: gettid(),
            page: None,
            declared: Declared::default(),
            job: 0,
            release: 0,
            start: 0,
            cpu_at_start: 0,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Jobs released so far in this run (the current one included).
    pub fn jobs(&self) -> u64 {
        if self.state == State::Running {
            self.job + 1
        } else {
            0
        }
    }

    fn expect(
        &self,
        call: &'static str,
        allowed: &[State],
        what: &'static str,
    ) -> Result<(), TaskError> {
        if allowed.contains(&self.state) {
            Ok(())
        } else {
            Err(TaskError::State {
                call,
                state: self.state,
                what,
            })
        }
    }

    /// The box (or plug-in group inside a box) to join. Before `enter`.
    pub fn set_box(&mut self, name: &str) -> Result<(), TaskError> {
        self.expect("rt_set_box", &[State::Idle], "set the box before rt_enter")?;
        if name.is_empty() {
            return Err(TaskError::Invalid {
                field: "box",
                why: "empty name".into(),
            });
        }
        self.box_name = Some(name.to_string());
        Ok(())
    }

    /// The daemon's socket. Before `enter`.
    pub fn set_socket(&mut self, path: &Path) -> Result<(), TaskError> {
        self.expect(
            "rt_set_socket",
            &[State::Idle],
            "set the socket before rt_enter",
        )?;
        self.socket = path.to_path_buf();
        Ok(())
    }

    fn request(&self, req: &Request) -> Result<serde_json::Value, TaskError> {
        let v = client::request(&self.socket, req).map_err(|e| match e {
            ClientError::Connect(..) => TaskError::NoDaemon(e.to_string()),
            e => TaskError::System(e.to_string()),
        })?;
        if v["ok"].as_bool() == Some(true) {
            Ok(v)
        } else {
            Err(TaskError::Refused(
                v["error"].as_str().unwrap_or("refused").to_string(),
            ))
        }
    }

    /// The calling thread becomes a real-time task: its process joins the box (unless it is
    /// already a member of it) and the daemon creates the task's job page.
    pub fn enter(&mut self) -> Result<(), TaskError> {
        self.expect("rt_enter", &[State::Idle], "rt_exit first")?;
        let box_name = self.box_name.clone().ok_or(TaskError::Invalid {
            field: "box",
            why: format!("no box to join: call rt_set_box or set {ENV_BOX}"),
        })?;
        self.tid = gettid();
        let v = self.request(&Request::TaskEnter {
            box_name,
            pid: self.pid,
            tid: self.tid,
        })?;
        let path = v["page"]
            .as_str()
            .ok_or_else(|| TaskError::System("the daemon's reply names no job page".into()))?;
        let page = JobPage::open(Path::new(path));
        let page = match page {
            Ok(p) => p,
            Err(e) => {
                let _ = self.request(&Request::TaskExit {
                    pid: self.pid,
                    tid: self.tid,
                });
                return Err(TaskError::System(format!("job page {path}: {e}")));
            }
        };
        self.page = Some(page);
        self.state = State::Entered;
        Ok(())
    }

    /// Worst-case execution time of a job, ns (the seed: a `timeval`).
    pub fn set_wcet(&mut self, ns: u64) -> Result<(), TaskError> {
        self.expect(
            "rt_set_wcet",
            &[State::Entered],
            "call it between rt_enter and rt_run",
        )?;
        self.wcet = Some(positive("wcet", ns)?);
        Ok(())
    }

    /// Period (minimum inter-arrival time), ns.
    pub fn set_period(&mut self, ns: u64) -> Result<(), TaskError> {
        self.expect(
            "rt_set_period",
            &[State::Entered],
            "call it between rt_enter and rt_run",
        )?;
        self.period = Some(positive("period", ns)?);
        Ok(())
    }

    /// Relative deadline, ns (default: the period).
    pub fn set_deadline(&mut self, ns: u64) -> Result<(), TaskError> {
        self.expect(
            "rt_set_deadline",
            &[State::Entered],
            "call it between rt_enter and rt_run",
        )?;
        self.deadline = Some(positive("deadline", ns)?);
        Ok(())
    }

    /// Fixed priority 1..99 (higher is more urgent): the task's rank among its box's members.
    pub fn set_priority(&mut self, prio: u32) -> Result<(), TaskError> {
        self.expect(
            "rt_set_priority",
            &[State::Entered],
            "call it between rt_enter and rt_run",
        )?;
        if !rtbox_daemon::runtime::jobs::PRIORITIES.contains(&prio) {
            return Err(TaskError::Invalid {
                field: "priority",
                why: format!("{prio} is not in 1..99"),
            });
        }
        self.priority = Some(prio);
        Ok(())
    }

    /// Declares the timing to the daemon and releases the first job `timeout_ns` after the
    /// call (returning at that release). The seed's `rt_run(timeout)`. Counted from the call,
    /// not from the daemon's answer (which waits for its loop, a few ms): threads that pass
    /// the same instant minus their own clock reading release their first jobs together
    /// (experiments/exsched-set.c). `rt_run(0)` releases when the task may run (at the
    /// answer). A positive timeout names an instant: if the answer comes after it, the first
    /// job is late from that instant, and the jobs and the daemon's figures say so. Before, the
    /// release moved to the answer unseen: in the real-kernel Figure 11 under load, a worker
    /// that measured its jobs from the instant it asked for counted every job of a task late
    /// (e.g. 520 of 520) while the daemon, measuring from the moved release, counted 0-2.
    pub fn run(&mut self, timeout_ns: u64) -> Result<(), TaskError> {
        let called = rtbox_linux::monotonic_ns();
        self.expect("rt_run", &[State::Entered], "rt_enter first; rt_run once")?;
        let (Some(wcet), Some(period)) = (self.wcet, self.period) else {
            return Err(TaskError::State {
                call: "rt_run",
                state: self.state,
                what: "set the WCET and the period first",
            });
        };
        let d = Declared {
            wcet,
            period,
            deadline: self.deadline.unwrap_or(period),
        };
        check_declaration(d, self.priority)?;
        self.request(&Request::TaskRun {
            pid: self.pid,
            tid: self.tid,
            wcet_ns: d.wcet,
            period_ns: d.period,
            deadline_ns: d.deadline,
            priority: self.priority,
        })?;
        self.declared = d;
        let first = if timeout_ns == 0 {
            rtbox_linux::monotonic_ns()
        } else {
            called + timeout_ns
        };
        let page = self.page.as_ref().expect("entered tasks have a page");
        page.start(first);
        page.set_state(PageState::Running);
        self.job = 0;
        self.release = first;
        self.state = State::Running;
        self.begin_job();
        Ok(())
    }

    /// Sleeps until the current job's release if it is still ahead, then starts the job: its
    /// start time, its release latency into the page, the thread CPU clock.
    fn begin_job(&mut self) {
        if rtbox_linux::monotonic_ns() < self.release {
            rtbox_linux::sleep_until(self.release);
        }
        self.start = rtbox_linux::monotonic_ns();
        self.cpu_at_start = rtbox_linux::thread_cpu_ns();
        if let Some(p) = &self.page {
            p.released(self.start.saturating_sub(self.release));
        }
    }

    /// Ends the current job (its record into the job page: response time, CPU time, deadline
    /// miss, WCET overrun) and sleeps until the next release, one period after the current
    /// one. A job that ends after the next release starts the next job at once (its release
    /// stays nominal, so its latency shows the delay).
    pub fn wait_for_period(&mut self) -> Result<(), TaskError> {
        self.expect("rt_wait_for_period", &[State::Running], "rt_run first")?;
        let exec = rtbox_linux::thread_cpu_ns().saturating_sub(self.cpu_at_start);
        let end = rtbox_linux::monotonic_ns();
        let rec = JobRecord {
            job: self.job,
            release: self.release,
            start: self.start,
            end,
            exec,
        };
        if let Some(p) = &self.page {
            p.completed(&rec, self.declared);
        }
        self.job += 1;
        self.release += self.declared.period;
        self.begin_job();
        Ok(())
    }

    /// Back to a normal task: the job released last (not yet completed) is withdrawn, the
    /// daemon reads the page a last time, and the process leaves the box with its last task.
    /// The task is not entered afterwards even if the daemon cannot be reached.
    pub fn exit(&mut self) -> Result<(), TaskError> {
        self.expect(
            "rt_exit",
            &[State::Entered, State::Running],
            "rt_enter first",
        )?;
        if let Some(p) = &self.page {
            if self.state == State::Running {
                p.withdraw();
            }
            p.set_state(PageState::Exited);
        }
        self.state = State::Idle;
        self.page = None;
        self.wcet = None;
        self.period = None;
        self.deadline = None;
        self.priority = None;
        self.request(&Request::TaskExit {
            pid: self.pid,
            tid: self.tid,
        })
        .map(|_| ())
    }
}

/// A task that goes away while entered leaves its box, as `exit` does.
impl Drop for PeriodicTask {
    fn drop(&mut self) {
        if self.state != State::Idle {
            let _ = self.exit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> PeriodicTask {
        let mut t = PeriodicTask::new();
        t.set_socket(Path::new("/nonexistent/rtbox.sock")).unwrap();
        t
    }

    #[test]
    fn calls_out_of_order_are_refused_with_the_call_expected_first() {
        let mut t = task();
        for r in [
            t.set_wcet(1),
            t.set_period(1),
            t.set_deadline(1),
            t.set_priority(1),
            t.run(0),
            t.wait_for_period(),
            t.exit(),
        ] {
            assert!(
                matches!(
                    r,
                    Err(TaskError::State {
                        state: State::Idle,
                        ..
                    })
                ),
                "{r:?}"
            );
        }
        let e = t.wait_for_period().unwrap_err().to_string();
        assert!(
            e.contains("rt_wait_for_period") && e.contains("rt_run first"),
            "{e}"
        );
        assert_eq!(t.state(), State::Idle);
    }

    #[test]
    fn enter_without_a_box_names_the_way_to_give_one() {
        let mut t = task();
        t.box_name = None;
        let e = t.enter().unwrap_err();
        assert!(
            matches!(e, TaskError::Invalid { field: "box", .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains(ENV_BOX));
    }

    #[test]
    fn an_unreachable_daemon_is_no_daemon_and_nothing_changes() {
        let mut t = task();
        t.set_box("rt").unwrap();
        assert!(matches!(t.enter(), Err(TaskError::NoDaemon(_))));
        assert_eq!(t.state(), State::Idle);
        assert!(matches!(
            t.set_box(""),
            Err(TaskError::Invalid { field: "box", .. })
        ));
    }

    #[test]
    fn setters_check_their_values_once_entered() {
        let mut t = task();
        t.state = State::Entered;
        assert!(matches!(
            t.set_wcet(0),
            Err(TaskError::Invalid { field: "wcet", .. })
        ));
        assert!(matches!(
            t.set_priority(100),
            Err(TaskError::Invalid {
                field: "priority",
                ..
            })
        ));
        t.set_wcet(3).unwrap();
        // run without a period is out of order; with a WCET above the deadline it is invalid.
        assert!(matches!(t.run(0), Err(TaskError::State { .. })));
        t.set_period(10).unwrap();
        t.set_deadline(2).unwrap();
        assert!(matches!(
            t.run(0),
            Err(TaskError::Invalid {
                field: "wcet_ns",
                ..
            })
        ));
        assert_eq!(t.state(), State::Entered);
        t.state = State::Idle;
    }
}
