//! `rtbox attach BOX --pid PID | --cgroup PATH | --container NAME`: put a process (all its
//! threads, and later its children), a cgroup's threads, or a Podman or Docker container (its
//! cgroup, found by `inspect`) into a box.

use std::path::PathBuf;
use std::process::ExitCode;

use rtbox_daemon::protocol::Request;
use rtbox_daemon::DEFAULT_SOCKET;

#[derive(clap::Args)]
pub struct Args {
    #[arg(name = "BOX")]
    pub box_name: String,
    #[arg(long, conflicts_with_all = ["cgroup", "container"], required_unless_present_any = ["cgroup", "container"])]
    pub pid: Option<i32>,
    #[arg(long, conflicts_with = "container")]
    pub cgroup: Option<String>,
    /// A Podman or Docker container's name or id.
    #[arg(long)]
    pub container: Option<String>,
    #[arg(long, default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
}

pub fn run(args: Args) -> ExitCode {
    let req = Request::Attach {
        box_name: args.box_name,
        pid: args.pid,
        cgroup: args.cgroup,
        container: args.container,
    };
    match crate::client::call("attach", &args.socket, &req) {
        Ok(v) => {
            println!("attached {} threads", v["threads"]);
            ExitCode::SUCCESS
        }
        Err(c) => c,
    }
}
