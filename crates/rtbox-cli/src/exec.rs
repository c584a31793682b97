//! `rtbox exec BOX -- CMD...`: run a command inside a box, like `chrt` or `taskset`: this
//! process asks the daemon to attach itself, then becomes the command (`exec` in place). The
//! command keeps this pid, its exit status is the shell's, signals reach it directly, and nothing
//! is left behind when it ends. Being attached before `exec`, it runs inside the box from its
//! first instruction; a refused attach runs nothing.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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

/// Where `execvp` would find `prog`: as given when it names a path, else the first executable
/// file of that name in `PATH`.
fn find_program(prog: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if prog.contains('/') {
        return Some(PathBuf::from(prog));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| runnable(p))
}

/// The shell's wording and exit status for a command that cannot run: 127 when it does not
/// exist, 126 when it exists but cannot be executed.
fn cannot_run(prog: &str, e: &std::io::Error) -> ExitCode {
    let text = e.to_string();
    let reason = text.split(" (os error").next().unwrap_or(&text);
    eprintln!("rtbox exec: cannot run {prog}: {reason}");
    ExitCode::from(if e.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    })
}

pub fn run(args: Args) -> ExitCode {
    let prog = &args.command[0];
    // Checked before the attach, so a typo does not put this process into the box for nothing.
    let Some(path) = find_program(prog) else {
        return cannot_run(prog, &std::io::Error::from_raw_os_error(libc::ENOENT));
    };
    if let Err(e) = path.metadata() {
        return cannot_run(prog, &e);
    }
    let req = Request::Attach {
        box_name: args.box_name,
        pid: Some(std::process::id() as i32),
        cgroup: None,
        container: None,
    };
    if let Err(code) = crate::client::call("exec", &args.socket, &req) {
        return code;
    }
    // Only returns on failure.
    let e = std::process::Command::new(&path)
        .arg0(prog)
        .args(&args.command[1..])
        .exec();
    cannot_run(prog, &e)
}
