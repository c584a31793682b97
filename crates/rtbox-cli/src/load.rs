//! `rtbox load FILE [--box NAME] --duration D [--delay D] [--logdir DIR]`: runs a
//! configuration's tasks as periodic threads whose every job burns exactly its WCET of the
//! thread's own CPU clock (`rtbox_task::load`), at the SCHED_FIFO priorities `rtbox rt-app`
//! gives them; one log per task, `DIR/NAME.log`. Run it inside a box with `rtbox exec BOX --
//! rtbox load ...`. Unlike rt-app's calibrated loops, the jobs' CPU time does not depend on
//! the machine's speed under load.
//!
//! Exit codes: 0 ran, 1 a thread could not start or a log not be written, 2 invalid input.

use std::path::PathBuf;
use std::process::ExitCode;

use rtbox_model::{fifo_priorities, parse_duration};
use rtbox_task::load::{self, LoadTask};

#[derive(clap::Args)]
pub struct Args {
    /// Configuration file (TOML).
    pub file: PathBuf,
    /// Only the tasks of this box (default: every task).
    #[arg(long = "box", value_name = "NAME")]
    pub box_name: Option<String>,
    /// How long jobs are released, e.g. 10s.
    #[arg(long)]
    pub duration: String,
    /// Time from the start to every task's first release (all released together), e.g. 300ms.
    #[arg(long, default_value = "300ms")]
    pub delay: String,
    /// Directory for the per-task logs (`NAME.log`: release start end cpu, ns per job).
    #[arg(long, default_value = ".")]
    pub logdir: PathBuf,
}

fn fail(code: u8, msg: String) -> ExitCode {
    eprintln!("rtbox load: {msg}");
    ExitCode::from(code)
}

pub fn run(args: Args) -> ExitCode {
    let system = match rtbox_config::load_file(&args.file) {
        Ok(s) => s,
        Err(e) => return fail(2, format!("{}: {e}", args.file.display())),
    };
    let duration = match parse_duration(&args.duration) {
        Ok(d) => d,
        Err(e) => return fail(2, format!("--duration: {e}")),
    };
    let delay = match parse_duration(&args.delay) {
        Ok(d) => d,
        Err(e) => return fail(2, format!("--delay: {e}")),
    };
    let tasks: Vec<_> = match &args.box_name {
        Some(b) if system.get(b).is_none() => {
            return fail(
                2,
                format!("--box = \"{b}\" is not a box of {}", args.file.display()),
            )
        }
        Some(b) => system.tasks_of(b).cloned().collect(),
        None => system.tasks.clone(),
    };
    if tasks.is_empty() {
        return fail(2, "no tasks to run".into());
    }
    let prios = match fifo_priorities(&tasks) {
        Ok(p) => p,
        Err(e) => return fail(2, e.to_string()),
    };
    let load: Vec<LoadTask> = tasks
        .iter()
        .zip(prios)
        .map(|(t, priority)| LoadTask {
            name: t.name.clone(),
            wcet: t.wcet,
            period: t.period,
            deadline: t.deadline,
            priority,
        })
        .collect();
    let jobs = match load::run(&load, delay, duration) {
        Ok(j) => j,
        Err(e @ load::LoadError::Task { .. }) => return fail(2, e.to_string()),
        Err(e) => return fail(1, e.to_string()),
    };
    for (t, j) in load.iter().zip(&jobs) {
        let path = args.logdir.join(format!("{}.log", t.name));
        if let Err(e) = std::fs::write(&path, load::log_text(t, j)) {
            return fail(1, format!("cannot write {}: {e}", path.display()));
        }
    }
    ExitCode::SUCCESS
}
