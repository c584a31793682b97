//! `rtbox exec BOX -- CMD...`: start a command inside a box. The forked child stops itself
//! before `exec`, is attached while stopped, then continues: it never runs outside the box.
//! (Plain fork + execvp: `std::process::Command` waits for the exec, which would deadlock.)

use std::ffi::CString;
use std::path::PathBuf;
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

pub fn run(args: Args) -> ExitCode {
    let argv: Vec<CString> = match args
        .command
        .iter()
        .map(|a| CString::new(a.as_str()))
        .collect()
    {
        Ok(v) => v,
        Err(_) => {
            eprintln!("rtbox exec: command contains a NUL byte");
            return ExitCode::from(2);
        }
    };
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: the child only calls async-signal-safe functions (raise, execvp, _exit).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        eprintln!("rtbox exec: fork: {}", std::io::Error::last_os_error());
        return ExitCode::from(2);
    }
    if pid == 0 {
        // SAFETY: see above; ptrs is a NUL-terminated argv of valid C strings.
        unsafe {
            libc::raise(libc::SIGSTOP);
            libc::execvp(ptrs[0], ptrs.as_ptr());
            libc::_exit(127);
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child to stop.
    unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
    let req = Request::Attach {
        box_name: args.box_name,
        pid: Some(pid),
        cgroup: None,
    };
    if let Err(code) = crate::client::call("exec", &args.socket, &req) {
        // SAFETY: killing and reaping our own stopped child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, &mut status, 0);
        }
        return code;
    }
    // SAFETY: continue our own child, then wait for it.
    unsafe {
        libc::kill(pid, libc::SIGCONT);
        libc::waitpid(pid, &mut status, 0);
    }
    if libc::WIFEXITED(status) {
        ExitCode::from(libc::WEXITSTATUS(status) as u8)
    } else {
        ExitCode::from(128 + libc::WTERMSIG(status) as u8)
    }
}
