//! The scheduler plug-ins a box can run over its periodic members (seed 001, section V).
//!
//! Only the vocabulary lives here (names, and where each plug-in lets members run); the
//! plug-ins themselves are in `rtbox_core::plugin`, their admission tests in
//! `rtbox_analysis::plugin`.

use crate::system::Placement;

/// A built-in plug-in, selected by a box's `plugin` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PluginKind {
    /// Plain fixed priority; Linux's own SCHED_FIFO placement decides the CPU (the seed's
    /// baseline "FP").
    Fp,
    /// Partitioned fixed priority, first fit by response-time analysis, DM priorities.
    FpFf,
    /// Semi-partitioned DM-PM: tasks that fit no CPU are split across CPUs with per-CPU budgets
    /// at the highest priority and migrate when a budget is used.
    FpPm,
    /// Global fixed priority imitated by migrations at job release and completion.
    GFp,
    /// Global fixed priority with utilization separation: heavy tasks get the highest priority.
    FpUs,
}

impl PluginKind {
    pub const NAMES: &'static [&'static str] = &["fp", "fp-ff", "fp-pm", "g-fp", "fp-us"];
    pub const ALL: [PluginKind; 5] = [
        PluginKind::Fp,
        PluginKind::FpFf,
        PluginKind::FpPm,
        PluginKind::GFp,
        PluginKind::FpUs,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PluginKind::Fp => "fp",
            PluginKind::FpFf => "fp-ff",
            PluginKind::FpPm => "fp-pm",
            PluginKind::GFp => "g-fp",
            PluginKind::FpUs => "fp-us",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        PluginKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// The box placement the plug-in needs. `fp` leaves the CPU to the scheduler's own global
    /// placement; every other plug-in places each member on one vCPU itself and moves it
    /// (ExSched's `migrate_task`), which is a pinned box whose members the plug-in re-pins.
    pub fn placement(self) -> Placement {
        match self {
            PluginKind::Fp => Placement::Global,
            _ => Placement::Pinned,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in PluginKind::ALL {
            assert_eq!(PluginKind::from_name(k.name()), Some(k));
        }
        assert_eq!(PluginKind::from_name("edf"), None);
        assert_eq!(PluginKind::NAMES.len(), PluginKind::ALL.len());
    }
}
