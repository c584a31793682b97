//! Applying a new box set to a running scheduler without losing the state of what stays.

use std::collections::BTreeMap;

use rtbox_model::{Nanos, PinPlan, Placement, System};

use super::{Owner, Scheduler};
use crate::rules::cbs_change;
use crate::types::{CoreError, Reconfigured, Running, ServerId, TaskId};

/// What identifies a server across configurations: a box's vCPU by (box name, CPU id), a
/// dedicated reservation by its task (task ids never change).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum ServerKey {
    Vcpu(String, u32),
    Dedicated(TaskId),
}

impl Scheduler {
    fn server_key(&self, s: ServerId) -> ServerKey {
        let srv = &self.servers[s.index()];
        match srv.owner {
            Owner::Box(b) => ServerKey::Vcpu(self.boxes[b].name.clone(), self.cpus[srv.cpu_idx].id),
            Owner::Task(t) => ServerKey::Dedicated(t),
        }
    }

    /// Applies a new box set (and platform) at `now`; decisions are fresh when it returns, as
    /// after [`Scheduler::advance`]`(now)`.
    ///
    /// - Refusal: whatever [`Scheduler::new`] refuses for `system` (admission, typed
    ///   [`CoreError::NotAdmitted`]), and whatever [`Scheduler::add_task`] would refuse when
    ///   registering the current tasks again (a dedicated reservation that no longer fits the
    ///   cap, a pinned task's CPU where its box has no server any more, a box left without
    ///   servers...), refuses the whole change and leaves the scheduler exactly as it was.
    ///   Admission with the enforcement loop ([`rtbox_model::admit_with_loop`]) stays the
    ///   caller's.
    /// - Servers are matched by (box name, CPU) (dedicated reservations by their task). A server
    ///   with the same budget, period and deadline keeps everything: remaining budget, deadline,
    ///   throttle and replenishment time, consumed time and throttle count. A server whose
    ///   parameters changed keeps its counters and gets [`crate::rules::cbs_change`]. A new
    ///   server starts fresh, as in [`Scheduler::new`]; a removed one disappears.
    /// - Server ids are renumbered (the flattening's order): [`Reconfigured::server_map`] maps
    ///   old ids to new. Tasks keep their [`TaskId`], readiness, local deadline and queue
    ///   position; a pinned member stays on its vCPU while that exists; a global member stays on
    ///   its vCPU if it still wins. Members of a deleted box, or of a box that became shared,
    ///   become background tasks and are listed in [`Reconfigured::released`]; tasks of a
    ///   shared box that now has servers become its members ([`Reconfigured::joined`]).
    /// - The time up to `now` is charged and due timers fire under the old configuration first.
    ///   Queued [`crate::Event`]s (old ids) are drained into [`Reconfigured::events`]; the queue
    ///   then only holds events with new ids.
    pub fn reconfigure(&mut self, now: Nanos, system: &System) -> Result<Reconfigured, CoreError> {
        debug_assert!(now >= self.now, "time went backwards");
        // Everything that can fail happens on a scheduler of its own.
        // The plan of pinned members is kept: it names tasks, and a pinned member without a
        // named CPU keeps its vCPU anyway (carry_tasks).
        let mut next = Scheduler::with_plan(system, self.opts, PinPlan::clone(&self.plan))?;
        let (released, joined) = self.register_tasks_again(&mut next)?;
        self.update(now);
        let server_map = self.carry_servers(&mut next, now);
        let changed = (0..self.servers.len())
            .filter_map(|i| {
                server_map[i].filter(|j| self.servers[i].params != next.servers[j.index()].params)
            })
            .collect();
        self.carry_tasks(&mut next, &server_map);
        self.carry_running(&mut next, &server_map);
        // What runs is recomputed on every CPU at the first decision: a CPU may still show what
        // ran under the old boxes (a reclaim member running uncharged, say) that no pick of
        // that decision would replace.
        for c in 0..next.cpus.len() {
            next.redo_cpu(c);
        }
        next.now = now;
        next.seq = self.seq;
        // What runs may have changed: a driver comparing generations must look again.
        next.dispatch_gen = self.dispatch_gen + 1;
        // A cut budget may be exhausted already: throttle it before deciding.
        next.timers_due = true;
        let removed = (0..self.servers.len())
            .filter(|&i| server_map[i].is_none())
            .map(|i| ServerId(i as u32))
            .collect();
        let mut kept = vec![false; next.servers.len()];
        for j in server_map.iter().flatten() {
            kept[j.index()] = true;
        }
        let added = (0..next.servers.len())
            .filter(|&j| !kept[j])
            .map(|j| ServerId(j as u32))
            .collect();
        let events = self.events.drain(..).collect();
        *self = next;
        self.dirty = true;
        self.advance(now);
        Ok(Reconfigured {
            server_map,
            removed,
            added,
            changed,
            released,
            joined,
            events,
        })
    }

    /// Registers every task again, in order (so with the same ids), on `next`. A task whose box
    /// is gone becomes a background task. Returns the tasks that left a box's servers for the
    /// background (box deleted or now shared) and those that joined a box's servers (their
    /// shared box now has some).
    fn register_tasks_again(
        &self,
        next: &mut Scheduler,
    ) -> Result<(Vec<TaskId>, Vec<TaskId>), CoreError> {
        let (mut released, mut joined) = (Vec::new(), Vec::new());
        for (i, tk) in self.tasks.iter().enumerate() {
            let t = TaskId(i as u32);
            let mut spec = self.spec(t).clone();
            let was_member = tk.box_idx.is_some();
            if let Some(name) = &spec.box_name {
                match next.box_info(name).map(|b| b.shared) {
                    None => {
                        spec.box_name = None;
                        if was_member {
                            released.push(t);
                        }
                    }
                    Some(true) if was_member => released.push(t),
                    Some(false) if !was_member => joined.push(t),
                    _ => {}
                }
            }
            let id = next.add_task(spec)?;
            debug_assert_eq!(id, t, "task ids renumbered");
        }
        Ok((released, joined))
    }

    /// Carries the state of every server that still exists over to `next` (rule of
    /// [`Scheduler::reconfigure`]); returns the new id of each old server.
    fn carry_servers(&self, next: &mut Scheduler, now: Nanos) -> Vec<Option<ServerId>> {
        let by_key: BTreeMap<ServerKey, ServerId> = (0..next.servers.len())
            .map(|j| (next.server_key(ServerId(j as u32)), ServerId(j as u32)))
            .collect();
        let server_map: Vec<Option<ServerId>> = (0..self.servers.len())
            .map(|i| by_key.get(&self.server_key(ServerId(i as u32))).copied())
            .collect();
        for (o, j) in self.servers.iter().zip(&server_map) {
            let Some(j) = j else { continue };
            let n = &mut next.servers[j.index()];
            n.st = if o.params == n.params {
                o.st
            } else {
                cbs_change(o.st, n.params, now, o.throttled.then_some(o.replenish_at))
            };
            n.tent = n.st;
            n.throttled = o.throttled;
            n.replenish_at = o.replenish_at;
            n.backlogged = o.backlogged;
            n.consumed = o.consumed;
            n.throttles = o.throttles;
            n.migrations = o.migrations;
            debug_assert!(
                o.params != n.params || n.st == o.st,
                "an unchanged server lost its state"
            );
        }
        server_map
    }

    /// Carries every task's state over to `next`: readiness, local deadline, queue position,
    /// round-robin slice, and the vCPU it sat on if that survives in its box.
    fn carry_tasks(&self, next: &mut Scheduler, server_map: &[Option<ServerId>]) {
        let map = |s: Option<ServerId>| s.and_then(|s| server_map[s.index()]);
        for (i, o) in self.tasks.iter().enumerate() {
            let t = TaskId(i as u32);
            let box_idx = next.tasks[i].box_idx;
            let placement = box_idx.map(|b| next.boxes[b].placement);
            // The vCPUs it had, if they survive in its box.
            let (old_home, placed, last_placed, waits_on) = {
                let in_box = |s: &ServerId| matches!(next.servers[s.index()].owner, Owner::Box(b) if Some(b) == box_idx);
                (
                    map(o.home).filter(in_box),
                    map(o.placed).filter(in_box).filter(|_| o.ready),
                    map(o.last_placed).filter(in_box),
                    map(o.waits_on).filter(in_box),
                )
            };
            // A pinned member without a named CPU keeps the vCPU it had (registration spreads
            // members by order, which a changed server set could shift).
            if let (Some(Placement::Pinned), Some(home), None) =
                (placement, old_home, self.spec(t).cpu)
            {
                if let Some(cur) = next.tasks[i].home.filter(|&h| h != home) {
                    next.servers[cur.index()].members.retain(|&m| m != t);
                    next.servers[home.index()].members.push(t);
                    next.tasks[i].home = Some(home);
                    next.tasks[i].placed = Some(home);
                }
            }
            if placement == Some(Placement::Global) {
                next.tasks[i].placed = placed;
                next.tasks[i].last_placed = last_placed;
                next.tasks[i].waits_on = waits_on;
            }
            let n = &mut next.tasks[i];
            n.ready = o.ready;
            n.deadline = o.deadline;
            n.seq = o.seq;
            n.slice_used = o.slice_used;
            if let (true, Some(b)) = (o.ready, box_idx) {
                next.boxes[b].ready.push(t);
                next.boxes[b].sorted = false;
            }
        }
    }

    /// What ran on each CPU, under the new ids, so that the first decision reports only what
    /// changes (a server that no longer hosts the task counts as none).
    fn carry_running(&self, next: &mut Scheduler, server_map: &[Option<ServerId>]) {
        for c in 0..next.cpus.len() {
            let id = next.cpus[c].id;
            let old = self
                .cpus
                .iter()
                .find(|x| x.id == id)
                .and_then(|x| x.running);
            next.cpus[c].running = old.map(|r| Running {
                task: r.task,
                server: r.server.and_then(|s| server_map[s.index()]).filter(|s| {
                    let srv = &next.servers[s.index()];
                    let hosts = match srv.owner {
                        Owner::Task(t) => t == r.task,
                        Owner::Box(b) => next.tasks[r.task.index()].box_idx == Some(b),
                    };
                    srv.cpu_idx == c && hosts
                }),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use rtbox_model::{BoxSpec, CpuSet, Interface, Mode, Placement, Platform, Policy, ServerSpec};

    use super::*;
    use crate::types::{Event, Options, Reservation, TaskParams};

    /// Everything a kept server must carry over, by (owner, CPU).
    type State = (u64, u64, i64, Nanos, bool, Nanos, Nanos, u64);

    fn key_name(s: &Scheduler, id: ServerId) -> (String, u32) {
        let i = s.server(id);
        let owner = match (i.box_name, i.task) {
            (Some(b), _) => b.to_string(),
            (None, Some(t)) => format!("task {}", t.0),
            (None, None) => unreachable!(),
        };
        (owner, i.cpu)
    }

    fn snapshot(s: &Scheduler) -> BTreeMap<(String, u32), State> {
        (0..s.server_count())
            .map(|i| {
                let id = ServerId(i as u32);
                let x = s.server(id);
                let srv = &s.servers[i];
                let st = (
                    x.budget,
                    x.period,
                    x.runtime,
                    x.deadline,
                    x.throttled,
                    if x.throttled { srv.replenish_at } else { 0 },
                    x.consumed,
                    x.throttle_count,
                );
                (key_name(s, id), st)
            })
            .collect()
    }

    fn srv(cpu: u32, budget: Nanos, period: Nanos) -> ServerSpec {
        ServerSpec {
            cpu,
            budget,
            period,
        }
    }

    fn boxes() -> Vec<BoxSpec> {
        let mut a = BoxSpec::new("A", Interface::Servers(vec![srv(0, 3, 10), srv(1, 3, 10)]));
        a.placement = Placement::Pinned;
        let b = BoxSpec::new("B", Interface::Servers(vec![srv(0, 2, 7), srv(1, 2, 7)]));
        let c = BoxSpec::new("C", Interface::Servers(vec![srv(1, 1, 5)]));
        vec![a, b, c]
    }

    fn system(boxes: Vec<BoxSpec>) -> System {
        System::new(Platform::with_cpus(2), boxes, vec![]).unwrap()
    }

    /// A scheduler mid-flight: busy members in every box and a dedicated reservation, run to
    /// t = 23 so that budgets, deadlines and throttles differ between servers.
    fn busy() -> (Scheduler, Vec<TaskId>) {
        let mut s = Scheduler::new(&system(boxes()), Options::default()).unwrap();
        let member = |n: &str, b: &str| TaskParams {
            box_name: Some(b.into()),
            ..TaskParams::background(n, 1)
        };
        let mut tasks = vec![
            s.add_task(member("a0", "A")).unwrap(),
            s.add_task(member("a1", "A")).unwrap(),
            s.add_task(member("b", "B")).unwrap(),
            s.add_task(member("c", "C")).unwrap(),
        ];
        tasks.push(
            s.add_task(TaskParams {
                reservation: Some(Reservation {
                    cpu: 0,
                    budget: 1,
                    period: 4,
                    deadline: 4,
                }),
                ..TaskParams::background("dl", 0)
            })
            .unwrap(),
        );
        for &t in &tasks {
            s.wake(0, t, None).unwrap();
        }
        s.advance(0);
        let mut now = 0;
        while now < 23 {
            now = s.next_timer().unwrap().min(23);
            s.advance(now);
        }
        while s.poll_event().is_some() {}
        (s, tasks)
    }

    fn assert_kept_except(
        before: &BTreeMap<(String, u32), State>,
        after: &BTreeMap<(String, u32), State>,
        box_name: &str,
        expected: usize,
    ) {
        let mut compared = 0;
        for (k, v) in before {
            if k.0 == box_name {
                continue;
            }
            assert_eq!(after.get(k), Some(v), "server {k:?} changed");
            compared += 1;
        }
        assert_eq!(compared, expected, "servers compared");
    }

    #[test]
    fn changing_one_box_keeps_every_other_server_exactly() {
        let (mut s, _) = busy();
        let before = snapshot(&s);
        assert!(
            before.values().any(|v| v.4) && before.values().any(|v| !v.4),
            "the fixture has throttled and running servers: {before:?}"
        );
        let mut bx = boxes();
        bx[1].interface = Interface::Servers(vec![srv(0, 1, 7), srv(1, 2, 14)]);
        let r = s.reconfigure(23, &system(bx)).unwrap();
        let after = snapshot(&s);
        assert_kept_except(&before, &after, "B", 4);
        assert_eq!(r.changed.len(), 2);
        assert!(r.removed.is_empty() && r.added.is_empty() && r.released.is_empty());
        for &j in &r.changed {
            let i = s.server(j);
            assert_eq!(i.box_name, Some("B"));
            let old = before[&key_name(&s, j)];
            assert_eq!(
                (i.consumed, i.throttle_count),
                (old.6, old.7),
                "B's statistics kept"
            );
            assert!(
                i.runtime <= old.2,
                "a change never adds budget within the period"
            );
        }
    }

    #[test]
    fn adding_one_box_keeps_every_other_server_exactly() {
        let (mut s, _) = busy();
        let before = snapshot(&s);
        let mut bx = boxes();
        bx.push(BoxSpec::new("D", Interface::Servers(vec![srv(0, 1, 10)])));
        let r = s.reconfigure(23, &system(bx)).unwrap();
        assert_kept_except(&before, &snapshot(&s), "D", 6);
        assert_eq!(r.added.len(), 1);
        let d = s.server(r.added[0]);
        assert_eq!((d.box_name, d.runtime, d.consumed), (Some("D"), 1, 0));
        // Every old server maps to the one with the same box and CPU.
        assert_eq!(r.server_map.len(), before.len());
        assert!(r.server_map.iter().all(|x| x.is_some()), "nothing removed");
        let ids: std::collections::BTreeSet<_> = r.server_map.iter().flatten().collect();
        assert_eq!(ids.len(), before.len(), "one new id per old server");
    }

    #[test]
    fn deleting_one_box_keeps_the_others_and_releases_its_members() {
        let (mut s, tasks) = busy();
        let before = snapshot(&s);
        let old_c = s.box_servers("C").to_vec();
        let r = s.reconfigure(23, &system(boxes()[..2].to_vec())).unwrap();
        assert_kept_except(&before, &snapshot(&s), "C", 5);
        assert_eq!(r.removed, old_c);
        assert_eq!(r.map(old_c[0]), None);
        assert_eq!(r.released, vec![tasks[3]]);
        // The released member is a background task now: it runs only where no server does.
        assert!(s.box_servers("C").is_empty());
        for cpu in s.cpus().collect::<Vec<_>>() {
            if let Some(run) = s.running(cpu).filter(|x| x.task == tasks[3]) {
                assert_eq!(run.server, None);
            }
        }
    }

    #[test]
    fn a_box_that_becomes_shared_releases_its_members_and_takes_them_back() {
        let (mut s, tasks) = busy();
        let c = tasks[3];
        let mut bx = boxes();
        bx[2].interface = Interface::Shared { weight: 2 };
        let r = s.reconfigure(23, &system(bx)).unwrap();
        assert_eq!((r.released.clone(), r.joined.clone()), (vec![c], vec![]));
        assert_eq!(r.removed.len(), 1);
        assert_eq!(
            s.box_info("C").map(|b| (b.shared, b.weight)),
            Some((true, Some(2)))
        );
        assert_eq!(s.placement(c), None);
        let t = s.next_timer().unwrap();
        s.advance(t);
        let r = s.reconfigure(t, &system(boxes())).unwrap();
        assert_eq!((r.released, r.joined), (vec![], vec![c]));
        assert_eq!(r.added.len(), 1);
        let sid = s.box_servers("C")[0];
        assert_eq!(s.server(sid).consumed, 0, "a new server, fresh");
        assert!(
            s.cpus().any(|cpu| s.running(cpu)
                == Some(Running {
                    task: c,
                    server: Some(sid)
                })),
            "the ready member runs on the fresh server (earliest deadline on CPU 1)"
        );
    }

    #[test]
    fn members_of_surviving_servers_keep_running() {
        let (mut s, tasks) = busy();
        let running: Vec<_> = s.cpus().map(|c| s.running(c)).collect();
        let placement: Vec<_> = tasks.iter().map(|&t| s.placement(t)).collect();
        let mut bx = boxes();
        bx.push(BoxSpec::new("D", Interface::Servers(vec![srv(1, 1, 1000)])));
        let r = s.reconfigure(23, &system(bx)).unwrap();
        for (c, old) in running.iter().enumerate() {
            let now = s.running(c as u32);
            assert_eq!(
                now.map(|x| (x.task, x.server)),
                old.map(|x| (x.task, x.server.and_then(|o| r.map(o)))),
                "CPU {c}"
            );
        }
        for (i, &t) in tasks.iter().enumerate() {
            assert_eq!(s.placement(t), placement[i].and_then(|o| r.map(o)), "{t:?}");
        }
    }

    #[test]
    fn a_refused_reconfiguration_changes_nothing() {
        let (mut s, _) = busy();
        let before = format!("{s:?}");
        // Over the cap on CPU 1: 0.3 + 0.29 + 0.2 + 0.2 > 0.95.
        let mut bx = boxes();
        bx.push(BoxSpec::new("D", Interface::Servers(vec![srv(1, 2, 10)])));
        let err = s.reconfigure(23, &system(bx)).unwrap_err();
        assert!(
            matches!(&err, CoreError::NotAdmitted(r) if r.len() == 1),
            "{err:?}"
        );
        assert_eq!(format!("{s:?}"), before);
        // The dedicated reservation (0.25 on CPU 0) no longer fits next to a bigger A:
        // 0.45 + 2/7 + 0.25 > 0.95, while the boxes alone fit.
        let mut bx = boxes();
        bx[0].interface = Interface::Servers(vec![srv(0, 9, 20), srv(1, 3, 10)]);
        let err = s.reconfigure(23, &system(bx)).unwrap_err();
        assert!(
            matches!(&err, CoreError::CpuFull { task, cpu: 0, .. } if task == "dl"),
            "{err:?}"
        );
        assert_eq!(format!("{s:?}"), before);
        // A pinned member that names a CPU its box leaves.
        let mut t = Scheduler::new(&system(boxes()), Options::default()).unwrap();
        t.add_task(TaskParams {
            box_name: Some("A".into()),
            cpu: Some(1),
            ..TaskParams::background("p", 1)
        })
        .unwrap();
        let before = format!("{t:?}");
        let mut bx = boxes();
        bx[0].interface = Interface::Servers(vec![srv(0, 3, 10)]);
        let err = t.reconfigure(0, &system(bx)).unwrap_err();
        assert!(
            matches!(err, CoreError::NoServerOnCpu { cpu: 1, .. }),
            "{err:?}"
        );
        assert_eq!(format!("{t:?}"), before);
    }

    #[test]
    fn queued_events_come_back_with_the_old_ids() {
        let (mut s, _) = busy();
        let t = s.next_timer().unwrap();
        s.advance(t);
        let pending = s.events.len();
        assert!(pending > 0);
        let r = s.reconfigure(t, &system(boxes()[1..].to_vec())).unwrap();
        assert_eq!(r.events.len(), pending);
        // Whatever is queued now names only servers of the new configuration.
        while let Some(e) = s.poll_event() {
            let sid = match e {
                Event::Throttled { server, .. }
                | Event::Replenished { server, .. }
                | Event::Renewed { server, .. } => Some(server),
                Event::Migrated { to, .. } => Some(to),
                Event::Dispatched { running, .. } => running.and_then(|r| r.server),
            };
            assert!(sid.is_none_or(|x| x.index() < s.server_count()));
        }
    }

    // ---- random sequences ----------------------------------------------------------------

    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n.max(1)
        }
    }

    /// Box `b{i}` of at most 0.2 on CPU 0 and some of CPUs 1..2, with random parameters.
    fn random_box(rng: &mut Lcg, i: usize) -> BoxSpec {
        let period = 10 + rng.next(90);
        let budget = 1 + rng.next(period / 5);
        let mut spec = BoxSpec::new(format!("b{i}"), Interface::PerCpu { budget, period });
        let mut cpus = CpuSet::new();
        cpus.insert(0);
        for c in 1..3 {
            if rng.next(2) == 0 {
                cpus.insert(c);
            }
        }
        spec.cpus = Some(cpus);
        spec.policy = [Policy::Fifo, Policy::Edf, Policy::Fair][rng.next(3) as usize];
        spec.placement = [Placement::Global, Placement::Pinned][rng.next(2) as usize];
        spec.mode = [Mode::Hard, Mode::Reclaim][rng.next(2) as usize];
        spec
    }

    /// The next box set: each of the four slots is kept (half the time), gets new parameters,
    /// is deleted, becomes shared, or is (re)created. Always admitted (4 x 0.2 < 0.95).
    fn mutate(rng: &mut Lcg, slots: &mut [Option<BoxSpec>]) {
        for (i, slot) in slots.iter_mut().enumerate() {
            match rng.next(8) {
                0..=3 => {}
                4 => {
                    if let Some(b) = slot {
                        let period = 10 + rng.next(90);
                        let budget = 1 + rng.next(period / 5);
                        b.interface = Interface::PerCpu { budget, period };
                    }
                }
                5 => *slot = None,
                6 => {
                    let mut b = random_box(rng, i);
                    b.interface = Interface::Shared { weight: 1 };
                    *slot = Some(b);
                }
                _ => *slot = Some(random_box(rng, i)),
            }
        }
    }

    fn check_decisions(s: &Scheduler) -> Result<(), TestCaseError> {
        let mut seen = Vec::new();
        for cpu in s.cpus().collect::<Vec<_>>() {
            let Some(r) = s.running(cpu) else { continue };
            prop_assert!(!seen.contains(&r.task), "a task on two CPUs");
            seen.push(r.task);
            if let Some(sid) = r.server {
                let info = s.server(sid);
                prop_assert!(!info.throttled && info.runtime > 0);
                prop_assert_eq!(info.cpu, cpu);
                let member = s.spec(r.task).box_name.as_deref();
                prop_assert_eq!(info.box_name, member);
            }
        }
        prop_assert!(s.next_timer().is_none_or(|t| t >= s.now()));
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Random runs with a reconfiguration every so often: the decisions stay valid, kept
        /// servers carry their state over exactly (a server's budget and deadline may only
        /// change by a renewal the core reports), a refused change leaves everything as it was,
        /// and since its last parameter change no server consumes more than its budget per
        /// period (bandwidth isolation across reconfigurations).
        #[test]
        fn reconfiguration_keeps_the_accounting_invariants(seed in any::<u64>()) {
            let mut rng = Lcg(seed);
            let mut slots: Vec<Option<BoxSpec>> =
                (0..4).map(|i| Some(random_box(&mut rng, i))).collect();
            let mut s = Scheduler::new(
                &System::new(Platform::with_cpus(3), slots.iter().flatten().cloned().collect(), vec![])
                    .unwrap(),
                Options::default(),
            )
            .unwrap();
            let ntask = 1 + rng.next(8);
            for t in 0..ntask {
                let b = rng.next(5);
                let mut p = TaskParams::background(format!("t{t}"), rng.next(99) as u32);
                if b < 4 {
                    p.box_name = Some(format!("b{b}"));
                }
                s.add_task(p).unwrap();
            }
            // Per server key: consumed and time at its last (re)start, and the largest Q seen.
            let mut since: BTreeMap<(String, u32), (Nanos, Nanos, Nanos)> = BTreeMap::new();
            let mut now = 0;
            s.advance(0);
            for step in 0..400 {
                let limit = s.next_timer().map_or(u64::MAX, |t| t - now);
                now += match rng.next(2) {
                    0 => limit.min(100),
                    _ => rng.next(20).min(limit),
                };
                s.update(now);
                for _ in 0..rng.next(3) {
                    let t = TaskId(rng.next(ntask) as u32);
                    if rng.next(2) == 0 {
                        s.wake(now, t, Some(now + rng.next(100))).unwrap();
                    } else {
                        s.block(now, t).unwrap();
                    }
                }
                s.advance(now);
                if step % 37 == 36 {
                    let before = snapshot(&s);
                    let mut next = slots.clone();
                    mutate(&mut rng, &mut next);
                    let mut bx: Vec<BoxSpec> = next.iter().flatten().cloned().collect();
                    let refuse = rng.next(6) == 0;
                    if refuse {
                        let mut hog = BoxSpec::new("hog", Interface::PerCpu { budget: 96, period: 100 });
                        hog.cpus = Some(CpuSet::first(1));
                        bx.push(hog);
                    }
                    let system = System::new(Platform::with_cpus(3), bx, vec![]).unwrap();
                    let dump = format!("{s:?}");
                    match s.reconfigure(now, &system) {
                        Err(e) => {
                            prop_assert!(refuse, "unexpected refusal {}", e);
                            prop_assert_eq!(format!("{s:?}"), dump);
                        }
                        Ok(r) => {
                            prop_assert!(!refuse);
                            slots = next;
                            let renewed: Vec<ServerId> = std::iter::from_fn(|| s.poll_event())
                                .filter_map(|e| match e {
                                    Event::Renewed { server, .. } => Some(server),
                                    _ => None,
                                })
                                .collect();
                            let after = snapshot(&s);
                            for j in 0..s.server_count() {
                                let id = ServerId(j as u32);
                                let k = &key_name(&s, id);
                                let v = &after[k];
                                let Some(old) = before.get(k) else {
                                    prop_assert!(r.added.contains(&id));
                                    prop_assert_eq!((v.6, v.7), (0, 0), "a new server starts fresh");
                                    since.insert(k.clone(), (0, now, v.0));
                                    continue;
                                };
                                prop_assert_eq!(v.6, old.6, "consumed time of {:?}", k);
                                if r.changed.contains(&id) {
                                    // A cut budget may be exhausted at once: one more throttle.
                                    prop_assert!(v.7 == old.7 || v.7 == old.7 + 1, "throttles of {:?}", k);
                                    prop_assert!(v.2 <= old.2.max(v.0 as i64));
                                    let q = since.get(k).map_or(old.0, |x| x.2).max(v.0);
                                    since.insert(k.clone(), (v.6, now, q));
                                } else if !renewed.contains(&id) {
                                    prop_assert_eq!(v, old, "kept server {:?}", k);
                                } else {
                                    prop_assert_eq!((v.4, v.5), (old.4, old.5));
                                }
                            }
                        }
                    }
                }
                check_decisions(&s)?;
                while s.poll_event().is_some() {}
            }
            for i in 0..s.server_count() {
                let id = ServerId(i as u32);
                let info = s.server(id);
                let (c0, t0, q0) = since
                    .get(&key_name(&s, id))
                    .copied()
                    .unwrap_or((0, 0, info.budget));
                let periods = (now - t0) / info.period + 3;
                prop_assert!(
                    info.consumed - c0 <= periods * q0.max(info.budget),
                    "server {:?} consumed {} since {}",
                    key_name(&s, id),
                    info.consumed - c0,
                    t0
                );
            }
        }
    }
}
