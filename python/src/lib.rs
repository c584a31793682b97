//! `rtbox._rtbox`: the native half of the `rtbox` Python package.
//!
//! Thin bindings: every function parses its arguments, calls the same library function the
//! `rtbox` CLI calls, and hands the result back as plain data (JSON text for small nested
//! results, Arrow record batches for tables). No scheduling rule lives here; the Python half
//! (`python/rtbox/`) adds typed result classes, plots and the Dask driver of sweeps.

use pyo3::prelude::*;

mod errors;
mod frames;
mod generate;
mod sim;
mod sweep;
mod system;

#[pymodule]
fn _rtbox(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<system::System>()?;
    m.add_class::<sim::SimReport>()?;
    m.add_class::<frames::ArrowBatch>()?;
    m.add_class::<sweep::Sweep>()?;
    m.add_function(wrap_pyfunction!(system::load, m)?)?;
    m.add_function(wrap_pyfunction!(system::loads, m)?)?;
    m.add_function(wrap_pyfunction!(system::from_json, m)?)?;
    m.add_function(wrap_pyfunction!(generate::generate, m)?)?;
    m.add_function(wrap_pyfunction!(duration_ns, m)?)?;
    m.add_function(wrap_pyfunction!(priority_order, m)?)?;
    m.add("MODELS", rtbox_sim::ModelKind::NAMES.to_vec())?;
    Ok(())
}

/// Nanoseconds of a duration written as in configuration files (`"20ms"`, `"1.5s"`).
#[pyfunction]
fn duration_ns(text: &str) -> PyResult<u64> {
    rtbox_model::parse_duration(text).map_err(|e| errors::config_error(None, format!("{e}")))
}

/// Positions of tasks given as (relative deadline, period) in ns, most urgent first, by the one
/// priority rule of rtbox (`rtbox_model::deadline_monotonic_order`: shorter deadline, then
/// shorter period, then position). Rate monotonic passes (period, period).
#[pyfunction]
fn priority_order(keys: Vec<(u64, u64)>) -> Vec<usize> {
    rtbox_model::deadline_monotonic_order(&keys)
}
