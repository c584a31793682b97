//! Read-only dispatch-plan queries for drivers: the rules a driver would otherwise re-derive
//! from [`Scheduler::server`] views (EDF order, planned exhaustions, budget left, poll interval,
//! box facts).

use std::collections::BTreeMap;

use rtbox_model::{LoopCost, Nanos};

use super::{Bx, Owner, Scheduler};
use crate::rules::edf_key;
use crate::types::{BoxInfo, Running, ServerId, TaskId};

impl Scheduler {
    /// A view of one box by name (`None` if there is no such box).
    pub fn box_info(&self, name: &str) -> Option<BoxInfo<'_>> {
        self.boxes.iter().find(|b| b.name == name).map(Bx::info)
    }

    /// Every box, in the order of the system's boxes.
    pub fn boxes(&self) -> impl Iterator<Item = BoxInfo<'_>> + '_ {
        self.boxes.iter().map(Bx::info)
    }

    /// The non-throttled servers of each CPU (every CPU of the platform, possibly with none),
    /// in the core's EDF order ([`crate::rules::edf_key`] on their current absolute deadlines,
    /// the comparison the core picks servers with). Servers without work are listed too: the
    /// Linux runtime ranks every server that may run before its next step.
    pub fn edf_order(&self) -> BTreeMap<u32, Vec<ServerId>> {
        self.cpus
            .iter()
            .map(|c| {
                let mut v: Vec<(Nanos, ServerId)> = c
                    .servers
                    .iter()
                    .map(|&s| (&self.servers[s.index()], s))
                    .filter(|(srv, _)| !srv.throttled)
                    .map(|(srv, s)| edf_key(srv.st.deadline, s))
                    .collect();
                v.sort_unstable();
                (c.id, v.into_iter().map(|(_, s)| s).collect())
            })
            .collect()
    }

    /// The remaining budget of a server as time it may still run: a negative runtime (a
    /// measured overrun) counts as none.
    pub(crate) fn budget_left(&self, s: ServerId) -> Nanos {
        u64::try_from(self.servers[s.index()].st.runtime).unwrap_or(0)
    }

    /// The planned exhaustion time of every non-throttled server with work (`has_work`: the
    /// driver's view, e.g. a member is runnable), per CPU, if from `now` on the servers with
    /// work of each CPU run one after the other in EDF order ([`Scheduler::edf_order`]), each
    /// spending its whole remaining budget (a negative one counts as none). This is when a hard
    /// server's members must be stopped at the latest if the driver does not step before.
    pub fn exhaustion_plan(
        &self,
        now: Nanos,
        has_work: impl Fn(ServerId) -> bool,
    ) -> BTreeMap<u32, Vec<(ServerId, Nanos)>> {
        self.exhaustion_plan_in(&self.edf_order(), now, has_work)
    }

    /// [`Scheduler::exhaustion_plan`] from `edf`, this core's [`Scheduler::edf_order`] as the
    /// driver already has it (the Linux runtime ranks its members with it in the same step).
    pub fn exhaustion_plan_in(
        &self,
        edf: &BTreeMap<u32, Vec<ServerId>>,
        now: Nanos,
        has_work: impl Fn(ServerId) -> bool,
    ) -> BTreeMap<u32, Vec<(ServerId, Nanos)>> {
        debug_assert_eq!(edf, &self.edf_order(), "an EDF order of another state");
        edf.iter()
            .map(|(&cpu, order)| {
                let mut t = now;
                let plan = order
                    .iter()
                    .copied()
                    .filter(|&s| has_work(s))
                    .map(|s| {
                        t += self.budget_left(s);
                        (s, t)
                    })
                    .collect();
                (cpu, plan)
            })
            .collect()
    }

    /// The CPU whose running, non-throttled server has the least budget left (ties: the lower
    /// CPU id), i.e. where the next budget exhaustion happens if nothing changes; `None` when no
    /// server runs.
    pub fn next_exhaustion_cpu(&self) -> Option<u32> {
        self.next_exhaustion_cpu_of(|_| true)
    }

    /// [`Scheduler::next_exhaustion_cpu`] among the running servers `counted` accepts.
    pub fn next_exhaustion_cpu_of(&self, counted: impl Fn(ServerId) -> bool) -> Option<u32> {
        self.cpus
            .iter()
            .filter_map(|c| {
                let s = c.running?.server?;
                let srv = &self.servers[s.index()];
                (!srv.throttled && counted(s)).then_some((srv.st.runtime, c.id))
            })
            .min()
            .map(|(_, cpu)| cpu)
    }

    /// Whether server `s`'s budget exhaustion needs the driver at all. It does not when, were
    /// `s` to run out at the time planned from now and nothing else happen, the only change
    /// would be that its task stops: `s` throttled until its deadline, its CPU running nothing,
    /// every other CPU running what it runs now (no other server of the CPU with work, no
    /// member of a global box moving to another vCPU, no reclaimed time). A driver whose stops
    /// are made by someone else at that time (the Linux runtime's backstop freezes the
    /// members) may then sleep until its next other event or `s`'s replenishment
    /// ([`Scheduler::timers_with_quiet`]), and replays the exhaustion at the stop's instant
    /// when it next steps ([`Scheduler::charge`], then [`Scheduler::advance`] to that instant).
    /// Answered by running the core itself on a copy, so the rule stays the core's.
    pub fn exhaustion_is_quiet(&self, s: ServerId) -> bool {
        self.quiet_exhaustion(s, |_, _| false).is_some()
    }

    /// [`Scheduler::exhaustion_is_quiet`] for a driver that also has tasks ready to take over:
    /// after `s` runs out, its CPU may run another server's task that `placed(task, cpu)` says
    /// the driver already lets run there (the Linux runtime: thawed, on that CPU, below the
    /// spent server's members, so the kernel runs it as soon as they stop; its priority band
    /// keeps its order among the CPU's other members). Returns the core on a copy at that
    /// exhaustion, so that the next server of the CPU can be asked in turn (two boxes filling
    /// one CPU then need no step at either exhaustion, only at the replenishments); `None` when
    /// the driver must step.
    /// A driver that asks at every step keeps its copies ([`crate::Probes`]).
    pub fn quiet_exhaustion(
        &self,
        s: ServerId,
        placed: impl Fn(TaskId, u32) -> bool,
    ) -> Option<Scheduler> {
        let mut probe = self.clone();
        self.quiet_exhaustion_into(s, placed, &mut probe)
            .then_some(probe)
    }

    /// [`Scheduler::quiet_exhaustion`] on `probe`, made a copy of `self` first (its buffers
    /// reused): whether the exhaustion is quiet; `probe` is then the core after it.
    pub(crate) fn quiet_exhaustion_into(
        &self,
        s: ServerId,
        placed: impl Fn(TaskId, u32) -> bool,
        probe: &mut Scheduler,
    ) -> bool {
        let srv = &self.servers[s.index()];
        let c = srv.cpu_idx;
        if srv.throttled || self.cpus[c].running.and_then(|r| r.server) != Some(s) {
            return false;
        }
        let left = self.budget_left(s);
        probe.refill_from(self);
        if probe.charge(self.now, s, left).is_err() {
            return false;
        }
        probe.advance(self.now + left);
        let cpu_id = self.cpus[c].id;
        let taken_over = |after: Option<Running>| match after {
            None => true,
            Some(r) => r.server.is_some_and(|x| x != s) && placed(r.task, cpu_id),
        };
        let quiet = probe.servers[s.index()].throttled
            && probe
                .cpus
                .iter()
                .zip(&self.cpus)
                .enumerate()
                .all(|(i, (after, before))| {
                    if i == c {
                        taken_over(after.running)
                    } else {
                        after.running == before.running
                    }
                });
        quiet
    }

    /// Whether server `s` hosts a task now: the member it runs when it runs (a global box's
    /// vCPU: the ready member placed on it; a pinned one: one of its ready members; a dedicated
    /// server: its ready task).
    pub fn hosts_member(&self, s: ServerId) -> bool {
        let tasks = &self.tasks;
        match self.servers[s.index()].owner {
            Owner::Task(t) => tasks[t.index()].ready,
            Owner::Box(b) => self.boxes[b]
                .ready
                .iter()
                .any(|t| tasks[t.index()].placed == Some(s)),
        }
    }

    /// The core's timers when the exhaustions of the `quiet` servers are left to someone else
    /// (see [`Scheduler::quiet_exhaustion`]): the earliest other timer (as
    /// [`Scheduler::next_timer`] counts them, without the exhaustions of the running quiet
    /// servers), and the earliest replenishment of a quiet server once it ran out (hard CBS:
    /// its current deadline, rule `cbs_throttle`), also of one that runs only after another's
    /// quiet exhaustion on its CPU (a chain).
    pub fn timers_with_quiet(
        &self,
        quiet: impl Fn(ServerId) -> bool,
    ) -> (Option<Nanos>, Option<Nanos>) {
        let mut other = self.next_replenish;
        for (c, cpu) in self.cpus.iter().enumerate() {
            if !cpu.running.and_then(|r| r.server).is_some_and(&quiet) {
                other = [other, self.cpu_timer(c)].into_iter().flatten().min();
            }
        }
        let replenish = self
            .servers
            .iter()
            .enumerate()
            .filter(|(i, srv)| !srv.throttled && quiet(ServerId(*i as u32)))
            .map(|(_, srv)| srv.st.deadline)
            .min();
        (other, replenish)
    }

    /// The smallest budget left (a negative one counts as none) of the non-throttled servers of
    /// boxes: what a member may consume unseen between two polls of a driver that only steps
    /// on timers. `None` without such a server.
    pub fn min_budget_left(&self) -> Option<Nanos> {
        (0..self.servers.len())
            .map(|i| ServerId(i as u32))
            .filter(|s| {
                let srv = &self.servers[s.index()];
                !srv.throttled && matches!(srv.owner, Owner::Box(_))
            })
            .map(|s| self.budget_left(s))
            .min()
    }

    /// The smallest budget left of the non-throttled servers with work (`has_work`, the
    /// driver's view) that still have some: how soon a passed exhaustion estimate must be
    /// checked again. `None` without such a server.
    pub fn min_budget_left_with_work(&self, has_work: impl Fn(ServerId) -> bool) -> Option<Nanos> {
        (0..self.servers.len())
            .map(|i| ServerId(i as u32))
            .filter(|&s| !self.servers[s.index()].throttled && has_work(s))
            .map(|s| self.budget_left(s))
            .filter(|&b| b > 0)
            .min()
    }

    /// How long a polling driver may sleep: the smallest budget left of any box server
    /// ([`Scheduler::min_budget_left`]; with none, the longest interval), clamped between the
    /// loop's `poll` and `scan` intervals by the same rule admission counts the loop's polls with
    /// ([`LoopCost::poll_interval`]).
    pub fn poll_interval(&self, cost: &LoopCost) -> Nanos {
        cost.poll_interval(self.min_budget_left().unwrap_or(cost.scan))
    }
}

impl Bx {
    pub(super) fn info(&self) -> BoxInfo<'_> {
        BoxInfo {
            name: &self.name,
            policy: self.policy,
            placement: self.placement,
            mode: self.mode,
            shared: self.shared,
            weight: self.weight,
            servers: &self.servers,
        }
    }
}

#[cfg(test)]
mod tests {
    use rtbox_model::{
        Bandwidth, BoxSpec, Interface, Mode, Placement, Platform, ServerSpec, System,
    };

    use super::*;
    use crate::types::{Options, TaskParams};

    fn member(name: &str, b: &str, prio: u32) -> TaskParams {
        TaskParams {
            box_name: Some(b.into()),
            ..TaskParams::background(name, prio)
        }
    }

    fn two_cpus_three_boxes() -> System {
        let srv = |cpu, budget, period| ServerSpec {
            cpu,
            budget,
            period,
        };
        let mut a = BoxSpec::new("A", Interface::Servers(vec![srv(0, 3, 6), srv(1, 2, 8)]));
        a.placement = Placement::Pinned;
        a.mode = Mode::Reclaim;
        let b = BoxSpec::new("B", Interface::Servers(vec![srv(0, 4, 9)]));
        let c = BoxSpec::new("C", Interface::Servers(vec![srv(1, 1, 4)]));
        let mut platform = Platform::with_cpus(2);
        platform.cap = Bandwidth::ONE;
        System::new(platform, vec![a, b, c], vec![]).unwrap()
    }

    /// The dispatch-plan queries drivers used to re-derive: EDF order with the core's own
    /// comparison, planned exhaustions, the CPU of the next exhaustion, budget left.
    #[test]
    fn dispatch_plan_queries_follow_the_cores_edf() {
        let mut s = Scheduler::new(&two_cpus_three_boxes(), Options::default()).unwrap();
        let a0 = s
            .add_task(TaskParams {
                cpu: Some(0),
                ..member("a0", "A", 1)
            })
            .unwrap();
        let b = s.add_task(member("b", "B", 1)).unwrap();
        let c = s.add_task(member("c", "C", 1)).unwrap();
        for t in [a0, b, c] {
            s.wake(0, t, None).unwrap();
        }
        s.advance(0);
        // Servers in the flattening's CPU order: A@0, B@0, A@1, C@1.
        let (a_0, b_0, a_1, c_1) = (ServerId(0), ServerId(1), ServerId(2), ServerId(3));
        let order = s.edf_order();
        assert_eq!(order[&0], vec![a_0, b_0], "d = 6 before d = 9");
        // A@1 never woke (deadline 0) and C@1 has d = 4: the stale 0 sorts first, as the
        // core would pick it if it got work (the wake-up rule then renews it).
        assert_eq!(order[&1], vec![a_1, c_1]);
        for cpu in [0, 1] {
            let first_with_work = s.dispatch(cpu).order.first().map(|x| x.server);
            assert_eq!(
                first_with_work,
                s.running(cpu).and_then(|r| r.server),
                "the core runs the EDF head"
            );
        }
        let work = |x: ServerId| x != a_1;
        let plan = s.exhaustion_plan(10, work);
        assert_eq!(plan[&0], vec![(a_0, 13), (b_0, 17)]);
        assert_eq!(plan[&1], vec![(c_1, 11)]);
        assert_eq!(s.next_exhaustion_cpu(), Some(1), "C has 1 left, A 3");
        assert_eq!(s.min_budget_left(), Some(1));
        assert_eq!(s.min_budget_left_with_work(|x| x == b_0), Some(4));
        let cost = LoopCost {
            step: 1,
            poll: 2_000,
            scan: 8_000,
        };
        assert_eq!(
            s.poll_interval(&cost),
            2_000,
            "1 ns left: the shortest poll"
        );
        s.advance(1); // C exhausts: throttled, it leaves the order and the plan.
        assert_eq!(s.edf_order()[&1], vec![a_1]);
        assert!(s.exhaustion_plan(1, work)[&1].is_empty());
        assert_eq!(s.next_exhaustion_cpu(), Some(0));
        // Box facts without a name lookup in the driver.
        let i = s.server(a_0);
        assert_eq!((i.mode, i.placement), (Mode::Reclaim, Placement::Pinned));
        let i = s.server(b_0);
        assert_eq!((i.mode, i.placement), (Mode::Hard, Placement::Global));
        let info = s.box_info("A").unwrap();
        assert_eq!(info.servers, &[a_0, a_1]);
        assert!(!info.shared && s.box_info("nope").is_none());
        assert_eq!(s.boxes().count(), 3);
    }

    fn measured() -> Options {
        Options {
            accounting: crate::types::Accounting::Measured,
            ..Options::default()
        }
    }

    /// Issue 14: an exhaustion that only stops its own server's task needs no step of the
    /// driver, whose next timer is then the other CPUs' and that server's replenishment; one
    /// that lets another server of the CPU run does.
    #[test]
    fn an_exhaustion_is_quiet_when_it_only_stops_its_own_server() {
        let mut s = Scheduler::new(&two_cpus_three_boxes(), measured()).unwrap();
        let b = s.add_task(member("b", "B", 1)).unwrap();
        let c = s.add_task(member("c", "C", 1)).unwrap();
        for t in [b, c] {
            s.wake(0, t, None).unwrap();
        }
        s.advance(0);
        let (b_0, c_1) = (ServerId(1), ServerId(3));
        assert_eq!(s.running(0).and_then(|r| r.server), Some(b_0));
        assert!(s.exhaustion_is_quiet(b_0), "B alone on CPU 0");
        assert!(s.exhaustion_is_quiet(c_1), "C alone on CPU 1");
        // B@0 runs out at 4 and is replenished at its deadline 9; C@1 runs out at 1.
        assert_eq!(s.timers_with_quiet(|x| x == b_0), (Some(1), Some(9)));
        // A quiet server that runs only after another (a chain) is counted at its deadline
        // too; a throttled one never.
        let a_0 = ServerId(0);
        let d_a0 = s.server(a_0).deadline;
        assert!(!s.server(a_0).throttled && d_a0 < 9);
        assert_eq!(
            s.timers_with_quiet(|x| x == b_0 || x == a_0),
            (Some(1), Some(d_a0))
        );
        assert_eq!(s.timers_with_quiet(|_| false), (s.next_timer(), None));
        // Nothing changed in the scheduler itself.
        assert_eq!(s.server(b_0).runtime, 4);
        assert!(!s.server(b_0).throttled);

        // A task of the reclaim box A on CPU 0 runs once B@0 is spent: that exhaustion needs
        // the driver.
        let a0 = s
            .add_task(TaskParams {
                cpu: Some(0),
                ..member("a0", "A", 1)
            })
            .unwrap();
        s.wake(0, a0, None).unwrap();
        s.advance(0);
        let running = s.running(0).and_then(|r| r.server).unwrap();
        assert!(
            !s.exhaustion_is_quiet(running),
            "the other server of CPU 0 runs next"
        );
        // Unless the driver already lets the other server's task run there: then the
        // exhaustion only stops the first, and the core after it can be asked about the next.
        let other = if running == b_0 { ServerId(0) } else { b_0 };
        let runs = |t: TaskId| s.running(0).map(|r| r.task) != Some(t);
        assert!(s.quiet_exhaustion(running, |_, _| false).is_none());
        assert!(
            s.quiet_exhaustion(running, |t, cpu| cpu == 1 && runs(t))
                .is_none(),
            "placed on the other CPU"
        );
        let after = s
            .quiet_exhaustion(running, |t, cpu| cpu == 0 && runs(t))
            .expect("the next task is placed on CPU 0");
        assert!(after.server(running).throttled);
        assert_eq!(after.running(0).and_then(|r| r.server), Some(other));
        assert_eq!(after.running(1), s.running(1), "CPU 1 untouched");
        assert_eq!(
            after.now(),
            s.now() + s.server(running).runtime as u64,
            "at the exhaustion the plan has"
        );
        // When the other runs out (at 7), A@0 has been replenished (at its deadline 6) and its
        // task runs again: the driver froze it at A@0's exhaustion, so it must step.
        let frozen_a0 = |t: TaskId| t != a0;
        let ask = |x: ServerId| after.quiet_exhaustion(x, |t, c| c == 0 && frozen_a0(t));
        assert!(ask(other).is_none());
        assert!(
            after.quiet_exhaustion(other, |_, _| true).is_some(),
            "were it running-ready"
        );
        assert!(s.exhaustion_is_quiet(c_1));
        // A server that does not run is never quiet (nothing of it is planned).
        let idle = if running == b_0 { ServerId(0) } else { b_0 };
        assert!(!s.exhaustion_is_quiet(idle));
    }

    /// In a global box the exhaustion of the vCPU running the higher-priority task moves that
    /// task to the other vCPU (the driver must step); the lower one's only stops it.
    #[test]
    fn a_global_exhaustion_that_moves_a_task_is_not_quiet() {
        let srv = |cpu, budget, period| ServerSpec {
            cpu,
            budget,
            period,
        };
        let g = BoxSpec::new("G", Interface::Servers(vec![srv(0, 3, 10), srv(1, 3, 10)]));
        let mut platform = Platform::with_cpus(2);
        platform.cap = Bandwidth::ONE;
        let sys = System::new(platform, vec![g], vec![]).unwrap();
        let mut s = Scheduler::new(&sys, measured()).unwrap();
        let hi = s.add_task(member("hi", "G", 2)).unwrap();
        let lo = s.add_task(member("lo", "G", 1)).unwrap();
        for t in [hi, lo] {
            s.wake(0, t, None).unwrap();
        }
        s.advance(0);
        let server_of = |t| {
            (0..2)
                .filter_map(|c| s.running(c))
                .find(|r| r.task == t)
                .and_then(|r| r.server)
                .unwrap()
        };
        let (s_hi, s_lo) = (server_of(hi), server_of(lo));
        assert_ne!(s_hi, s_lo);
        assert!(
            !s.exhaustion_is_quiet(s_hi),
            "hi takes the other vCPU from lo"
        );
        assert!(s.exhaustion_is_quiet(s_lo), "lo only stops");
    }
}
