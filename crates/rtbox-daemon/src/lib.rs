//! The rtbox daemon: keeps boxes, takes requests on a Unix socket, and enforces the boxes'
//! reservations on real threads by driving `rtbox-core` in Measured accounting mode.
//!
//! See docs/runtime.md for the design (priority range, modes, kernel rules, crash safety).

pub mod access;
pub mod backstop;
pub mod charge;
pub mod client;
pub mod container;
pub mod daemon;
pub mod host;
pub mod hostwatch;
pub mod jobpage;
pub mod joined;
pub mod loopcost;
pub mod metrics;
pub mod metricshttp;
pub mod ocihook;
pub mod protocol;
pub mod runtime;
pub mod spinguard;
pub mod start;
pub mod status;
pub mod stopping;

pub use daemon::{run, DaemonConfig, DaemonError, ReloadError, UserError};
pub use runtime::{Runtime, RuntimeError, RuntimeOptions, Target, LOOP_PRIO, PRIO_HI, PRIO_LO};

/// Default socket path.
pub const DEFAULT_SOCKET: &str = "/run/rtbox/rtbox.sock";
/// Default state file (the crash journal).
pub const DEFAULT_STATE: &str = "/run/rtbox/state.json";
