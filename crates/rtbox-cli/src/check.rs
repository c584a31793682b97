//! `rtbox check FILE [--json]`.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Configuration file (TOML).
    pub file: PathBuf,
    /// Print the verdict as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(_args: Args) -> ExitCode {
    eprintln!("rtbox check: not wired yet");
    ExitCode::from(2)
}
