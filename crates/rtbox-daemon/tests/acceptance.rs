//! Issue 5, short CI versions of the acceptance experiments (the 10 s versions with figures:
//! experiments/runtime-acceptance.sh). Real hogs, real SCHED_FIFO, real freezing; tolerances are
//! generous because CI shares a 2-CPU VM. Needs root; otherwise prints why and skips.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rtbox_daemon::{Runtime, RuntimeOptions, Target};
use rtbox_harness::{acceptance_cases, percentile, run_case, spawn_hog, AsLoop};
use rtbox_model::{BoxSpec, Interface, Mode, Placement, Platform, ServerSpec};

/// One real-runtime test at a time, here and machine-wide; `None`, after printing why,
/// without root.
fn serial(name: &str) -> Option<rtbox_harness::turn::Turn> {
    rtbox_harness::turn::root_turn(name, "real SCHED_FIFO threads, cgroups, perf")
}

fn state_file(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rtbox-acc-{tag}-{}.json", std::process::id()))
}

/// A runtime on 2 CPUs with one box "A" of 50/100 ms per CPU, for the membership tests.
fn box_a_runtime(opts: RuntimeOptions) -> Runtime {
    let spec = BoxSpec::new(
        "A",
        Interface::PerCpu {
            budget: 50_000_000,
            period: 100_000_000,
        },
    );
    Runtime::new(Platform::with_cpus(2), vec![spec], opts).expect("runtime")
}

/// A runtime on 2 CPUs with one box "A" of `budget` / `period` (ns) on CPU 1 only.
fn box_a_on_cpu_1(budget: u64, period: u64, opts: RuntimeOptions) -> Runtime {
    let mut spec = BoxSpec::new("A", Interface::PerCpu { budget, period });
    spec.cpus = Some(rtbox_model::CpuSet::parse("1").expect("cpus"));
    Runtime::new(Platform::with_cpus(2), vec![spec], opts).expect("runtime")
}

/// Issue 5, acceptance 1 and 3 (short): a hog in a box gets Q/P of a CPU, also across two CPUs
/// with global placement, and a throttled period rarely runs past its budget, by the charges
/// and by the kernel's own accounting; the steal refunded stays a small part of the run.
/// A parent that waits for a line on stdin, then forks a child sleeping `secs`: attached to box
/// "A" (alone), then told to fork.
fn attach_forking_parent(rt: &mut Runtime, secs: f64) -> std::process::Child {
    let mut parent = Command::new("sh")
        .args(["-c", &format!("read x; sleep {secs} & wait")])
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn");
    let ppid = parent.id() as i32;
    assert_eq!(rt.attach("A", Target::Pid(ppid)).expect("attach"), 1);
    use std::io::Write;
    parent.stdin.take().unwrap().write_all(b"go\n").unwrap();
    parent
}

#[test]
fn hogs_get_their_reservation() {
    let Some(_g) = serial("hogs_get_their_reservation") else {
        return;
    };
    let cases = acceptance_cases(1_500_000_000);
    for want in [
        "1 hog, 1 CPU, 20/100 ms",
        "1 hog, 1 CPU, 2/10 ms",
        "1 hog, 2 CPUs, 30/100 ms global",
        "1 hog, 2 CPUs, 30/100 ms pinned",
    ] {
        let (case, expect) = cases.iter().find(|(c, _)| c.name == want).expect("case");
        let o = run_case(case, &state_file("hog")).expect("run");
        let got = o.per_box[0].1;
        eprintln!(
            "{want}: {got:.4} CPU (expected {:.3}; host steal {:.4} CPU)",
            expect.per_box[0], o.host_steal
        );
        // 0.05 CPU: above the acceptance figure's 0.02 to absorb CI noise in 1.5 s windows, far
        // below the gap between any two wrong answers (0 / Q/P / 1 CPU / 2 Q/P).
        assert_share(want, got, expect.per_box[0], o.host_steal);
        for (b, cpu, v) in &o.overruns {
            let p50 = percentile(v, 50.0);
            eprintln!(
                "  overrun {b}@{cpu}: p50 {p50} ns, max {} ns over {} periods",
                percentile(v, 100.0),
                v.len()
            );
            // The stop takes microseconds; half the periods must end within 1 ms past Q.
            assert!(p50 < 1_000_000, "median overrun {p50} ns");
        }
        // Hard mode freezes the hog every period: the kernel's figures are read then, exactly
        // (for members that stay on one server: not with global placement on 2 CPUs).
        if !want.contains("global") {
            assert!(!o.audit.is_empty(), "{want}: no period read off CPU");
        }
        for a in &o.audit {
            let p50 = percentile(&a.overruns, 50.0);
            assert!(
                p50 < 1_000_000,
                "{want}: median overrun by the kernel {p50} ns"
            );
        }
        // Steal is found only in pairs read off CPU. A pair read while the hog ran would find
        // up to a 4 ms tick per period; real steal is usually ~0.02 % of the time, but a busy
        // host once took 0.07 CPU over a whole case (CI: 108 ms refunded, all of it real). So
        // the refund may be 5 % of the run beyond what the host says it took from the vCPUs.
        let run_ns = case.warmup_ns + case.measure_ns;
        eprintln!(
            "  steal refunded: {} ns (host took {} ns from all vCPUs over the case)",
            o.steal_ns, o.host_steal_case_ns
        );
        assert!(
            o.steal_ns < run_ns / 20 + o.host_steal_case_ns,
            "{want}: steal refunded {} ns, host steal over the case {} ns",
            o.steal_ns,
            o.host_steal_case_ns
        );
    }
}

/// Two CPUs full of boxes (0.9 each, 5 ms periods): every box gets its share, run after run.
/// With the BPF sensor about half of such 3 s runs once ended with one member never stopped
/// again (its box took 0.93 CPU, the other box on its CPU 0): a quiet stop the loop had
/// already undone was replayed as a freeze.
///
/// The case is admitted without the loop's cost (admission counts it and refuses the case by
/// default), so on a full CPU what the loop takes comes out of the boxes there, and so does
/// what the kernel's fair server lends the busy machine's normal hogs beyond its 50 ms
/// (docs/runtime.md, "Known limits"); a box may lose both, measured in the same window. With
/// perf beside the hogs the boxes of one CPU got 0.18 and 0.64 once in CI (their loop took
/// about 0.1 CPU there); a member never stopped again still fails the upper bound (its box
/// took 0.93 CPU).
#[test]
fn full_cpus_give_every_box_its_share() {
    let Some(_g) = serial("full_cpus_give_every_box_its_share") else {
        return;
    };
    let cases = acceptance_cases(1_500_000_000);
    let (case, expect) = cases
        .iter()
        .find(|(c, _)| c.name.starts_with("full CPUs:"))
        .expect("case");
    for run in 0..3 {
        let o = run_case(case, &state_file("full")).expect("run");
        for ((b, got), want) in o.per_box.iter().zip(&expect.per_box) {
            let cpu = case
                .boxes
                .iter()
                .find(|x| &x.name == b)
                .and_then(|x| x.cpus.as_ref()?.iter().next())
                .expect("each box of the case is on one CPU");
            let excess = o.fair_server_excess_on(cpu);
            eprintln!(
                "run {run}: {b} {got:.4} CPU (expected {want:.3}; host steal {:.4}, loop {:.4}, \
                 fair-server excess on CPU {cpu} {excess:.4})",
                o.host_steal, o.loop_cpu
            );
            assert_share(
                &format!("run {run}, box {b}"),
                *got,
                *want,
                o.host_steal + o.loop_cpu + excess,
            );
        }
    }
}

/// A box's share within 0.05 CPU of what it should get; below that only by `lost`, what could
/// not be given to it, measured in the same window (in CPUs): what the host took from the
/// vCPUs (no guest thread runs while its vCPU is stolen; stalls of ~100 ms were measured on an
/// idle machine here, 0.1-0.25 CPU of steal in some 1.5 s windows, session 6), and where a
/// test says so, what the loop or the kernel's fair server took on the box's CPU.
fn assert_share(what: &str, got: f64, want: f64, lost: f64) {
    assert!(
        got < want + 0.05 && got > want - 0.05 - lost,
        "{what}: got {got:.4} CPU, want {want:.3} (-0.05 - measured loss {lost:.4}, +0.05)"
    );
}

/// Issue 5, acceptance items 1 (reclaim), 2 and 4, short: isolation against unmanaged load,
/// nesting, fixed and shared boxes side by side; every box gets its expected CPU share.
///
/// Two expectations depend on what else runs on CPU 0, which the busy-machine mode
/// (`scripts/busy.sh`: an unmanaged SCHED_OTHER hog per CPU) measures over the same window:
/// - a shared box gets the rest of the CPU, in fair competition with the other normal threads
///   there: together with the background hogs it gets the rest, and at least half of its even
///   split of the rest with them;
/// - a reclaim box may use time nobody else wants beyond its reservation: it gets its
///   reservation, and CPU 0 is not left idle (`/proc/stat` over the same window).
#[test]
fn boxes_isolate_nest_and_share() {
    let Some(_g) = serial("boxes_isolate_nest_and_share") else {
        return;
    };
    let cases = acceptance_cases(1_500_000_000);
    for prefix in ["isolation:", "nesting:", "shares (", "reclaim:"] {
        let (case, expect) = cases
            .iter()
            .find(|(c, _)| c.name.starts_with(prefix))
            .expect("case");
        let o = run_case(case, &state_file("mix")).expect("run");
        // Every box of these cases that is not on both CPUs is on CPU 0.
        let (bg, n_bg) = (o.background_on(0), o.background_count_on(0));
        if !o.background.is_empty() {
            eprintln!(
                "{}: background hogs {:?}, CPU 0 idle {:.4}",
                case.name, o.background, o.idle[0]
            );
        }
        for ((b, got), want) in o.per_box.iter().zip(&expect.per_box) {
            let spec = case.boxes.iter().find(|x| &x.name == b).expect("box");
            let what = format!("{}: {b}", case.name);
            match (&spec.interface, spec.mode) {
                (Interface::Shared { .. }, _) => {
                    // The rest of CPU 0 after the fixed boxes and the enforcement loop.
                    let rest = want - o.loop_cpu;
                    eprintln!(
                        "{what} {got:.4} CPU + background {bg:.4} (rest {rest:.3}; host steal \
                         {:.4} CPU)",
                        o.host_steal
                    );
                    assert_share(&what, got + bg, rest, o.host_steal);
                    let even = rest / (1 + n_bg) as f64;
                    assert!(
                        *got > even / 2.0,
                        "{what}: {got:.4} CPU of an even {even:.3}"
                    );
                }
                (Interface::PerCpu { budget, period }, Mode::Reclaim) => {
                    // Beyond its budget the member runs SCHED_IDLE: it takes the time no
                    // other thread wants. So it gets at least its reservation, and CPU 0 is
                    // left idle for no more than the tolerance: on an idle machine that is the
                    // whole CPU, beside the background hogs what they leave (the rest of
                    // normal threads always win over SCHED_IDLE).
                    let reserved = *budget as f64 / *period as f64;
                    eprintln!(
                        "{what} {got:.4} CPU ({reserved:.2} reserved, idle-machine {want:.2}; \
                         background on CPU 0 {bg:.4}, CPU 0 idle {:.4}, host steal {:.4} CPU)",
                        o.idle[0], o.host_steal
                    );
                    assert!(
                        *got > reserved - 0.05 - o.host_steal && *got < want + 0.05,
                        "{what}: got {got:.4} CPU, reserved {reserved:.2}"
                    );
                    assert!(
                        o.idle[0] < 0.05 + o.host_steal,
                        "{what}: CPU 0 idle {:.4} while a reclaiming hog could run",
                        o.idle[0]
                    );
                }
                _ => {
                    eprintln!(
                        "{what} {got:.4} CPU (expected {want:.3}; host steal {:.4} CPU)",
                        o.host_steal
                    );
                    // 0.05 CPU as in hogs_get_their_reservation: CI noise in 1.5 s windows,
                    // well below the gap to any wrong answer (a box unthrottled, starved, or
                    // given another's share).
                    assert_share(&what, *got, *want, o.host_steal);
                }
            }
        }
    }
}

/// Issue 5: children and threads created by members join the box, and leave when they exit.
#[test]
fn new_children_join_the_box() {
    let Some(_g) = serial("new_children_join_the_box") else {
        return;
    };
    let mut rt = box_a_runtime(RuntimeOptions {
        state_file: state_file("join"),
        ..RuntimeOptions::default()
    });
    let mut parent = attach_forking_parent(&mut rt, 5.0);
    let ppid = parent.id() as i32;
    let t0 = Instant::now();
    let mut joined = None;
    while t0.elapsed() < Duration::from_secs(2) {
        let now = rt.now();
        rt.step(now);
        if rt.member_tids("A").len() >= 2 {
            joined = Some(t0.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    let child = rt.member_tids("A").into_iter().find(|&t| t != ppid);
    let _ = parent.kill();
    let _ = parent.wait();
    let took = joined.expect("child never joined");
    eprintln!(
        "child joined after {:.2} ms (includes fork+exec of sleep)",
        took.as_secs_f64() * 1e3
    );
    assert!(took < Duration::from_millis(500));
    // The parent exited: it leaves at the next scan.
    std::thread::sleep(Duration::from_millis(10));
    for _ in 0..20 {
        let now = rt.now();
        rt.step(now);
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(
        !rt.member_tids("A").contains(&ppid),
        "exited parent still a member"
    );
    rt.shutdown();
    // The child started inside the parent's stop group; release puts it where the parent
    // came from, never into an rtbox cgroup.
    if let Some(c) = child {
        if let Ok(cg) = rtbox_linux::cgroup::thread_cgroups(c) {
            assert!(
                !cg.v2.as_deref().unwrap_or("").contains("/rtbox-t"),
                "child left in {cg:?}"
            );
        }
        // SAFETY: the orphaned `sleep` child this test created.
        unsafe { libc::kill(c, libc::SIGKILL) };
    }
}

/// Issue 5: with the kernel's process events, a member's new child joins and an exited member
/// leaves without any /proc scan (scans are disabled here).
#[test]
fn process_events_alone_add_children_and_drop_exits() {
    let Some(_g) = serial("process_events_alone_add_children_and_drop_exits") else {
        return;
    };
    if rtbox_linux::procevents::ProcEvents::open().is_err() {
        eprintln!("skipped: the kernel's proc connector (CONFIG_PROC_EVENTS) is unavailable");
        return;
    }
    let hour = 3_600_000_000_000;
    let mut rt = box_a_runtime(RuntimeOptions {
        state_file: state_file("events"),
        scan: hour,
        full_scan: hour,
        ..RuntimeOptions::default()
    });
    let mut parent = attach_forking_parent(&mut rt, 0.3);
    let ppid = parent.id() as i32;
    let t0 = Instant::now();
    let mut child = None;
    while t0.elapsed() < Duration::from_secs(2) && child.is_none() {
        let now = rt.now();
        rt.step(now);
        child = rt.member_tids("A").into_iter().find(|&t| t != ppid);
        std::thread::sleep(Duration::from_micros(200));
    }
    let child = child.expect("the forked child never joined through process events");
    eprintln!(
        "child joined through process events after {:.2} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );
    // The child (sleep 0.3) and then the parent exit: both leave, still without a scan.
    let t1 = Instant::now();
    while t1.elapsed() < Duration::from_secs(3) && !rt.member_tids("A").is_empty() {
        let now = rt.now();
        rt.step(now);
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = parent.wait();
    let left = rt.member_tids("A");
    rt.shutdown();
    assert!(
        left.is_empty(),
        "exited members {left:?} still managed (child {child})"
    );
}

fn schedstat_ns(tid: i32) -> u64 {
    rtbox_linux::procfs::SchedstatFile::open(tid)
        .ok()
        .and_then(|mut f| f.sum_exec_runtime())
        .unwrap_or(0)
}

/// Steps the runtime as its loop would, for `d`.
fn drive(rt: &mut Runtime, d: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < d {
        let now = rt.now();
        rt.step(now);
        let next = rt.next_wakeup(now);
        std::thread::sleep(Duration::from_nanos(
            next.saturating_sub(rt.now()).max(50_000),
        ));
    }
}

/// Steps the runtime for `d` and sleeps between steps as the daemon's loop does (woken by the
/// sensor, a watched member, process events or a backstop stop).
fn run_loop(rt: &mut Runtime, d: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < d {
        let now = rt.now();
        rt.step(now);
        let next = rt.next_wakeup(now);
        rt.wait_until(next);
    }
}

/// Issue 5, item 3: when the loop cannot run (the kernel's fair server stalled it for 53 ms in
/// the isolation experiment), the per-CPU backstop stops a member at its planned exhaustion; a
/// hog alone on its CPU would otherwise run the whole stall (measured without the backstop:
/// 199.8 ms of a 200 ms stall).
#[test]
fn a_stalled_loop_is_backed_up_per_cpu() {
    let Some(_g) = serial("a_stalled_loop_is_backed_up_per_cpu") else {
        return;
    };
    let _loop = AsLoop::raise();
    let mut rt = box_a_on_cpu_1(
        20_000_000,
        100_000_000,
        RuntimeOptions {
            state_file: state_file("backstop"),
            ..RuntimeOptions::default()
        },
    );
    let hog = spawn_hog().expect("spawn");
    let pid = hog.pid();
    rt.attach("A", Target::Pid(pid)).expect("attach");
    drive(&mut rt, Duration::from_millis(250));
    // Wait, stepping, until the hog runs with most of a fresh budget.
    let t0 = Instant::now();
    let left = loop {
        let now = rt.now();
        rt.step(now);
        let row = rt
            .server_rows()
            .into_iter()
            .find(|r| r.box_name == "A")
            .expect("server of A");
        if !row.throttled && row.runtime > 12_000_000 {
            break row.runtime as u64;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "no fresh budget seen"
        );
        std::thread::sleep(Duration::from_micros(200));
    };
    // The loop stalls for 200 ms.
    let k0 = schedstat_ns(pid);
    std::thread::sleep(Duration::from_millis(200));
    let ran = schedstat_ns(pid).saturating_sub(k0);
    eprintln!(
        "stalled loop: the hog ran {:.2} ms of its {:.2} ms budget left",
        ran as f64 / 1e6,
        left as f64 / 1e6
    );
    // schedstat lags up to a 4 ms tick while the hog runs (k0): 5 ms of tolerance, against the
    // 200 ms it would run without the backstop.
    let stalled_ok = ran <= left + 5_000_000;
    rt.step(rt.now());
    let stops = rt.backstop_stops();
    // The loop is back: the hog gets its share again (0.2 CPU; nothing left frozen).
    let k1 = schedstat_ns(pid);
    drive(&mut rt, Duration::from_millis(500));
    let share = schedstat_ns(pid).saturating_sub(k1) as f64 / 0.5e9;
    eprintln!("after the stall: {share:.3} CPU");
    rt.shutdown();
    let state = rtbox_linux::procfs::stat(pid).expect("hog alive").state;
    drop(hog);
    assert!(stalled_ok, "ran {ran} ns with {left} ns left");
    assert!(stops >= 1, "the backstop did not report its stop");
    // 500 ms hold 5 or 6 replenishments: 0.2-0.24 CPU. More means the core handed out the
    // budgets of the periods the stall missed (measured 0.24-0.36 before the lagging rule).
    assert!((0.1..0.26).contains(&share), "share {share}");
    assert_eq!(state, 'R', "the hog was left stopped");
}

/// Issue 16: a thread that enters a box through the task API while its process is already
/// in the box is a member at once, even when it was made after the process's threads were
/// listed (no step, so no scan, in between; seen: a worker's last thread ran outside its box
/// for a second and its plug-in group was built again mid-run).
#[test]
fn a_thread_made_after_its_process_joined_is_a_member_when_it_enters() {
    let Some(_g) = serial("a_thread_made_after_its_process_joined_is_a_member_when_it_enters")
    else {
        return;
    };
    let mut rt = box_a_runtime(RuntimeOptions {
        state_file: state_file("late-thread"),
        ..RuntimeOptions::default()
    });
    // A process that makes a second thread when told and prints its thread id.
    let mut proc = Command::new("python3")
        .args([
            "-c",
            "import sys, threading, time\n\
             sys.stdin.readline()\n\
             t = threading.Thread(target=lambda: (print(threading.get_native_id(), flush=True), time.sleep(30)), daemon=True)\n\
             t.start()\n\
             time.sleep(30)\n",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let pid = proc.id() as i32;
    rt.attach("A", Target::Pid(pid)).expect("attach");
    use std::io::{BufRead, Write};
    proc.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut line = String::new();
    std::io::BufReader::new(proc.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("thread id");
    let tid: i32 = line.trim().parse().expect("a thread id");
    assert!(
        !rt.member_tids("A").contains(&tid),
        "the new thread joined before it entered: the case is not tested"
    );
    rt.task_enter("A", pid, tid, 0).expect("enter");
    let joined = rt.member_tids("A").contains(&tid);
    rt.shutdown();
    let _ = proc.kill();
    let _ = proc.wait();
    assert!(
        joined,
        "the entering thread {tid} is not a member of its box"
    );
}

/// Issue 5 (never leave the system worse): a runtime dropped without `shutdown` (a panicking
/// embedder) still gives its members back: policy, affinity and cgroup as before, not frozen.
#[test]
fn a_dropped_runtime_restores_its_members() {
    let Some(_g) = serial("a_dropped_runtime_restores_its_members") else {
        return;
    };
    let hog = spawn_hog().expect("hog");
    let pid = hog.pid();
    let before = (
        rtbox_linux::sched::get_attr(pid).expect("attr"),
        rtbox_linux::sched::get_affinity(pid).expect("affinity"),
        std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("cgroup"),
    );
    let mut rt = box_a_runtime(RuntimeOptions {
        state_file: state_file("drop"),
        ..RuntimeOptions::default()
    });
    assert_eq!(rt.attach("A", Target::Pid(pid)).expect("attach"), 1);
    // 130 ms: the hog used both budgets of its first period and sat frozen until the next.
    drive(&mut rt, Duration::from_millis(130));
    let managed = rtbox_linux::sched::get_attr(pid).expect("attr");
    assert!(managed.is_rt(), "the hog was never promoted: {managed:?}");
    drop(rt);
    let after = (
        rtbox_linux::sched::get_attr(pid).expect("attr"),
        rtbox_linux::sched::get_affinity(pid).expect("affinity"),
        std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("cgroup"),
    );
    assert_eq!(after, before, "not restored by drop");
    // Not frozen: it runs again. On a busy machine it shares its CPU with other normal threads
    // (measured: 5 ms in 100 ms beside an unmanaged hog per CPU and compilers), so the check is
    // that it runs at all over 300 ms; a frozen thread runs 0.
    let t0 = schedstat_ns(pid);
    std::thread::sleep(Duration::from_millis(300));
    let ran = schedstat_ns(pid) - t0;
    assert!(ran > 0, "the hog did not run in 300 ms: still frozen?");
    assert!(!state_file("drop").exists(), "journal left behind");
}

/// Issue 14: a busy member alone on its CPU repeats the same period (thawed at the
/// replenishment, stopped by the backstop at the exhaustion), and with the BPF sensor the loop
/// makes most replenishments with a short step planned at its last full step
/// (`runtime/ahead.rs`). The member still gets exactly its budget per period: the short steps
/// thaw it on time and the backstop stops it. With the perf sensor no short step is planned.
#[test]
fn replenishments_planned_ahead_keep_the_share() {
    let Some(_g) = serial("replenishments_planned_ahead_keep_the_share") else {
        return;
    };
    let _loop = AsLoop::raise();
    let mut rt = box_a_on_cpu_1(
        2_000_000,
        10_000_000,
        RuntimeOptions {
            state_file: state_file("ahead"),
            step_cost: 0,
            ..RuntimeOptions::default()
        },
    );
    let bpf = rt.sensor_kind().name() == "bpf";
    let hog = spawn_hog().expect("spawn");
    let pid = hog.pid();
    rt.attach("A", Target::Pid(pid)).expect("attach");
    // Steps and sleeps as the daemon's loop does (a wake-up at its deadline may be short).
    let run = |rt: &mut Runtime, d: Duration| {
        let t0 = Instant::now();
        while t0.elapsed() < d {
            rt.step(rt.now());
            let next = rt.next_wakeup(rt.now());
            rt.follow_exhaustion();
            rt.sleep_until(rt.to_monotonic(next));
        }
    };
    run(&mut rt, Duration::from_millis(300));
    let (k0, s0) = (schedstat_ns(pid), rt.short_steps());
    run(&mut rt, Duration::from_millis(1500));
    let share = schedstat_ns(pid).saturating_sub(k0) as f64 / 1.5e9;
    let short = rt.short_steps() - s0;
    rt.shutdown();
    drop(hog);
    eprintln!(
        "sensor {}: {short} short steps in 1.5 s (150 periods), member {share:.4} CPU",
        rt.sensor_kind().name()
    );
    // 0.02 CPU: ten times the acceptance runs' error, below a lost or an extra budget in
    // one period in ten (0.02).
    assert!((share - 0.2).abs() < 0.02, "share {share}");
    if bpf {
        // A full step at least every poll interval (100 ms) and after any other wake-up:
        // well over half of the 150 replenishments are short on a quiet machine.
        assert!(short >= 30, "only {short} short steps");
    } else {
        assert_eq!(short, 0, "short steps without the BPF sensor");
    }
}

/// Two busy members of equal priority in a global box whose vCPUs differ (4 / 10 ms on CPU 0,
/// 2 / 5 ms on CPU 1): each stays on the vCPU it waits on and gets that vCPU's 0.4, as the
/// core's `a_vcpu_that_comes_back_goes_to_the_equal_that_waits_on_it` says. Before that rule
/// the first member in arrival order took every vCPU that came back (0.6 against 0.2 in the
/// core, a migration at most replenishments); the migrations are counted per server.
#[test]
fn equal_members_of_a_global_box_keep_their_own_vcpu() {
    let Some(_g) = serial("equal_members_of_a_global_box_keep_their_own_vcpu") else {
        return;
    };
    let _loop = AsLoop::raise();
    let mut spec = BoxSpec::new(
        "G",
        Interface::Servers(vec![
            ServerSpec {
                cpu: 0,
                budget: 4_000_000,
                period: 10_000_000,
            },
            ServerSpec {
                cpu: 1,
                budget: 2_000_000,
                period: 5_000_000,
            },
        ]),
    );
    spec.placement = Placement::Global;
    let opts = RuntimeOptions {
        state_file: state_file("equals"),
        step_cost: 0,
        ..RuntimeOptions::default()
    };
    let mut rt = Runtime::new(Platform::with_cpus(2), vec![spec], opts).expect("runtime");
    let hogs: Vec<_> = (0..2).map(|_| spawn_hog().expect("spawn")).collect();
    for h in &hogs {
        rt.attach("G", Target::Pid(h.pid())).expect("attach");
    }
    let moved = |rt: &Runtime| rt.server_rows().iter().map(|r| r.migrations).sum::<u64>();
    drive(&mut rt, Duration::from_millis(300));
    let k0: Vec<u64> = hogs.iter().map(|h| schedstat_ns(h.pid())).collect();
    let m0 = moved(&rt);
    let t0 = Instant::now();
    drive(&mut rt, Duration::from_millis(1500));
    let secs = t0.elapsed().as_secs_f64();
    let shares: Vec<f64> = hogs
        .iter()
        .zip(&k0)
        .map(|(h, k)| schedstat_ns(h.pid()).saturating_sub(*k) as f64 / 1e9 / secs)
        .collect();
    let migrations = moved(&rt) - m0;
    rt.shutdown();
    drop(hogs);
    eprintln!("members {shares:?} CPU, {migrations} migrations in {secs:.2} s");
    // 0.04 CPU: a tenth of each share, far below the 0.2 the old rule moved between them.
    for (i, got) in shares.iter().enumerate() {
        assert!(
            (got - 0.4).abs() < 0.04,
            "member {i}: {got:.4} of 0.4 ({shares:?})"
        );
    }
    // 150 periods of the slower vCPU in the window: the old rule moved a member at most of
    // them; a late step may still move one now and then.
    assert!(migrations <= 15, "{migrations} migrations");
}

/// Issue 14: with the perf sensor, sleeping members are watched, not read, frozen or decided
/// at every step; one that wakes while its box is spent must still be stopped at once. A box
/// of 2 ms / 20 ms on CPU 1 holds a hog, 40 sleepers (each read by a stat only every ~20 steps)
/// and a napper that wakes every 15 ms and burns a few ms: all its runs come out of the box's
/// 0.1 CPU. Unseen until its turn, the napper alone would take ~0.2 CPU more.
#[test]
fn with_perf_a_watched_sleeper_that_wakes_is_stopped_at_once() {
    let Some(_g) = serial("with_perf_a_watched_sleeper_that_wakes_is_stopped_at_once") else {
        return;
    };
    let _loop = AsLoop::raise();
    let mut rt = box_a_on_cpu_1(
        2_000_000,
        20_000_000,
        RuntimeOptions {
            state_file: state_file("perfwatch"),
            sensor: rtbox_daemon::runtime::sensor::SensorChoice::Perf,
            perf_watch: true,
            ..RuntimeOptions::default()
        },
    );
    let hog = spawn_hog().expect("spawn");
    rt.attach("A", Target::Pid(hog.pid())).expect("attach hog");
    let mut sleepers: Vec<std::process::Child> = (0..40)
        .map(|_| Command::new("sleep").arg("100").spawn().expect("sleep"))
        .collect();
    for s in &sleepers {
        rt.attach("A", Target::Pid(s.id() as i32))
            .expect("attach sleeper");
    }
    // One process that never forks (a fork is a join, and a join makes the next step visit
    // every member, which would find the napper without its watch).
    let mut napper = Command::new("perl")
        .args([
            "-e",
            "while (1) { select(undef, undef, undef, 0.015); for ($i = 0; $i < 100000; $i++) {} }",
        ])
        .spawn()
        .expect("napper (perl)");
    let napper_pid = napper.id() as i32;
    rt.attach("A", Target::Pid(napper_pid))
        .expect("attach napper");
    run_loop(&mut rt, Duration::from_millis(500));
    // The hog and the napper, by the kernel.
    let hog_pid = hog.pid();
    let box_ns = || schedstat_ns(hog_pid) + schedstat_ns(napper_pid);
    let (b0, t0) = (box_ns(), Instant::now());
    run_loop(&mut rt, Duration::from_millis(1500));
    let share = box_ns().saturating_sub(b0) as f64 / t0.elapsed().as_nanos() as f64;
    let watching = rt.perf_watching();
    rt.shutdown();
    let _ = napper.kill();
    let _ = napper.wait();
    for s in &mut sleepers {
        let _ = s.kill();
        let _ = s.wait();
    }
    drop(hog);
    eprintln!("box of 0.1 CPU with a napper and 40 sleepers (perf): {share:.4} CPU; {watching} members watched");
    assert!(watching >= 30, "the sleepers were not watched ({watching})");
    // 0.1 reserved; the napper's wake-ups on the spent box are stopped within the loop's
    // wake-up (~0.1-0.5 ms each, ~66 a second): at most ~0.03 more. Unseen runs add ~0.2.
    assert!(share < 0.16, "the box took {share:.4} CPU of its 0.1");
    assert!(share > 0.06, "the box got {share:.4} CPU of its 0.1");
}

/// A thread other than its process's leader that calls exec takes the leader's tid (the
/// kernel ends every other thread first). The member goes on under that tid, in its box, and
/// gets its original state back when rtbox lets go. Before, with BPF the exec'ed program was
/// found by no switch and stayed frozen (0 CPU of its 0.2), and with either sensor it was
/// recorded anew with rtbox's band as its "original" state and left at SCHED_FIFO pinned to
/// the box's CPU.
#[test]
fn a_member_that_execs_from_another_thread_stays_boxed_and_is_restored() {
    let Some(_g) = serial("a_member_that_execs_from_another_thread_stays_boxed_and_is_restored")
    else {
        return;
    };
    use rtbox_daemon::runtime::sensor::{SensorChoice, SensorKind};
    let _loop = AsLoop::raise();
    for sensor in [SensorChoice::Bpf, SensorChoice::Perf] {
        let opts = RuntimeOptions {
            state_file: state_file("exec"),
            sensor,
            ..RuntimeOptions::default()
        };
        let mut rt = match std::panic::catch_unwind(|| box_a_on_cpu_1(10_000_000, 50_000_000, opts))
        {
            Ok(rt) => rt,
            Err(_) if sensor == SensorChoice::Bpf => {
                eprintln!("skipped with bpf: the BPF sensor does not load here");
                continue;
            }
            Err(e) => std::panic::resume_unwind(e),
        };
        let name = match rt.sensor_kind() {
            SensorKind::Bpf => "bpf",
            SensorKind::Perf => "perf",
        };
        // A second thread that waits, then replaces the process by a busy loop.
        let mut child = Command::new("python3")
            .args([
                "-c",
                "import os, threading, time\n\
                 def go():\n    time.sleep(0.4)\n    os.execv('/bin/sh', ['sh', '-c', 'while :; do :; done'])\n\
                 t = threading.Thread(target=go); t.start(); t.join()",
            ])
            .spawn()
            .expect("python3");
        let pid = child.id() as i32;
        let threads = || {
            std::fs::read_dir(format!("/proc/{pid}/task"))
                .map(|d| d.count())
                .unwrap_or(0)
        };
        let t0 = Instant::now();
        while threads() < 2 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(threads(), 2, "{name}: the second thread never started");
        let before = (
            rtbox_linux::sched::get_attr(pid).expect("attr"),
            rtbox_linux::sched::get_affinity(pid).expect("affinity"),
            std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("cgroup"),
        );
        assert_eq!(rt.attach("A", Target::Pid(pid)).expect("attach"), 2);
        // The exec at 0.4 s; measured from 0.7 s on.
        run_loop(&mut rt, Duration::from_millis(700));
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        let (c0, t1) = (schedstat_ns(pid), Instant::now());
        run_loop(&mut rt, Duration::from_millis(1500));
        let share = schedstat_ns(pid).saturating_sub(c0) as f64 / t1.elapsed().as_nanos() as f64;
        let members = rt.member_tids("A");
        rt.shutdown();
        let after = (
            rtbox_linux::sched::get_attr(pid).expect("attr"),
            rtbox_linux::sched::get_affinity(pid).expect("affinity"),
            std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("cgroup"),
        );
        let _ = child.kill();
        let _ = child.wait();
        eprintln!("{name}: after the exec ({exe:?}) members {members:?}, share {share:.4} of 0.2");
        assert!(
            exe.ends_with("sh") || exe.ends_with("dash") || exe.ends_with("bash"),
            "{name}: no exec happened: {exe:?}"
        );
        assert_eq!(
            members,
            vec![pid],
            "{name}: the exec'ed thread is not the member"
        );
        // 0.2 reserved on CPU 1; a frozen member gets 0, an unbounded one up to 1.
        assert!(
            share > 0.12 && share < 0.28,
            "{name}: the box gave {share:.4} CPU of its 0.2"
        );
        assert_eq!(after, before, "{name}: not restored after the exec");
    }
}

/// A member whose process another program moves to another v2 cgroup leaves its stop group
/// (and, if it was frozen, the freeze). The loop sees it run while stopped, gives it a new
/// stop group inside its new cgroup and stops it there: the box keeps its share. Before, the
/// hog ran free at its band (0.95 of its CPU, its box 0.2) until it left. At release it stays
/// where the other program put it.
#[test]
fn a_member_moved_to_another_cgroup_is_stopped_there() {
    let Some(_g) = serial("a_member_moved_to_another_cgroup_is_stopped_there") else {
        return;
    };
    let layout = rtbox_linux::cgroup::detect().expect("cgroup layout");
    let Some(v2) = layout.v2.clone() else {
        eprintln!("skipped: no cgroup v2 hierarchy (members are stopped by SCHED_IDLE)");
        return;
    };
    let elsewhere = v2.join(format!("rtbox-acc-moved-{}", std::process::id()));
    std::fs::create_dir(&elsewhere).expect("a cgroup to move the member to");
    let _loop = AsLoop::raise();
    let mut rt = box_a_on_cpu_1(
        10_000_000,
        50_000_000,
        RuntimeOptions {
            state_file: state_file("moved"),
            ..RuntimeOptions::default()
        },
    );
    let hog = spawn_hog().expect("hog");
    let pid = hog.pid();
    rt.attach("A", Target::Pid(pid)).expect("attach");
    run_loop(&mut rt, Duration::from_millis(300));
    std::fs::write(elsewhere.join("cgroup.procs"), pid.to_string()).expect("move the hog");
    run_loop(&mut rt, Duration::from_millis(300));
    let (c0, t0) = (schedstat_ns(pid), Instant::now());
    run_loop(&mut rt, Duration::from_millis(1500));
    let share = schedstat_ns(pid).saturating_sub(c0) as f64 / t0.elapsed().as_nanos() as f64;
    let managed = rtbox_linux::cgroup::thread_cgroups(pid)
        .expect("cgroups")
        .v2;
    rt.shutdown();
    let after = rtbox_linux::cgroup::thread_cgroups(pid)
        .expect("cgroups")
        .v2;
    drop(hog);
    // The hog's exit leaves the cgroup empty a moment later.
    for _ in 0..100 {
        if std::fs::remove_dir(&elsewhere).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let name = elsewhere.file_name().unwrap().to_string_lossy().to_string();
    eprintln!("moved member: {share:.4} CPU of 0.2, in {managed:?} while managed, {after:?} after");
    assert!(
        share > 0.12 && share < 0.28,
        "the box gave {share:.4} CPU of its 0.2"
    );
    assert_eq!(
        managed.as_deref(),
        Some(format!("/{name}/rtbox-t{pid}").as_str()),
        "not stopped from a group inside its new cgroup"
    );
    assert_eq!(
        after.as_deref(),
        Some(format!("/{name}").as_str()),
        "not left where it was moved"
    );
}
