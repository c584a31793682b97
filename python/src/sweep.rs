//! `Sweep`: a schedulability experiment built by `rtbox_experiment::settings` (the CLI's
//! `rtbox sweep` flags), evaluated in chunks of set indices. The Python side runs the chunks in
//! this process or on Dask workers; either way each chunk draws its own sets from
//! `(seed, index)`, so no task set crosses the network and results equal a local run.

use pyo3::prelude::*;
use rtbox_experiment::settings::SweepSettings;
use rtbox_experiment::sweep::{evaluate_range, SweepResult, SweepSpec};

use crate::errors;
use crate::system::System;

#[pyclass(frozen, module = "rtbox._rtbox")]
pub struct Sweep {
    spec: SweepSpec,
}

type Row = (f64, usize, Vec<usize>);

impl Sweep {
    fn result(&self, verdicts: &[Vec<bool>]) -> PyResult<SweepResult> {
        self.spec.tally(verdicts).map_err(errors::from_sweep)
    }
}

#[pymethods]
impl Sweep {
    /// Settings as `rtbox sweep`'s flags (same defaults); `base` and `box_name` name the
    /// configuration and the box receiving the generated tasks (default: a one-box system of
    /// `cpus` CPUs). Raises `ConfigError` naming the bad setting.
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, base=None, box_name=None, cpus=4, policy="fifo".to_string(),
        placement="global".to_string(), utilizations="0.5:3.5:0.25".to_string(), sets=100,
        tasks=10, method="randfixedsum".to_string(), max_task_util=1.0,
        periods="10ms:100ms".to_string(), granularity="1ms".to_string(),
        deadlines="implicit".to_string(), evaluate="analysis".to_string(), sim_duration=None,
        seed=1, threads=0))]
    fn new(
        base: Option<PyRef<'_, System>>,
        box_name: Option<String>,
        cpus: u32,
        policy: String,
        placement: String,
        utilizations: String,
        sets: usize,
        tasks: usize,
        method: String,
        max_task_util: f64,
        periods: String,
        granularity: String,
        deadlines: String,
        evaluate: String,
        sim_duration: Option<String>,
        seed: u64,
        threads: usize,
    ) -> PyResult<Self> {
        let settings = SweepSettings {
            cpus,
            policy,
            placement,
            utilizations,
            sets,
            tasks,
            method,
            max_task_util,
            periods,
            granularity,
            deadlines,
            evaluate,
            sim_duration,
            seed,
            threads,
        };
        let base = match (base, box_name) {
            (Some(s), Some(b)) => Some((s.inner.clone(), b)),
            (None, None) => None,
            (Some(_), None) => {
                return Err(errors::config_error_with(
                    None,
                    Some("box".into()),
                    "box: a base system needs the name of the box to fill".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(errors::config_error_with(
                    None,
                    Some("config".into()),
                    "config: box needs a base system".into(),
                ))
            }
        };
        let spec = settings.to_spec(base).map_err(errors::from_sweep)?;
        // An empty range runs the spec's own checks (box exists, generator settings).
        evaluate_range(&spec, 0..0, &|_, _| {}).map_err(errors::from_sweep)?;
        Ok(Sweep { spec })
    }

    /// Sets in the whole sweep (points x sets per point).
    #[getter]
    fn total_sets(&self) -> usize {
        self.spec.total_sets()
    }

    #[getter]
    fn sets_per_point(&self) -> usize {
        self.spec.sets_per_point
    }

    #[getter]
    fn utilizations(&self) -> Vec<f64> {
        self.spec.utilizations.clone()
    }

    #[getter]
    fn evaluators(&self) -> Vec<String> {
        self.spec.evaluators.iter().map(|e| e.name()).collect()
    }

    /// Verdicts (one bool per evaluator) of sets `start..end`, on `threads` threads, without
    /// the GIL.
    fn evaluate(&self, py: Python<'_>, start: usize, end: usize) -> PyResult<Vec<Vec<bool>>> {
        py.allow_threads(|| evaluate_range(&self.spec, start..end, &|_, _| {}))
            .map_err(errors::from_sweep)
    }

    /// Per point: (utilization, sets, successes per evaluator), from every set's verdicts.
    fn tally(&self, verdicts: Vec<Vec<bool>>) -> PyResult<Vec<Row>> {
        Ok(self
            .result(&verdicts)?
            .points
            .into_iter()
            .map(|p| (p.utilization, p.sets, p.successes))
            .collect())
    }

    /// The CSV `rtbox sweep` prints for these verdicts.
    fn to_csv(&self, verdicts: Vec<Vec<bool>>) -> PyResult<String> {
        Ok(self.result(&verdicts)?.to_csv())
    }

    /// The SVG plot of `rtbox sweep --svg` for these verdicts.
    fn to_svg(&self, verdicts: Vec<Vec<bool>>, title: &str) -> PyResult<String> {
        Ok(self.result(&verdicts)?.to_svg(title))
    }
}
