//! Boxes that run a scheduler plug-in (seed 001): the rtbox core plus one
//! [`rtbox_core::plugin::PluginGroup`] per such box, fed at every release, completion and timer.
//!
//! The same group code is what the daemon feeds; this adapter only maps the simulator's task
//! indices to group indices and hands the group's priorities and vCPUs to the core.

use std::collections::BTreeMap;

use rtbox_analysis::global::global_fp;
use rtbox_analysis::uni::fp_response;
use rtbox_analysis::{Prm, ServerSet, Task};
use rtbox_core::plugin::{FpTest, Load, PluginGroup, Verdict};
use rtbox_core::{CoreError, ServerId, TaskId};
use rtbox_model::{Nanos, System};

use crate::model::{Model, ModelEvent, RtboxModel, ServerDesc};

/// The analysis's fixed-priority tests over a group's vCPUs: exact RTA on each vCPU's supply
/// (`rtbox_analysis::uni::fp_response`, PRM of the box's server there) and the global FP
/// response-time test over all of them (`rtbox_analysis::global::global_fp`).
#[derive(Debug, Clone)]
pub struct AnalysisTest {
    per_cpu: BTreeMap<u32, Prm>,
}

impl AnalysisTest {
    /// `servers`: (cpu, budget, period) of the group's vCPUs.
    pub fn new(servers: impl IntoIterator<Item = (u32, Nanos, Nanos)>) -> Self {
        AnalysisTest {
            per_cpu: servers
                .into_iter()
                .map(|(c, q, p)| (c, Prm::new(p, q.min(p))))
                .collect(),
        }
    }

    /// The tests over the vCPUs of `box_name` in `sched`.
    pub fn for_box(sched: &rtbox_core::Scheduler, box_name: &str) -> Self {
        AnalysisTest::new(sched.box_servers(box_name).iter().map(|&s| {
            let i = sched.server(s);
            (i.cpu, i.budget, i.period)
        }))
    }

    /// `m` whole CPUs `0..m`.
    pub fn dedicated(m: u32) -> Self {
        AnalysisTest::new((0..m).map(|c| (c, 1, 1)))
    }
}

fn task_of(l: &Load) -> Task {
    Task::with_deadline(l.wcet, l.deadline, l.period)
        .jitter(l.jitter)
        .prio(l.priority)
}

impl FpTest for AnalysisTest {
    fn response(&self, cpu: u32, loads: &[Load], i: usize) -> Option<Nanos> {
        let supply = self.per_cpu.get(&cpu)?;
        let tasks: Vec<Task> = loads.iter().map(task_of).collect();
        let r = fp_response(&tasks, i, supply).ok()?;
        (r.from_arrival <= loads[i].deadline).then_some(r.from_arrival)
    }
    fn global(&self, loads: &[Load]) -> Vec<bool> {
        let tasks: Vec<Task> = loads.iter().map(task_of).collect();
        let set = ServerSet::new(self.per_cpu.values().copied().collect());
        global_fp(&tasks, &set)
            .into_iter()
            .map(|v| v.schedulable)
            .collect()
    }
}

/// One plug-in box: its group and, per group task, the simulator's task and the core's id.
#[derive(Debug)]
struct Member {
    group: PluginGroup,
    tasks: Vec<usize>,
    ids: Vec<TaskId>,
}

/// The rtbox core with plug-in groups on top.
pub struct PluginModel {
    inner: RtboxModel,
    members: Vec<Member>,
    /// Per simulator task: (member, group index).
    of_task: Vec<Option<(usize, usize)>>,
    scratch: Vec<bool>,
}

impl PluginModel {
    pub fn new(system: &System, priorities: &[u32], record: bool) -> Result<Self, CoreError> {
        let mut inner = RtboxModel::new(system, priorities, record)?;
        let mut members = Vec::new();
        let mut of_task = vec![None; system.tasks.len()];
        for b in system.boxes() {
            let name = &b.spec.name;
            let test = AnalysisTest::for_box(&inner.sched, name);
            let Some((mut group, tasks)) =
                PluginGroup::for_box(system, name, &inner.sched, priorities, &test)
            else {
                continue;
            };
            let ids: Vec<TaskId> = tasks.iter().map(|&t| inner.ids[t]).collect();
            group.apply(&mut inner.sched, 0, &ids)?;
            for (g, &t) in tasks.iter().enumerate() {
                of_task[t] = Some((members.len(), g));
            }
            members.push(Member { group, tasks, ids });
        }
        let scratch = vec![false; system.tasks.len()];
        Ok(PluginModel {
            inner,
            members,
            of_task,
            scratch,
        })
    }

    /// The plug-in's verdict for a task of a plug-in box.
    pub fn verdict(&self, task: usize) -> Option<Verdict> {
        let (m, g) = self.of_task[task]?;
        Some(self.members[m].group.verdict(g))
    }

    fn apply(&mut self, now: Nanos) {
        for m in &mut self.members {
            m.group
                .apply(&mut self.inner.sched, now, &m.ids)
                .expect("a plug-in places members on its own box's vCPUs");
        }
    }

    fn timers(&mut self, now: Nanos) {
        for m in &mut self.members {
            m.group.charge(now);
            m.group.fire(now);
        }
        self.apply(now);
    }
}

impl Model for PluginModel {
    fn wake(&mut self, now: Nanos, task: usize, deadline: Nanos) {
        self.inner.wake(now, task, deadline);
        if let Some((m, g)) = self.of_task[task] {
            let group = &mut self.members[m].group;
            group.charge(now);
            if group.ctx().is_ready(g) {
                // The sim wakes a ready task when its next job is already pending.
                group.job_completed(now, g, true);
            } else {
                group.job_released(now, g);
            }
            self.apply(now);
        }
    }
    fn block(&mut self, now: Nanos, task: usize) {
        self.inner.block(now, task);
        if let Some((m, g)) = self.of_task[task] {
            let group = &mut self.members[m].group;
            group.charge(now);
            group.job_completed(now, g, false);
            self.apply(now);
        }
    }
    fn advance(&mut self, now: Nanos) {
        self.timers(now);
        self.inner.advance(now);
        self.scratch.iter_mut().for_each(|r| *r = false);
        for c in 0..self.inner.sched.cpu_count() {
            if let Some((t, _)) = self.inner.running(c) {
                self.scratch[t] = true;
            }
        }
        for m in &mut self.members {
            let (tasks, running) = (&m.tasks, &self.scratch);
            m.group.observe(now, |g| running[tasks[g]]);
        }
    }
    fn update(&mut self, now: Nanos) {
        self.timers(now);
        self.inner.update(now);
    }
    fn next_timer(&self) -> Option<Nanos> {
        let groups = self.members.iter().filter_map(|m| m.group.next_timer());
        self.inner.next_timer().into_iter().chain(groups).min()
    }
    fn running(&self, cpu: usize) -> Option<(usize, Option<usize>)> {
        self.inner.running(cpu)
    }
    fn servers(&self) -> Vec<ServerDesc> {
        self.inner.servers()
    }
    fn home(&self, task: usize) -> Option<usize> {
        // Plug-in members move whenever the plug-in migrates them.
        if self.of_task[task].is_some() {
            return None;
        }
        self.inner.home(task)
    }
    fn server_stats(&self, server: usize) -> (Nanos, u64) {
        let s = self.inner.sched.server(ServerId(server as u32));
        (s.consumed, s.throttle_count)
    }
    fn server_migrations(&self, server: usize) -> u64 {
        self.inner.server_migrations(server)
    }
    fn drain_events(&mut self, out: &mut Vec<ModelEvent>) {
        self.inner.drain_events(out);
    }
    fn verdict(&self, task: usize) -> Option<&'static str> {
        PluginModel::verdict(self, task).map(Verdict::name)
    }
}
