//! `rtbox analyze FILE [--box NAME] [--synthesize bdm|mpr|server --delta D|--period P] [--json]`:
//! per box the supply, the test and its verdict; per task the verdict with its response-time
//! bound or the inequality that failed. With `--synthesize`, the smallest interface of the
//! requested kind and a ready-to-paste `[[box]]` entry.

use std::path::PathBuf;
use std::process::ExitCode;

use rtbox_analysis::synth::{synthesize_box, Request, SynthError, Synthesis};
use rtbox_analysis::{analyze, BoxReport, SystemReport, TestKind};
use rtbox_model::{format_duration, format_ms, parse_duration, Interface, Nanos, System};
use serde_json::json;

use crate::table::{Align, Table};

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    Bdm,
    Mpr,
    Server,
}

#[derive(clap::Args)]
pub struct Args {
    /// Configuration file (TOML).
    pub file: PathBuf,
    /// Analyse (or synthesize for) this box only.
    #[arg(long = "box", value_name = "NAME")]
    pub box_name: Option<String>,
    /// Find the smallest interface of this kind for the box's tasks.
    #[arg(long, value_enum)]
    pub synthesize: Option<Kind>,
    /// BDM delay Delta for --synthesize bdm (e.g. 20ms).
    #[arg(long, value_parser = duration)]
    pub delta: Option<Nanos>,
    /// Period for --synthesize mpr (Pi) or server (P), e.g. 10ms.
    #[arg(long, value_parser = duration)]
    pub period: Option<Nanos>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

fn duration(s: &str) -> Result<Nanos, String> {
    match parse_duration(s) {
        Ok(0) => Err("must be positive".into()),
        Ok(v) => Ok(v),
        Err(e) => Err(e.to_string()),
    }
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("rtbox analyze: {msg}");
    ExitCode::from(2)
}

pub fn run(args: Args) -> ExitCode {
    let system = match rtbox_config::load_file(&args.file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rtbox analyze: {}: {e}", args.file.display());
            return ExitCode::from(2);
        }
    };
    if let Some(b) = &args.box_name {
        if system.get(b).is_none() {
            return usage(&format!(
                "--box: box \"{b}\" is not in {}",
                args.file.display()
            ));
        }
    }
    match args.synthesize {
        None => {
            if args.delta.is_some() || args.period.is_some() {
                return usage("--delta and --period need --synthesize");
            }
            run_analysis(&system, &args)
        }
        Some(kind) => {
            let request = match (kind, args.delta, args.period) {
                (Kind::Bdm, Some(delta), None) => Request::Bdm { delta },
                (Kind::Mpr, None, Some(pi)) => Request::Mpr { pi },
                (Kind::Server, None, Some(period)) => Request::Server { period },
                (Kind::Bdm, _, _) => {
                    return usage("--synthesize bdm needs --delta D (and no --period)")
                }
                (_, _, _) => {
                    return usage("--synthesize mpr|server needs --period P (and no --delta)")
                }
            };
            run_synthesis(&system, &args, request)
        }
    }
}

fn selected<'a>(report: &'a SystemReport, only: Option<&str>) -> Vec<&'a BoxReport> {
    report
        .boxes
        .iter()
        .filter(|b| only.is_none_or(|n| b.name == n))
        .filter(|b| only.is_some() || !b.tasks.is_empty())
        .collect()
}

fn run_analysis(system: &System, args: &Args) -> ExitCode {
    let report = analyze(system);
    let boxes = selected(&report, args.box_name.as_deref());
    let ok = report.admission.admitted() && boxes.iter().all(|b| b.schedulable());
    if args.json {
        let v = json!({
            "schedulable": ok,
            "admitted": report.admission.admitted(),
            "refusals": report.admission.refusals.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
            "boxes": boxes.iter().map(|b| box_json(b)).collect::<Vec<_>>(),
            "background": report.background,
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        let mut out = String::new();
        if report.admission.admitted() {
            out.push_str("admission: admitted\n");
        } else {
            out.push_str("admission: refused\n");
            for r in &report.admission.refusals {
                out.push_str(&format!("  {r}\n"));
            }
        }
        for b in &boxes {
            out.push_str(&render_box(b));
        }
        if args.box_name.is_none() && !report.background.is_empty() {
            out.push_str(&format!(
                "background tasks (no reservation, not analysed): {}\n",
                report.background.join(", ")
            ));
        }
        out.push_str(if ok {
            "schedulable\n"
        } else {
            "NOT schedulable\n"
        });
        print!("{out}");
    }
    ExitCode::from(if ok { 0 } else { 1 })
}

fn supply_text(b: &BoxReport) -> String {
    b.reservation.as_ref().map_or_else(
        || "no reserved supply (shared)".to_string(),
        |r| r.describe(),
    )
}

fn ms(w: u128) -> String {
    format_ms(u64::try_from(w).unwrap_or(u64::MAX))
}

/// The condition a task's verdict rests on, with its numbers.
fn condition(b: &BoxReport, i: usize) -> String {
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
        (TestKind::PartitionedEdf | TestKind::PartitionedFp, None) => "no vCPU accepts it".into(),
        (test, Some(c)) => {
            let rel = if c.holds() { "<=" } else { ">" };
            // Its own inequality holds, but its interference bound assumed others pass.
            let void = match test {
                _ if t.schedulable || !c.holds() => "",
                TestKind::GlobalEdf => "; void: another task fails",
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

fn render_box(b: &BoxReport) -> String {
    let verdict = if b.schedulable() {
        "schedulable"
    } else {
        "NOT schedulable"
    };
    let mut out = format!("box {}: {}\n", b.name, supply_text(b));
    let heuristic = b
        .verdict
        .heuristic
        .map_or(String::new(), |h| format!(" ({h})"));
    out.push_str(&format!(
        "  test: {}{heuristic}: {verdict}\n",
        b.verdict.test.describe()
    ));
    if b.tasks.is_empty() {
        out.push_str("  no tasks\n");
        return out;
    }
    let mut t = Table::new(
        &[
            "task",
            "C",
            "D",
            "T",
            "prio",
            "verdict",
            "bound",
            "condition",
        ],
        &[
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Left,
            Align::Right,
            Align::Left,
        ],
    );
    for (i, task) in b.tasks.iter().enumerate() {
        let o = &b.verdict.tasks[i];
        t.row(vec![
            b.task_names[i].clone(),
            format_ms(task.wcet),
            format_ms(task.deadline),
            format_ms(task.period),
            b.priorities[i].map_or("DM".into(), |p| p.to_string()),
            if o.schedulable { "ok" } else { "FAIL" }.into(),
            o.response
                .map_or("-".into(), |r| format!("R <= {}", format_ms(r))),
            condition(b, i),
        ]);
    }
    out.push_str(&t.render(2));
    out
}

fn box_json(b: &BoxReport) -> serde_json::Value {
    json!({
        "box": b.name,
        "supply": supply_text(b),
        "test": b.verdict.test.describe(),
        "heuristic": b.verdict.heuristic,
        "schedulable": b.schedulable(),
        "tasks": b.tasks.iter().enumerate().map(|(i, t)| {
            let o = &b.verdict.tasks[i];
            json!({
                "task": b.task_names[i],
                "wcet_ns": t.wcet, "deadline_ns": t.deadline, "period_ns": t.period,
                "priority": b.priorities[i],
                "schedulable": o.schedulable,
                "response_bound_ns": o.response,
                "vcpu": o.vcpu,
                "response_exceeds_ns": o.exceeds,
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

fn run_synthesis(system: &System, args: &Args, request: Request) -> ExitCode {
    let names: Vec<String> = match &args.box_name {
        Some(n) => vec![n.clone()],
        None => system
            .boxes()
            .iter()
            .filter(|b| system.tasks_of(b.name()).next().is_some())
            .map(|b| b.name().to_string())
            .collect(),
    };
    if names.is_empty() {
        return usage("no box has tasks to size an interface for");
    }
    let results: Vec<(String, Result<Synthesis, SynthError>)> = names
        .iter()
        .map(|n| (n.clone(), synthesize_box(system, n, request)))
        .collect();
    let ok = results.iter().all(|(_, r)| r.is_ok());
    if args.json {
        let v = json!({
            "found": ok,
            "boxes": results.iter().map(|(n, r)| match r {
                Ok(s) => synthesis_json(s),
                Err(e) => json!({ "box": n, "error": e.to_string() }),
            }).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        for (n, r) in &results {
            match r {
                Ok(s) => print!("{}", render_synthesis(s)),
                Err(e) => println!("box {n}: {e}"),
            }
        }
    }
    let invalid = results.iter().any(|(_, r)| {
        matches!(
            r,
            Err(SynthError::NoTasks | SynthError::BadParameter(_) | SynthError::UnknownBox(_))
        )
    });
    ExitCode::from(if invalid {
        2
    } else if ok {
        0
    } else {
        1
    })
}

fn render_synthesis(s: &Synthesis) -> String {
    let mut out = String::new();
    match &s.interface {
        Interface::Bdm { alpha, delta } => {
            out.push_str(&format!(
                "box {}: minimal BDM interface for Delta = {}: alpha = {} ({})\n",
                s.box_name,
                format_duration(*delta),
                alpha,
                alpha.format(4)
            ));
            if let Some((q, p)) = s.server {
                out.push_str(&format!(
                    "  per vCPU: hard CBS Q = {}, P = {}\n",
                    format_ms(q),
                    format_ms(p)
                ));
            }
            if !s.table.is_empty() {
                out.push_str("  trade-off (Delta -> minimal alpha):\n");
                let mut t = Table::new(&["Delta", "alpha"], &[Align::Right, Align::Right]);
                for (d, a) in &s.table {
                    t.row(vec![
                        format_ms(*d),
                        a.map_or("infeasible".into(), |a| a.format(4)),
                    ]);
                }
                out.push_str(&t.render(4));
            }
        }
        Interface::Mpr { theta, pi, m } => out.push_str(&format!(
            "box {}: minimal MPR interface for Pi = {}: m = {m}, Theta = {}\n",
            s.box_name,
            format_duration(*pi),
            format_ms(*theta)
        )),
        Interface::PerCpu { budget, period } => out.push_str(&format!(
            "box {}: minimal per-CPU server for P = {}: Q = {}\n",
            s.box_name,
            format_duration(*period),
            format_ms(*budget)
        )),
        _ => {}
    }
    out.push_str("  configuration entry:\n");
    out.push_str(&s.toml);
    out
}

fn synthesis_json(s: &Synthesis) -> serde_json::Value {
    let iface = match &s.interface {
        Interface::Bdm { alpha, delta } => json!({
            "kind": "bdm", "alpha": alpha.to_string(), "delta_ns": delta,
            "server": s.server.map(|(q, p)| json!({ "budget_ns": q, "period_ns": p })),
            "table": s.table.iter().map(|(d, a)| json!({ "delta_ns": d, "alpha": a.map(|a| a.to_string()) })).collect::<Vec<_>>(),
        }),
        Interface::Mpr { theta, pi, m } => {
            json!({ "kind": "mpr", "theta_ns": theta, "pi_ns": pi, "m": m })
        }
        Interface::PerCpu { budget, period } => {
            json!({ "kind": "server", "budget_ns": budget, "period_ns": period })
        }
        _ => json!(null),
    };
    json!({ "box": s.box_name, "interface": iface, "toml": s.toml })
}
