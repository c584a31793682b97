//! `rtbox box create|set|delete`: change the daemon's boxes (admission-controlled).

use std::path::PathBuf;
use std::process::ExitCode;

use rtbox_daemon::protocol::{BoxReq, Request};
use rtbox_daemon::DEFAULT_SOCKET;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
    #[arg(long, global = true, default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
}

#[derive(clap::Args)]
pub struct BoxArgs {
    pub name: String,
    #[arg(long)]
    pub parent: Option<String>,
    /// CPU list, e.g. 0-1.
    #[arg(long)]
    pub cpus: Option<String>,
    /// Budget per period on every CPU of the box, e.g. 20ms.
    #[arg(long)]
    pub budget: Option<String>,
    #[arg(long)]
    pub period: Option<String>,
    /// Explicit servers, control string "CPU Q/P ..." in microseconds.
    #[arg(long)]
    pub servers: Option<String>,
    /// Shared box with this weight.
    #[arg(long)]
    pub weight: Option<u32>,
    #[arg(long)]
    pub policy: Option<String>,
    #[arg(long)]
    pub placement: Option<String>,
    #[arg(long)]
    pub mode: Option<String>,
}

#[derive(clap::Subcommand)]
pub enum Action {
    /// Create a box.
    Create(BoxArgs),
    /// Replace a box's parameters.
    Set(BoxArgs),
    /// Delete a box; its members get their original state back.
    Delete { name: String },
}

fn to_req(a: BoxArgs) -> BoxReq {
    BoxReq {
        name: a.name,
        parent: a.parent,
        cpus: a.cpus,
        budget: a.budget,
        period: a.period,
        servers: a.servers,
        weight: a.weight,
        policy: a.policy,
        placement: a.placement,
        mode: a.mode,
    }
}

pub fn run(args: Args) -> ExitCode {
    let req = match args.action {
        Action::Create(a) => Request::Create { spec: to_req(a) },
        Action::Set(a) => Request::Set { spec: to_req(a) },
        Action::Delete { name } => Request::Delete { name },
    };
    match crate::client::call("box", &args.socket, &req) {
        Ok(_) => ExitCode::SUCCESS,
        Err(c) => c,
    }
}
