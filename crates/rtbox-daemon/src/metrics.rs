//! Prometheus text exposition of the per-server figures.

use std::fmt::Write;

use crate::loopcost::LoopUsage;
use crate::runtime::ServerRow;

/// Name, type, help text and value of one metric family.
type Family = (
    &'static str,
    &'static str,
    &'static str,
    fn(&ServerRow) -> f64,
);

/// Render the rows in the Prometheus text format (version 0.0.4).
pub fn render(rows: &[ServerRow]) -> String {
    let mut out = String::new();
    let metrics: [Family; 7] = [
        (
            "rtbox_server_budget_seconds",
            "gauge",
            "Budget Q per period",
            |r| r.budget as f64 / 1e9,
        ),
        ("rtbox_server_period_seconds", "gauge", "Period P", |r| {
            r.period as f64 / 1e9
        }),
        (
            "rtbox_server_budget_left_seconds",
            "gauge",
            "Budget left in the current period (negative: overrun)",
            |r| r.runtime as f64 / 1e9,
        ),
        (
            "rtbox_server_consumed_seconds_total",
            "counter",
            "CPU time consumed by the server's members",
            |r| r.consumed as f64 / 1e9,
        ),
        (
            "rtbox_server_throttles_total",
            "counter",
            "Times the server exhausted its budget",
            |r| r.throttles as f64,
        ),
        (
            "rtbox_server_max_overrun_seconds",
            "gauge",
            "Worst consumption beyond Q in one period",
            |r| r.max_overrun as f64 / 1e9,
        ),
        (
            "rtbox_server_members",
            "gauge",
            "Threads currently on this vCPU",
            |r| r.members.len() as f64,
        ),
    ];
    for (name, kind, help, f) in metrics {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for r in rows {
            let _ = writeln!(
                out,
                "{name}{{box=\"{}\",cpu=\"{}\"}} {}",
                r.box_name.replace('\\', "\\\\").replace('"', "\\\""),
                r.cpu,
                f(r)
            );
        }
    }
    out
}

/// The enforcement loop's own CPU use (docs/runtime.md, "Admission of the loop's own time"):
/// compare `rtbox_loop_cpu_seconds_total / rtbox_loop_steps_total` with
/// `rtbox_loop_admitted_step_seconds`.
/// The sensor the loop uses (`bpf` or `perf`), as an info-style gauge.
pub fn render_sensor(sensor: &str) -> String {
    format!(
        "# HELP rtbox_sensor_info The sensor of the enforcement loop (bpf: scheduler tracepoints, event-driven; perf: perf clocks and polling)\n# TYPE rtbox_sensor_info gauge\nrtbox_sensor_info{{sensor=\"{sensor}\"}} 1\n"
    )
}

pub fn render_loop(u: &LoopUsage, admitted_step: u64) -> String {
    let mut out = String::new();
    let mut one = |name: &str, kind: &str, help: &str, v: f64| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        let _ = writeln!(out, "{name} {v}");
    };
    one(
        "rtbox_loop_cpu_seconds_total",
        "counter",
        "CPU time of the enforcement loop thread",
        u.cpu_ns as f64 / 1e9,
    );
    one(
        "rtbox_loop_steps_total",
        "counter",
        "Steps of the enforcement loop",
        u.steps as f64,
    );
    one(
        "rtbox_loop_admitted_step_seconds",
        "gauge",
        "CPU time per loop step that admission assumes (--loop-step-us)",
        admitted_step as f64 / 1e9,
    );
    if let Some(s) = u.window_step_ns {
        one(
            "rtbox_loop_step_seconds",
            "gauge",
            "CPU time per loop step over the last complete 10 s window",
            s as f64 / 1e9,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_appears_in_every_metric() {
        let row = ServerRow {
            box_name: "a\"b".into(),
            cpu: 1,
            budget: 20_000_000,
            period: 100_000_000,
            runtime: -5000,
            consumed: 3_000_000_000,
            throttled: false,
            throttles: 30,
            max_overrun: 5000,
            members: vec![1, 2],
        };
        let text = render(&[row]);
        assert_eq!(text.matches("{box=\"a\\\"b\",cpu=\"1\"}").count(), 7);
        assert!(text.contains("rtbox_server_budget_seconds{box=\"a\\\"b\",cpu=\"1\"} 0.02"));
        assert!(text.contains("rtbox_server_throttles_total{box=\"a\\\"b\",cpu=\"1\"} 30"));
    }
}
