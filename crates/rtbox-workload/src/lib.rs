//! Workloads for rtbox.
//!
//! - [`utilization`]: UUniFast, UUniFast-Discard and RandFixedSum utilization vectors;
//! - [`taskset`]: random task sets (log-uniform periods with a granularity, implicit or
//!   constrained deadlines, priorities) as `rtbox_model::TaskSpec`s in integer nanoseconds;
//! - [`rng`]: the seedable generator behind them;
//! - [`stats`]: the statistical oracles the generators are tested against.
//!
//! A pure library: no I/O, no clock; text comes in and goes out as strings.

pub mod json;
pub mod rng;
pub mod rtapp;
pub mod rtapp_log;
pub mod stats;
pub mod taskset;
pub mod utilization;

pub use rng::Rng;
pub use taskset::{Deadlines, GenError, Priorities, TaskSetParams, UtilMethod};
