//! `rtbox`: real-time CPU reservations for groups of Linux tasks.
//!
//! A thin front end: each subcommand lives in its own module, parses its arguments, calls the
//! library crates and decides wording and exit codes. Exit codes: 0 success / admitted /
//! schedulable, 1 refused / not schedulable, 2 invalid input or usage.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod analyze;
mod attach;
mod boxcmd;
mod check;
mod client;
mod daemon;
mod detach;
mod exec;
mod load;
mod ocihook;
mod rtapp;
mod sim;
mod status;
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
    /// Write a configuration's tasks as an rt-app JSON workload.
    #[command(name = "rt-app")]
    RtApp(rtapp::Args),
    /// Run a configuration's tasks as periodic threads whose jobs use exactly their WCET of CPU.
    Load(load::Args),
    /// Schedulability experiments: success ratios of random task sets per utilization.
    Sweep(sweep::Args),
    /// Run the enforcement daemon (root).
    Daemon(daemon::Args),
    /// Create, change or delete a box of the running daemon.
    Box(boxcmd::Args),
    /// Put a process or a cgroup into a box.
    Attach(attach::Args),
    /// Start a command inside a box.
    Exec(exec::Args),
    /// Release threads from their box.
    Detach(detach::Args),
    /// Show the daemon's boxes, servers and members.
    Status(status::Args),
    /// OCI runtime hook (createRuntime, poststop): containers annotated io.rtbox.* join their
    /// box (state JSON on stdin; installed by contrib/oci/hooks.d/rtbox.json).
    #[command(name = "oci-hook")]
    OciHook(ocihook::Args),
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
        Command::RtApp(args) => rtapp::run(args),
        Command::Load(args) => load::run(args),
        Command::Daemon(args) => daemon::run(args),
        Command::Box(args) => boxcmd::run(args),
        Command::Attach(args) => attach::run(args),
        Command::Exec(args) => exec::run(args),
        Command::Detach(args) => detach::run(args),
        Command::Status(args) => status::run(args),
        Command::OciHook(args) => ocihook::run(args),
    }
}
