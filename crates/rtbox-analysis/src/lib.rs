//! Schedulability analysis for rtbox: will a box's tasks meet their deadlines inside its
//! reservation, and what is the smallest reservation that makes them?
//!
//! Pure library: no I/O, no clock, integer nanoseconds and exact arithmetic throughout.
//!
//! # Entry points
//! - Whole configuration: [`analyze`] (root admission + every box) and [`analyze_box`] /
//!   [`box_schedulable`] for one box of a [`rtbox_model::System`]; [`pin_plan`] the vCPU of
//!   each pinned task, which the scheduling core follows.
//! - A task set on a reservation without building a `System` (fast, for sweeps):
//!   [`box_verdict`]`(&tasks, &pins, &Reservation, Policy, Placement)`; tasks are [`Task`]
//!   (`Task::new(wcet, period)`, `.prio(p)`, `.jitter(j)`), reservations are
//!   [`Reservation::Bdm`], [`Reservation::Mpr`] or [`Reservation::Servers`];
//!   [`box_schedulable_fast`] is the same verdict as a bool without response bounds.
//! - Interface synthesis: [`synth::min_bdm_alpha`], [`synth::bdm_table`], [`synth::min_mpr`],
//!   [`synth::min_server_budget`], and [`synth::synthesize_box`] for a box of a `System`, with
//!   [`synth::box_entry_toml`] printing a ready-to-paste configuration entry.
//! - Individual tests: [`supply`] (sbf of PRM, EDP, BDR, BDM, MPR, explicit servers),
//!   [`demand`] (dbf, check points), [`uni`] (EDF and FP RTA against a supply),
//!   [`global`] (seed 002 Theorem 1, global EDF/FP on a supply, GFB, BCL, BC RTA),
//!   [`carry_in`] (global EDF with at most m - 1 carry-in jobs, Shin, Easwaran & Lee 2008),
//!   [`chain`] (end-to-end bounds of `after` chains: server activation, holistic),
//!   [`curve`] (a box's sbf beside its tasks' dbf, for `rtbox analyze --sbf`),
//!   [`partition`] (first/worst/best-fit with exact per-vCPU tests).
//!
//! See `docs/analysis.md` for each test's source and assumptions.

pub mod carry_in;
pub mod chain;
pub mod curve;
pub mod demand;
pub mod global;
mod math;
pub mod partition;
pub mod supply;
pub mod synth;
pub mod system;
pub mod task;
pub mod uni;

pub use supply::{Bdm, Bdr, Dedicated, Edp, Mpr, MultiSupply, Prm, ServerSet, Supply, Work};
pub use system::{
    analyze, analyze_box, box_reservation, box_schedulable, box_schedulable_fast, box_verdict,
    pin_plan, AnalysisError, BoxReport, BoxVerdict, Reservation, SystemReport, TaskOutcome,
    TestKind,
};
pub use task::Task;
