//! `rtbox exec BOX -- CMD...`: start a command inside a box. The child stops itself before
//! `exec`, is attached while stopped, then continues: it never runs outside the box.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use rtbox_daemon::protocol::Request;
use rtbox_daemon::DEFAULT_SOCKET;

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
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..]);
    // SAFETY: raise is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::raise(libc::SIGSTOP);
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rtbox exec: {}: {e}", args.command[0]);
            return ExitCode::from(2);
        }
    };
    let pid = child.id() as i32;
    let mut status = 0;
    // SAFETY: waiting for our own child to stop.
    unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
    let req = Request::Attach {
        box_name: args.box_name,
        pid: Some(pid),
        cgroup: None,
    };
    let attached = crate::client::call("exec", &args.socket, &req);
    if let Err(code) = attached {
        // SAFETY: killing our own stopped child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let _ = child.wait();
        return code;
    }
    // SAFETY: continue our own child.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    match child.wait() {
        Ok(s) => match s.code() {
            Some(c) => ExitCode::from(c as u8),
            None => ExitCode::from(128 + s.signal().unwrap_or(0) as u8),
        },
        Err(e) => {
            eprintln!("rtbox exec: {e}");
            ExitCode::from(2)
        }
    }
}
