//! A simulation's report: summary tables as Arrow batches, and the CLI's outputs (JSON report,
//! summary table, Chrome/Perfetto trace, SVG Gantt chart) from `rtbox_sim::output`.

use pyo3::prelude::*;
use rtbox_sim::output;

use crate::errors::SimulationError;
use crate::frames::{ArrowBatch, Columns};

/// The result of `System.simulate`.
#[pyclass(frozen, module = "rtbox._rtbox")]
pub struct SimReport {
    pub inner: rtbox_sim::SimReport,
}

#[pymethods]
impl SimReport {
    #[getter]
    fn model(&self) -> &'static str {
        self.inner.model.name()
    }

    #[getter]
    fn duration_ns(&self) -> u64 {
        self.inner.duration
    }

    #[getter]
    fn seed(&self) -> u64 {
        self.inner.seed
    }

    /// Deadline misses of all tasks.
    fn total_misses(&self) -> u64 {
        self.inner.total_misses()
    }

    /// The report as `rtbox sim --json` prints it.
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.inner).map_err(|e| SimulationError::new_err(e.to_string()))
    }

    /// The text table `rtbox sim` prints.
    fn summary(&self) -> String {
        output::summary_table(&self.inner)
    }

    /// The Chrome trace-event JSON (Perfetto, chrome://tracing) of `rtbox sim --trace`.
    fn chrome_trace(&self) -> PyResult<String> {
        serde_json::to_string(&output::chrome_trace(&self.inner))
            .map_err(|e| SimulationError::new_err(e.to_string()))
    }

    /// The SVG Gantt chart of `rtbox sim --gantt`.
    fn gantt_svg(&self) -> String {
        output::gantt_svg(&self.inner)
    }

    /// One row per task: counts, misses, response-time summary, executed time.
    fn tasks(&self) -> PyResult<ArrowBatch> {
        let t = &self.inner.tasks;
        Columns::default()
            .str("task", t.iter().map(|t| t.name.as_str()))
            .opt_str("box", t.iter().map(|t| t.box_name.as_deref()))
            .opt_u32("priority", t.iter().map(|t| t.priority))
            .u32("level", t.iter().map(|t| t.level))
            .u64("released", t.iter().map(|t| t.released))
            .u64("jobs", t.iter().map(|t| t.jobs))
            .u64("misses", t.iter().map(|t| t.misses))
            .u64("response_min_ns", t.iter().map(|t| t.response.min))
            .u64("response_mean_ns", t.iter().map(|t| t.response.mean))
            .u64("response_p50_ns", t.iter().map(|t| t.response.p50))
            .u64("response_p90_ns", t.iter().map(|t| t.response.p90))
            .u64("response_p99_ns", t.iter().map(|t| t.response.p99))
            .u64("response_max_ns", t.iter().map(|t| t.response.max))
            .u64("executed_ns", t.iter().map(|t| t.executed))
            .finish()
    }

    /// One row per server (box and CPU): budget, period, consumed time, throttles, members
    /// moved onto it.
    fn servers(&self) -> PyResult<ArrowBatch> {
        let s = &self.inner.servers;
        Columns::default()
            .str("server", s.iter().map(|s| s.name.as_str()))
            .opt_str("box", s.iter().map(|s| s.box_name.as_deref()))
            .u32("cpu", s.iter().map(|s| s.cpu))
            .u64("budget_ns", s.iter().map(|s| s.budget))
            .u64("period_ns", s.iter().map(|s| s.period))
            .u64("consumed_ns", s.iter().map(|s| s.consumed))
            .u64("throttles", s.iter().map(|s| s.throttles))
            .u64("migrations", s.iter().map(|s| s.migrations))
            .finish()
    }

    /// One row per CPU: busy time, utilization, preemptions, migrations.
    fn cpus(&self) -> PyResult<ArrowBatch> {
        let c = &self.inner.cpus;
        Columns::default()
            .u32("cpu", c.iter().map(|c| c.cpu))
            .u64("busy_ns", c.iter().map(|c| c.busy))
            .f64("utilization", c.iter().map(|c| c.utilization))
            .u64("preemptions", c.iter().map(|c| c.preemptions))
            .u64("migrations", c.iter().map(|c| c.migrations))
            .finish()
    }

    /// One row per job (empty unless the simulation recorded jobs).
    fn jobs(&self) -> PyResult<ArrowBatch> {
        let j: &[rtbox_sim::JobRecord] = self.inner.jobs.as_deref().unwrap_or(&[]);
        Columns::default()
            .str("task", j.iter().map(|j| j.task.as_str()))
            .u64("seq", j.iter().map(|j| j.seq))
            .u64("arrival_ns", j.iter().map(|j| j.arrival))
            .u64("release_ns", j.iter().map(|j| j.release))
            .u64("deadline_ns", j.iter().map(|j| j.deadline))
            .u64("exec_ns", j.iter().map(|j| j.exec))
            .opt_u64("finish_ns", j.iter().map(|j| j.finish))
            .opt_u64(
                "response_ns",
                j.iter().map(|j| j.finish.map(|f| f - j.release)),
            )
            .bool("missed", j.iter().map(|j| j.missed))
            .finish()
    }

    /// Execution segments of the traced window (empty unless the simulation recorded a trace).
    fn segments(&self) -> PyResult<ArrowBatch> {
        let s: &[rtbox_sim::Segment] = self.inner.trace.as_ref().map_or(&[], |t| &t.segments);
        Columns::default()
            .u32("cpu", s.iter().map(|s| s.cpu))
            .u64("start_ns", s.iter().map(|s| s.start))
            .u64("end_ns", s.iter().map(|s| s.end))
            .str("task", s.iter().map(|s| s.task.as_str()))
            .opt_str("server", s.iter().map(|s| s.server.as_deref()))
            .finish()
    }

    /// Throttled intervals of servers in the traced window.
    fn throttles(&self) -> PyResult<ArrowBatch> {
        let t: &[rtbox_sim::Throttle] = self.inner.trace.as_ref().map_or(&[], |t| &t.throttles);
        Columns::default()
            .str("server", t.iter().map(|t| t.server.as_str()))
            .u32("cpu", t.iter().map(|t| t.cpu))
            .u64("start_ns", t.iter().map(|t| t.start))
            .u64("end_ns", t.iter().map(|t| t.end))
            .finish()
    }

    /// Deadline misses in the traced window: (task, time).
    fn trace_misses(&self) -> Vec<(String, u64)> {
        self.inner
            .trace
            .as_ref()
            .map_or_else(Vec::new, |t| t.misses.clone())
    }

    /// End of the traced window.
    #[getter]
    fn trace_until_ns(&self) -> Option<u64> {
        self.inner.trace.as_ref().map(|t| t.until)
    }
}
