//! `rtbox exec BOX -- CMD...`: start a command inside a box. The child waits at a gate
//! (`rtbox_linux::gated`) before `exec` and is attached while it waits: it never runs outside
//! the box, and if this client dies first it exits without running the command.

use std::path::PathBuf;
use std::process::ExitCode;

use rtbox_daemon::protocol::Request;
use rtbox_daemon::DEFAULT_SOCKET;
use rtbox_linux::gated::{wait_exit_code, GatedChild};

#[derive(clap::Args)]
pub struct Args {
    #[arg(name = "BOX")]
    pub box_name: String,
    #[arg(long, default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

pub fn run(args: Args) -> ExitCode {
    let child = match GatedChild::spawn(&args.command) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rtbox exec: {e}");
            return ExitCode::from(2);
        }
    };
    let req = Request::Attach {
        box_name: args.box_name,
        pid: Some(child.pid),
        cgroup: None,
    };
    if let Err(code) = crate::client::call("exec", &args.socket, &req) {
        child.cancel();
        return code;
    }
    match wait_exit_code(child.release()) {
        Ok(c) => ExitCode::from(c.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("rtbox exec: {e}");
            ExitCode::from(2)
        }
    }
}
