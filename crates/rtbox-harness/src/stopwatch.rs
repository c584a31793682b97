//! Stopping a daemon a run started, without ever blocking on it: SIGTERM, a bounded wait, and
//! when the daemon does not finish, a record of what each of its threads was doing (kernel
//! stack, state, policy, CPU time) before it is released (its real-time threads lowered to
//! SCHED_OTHER, which let a spinning stop finish at once when it was seen) and killed.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use rtbox_linux::sched::{self, SchedAttr};

/// How a stop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopOutcome {
    /// Exited within the grace time after SIGTERM.
    Stopped(Duration),
    /// Did not: what its threads were doing (one block per thread), then released and killed.
    Hung(String),
}

/// One block per thread of `pid`: tid, name, state, policy and priority, user and system time
/// (clock ticks), CPU, wait channel and kernel stack.
pub fn threads_report(pid: u32) -> String {
    let mut out = String::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return format!("process {pid} gone\n");
    };
    for e in dir.flatten() {
        let t = e.path();
        let read = |f: &str| std::fs::read_to_string(t.join(f)).unwrap_or_default();
        let stat = read("stat");
        // Fields after the parenthesised name: state is field 3, utime 14, stime 15,
        // processor 39, rt_priority 40, policy 41.
        let rest: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, r)| r.split_whitespace().collect())
            .unwrap_or_default();
        let f = |n: usize| rest.get(n - 3).copied().unwrap_or("?");
        out += &format!(
            "tid {} {:?} state {} policy {} rtprio {} utime {} stime {} cpu {} wchan {}\n{}\n",
            e.file_name().to_string_lossy(),
            read("comm").trim(),
            f(3),
            f(41),
            f(40),
            f(14),
            f(15),
            f(39),
            read("wchan"),
            read("stack")
        );
    }
    out
}

/// Lowers every real-time thread of `pid` to SCHED_OTHER.
pub fn release_realtime_threads(pid: u32) {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for e in dir.flatten() {
        if let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) {
            if sched::get_attr(tid).is_ok_and(|a| !sched::is_fair(a.policy)) {
                let _ = sched::set_attr(tid, &SchedAttr::other(0));
            }
        }
    }
}

fn wait_for(child: &mut Child, grace: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < grace {
        if let Ok(Some(_)) = child.try_wait() {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// SIGTERM `child` and wait up to `grace`; a daemon still there is recorded
/// ([`threads_report`], also written to `record` when given), released and killed, and waited
/// for at most 10 s more (never blocks for good).
pub fn stop_daemon(child: &mut Child, grace: Duration, record: Option<&Path>) -> StopOutcome {
    let pid = child.id();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    if let Some(d) = wait_for(child, grace) {
        return StopOutcome::Stopped(d);
    }
    let report = threads_report(pid);
    if let Some(p) = record {
        let _ = std::fs::write(p, &report);
    }
    release_realtime_threads(pid);
    if wait_for(child, Duration::from_secs(2)).is_none() {
        let _ = child.kill();
        release_realtime_threads(pid);
        let _ = wait_for(child, Duration::from_secs(10));
    }
    StopOutcome::Hung(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_names_every_thread_with_its_state() {
        let r = threads_report(std::process::id());
        assert!(r.contains("state R") || r.contains("state S"), "{r}");
        assert!(r.contains("policy 0"), "{r}");
        assert!(threads_report(u32::MAX).contains("gone"));
    }

    #[test]
    fn a_quick_child_is_stopped_a_deaf_one_is_killed() {
        let mut c = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert!(matches!(
            stop_daemon(&mut c, Duration::from_secs(5), None),
            StopOutcome::Stopped(_)
        ));
        let mut deaf = std::process::Command::new("sh")
            .args(["-c", "trap '' TERM; while :; do sleep 0.1; done"])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        match stop_daemon(&mut deaf, Duration::from_millis(300), None) {
            StopOutcome::Hung(r) => assert!(r.contains("tid "), "{r}"),
            o => panic!("{o:?}"),
        }
        assert!(deaf.try_wait().unwrap().is_some(), "killed");
    }
}
