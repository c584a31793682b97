//! `rtbox analyze FILE [--box NAME] [--synthesize bdm|mpr|server --delta D|--period P] [--json]`:
//! per box the supply, the test and its verdict; per task the verdict with its response-time
//! bound or the inequality that failed. With `--synthesize`, the smallest interface of the
//! requested kind and a ready-to-paste `[[box]]` entry. `--sbf BOX [--until T] [--csv]
//! [--svg FILE]`: the box's supply bound function beside its tasks' demand bound, as numbers
//! and as a plot.

use std::path::PathBuf;
use std::process::ExitCode;

use rtbox_analysis::curve::{default_until, supply_and_demand, CurvePoint};
use rtbox_analysis::synth::{synthesize_box, Request, SynthError, Synthesis};
use rtbox_analysis::{analyze, BoxReport};
use rtbox_experiment::{plot, report};
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
    /// Print this box's supply bound function and its tasks' demand bound as numbers.
    #[arg(long, value_name = "BOX")]
    pub sbf: Option<String>,
    /// With --sbf: the longest window (default: four times the longest period).
    #[arg(long, value_parser = duration, requires = "sbf")]
    pub until: Option<Nanos>,
    /// With --sbf: print CSV (t_ns,sbf_ns,dbf_ns) instead of a table.
    #[arg(long, requires = "sbf")]
    pub csv: bool,
    /// With --sbf: also write an SVG plot of both curves to this file.
    #[arg(long, value_name = "FILE", requires = "sbf")]
    pub svg: Option<PathBuf>,
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
    if let Some(b) = &args.sbf {
        if args.synthesize.is_some() || args.json {
            return usage("--sbf cannot be combined with --synthesize or --json");
        }
        return run_sbf(&system, b, &args);
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

fn run_analysis(system: &System, args: &Args) -> ExitCode {
    let analysis = analyze(system);
    let only = args.box_name.as_deref();
    let boxes = report::selected(&analysis, only);
    let ok = report::schedulable(&analysis, only);
    if args.json {
        let v = report::analysis(&analysis, only);
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        let mut out = String::new();
        if analysis.admission.admitted() {
            out.push_str("admission: admitted\n");
        } else {
            out.push_str("admission: refused\n");
            for r in &analysis.admission.refusals {
                out.push_str(&format!("  {r}\n"));
            }
        }
        for b in &boxes {
            out.push_str(&render_box(b));
        }
        if args.box_name.is_none() && !analysis.background.is_empty() {
            out.push_str(&format!(
                "background tasks (no reservation, not analysed): {}\n",
                analysis.background.join(", ")
            ));
        }
        out.push_str(if report::nothing_to_analyse(&analysis, only) {
            "nothing to analyse: no task in any box\n"
        } else if ok {
            "schedulable\n"
        } else {
            "NOT schedulable\n"
        });
        print!("{out}");
    }
    ExitCode::from(if ok { 0 } else { 1 })
}

/// `--sbf BOX`: the box's sbf and its tasks' dbf at the curves' corners, as a table or CSV,
/// and optionally an SVG plot.
fn run_sbf(system: &System, name: &str, args: &Args) -> ExitCode {
    let Some(b) = analyze(system).boxes.into_iter().find(|b| b.name == name) else {
        return usage(&format!(
            "--sbf: box \"{name}\" is not in {}",
            args.file.display()
        ));
    };
    let Some(reservation) = &b.reservation else {
        return usage(&format!(
            "--sbf: box \"{name}\" has no reserved supply (shared)"
        ));
    };
    let until = args
        .until
        .unwrap_or_else(|| default_until(reservation, &b.tasks));
    let points = supply_and_demand(reservation, &b.tasks, until);
    let mut out = String::new();
    if args.csv {
        out.push_str("t_ns,sbf_ns,dbf_ns\n");
        for p in &points {
            out.push_str(&format!("{},{},{}\n", p.t, p.sbf, p.dbf));
        }
    } else {
        out.push_str(&format!(
            "box {name}: {} up to {}; dbf of its {} task(s)\n",
            reservation.describe(),
            format_duration(until),
            b.tasks.len()
        ));
        let mut t = Table::new(
            &["t", "sbf", "dbf"],
            &[Align::Right, Align::Right, Align::Right],
        );
        let ms = |w: u128| format_ms(u64::try_from(w).unwrap_or(u64::MAX));
        for p in &points {
            t.row(vec![format_ms(p.t), ms(p.sbf), ms(p.dbf)]);
        }
        out.push_str(&t.render(2));
    }
    print!("{out}");
    if let Some(path) = &args.svg {
        let series = |f: fn(&CurvePoint) -> u128| -> Vec<(f64, f64)> {
            points
                .iter()
                .map(|p| (p.t as f64 / 1e6, f(p) as f64 / 1e6))
                .collect()
        };
        let svg = plot::curve_plot_svg(
            &format!("box {name}: {}", reservation.describe()),
            "window length t (ms)",
            "CPU time (ms)",
            &[
                plot::Series {
                    name: "sbf",
                    points: series(|p| p.sbf),
                },
                plot::Series {
                    name: "dbf",
                    points: series(|p| p.dbf),
                },
            ],
        );
        if let Err(e) = std::fs::write(path, svg) {
            eprintln!("rtbox analyze: {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}

fn render_box(b: &BoxReport) -> String {
    let verdict = if b.schedulable() {
        "schedulable"
    } else {
        "NOT schedulable"
    };
    let mut out = format!("box {}: {}\n", b.name, report::supply_text(b));
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
            report::condition(b, i),
        ]);
    }
    out.push_str(&t.render(2));
    for c in &b.chains {
        out.push_str(&format!(
            "  chain {}: end-to-end {} (deadline {}): {}\n    {}\n",
            report::chain_stages(b, c),
            c.bound
                .map_or("no bound".into(), |r| format!("<= {}", format_ms(r))),
            format_ms(c.deadline),
            if c.schedulable { "ok" } else { "FAIL" },
            report::chain_method(c)
        ));
    }
    out
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
                Ok(s) => report::synthesis(s),
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
