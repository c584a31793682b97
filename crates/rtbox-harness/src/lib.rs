//! The experiment harness: drives the real rtbox runtime for experiments and root tests. A case
//! runs a [`Runtime`] in this process (the calling thread becomes the enforcement loop at
//! SCHED_FIFO [`LOOP_PRIO`]) against real CPU hogs, and measures what each hog got from the
//! kernel's schedstat. [`BusyHogs`] loads the machine for the busy-machine test mode.
//!
//! Used by `examples/acceptance.rs` (10 s cases, figures for docs/benchmarks-runtime.md) and by
//! the short CI versions in `rtbox-daemon/tests/acceptance.rs`. Everything is restored at the
//! end of a case. Not part of the daemon: nothing here runs in production.

pub mod exsched;
pub mod fidelity;
pub mod hcbs;
pub mod stopwatch;
pub mod turn;

use std::process::{Child, Command, Stdio};

use rtbox_linux::sched::{self, SchedAttr};
use rtbox_model::{BoxSpec, Platform};

use rtbox_daemon::{Runtime, RuntimeOptions, Target, LOOP_PRIO};

/// An unmanaged hog's scheduling: none (SCHED_OTHER), or FIFO at a priority, optionally pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unmanaged {
    pub fifo: Option<u32>,
    pub cpu: Option<u32>,
}

/// One experiment.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub cpus: u32,
    pub boxes: Vec<BoxSpec>,
    /// Hogs per box: (box name, count).
    pub hogs: Vec<(String, usize)>,
    pub unmanaged: Vec<Unmanaged>,
    pub warmup_ns: u64,
    pub measure_ns: u64,
}

/// What a case measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// CPUs received per box (sum over its hogs), in the order of `Case::hogs`.
    pub per_box: Vec<(String, f64)>,
    /// CPUs received by each unmanaged hog.
    pub unmanaged: Vec<f64>,
    /// Overrun per finished throttled period, per (box, cpu), ns.
    pub overruns: Vec<(String, u32, Vec<u64>)>,
    /// CPU time charged to each box's servers over the measurement, in CPUs.
    pub charged: Vec<(String, f64)>,
    /// Overrun already consumed when the loop saw the exhaustion, per (box, cpu), ns.
    pub detected: Vec<(String, u32, Vec<u64>)>,
    /// Per server: each throttled period's overrun by the kernel's own accounting.
    pub audit: Vec<Audit>,
    /// Perf clock time of the members that the kernel says they did not run (host steal),
    /// kept out of their charges, ns over the whole case.
    pub steal_ns: u64,
    /// Members the per-CPU backstop stopped because the loop was late.
    pub backstop_stops: u64,
    /// When the loop took back each backstop stop, seconds since the runtime started.
    pub backstop_times: Vec<f64>,
    /// How late the loop woke after the time it asked for, ns (one sample per step).
    pub wake_late: Vec<u64>,
    /// How long each step took (charge, decide, apply), ns.
    pub step_ns: Vec<u64>,
    /// CPU time of the enforcement loop thread over the measurement, in CPUs.
    pub loop_cpu: f64,
    /// Time the host took from this VM's vCPUs during the measurement (all vCPUs together, in
    /// CPUs: ns stolen per ns of wall time; `/proc/stat` steal). No guest thread runs then,
    /// so no box can be given its share of that time.
    pub host_steal: f64,
    /// Time the host took from all vCPUs over the whole case (warm-up and measurement), ns:
    /// the span the runtime's `steal_ns` covers, so what bounds a true refund.
    pub host_steal_case_ns: u64,
    /// CPU received by each background hog of the busy-machine test mode
    /// ([`background_pids`]), with its affinity, in CPUs.
    pub background: Vec<(Vec<u32>, f64)>,
    /// Idle time of each CPU over the measurement (`/proc/stat`, idle + iowait), in CPUs.
    pub idle: Vec<f64>,
}

impl Outcome {
    /// CPU the background hogs pinned to `cpu` received, in CPUs.
    pub fn background_on(&self, cpu: u32) -> f64 {
        self.background
            .iter()
            .filter(|(aff, _)| aff.as_slice() == [cpu])
            .map(|(_, c)| c)
            .sum()
    }

    /// What the kernel's fair server lent the background hogs on `cpu` beyond its 50 ms a
    /// second (and 0.005 of measuring), in CPUs: time real-time threads there lost whatever
    /// rtbox does (this kernel's fair server sometimes lends far more: docs/runtime.md, "Known
    /// limits"). 0 without background hogs.
    pub fn fair_server_excess_on(&self, cpu: u32) -> f64 {
        (self.background_on(cpu) - 0.05 - 0.005).max(0.0)
    }

    /// Background hogs pinned to `cpu`.
    pub fn background_count_on(&self, cpu: u32) -> usize {
        self.background
            .iter()
            .filter(|(aff, _)| aff.as_slice() == [cpu])
            .count()
    }
}

/// The unmanaged hogs `scripts/busy.sh` runs for the busy-machine test mode
/// (`RTBOX_TEST_BUSY_PIDS`), so that a test can measure what they took; empty otherwise.
pub fn background_pids() -> Vec<i32> {
    std::env::var("RTBOX_TEST_BUSY_PIDS")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Whether the tests run in the busy-machine mode (`scripts/busy.sh`).
pub fn busy_mode() -> bool {
    std::env::var_os("RTBOX_TEST_BUSY").is_some()
}

/// Idle time of each CPU so far (`/proc/stat` `cpuN` lines: idle + iowait), in ns.
pub fn idle_ns_per_cpu() -> Vec<u64> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .ok()
        .filter(|&h| h > 0)
        .unwrap_or(100);
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    stat.lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .map(|l| {
            let f: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            (f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0)) * 1_000_000_000 / hz
        })
        .collect()
}

/// One server's periods by the kernel's accounting (`RuntimeOptions::audit`).
#[derive(Debug, Clone)]
pub struct Audit {
    pub box_name: String,
    pub cpu: u32,
    /// Overrun of each throttled period, ns.
    pub overruns: Vec<u64>,
    /// Periods whose charged overrun exceeded 100 us: (time, charged, kernel), ns.
    pub outliers: Vec<(u64, u64, u64)>,
}

/// Why a case could not run.
#[derive(Debug)]
pub struct BenchError(pub String);

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::error::Error for BenchError {}

/// A CPU hog (`sh -c 'while :; do :; done'`), killed when dropped, also when a test fails (it
/// may be left at SCHED_FIFO then).
pub struct Hog(Child);

impl Hog {
    pub fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn spawn_hog() -> Result<Hog, BenchError> {
    Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .map(Hog)
        .map_err(|e| BenchError(format!("spawn hog: {e}")))
}

/// The calling thread as the daemon's loop thread: SCHED_FIFO [`LOOP_PRIO`] until dropped,
/// then a normal thread again. Driven at normal priority, a test's loop waits behind the
/// machine's other work (a build beside the suite made it 10-100 ms late, and shares of
/// 0.00-0.37 against 0.24 measured the lateness, not the runtime).
pub struct AsLoop;

impl AsLoop {
    pub fn raise() -> AsLoop {
        let _ = sched::set_attr(0, &SchedAttr::fifo(LOOP_PRIO));
        AsLoop
    }
}

impl Drop for AsLoop {
    fn drop(&mut self) {
        let _ = sched::set_attr(0, &SchedAttr::other(0));
    }
}

/// Run one case. The calling thread's scheduling is restored afterwards.
pub fn run_case(case: &Case, state_file: &std::path::Path) -> Result<Outcome, BenchError> {
    let me = sched::gettid();
    let orig = sched::get_attr(me).map_err(|e| BenchError(e.to_string()))?;
    let r = run_inner(case, state_file);
    let _ = sched::set_attr(me, &orig);
    r
}

fn run_inner(case: &Case, state_file: &std::path::Path) -> Result<Outcome, BenchError> {
    let mut rt = Runtime::new(
        Platform::with_cpus(case.cpus),
        case.boxes.clone(),
        RuntimeOptions {
            state_file: state_file.to_path_buf(),
            // RTBOX_FOLLOW=0|1 overrides the runtime's choice (experiments).
            follow: std::env::var("RTBOX_FOLLOW").ok().map(|v| v != "0"),
            // RTBOX_HOME=0: the loop stays where the kernel left it (experiments).
            home: std::env::var("RTBOX_HOME").map_or(true, |v| v != "0"),
            // The cases measure the mechanism, including the overloaded 1 ms overhead case;
            // `daemon_admits` says whether the daemon's default admission takes them.
            step_cost: 0,
            // The kernel's own per-period figures, except where they would add to the measured
            // loop overhead.
            audit: !case.name.starts_with("overhead") || std::env::var_os("RTBOX_AUDIT").is_some(),
            backstop: std::env::var_os("RTBOX_NO_BACKSTOP").is_none(),
            ..RuntimeOptions::default()
        },
    )
    .map_err(|e| BenchError(e.to_string()))?;
    let mut hogs: Vec<(usize, Hog, i32)> = Vec::new();
    for (i, (bx, n)) in case.hogs.iter().enumerate() {
        for _ in 0..*n {
            let h = spawn_hog()?;
            let pid = h.0.id() as i32;
            let clock = pid;
            rt.attach(bx, Target::Pid(pid))
                .map_err(|e| BenchError(format!("attach {pid} to {bx}: {e}")))?;
            hogs.push((i, h, clock));
        }
    }
    let mut un: Vec<(Hog, i32)> = Vec::new();
    for u in &case.unmanaged {
        let h = spawn_hog()?;
        let pid = h.0.id() as i32;
        if let Some(c) = u.cpu {
            let _ = sched::set_affinity(pid, &[c]);
        }
        if let Some(p) = u.fifo {
            let _ = sched::set_attr(pid, &SchedAttr::fifo(p));
        }
        un.push((h, pid));
    }
    let as_loop = AsLoop::raise();
    let start = rtbox_linux::monotonic_ns();
    let steal_start = host_steal_ns();
    // Measured with the kernel's own sum_exec_runtime (schedstat), independent of the perf
    // clocks the runtime charges with. It advances at context switches and ticks, so over a
    // window of seconds its error is below 4 ms per hog.
    let read = |c: &i32| -> u64 {
        std::fs::read_to_string(format!("/proc/{c}/schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let bg: Vec<(i32, Vec<u32>)> = background_pids()
        .into_iter()
        .map(|p| (p, sched::get_affinity(p).unwrap_or_default()))
        .collect();
    let mut bg0: Vec<u64> = Vec::new();
    let mut idle0: Vec<u64> = Vec::new();
    let mut base: Option<(u64, Vec<u64>, Vec<u64>, u64)> = None;
    let mut steal0 = None;
    let charged = |rt: &Runtime| -> Vec<(String, u64)> {
        rt.server_rows()
            .into_iter()
            .map(|r| (r.box_name, r.consumed))
            .collect()
    };
    let mut charged0 = Vec::new();
    let end = start + case.warmup_ns + case.measure_ns;
    let mut wake_late = Vec::new();
    let mut step_ns = Vec::new();
    let mut asked: Option<u64> = None;
    loop {
        let now = rtbox_linux::monotonic_ns();
        if let (Some(a), true) = (asked, base.is_some()) {
            wake_late.push(now.saturating_sub(a));
        }
        if base.is_none() && now >= start + case.warmup_ns {
            base = Some((
                now,
                hogs.iter().map(|h| read(&h.2)).collect(),
                un.iter().map(|h| read(&h.1)).collect(),
                rt.loop_usage().cpu_ns,
            ));
            charged0 = charged(&rt);
            steal0 = host_steal_ns();
            bg0 = bg.iter().map(|b| read(&b.0)).collect();
            idle0 = idle_ns_per_cpu();
        }
        if now >= end {
            break;
        }
        let t = rt.now();
        rt.step(t);
        if base.is_some() {
            step_ns.push(rtbox_linux::monotonic_ns().saturating_sub(now));
        }
        let next = rt.to_monotonic(rt.next_wakeup(rt.now())).min(end);
        rt.follow_exhaustion();
        if std::env::var_os("RTBOX_STEPS").is_some() && base.is_some() && step_ns.len() < 300 {
            let rows: Vec<String> = rt
                .server_rows()
                .iter()
                .map(|r| {
                    format!(
                        "{}@{} rt={} thr={}",
                        r.box_name, r.cpu, r.runtime, r.throttled
                    )
                })
                .collect();
            eprintln!(
                "step at {} next +{} {:?}",
                now - start,
                next.saturating_sub(now),
                rows
            );
        }
        asked = Some(next);
        rt.sleep_until(next);
    }
    // Read everything while still above the members: once this thread drops its priority,
    // unthrottled FIFO members could delay it (and the reads) for up to RT throttling's 50 ms.
    let now = rtbox_linux::monotonic_ns();
    let loop_ns = rt.loop_usage().cpu_ns;
    let h1: Vec<u64> = hogs.iter().map(|h| read(&h.2)).collect();
    let u1: Vec<u64> = un.iter().map(|h| read(&h.1)).collect();
    let steal1 = host_steal_ns();
    let bg1: Vec<u64> = bg.iter().map(|b| read(&b.0)).collect();
    let idle1 = idle_ns_per_cpu();
    let (t0, h0, u0, l0) = base.ok_or_else(|| BenchError("no measurement window".into()))?;
    let wall = (now - t0) as f64;
    let mut per_box: Vec<(String, f64)> = case.hogs.iter().map(|(b, _)| (b.clone(), 0.0)).collect();
    for (k, (i, _, _)) in hogs.iter().enumerate() {
        per_box[*i].1 += h1[k].saturating_sub(h0[k]) as f64 / wall;
    }
    let unmanaged = un
        .iter()
        .enumerate()
        .map(|(k, _)| u1[k].saturating_sub(u0[k]) as f64 / wall)
        .collect();
    let background = bg
        .iter()
        .zip(bg0.iter().zip(&bg1))
        .map(|((_, aff), (a, b))| (aff.clone(), b.saturating_sub(*a) as f64 / wall))
        .collect();
    let idle = idle0
        .iter()
        .zip(&idle1)
        .map(|(a, b)| b.saturating_sub(*a) as f64 / wall)
        .collect();
    let charged1 = charged(&rt);
    let mut charged_per_box: Vec<(String, f64)> = Vec::new();
    for (i, (b, c)) in charged1.iter().enumerate() {
        let c0 = charged0.get(i).map_or(0, |x| x.1);
        let d = c.saturating_sub(c0) as f64 / wall;
        match charged_per_box.iter_mut().find(|x| &x.0 == b) {
            Some(x) => x.1 += d,
            None => charged_per_box.push((b.clone(), d)),
        }
    }
    let mut overruns = Vec::new();
    let mut detected = Vec::new();
    let mut audit = Vec::new();
    for b in &case.boxes {
        for cpu in 0..case.cpus {
            if let Some(st) = rt.server_stats(&b.name, cpu) {
                if !st.kernel_overruns.is_empty() {
                    audit.push(Audit {
                        box_name: b.name.clone(),
                        cpu,
                        overruns: st.kernel_overruns.clone(),
                        outliers: st.outliers.clone(),
                    });
                }
            }
            let o = rt.overruns(&b.name, cpu);
            if !o.is_empty() {
                overruns.push((b.name.clone(), cpu, o));
            }
            let d = rt.detected_overruns(&b.name, cpu);
            if !d.is_empty() {
                detected.push((b.name.clone(), cpu, d));
            }
        }
    }
    let steal_ns = rt.steal_found();
    let backstop_stops = rt.backstop_stops();
    let backstop_times = rt
        .backstop_times()
        .iter()
        .map(|t| *t as f64 / 1e9)
        .collect();
    rt.shutdown();
    drop(as_loop);
    drop(hogs);
    drop(un);
    Ok(Outcome {
        per_box,
        unmanaged,
        overruns,
        charged: charged_per_box,
        detected,
        audit,
        steal_ns,
        backstop_stops,
        backstop_times,
        wake_late,
        step_ns,
        loop_cpu: (loop_ns - l0) as f64 / wall,
        host_steal: match (steal0, steal1) {
            (Some(a), Some(b)) => b.saturating_sub(a) as f64 / wall,
            _ => 0.0,
        },
        host_steal_case_ns: match (steal_start, steal1) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        },
        background,
        idle,
    })
}

/// Whether the daemon, with its default loop-overhead admission, would admit the case's boxes
/// (`Err` carries the refusal).
pub fn daemon_admits(case: &Case) -> Result<(), String> {
    let system =
        rtbox_model::System::new(Platform::with_cpus(case.cpus), case.boxes.clone(), vec![])
            .map_err(|e| e.to_string())?;
    let adm = rtbox_model::admit_on_host(
        &system,
        rtbox_model::LoopCost::DEFAULT,
        &rtbox_model::HostLoad::default(),
    );
    if adm.admitted() {
        Ok(())
    } else {
        let why: Vec<String> = adm.refusals.iter().map(|r| r.to_string()).collect();
        Err(why.join("; "))
    }
}

/// Percentile (0..=100) of a sample, nearest rank.
pub fn percentile(v: &[u64], p: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    let k = ((p / 100.0) * (s.len() - 1) as f64).round() as usize;
    s[k.min(s.len() - 1)]
}

fn per_cpu(name: &str, q_ms: u64, p_ms: u64, cpus: &str) -> BoxSpec {
    per_cpu_us(name, q_ms * 1000, p_ms * 1000, cpus)
}

fn per_cpu_us(name: &str, q_us: u64, p_us: u64, cpus: &str) -> BoxSpec {
    let mut b = BoxSpec::new(
        name,
        rtbox_model::Interface::PerCpu {
            budget: q_us * 1000,
            period: p_us * 1000,
        },
    );
    b.cpus = Some(rtbox_model::CpuSet::parse(cpus).expect("cpu list"));
    b
}

/// An expected share: what each box (in `Case::hogs` order) should receive, in CPUs.
#[derive(Debug, Clone)]
pub struct Expect {
    pub per_box: Vec<f64>,
}

/// The cases of acceptance items 1, 2 and 4 of issue 5, measuring `measure_ns` each.
pub fn acceptance_cases(measure_ns: u64) -> Vec<(Case, Expect)> {
    let case =
        |name: &str, boxes: Vec<BoxSpec>, hogs: Vec<(&str, usize)>, un: Vec<Unmanaged>| Case {
            name: name.to_string(),
            cpus: 2,
            boxes,
            hogs: hogs.into_iter().map(|(b, n)| (b.to_string(), n)).collect(),
            unmanaged: un,
            warmup_ns: 300_000_000,
            measure_ns,
        };
    let mut v = Vec::new();
    for (q, p) in [(20, 100), (40, 100), (2, 10)] {
        v.push((
            case(
                &format!("1 hog, 1 CPU, {q}/{p} ms"),
                vec![per_cpu("A", q, p, "0")],
                vec![("A", 1)],
                vec![],
            ),
            Expect {
                per_box: vec![q as f64 / p as f64],
            },
        ));
    }
    v.push((
        case(
            "2 hogs, 2 CPUs, 30/100 ms",
            vec![per_cpu("A", 30, 100, "0-1")],
            vec![("A", 2)],
            vec![],
        ),
        Expect { per_box: vec![0.6] },
    ));
    v.push((
        case(
            "1 hog, 2 CPUs, 30/100 ms global",
            vec![per_cpu("A", 30, 100, "0-1")],
            vec![("A", 1)],
            vec![],
        ),
        Expect { per_box: vec![0.6] },
    ));
    let mut pinned = per_cpu("A", 30, 100, "0-1");
    pinned.placement = rtbox_model::Placement::Pinned;
    v.push((
        case(
            "1 hog, 2 CPUs, 30/100 ms pinned",
            vec![pinned],
            vec![("A", 1)],
            vec![],
        ),
        Expect { per_box: vec![0.3] },
    ));
    // Both CPUs filled to 0.9 by two boxes each: every exhaustion meets another box's
    // replenishment or exhaustion on its CPU and a busy other CPU. With the BPF sensor half of
    // such runs once left a member running unstopped (a quiet stop replayed as a freeze after
    // the loop had thawed the member again: `Runtime::still_frozen`).
    v.push((
        case(
            "full CPUs: 1/5 + 3.5/5 ms on each CPU",
            vec![
                per_cpu_us("A", 1_000, 5_000, "0"),
                per_cpu_us("B", 3_500, 5_000, "0"),
                per_cpu_us("C", 1_000, 5_000, "1"),
                per_cpu_us("D", 3_500, 5_000, "1"),
            ],
            vec![("A", 1), ("B", 1), ("C", 1), ("D", 1)],
            vec![],
        ),
        Expect {
            per_box: vec![0.2, 0.7, 0.2, 0.7],
        },
    ));
    let under = |fifo: Option<u32>, cpu: u32| Unmanaged {
        fifo,
        cpu: Some(cpu),
    };
    v.push((
        case(
            "isolation: A 0.3/CPU, B 0.4/CPU, 2 hogs each, + 2 OTHER hogs + FIFO 10 hog per CPU",
            vec![per_cpu("A", 30, 100, "0-1"), per_cpu("B", 40, 100, "0-1")],
            vec![("A", 2), ("B", 2)],
            vec![
                under(None, 0),
                under(None, 1),
                under(Some(10), 0),
                under(Some(10), 1),
            ],
        ),
        Expect {
            per_box: vec![0.6, 0.8],
        },
    ));
    let parent = per_cpu("P", 60, 100, "0");
    let mut c1 = per_cpu("P/c1", 10, 100, "0");
    c1.parent = Some("P".into());
    let mut c2 = per_cpu("P/c2", 20, 100, "0");
    c2.parent = Some("P".into());
    v.push((
        case(
            "nesting: P 60/100 with children c1 10/100, c2 20/100, one hog each",
            vec![parent, c1, c2],
            vec![("P/c1", 1), ("P/c2", 1), ("P", 1)],
            vec![],
        ),
        Expect {
            per_box: vec![0.1, 0.2, 0.3],
        },
    ));
    let mut shared = BoxSpec::new("S", rtbox_model::Interface::Shared { weight: 1 });
    shared.cpus = Some(rtbox_model::CpuSet::parse("0").expect("cpu list"));
    v.push((
        case(
            "shares (seed 003 exp. 4.3): fixed 48/16/16 % + one shared box, 1 hog each, CPU 0",
            vec![
                per_cpu("F48", 48, 100, "0"),
                per_cpu("F16a", 16, 100, "0"),
                per_cpu("F16b", 16, 100, "0"),
                shared,
            ],
            vec![("F48", 1), ("F16a", 1), ("F16b", 1), ("S", 1)],
            vec![],
        ),
        Expect {
            per_box: vec![0.48, 0.16, 0.16, 0.2],
        },
    ));
    for (q_us, p_us) in [(2000, 10_000), (200, 1000)] {
        let boxes: Vec<BoxSpec> = (0..4)
            .map(|i| per_cpu_us(&format!("O{i}"), q_us, p_us, "0-1"))
            .collect();
        v.push((
            case(
                &format!("overhead: 4 boxes, {q_us}/{p_us} us on 2 CPUs, 1 hog each"),
                boxes,
                vec![("O0", 1), ("O1", 1), ("O2", 1), ("O3", 1)],
                vec![],
            ),
            Expect {
                per_box: vec![0.4; 4],
            },
        ));
    }
    // 1 ms periods that the daemon admits with its loop overhead: 2 boxes of 200/1000 us.
    let fast: Vec<BoxSpec> = (0..2)
        .map(|i| per_cpu_us(&format!("F{i}"), 200, 1000, "0-1"))
        .collect();
    v.push((
        case(
            "overhead: 2 boxes, 200/1000 us on 2 CPUs, 1 hog each",
            fast,
            vec![("F0", 1), ("F1", 1)],
            vec![],
        ),
        Expect {
            per_box: vec![0.4; 2],
        },
    ));
    let mut reclaim = per_cpu("A", 20, 100, "0");
    reclaim.mode = rtbox_model::Mode::Reclaim;
    v.push((
        case(
            "reclaim: 1 hog, 1 CPU, 20/100 ms",
            vec![reclaim],
            vec![("A", 1)],
            vec![],
        ),
        Expect { per_box: vec![1.0] },
    ));
    v
}

/// Time stolen from all vCPUs by the host so far (the `steal` column of `/proc/stat`), in ns;
/// the kernel reports it in clock ticks (USER_HZ, 10 ms here), so it is exact to one tick.
pub fn host_steal_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: u64 = stat
        .lines()
        .next()?
        .split_whitespace()
        .nth(8)?
        .parse()
        .ok()?;
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some(ticks * 1_000_000_000 / u64::try_from(hz).ok().filter(|&h| h > 0)?)
}
