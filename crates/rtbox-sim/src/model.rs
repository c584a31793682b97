//! The scheduler models the simulator can drive: the rtbox core and three Linux baselines.

use rtbox_core::{Event, Options, Scheduler, TaskId, TaskParams};
use rtbox_model::{Nanos, Placement};

/// A server as reported (rtbox box servers, RT-throttling group runtimes, deadline reservations).
#[derive(Debug, Clone)]
pub struct ServerDesc {
    pub name: String,
    pub box_name: Option<String>,
    pub cpu: u32,
    pub budget: Nanos,
    pub period: Nanos,
}

/// Throttle intervals, for traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelEvent {
    Throttled {
        at: Nanos,
        server: usize,
        until: Nanos,
    },
}

/// What the simulator needs from a scheduler. Tasks are the system's tasks by index.
pub trait Model {
    fn wake(&mut self, now: Nanos, task: usize, deadline: Nanos);
    fn block(&mut self, now: Nanos, task: usize);
    /// Charges elapsed time, fires timers, recomputes decisions.
    fn advance(&mut self, now: Nanos);
    /// Charges elapsed time and fires timers without deciding; wake/block and `advance` at the
    /// same instant follow.
    fn update(&mut self, now: Nanos) {
        self.advance(now);
    }
    fn next_timer(&self) -> Option<Nanos>;
    /// (task, server) running on the CPU at index `cpu`.
    fn running(&self, cpu: usize) -> Option<(usize, Option<usize>)>;
    /// A value that changes whenever [`Model::running`] changes on some CPU, if the model
    /// keeps one: the simulator skips looking at every CPU when it is the same as before.
    fn dispatch_generation(&self) -> Option<u64> {
        None
    }
    /// Appends the CPUs (indices) whose [`Model::running`] may have changed since the last
    /// call, and returns true; a model that does not keep such a list returns false (look at
    /// every CPU).
    fn take_changed_cpus(&mut self, _out: &mut Vec<usize>) -> bool {
        false
    }
    fn servers(&self) -> Vec<ServerDesc>;
    /// The server a task is bound to for good (a member of a pinned box, by the scheduler's own
    /// placement), as an index into [`Model::servers`]; `None` when it may move or has none.
    fn home(&self, _task: usize) -> Option<usize> {
        None
    }
    /// (budget consumed, throttle count).
    fn server_stats(&self, server: usize) -> (Nanos, u64);
    /// Members moved onto the server (a vCPU of a global box) from another of their box's
    /// servers; 0 from a model that does not count them (the baselines).
    fn server_migrations(&self, _server: usize) -> u64 {
        0
    }
    fn drain_events(&mut self, out: &mut Vec<ModelEvent>);
    /// A plug-in box's verdict for the task (`guaranteed`, `unproven`, `background`).
    fn verdict(&self, _task: usize) -> Option<&'static str> {
        None
    }
}

/// The rtbox core, in implicit accounting.
pub struct RtboxModel {
    pub sched: Scheduler,
    pub(crate) ids: Vec<TaskId>,
    /// Per task: whether it is a member of a pinned box.
    pinned: Vec<bool>,
    record: bool,
}

impl RtboxModel {
    pub fn new(
        system: &rtbox_model::System,
        priorities: &[u32],
        record_events: bool,
    ) -> Result<Self, rtbox_core::CoreError> {
        let opts = Options {
            record_events,
            ..Options::default()
        };
        // Pinned members go where the analysis placed them, so its bounds are for what runs.
        let plan = rtbox_analysis::pin_plan(system);
        let mut sched = Scheduler::with_plan(system, opts, plan)?;
        let mut ids = Vec::with_capacity(system.tasks.len());
        for (t, spec) in system.tasks.iter().enumerate() {
            let mut p = TaskParams::from_spec(spec);
            p.priority = priorities[t];
            ids.push(sched.add_task(p)?);
        }
        let pinned = system
            .tasks
            .iter()
            .map(|t| {
                t.box_name
                    .as_deref()
                    .and_then(|b| system.get(b))
                    .is_some_and(|b| b.spec.placement == Placement::Pinned)
            })
            .collect();
        Ok(RtboxModel {
            sched,
            ids,
            pinned,
            record: record_events,
        })
    }
}

impl Model for RtboxModel {
    fn wake(&mut self, now: Nanos, task: usize, deadline: Nanos) {
        let _ = self.sched.wake(now, self.ids[task], Some(deadline));
    }
    fn block(&mut self, now: Nanos, task: usize) {
        let _ = self.sched.block(now, self.ids[task]);
    }
    fn advance(&mut self, now: Nanos) {
        self.sched.advance(now);
    }
    fn update(&mut self, now: Nanos) {
        self.sched.update(now);
    }
    fn next_timer(&self) -> Option<Nanos> {
        self.sched.next_timer()
    }
    fn dispatch_generation(&self) -> Option<u64> {
        Some(self.sched.dispatch_generation())
    }
    fn take_changed_cpus(&mut self, out: &mut Vec<usize>) -> bool {
        self.sched.take_dispatch_changes(out);
        true
    }
    fn running(&self, cpu: usize) -> Option<(usize, Option<usize>)> {
        // Task ids are dense and registered in system order.
        self.sched
            .running_at(cpu)
            .map(|r| (r.task.index(), r.server.map(|s| s.index())))
    }
    fn servers(&self) -> Vec<ServerDesc> {
        (0..self.sched.server_count())
            .map(|i| {
                let s = self.sched.server(rtbox_core::ServerId(i as u32));
                let owner = s.box_name.map(str::to_string);
                ServerDesc {
                    name: format!("{}@{}", owner.as_deref().unwrap_or("task"), s.cpu),
                    box_name: owner,
                    cpu: s.cpu,
                    budget: s.budget,
                    period: s.period,
                }
            })
            .collect()
    }
    fn home(&self, task: usize) -> Option<usize> {
        // A pinned member's placement is the home the core chose when it was registered.
        if !self.pinned[task] {
            return None;
        }
        self.sched.placement(self.ids[task]).map(|s| s.index())
    }
    fn server_stats(&self, server: usize) -> (Nanos, u64) {
        let s = self.sched.server(rtbox_core::ServerId(server as u32));
        (s.consumed, s.throttle_count)
    }
    fn server_migrations(&self, server: usize) -> u64 {
        self.sched
            .server(rtbox_core::ServerId(server as u32))
            .migrations
    }
    fn drain_events(&mut self, out: &mut Vec<ModelEvent>) {
        if !self.record {
            return;
        }
        while let Some(e) = self.sched.poll_event() {
            if let Event::Throttled { at, server, until } = e {
                out.push(ModelEvent::Throttled {
                    at,
                    server: server.index(),
                    until,
                });
            }
        }
    }
}
