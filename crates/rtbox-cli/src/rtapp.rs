//! `rtbox rt-app FILE [--box NAME] [--duration D] [--policy fifo|deadline] [-o OUT]`: writes a
//! configuration's tasks as an rt-app JSON workload, so the workload simulated by `rtbox sim`
//! can run for real (inside boxes of `rtbox daemon`, or as plain Linux threads for comparison).
//!
//! Exit codes: 0 written, 2 invalid input.

use std::path::PathBuf;
use std::process::ExitCode;

use rtbox_model::parse_duration;
use rtbox_workload::rtapp::{emit, EmitOptions, EmitPolicy};

#[derive(clap::Args)]
pub struct Args {
    /// Configuration file (TOML).
    pub file: PathBuf,
    /// Only the tasks of this box (default: every task).
    #[arg(long = "box", value_name = "NAME")]
    pub box_name: Option<String>,
    /// rt-app's run length, e.g. 10s (default: until stopped).
    #[arg(long)]
    pub duration: Option<String>,
    /// Thread policy rt-app sets: fifo (the tasks' priorities) or deadline (one reservation each).
    #[arg(long, default_value = "fifo")]
    pub policy: String,
    /// Directory for rt-app's per-thread logs.
    #[arg(long, default_value = "./")]
    pub logdir: String,
    /// Output file (default: standard output).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

fn fail(msg: String) -> ExitCode {
    eprintln!("rtbox rt-app: {msg}");
    ExitCode::from(2)
}

pub fn run(args: Args) -> ExitCode {
    let system = match rtbox_config::load_file(&args.file) {
        Ok(s) => s,
        Err(e) => return fail(format!("{}: {e}", args.file.display())),
    };
    let policy = match args.policy.as_str() {
        "fifo" => EmitPolicy::Fifo,
        "deadline" => EmitPolicy::Deadline,
        other => {
            return fail(format!(
                "--policy = \"{other}\" is not one of fifo, deadline"
            ))
        }
    };
    let duration = match args.duration.as_deref().map(parse_duration).transpose() {
        Ok(d) => d,
        Err(e) => return fail(format!("--duration: {e}")),
    };
    let tasks: Vec<_> = match &args.box_name {
        Some(b) if system.get(b).is_none() => {
            return fail(format!(
                "--box = \"{b}\" is not a box of {}",
                args.file.display()
            ))
        }
        Some(b) => system.tasks_of(b).cloned().collect(),
        None => system.tasks.clone(),
    };
    if tasks.is_empty() {
        return fail("no tasks to write".into());
    }
    let options = EmitOptions {
        policy,
        duration,
        logdir: args.logdir,
        ..EmitOptions::default()
    };
    let json = match emit(&tasks, &options) {
        Ok(j) => j,
        Err(e) => return fail(e.to_string()),
    };
    match &args.output {
        Some(path) => {
            if let Err(e) = std::fs::write(path, json) {
                return fail(format!("cannot write {}: {e}", path.display()));
            }
        }
        None => println!("{json}"),
    }
    ExitCode::SUCCESS
}
