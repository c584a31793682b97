//! Prometheus text exposition of the per-server figures.

use std::fmt::Write;

use crate::loopcost::LoopUsage;
use crate::runtime::jobs::TaskRow;
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
    let metrics: [Family; 8] = [
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
            "rtbox_server_migrations_total",
            "counter",
            "Members that came onto this vCPU from another vCPU of their box",
            |r| r.migrations as f64,
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

/// The sensor the loop uses (`bpf` or `perf`), as an info-style gauge.
pub fn render_sensor(sensor: &str) -> String {
    format!(
        "# HELP rtbox_sensor_info The sensor of the enforcement loop (bpf: scheduler tracepoints, event-driven; perf: perf clocks and polling)\n# TYPE rtbox_sensor_info gauge\nrtbox_sensor_info{{sensor=\"{sensor}\"}} 1\n"
    )
}

/// The CPU latency limit the daemon holds (`--cpu-latency-us`), -1 when it holds none.
pub fn render_cpu_latency(held_us: Option<u32>) -> String {
    format!(
        "# HELP rtbox_cpu_latency_limit_seconds The CPU wake-up latency limit the daemon holds while it has boxes (the kernel's CPU latency QoS); -1: none held\n# TYPE rtbox_cpu_latency_limit_seconds gauge\nrtbox_cpu_latency_limit_seconds {}\n",
        held_us.map_or(-1.0, |us| us as f64 / 1e6)
    )
}

/// The enforcement loop's own CPU use (docs/runtime.md, "Admission of the loop's own time"):
/// compare `rtbox_loop_cpu_seconds_total / rtbox_loop_steps_total` with
/// `rtbox_loop_admitted_step_seconds`.
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
        "rtbox_loop_short_steps_total",
        "counter",
        "Steps of the enforcement loop that made a replenishment planned ahead",
        u.short_steps as f64,
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

/// Name, type, help text and value of one per-task metric family.
type TaskFamily = (
    &'static str,
    &'static str,
    &'static str,
    fn(&TaskRow) -> Option<f64>,
);

/// The periodic tasks' jobs (`runtime/jobs.rs`), labelled by box, pid and tid; percentiles
/// are over the task's last jobs (absent until it completed one).
pub fn render_tasks(rows: &[TaskRow]) -> String {
    let mut out = String::new();
    let families: [TaskFamily; 8] = [
        (
            "rtbox_task_jobs_released_total",
            "counter",
            "Jobs released",
            |r| Some(r.released as f64),
        ),
        (
            "rtbox_task_jobs_completed_total",
            "counter",
            "Jobs completed",
            |r| Some(r.completed as f64),
        ),
        (
            "rtbox_task_deadline_misses_total",
            "counter",
            "Jobs completed after release + deadline",
            |r| Some(r.misses as f64),
        ),
        (
            "rtbox_task_wcet_overruns_total",
            "counter",
            "Jobs whose CPU time exceeded the declared WCET",
            |r| Some(r.overruns as f64),
        ),
        (
            "rtbox_task_response_max_seconds",
            "gauge",
            "Largest response time (completion - release)",
            |r| Some(r.max_response_ns as f64 / 1e9),
        ),
        (
            "rtbox_task_response_p99_seconds",
            "gauge",
            "99th percentile response time over the last jobs",
            |r| r.response_p99_ns.map(|v| v as f64 / 1e9),
        ),
        (
            "rtbox_task_release_latency_p99_seconds",
            "gauge",
            "99th percentile release latency (start - release) over the last jobs",
            |r| r.latency_p99_ns.map(|v| v as f64 / 1e9),
        ),
        (
            "rtbox_task_release_latency_max_seconds",
            "gauge",
            "Largest release latency (start - release)",
            |r| Some(r.latency_max_ns as f64 / 1e9),
        ),
    ];
    for (name, kind, help, f) in families {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for r in rows {
            if let Some(v) = f(r) {
                let _ = writeln!(
                    out,
                    "{name}{{box=\"{}\",pid=\"{}\",tid=\"{}\"}} {v}",
                    r.box_name.replace('\\', "\\\\").replace('"', "\\\""),
                    r.pid,
                    r.tid,
                );
            }
        }
    }
    out
}

/// The host's own real-time work (docs/runtime.md, "Coexistence with the host's real-time
/// work"): per CPU what admission counts, and every RT thread outside rtbox with its measured
/// CPU use. `over`: running boxes that no longer fit beside it.
pub fn render_host(r: &crate::hostwatch::HostReport, over: usize) -> String {
    let mut out = String::new();
    let mut family = |name: &str, help: &str, rows: Vec<(String, f64)>| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        for (labels, v) in rows {
            let _ = writeln!(out, "{name}{labels} {v}");
        }
    };
    let cpus: Vec<(u32, rtbox_model::HostCpu)> =
        r.load.cpus.iter().map(|(c, h)| (*c, h.clone())).collect();
    family(
        "rtbox_host_deadline_bandwidth",
        "CPU share unmanaged SCHED_DEADLINE tasks can take from this CPU (counted by admission)",
        cpus.iter()
            .map(|(c, h)| (format!("{{cpu=\"{c}\"}}"), h.deadline.as_f64()))
            .collect(),
    );
    family(
        "rtbox_host_deadline_kernel_bandwidth",
        "The kernel's own accounting of those tasks on this CPU (root domain total spread over its CPUs)",
        r.kernel_deadline
            .iter()
            .map(|(c, b)| (format!("{{cpu=\"{c}\"}}"), b.as_f64()))
            .collect(),
    );
    family(
        "rtbox_host_kernel_thread_bandwidth",
        "Measured peak CPU share of fixed-priority kernel threads above members (counted by admission)",
        cpus.iter()
            .map(|(c, h)| (format!("{{cpu=\"{c}\"}}"), h.kernel_threads.as_f64()))
            .collect(),
    );
    family(
        "rtbox_host_rt_thread_cpu",
        "Measured CPU share of each real-time thread outside rtbox over the last scan window",
        r.threads
            .iter()
            .filter_map(|t| {
                let comm = t.comm.replace('\\', "\\\\").replace('"', "\\\"");
                t.cpu_share.map(|s| {
                    (
                        format!(
                            "{{tid=\"{}\",comm=\"{comm}\",kind=\"{}\",policy=\"{}\",priority=\"{}\"}}",
                            t.tid, t.kind, t.policy, t.priority
                        ),
                        s,
                    )
                })
            })
            .collect(),
    );
    family(
        "rtbox_host_over_cap",
        "CPUs whose running boxes no longer fit beside the host's real-time work",
        vec![(String::new(), over as f64)],
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_appears_with_its_jobs() {
        let row = TaskRow {
            pid: 10,
            tid: 11,
            box_name: "rt".into(),
            state: "exited",
            wcet_ns: 2_000_000,
            period_ns: 10_000_000,
            deadline_ns: 10_000_000,
            priority: Some(50),
            released: 100,
            completed: 100,
            misses: 0,
            overruns: 2,
            max_response_ns: 2_500_000,
            max_exec_ns: 2_100_000,
            response_p50_ns: Some(2_000_000),
            response_p99_ns: Some(2_400_000),
            latency_p50_ns: None,
            latency_p99_ns: None,
            latency_max_ns: 70_000,
            samples: 100,
            unsampled: 0,
            plugin: None,
        };
        let text = render_tasks(&[row]);
        let label = "{box=\"rt\",pid=\"10\",tid=\"11\"}";
        assert!(text.contains(&format!("rtbox_task_jobs_completed_total{label} 100")));
        assert!(text.contains(&format!("rtbox_task_wcet_overruns_total{label} 2")));
        assert!(text.contains(&format!("rtbox_task_response_p99_seconds{label} 0.0024")));
        // No samples, no percentile line (but the family is declared).
        assert!(!text.contains(&format!("rtbox_task_release_latency_p99_seconds{label}")));
        assert!(text.contains("# TYPE rtbox_task_release_latency_p99_seconds gauge"));
    }

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
            migrations: 4,
            max_overrun: 5000,
            members: vec![1, 2],
        };
        let text = render(&[row]);
        assert_eq!(text.matches("{box=\"a\\\"b\",cpu=\"1\"}").count(), 8);
        assert!(text.contains("rtbox_server_budget_seconds{box=\"a\\\"b\",cpu=\"1\"} 0.02"));
        assert!(text.contains("rtbox_server_throttles_total{box=\"a\\\"b\",cpu=\"1\"} 30"));
        assert!(text.contains("rtbox_server_migrations_total{box=\"a\\\"b\",cpu=\"1\"} 4"));
    }
}
