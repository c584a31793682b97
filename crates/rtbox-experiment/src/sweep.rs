//! Schedulability sweeps: for each utilization point, generate N random task sets into one box
//! of a configuration, judge each set with the analysis and/or the simulator, and report the
//! fraction judged schedulable.

use rtbox_analysis::{analyze_box, AnalysisError};
use rtbox_model::{Nanos, Placement, System, TaskSpec};
use rtbox_sim::{simulate, ModelKind, SimOptions};
use rtbox_workload::taskset::{assign_deadline_monotonic, TaskSetParams};
use rtbox_workload::Rng;

use crate::plot::{line_plot_svg, Series};
use crate::pool::run_indexed;

/// How one task set is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evaluator {
    /// `rtbox analyze`'s verdict for the box (the test matching its policy and placement).
    Analysis,
    /// Simulation with a model: success means no job of the box missed its deadline.
    Sim(ModelKind),
}

impl Evaluator {
    pub fn name(self) -> String {
        match self {
            Evaluator::Analysis => "analysis".into(),
            Evaluator::Sim(m) => format!("sim-{}", m.name()),
        }
    }

    /// `analysis`, `sim` (= sim-rtbox) or `sim-<model>` with a model of `rtbox sim`.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "analysis" => Some(Evaluator::Analysis),
            "sim" => Some(Evaluator::Sim(ModelKind::Rtbox)),
            _ => s
                .strip_prefix("sim-")
                .and_then(ModelKind::from_name)
                .map(Evaluator::Sim),
        }
    }
}

/// A sweep: where the tasks go, how they are drawn, how they are judged.
#[derive(Debug, Clone)]
pub struct SweepSpec {
    /// Platform and boxes; the generated tasks replace the tasks of `box_name` (other boxes'
    /// tasks stay and share the machine in simulation).
    pub base: System,
    pub box_name: String,
    /// Generator settings; `utilization` and `box_name` are set per point.
    pub generator: TaskSetParams,
    pub utilizations: Vec<f64>,
    pub sets_per_point: usize,
    pub evaluators: Vec<Evaluator>,
    /// Simulated time per set; 0 picks 10 x the longest period.
    pub sim_duration: Nanos,
    pub seed: u64,
    /// Worker threads; 0 uses every core.
    pub threads: usize,
}

/// Why a sweep cannot run.
#[derive(Debug, Clone, PartialEq)]
pub enum SweepError {
    /// A setting is unusable; names the setting.
    Setting { field: String, reason: String },
}

impl std::fmt::Display for SweepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SweepError::Setting { field, reason } => write!(f, "{field}: {reason}"),
        }
    }
}

impl std::error::Error for SweepError {}

fn setting(field: &str, reason: impl Into<String>) -> SweepError {
    SweepError::Setting {
        field: field.into(),
        reason: reason.into(),
    }
}

/// The outcome at one utilization point.
#[derive(Debug, Clone, PartialEq)]
pub struct PointResult {
    pub utilization: f64,
    pub sets: usize,
    /// Sets judged schedulable, per evaluator (same order as the spec's evaluators).
    pub successes: Vec<usize>,
}

impl PointResult {
    pub fn ratio(&self, evaluator: usize) -> f64 {
        if self.sets == 0 {
            0.0
        } else {
            self.successes[evaluator] as f64 / self.sets as f64
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SweepResult {
    pub evaluators: Vec<String>,
    pub points: Vec<PointResult>,
}

impl SweepResult {
    /// `utilization,sets,<evaluator ratios...>`, one line per point.
    pub fn to_csv(&self) -> String {
        let mut s = format!("utilization,sets,{}\n", self.evaluators.join(","));
        for p in &self.points {
            s.push_str(&format!("{},{}", trim(p.utilization), p.sets));
            for i in 0..self.evaluators.len() {
                s.push_str(&format!(",{:.4}", p.ratio(i)));
            }
            s.push('\n');
        }
        s
    }

    pub fn to_svg(&self, title: &str) -> String {
        let series: Vec<Series> = self
            .evaluators
            .iter()
            .enumerate()
            .map(|(i, name)| Series {
                name,
                points: self
                    .points
                    .iter()
                    .map(|p| (p.utilization, p.ratio(i)))
                    .collect(),
            })
            .collect();
        line_plot_svg(
            title,
            "task-set utilization (CPUs)",
            "success ratio",
            &series,
        )
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl SweepSpec {
    fn validate(&self) -> Result<(), SweepError> {
        let rb = self.base.get(&self.box_name).ok_or_else(|| {
            setting(
                "box",
                format!("\"{}\" is not a box of the configuration", self.box_name),
            )
        })?;
        if rb.spec.interface.is_shared() {
            return Err(setting(
                "box",
                format!(
                    "\"{}\" is a shared box: it has no reservation to sweep",
                    self.box_name
                ),
            ));
        }
        if self.utilizations.is_empty() {
            return Err(setting("utilizations", "no utilization points"));
        }
        if let Some(u) = self
            .utilizations
            .iter()
            .find(|u| !(u.is_finite() && **u > 0.0))
        {
            return Err(setting(
                "utilizations",
                format!("{u} is not a positive utilization"),
            ));
        }
        if self.sets_per_point == 0 {
            return Err(setting("sets", "must be at least 1"));
        }
        if self.evaluators.is_empty() {
            return Err(setting(
                "evaluate",
                "no evaluator (analysis, sim, sim-<model>)",
            ));
        }
        let mut probe = self.generator.clone();
        probe.utilization = self.utilizations[0];
        probe.validate().map_err(|e| setting(e.field, e.reason))?;
        Ok(())
    }

    /// The system for one generated task set: the base system with the box's tasks replaced.
    pub fn system_with(&self, tasks: Vec<TaskSpec>) -> Result<System, SweepError> {
        let mut all: Vec<TaskSpec> = self
            .base
            .tasks
            .iter()
            .filter(|t| t.box_name.as_deref() != Some(self.box_name.as_str()))
            .cloned()
            .collect();
        all.extend(tasks);
        System::new(self.base.platform.clone(), self.base.specs(), all)
            .map_err(|e| setting("generated tasks", e.to_string()))
    }

    /// Draws set `index` of point `point`: the same (seed, point, index) always gives the same
    /// set, whichever worker draws it.
    pub fn draw(&self, point: usize, index: usize) -> Result<Vec<TaskSpec>, SweepError> {
        let mut rng = Rng::stream(self.seed, (point * self.sets_per_point + index) as u64);
        let mut params = self.generator.clone();
        params.utilization = self.utilizations[point];
        params.box_name = Some(self.box_name.clone());
        let mut tasks = params
            .generate(&mut rng)
            .map_err(|e| setting(e.field, e.reason))?;
        if tasks.iter().all(|t| t.priority.is_none()) {
            // The analysis and the simulator must rank tasks identically.
            assign_deadline_monotonic(&mut tasks);
        }
        Ok(tasks)
    }

    fn judge(&self, tasks: Vec<TaskSpec>) -> Result<Vec<bool>, SweepError> {
        let system = self.system_with(tasks)?;
        let needs_analysis = self.evaluators.contains(&Evaluator::Analysis) || self.is_pinned();
        let report = if needs_analysis {
            Some(
                analyze_box(&system, &self.box_name)
                    .map_err(|e: AnalysisError| setting("box", e.to_string()))?,
            )
        } else {
            None
        };
        let sim_system = match (&report, self.is_pinned()) {
            (Some(r), true) => pin_as_analysed(&system, &self.box_name, r)?,
            _ => system,
        };
        let duration = if self.sim_duration > 0 {
            self.sim_duration
        } else {
            10 * sim_system.tasks.iter().map(|t| t.period).max().unwrap_or(1)
        };
        let mut out = Vec::with_capacity(self.evaluators.len());
        for ev in &self.evaluators {
            out.push(match ev {
                Evaluator::Analysis => report.as_ref().is_some_and(|r| r.schedulable()),
                Evaluator::Sim(model) => {
                    let opts = SimOptions {
                        duration,
                        model: *model,
                        seed: self.seed,
                        supply_windows: false,
                        ..SimOptions::default()
                    };
                    let rep = simulate(&sim_system, &opts)
                        .map_err(|e| setting("simulation", e.to_string()))?;
                    rep.tasks
                        .iter()
                        .filter(|t| t.box_name.as_deref() == Some(self.box_name.as_str()))
                        .all(|t| t.misses == 0)
                }
            });
        }
        Ok(out)
    }

    fn is_pinned(&self) -> bool {
        self.base
            .get(&self.box_name)
            .is_some_and(|b| b.spec.placement == Placement::Pinned)
    }
}

/// Pins each task of a pinned box to the CPU of the vCPU the analysis assigned it to (tasks the
/// partitioning could not place go round robin), so that the simulator runs the analysed
/// partition.
pub fn pin_as_analysed(
    system: &System,
    box_name: &str,
    report: &rtbox_analysis::BoxReport,
) -> Result<System, SweepError> {
    let cpus = &report.vcpu_cpus;
    if cpus.is_empty() {
        return Ok(system.clone());
    }
    let mut k = 0usize;
    let mut next = 0usize;
    let tasks: Vec<TaskSpec> = system
        .tasks
        .iter()
        .map(|t| {
            let mut t = t.clone();
            if t.box_name.as_deref() == Some(box_name) {
                let v = report
                    .verdict
                    .tasks
                    .get(k)
                    .and_then(|o| o.vcpu)
                    .unwrap_or_else(|| {
                        next += 1;
                        (next - 1) % cpus.len()
                    });
                t.cpu = Some(cpus[v % cpus.len()]);
                k += 1;
            }
            t
        })
        .collect();
    System::new(system.platform.clone(), system.specs(), tasks)
        .map_err(|e| setting("pinning", e.to_string()))
}

/// Runs the sweep; `progress(done, total)` is called after each task set.
pub fn run_sweep(
    spec: &SweepSpec,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<SweepResult, SweepError> {
    let verdicts = evaluate_range(spec, 0..spec.total_sets(), progress)?;
    spec.tally(&verdicts)
}

/// Judges the sets with global indices `range` (set `i` is set `i % sets_per_point` of point
/// `i / sets_per_point`) on `spec.threads` workers, returning one verdict per evaluator for
/// each set, in index order. A range carries everything a remote worker needs besides the spec
/// (each set is drawn from `(seed, i)`), so chunks of one sweep can run anywhere and their
/// verdicts, concatenated, equal a whole run's. `progress(done, len)` counts within the range.
pub fn evaluate_range(
    spec: &SweepSpec,
    range: std::ops::Range<usize>,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<Vec<bool>>, SweepError> {
    spec.validate()?;
    let total = spec.total_sets();
    if range.start > range.end || range.end > total {
        return Err(setting(
            "range",
            format!(
                "{}..{} is not within the sweep's {total} sets",
                range.start, range.end
            ),
        ));
    }
    let per = spec.sets_per_point;
    let start = range.start;
    run_indexed(
        range.len(),
        spec.threads,
        |k| {
            let i = start + k;
            spec.draw(i / per, i % per)
                .and_then(|tasks| spec.judge(tasks))
        },
        progress,
    )
    .into_iter()
    .collect()
}

impl SweepSpec {
    /// Sets in the whole sweep: utilization points times sets per point.
    pub fn total_sets(&self) -> usize {
        self.utilizations.len() * self.sets_per_point
    }

    /// Success ratios from the verdicts of every set of the sweep, in index order (as
    /// [`evaluate_range`] gives them, whole or chunk after chunk).
    pub fn tally(&self, verdicts: &[Vec<bool>]) -> Result<SweepResult, SweepError> {
        let per = self.sets_per_point;
        if verdicts.len() != self.total_sets()
            || verdicts.iter().any(|v| v.len() != self.evaluators.len())
        {
            return Err(setting(
                "verdicts",
                format!(
                    "{} sets of verdicts for a sweep of {} sets with {} evaluators",
                    verdicts.len(),
                    self.total_sets(),
                    self.evaluators.len()
                ),
            ));
        }
        let mut points: Vec<PointResult> = self
            .utilizations
            .iter()
            .map(|&u| PointResult {
                utilization: u,
                sets: per,
                successes: vec![0; self.evaluators.len()],
            })
            .collect();
        for (i, set) in verdicts.iter().enumerate() {
            for (e, ok) in set.iter().enumerate() {
                points[i / per].successes[e] += usize::from(*ok);
            }
        }
        Ok(SweepResult {
            evaluators: self.evaluators.iter().map(|e| e.name()).collect(),
            points,
        })
    }
}

/// Parses utilization points: a list `0.5,1,1.5` or a range `start:end:step` (inclusive).
pub fn parse_utilizations(text: &str) -> Result<Vec<f64>, String> {
    let num = |s: &str| -> Result<f64, String> {
        let v: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("\"{}\" is not a number", s.trim()))?;
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(format!("{v} is not a positive utilization"))
        }
    };
    let parts: Vec<&str> = text.split(':').collect();
    match parts.as_slice() {
        [start, end, step] => {
            let (a, b, s) = (num(start)?, num(end)?, num(step)?);
            if b < a {
                return Err(format!("range end {b} is below its start {a}"));
            }
            let n = ((b - a) / s + 1e-9).floor() as usize;
            if n > 10_000 {
                return Err("more than 10000 points".into());
            }
            // Computed from the index, not accumulated, so 0.1 steps do not drift.
            Ok((0..=n)
                .map(|i| ((a + s * i as f64) * 1e9).round() / 1e9)
                .collect())
        }
        [list] => list.split(',').map(num).collect(),
        _ => Err("write a list 0.5,1,1.5 or a range start:end:step".into()),
    }
}

/// A text progress bar for stderr: `[#####.....]  512/1000 sets`.
pub fn progress_bar(done: usize, total: usize, width: usize) -> String {
    let filled = (done * width)
        .checked_div(total)
        .unwrap_or(width)
        .min(width);
    format!(
        "[{}{}] {done:>w$}/{total} sets",
        "#".repeat(filled),
        ".".repeat(width - filled),
        w = total.to_string().len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utilization_lists_and_ranges() {
        assert_eq!(parse_utilizations("0.5,1, 1.5"), Ok(vec![0.5, 1.0, 1.5]));
        assert_eq!(
            parse_utilizations("0.1:0.5:0.1"),
            Ok(vec![0.1, 0.2, 0.3, 0.4, 0.5])
        );
        assert_eq!(parse_utilizations("1:1:0.5"), Ok(vec![1.0]));
        assert!(parse_utilizations("1:0.5:0.1").is_err());
        assert!(parse_utilizations("0.5,x").is_err());
        assert!(parse_utilizations("0,1").is_err());
        assert!(parse_utilizations("1:2").is_err());
    }

    #[test]
    fn progress_bar_fills_proportionally() {
        assert_eq!(progress_bar(5, 10, 4), "[##..]  5/10 sets");
        assert_eq!(progress_bar(10, 10, 4), "[####] 10/10 sets");
    }

    #[test]
    fn evaluator_names_round_trip() {
        for name in [
            "analysis",
            "sim-rtbox",
            "sim-fp",
            "sim-deadline",
            "sim-rt-throttling",
        ] {
            assert_eq!(Evaluator::from_name(name).unwrap().name(), name);
        }
        assert_eq!(
            Evaluator::from_name("sim"),
            Some(Evaluator::Sim(ModelKind::Rtbox))
        );
        assert_eq!(Evaluator::from_name("simulate"), None);
    }
}
