//! `rtbox detach --pid PID | --cgroup PATH | --container NAME | --box BOX`: release threads (original state back).

use std::path::PathBuf;
use std::process::ExitCode;

use rtbox_daemon::protocol::Request;
use rtbox_daemon::DEFAULT_SOCKET;

#[derive(clap::Args)]
#[group(required = true, multiple = false, id = "what")]
pub struct Target {
    #[arg(long)]
    pub pid: Option<i32>,
    #[arg(long)]
    pub cgroup: Option<String>,
    /// A Podman or Docker container's name or id.
    #[arg(long)]
    pub container: Option<String>,
    #[arg(long = "box")]
    pub box_name: Option<String>,
}

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    #[arg(long, default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
}

pub fn run(args: Args) -> ExitCode {
    let req = Request::Detach {
        pid: args.target.pid,
        cgroup: args.target.cgroup,
        container: args.target.container,
        box_name: args.target.box_name,
    };
    match crate::client::call("detach", &args.socket, &req) {
        Ok(v) => {
            println!("released {} threads", v["threads"]);
            ExitCode::SUCCESS
        }
        Err(c) => c,
    }
}
