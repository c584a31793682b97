//! `rtbox attach BOX --pid PID | --cgroup PATH`: put a process (all its threads, and later its
//! children) or a cgroup's threads into a box.

use std::path::PathBuf;
use std::process::ExitCode;

use rtbox_daemon::protocol::Request;
use rtbox_daemon::DEFAULT_SOCKET;

#[derive(clap::Args)]
pub struct Args {
    #[arg(name = "BOX")]
    pub box_name: String,
    #[arg(long, conflicts_with = "cgroup", required_unless_present = "cgroup")]
    pub pid: Option<i32>,
    #[arg(long)]
    pub cgroup: Option<String>,
    #[arg(long, default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
}

pub fn run(args: Args) -> ExitCode {
    let req = Request::Attach {
        box_name: args.box_name,
        pid: args.pid,
        cgroup: args.cgroup,
    };
    match crate::client::call("attach", &args.socket, &req) {
        Ok(v) => {
            println!("attached {} threads", v["threads"]);
            ExitCode::SUCCESS
        }
        Err(c) => c,
    }
}
