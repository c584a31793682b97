//! Helpers shared by the root-only tests that run the real daemon against real threads.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rtbox_linux::cgroup::{self, ThreadCgroups};
use rtbox_linux::sched::{self, SchedAttr};

/// True when running as root; otherwise prints why `name` is skipped.
pub fn root_or_skip(name: &str, why: &str) -> bool {
    if rtbox_linux::is_root() {
        return true;
    }
    eprintln!("{name}: skipped: needs root ({why})");
    false
}

#[allow(unused_imports)]
pub use rtbox_harness::turn::{realtime_turn, Turn};

/// A test's own `rtbox daemon`: socket, state file, config and log in one directory. Stopped by
/// SIGTERM when dropped (so it restores its members; SIGKILL after 10 s), its log printed if the
/// test failed.
#[allow(dead_code)]
pub struct TestDaemon {
    pub dir: PathBuf,
    pub sock: PathBuf,
    pub child: Option<Child>,
    /// The directory is the daemon's own (removed when dropped), not the test's.
    owns_dir: bool,
}

#[allow(dead_code)]
impl TestDaemon {
    /// `<temp>/rtbox-<tag>-<pid>`: a directory of this test process.
    pub fn temp_dir(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("rtbox-{tag}-{}", std::process::id()))
    }

    /// The daemon's command with its files in `dir` (created), the config text `config`
    /// (written to `dir/config.toml`) and `extra` arguments.
    pub fn command(dir: &Path, config: Option<&str>, extra: &[&str]) -> Command {
        let _ = std::fs::create_dir_all(dir);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rtbox"));
        cmd.arg("daemon")
            .arg("--socket")
            .arg(dir.join("sock"))
            .arg("--state")
            .arg(dir.join("state.json"))
            .args(extra);
        if let Some(text) = config {
            let path = dir.join("config.toml");
            std::fs::write(&path, text).expect("write config");
            cmd.arg("--config").arg(path);
        }
        cmd
    }

    /// A daemon in its own directory [`TestDaemon::temp_dir`]`(tag)`.
    pub fn start(tag: &str, config: Option<&str>, extra: &[&str]) -> TestDaemon {
        let dir = TestDaemon::temp_dir(tag);
        let cmd = TestDaemon::command(&dir, config, extra);
        TestDaemon::spawn(cmd, dir, true)
    }

    /// A daemon with its files in the test's directory `dir` (left in place).
    pub fn start_in(dir: &Path, extra: &[&str]) -> TestDaemon {
        let cmd = TestDaemon::command(dir, None, extra);
        TestDaemon::spawn(cmd, dir.to_path_buf(), false)
    }

    /// Starts `cmd` with its stderr in `dir/daemon.log` and waits up to 10 s for its socket.
    pub fn spawn(mut cmd: Command, dir: PathBuf, owns_dir: bool) -> TestDaemon {
        let sock = dir.join("sock");
        let log = std::fs::File::create(dir.join("daemon.log")).expect("daemon log");
        let child = cmd.stderr(Stdio::from(log)).spawn().expect("start daemon");
        let t0 = Instant::now();
        while !sock.exists() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(sock.exists(), "daemon socket did not appear");
        TestDaemon {
            dir,
            sock,
            child: Some(child),
            owns_dir,
        }
    }

    /// `rtbox ARGS --socket SOCK`: exit code and stdout + stderr.
    pub fn rtbox(&self, args: &[&str]) -> (i32, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_rtbox"))
            .args(args)
            .arg("--socket")
            .arg(&self.sock)
            .output()
            .expect("run rtbox");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    }

    /// [`TestDaemon::rtbox`] that must exit 0.
    pub fn ok(&self, args: &[&str]) -> String {
        let (code, out) = self.rtbox(args);
        assert_eq!(code, 0, "rtbox {args:?}: {out}");
        out
    }

    /// `rtbox status --json`.
    pub fn status(&self) -> serde_json::Value {
        serde_json::from_str(&self.ok(&["status", "--json"])).expect("status JSON")
    }

    /// What the daemon logged so far (its stderr).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("daemon").id() as i32
    }

    /// Sends `sig` to the daemon and reaps it.
    pub fn signal(&mut self, sig: i32) {
        let mut c = self.child.take().expect("daemon");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(c.id() as i32, sig) };
        let _ = c.wait();
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            terminate(&mut c, Duration::from_secs(10));
        }
        if std::thread::panicking() {
            eprintln!("daemon log:\n{}", self.log());
        }
        if self.owns_dir {
            // Give a watchdog time to finish, then remove the directory.
            std::thread::sleep(Duration::from_millis(100));
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A process a test started; stopped and reaped whatever happens (SIGTERM first, so a daemon
/// restores its members, then SIGKILL after 3 s).
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        terminate(&mut self.0, Duration::from_secs(3));
    }
}

/// Stops and reaps a child a test started: SIGTERM first (a daemon restores its members on
/// it), SIGKILL if it has not exited within `grace`.
pub fn terminate(c: &mut Child, grace: Duration) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    while t0.elapsed() < grace {
        if let Ok(Some(_)) = c.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    let _ = c.wait();
}

/// A CPU hog: a shell busy loop.
pub fn hog() -> Proc {
    Proc(
        Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn hog"),
    )
}

/// What rtbox must give back to a thread: policy and priority, affinity, cgroups.
#[derive(Debug, Clone, PartialEq)]
pub struct Orig {
    pub attr: SchedAttr,
    pub cpus: Vec<u32>,
    pub cg: ThreadCgroups,
}

pub fn state(pid: i32) -> Orig {
    Orig {
        attr: sched::get_attr(pid).expect("attr"),
        cpus: sched::get_affinity(pid).expect("affinity"),
        cg: cgroup::thread_cgroups(pid).expect("cgroups"),
    }
}
