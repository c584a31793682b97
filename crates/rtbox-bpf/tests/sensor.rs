//! The sensor on the real kernel (root): readiness events, exact runtime off CPU, fork and exit.
//! Without root or without a loadable program the test says why and checks that the refusal is
//! typed.

use rtbox_bpf::{now_ns, Event, Registration, Sensor, SensorError, State};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

/// This thread's own CPU time (CLOCK_THREAD_CPUTIME_ID), in ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Consumes `d` of CPU time (not wall time: the machine may be busy).
fn spin(d: Duration) {
    let end = thread_cpu_ns() + d.as_nanos() as u64;
    while thread_cpu_ns() < end {
        std::hint::spin_loop();
    }
}

/// The kernel's sum_exec_runtime of a thread of this process (first field of its schedstat).
fn schedstat_ns(tid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).unwrap();
    s.split_whitespace().next().unwrap().parse().unwrap()
}

/// Waits up to 2 s for events matching `want`, draining as it goes.
fn wait_for(sensor: &Sensor, seen: &mut Vec<Event>, want: impl Fn(&Event) -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(2);
    while Instant::now() < end {
        seen.extend(sensor.drain());
        if seen.iter().any(&want) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

/// The sensor, or `None` (the test says why) where it cannot load: not built, or not root.
/// Root must load a built sensor; with `RTBOX_REQUIRE_BPF=1` (the test suite on a machine with
/// kernel BTF) it must also have been built.
fn sensor_or_skip(test: &str) -> Option<Arc<Sensor>> {
    match Sensor::load() {
        Ok(s) => Some(Arc::new(s)),
        Err(e) => {
            // SAFETY: geteuid has no preconditions.
            let root = unsafe { libc::geteuid() } == 0;
            assert!(matches!(e, SensorError::NotBuilt(_) | SensorError::Load(_)));
            assert!(
                !root || matches!(e, SensorError::NotBuilt(_)),
                "root could not load: {e}"
            );
            let required = std::env::var("RTBOX_REQUIRE_BPF").is_ok_and(|v| v == "1");
            assert!(!(root && required), "RTBOX_REQUIRE_BPF=1: {e}");
            eprintln!("{test} skipped: {e} (root: {root})");
            None
        }
    }
}

#[test]
fn sensor_follows_a_member_through_run_block_wake_fork_and_exit() {
    let Some(sensor) = sensor_or_skip("sensor test") else {
        return;
    };
    let (go_tx, go_rx) = mpsc::channel::<u32>();
    let (tid_tx, tid_rx) = mpsc::channel::<u32>();
    let worker = std::thread::spawn(move || {
        tid_tx.send(gettid()).unwrap();
        // 1: spin, then block until told.
        go_rx.recv().unwrap();
        spin(Duration::from_millis(30));
        go_rx.recv().unwrap();
        // 2: woken; spin, create a thread that exits, block again.
        spin(Duration::from_millis(10));
        let tx = tid_tx.clone();
        let child = std::thread::spawn(move || {
            tx.send(gettid()).unwrap();
        });
        child.join().unwrap();
        go_rx.recv().unwrap();
    });
    let tid = tid_rx.recv().unwrap();
    let member = Registration::new(&sensor, tid, 5, schedstat_ns(tid), false).unwrap();
    let mut seen = Vec::new();
    go_tx.send(0).unwrap();
    assert!(
        wait_for(
            &sensor,
            &mut seen,
            |e| matches!(e, Event::ServerActive { server: 5, tid: t } if *t == tid)
        ),
        "no ServerActive(5) when the member woke: {seen:?}"
    );
    assert!(
        wait_for(
            &sensor,
            &mut seen,
            |e| matches!(e, Event::ServerIdle { server: 5, tid: t } if *t == tid)
        ),
        "no ServerIdle(5) when the member blocked: {seen:?}"
    );
    let r = member.read(now_ns());
    assert_eq!(r.state, State::Blocked);
    assert!(r.exact);
    assert_eq!(
        r.runtime_ns,
        schedstat_ns(tid),
        "off CPU the figure is the kernel's own"
    );
    assert!(
        r.runtime_ns >= 30_000_000,
        "spun 30 ms, sensor says {} ns",
        r.runtime_ns
    );
    assert_eq!(sensor.runnable(5), 0);
    // Its run and block marked it dirty; asleep, it stays unmarked.
    assert!(
        sensor.take_dirty().contains(&tid),
        "a switched member is marked"
    );
    std::thread::sleep(Duration::from_millis(20));
    assert!(!member.dirty(), "a sleeping member is not marked");
    assert!(!sensor.take_dirty().contains(&tid));
    seen.clear();
    go_tx.send(0).unwrap();
    let child = tid_rx.recv().unwrap();
    assert!(
        wait_for(
            &sensor,
            &mut seen,
            |e| matches!(e, Event::Fork { tid: c, parent, .. } if *c == child && *parent == tid)
        ),
        "no Fork of {child} by {tid}: {seen:?}"
    );
    // The child is not a member: its exit is nobody's business; the member's is.
    assert!(!seen
        .iter()
        .any(|e| matches!(e, Event::Exit { tid: c, .. } if *c == child)));
    go_tx.send(0).unwrap();
    worker.join().unwrap();
    assert!(
        wait_for(
            &sensor,
            &mut seen,
            |e| matches!(e, Event::Exit { tid: t, .. } if *t == tid)
        ),
        "no Exit of {tid}: {seen:?}"
    );
    assert_eq!(member.read(now_ns()).state, State::Exited);
    drop(member);
    assert!(sensor.is_empty());
    assert_eq!(sensor.lost_events(), 0);
}

/// A member beside another runnable member on its server wakes the loop only when it is a
/// global box's member (`set_every`): then each of its wake-ups and blocks is news, since the
/// loop's core places a global box's members across vCPUs by priority.
#[test]
fn a_global_members_every_wake_and_block_is_news() {
    let Some(sensor) = sensor_or_skip("sensor test") else {
        return;
    };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (tid_tx, tid_rx) = mpsc::channel::<u32>();
    let spinner = {
        let (stop, tid_tx) = (stop.clone(), tid_tx.clone());
        std::thread::spawn(move || {
            tid_tx.send(gettid()).unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    let busy = tid_rx.recv().unwrap();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let sleeper = std::thread::spawn(move || {
        tid_tx.send(gettid()).unwrap();
        // Twice: woken, spin 5 ms of CPU, block again.
        for _ in 0..2 {
            go_rx.recv().unwrap();
            spin(Duration::from_millis(5));
        }
        go_rx.recv().unwrap();
    });
    let tid = tid_rx.recv().unwrap();
    let _busy = Registration::new(&sensor, busy, 7, schedstat_ns(busy), true).unwrap();
    let member = Registration::new(&sensor, tid, 7, schedstat_ns(tid), false).unwrap();
    let mine = |e: &Event| matches!(e, Event::ServerActive { server: 7, tid: t } | Event::ServerIdle { server: 7, tid: t } if *t == tid);
    // A pinned box's member: its server keeps a runnable member throughout, so no news.
    go_tx.send(()).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let seen: Vec<Event> = sensor.drain();
    assert!(
        !seen.iter().any(mine),
        "a member beside a runnable one woke the loop: {seen:?}"
    );
    assert!(member.read(now_ns()).runtime_ns > 0);
    // A global box's member: its wake-up and its block are both news.
    member.set_every(true);
    go_tx.send(()).unwrap();
    let mut seen = Vec::new();
    assert!(
        wait_for(
            &sensor,
            &mut seen,
            |e| matches!(e, Event::ServerActive { server: 7, tid: t } if *t == tid)
        ),
        "no ServerActive(7) for a global member's wake-up: {seen:?}"
    );
    assert!(
        wait_for(
            &sensor,
            &mut seen,
            |e| matches!(e, Event::ServerIdle { server: 7, tid: t } if *t == tid)
        ),
        "no ServerIdle(7) for a global member's block: {seen:?}"
    );
    go_tx.send(()).unwrap();
    sleeper.join().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spinner.join().unwrap();
}

/// A member registered while it runs starts from a figure that may be as old as its last tick
/// (/proc's); its time before the join is left out of every figure from its first switch on,
/// so that its first server is charged only what it ran after the join.
#[test]
fn a_member_registered_running_is_not_charged_its_time_before_the_join() {
    let Some(sensor) = sensor_or_skip("sensor test") else {
        return;
    };
    let (tid_tx, tid_rx) = mpsc::channel::<u32>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        tid_tx.send(gettid()).unwrap();
        // 50 ms of CPU before the join, 30 after it, then block; once more 10 ms, block.
        spin(Duration::from_millis(50));
        go_rx.recv().unwrap();
        spin(Duration::from_millis(30));
        go_rx.recv().unwrap();
        spin(Duration::from_millis(10));
        go_rx.recv().unwrap();
    });
    let tid = tid_rx.recv().unwrap();
    // Registered running with the figure of a stale /proc read (its start): the worker's
    // 50 ms before the join are not in it. Woken first, once it is done with them.
    let sleeping = || {
        let st = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        st.rsplit(") ").next().is_some_and(|r| r.starts_with('S'))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !sleeping() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(sleeping(), "the worker never blocked after its first 50 ms");
    go_tx.send(()).unwrap();
    let joined = now_ns();
    let member = Registration::new(&sensor, tid, 9, 0, true).unwrap();
    // Blocked again (in the second recv) once its 30 ms are spun.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while member.read(now_ns()).state != State::Blocked && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let wall = now_ns() - joined;
    let r = member.read(now_ns());
    assert_eq!(r.state, State::Blocked, "the worker did not block: {r:?}");
    let kernel = schedstat_ns(tid);
    let pre = member.pre_join_ns();
    assert!(
        r.runtime_ns <= wall,
        "charged {} ns after a join {} ns ago",
        r.runtime_ns,
        wall
    );
    assert!(
        pre >= 40_000_000,
        "the 50 ms before the join were not found: {pre} ns (figure {}, kernel {kernel})",
        r.runtime_ns
    );
    assert_eq!(
        r.runtime_ns + pre,
        kernel,
        "off CPU: the kernel's figure less the time before"
    );
    // Later runs count in full, with the same time left out.
    go_tx.send(()).unwrap();
    std::thread::sleep(Duration::from_millis(5));
    while member.read(now_ns()).state != State::Blocked && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let r2 = member.read(now_ns());
    assert!(
        r2.runtime_ns >= r.runtime_ns + 9_000_000,
        "{r2:?} after {r:?}"
    );
    assert_eq!(r2.runtime_ns + pre, schedstat_ns(tid));
    assert_eq!(member.pre_join_ns(), pre);
    go_tx.send(()).unwrap();
    worker.join().unwrap();
}

/// A tid registered again while an older registration of it is still held (a backstop's plan
/// holds clones; the daemon registers again a member whose tid an exec gave it): the map names
/// the new one, which keeps it when the old one goes, and the member's exit names its slot.
#[test]
fn a_tid_registered_again_keeps_its_entry_when_the_old_registration_goes() {
    let Some(sensor) = sensor_or_skip("sensor test") else {
        return;
    };
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (tid_tx, tid_rx) = mpsc::channel::<u32>();
    let worker = std::thread::spawn(move || {
        tid_tx.send(gettid()).unwrap();
        go_rx.recv().unwrap();
        spin(Duration::from_millis(20));
        go_rx.recv().unwrap();
    });
    let tid = tid_rx.recv().unwrap();
    let old = Registration::new(&sensor, tid, 3, schedstat_ns(tid), false).unwrap();
    let new = Registration::new(&sensor, tid, 3, schedstat_ns(tid), false).unwrap();
    assert_ne!(old.slot(), new.slot());
    drop(old);
    assert_eq!(sensor.len(), 1);
    go_tx.send(()).unwrap();
    let t0 = Instant::now();
    while new.read(now_ns()).runtime_ns < 20_000_000 && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(10));
    let r = new.read(now_ns());
    assert!(
        r.runtime_ns >= 20_000_000,
        "the new registration was not kept up: {r:?}"
    );
    assert_eq!(r.runtime_ns, schedstat_ns(tid));
    go_tx.send(()).unwrap();
    worker.join().unwrap();
    let mut seen = Vec::new();
    let slot = new.slot();
    assert!(
        wait_for(
            &sensor,
            &mut seen,
            |e| matches!(e, Event::Exit { tid: t, slot: s, .. } if *t == tid && *s == slot)
        ),
        "no Exit of {tid} naming slot {slot}: {seen:?}"
    );
}

/// A thread other than its process's leader that calls exec takes the leader's tid: the
/// program reports it with the old tid, after the leader's exit.
#[test]
fn an_exec_by_another_thread_is_reported_with_its_old_tid() {
    let Some(sensor) = sensor_or_skip("sensor test") else {
        return;
    };
    let mut child = match std::process::Command::new("python3")
        .args([
            "-c",
            "import os, threading, time\n\
             def go():\n    time.sleep(0.3)\n    os.execv('/bin/sleep', ['sleep', '1'])\n\
             t = threading.Thread(target=go); t.start(); t.join()",
        ])
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("python3 (installed by scripts/setup.sh): {e}"),
    };
    let pid = child.id();
    let threads = || -> Vec<u32> {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let t0 = Instant::now();
    while threads().len() < 2 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let other = threads()
        .into_iter()
        .find(|&t| t != pid)
        .expect("the second thread");
    let stat = |t: u32| -> u64 {
        std::fs::read_to_string(format!("/proc/{t}/schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let leader = Registration::new(&sensor, pid, 1, stat(pid), false).unwrap();
    let caller = Registration::new(&sensor, other, 1, stat(other), false).unwrap();
    let mut seen = Vec::new();
    let reported = wait_for(
        &sensor,
        &mut seen,
        |e| matches!(e, Event::Exec { tid, old, .. } if *tid == pid && *old == other),
    );
    let _ = child.kill();
    let _ = child.wait();
    assert!(reported, "no Exec of {other} as {pid}: {seen:?}");
    let exit = seen.iter().position(
        |e| matches!(e, Event::Exit { tid, slot, .. } if *tid == pid && *slot == leader.slot()),
    );
    let exec = seen.iter().position(|e| matches!(e, Event::Exec { .. }));
    assert!(
        exit.is_some() && exit < exec,
        "the leader's exit not before the exec: {seen:?}"
    );
    drop(caller);
}
