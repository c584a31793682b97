//! `rtbox sim FILE --duration 60s [--model M] [--seed N] [--json] [--csv F] [--trace F]
//! [--gantt F] [--window D]`: simulate a configuration in virtual time.
//!
//! Exit codes: 0 no deadline miss, 1 deadline misses or admission refused, 2 invalid input.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;

use rtbox_model::parse_duration;
use rtbox_sim::{output, simulate, ModelKind, SimError, SimOptions};

#[derive(clap::Args)]
pub struct Args {
    /// Configuration file (TOML).
    pub file: PathBuf,
    /// Simulated time, e.g. 60s, 500ms.
    #[arg(long, default_value = "10s")]
    pub duration: String,
    /// Scheduler: rtbox (boxes as hard CBS servers), rt-throttling (Linux RT group throttling
    /// with the boxes' budgets), deadline (one SCHED_DEADLINE reservation per boxed task), fp
    /// (global fixed priority, no reservations).
    #[arg(long, default_value = "rtbox")]
    pub model: String,
    /// Seed for execution times, jitter and sporadic arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write one CSV line per job to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write a Chrome/Perfetto trace-event JSON file.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Write a Gantt chart (SVG) of CPUs, servers, throttling and jobs.
    #[arg(long, value_name = "FILE")]
    pub gantt: Option<PathBuf>,
    /// How much of the start the trace and Gantt chart cover (default: the duration, at most 1s).
    #[arg(long, value_name = "DURATION")]
    pub window: Option<String>,
}

fn bad(msg: String) -> ExitCode {
    eprintln!("rtbox sim: {msg}");
    ExitCode::from(2)
}

pub fn run(args: Args) -> ExitCode {
    let duration = match parse_duration(&args.duration) {
        Ok(0) => return bad("--duration: must be positive".into()),
        Ok(d) => d,
        Err(e) => return bad(format!("--duration: {e}")),
    };
    let Some(model) = ModelKind::from_name(&args.model) else {
        return bad(format!(
            "--model: \"{}\" is not one of {}",
            args.model,
            ModelKind::NAMES.join(", ")
        ));
    };
    let window = match &args.window {
        None => duration.min(1_000_000_000),
        Some(w) => match parse_duration(w) {
            Ok(w) => w,
            Err(e) => return bad(format!("--window: {e}")),
        },
    };
    let system = match rtbox_config::load_file(&args.file) {
        Ok(s) => s,
        Err(e) => return bad(format!("{}: {e}", args.file.display())),
    };
    let opts = SimOptions {
        duration,
        model,
        seed: args.seed,
        record_jobs: args.csv.is_some(),
        record_trace: args.trace.is_some() || args.gantt.is_some(),
        trace_until: window,
        ..SimOptions::default()
    };
    let report = match simulate(&system, &opts) {
        Ok(r) => r,
        Err(SimError::Core(rtbox_core::CoreError::NotAdmitted(reasons))) => {
            for r in reasons {
                eprintln!("rtbox sim: refused: {r}");
            }
            return ExitCode::from(1);
        }
        Err(e) => return bad(format!("{}: {e}", args.file.display())),
    };
    let write = |path: &PathBuf, f: &dyn Fn(&mut BufWriter<File>) -> std::io::Result<()>| {
        File::create(path)
            .map(BufWriter::new)
            .and_then(|mut w| f(&mut w))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    if let Some(p) = &args.csv {
        if let Err(e) = write(p, &|w| output::write_jobs_csv(&report, w)) {
            return bad(e);
        }
    }
    if let Some(p) = &args.trace {
        let v = output::chrome_trace(&report);
        if let Err(e) = write(p, &|w| {
            serde_json::to_writer(&mut *w, &v).map_err(std::io::Error::other)
        }) {
            return bad(e);
        }
    }
    if let Some(p) = &args.gantt {
        let svg = output::gantt_svg(&report);
        if let Err(e) = write(p, &|w| std::io::Write::write_all(w, svg.as_bytes())) {
            return bad(e);
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print!("{}", output::summary_table(&report));
    }
    let misses = report.total_misses();
    if misses > 0 {
        if !args.json {
            let boxed: u64 = report
                .tasks
                .iter()
                .filter(|t| t.box_name.is_some())
                .map(|t| t.misses)
                .sum();
            eprintln!(
                "rtbox sim: {misses} deadline misses ({boxed} by tasks in boxes, {} by background tasks)",
                misses - boxed
            );
        }
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
