//! Taking turns on the machine: real-runtime tests and experiments share the CPUs and the
//! cgroup tree, so only one runs at a time, within a test binary and across every process on
//! the machine (the machine-wide `rtbox_linux::lock::REALTIME_LOCK`, which other checkouts'
//! suites and the experiment scripts take too).

use std::sync::{Mutex, MutexGuard};

static SERIAL: Mutex<()> = Mutex::new(());

/// A test's turn; hold it for the whole test.
pub struct Turn {
    _local: MutexGuard<'static, ()>,
    _machine: rtbox_linux::lock::PidLock,
}

/// Waits for this test's turn.
pub fn realtime_turn() -> Turn {
    let local = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let machine = rtbox_linux::lock::realtime_turn().expect("machine-wide real-runtime lock");
    Turn {
        _local: local,
        _machine: machine,
    }
}

/// [`realtime_turn`] for root; otherwise `None`, after printing why test `name` is skipped.
pub fn root_turn(name: &str, why: &str) -> Option<Turn> {
    if !rtbox_linux::is_root() {
        eprintln!("{name}: skipped: needs root ({why})");
        return None;
    }
    Some(realtime_turn())
}
