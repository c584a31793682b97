//! Admission, analysis and synthesis results as JSON: the one shape behind `rtbox check
//! --json`, `rtbox analyze --json` and the Python binding's result classes.
//!
//! The field names are the CLI's public contract. Times stay integer nanoseconds; bandwidths
//! become floats here and only here (the edge where fixed point meets readers), except BDM
//! alphas, which are given as their exact decimal text.

use rtbox_analysis::chain::{ChainMethod, ChainReport};
use rtbox_analysis::synth::Synthesis;
use rtbox_analysis::{BoxReport, SystemReport, TestKind};
use rtbox_model::{format_duration, format_ms, Admission, Interface, Role};
use serde_json::{json, Map, Value};

/// Root admission: per CPU its servers, their total, the daemon loop's share (`loop`) and the
/// cap; the shared boxes' expected shares; the refusals with their numbers.
pub fn admission(a: &Admission) -> Value {
    json!({
        "admitted": a.admitted(),
        "cpus": a.cpus.iter().map(|c| json!({
            "cpu": c.cpu,
            "total": c.total.as_f64(),
            "loop": c.loop_share.as_f64(),
            "host": c.host.as_f64(),
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

/// The boxes a report shows: box `only`, or else every box that has tasks (an empty box has
/// nothing to judge).
pub fn selected<'a>(report: &'a SystemReport, only: Option<&str>) -> Vec<&'a BoxReport> {
    report
        .boxes
        .iter()
        .filter(|b| only.is_none_or(|n| b.name == n))
        .filter(|b| only.is_some() || !b.tasks.is_empty())
        .collect()
}

/// No task in any shown box: a verdict would be vacuous.
pub fn nothing_to_analyse(report: &SystemReport, only: Option<&str>) -> bool {
    selected(report, only).iter().all(|b| b.tasks.is_empty())
}

/// Whether the shown boxes are schedulable: admitted, something to analyse, and every selected
/// box passes.
pub fn schedulable(report: &SystemReport, only: Option<&str>) -> bool {
    report.admission.admitted()
        && !nothing_to_analyse(report, only)
        && selected(report, only).iter().all(|b| b.schedulable())
}

/// `rtbox analyze`: the admission's fields (flattened into the top level), `schedulable` over
/// the [`selected`] boxes, each box's verdict, and the tasks in no box (`background`).
pub fn analysis(report: &SystemReport, only: Option<&str>) -> Value {
    let mut v = admission(&report.admission);
    let o = v.as_object_mut().expect("admission is an object");
    o.insert("schedulable".into(), json!(schedulable(report, only)));
    o.insert(
        "nothing_to_analyse".into(),
        json!(nothing_to_analyse(report, only)),
    );
    o.insert(
        "boxes".into(),
        Value::Array(selected(report, only).into_iter().map(box_report).collect()),
    );
    o.insert("background".into(), json!(report.background));
    v
}

/// A box's supply in words; a shared box has none reserved.
pub fn supply_text(b: &BoxReport) -> String {
    b.reservation.as_ref().map_or_else(
        || "no reserved supply (shared)".to_string(),
        |r| r.describe(),
    )
}

/// A chain's stages joined by arrows, e.g. `jackd -> client1 -> client2`.
pub fn chain_stages(b: &BoxReport, c: &ChainReport) -> String {
    c.stages
        .iter()
        .map(|&i| b.task_names[i].as_str())
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// How a chain's end-to-end bound was obtained, with its numbers.
pub fn chain_method(c: &ChainReport) -> String {
    match c.method {
        ChainMethod::ServerActivation {
            server,
            work,
            periods,
        } => format!(
            "one server, fresh activation: W = {} in {periods} period(s) of Q = {} / P = {}",
            format_ms(work),
            format_ms(server.budget),
            format_ms(server.period)
        ),
        ChainMethod::Holistic { iterations } => {
            format!("holistic: jitter = predecessor's bound, fixed point in {iterations} round(s)")
        }
    }
}

/// One chain as JSON (`rtbox analyze --json`, per box `chains`).
pub fn chain_report(b: &BoxReport, c: &ChainReport) -> Value {
    json!({
        "stages": c.stages.iter().map(|&i| &b.task_names[i]).collect::<Vec<_>>(),
        "end_to_end_bound_ns": c.bound,
        "deadline_ns": c.deadline,
        "schedulable": c.schedulable,
        "method": chain_method(c),
    })
}

fn ms(w: u128) -> String {
    format_ms(u64::try_from(w).unwrap_or(u64::MAX))
}

/// The condition task `i`'s verdict rests on, with its numbers (the CLI's table column and
/// the JSON `condition` field).
pub fn condition(b: &BoxReport, i: usize) -> String {
    let t = &b.verdict.tasks[i];
    if let Some(v) = t.vcpu {
        let cpu = b
            .vcpu_cpus
            .get(v)
            .map_or(String::new(), |c| format!(" (CPU {c})"));
        let why = match (t.exceeds, t.check) {
            _ if t.schedulable => String::new(),
            (Some(r), _) => format!(": response >= {} > D", format_ms(r)),
            (None, Some(c)) => format!(
                ": dbf({}) = {} > sbf = {}",
                format_duration(c.window),
                ms(c.demand),
                ms(c.supply)
            ),
            (None, None) => ": utilization not below the server rate".into(),
        };
        return format!("on vCPU {v}{cpu}{why}");
    }
    match (b.verdict.test, t.check) {
        (TestKind::NoGuarantee, _) => "no guaranteed supply or no real-time policy".into(),
        (TestKind::ChainServerActivation, _) => match t.response {
            Some(r) => format!(
                "end-to-end {} {} D = {}",
                format_ms(r),
                if t.schedulable { "<=" } else { ">" },
                format_ms(b.tasks[i].deadline)
            ),
            None => "no bound".into(),
        },
        (TestKind::PartitionedEdf | TestKind::PartitionedFp, None) => "no vCPU accepts it".into(),
        (test, Some(c)) => {
            let rel = if c.holds() { "<=" } else { ">" };
            // Its own inequality holds, but its interference bound assumed others pass.
            let void = match test {
                _ if t.schedulable || !c.holds() => "",
                TestKind::GlobalEdf | TestKind::GlobalEdfCarryIn => "; void: another task fails",
                _ => "; void: a task of higher or equal priority fails",
            };
            let text = match c.k {
                Some(k) => format!(
                    "k={k}: kC+W = {} {rel} Y_{k}({}) = {}",
                    ms(c.demand),
                    format_duration(c.window),
                    ms(c.supply)
                ),
                None => format!(
                    "demand {} {rel} sbf({}) = {}",
                    ms(c.demand),
                    format_duration(c.window),
                    ms(c.supply)
                ),
            };
            format!("{text}{void}")
        }
        (_, None) => "WCET or jitter exceeds the deadline".into(),
    }
}

/// One box: supply, test, verdict, the CPU of each vCPU, and per task its verdict, bound and
/// the inequality it rests on.
pub fn box_report(b: &BoxReport) -> Value {
    json!({
        "box": b.name,
        "supply": supply_text(b),
        "test": b.verdict.test.describe(),
        "heuristic": b.verdict.heuristic,
        "schedulable": b.schedulable(),
        "vcpu_cpus": b.vcpu_cpus,
        "chains": b.chains.iter().map(|c| chain_report(b, c)).collect::<Vec<_>>(),
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
                "cpu": o.vcpu.and_then(|v| b.vcpu_cpus.get(v)),
                "check": o.check.map(|c| json!({
                    "window_ns": c.window,
                    "demand_ns": u64::try_from(c.demand).unwrap_or(u64::MAX),
                    "supply_ns": u64::try_from(c.supply).unwrap_or(u64::MAX),
                    "k": c.k,
                    "holds": c.holds(),
                })),
                "condition": condition(b, i),
            })
        }).collect::<Vec<_>>(),
    })
}

/// `rtbox analyze --synthesize`, one box: the smallest interface found (`interface`, by
/// `kind`) and its ready-to-paste `[[box]]` entry (`toml`).
pub fn synthesis(s: &Synthesis) -> Value {
    let interface = match &s.interface {
        Interface::Bdm { alpha, delta } => json!({
            "kind": "bdm", "alpha": alpha.to_string(), "delta_ns": delta,
            "server": s.server.map(|(q, p)| json!({ "budget_ns": q, "period_ns": p })),
            "table": s.table.iter()
                .map(|(d, a)| json!({ "delta_ns": d, "alpha": a.map(|a| a.to_string()) }))
                .collect::<Vec<_>>(),
        }),
        Interface::Mpr { theta, pi, m } => {
            json!({ "kind": "mpr", "theta_ns": theta, "pi_ns": pi, "m": m })
        }
        Interface::PerCpu { budget, period } => {
            json!({ "kind": "server", "budget_ns": budget, "period_ns": period })
        }
        // Synthesis produces only the three kinds above.
        _ => Value::Null,
    };
    let mut v = Map::new();
    v.insert("box".into(), json!(s.box_name));
    v.insert("interface".into(), interface);
    v.insert("toml".into(), json!(s.toml));
    Value::Object(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtbox_analysis::analyze;
    use rtbox_analysis::synth::{synthesize_box, Request};

    fn example(name: &str) -> rtbox_model::System {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/");
        rtbox_config::load_file(format!("{path}{name}")).expect("example loads")
    }

    fn keys(v: &Value) -> Vec<&str> {
        let mut k: Vec<&str> = v
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        k.sort_unstable();
        k
    }

    #[test]
    fn admission_names_the_loop_share_loop_and_keeps_integer_times() {
        let system = example("bdm-validation.toml");
        let a = rtbox_model::admit_with_loop(&system, rtbox_model::LoopCost::DEFAULT);
        let v = admission(&a);
        assert_eq!(keys(&v), ["admitted", "cpus", "refusals", "shared"]);
        let cpu = &v["cpus"][0];
        assert_eq!(
            keys(cpu),
            ["cap", "cpu", "host", "loop", "servers", "total"]
        );
        assert!(cpu["loop"].as_f64().unwrap() > 0.0, "{cpu}");
        let server = &cpu["servers"][0];
        assert_eq!(
            keys(server),
            ["bandwidth", "box", "budget_ns", "cpu", "period_ns", "role"]
        );
        assert!(server["budget_ns"].is_u64() && server["period_ns"].is_u64());
        assert_eq!(v["admitted"], a.admitted());
    }

    #[test]
    fn analysis_flattens_admission_and_lists_only_boxes_with_tasks() {
        let system = example("bdm-validation.toml");
        let report = analyze(&system);
        let v = analysis(&report, None);
        assert_eq!(
            keys(&v),
            [
                "admitted",
                "background",
                "boxes",
                "cpus",
                "nothing_to_analyse",
                "refusals",
                "schedulable",
                "shared"
            ]
        );
        assert_eq!(v["schedulable"], true);
        assert_eq!(v["nothing_to_analyse"], false);
        assert_eq!(v["background"], json!(["bg6", "bg7", "bg8"]));
        let names: Vec<&str> = v["boxes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["box"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Y1", "Y2"]);
        let task = &v["boxes"][0]["tasks"][0];
        assert_eq!(
            keys(task),
            [
                "check",
                "condition",
                "cpu",
                "deadline_ns",
                "period_ns",
                "priority",
                "response_bound_ns",
                "response_exceeds_ns",
                "schedulable",
                "task",
                "vcpu",
                "wcet_ns"
            ]
        );
        assert_eq!(task["task"], "tau1");
        assert!(
            task["response_bound_ns"].as_u64().unwrap() <= task["deadline_ns"].as_u64().unwrap()
        );
        assert!(!task["condition"].as_str().unwrap().is_empty());
        let only = analysis(&report, Some("Y2"));
        assert_eq!(only["boxes"].as_array().unwrap().len(), 1);
        assert_eq!(only["boxes"][0]["box"], "Y2");
    }

    #[test]
    fn bdm_synthesis_gives_alpha_as_exact_text_and_the_server() {
        let system = example("bdm-validation.toml");
        let s = synthesize_box(&system, "Y1", Request::Bdm { delta: 20_000_000 }).unwrap();
        let v = synthesis(&s);
        assert_eq!(keys(&v), ["box", "interface", "toml"]);
        let i = &v["interface"];
        assert_eq!(i["kind"], "bdm");
        assert_eq!(i["alpha"], "0.68");
        assert_eq!(i["delta_ns"], 20_000_000);
        assert!(i["server"]["budget_ns"].as_u64().unwrap() > 0);
        assert!(i["table"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["delta_ns"].is_u64()));
    }
}
