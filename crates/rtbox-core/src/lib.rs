//! The rtbox scheduling core: hierarchical hard-CBS reservations, decided per CPU.
//!
//! Pure: no clock reads, no I/O, no threads (its only dependency is `rtbox-model`; the test
//! `tests/purity.rs` checks it). Time and events go in, decisions and the next timer come out, so
//! the simulator (virtual time) and the Linux runtime (real timers) drive the very same rules.
//!
//! # Model
//! - Every flattened server of [`rtbox_model::admit`] (one per box and CPU, nested boxes already
//!   carved out of their parents) is a hard CBS. On each CPU the active, non-throttled servers
//!   are ordered by EDF (ties by [`ServerId`], [`rules::edf_key`]). Tasks with a dedicated
//!   [`Reservation`] get a single-task server that competes in the same EDF; it is admitted by
//!   the rule boxes are admitted with (`rtbox_model::fits_cap`: the CPU's reserved total,
//!   boxes included, at most the platform cap), else [`CoreError::CpuFull`] with the numbers.
//! - The CBS rules live in [`rules`], one function each: wake-up rule, revised wake-up rule for
//!   constrained deadlines, charging, throttling on exhaustion, replenishment (`d += P`,
//!   `c = Q`, applied when the server throttles; it runs again at its old deadline).
//! - Inside a box the local [`rtbox_model::Policy`] orders ready members: `fifo` (priority, ties
//!   in FIFO order of wake-up; a preempted member keeps its place), `edf` (the absolute deadline
//!   given to [`Scheduler::wake`]), `fair` (round robin with [`Options::timeslice`]).
//! - Placement `pinned`: a member stays on its vCPU (the box's server on `TaskParams::cpu`).
//!   Placement `global`: the box's m most urgent ready members run on its m vCPUs that win EDF on
//!   their CPUs right now (seed 002 section 3.3); when a vCPU throttles or is preempted its member
//!   moves to a running vCPU of the box ([`Event::Migrated`], seed 004 section 3.1). A winning
//!   vCPU with nothing to run idles and leaves EDF to the next server.
//! - Tasks in no box (or in a shared box) run in the background: on CPUs no server uses, by
//!   global fixed priority. Members of throttled `reclaim`-mode boxes run below them.
//!
//! # Calling protocol
//! ```
//! use rtbox_core::{Options, Scheduler, TaskParams};
//! use rtbox_model::{BoxSpec, Interface, Platform, ServerSpec, System};
//!
//! let b = BoxSpec::new("S1", Interface::Servers(vec![ServerSpec { cpu: 0, budget: 3, period: 6 }]));
//! let system = System::new(Platform::with_cpus(1), vec![b], vec![]).unwrap();
//! let mut sched = Scheduler::new(&system, Options::default()).unwrap();
//! let a = sched
//!     .add_task(TaskParams { box_name: Some("S1".into()), ..TaskParams::background("A", 0) })
//!     .unwrap();
//! sched.wake(0, a, None).unwrap();   // job release / thread became runnable
//! sched.advance(0);                   // recompute decisions after a batch of wake/block
//! assert_eq!(sched.running(0).map(|r| r.task), Some(a));
//! assert_eq!(sched.next_timer(), Some(3)); // the budget runs out at 3 if A keeps running
//! sched.advance(3);                   // charges 3, throttles S1 until its deadline 6
//! assert!(sched.running(0).is_none());
//! assert_eq!(sched.next_timer(), Some(6));
//! ```
//! 1. `Scheduler::new(&system, options)` builds the servers; `add_task` registers members
//!    (blocked) and returns dense [`TaskId`]s.
//! 2. At time `now`: `wake(now, t, deadline)` / `block(now, t)` for every change, then
//!    `advance(now)`, which (implicit accounting) charges the time since the previous `advance`
//!    to the server that was running on each CPU, throttles exhausted servers, replenishes due
//!    ones and recomputes every CPU. Decisions ([`Scheduler::running`], [`Scheduler::dispatch`],
//!    [`Scheduler::next_timer`]) are valid after `advance`.
//! 3. With [`Accounting::Measured`] the driver reports consumed CPU time with `charge(now,
//!    server, ns)` before `advance(now)`, which then only fires timers and decides. The budget may
//!    then overrun (go negative); the overrun is paid back at replenishment.
//! 4. The driver calls `advance` again at the latest at `next_timer()` (earliest budget
//!    exhaustion of a running server, replenishment, or round-robin rotation).
//! 5. `poll_event` drains [`Event`]s (throttle, replenish, wake-up renewal, migrate, dispatch)
//!    if [`Options::record_events`]. A server period begins at a replenishment or at a renewal
//!    by the wake-up rule; per-period figures must start at both.
//!
//! 6. Dispatch-plan queries, valid after `advance` (drivers must not re-derive these rules):
//!    [`Scheduler::edf_order`] (each CPU's non-throttled servers in the core's EDF order,
//!    [`rules::edf_key`]), [`Scheduler::exhaustion_plan`] (when each server with work would
//!    exhaust if they ran one after another in that order), [`Scheduler::next_exhaustion_cpu`],
//!    [`Scheduler::min_budget_left`], [`Scheduler::min_budget_left_with_work`] and
//!    [`Scheduler::poll_interval`] (the loop's sleep, by the rule admission counts polls with).
//!    [`Scheduler::server`] carries the box's mode and placement; [`Scheduler::box_info`] and
//!    [`Scheduler::boxes`] give a box's policy, placement, mode, shared weight and servers.
//!
//! 7. `reconfigure(now, &system)` applies a new box set (at most at `next_timer()`, like
//!    `advance`): refused as a whole, changing nothing, for whatever `Scheduler::new` or
//!    `add_task` would refuse; otherwise servers are matched by (box, CPU) and keep their
//!    budget, deadline, throttle and statistics if their parameters are unchanged
//!    ([`rules::cbs_change`] if they changed), tasks keep their ids, and the returned
//!    [`Reconfigured`] maps old server ids to new, lists removed/added/changed servers and the
//!    released members of deleted boxes, and hands back the events queued before (old ids).
//!    Decisions are fresh on return.
//!
//! For the Linux runtime, [`Scheduler::dispatch`] gives a CPU's whole EDF order of non-throttled
//! servers with work and the members placed on each vCPU (most urgent first); ready members of a
//! global box that sit on no running vCPU are listed by [`Scheduler::unplaced`].

pub mod plugin;
pub mod rules;
mod sched;
mod types;

pub use sched::{Probes, QuietPeriod, QuietRun, Scheduler};
pub use types::{
    Accounting, BoxInfo, CoreError, CpuDecision, Event, Options, Reconfigured, Reservation,
    Running, ServerId, ServerInfo, Slot, TaskId, TaskParams,
};
