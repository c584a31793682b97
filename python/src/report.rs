//! Library results as JSON values for the Python side's result classes (`rtbox/results.py`).
//! Field names follow the CLI's `--json` output; times are integer nanoseconds, bandwidths
//! floats (the edge where fixed point becomes float).

use rtbox_analysis::synth::Synthesis;
use rtbox_analysis::{BoxReport, SystemReport};
use rtbox_model::{Admission, Interface, Role};
use serde_json::{json, Value};

pub fn admission(a: &Admission) -> Value {
    json!({
        "admitted": a.admitted(),
        "cpus": a.cpus.iter().map(|c| json!({
            "cpu": c.cpu,
            "total": c.total.as_f64(),
            "loop_share": c.loop_share.as_f64(),
            "cap": c.cap.as_f64(),
            "servers": c.servers.iter().map(|s| json!({
                "box": s.box_name,
                "cpu": s.cpu,
                "budget_ns": s.budget,
                "period_ns": s.period,
                "bandwidth": s.bandwidth.as_f64(),
                "role": match s.role { Role::Whole => "whole", Role::Remainder => "remainder" },
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "shared": a.shared.iter().map(|s| json!({
            "box": s.box_name, "cpu": s.cpu, "weight": s.weight, "share": s.share.as_f64(),
        })).collect::<Vec<_>>(),
        "refusals": a.refusals.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
    })
}

fn box_report(b: &BoxReport) -> Value {
    json!({
        "box": b.name,
        "supply": b.reservation.as_ref().map(|r| r.describe()),
        "test": b.verdict.test.describe(),
        "heuristic": b.verdict.heuristic,
        "schedulable": b.schedulable(),
        "vcpu_cpus": b.vcpu_cpus,
        "tasks": b.tasks.iter().enumerate().map(|(i, t)| {
            let o = &b.verdict.tasks[i];
            json!({
                "task": b.task_names[i],
                "wcet_ns": t.wcet, "deadline_ns": t.deadline, "period_ns": t.period,
                "priority": b.priorities[i],
                "schedulable": o.schedulable,
                "response_bound_ns": o.response,
                "response_exceeds_ns": o.exceeds,
                "vcpu": o.vcpu,
                "check": o.check.map(|c| json!({
                    "window_ns": c.window,
                    "demand_ns": u64::try_from(c.demand).unwrap_or(u64::MAX),
                    "supply_ns": u64::try_from(c.supply).unwrap_or(u64::MAX),
                    "k": c.k,
                    "holds": c.holds(),
                })),
            })
        }).collect::<Vec<_>>(),
    })
}

pub fn analysis(r: &SystemReport) -> Value {
    json!({
        "schedulable": r.schedulable(),
        "admission": admission(&r.admission),
        "boxes": r.boxes.iter().map(box_report).collect::<Vec<_>>(),
        "background": r.background,
    })
}

pub fn synthesis(s: &Synthesis) -> Value {
    let mut v = match &s.interface {
        Interface::Bdm { alpha, delta } => json!({
            "kind": "bdm", "alpha": alpha.as_f64(), "alpha_text": alpha.to_string(),
            "delta_ns": delta,
            "table": s.table.iter().map(|(d, a)| json!([d, a.map(|a| a.as_f64())])).collect::<Vec<_>>(),
        }),
        Interface::Mpr { theta, pi, m } => {
            json!({ "kind": "mpr", "theta_ns": theta, "pi_ns": pi, "m": m })
        }
        Interface::PerCpu { budget, period } => {
            json!({ "kind": "server", "budget_ns": budget, "period_ns": period })
        }
        _ => json!({ "kind": "other" }),
    };
    v["box"] = json!(s.box_name);
    v["server"] = json!(s
        .server
        .map(|(q, p)| json!({ "budget_ns": q, "period_ns": p })));
    v["toml"] = json!(s.toml);
    v
}
