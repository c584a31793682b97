//! `rtbox exec BOX -- CMD...`: start a command inside a box. The forked child waits on a pipe
//! before `exec`, is attached while it waits, then reads the go-ahead: it never runs outside
//! the box. If this client dies first, the child reads end-of-file and exits without running
//! the command (a stopped child would stay stopped forever).
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
    let mut fds = [0i32; 2];
    // SAFETY: fds is a valid 2-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        eprintln!("rtbox exec: pipe: {}", std::io::Error::last_os_error());
        return ExitCode::from(2);
    }
    let [go_rd, go_wr] = fds;
    // SAFETY: the child only calls async-signal-safe functions (close, read, execvp, _exit).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        eprintln!("rtbox exec: fork: {}", std::io::Error::last_os_error());
        return ExitCode::from(2);
    }
    if pid == 0 {
        // SAFETY: see above; ptrs is a NUL-terminated argv of valid C strings.
        unsafe {
            libc::close(go_wr);
            let mut b = 0u8;
            let n = loop {
                let n = libc::read(go_rd, &mut b as *mut u8 as *mut libc::c_void, 1);
                if n >= 0 || *libc::__errno_location() != libc::EINTR {
                    break n;
                }
            };
            if n != 1 || b != b'g' {
                libc::_exit(126);
            }
            libc::execvp(ptrs[0], ptrs.as_ptr());
            libc::_exit(127);
        }
    }
    // SAFETY: the child's end, not used here.
    unsafe { libc::close(go_rd) };
    let mut status = 0;
    let req = Request::Attach {
        box_name: args.box_name,
        pid: Some(pid),
        cgroup: None,
    };
    if let Err(code) = crate::client::call("exec", &args.socket, &req) {
        // SAFETY: end-of-file tells the child to exit; reap it.
        unsafe {
            libc::close(go_wr);
            libc::waitpid(pid, &mut status, 0);
        }
        return code;
    }
    // SAFETY: the go-ahead to our own child, then wait for it.
    unsafe {
        libc::write(go_wr, b"g".as_ptr() as *const libc::c_void, 1);
        libc::close(go_wr);
        while libc::waitpid(pid, &mut status, 0) < 0 && *libc::__errno_location() == libc::EINTR {}
    }
    if libc::WIFEXITED(status) {
        ExitCode::from(libc::WEXITSTATUS(status) as u8)
    } else {
        ExitCode::from(128 + libc::WTERMSIG(status) as u8)
    }
}
