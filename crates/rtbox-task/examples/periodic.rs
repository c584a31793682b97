//! The seed's Figure 2 through the Rust API: `n` jobs of `work_us` of CPU time, C = 2 ms,
//! T = D = 10 ms, priority 50, in the box named by RTBOX_BOX (daemon at RTBOX_SOCKET).
//!
//!     RTBOX_BOX=rt cargo run --release -p rtbox-task --example periodic -- [JOBS [WORK_US]]

use rtbox_task::{PeriodicTask, TaskError};

/// Spin until this thread has used `ns` more of CPU time (the job's work).
fn work(ns: u64) {
    let until = rtbox_linux::thread_cpu_ns() + ns;
    while rtbox_linux::thread_cpu_ns() < until {}
}

fn main() -> Result<(), TaskError> {
    let mut args = std::env::args().skip(1);
    let jobs: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let work_ns: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000) * 1000;
    let mut t = PeriodicTask::new();
    t.enter()?;
    t.set_wcet(2_000_000)?;
    t.set_period(10_000_000)?;
    t.set_deadline(10_000_000)?;
    t.set_priority(50)?;
    t.run(0)?;
    for _ in 0..jobs {
        work(work_ns);
        t.wait_for_period()?;
    }
    t.exit()?;
    println!("{jobs} jobs");
    Ok(())
}
