//! A sweep described in text, as a person writes it (`"0.5:3.5:0.25"`, `"10ms:100ms"`,
//! `"analysis,sim"`), turned into a [`SweepSpec`]. The CLI's flags and the Python binding's
//! keyword arguments both go through [`SweepSettings::to_spec`], so they accept the same values
//! and refuse bad ones with the same message naming the setting.

use rtbox_model::{parse_duration, BoxSpec, Interface, Placement, Platform, Policy, System};
use rtbox_workload::{Deadlines, TaskSetParams, UtilMethod};

use crate::sweep::{parse_utilizations, Evaluator, SweepError, SweepSpec};

/// Where the generated tasks go when no configuration is given: one box named `sweep` with a
/// 9.5 ms / 10 ms server on each of `cpus` CPUs (the budget leaves the platform's default cap).
pub const DEFAULT_BOX: &str = "sweep";
const DEFAULT_BUDGET: u64 = 9_500_000;
const DEFAULT_PERIOD: u64 = 10_000_000;

/// Every setting of a sweep as text or plain numbers; [`Default`] gives the CLI's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepSettings {
    /// Without a base configuration: CPUs of the default box.
    pub cpus: u32,
    /// Without a base configuration: the default box's local policy (fifo, edf).
    pub policy: String,
    /// Without a base configuration: the default box's placement (global, pinned).
    pub placement: String,
    /// A list `0.5,1,1.5` or a range `start:end:step`.
    pub utilizations: String,
    pub sets: usize,
    pub tasks: usize,
    /// randfixedsum, uunifast-discard, uunifast.
    pub method: String,
    pub max_task_util: f64,
    /// `MIN:MAX`, drawn log-uniformly.
    pub periods: String,
    pub granularity: String,
    /// implicit or constrained.
    pub deadlines: String,
    /// Comma-separated evaluators: analysis, sim, sim-<model>.
    pub evaluate: String,
    /// Simulated time per set; `None` picks 10 x the longest period.
    pub sim_duration: Option<String>,
    pub seed: u64,
    /// Worker threads (0: all cores).
    pub threads: usize,
}

impl Default for SweepSettings {
    fn default() -> Self {
        SweepSettings {
            cpus: 4,
            policy: "fifo".into(),
            placement: "global".into(),
            utilizations: "0.5:3.5:0.25".into(),
            sets: 100,
            tasks: 10,
            method: "randfixedsum".into(),
            max_task_util: 1.0,
            periods: "10ms:100ms".into(),
            granularity: "1ms".into(),
            deadlines: "implicit".into(),
            evaluate: "analysis".into(),
            sim_duration: None,
            seed: 1,
            threads: 0,
        }
    }
}

fn setting(field: &str, reason: impl Into<String>) -> SweepError {
    SweepError::Setting {
        field: field.into(),
        reason: reason.into(),
    }
}

fn duration(field: &str, text: &str) -> Result<u64, SweepError> {
    parse_duration(text).map_err(|e| setting(field, e.to_string()))
}

impl SweepSettings {
    /// The one-box system the generated tasks go into when no configuration is given.
    pub fn default_system(&self) -> Result<System, SweepError> {
        let policy = Policy::from_name(&self.policy).ok_or_else(|| {
            setting(
                "policy",
                format!("\"{}\" is not one of fifo, edf", self.policy),
            )
        })?;
        let placement = Placement::from_name(&self.placement).ok_or_else(|| {
            setting(
                "placement",
                format!("\"{}\" is not one of global, pinned", self.placement),
            )
        })?;
        if self.cpus == 0 {
            return Err(setting("cpus", "must be at least 1"));
        }
        let mut b = BoxSpec::new(
            DEFAULT_BOX,
            Interface::PerCpu {
                budget: DEFAULT_BUDGET,
                period: DEFAULT_PERIOD,
            },
        );
        b.policy = policy;
        b.placement = placement;
        System::new(Platform::with_cpus(self.cpus), vec![b], vec![])
            .map_err(|e| setting("cpus", e.to_string()))
    }

    /// The generator's parameters (utilization and box are set per point by the sweep).
    pub fn generator(&self) -> Result<TaskSetParams, SweepError> {
        let method = UtilMethod::from_name(&self.method).ok_or_else(|| {
            setting(
                "method",
                format!(
                    "\"{}\" is not one of {}",
                    self.method,
                    UtilMethod::NAMES.join(", ")
                ),
            )
        })?;
        let (pmin, pmax) = self
            .periods
            .split_once(':')
            .ok_or_else(|| setting("periods", format!("\"{}\" is not MIN:MAX", self.periods)))?;
        let deadlines = match self.deadlines.as_str() {
            "implicit" => Deadlines::Implicit,
            "constrained" => Deadlines::Constrained,
            other => {
                return Err(setting(
                    "deadlines",
                    format!("\"{other}\" is not one of implicit, constrained"),
                ))
            }
        };
        Ok(TaskSetParams {
            tasks: self.tasks,
            method,
            max_task_util: self.max_task_util,
            period_min: duration("periods", pmin)?,
            period_max: duration("periods", pmax)?,
            granularity: duration("granularity", &self.granularity)?,
            deadlines,
            ..TaskSetParams::default()
        })
    }

    /// The sweep: `base` is a configuration and the box that receives the generated tasks, or
    /// `None` for [`Self::default_system`]'s box.
    pub fn to_spec(&self, base: Option<(System, String)>) -> Result<SweepSpec, SweepError> {
        let (base, box_name) = match base {
            Some(b) => b,
            None => (self.default_system()?, DEFAULT_BOX.to_string()),
        };
        let utilizations =
            parse_utilizations(&self.utilizations).map_err(|e| setting("utilizations", e))?;
        let evaluators = self
            .evaluate
            .split(',')
            .map(|s| {
                Evaluator::from_name(s.trim()).ok_or_else(|| {
                    setting(
                        "evaluate",
                        format!(
                            "\"{}\" is not analysis, sim or sim-<model> (rtbox, rt-throttling, deadline, fp)",
                            s.trim()
                        ),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let sim_duration = match &self.sim_duration {
            None => 0,
            Some(d) => match duration("sim-duration", d)? {
                0 => return Err(setting("sim-duration", "must be positive")),
                d => d,
            },
        };
        Ok(SweepSpec {
            base,
            box_name,
            generator: self.generator()?,
            utilizations,
            sets_per_point: self.sets,
            evaluators,
            sim_duration,
            seed: self.seed,
            threads: self.threads,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_give_the_cli_sweep() {
        let spec = SweepSettings::default().to_spec(None).unwrap();
        assert_eq!(spec.box_name, DEFAULT_BOX);
        assert_eq!(spec.utilizations.len(), 13);
        assert_eq!(spec.total_sets(), 1300);
        assert_eq!(spec.generator.period_min, 10_000_000);
        assert_eq!(spec.evaluators, vec![Evaluator::Analysis]);
        assert_eq!(spec.base.platform.cpus.len(), 4);
    }

    #[test]
    fn each_bad_setting_is_named() {
        type Change = fn(&mut SweepSettings);
        let cases: [(Change, &str); 8] = [
            (|s| s.policy = "rr".into(), "policy"),
            (|s| s.placement = "x".into(), "placement"),
            (|s| s.cpus = 0, "cpus"),
            (|s| s.method = "magic".into(), "method"),
            (|s| s.periods = "10ms".into(), "periods"),
            (|s| s.deadlines = "loose".into(), "deadlines"),
            (|s| s.evaluate = "analysis,simulate".into(), "evaluate"),
            (|s| s.sim_duration = Some("0s".into()), "sim-duration"),
        ];
        for (change, field) in cases {
            let mut s = SweepSettings::default();
            change(&mut s);
            match s.to_spec(None) {
                Err(SweepError::Setting { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }
}
