//! Random task sets: utilizations, log-uniform periods with a granularity, deadlines and
//! priorities, as `rtbox_model::TaskSpec`s in integer nanoseconds.

use rtbox_model::{deadline_monotonic_order, Nanos, TaskSpec};

use crate::rng::Rng;
use crate::utilization::{rand_fixed_sum, uunifast, uunifast_discard, UtilError};

/// How the utilizations of a set are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UtilMethod {
    /// Plain UUniFast: single utilizations may exceed `max_task_util`.
    UUniFast,
    /// UUniFast with rejection of sets that have a utilization above `max_task_util`.
    UUniFastDiscard,
    /// Stafford's RandFixedSum: uniform on the capped simplex, no rejection.
    #[default]
    RandFixedSum,
}

impl UtilMethod {
    pub const NAMES: &'static [&'static str] = &["uunifast", "uunifast-discard", "randfixedsum"];
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "uunifast" => Some(UtilMethod::UUniFast),
            "uunifast-discard" => Some(UtilMethod::UUniFastDiscard),
            "randfixedsum" => Some(UtilMethod::RandFixedSum),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            UtilMethod::UUniFast => "uunifast",
            UtilMethod::UUniFastDiscard => "uunifast-discard",
            UtilMethod::RandFixedSum => "randfixedsum",
        }
    }
}

/// Relative deadlines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Deadlines {
    /// D = T.
    #[default]
    Implicit,
    /// D uniform (integer ns) in [C, T].
    Constrained,
}

/// Fixed priorities given to the tasks (higher number = more urgent, as Linux RT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Priorities {
    /// None: the analysis and the simulator order by deadline themselves.
    #[default]
    Unset,
    /// Deadline monotonic: shortest deadline gets `n`, longest gets 1 (ties by name).
    DeadlineMonotonic,
}

/// Everything that defines one random task set.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSetParams {
    pub tasks: usize,
    /// Total utilization (sum of C/T), in CPUs.
    pub utilization: f64,
    pub method: UtilMethod,
    /// Largest utilization of one task (1.0 = one CPU).
    pub max_task_util: f64,
    pub period_min: Nanos,
    pub period_max: Nanos,
    /// Periods are multiples of this (e.g. 1 ms); `period_min` should be one too.
    pub granularity: Nanos,
    pub deadlines: Deadlines,
    pub priorities: Priorities,
    /// Tasks are named `{prefix}{i}`.
    pub name_prefix: String,
    pub box_name: Option<String>,
    /// UUniFast-Discard gives up after this many rejected draws.
    pub max_attempts: u32,
}

impl Default for TaskSetParams {
    fn default() -> Self {
        TaskSetParams {
            tasks: 10,
            utilization: 0.5,
            method: UtilMethod::default(),
            max_task_util: 1.0,
            period_min: 10_000_000,
            period_max: 100_000_000,
            granularity: 1_000_000,
            deadlines: Deadlines::default(),
            priorities: Priorities::default(),
            name_prefix: "t".into(),
            box_name: None,
            max_attempts: 100_000,
        }
    }
}

/// Why a task set could not be generated; names the offending parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct GenError {
    pub field: &'static str,
    pub reason: String,
}

impl std::fmt::Display for GenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

impl std::error::Error for GenError {}

fn bad(field: &'static str, reason: impl Into<String>) -> GenError {
    GenError {
        field,
        reason: reason.into(),
    }
}

impl TaskSetParams {
    /// Checks the parameters without drawing anything.
    pub fn validate(&self) -> Result<(), GenError> {
        if self.tasks == 0 {
            return Err(bad("tasks", "= 0: a task set needs at least one task"));
        }
        if !(self.max_task_util > 0.0 && self.max_task_util.is_finite()) {
            return Err(bad(
                "max_task_util",
                format!("= {} must be positive", self.max_task_util),
            ));
        }
        let cap_sum = self.tasks as f64 * self.max_task_util;
        if !(self.utilization > 0.0 && self.utilization.is_finite()) {
            return Err(bad(
                "utilization",
                format!("= {} must be positive", self.utilization),
            ));
        }
        if self.method != UtilMethod::UUniFast && self.utilization > cap_sum {
            return Err(bad(
                "utilization",
                format!(
                    "= {} exceeds {} tasks x max_task_util {}",
                    self.utilization, self.tasks, self.max_task_util
                ),
            ));
        }
        if self.granularity == 0 {
            return Err(bad("granularity", "= 0ns must be positive"));
        }
        if self.period_min == 0 || self.period_min < self.granularity {
            return Err(bad(
                "period_min",
                format!(
                    "= {}ns must be at least the granularity ({}ns)",
                    self.period_min, self.granularity
                ),
            ));
        }
        if self.period_max < self.period_min {
            return Err(bad(
                "period_max",
                format!(
                    "= {}ns is below period_min {}ns",
                    self.period_max, self.period_min
                ),
            ));
        }
        Ok(())
    }

    /// Draws one task set.
    pub fn generate(&self, rng: &mut Rng) -> Result<Vec<TaskSpec>, GenError> {
        self.validate()?;
        let utils = self.utilizations(rng)?;
        let mut tasks: Vec<TaskSpec> = utils
            .iter()
            .enumerate()
            .map(|(i, &u)| {
                let period =
                    log_uniform_period(rng, self.period_min, self.period_max, self.granularity);
                let wcet = wcet_of(u, period);
                let deadline = match self.deadlines {
                    Deadlines::Implicit => period,
                    Deadlines::Constrained => rng.range_inclusive(wcet.min(period), period),
                };
                let mut t = TaskSpec::periodic(format!("{}{}", self.name_prefix, i), wcet, period);
                t.deadline = deadline;
                t.box_name = self.box_name.clone();
                t
            })
            .collect();
        if self.priorities == Priorities::DeadlineMonotonic {
            assign_deadline_monotonic(&mut tasks);
        }
        Ok(tasks)
    }

    fn utilizations(&self, rng: &mut Rng) -> Result<Vec<f64>, GenError> {
        let to_gen = |e: UtilError| bad("utilization", e.to_string());
        match self.method {
            UtilMethod::UUniFast => Ok(uunifast(rng, self.tasks, self.utilization)),
            UtilMethod::UUniFastDiscard => uunifast_discard(
                rng,
                self.tasks,
                self.utilization,
                self.max_task_util,
                self.max_attempts,
            )
            .map(|(u, _)| u)
            .map_err(to_gen),
            UtilMethod::RandFixedSum => {
                rand_fixed_sum(rng, self.tasks, self.utilization, 0.0, self.max_task_util)
                    .map_err(to_gen)
            }
        }
    }
}

/// Execution time of a task with utilization `u` and period `period`: round(u T), at least
/// 1 ns (a task with no work would be refused by the model).
pub fn wcet_of(u: f64, period: Nanos) -> Nanos {
    ((u * period as f64).round() as Nanos).max(1)
}

/// A period log-uniform in [min, max], rounded down to a multiple of `granularity` and kept
/// within [min, max] (Emberson, Stafford & Davis 2010: log-uniform periods spread tasks evenly
/// over orders of magnitude).
pub fn log_uniform_period(rng: &mut Rng, min: Nanos, max: Nanos, granularity: Nanos) -> Nanos {
    debug_assert!(granularity > 0 && min <= max);
    let (lo, hi) = ((min as f64).ln(), (max as f64).ln());
    let raw = (lo + rng.uniform() * (hi - lo)).exp();
    let rounded = ((raw / granularity as f64).floor() as Nanos) * granularity;
    let floor_min = min.div_ceil(granularity) * granularity;
    let ceil_max = (max / granularity) * granularity;
    if floor_min > ceil_max {
        // No multiple of the granularity inside [min, max]: keep min itself.
        return min;
    }
    rounded.clamp(floor_min, ceil_max)
}

/// Explicit deadline-monotonic priorities n (most urgent) .. 1 for every task, by the model's
/// one rule (`rtbox_model::priority`: shorter deadline, then shorter period, then position), so
/// a generated set ranks exactly as the analysis and the simulator would rank it unset.
pub fn assign_deadline_monotonic(tasks: &mut [TaskSpec]) {
    let keys: Vec<(Nanos, Nanos)> = tasks.iter().map(|t| (t.deadline, t.period)).collect();
    let n = tasks.len() as u32;
    for (rank, i) in deadline_monotonic_order(&keys).into_iter().enumerate() {
        tasks[i].priority = Some(n - rank as u32);
    }
}

/// Sum of C/T of a task set, in CPUs (float: for reports only).
pub fn utilization_of(tasks: &[TaskSpec]) -> f64 {
    tasks.iter().map(|t| t.wcet as f64 / t.period as f64).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_sets_have_the_requested_shape() {
        let mut rng = Rng::seed(11);
        let params = TaskSetParams {
            tasks: 12,
            utilization: 3.2,
            deadlines: Deadlines::Constrained,
            priorities: Priorities::DeadlineMonotonic,
            box_name: Some("b".into()),
            ..TaskSetParams::default()
        };
        for _ in 0..200 {
            let set = params.generate(&mut rng).unwrap();
            assert_eq!(set.len(), 12);
            for t in &set {
                assert!(t.period % params.granularity == 0);
                assert!((params.period_min..=params.period_max).contains(&t.period));
                assert!(t.wcet <= t.deadline && t.deadline <= t.period, "{t:?}");
                assert_eq!(t.box_name.as_deref(), Some("b"));
            }
            // Rounding C to whole ns moves U by at most n / (2 Tmin).
            assert!((utilization_of(&set) - 3.2).abs() < 1e-5);
            let mut prios: Vec<u32> = set.iter().map(|t| t.priority.unwrap()).collect();
            prios.sort();
            assert_eq!(prios, (1..=12).collect::<Vec<_>>());
            let top = set.iter().find(|t| t.priority == Some(12)).unwrap();
            assert!(set.iter().all(|t| t.deadline >= top.deadline));
        }
    }

    #[test]
    fn bad_parameters_name_their_field() {
        let mut rng = Rng::seed(1);
        let p = TaskSetParams {
            tasks: 2,
            utilization: 2.5,
            ..TaskSetParams::default()
        };
        assert_eq!(p.generate(&mut rng).unwrap_err().field, "utilization");
        let p = TaskSetParams {
            period_max: 1_000_000,
            ..TaskSetParams::default()
        };
        assert_eq!(p.validate().unwrap_err().field, "period_max");
        let p = TaskSetParams {
            granularity: 0,
            ..TaskSetParams::default()
        };
        assert_eq!(p.validate().unwrap_err().field, "granularity");
        let p = TaskSetParams {
            tasks: 0,
            ..TaskSetParams::default()
        };
        assert_eq!(p.validate().unwrap_err().field, "tasks");
    }

    #[test]
    fn periods_respect_granularity_and_bounds() {
        let mut rng = Rng::seed(12);
        for _ in 0..10_000 {
            let p = log_uniform_period(&mut rng, 1_000_000, 100_000_000, 1_000_000);
            assert!(p.is_multiple_of(1_000_000) && (1_000_000..=100_000_000).contains(&p));
        }
        assert_eq!(log_uniform_period(&mut rng, 1500, 1600, 1000), 1500);
    }
}
