//! Kept copies of the scheduler for the questions a driver asks of the core's near future
//! ([`Scheduler::quiet_exhaustion`]): a copy runs ahead to an exhaustion and is looked at.
//!
//! A fresh `clone` allocates every list of the scheduler again (each CPU's and server's lists,
//! each box's name and lists, the pin plan's names): with the daemon's loop asking once or
//! twice per step, the copy and its drop were 9-12 % of the loop's CPU (`perf record`, one
//! busy pinned box and seed 002's global boxes). [`Probes`] keeps two copies and refills them
//! in place ([`Scheduler::refill_from`]), so a question costs memory copies, not allocations.

use std::rc::Rc;

use rtbox_model::{Nanos, PinPlan};

use super::ahead::QuietPeriod;
use super::{Bx, Cpu, DecideScratch, Scheduler, Srv};
use crate::types::{ServerId, TaskId, TaskParams};

/// Refills `dst` from `src` element by element with `refill`, reusing `dst`'s elements and
/// their buffers; new elements are cloned.
fn refill_vec<T: Clone>(dst: &mut Vec<T>, src: &[T], refill: impl Fn(&mut T, &T)) {
    dst.truncate(src.len());
    let kept = dst.len();
    for (d, s) in dst.iter_mut().zip(src) {
        refill(d, s);
    }
    dst.extend_from_slice(&src[kept..]);
}

impl Cpu {
    /// `*self = src.clone()`, keeping the server list's buffer. Every other field is `Copy`
    /// (a field that is not stops this from compiling, so it cannot be forgotten here).
    fn refill_from(&mut self, src: &Cpu) {
        let mut servers = std::mem::take(&mut self.servers);
        servers.clone_from(&src.servers);
        *self = Cpu { servers, ..*src };
    }
}

impl Srv {
    /// `*self = src.clone()`, keeping the member list's buffer (the other fields are `Copy`).
    fn refill_from(&mut self, src: &Srv) {
        let mut members = std::mem::take(&mut self.members);
        members.clone_from(&src.members);
        *self = Srv { members, ..*src };
    }
}

impl Bx {
    /// `*self = src.clone()`, keeping the name's and the lists' buffers (the other fields are
    /// `Copy`).
    fn refill_from(&mut self, src: &Bx) {
        let mut name = std::mem::take(&mut self.name);
        let mut servers = std::mem::take(&mut self.servers);
        let mut ready = std::mem::take(&mut self.ready);
        let mut won = std::mem::take(&mut self.won);
        name.clone_from(&src.name);
        servers.clone_from(&src.servers);
        ready.clone_from(&src.ready);
        won.clone_from(&src.won);
        *self = Bx {
            name,
            servers,
            ready,
            won,
            ..*src
        };
    }
}

impl DecideScratch {
    fn refill_from(&mut self, src: &DecideScratch) {
        let DecideScratch {
            set,
            carried,
            kept,
            stale,
            trimmed,
            gained,
            running,
        } = src;
        self.set.clone_from(set);
        self.carried.clone_from(carried);
        self.kept.clone_from(kept);
        self.stale.clone_from(stale);
        self.trimmed.clone_from(trimmed);
        self.gained.clone_from(gained);
        self.running.clone_from(running);
    }
}

impl Scheduler {
    /// Makes `self` a copy of `src` (as `src.clone()`), reusing `self`'s buffers. The fields
    /// are named one by one, so a new field of the scheduler must be copied here to compile.
    pub(crate) fn refill_from(&mut self, src: &Scheduler) {
        let Scheduler {
            opts,
            now,
            cap,
            cpus,
            cpu_index,
            servers,
            boxes,
            tasks,
            specs,
            background,
            plan,
            seq,
            dirty,
            timers_due,
            timer_stale,
            scan_all,
            fired,
            edf_keys,
            timers_first,
            dispatch_gen,
            next_timer,
            next_replenish,
            replenishments,
            events,
            scratch,
            scratch_top,
            scratch_servers,
            marked,
            any_reclaim,
            rotation,
            redo,
            dispatch_changes,
            scratch_keyed,
            touched,
            all_touched,
            excluded_last,
            decide_scratch,
            #[cfg(debug_assertions)]
            reference_run,
        } = src;
        self.opts = *opts;
        self.now = *now;
        self.cap = *cap;
        refill_vec(&mut self.cpus, cpus, Cpu::refill_from);
        self.cpu_index.clone_from(cpu_index);
        refill_vec(&mut self.servers, servers, Srv::refill_from);
        refill_vec(&mut self.boxes, boxes, Bx::refill_from);
        self.tasks.clone_from(tasks);
        self.specs = Rc::clone(specs);
        self.background.clone_from(background);
        self.plan = Rc::clone(plan);
        self.seq = *seq;
        self.dirty = *dirty;
        self.timers_due = *timers_due;
        self.timer_stale = *timer_stale;
        self.scan_all = *scan_all;
        self.fired = *fired;
        self.edf_keys.clone_from(edf_keys);
        self.timers_first = *timers_first;
        self.dispatch_gen = *dispatch_gen;
        self.next_timer = *next_timer;
        self.next_replenish = *next_replenish;
        self.replenishments.clone_from(replenishments);
        self.events.clone_from(events);
        self.scratch.clone_from(scratch);
        self.scratch_top.clone_from(scratch_top);
        self.scratch_servers.clone_from(scratch_servers);
        self.marked.clone_from(marked);
        self.any_reclaim = *any_reclaim;
        self.rotation = *rotation;
        self.redo.clone_from(redo);
        self.dispatch_changes.clone_from(dispatch_changes);
        self.scratch_keyed.clone_from(scratch_keyed);
        self.touched.clone_from(touched);
        self.all_touched = *all_touched;
        self.excluded_last.clone_from(excluded_last);
        match (&mut self.decide_scratch, decide_scratch) {
            (Some(d), Some(s)) => d.refill_from(s),
            (d, s) => d.clone_from(s),
        }
        #[cfg(debug_assertions)]
        {
            self.reference_run = *reference_run;
        }
    }

    /// Lets go of the tables a copy shares with the scheduler it was made from (the tasks'
    /// specs, the pin plan) for `empty` ones: a kept copy that held them would make the
    /// scheduler's next registration of a task copy every spec (`Rc::make_mut`).
    fn share_nothing(&mut self, empty: &Empty) {
        self.specs = Rc::clone(&empty.0);
        self.plan = Rc::clone(&empty.1);
    }
}

/// Empty shared tables for kept copies between uses (made once: no allocation per step).
type Empty = (Rc<Vec<TaskParams>>, Rc<PinPlan>);

/// Two kept copies of a scheduler for chains of [`Scheduler::quiet_exhaustion`] questions:
/// each question of a chain is asked of the core as the previous quiet answer left it.
#[derive(Debug, Default)]
pub struct Probes {
    /// `[answer, spare]`: after a quiet answer `bufs[0]` holds the core after that exhaustion.
    bufs: Vec<Scheduler>,
    /// `bufs[0]` holds the previous answer of the current chain.
    chained: bool,
    empty: Empty,
}

impl Probes {
    /// Starts a chain: its first question is asked of the scheduler itself.
    pub fn start_chain(&mut self) {
        self.chained = false;
    }

    /// [`Scheduler::quiet_exhaustion`] of server `s` on `sched` or, within a chain after a
    /// quiet answer, on the core that answer left; a quiet answer is kept for the next.
    pub fn quiet_exhaustion(
        &mut self,
        sched: &Scheduler,
        s: ServerId,
        placed: impl Fn(TaskId, u32) -> bool,
    ) -> bool {
        if self.bufs.is_empty() {
            self.bufs = vec![sched.clone(), sched.clone()];
        }
        let (answer, spare) = self.bufs.split_at_mut(1);
        let (answer, spare) = (&mut answer[0], &mut spare[0]);
        let base: &Scheduler = if self.chained { answer } else { sched };
        let quiet = base.quiet_exhaustion_into(s, &placed, spare);
        #[cfg(debug_assertions)]
        {
            // The kept copy answers as a fresh one would, and leaves the same core.
            let fresh = base.quiet_exhaustion(s, &placed);
            debug_assert_eq!(quiet, fresh.is_some(), "a kept copy answered otherwise");
            if let Some(f) = fresh {
                debug_assert_eq!(
                    (
                        f.now,
                        f.next_timer(),
                        f.cpus.iter().map(|c| c.running).collect::<Vec<_>>()
                    ),
                    (
                        spare.now,
                        spare.next_timer(),
                        spare.cpus.iter().map(|c| c.running).collect::<Vec<_>>()
                    ),
                    "a kept copy left another core"
                );
            }
        }
        if !quiet {
            return false;
        }
        std::mem::swap(answer, spare);
        self.chained = true;
        true
    }

    /// [`Scheduler::quiet_periods`] on the kept copies (it ends any chain of questions).
    pub fn quiet_periods(
        &mut self,
        sched: &Scheduler,
        exhausting: &[ServerId],
        until: Nanos,
        max: usize,
        startable: impl Fn(ServerId, TaskId) -> bool,
    ) -> Vec<QuietPeriod> {
        if self.bufs.is_empty() {
            self.bufs = vec![sched.clone(), sched.clone()];
        }
        let (probe, spare) = self.bufs.split_at_mut(1);
        let out = sched.quiet_periods_in(
            exhausting,
            until,
            max,
            &startable,
            &mut probe[0],
            &mut spare[0],
        );
        debug_assert_eq!(
            out,
            sched.quiet_periods(exhausting, until, max, &startable),
            "kept copies planned otherwise"
        );
        self.finish();
        out
    }

    /// Ends the questions of a step: the copies let go of what they share with the scheduler
    /// (see [`Scheduler::share_nothing`]) and keep only their buffers.
    pub fn finish(&mut self) {
        for b in &mut self.bufs {
            b.share_nothing(&self.empty);
        }
        self.chained = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Accounting, Options};
    use rtbox_model::{Bandwidth, BoxSpec, Interface, Placement, Platform, ServerSpec, System};

    /// Global boxes with a server on each of `cpus`, each `(name, budget)` of period 10 (ns),
    /// and `members` members dealt to them in turn, every one awake.
    fn sched(
        cpus: &[u32],
        boxes: &[(&str, u64)],
        members: u32,
        accounting: Accounting,
    ) -> Scheduler {
        let specs = boxes
            .iter()
            .map(|&(n, q)| {
                let srv = |&cpu: &u32| ServerSpec {
                    cpu,
                    budget: q,
                    period: 10,
                };
                let mut b = BoxSpec::new(n, Interface::Servers(cpus.iter().map(srv).collect()));
                b.placement = Placement::Global;
                b
            })
            .collect();
        let mut platform = Platform::with_cpus(2);
        platform.cap = Bandwidth::ONE;
        let sys = System::new(platform, specs, vec![]).unwrap();
        let opts = Options {
            accounting,
            ..Options::default()
        };
        let mut s = Scheduler::new(&sys, opts).unwrap();
        for i in 0..members {
            let (b, _) = boxes[i as usize % boxes.len()];
            let t = s
                .add_task(TaskParams {
                    box_name: Some(b.into()),
                    ..TaskParams::background(format!("t{i}"), 10 + i)
                })
                .unwrap();
            s.wake(0, t, None).unwrap();
        }
        s.advance(0);
        s
    }

    /// Advances `s` to `t` through every timer before it (the calling protocol).
    fn run_to(s: &mut Scheduler, t: u64) {
        while let Some(n) = s.next_timer().filter(|&n| n < t) {
            s.advance(n);
        }
        s.advance(t);
    }

    /// A refilled copy is the clone, whatever the copy held before (more or fewer servers,
    /// boxes and tasks, another state), and runs on as the clone does.
    #[test]
    fn a_refilled_copy_is_the_clone() {
        let mut a = sched(&[0, 1], &[("A", 2), ("B", 3)], 5, Accounting::Implicit);
        a.block(0, TaskId(1)).unwrap();
        run_to(&mut a, 1);
        let b = sched(&[0, 1], &[("C", 1)], 1, Accounting::Implicit);
        for (from, into) in [(&a, b.clone()), (&b, a.clone()), (&a, a.clone())] {
            let mut copy = into;
            copy.refill_from(from);
            assert_eq!(format!("{copy:?}"), format!("{from:?}"));
            let mut clone = from.clone();
            run_to(&mut copy, 17);
            run_to(&mut clone, 17);
            assert_eq!(format!("{copy:?}"), format!("{clone:?}"));
        }
    }

    /// The kept copies answer as fresh ones, also in a chain (each question on the previous
    /// quiet answer, in the order the servers run out), and share nothing with the scheduler
    /// after `finish` (its next registration copies no specs).
    #[test]
    fn kept_copies_answer_as_fresh_ones() {
        // Measured accounting, as the daemon drives the core; two boxes on CPU 1 of two (a
        // chain there when the driver lets the second's member wait thawed).
        let mut s = sched(&[1], &[("A", 2), ("B", 3)], 2, Accounting::Measured);
        let mut probes = Probes::default();
        let mut chained = 0;
        for round in 0..8u64 {
            // Odd rounds: the driver lets every task run where it is (quiet chains).
            let placed = |_: TaskId, _: u32| round % 2 == 1;
            for cpu in 0..2 {
                probes.start_chain();
                let mut fresh_base: Option<Scheduler> = None;
                loop {
                    let base = fresh_base.as_ref().unwrap_or(&s);
                    let Some(srv) = base.running(cpu).and_then(|r| r.server) else {
                        break;
                    };
                    // As a driver asks: only of an exhaustion that comes before anything else.
                    let at = base.now() + base.server(srv).runtime.max(0) as u64;
                    if base.next_timer() != Some(at) {
                        break;
                    }
                    let fresh = base.quiet_exhaustion(srv, placed);
                    let kept = probes.quiet_exhaustion(&s, srv, placed);
                    assert_eq!(kept, fresh.is_some(), "round {round}, {srv:?}");
                    let Some(f) = fresh else {
                        break;
                    };
                    assert_eq!(format!("{:?}", probes.bufs[0]), format!("{f:?}"));
                    chained += usize::from(fresh_base.is_some());
                    fresh_base = Some(f);
                }
            }
            probes.finish();
            assert_eq!(Rc::strong_count(&s.specs), 1, "a kept copy holds the specs");
            // To the next timer, every running server charged for the time (as measured).
            let next = s.next_timer().unwrap_or(s.now() + 1);
            for cpu in 0..2 {
                if let Some(srv) = s.running(cpu).and_then(|r| r.server) {
                    let left = s.server(srv).runtime.max(0) as u64;
                    s.charge(s.now(), srv, (next - s.now()).min(left)).unwrap();
                }
            }
            s.advance(next);
        }
        assert!(chained > 0, "no question asked on a previous answer");
    }

    #[test]
    fn kept_copies_plan_periods_ahead_as_fresh_ones() {
        // One box alone on CPU 0 (3 of 10 ns), its member busy, asked at every timer of a run
        // that the driver charges as measured; the same copies serve every question.
        let mut s = sched(&[0], &[("A", 3)], 1, Accounting::Measured);
        let a = s.box_servers("A")[0];
        let mut probes = Probes::default();
        let mut planned = 0;
        for _ in 0..12 {
            let exhausting: Vec<ServerId> =
                s.running(0).and_then(|r| r.server).into_iter().collect();
            let until = s.now() + 35;
            let kept = probes.quiet_periods(&s, &exhausting, until, 8, |_, _| true);
            assert_eq!(kept, s.quiet_periods(&exhausting, until, 8, |_, _| true));
            assert!(kept.iter().all(|p| p.at <= until && p.runs.len() == 1));
            planned += kept.len();
            assert_eq!(Rc::strong_count(&s.specs), 1, "a kept copy holds the specs");
            let next = s.next_timer().expect("a timer");
            if s.running(0).is_some() {
                let left = s.server(a).runtime.max(0) as u64;
                s.charge(s.now(), a, (next - s.now()).min(left)).unwrap();
            }
            s.advance(next);
        }
        assert!(planned >= 12, "periods planned: {planned}");
    }
}
