//! Helpers shared by the root-only tests that run the real daemon against real threads.

use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
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

static SERIAL: Mutex<()> = Mutex::new(());

/// This test's turn on the machine: one real-runtime test at a time in this process, and in
/// every process on the machine (the machine-wide `rtbox_linux::lock::REALTIME_LOCK`, which
/// other checkouts' suites and the experiments take too). Hold it for the whole test.
#[allow(dead_code)]
pub struct Turn {
    _local: MutexGuard<'static, ()>,
    _machine: rtbox_linux::lock::PidLock,
}

pub fn realtime_turn() -> Turn {
    let local = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let machine = rtbox_linux::lock::realtime_turn().expect("machine-wide real-runtime lock");
    Turn {
        _local: local,
        _machine: machine,
    }
}

/// A process a test started; stopped and reaped whatever happens (SIGTERM first, so a daemon
/// restores its members, then SIGKILL after 3 s).
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(3) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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
