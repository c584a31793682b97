//! The rtbox reservation model.
//!
//! Vocabulary shared by every rtbox crate: [`Nanos`] (integer time), [`Bandwidth`] (fixed-point
//! CPU fractions), the [`Platform`], boxes ([`BoxSpec`]) with their [`Interface`], the hard CBS
//! [`Server`]s an interface becomes, [`TaskSpec`]s, and the validated [`System`]. The
//! [`priority`] module holds the one fixed-priority rule every crate uses. The
//! [`placement`] module holds where members of pinned boxes run. The
//! [`admission`] module flattens the box tree into per-CPU servers and runs admission control.
//!
//! This crate does no I/O and reads no clock.

pub mod admission;
pub mod band;
pub mod bandwidth;
pub mod cpuset;
pub mod error;
pub mod hostload;
pub mod placement;
pub mod plugin;
pub mod priority;
pub mod servers;
pub mod system;
pub mod time;

pub use admission::{
    admit, admit_with_loop, digits_for, fits_cap, Admission, CpuLoad, FlatServer, LoopCost,
    Refusal, Role, SharedShare, DEFAULT_LOOP_STEP, LOOP_STEPS_PER_PERIOD,
};
pub use band::{BandError, PrioRange, BAND_MAX};
pub use bandwidth::{Bandwidth, BW_ONE};
pub use cpuset::CpuSet;
pub use error::{ModelError, Subject};
pub use hostload::{
    admit_on_host, deadline_interference, min_enforceable_budget, root_domain_share, DeadlineTask,
    HostCpu, HostLoad, MAX_RUNTIME_PERIOD, STOP_LATENCY,
};
pub use placement::{least_loaded_vcpu, PinPlan};
pub use plugin::{PluginConflict, PluginKind};
pub use priority::{
    deadline_monotonic_cmp, deadline_monotonic_order, fifo_priorities, priority_levels,
    FifoPriorityError,
};
pub use servers::{
    bdm_server_params, format_control_string, mpr_budgets, parse_control_string, Server,
};
pub use system::{
    Arrival, BoxSpec, Interface, Mode, Placement, Platform, Policy, ResolvedBox, ServerSpec,
    System, TaskSpec, DEFAULT_CAP,
};
pub use time::{format_duration, format_ms, parse_duration, DurationError, Nanos};
