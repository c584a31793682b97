//! `System`: a validated configuration, and the commands of the CLI that take one (`check`,
//! `analyze`, `analyze --synthesize`, `sim`), each calling the same library function.

use pyo3::prelude::*;
use rtbox_analysis::synth::{synthesize_box, Request, SynthError};
use rtbox_model::{admit_on_host, parse_duration, HostLoad, LoopCost, Nanos};
use rtbox_sim::{simulate, ModelKind, SimError, SimOptions};

use crate::errors::{self, config_error_with, SimulationError, SynthesisError};
use crate::sim::SimReport;
use rtbox_experiment::report;

/// A platform with boxes and tasks, validated as `rtbox check` validates a file. Build one with
/// `rtbox.load`, `rtbox.loads`, `rtbox.System.build` or `rtbox.from_simso`.
#[pyclass(frozen, module = "rtbox._rtbox")]
pub struct System {
    pub inner: rtbox_model::System,
    /// The configuration text it was parsed from: what pickling and Dask workers carry.
    pub toml: String,
}

/// Reads a configuration file (TOML, `docs/config.md`). Raises `ConfigError`.
#[pyfunction]
pub fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<System> {
    let text = std::fs::read_to_string(&path)
        .map_err(|e| errors::config_error(None, format!("cannot read {}: {e}", path.display())))?;
    loads(py, text)
}

/// Parses configuration text (TOML). Raises `ConfigError` naming the line and field.
#[pyfunction]
pub fn loads(py: Python<'_>, text: String) -> PyResult<System> {
    let inner = py
        .allow_threads(|| rtbox_config::parse_str(&text))
        .map_err(|e| errors::from_config(&e))?;
    Ok(System { inner, toml: text })
}

/// A configuration given as a JSON document with the TOML file's structure (`platform`, `box`,
/// `task`): written out as TOML and parsed by the same code as files, so it gets the same
/// validation and field names in its errors.
#[pyfunction]
pub fn from_json(py: Python<'_>, json: &str) -> PyResult<System> {
    let value: toml::Value = serde_json::from_str(json)
        .map_err(|e| errors::config_error(None, format!("not a configuration: {e}")))?;
    let text = toml::to_string(&value)
        .map_err(|e| errors::config_error(None, format!("not a configuration: {e}")))?;
    loads(py, text)
}

fn duration_arg(field: &str, text: &str) -> PyResult<Nanos> {
    match parse_duration(text) {
        Ok(0) => Err(config_error_with(
            None,
            Some(field.into()),
            format!("{field}: must be positive"),
        )),
        Ok(d) => Ok(d),
        Err(e) => Err(config_error_with(
            None,
            Some(field.into()),
            format!("{field}: {e}"),
        )),
    }
}

#[pymethods]
impl System {
    /// The configuration as TOML text.
    fn to_toml(&self) -> String {
        self.toml.clone()
    }

    fn __reduce__(&self, py: Python<'_>) -> PyResult<(PyObject, (String,))> {
        let loads = py.import("rtbox._rtbox")?.getattr("loads")?.unbind();
        Ok((loads, (self.toml.clone(),)))
    }

    /// Box names, in file order.
    #[getter]
    fn box_names(&self) -> Vec<String> {
        self.inner
            .boxes()
            .iter()
            .map(|b| b.name().to_string())
            .collect()
    }

    /// Task names, in file order.
    #[getter]
    fn task_names(&self) -> Vec<String> {
        self.inner.tasks.iter().map(|t| t.name.clone()).collect()
    }

    /// CPUs of the platform.
    #[getter]
    fn cpus(&self) -> Vec<u32> {
        self.inner.platform.cpus.iter().collect()
    }

    /// Admission control as `rtbox check` does it, with the daemon's enforcement loop of the
    /// BPF sensor (`bpf`) or the perf sensor, of `loop_step_ns` per step (None: that loop's
    /// measured step; 0: the reservations alone). Returns JSON text.
    #[pyo3(signature = (loop_step_ns=None, bpf=false))]
    fn check(&self, loop_step_ns: Option<u64>, bpf: bool) -> String {
        let base = if bpf {
            LoopCost::BPF
        } else {
            LoopCost::DEFAULT
        };
        let cost = loop_step_ns.map_or(base, |step| LoopCost { step, ..base });
        report::admission(&admit_on_host(&self.inner, cost, &HostLoad::default())).to_string()
    }

    /// Every box's verdict, as `rtbox analyze`. Returns JSON text.
    fn analyze(&self, py: Python<'_>) -> String {
        let r = py.allow_threads(|| rtbox_analysis::analyze(&self.inner));
        report::analysis(&r, None).to_string()
    }

    /// The smallest interface of `kind` (bdm, mpr, server) for a box, as
    /// `rtbox analyze --synthesize`. `delta` for bdm, `period` for mpr and server.
    #[pyo3(signature = (box_name, kind, delta=None, period=None))]
    fn synthesize(
        &self,
        py: Python<'_>,
        box_name: &str,
        kind: &str,
        delta: Option<&str>,
        period: Option<&str>,
    ) -> PyResult<String> {
        let request = match (kind, delta, period) {
            ("bdm", Some(d), None) => Request::Bdm {
                delta: duration_arg("delta", d)?,
            },
            ("mpr", None, Some(p)) => Request::Mpr {
                pi: duration_arg("period", p)?,
            },
            ("server", None, Some(p)) => Request::Server {
                period: duration_arg("period", p)?,
            },
            ("bdm", _, _) => {
                return Err(config_error_with(
                    None,
                    Some("delta".into()),
                    "delta: interface \"bdm\" needs delta (and no period)".into(),
                ))
            }
            ("mpr" | "server", _, _) => {
                return Err(config_error_with(
                    None,
                    Some("period".into()),
                    format!("period: interface \"{kind}\" needs period (and no delta)"),
                ))
            }
            _ => {
                return Err(config_error_with(
                    None,
                    Some("interface".into()),
                    format!("interface: \"{kind}\" is not one of bdm, mpr, server"),
                ))
            }
        };
        match py.allow_threads(|| synthesize_box(&self.inner, box_name, request)) {
            Ok(s) => Ok(report::synthesis(&s).to_string()),
            Err(e @ SynthError::UnknownBox(_)) => Err(config_error_with(
                None,
                Some("box".into()),
                format!("box: {e}"),
            )),
            Err(e @ SynthError::BadParameter(_)) => Err(config_error_with(
                None,
                Some(if kind == "bdm" { "delta" } else { "period" }.into()),
                e.to_string(),
            )),
            Err(e) => Err(SynthesisError::new_err(format!("box {box_name}: {e}"))),
        }
    }

    /// Simulates the system in virtual time, as `rtbox sim`. `jobs` records one row per job;
    /// `trace` records execution segments over `window` (default: the duration, at most 1 s)
    /// for the Gantt chart and the Perfetto trace.
    #[pyo3(signature = (duration, model, seed, jobs=true, trace=true, window=None))]
    #[allow(clippy::too_many_arguments)] // the keyword arguments of `rtbox sim`
    fn simulate(
        &self,
        py: Python<'_>,
        duration: &str,
        model: &str,
        seed: u64,
        jobs: bool,
        trace: bool,
        window: Option<&str>,
    ) -> PyResult<SimReport> {
        let duration = duration_arg("duration", duration)?;
        let model = ModelKind::from_name(model).ok_or_else(|| {
            config_error_with(
                None,
                Some("model".into()),
                format!(
                    "model: \"{model}\" is not one of {}",
                    ModelKind::NAMES.join(", ")
                ),
            )
        })?;
        let window = match window {
            None => duration.min(1_000_000_000),
            Some(w) => duration_arg("window", w)?,
        };
        let opts = SimOptions {
            duration,
            model,
            seed,
            record_jobs: jobs,
            record_trace: trace,
            trace_until: window,
            ..SimOptions::default()
        };
        match py.allow_threads(|| simulate(&self.inner, &opts)) {
            Ok(r) => Ok(SimReport { inner: r }),
            Err(SimError::Core(rtbox_core::CoreError::NotAdmitted(reasons))) => Err(
                errors::admission_error(reasons.iter().map(ToString::to_string).collect()),
            ),
            Err(SimError::BadOption { field, reason }) => Err(config_error_with(
                None,
                Some(field.clone()),
                format!("{field}: {reason}"),
            )),
            Err(e) => Err(SimulationError::new_err(e.to_string())),
        }
    }
}
