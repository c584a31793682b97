//! Random task sets, drawn exactly as `rtbox sweep` draws them (set `i` of a point comes from
//! the stream `(seed, i)`), so a set seen in a sweep can be pulled out and studied alone.

use pyo3::prelude::*;
use rtbox_experiment::settings::SweepSettings;
use serde_json::json;

use crate::errors;

/// `sets` task sets of total utilization `utilization`: set `i` is the one
/// `rtbox sweep --utilizations U --sets N --seed S` (with the same generator flags) judges as
/// its i-th set. Returns JSON text: a list of sets, each a list of task tables (config fields).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (utilization, *, sets=1, tasks=10, method="randfixedsum".to_string(),
    max_task_util=1.0, periods="10ms:100ms".to_string(), granularity="1ms".to_string(),
    deadlines="implicit".to_string(), seed=1, box_name=None))]
pub fn generate(
    py: Python<'_>,
    utilization: f64,
    sets: usize,
    tasks: usize,
    method: String,
    max_task_util: f64,
    periods: String,
    granularity: String,
    deadlines: String,
    seed: u64,
    box_name: Option<String>,
) -> PyResult<String> {
    let settings = SweepSettings {
        utilizations: utilization.to_string(),
        sets,
        tasks,
        method,
        max_task_util,
        periods,
        granularity,
        deadlines,
        seed,
        ..SweepSettings::default()
    };
    let spec = settings.to_spec(None).map_err(errors::from_sweep)?;
    let drawn = py
        .allow_threads(|| {
            (0..sets)
                .map(|i| spec.draw(0, i))
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(errors::from_sweep)?;
    let out: Vec<_> = drawn
        .iter()
        .map(|set| {
            set.iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "box": box_name.clone().or_else(|| t.box_name.clone()),
                        "wcet": t.wcet,
                        "period": t.period,
                        "deadline": t.deadline,
                        "priority": t.priority,
                    })
                })
                .collect::<Vec<_>>()
        })
        .collect();
    Ok(serde_json::Value::from(out).to_string())
}
