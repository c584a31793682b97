//! `rtbox daemon [--config FILE]`: run the enforcement runtime (root).

use std::path::PathBuf;
use std::process::ExitCode;

use rtbox_daemon::{DaemonConfig, DEFAULT_SOCKET, DEFAULT_STATE};

#[derive(clap::Args)]
pub struct Args {
    /// Boxes to keep from the start (TOML, see docs/config.md).
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[arg(long, default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Crash journal (restored by the watchdog or the next daemon).
    #[arg(long, default_value = DEFAULT_STATE)]
    pub state: PathBuf,
    /// Group (name or gid) allowed to use the socket besides root; what its users may do is
    /// set per box (`users` in the config, `rtbox box create --user`).
    #[arg(long)]
    pub group: Option<String>,
    /// Shortest poll interval of the enforcement loop, in microseconds: between core timers the
    /// loop polls its members after the smallest budget left of any running server, but at
    /// least this long and at most the 4 ms scan interval apart.
    #[arg(long, default_value_t = 1000)]
    pub poll_us: u64,
    /// CPU time of one enforcement-loop step in microseconds, admitted with the reservations
    /// (2 steps per server period on the server's CPU; 0 admits the reservations alone).
    #[arg(long, default_value_t = rtbox_model::DEFAULT_LOOP_STEP / 1000)]
    pub loop_step_us: u64,
}

pub fn run(args: Args) -> ExitCode {
    let group = match args
        .group
        .as_deref()
        .map(rtbox_linux::users::gid)
        .transpose()
    {
        Ok(g) => g,
        Err(e) => {
            eprintln!("rtbox daemon: --group: {e}");
            return ExitCode::from(2);
        }
    };
    let (system, members, users) = match &args.config {
        Some(p) => match rtbox_config::load_file_with_members(p) {
            Ok(c) => (Some(c.system), c.members, c.users),
            Err(e) => {
                eprintln!("rtbox daemon: {}: {e}", p.display());
                return ExitCode::from(2);
            }
        },
        None => (None, Vec::new(), Vec::new()),
    };
    let cfg = DaemonConfig {
        socket: args.socket,
        state_file: args.state,
        system,
        members,
        group,
        users,
        poll: args.poll_us.max(100) * 1000,
        loop_step: args.loop_step_us.saturating_mul(1000),
    };
    match rtbox_daemon::run(cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rtbox daemon: {e}");
            ExitCode::from(1)
        }
    }
}
