//! The scheduler plug-ins a box can run over its periodic members (seed 001, section V).
//!
//! Only the vocabulary lives here (names, and where each plug-in lets members run); the
//! plug-ins themselves are in `rtbox_core::plugin`, their admission tests in
//! `rtbox_analysis::plugin`.

use std::fmt;

use crate::system::{Placement, Policy};

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

    /// The box policy the plug-in needs: plug-ins rank members by fixed priority.
    pub fn policy(self) -> Policy {
        Policy::Fifo
    }

    /// Rule: a box runs a plug-in only with the policy and placement the plug-in needs
    /// ([`PluginKind::policy`], [`PluginKind::placement`]); `None` is a field left out, which
    /// takes the plug-in's. Every front end (configuration, socket) checks a box here.
    pub fn check_box(
        self,
        policy: Option<Policy>,
        placement: Option<Placement>,
    ) -> Result<(), PluginConflict> {
        if let Some(p) = policy.filter(|&p| p != self.policy()) {
            return Err(PluginConflict::Policy {
                plugin: self,
                policy: p,
            });
        }
        if let Some(p) = placement.filter(|&p| p != self.placement()) {
            return Err(PluginConflict::Placement {
                plugin: self,
                placement: p,
            });
        }
        Ok(())
    }
}

/// A box field that contradicts its plug-in ([`PluginKind::check_box`]). Displayed as the
/// text after the field's value: `"edf" cannot run plugin "fp-pm": ...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginConflict {
    Policy {
        plugin: PluginKind,
        policy: Policy,
    },
    Placement {
        plugin: PluginKind,
        placement: Placement,
    },
}

impl PluginConflict {
    /// The box field at fault.
    pub fn field(&self) -> &'static str {
        match self {
            PluginConflict::Policy { .. } => "policy",
            PluginConflict::Placement { .. } => "placement",
        }
    }
}

impl fmt::Display for PluginConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PluginConflict::Policy { plugin, policy } => write!(
                f,
                "= \"{}\" cannot run plugin \"{}\": plug-ins schedule by fixed priority, use policy = \"{}\" or leave it out",
                policy.name(),
                plugin.name(),
                plugin.policy().name()
            ),
            PluginConflict::Placement { plugin, placement } => write!(
                f,
                "= \"{}\" conflicts with plugin \"{}\", which needs placement = \"{}\" (leave placement out)",
                placement.name(),
                plugin.name(),
                plugin.placement().name()
            ),
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

    #[test]
    fn a_box_needs_fifo_and_the_plugins_placement() {
        let pm = PluginKind::FpPm;
        assert_eq!(pm.check_box(None, None), Ok(()));
        assert_eq!(
            pm.check_box(Some(Policy::Fifo), Some(Placement::Pinned)),
            Ok(())
        );
        let e = pm.check_box(Some(Policy::Edf), None).unwrap_err();
        assert_eq!(e.field(), "policy");
        assert!(
            e.to_string()
                .starts_with("= \"edf\" cannot run plugin \"fp-pm\""),
            "{e}"
        );
        let e = PluginKind::Fp
            .check_box(None, Some(Placement::Pinned))
            .unwrap_err();
        assert_eq!(e.field(), "placement");
        assert!(
            e.to_string().contains("needs placement = \"global\""),
            "{e}"
        );
    }
}
