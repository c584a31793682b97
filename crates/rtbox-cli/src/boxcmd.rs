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
    /// A scheduler plug-in over the box's periodic tasks: fp, fp-ff, fp-pm, g-fp or fp-us
    /// (docs/exsched.md); needs policy fifo (the default) and takes the plug-in's placement.
    #[arg(long)]
    pub plugin: Option<String>,
    /// A user (name or uid) who, besides root, may attach its own processes to the box and
    /// its children; repeat for several. On `set`, no --user keeps the box's users.
    #[arg(long = "user", value_name = "USER")]
    pub users: Vec<String>,
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

fn to_req(a: BoxArgs) -> Result<BoxReq, String> {
    let users = a
        .users
        .iter()
        .map(|u| rtbox_linux::users::uid(u).map_err(|e| format!("--user {u}: {e}")))
        .collect::<Result<Vec<u32>, String>>()?;
    Ok(BoxReq {
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
        plugin: a.plugin,
        users: (!users.is_empty()).then_some(users),
    })
}

pub fn run(args: Args) -> ExitCode {
    let req = match args.action {
        Action::Create(a) => to_req(a).map(|spec| Request::Create { spec }),
        Action::Set(a) => to_req(a).map(|spec| Request::Set { spec }),
        Action::Delete { name } => Ok(Request::Delete { name }),
    };
    let req = match req {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rtbox box: {e}");
            return ExitCode::from(2);
        }
    };
    match crate::client::call("box", &args.socket, &req) {
        Ok(_) => ExitCode::SUCCESS,
        Err(c) => c,
    }
}
