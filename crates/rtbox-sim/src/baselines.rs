//! Baseline models of Linux's existing mechanisms, fed the same system as the rtbox model.
//!
//! Simplifications (see docs/simulator.md): migrations are instantaneous and free; push/pull is
//! modelled as an ideal global assignment (most urgent work first, each task keeps its CPU when it
//! can); no scheduler overheads; the root RT runtime limit (`sched_rt_runtime_us`) and RT runtime
//! sharing between CPUs are not modelled.

use rtbox_core::rules::{
    cbs_charge, cbs_exhausted, cbs_throttle, cbs_unthrottle, cbs_wakeup, CbsParams, CbsState,
};
use rtbox_model::{admit, Nanos, System};

use crate::model::{Model, ModelEvent, ServerDesc};

/// State shared by the baselines: tasks, affinities, readiness, the current assignment.
struct Common {
    now: Nanos,
    ncpu: usize,
    cpu_ids: Vec<u32>,
    allowed: Vec<Vec<bool>>,
    prio: Vec<u32>,
    ready: Vec<bool>,
    seq: Vec<u64>,
    next_seq: u64,
    running: Vec<Option<(usize, Option<usize>)>>,
    /// Per task: the CPU it runs on (as `running` says), so that finding it is no scan.
    on_cpu: Vec<Option<usize>>,
    dirty: bool,
    events: Vec<ModelEvent>,
    record: bool,
}

impl Common {
    fn new(system: &System, priorities: &[u32], record: bool) -> Self {
        let cpu_ids: Vec<u32> = system.platform.cpus.iter().collect();
        let allowed = system
            .tasks
            .iter()
            .map(|t| {
                let set = t
                    .box_name
                    .as_deref()
                    .and_then(|b| system.get(b))
                    .map(|b| b.cpus.clone())
                    .unwrap_or_else(|| system.platform.cpus.clone());
                cpu_ids
                    .iter()
                    .map(|&c| set.contains(c) && t.cpu.is_none_or(|x| x == c))
                    .collect()
            })
            .collect();
        let n = system.tasks.len();
        Common {
            now: 0,
            ncpu: cpu_ids.len(),
            cpu_ids,
            allowed,
            prio: priorities.to_vec(),
            ready: vec![false; n],
            seq: vec![0; n],
            next_seq: 0,
            running: vec![None; cpu_ids_len(system)],
            on_cpu: vec![None; n],
            dirty: true,
            events: Vec::new(),
            record,
        }
    }

    fn wake(&mut self, t: usize) -> bool {
        if self.ready[t] {
            return false;
        }
        self.ready[t] = true;
        self.next_seq += 1;
        self.seq[t] = self.next_seq;
        self.dirty = true;
        true
    }

    fn block(&mut self, t: usize) {
        self.ready[t] = false;
        self.dirty = true;
    }

    fn prev_cpu(&self, t: usize) -> Option<usize> {
        debug_assert_eq!(
            self.on_cpu[t],
            self.running
                .iter()
                .position(|r| r.is_some_and(|r| r.0 == t)),
            "stale CPU of a task"
        );
        self.on_cpu[t]
    }

    /// Installs a new assignment (`running` and each task's `on_cpu`).
    fn set_running(&mut self, out: Vec<Option<(usize, Option<usize>)>>) {
        for r in self.running.iter().flatten() {
            self.on_cpu[r.0] = None;
        }
        for (c, r) in out.iter().enumerate() {
            if let Some(r) = r {
                self.on_cpu[r.0] = Some(c);
            }
        }
        self.running = out;
    }

    /// Gives each task of `order` (most urgent first) a free CPU it may use, keeping its current
    /// CPU when possible; `ok(task, cpu)` adds model-specific limits (throttled groups).
    fn assign(
        &self,
        order: &[(usize, Option<usize>)],
        out: &mut [Option<(usize, Option<usize>)>],
        mut ok: impl FnMut(usize, Option<usize>, usize) -> Option<Option<usize>>,
    ) {
        for &(t, s) in order {
            if out.iter().all(|x| x.is_some()) {
                return;
            }
            let fits = |c: usize, out: &[Option<(usize, Option<usize>)>]| {
                out[c].is_none() && self.allowed[t][c]
            };
            let mut pick = None;
            if let Some(p) = self.prev_cpu(t) {
                if fits(p, out) {
                    if let Some(srv) = ok(t, s, p) {
                        pick = Some((p, srv));
                    }
                }
            }
            if pick.is_none() {
                for c in 0..self.ncpu {
                    if fits(c, out) {
                        if let Some(srv) = ok(t, s, c) {
                            pick = Some((c, srv));
                            break;
                        }
                    }
                }
            }
            if let Some((c, srv)) = pick {
                out[c] = Some((t, srv));
            }
        }
    }
}

fn cpu_ids_len(system: &System) -> usize {
    system.platform.cpus.len()
}

fn fp_key(c: &Common, t: usize) -> (u32, u64) {
    (u32::MAX - c.prio[t], c.seq[t])
}

/// Plain global fixed priority: every task by priority on the CPUs it may use, no reservations.
pub struct FpModel {
    c: Common,
}

impl FpModel {
    pub fn new(system: &System, priorities: &[u32]) -> Self {
        FpModel {
            c: Common::new(system, priorities, false),
        }
    }
}

impl Model for FpModel {
    fn wake(&mut self, _now: Nanos, task: usize, _deadline: Nanos) {
        self.c.wake(task);
    }
    fn block(&mut self, _now: Nanos, task: usize) {
        self.c.block(task);
    }
    fn advance(&mut self, now: Nanos) {
        self.c.now = now;
        if !self.c.dirty {
            return;
        }
        let mut order: Vec<usize> = (0..self.c.ready.len())
            .filter(|&t| self.c.ready[t])
            .collect();
        order.sort_by_key(|&t| fp_key(&self.c, t));
        let order: Vec<(usize, Option<usize>)> = order.into_iter().map(|t| (t, None)).collect();
        let mut out = vec![None; self.c.ncpu];
        self.c.assign(&order, &mut out, |_, _, _| Some(None));
        self.c.set_running(out);
        self.c.dirty = false;
    }
    fn next_timer(&self) -> Option<Nanos> {
        None
    }
    fn running(&self, cpu: usize) -> Option<(usize, Option<usize>)> {
        self.c.running[cpu]
    }
    fn servers(&self) -> Vec<ServerDesc> {
        Vec::new()
    }
    fn server_stats(&self, _server: usize) -> (Nanos, u64) {
        (0, 0)
    }
    fn drain_events(&mut self, _out: &mut Vec<ModelEvent>) {}
}

/// One group runtime: a box's budget per period on one CPU.
struct GroupCpu {
    group: usize,
    cpu: usize,
    budget: Nanos,
    period: Nanos,
    left: Nanos,
    period_start: Nanos,
    throttled: bool,
    consumed: Nanos,
    throttles: u64,
}

/// Linux RT group throttling: each box is an RT group with, on each of its CPUs, a runtime per
/// period (its server's Q and P, periods aligned at multiples of P, unused runtime lost). Groups
/// are ordered by the priority of their most urgent ready task, inside a group by task priority;
/// there is no EDF. Tasks outside boxes are root-group RT tasks, never throttled.
pub struct RtThrottlingModel {
    c: Common,
    group_of: Vec<Option<usize>>,
    group_names: Vec<String>,
    runtimes: Vec<GroupCpu>,
    /// Index into `runtimes` per (group, cpu).
    slot: Vec<Vec<Option<usize>>>,
}

impl RtThrottlingModel {
    pub fn new(system: &System, priorities: &[u32], record: bool) -> Self {
        let c = Common::new(system, priorities, record);
        let group_names: Vec<String> = system
            .boxes()
            .iter()
            .map(|b| b.name().to_string())
            .collect();
        let mut slot = vec![vec![None; c.ncpu]; group_names.len()];
        let mut runtimes = Vec::new();
        for fs in admit(system).flat_servers() {
            let Some(g) = group_names.iter().position(|n| *n == fs.box_name) else {
                continue;
            };
            let Some(ci) = c.cpu_ids.iter().position(|&x| x == fs.cpu) else {
                continue;
            };
            slot[g][ci] = Some(runtimes.len());
            runtimes.push(GroupCpu {
                group: g,
                cpu: ci,
                budget: fs.budget,
                period: fs.period,
                left: fs.budget,
                period_start: 0,
                throttled: false,
                consumed: 0,
                throttles: 0,
            });
        }
        let group_of = system
            .tasks
            .iter()
            .map(|t| {
                t.box_name
                    .as_deref()
                    .and_then(|b| group_names.iter().position(|n| n == b))
                    // Shared boxes have no runtime: their tasks are root-group tasks.
                    .filter(|&g| slot[g].iter().any(|s| s.is_some()))
            })
            .collect();
        RtThrottlingModel {
            c,
            group_of,
            group_names,
            runtimes,
            slot,
        }
    }
}

impl Model for RtThrottlingModel {
    fn wake(&mut self, _now: Nanos, task: usize, _deadline: Nanos) {
        self.c.wake(task);
    }
    fn block(&mut self, _now: Nanos, task: usize) {
        self.c.block(task);
    }
    fn advance(&mut self, now: Nanos) {
        let dt = now - self.c.now;
        if dt > 0 {
            for r in self.c.running.iter().flatten() {
                if let Some(s) = r.1 {
                    let g = &mut self.runtimes[s];
                    debug_assert!(!g.throttled && g.left >= dt, "throttled group ran");
                    g.left -= dt;
                    g.consumed += dt;
                }
            }
        }
        self.c.now = now;
        for (i, g) in self.runtimes.iter_mut().enumerate() {
            if now >= g.period_start + g.period {
                g.period_start = now - now % g.period;
                g.left = g.budget;
                if g.throttled {
                    g.throttled = false;
                }
                self.c.dirty = true;
            }
            if g.left == 0 && !g.throttled {
                g.throttled = true;
                g.throttles += 1;
                self.c.dirty = true;
                if self.c.record {
                    self.c.events.push(ModelEvent::Throttled {
                        at: now,
                        server: i,
                        until: g.period_start + g.period,
                    });
                }
            }
        }
        if !self.c.dirty {
            return;
        }
        // Group priority = its most urgent ready task.
        let mut gprio = vec![0u32; self.group_names.len()];
        for t in 0..self.c.ready.len() {
            if let (true, Some(g)) = (self.c.ready[t], self.group_of[t]) {
                gprio[g] = gprio[g].max(self.c.prio[t]);
            }
        }
        let mut order: Vec<usize> = (0..self.c.ready.len())
            .filter(|&t| self.c.ready[t])
            .collect();
        order.sort_by_key(|&t| {
            let (ep, eg) = match self.group_of[t] {
                Some(g) => (gprio[g], g + 1),
                None => (self.c.prio[t], 0),
            };
            (u32::MAX - ep, eg, u32::MAX - self.c.prio[t], self.c.seq[t])
        });
        let order: Vec<(usize, Option<usize>)> = order.into_iter().map(|t| (t, None)).collect();
        let mut out = vec![None; self.c.ncpu];
        let (group_of, slot, runtimes) = (&self.group_of, &self.slot, &self.runtimes);
        self.c
            .assign(&order, &mut out, |t, _, c| match group_of[t] {
                None => Some(None),
                Some(g) => slot[g][c]
                    .filter(|&s| !runtimes[s].throttled && runtimes[s].left > 0)
                    .map(Some),
            });
        self.c.set_running(out);
        self.c.dirty = false;
    }
    fn next_timer(&self) -> Option<Nanos> {
        let mut next: Option<Nanos> = None;
        let mut take = |t: Nanos| next = Some(next.map_or(t, |n: Nanos| n.min(t)));
        let mut running_slot = vec![false; self.runtimes.len()];
        for r in self.c.running.iter().flatten() {
            if let Some(s) = r.1 {
                running_slot[s] = true;
                take(self.c.now + self.runtimes[s].left);
            }
        }
        for (i, g) in self.runtimes.iter().enumerate() {
            if g.throttled || running_slot[i] {
                take(g.period_start + g.period);
            }
        }
        next
    }
    fn running(&self, cpu: usize) -> Option<(usize, Option<usize>)> {
        self.c.running[cpu]
    }
    fn servers(&self) -> Vec<ServerDesc> {
        self.runtimes
            .iter()
            .map(|g| ServerDesc {
                name: format!("{}@{}", self.group_names[g.group], self.c.cpu_ids[g.cpu]),
                box_name: Some(self.group_names[g.group].clone()),
                cpu: self.c.cpu_ids[g.cpu],
                budget: g.budget,
                period: g.period,
            })
            .collect()
    }
    fn server_stats(&self, server: usize) -> (Nanos, u64) {
        let g = &self.runtimes[server];
        (g.consumed, g.throttles)
    }
    fn drain_events(&mut self, out: &mut Vec<ModelEvent>) {
        out.append(&mut self.c.events);
    }
}

/// One SCHED_DEADLINE reservation.
struct DlServer {
    task: usize,
    params: CbsParams,
    st: CbsState,
    throttled: bool,
    replenish_at: Nanos,
    /// When it last joined the ready reservations (wake-up or replenishment), as a sequence
    /// number: the tie-break among equal deadlines.
    enqueued: u64,
    consumed: Nanos,
    throttles: u64,
}

/// SCHED_DEADLINE's order of ready reservations, most urgent first (kernel/sched/deadline.c):
/// the earlier absolute deadline; at equal deadlines the running one stays ahead, because a
/// wake-up or a push preempts only with a strictly earlier deadline (`dl_entity_preempt` is a
/// strict `dl_time_before`); then the one enqueued first, because the deadline tree places an
/// equal key after those already queued (`__dl_less`).
fn dl_order_key(deadline: Nanos, running: bool, enqueued: u64) -> (Nanos, bool, u64) {
    (deadline, !running, enqueued)
}

/// One SCHED_DEADLINE reservation per boxed task (runtime = WCET, deadline and period = the
/// task's, unless overridden), scheduled by global EDF of hard CBS servers on the CPUs the task
/// may use. Tasks outside boxes run below all reservations by fixed priority.
pub struct DeadlineModel {
    c: Common,
    servers: Vec<DlServer>,
    /// The earliest replenishment of a throttled reservation, found by `advance`'s pass over
    /// the reservations (throttling changes only there).
    next_replenish: Option<Nanos>,
    /// Scratch of `advance`: (order key, reservation) of the ready ones.
    keyed: Vec<((Nanos, bool, u64), usize)>,
    /// A wake-up left some budget exhausted (revised wake-up rule): the next `advance` fires
    /// timers even if no replenishment is due.
    exhausted_hint: bool,
    /// The tasks without a reservation (they run below all reservations), in task order.
    background: Vec<usize>,
    server_of: Vec<Option<usize>>,
    names: Vec<String>,
}

impl DeadlineModel {
    /// `params[t]`: the reservation (budget, deadline, period) of task `t`, `None` for
    /// background tasks.
    pub fn new(
        system: &System,
        priorities: &[u32],
        params: &[Option<(Nanos, Nanos, Nanos)>],
        record: bool,
    ) -> Self {
        let c = Common::new(system, priorities, record);
        let mut servers = Vec::new();
        let mut server_of = vec![None; system.tasks.len()];
        for (t, p) in params.iter().enumerate() {
            if let Some((q, d, per)) = *p {
                server_of[t] = Some(servers.len());
                servers.push(DlServer {
                    task: t,
                    params: CbsParams {
                        budget: q,
                        period: per,
                        deadline: d.min(per),
                    },
                    st: CbsState {
                        runtime: q as i64,
                        deadline: 0,
                    },
                    throttled: false,
                    replenish_at: 0,
                    enqueued: 0,
                    consumed: 0,
                    throttles: 0,
                });
            }
        }
        DeadlineModel {
            c,
            servers,
            next_replenish: None,
            keyed: Vec::new(),
            exhausted_hint: false,
            background: (0..server_of.len())
                .filter(|&t| server_of[t].is_none())
                .collect(),
            server_of,
            names: system.tasks.iter().map(|t| t.name.clone()).collect(),
        }
    }
}

impl DeadlineModel {
    /// The reservations' timers at `now`, in id order: replenishments whose time has come, then
    /// throttles of exhausted budgets; keeps the earliest replenishment.
    fn fire_timers(&mut self, now: Nanos) {
        let mut next_replenish: Option<Nanos> = None;
        for (i, srv) in self.servers.iter_mut().enumerate() {
            if srv.throttled && srv.replenish_at <= now {
                // The replenishment timer: the server re-joins the ready ones (restarted if it
                // lags, the core's rule) behind those of equal deadline.
                srv.throttled = false;
                srv.st = cbs_unthrottle(srv.st, srv.params, now);
                self.c.next_seq += 1;
                srv.enqueued = self.c.next_seq;
                self.c.dirty = true;
            }
            if !srv.throttled && cbs_exhausted(srv.st) {
                let (st, until) = cbs_throttle(srv.st, srv.params, now);
                srv.st = st;
                srv.throttles += 1;
                self.c.dirty = true;
                if let Some(u) = until {
                    srv.throttled = true;
                    srv.replenish_at = u;
                    if self.c.record {
                        self.c.events.push(ModelEvent::Throttled {
                            at: now,
                            server: i,
                            until: u,
                        });
                    }
                }
            }
            if srv.throttled {
                let r = srv.replenish_at;
                next_replenish = Some(next_replenish.map_or(r, |n| n.min(r)));
            }
        }
        self.next_replenish = next_replenish;
        self.exhausted_hint = false;
    }
}

impl Model for DeadlineModel {
    fn wake(&mut self, now: Nanos, task: usize, _deadline: Nanos) {
        if self.c.wake(task) {
            if let Some(s) = self.server_of[task] {
                let srv = &mut self.servers[s];
                srv.enqueued = self.c.seq[task];
                if !srv.throttled {
                    srv.st = cbs_wakeup(srv.st, srv.params, now);
                    // The revised wake-up rule can leave nothing: throttle at the next advance.
                    if cbs_exhausted(srv.st) {
                        self.exhausted_hint = true;
                    }
                }
            }
        }
    }
    fn block(&mut self, _now: Nanos, task: usize) {
        self.c.block(task);
    }
    fn advance(&mut self, now: Nanos) {
        let dt = now - self.c.now;
        // A timer can be due only if a replenishment time has come or some budget ran out: a
        // charged one, or one cut by a wake-up (`exhausted_hint`); then every reservation is
        // looked at, in id order, as always.
        let mut due = self.exhausted_hint || self.next_replenish.is_some_and(|r| r <= now);
        if dt > 0 {
            for r in self.c.running.iter().flatten() {
                if let Some(s) = r.1 {
                    let srv = &mut self.servers[s];
                    srv.st = cbs_charge(srv.st, dt);
                    srv.consumed += dt;
                    debug_assert!(srv.st.runtime >= 0, "budget went negative");
                    due |= cbs_exhausted(srv.st);
                }
            }
        }
        self.c.now = now;
        if due {
            self.fire_timers(now);
        }
        #[cfg(debug_assertions)]
        for srv in &self.servers {
            debug_assert!(
                !(srv.throttled && srv.replenish_at <= now)
                    && (srv.throttled || !cbs_exhausted(srv.st)),
                "a reservation's timer was left unfired"
            );
        }
        if !self.c.dirty {
            return;
        }
        let mut dl = std::mem::take(&mut self.keyed);
        dl.clear();
        dl.extend(
            self.servers
                .iter()
                .enumerate()
                .filter(|(_, s)| !s.throttled && self.c.ready[s.task])
                .map(|(i, s)| {
                    let running = self.c.prev_cpu(s.task).is_some();
                    (dl_order_key(s.st.deadline, running, s.enqueued), i)
                }),
        );
        // Only the most urgent servers can win a CPU: order the first ncpu (keys are unique,
        // so this prefix is exactly that of a full sort) and the rest only if CPUs are left
        // (affinity can leave some free); the assignment is the one of the full order.
        let k = self.c.ncpu.min(dl.len());
        if k > 0 && k < dl.len() {
            dl.select_nth_unstable(k - 1);
        }
        dl[..k].sort_unstable();
        let as_order = |d: &[((Nanos, bool, u64), usize)]| -> Vec<(usize, Option<usize>)> {
            d.iter()
                .map(|&(_, s)| (self.servers[s].task, Some(s)))
                .collect()
        };
        let mut out = vec![None; self.c.ncpu];
        self.c
            .assign(&as_order(&dl[..k]), &mut out, |_, s, _| Some(s));
        if out.iter().any(Option::is_none) {
            dl[k..].sort_unstable();
            let mut order = as_order(&dl[k..]);
            let mut bg: Vec<usize> = self
                .background
                .iter()
                .copied()
                .filter(|&t| self.c.ready[t])
                .collect();
            bg.sort_by_key(|&t| fp_key(&self.c, t));
            order.extend(bg.into_iter().map(|t| (t, None)));
            self.c.assign(&order, &mut out, |_, s, _| Some(s));
        }
        self.keyed = dl;
        self.c.set_running(out);
        self.c.dirty = false;
    }
    fn next_timer(&self) -> Option<Nanos> {
        let mut next: Option<Nanos> = None;
        let mut take = |t: Nanos| next = Some(next.map_or(t, |n: Nanos| n.min(t)));
        for r in self.c.running.iter().flatten() {
            if let Some(s) = r.1 {
                take(self.c.now + self.servers[s].st.runtime.max(0) as Nanos);
            }
        }
        debug_assert_eq!(
            self.next_replenish,
            self.servers
                .iter()
                .filter(|s| s.throttled)
                .map(|s| s.replenish_at)
                .min(),
            "stale next replenishment"
        );
        if let Some(r) = self.next_replenish {
            take(r);
        }
        next
    }
    fn running(&self, cpu: usize) -> Option<(usize, Option<usize>)> {
        self.c.running[cpu]
    }
    fn servers(&self) -> Vec<ServerDesc> {
        self.servers
            .iter()
            .map(|s| ServerDesc {
                name: format!("dl:{}", self.names[s.task]),
                box_name: None,
                cpu: self.c.cpu_ids[self.c.allowed[s.task].iter().position(|&a| a).unwrap_or(0)],
                budget: s.params.budget,
                period: s.params.period,
            })
            .collect()
    }
    fn server_stats(&self, server: usize) -> (Nanos, u64) {
        let s = &self.servers[server];
        (s.consumed, s.throttles)
    }
    fn drain_events(&mut self, out: &mut Vec<ModelEvent>) {
        out.append(&mut self.c.events);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtbox_model::{BoxSpec, Interface, Platform, TaskSpec};

    const MS: Nanos = 1_000_000;

    fn one_reservation() -> DeadlineModel {
        let b = BoxSpec::new(
            "b",
            Interface::PerCpu {
                budget: MS,
                period: 10 * MS,
            },
        );
        let mut t = TaskSpec::periodic("t", 3 * MS, 6 * MS);
        t.box_name = Some("b".into());
        let system = System::new(Platform::with_cpus(1), vec![b], vec![t]).unwrap();
        DeadlineModel::new(&system, &[1], &[Some((3 * MS, 6 * MS, 6 * MS))], false)
    }

    /// A throttled reservation replenished to d = 12 ms whose timer fires late.
    fn throttled_until_6(m: &mut DeadlineModel) {
        m.servers[0].throttled = true;
        m.servers[0].replenish_at = 6 * MS;
        m.next_replenish = Some(6 * MS);
        m.servers[0].st = CbsState {
            runtime: (3 * MS) as i64,
            deadline: 12 * MS,
        };
    }

    #[test]
    fn late_timer_restarts_only_a_deadline_strictly_in_the_past() {
        // The kernel's lag rule (strict `dl_time_before` in `replenish_dl_entity`), through the
        // core's `cbs_unthrottle`: firing at d itself keeps d.
        let mut m = one_reservation();
        m.wake(0, 0, 6 * MS);
        throttled_until_6(&mut m);
        m.c.now = 12 * MS;
        m.advance(12 * MS);
        assert!(!m.servers[0].throttled);
        assert_eq!(m.servers[0].st.deadline, 12 * MS);
        // One nanosecond later the deadline has passed: restart at now + D.
        let mut m = one_reservation();
        m.wake(0, 0, 6 * MS);
        throttled_until_6(&mut m);
        m.c.now = 12 * MS + 1;
        m.advance(12 * MS + 1);
        assert_eq!(m.servers[0].st.deadline, 18 * MS + 1);
        assert_eq!(m.running(0), Some((0, Some(0))));
    }
}
