//! `rtbox sweep [--config FILE --box NAME | --cpus N ...] --utilizations A:B:S --sets N
//! [--evaluate analysis,sim] [--csv F] [--svg F]`: schedulability experiments on random task
//! sets, all cores used, progress on stderr.
//!
//! Exit codes: 0 done, 2 invalid input.

use std::path::PathBuf;
use std::process::ExitCode;

use rtbox_experiment::settings::SweepSettings;
use rtbox_experiment::sweep::{progress_bar, run_sweep, SweepError, SweepSpec};

#[derive(clap::Args)]
pub struct Args {
    /// Configuration (TOML) holding the box to fill with random tasks; its other tasks stay.
    #[arg(long, value_name = "FILE", requires = "box_name")]
    pub config: Option<PathBuf>,
    /// The box of --config that receives the generated tasks.
    #[arg(long = "box", value_name = "NAME")]
    pub box_name: Option<String>,
    /// Without --config: CPUs of a single box with a 9.5 ms / 10 ms server on each.
    #[arg(long, default_value_t = 4)]
    pub cpus: u32,
    /// Without --config: the box's local policy (fifo, edf).
    #[arg(long, default_value = "fifo")]
    pub policy: String,
    /// Without --config: the box's placement (global, pinned).
    #[arg(long, default_value = "global")]
    pub placement: String,
    /// Task-set utilizations: a list 0.5,1,1.5 or a range start:end:step.
    #[arg(long, default_value = "0.5:3.5:0.25")]
    pub utilizations: String,
    /// Task sets per utilization point.
    #[arg(long, default_value_t = 100)]
    pub sets: usize,
    /// Tasks per set.
    #[arg(long, default_value_t = 10)]
    pub tasks: usize,
    /// Utilization generator: randfixedsum, uunifast-discard, uunifast.
    #[arg(long, default_value = "randfixedsum")]
    pub method: String,
    /// Largest utilization of one task.
    #[arg(long, default_value_t = 1.0)]
    pub max_task_util: f64,
    /// Period range MIN:MAX (log-uniform).
    #[arg(long, default_value = "10ms:100ms")]
    pub periods: String,
    /// Periods are multiples of this.
    #[arg(long, default_value = "1ms")]
    pub granularity: String,
    /// implicit (D = T) or constrained (D uniform in [C, T]).
    #[arg(long, default_value = "implicit")]
    pub deadlines: String,
    /// Comma-separated judges: analysis, sim (= sim-rtbox), sim-rt-throttling, sim-deadline,
    /// sim-fp.
    #[arg(long, default_value = "analysis")]
    pub evaluate: String,
    /// Simulated time per set (default: 10 x the longest period).
    #[arg(long, value_name = "DURATION")]
    pub sim_duration: Option<String>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Worker threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Write the success ratios as CSV here (default: stdout).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write a line plot of the success ratios (SVG).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

fn bad(msg: String) -> ExitCode {
    eprintln!("rtbox sweep: {msg}");
    ExitCode::from(2)
}

/// The flags as the library's text-level settings, which parse and check them.
fn settings(args: &Args) -> SweepSettings {
    SweepSettings {
        cpus: args.cpus,
        policy: args.policy.clone(),
        placement: args.placement.clone(),
        utilizations: args.utilizations.clone(),
        sets: args.sets,
        tasks: args.tasks,
        method: args.method.clone(),
        max_task_util: args.max_task_util,
        periods: args.periods.clone(),
        granularity: args.granularity.clone(),
        deadlines: args.deadlines.clone(),
        evaluate: args.evaluate.clone(),
        sim_duration: args.sim_duration.clone(),
        seed: args.seed,
        threads: args.threads,
    }
}

fn build(args: &Args) -> Result<SweepSpec, String> {
    let base = match (&args.config, &args.box_name) {
        (Some(path), Some(name)) => Some((
            rtbox_config::load_file(path).map_err(|e| format!("{}: {e}", path.display()))?,
            name.clone(),
        )),
        (None, Some(_)) => return Err("--box needs --config".into()),
        _ => None,
    };
    settings(args).to_spec(base).map_err(|e| match e {
        SweepError::Setting { field, reason } => format!("--{field}: {reason}"),
    })
}

pub fn run(args: Args) -> ExitCode {
    let spec = match build(&args) {
        Ok(s) => s,
        Err(e) => return bad(e),
    };
    let quiet = args.quiet;
    let progress = |done: usize, total: usize| {
        if !quiet && (done == total || done.is_multiple_of(8)) {
            eprint!("\r{}", progress_bar(done, total, 40));
        }
    };
    let result = run_sweep(&spec, &progress);
    if !quiet {
        eprintln!();
    }
    let result = match result {
        Ok(r) => r,
        Err(e) => return bad(e.to_string()),
    };
    let csv = result.to_csv();
    match &args.csv {
        Some(path) => {
            if let Err(e) = std::fs::write(path, &csv) {
                return bad(format!("{}: {e}", path.display()));
            }
        }
        None => print!("{csv}"),
    }
    if let Some(path) = &args.svg {
        let title = format!(
            "{} tasks, {} sets per point, box \"{}\"",
            spec.generator.tasks, spec.sets_per_point, spec.box_name
        );
        if let Err(e) = std::fs::write(path, result.to_svg(&title)) {
            return bad(format!("{}: {e}", path.display()));
        }
    }
    ExitCode::SUCCESS
}
