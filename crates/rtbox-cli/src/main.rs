//! `rtbox`: real-time CPU reservations for groups of Linux tasks.
//!
//! A thin front end: each subcommand lives in its own module, parses its arguments, calls the
//! library crates and decides wording and exit codes. Exit codes: 0 success / admitted /
//! schedulable, 1 refused / not schedulable, 2 invalid input or usage.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod analyze;
mod check;
mod sim;
mod sweep;
mod table;

#[derive(Parser)]
#[command(
    name = "rtbox",
    version,
    about = "Real-time CPU reservations for groups of Linux tasks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a configuration, flatten its boxes into servers and run admission control.
    Check(check::Args),
    /// Simulate a configuration in virtual time (rtbox or a Linux baseline model).
    Sim(sim::Args),
    /// Schedulability of each box's tasks, or the smallest interface that makes them schedulable.
    Analyze(analyze::Args),
    /// Schedulability experiments: success ratios of random task sets per utilization.
    Sweep(sweep::Args),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Check(args) => check::run(args),
        Command::Sim(args) => sim::run(args),
        Command::Analyze(args) => analyze::run(args),
        Command::Sweep(args) => sweep::run(args),
    }
}
