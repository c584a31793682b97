//! Fidelity on the real kernel: random periodic task sets, each in a box sized by rtbox's own
//! synthesis (with a stated WCET margin), admitted by the real daemon and run for a few seconds
//! with `rtbox load` (every job exactly its WCET of thread CPU time; rt-app optional, see
//! [`Workload`]), beside a SCHED_FIFO 99 canary per CPU; every deadline miss is classified as
//! the machine's (a canary stall inside the late job's level busy period at least as long as
//! the job was late, [`during_stall`]) or rtbox's. The same set runs in the simulator for
//! comparison.
//!
//! The drivers are `examples/fidelity.rs` (experiments/fidelity.sh; `examples/fidelity_explain.rs`
//! reads its kept records) and the CI test `rtbox-cli/tests/fidelity.rs`. Real runs need root
//! and the machine-wide real-runtime lock (the caller takes it).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rtbox_analysis::synth::{synthesize_box, Request};
use rtbox_linux::sched::{self, SchedAttr};
use rtbox_model::{Nanos, TaskSpec};
use rtbox_workload::rng::Rng;
use rtbox_workload::rtapp_log::parse_log;
use rtbox_workload::taskset::{Priorities, TaskSetParams, UtilMethod};

/// The BDM delay every box is synthesized for.
pub const DELTA: Nanos = 5_000_000;
/// The WCET margin of the experiment and its CI variant, in percent: with `rtbox load` a job
/// uses its WCET exactly, so the margin only covers the runtime's own tolerance (a stop up to
/// ~0.2 ms late is paid back in the next period; interrupts are charged to the member they
/// interrupt).
pub const MARGIN_PCT: u64 = 10;
/// A canary wake-up later than this is recorded (the loop's steps take < 0.3 ms).
const CANARY_RECORD: u64 = 500_000;

/// How a set's tasks are boxed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One global FIFO box on CPUs 0-1 (box `A`), the tasks at their DM priorities.
    Global,
    /// Partitioned fixed priority: one pinned FIFO box per CPU (`P0` on CPU 0, `P1` on CPU 1),
    /// the tasks placed first-fit by decreasing utilization where the box still has an
    /// admissible interface. Two boxes rather than one pinned box of two vCPUs so that each CPU
    /// gets its own BDM alpha (one box's interface gives every vCPU the same). The daemon
    /// places a one-box partition's configured tasks on the analysis's vCPUs as well
    /// (`runtime/pinnames.rs`, tested by rtbox-cli's `daemon_pinplan`).
    Pinned,
    /// One global EDF box on CPUs 0-1 (box `A`). The daemon ranks an EDF box's threads by
    /// their own priorities (it does not see their jobs' deadlines), so the workload's threads
    /// run at their DM priorities: the box is sized with the fixed-priority test, which is how
    /// it really runs; the simulator runs EDF.
    Edf,
}

impl Kind {
    /// The kind of set `index`: the three in turn.
    pub fn of(index: u64) -> Kind {
        [Kind::Global, Kind::Pinned, Kind::Edf][(index % 3) as usize]
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Global => "global FIFO",
            Kind::Pinned => "pinned FIFO",
            Kind::Edf => "global EDF",
        }
    }
}

/// A box of a set: name, CPUs, policy, placement, and the tasks in it.
#[derive(Debug, Clone)]
pub struct SetBox {
    pub name: String,
    pub cpus: String,
    pub policy: &'static str,
    pub placement: &'static str,
    pub tasks: Vec<TaskSpec>,
}

/// One random task set and the boxes rtbox's synthesis sized for it.
#[derive(Debug, Clone)]
pub struct SizedSet {
    pub index: u64,
    pub kind: Kind,
    /// The tasks as rt-app runs them (nominal WCET).
    pub tasks: Vec<TaskSpec>,
    /// The WCET margin the boxes were sized with, in percent.
    pub margin_pct: u64,
    /// How much of each WCET rt-app's jobs are asked to run, in percent (100: all of it).
    /// rt-app's "run" is a number of calibrated loops, and beside unmanaged load a loop takes
    /// 1.2-1.6 times its calibrated CPU time here (the CPU / WCET column): a box with no margin
    /// runs a workload below its WCET only when asked for less.
    pub work_pct: u64,
    /// The synthesized interfaces (`name: alpha`, one per box).
    pub interface: String,
    /// The boxes, each run by its own rt-app process.
    pub boxes: Vec<String>,
    /// Configuration for the daemon, the simulator and `rtbox rt-app` (nominal WCETs).
    pub config: String,
}

impl SizedSet {
    pub fn utilization(&self) -> f64 {
        self.tasks
            .iter()
            .map(|t| t.wcet as f64 / t.period as f64)
            .sum()
    }
}

/// The set `index` of stream `seed`: 3-5 periodic tasks with periods of 10-100 ms (1 ms
/// granularity), total utilization 0.3-0.9 CPUs (RandFixedSum, at most 0.45 per task),
/// rate-monotonic priorities (implicit deadlines, so deadline-monotonic), in box A.
pub fn draw(seed: u64, index: u64) -> Vec<TaskSpec> {
    let mut rng = Rng::stream(seed, index);
    let n = rng.range_inclusive(3, 5) as usize;
    let utilization = 0.3 + 0.6 * rng.uniform();
    let p = TaskSetParams {
        tasks: n,
        utilization,
        method: UtilMethod::RandFixedSum,
        max_task_util: 0.45,
        priorities: Priorities::DeadlineMonotonic,
        box_name: Some("A".into()),
        ..TaskSetParams::default()
    };
    p.generate(&mut rng).expect("valid parameters")
}

/// The configuration text of `boxes`, each with its interface line (`interfaces[i]`).
pub fn boxes_text(boxes: &[SetBox], interfaces: &[String]) -> String {
    let mut s = "[platform]\ncpus = 2\n".to_string();
    for (b, interface) in boxes.iter().zip(interfaces) {
        s += &format!(
            "\n[[box]]\nname = \"{}\"\ncpus = \"{}\"\npolicy = \"{}\"\nplacement = \"{}\"\n{interface}\n",
            b.name, b.cpus, b.policy, b.placement
        );
    }
    for b in boxes {
        for t in &b.tasks {
            s += &format!(
                "\n[[task]]\nname = \"{}\"\nbox = \"{}\"\npriority = {}\nwcet = \"{}ns\"\nperiod = \"{}ns\"\n",
                t.name,
                b.name,
                t.priority.unwrap_or(1),
                t.wcet,
                t.period
            );
        }
    }
    s
}

/// The configuration text of `tasks` in one global FIFO box A with the interface line
/// `interface`.
pub fn config_text(tasks: &[TaskSpec], interface: &str) -> String {
    boxes_text(
        &[SetBox {
            name: "A".into(),
            cpus: "0-1".into(),
            policy: "fifo",
            placement: "global",
            tasks: tasks.to_vec(),
        }],
        &[interface.to_string()],
    )
}

/// WCET `c` with a margin of `pct` percent (rounded up).
pub fn with_margin(c: Nanos, pct: u64) -> Nanos {
    (c * (100 + pct)).div_ceil(100)
}

/// The smallest BDM interface (delay [`DELTA`]) rtbox's synthesis finds for box `b` with WCETs
/// `margin_pct` larger, and its bandwidth; `Err` with the reason when there is none, or when
/// the daemon would not admit it beside its enforcement loop.
fn synthesize(b: &SetBox, margin_pct: u64) -> Result<(String, f64), String> {
    // An EDF box is sized as the daemon runs it: its threads in their own (deadline-monotonic)
    // priority order, i.e. with the fixed-priority test (docs/benchmarks-runtime.md, "EDF
    // boxes"); its configuration stays `edf`, which the simulator runs.
    let inflated = SetBox {
        policy: if b.policy == "edf" { "fifo" } else { b.policy },
        tasks: b
            .tasks
            .iter()
            .map(|t| TaskSpec {
                wcet: with_margin(t.wcet, margin_pct),
                ..t.clone()
            })
            .collect(),
        ..b.clone()
    };
    let probe = boxes_text(
        std::slice::from_ref(&inflated),
        &["interface.bdm = { alpha = 0.99, delta = \"5ms\" }".to_string()],
    );
    let system = rtbox_config::parse_str(&probe).map_err(|e| e.to_string())?;
    let syn = synthesize_box(&system, &b.name, Request::Bdm { delta: DELTA })
        .map_err(|e| e.to_string())?;
    let interface = syn
        .toml
        .lines()
        .find(|l| l.starts_with("interface."))
        .ok_or("synthesis gave no interface line")?
        .to_string();
    let alpha: f64 = interface
        .split("alpha = ")
        .nth(1)
        .and_then(|r| r.split([',', ' ']).next())
        .and_then(|a| a.parse().ok())
        .ok_or("no alpha in the interface")?;
    // The daemon admits a box with its enforcement loop's cost (the perf sensor's, the dearer
    // one, so that a set sized here is admitted with either sensor):
    // a set it would refuse is not run (before: the synthesis knew nothing of the loop, and the
    // daemon refused one synthesized set at 0.94 + 0.03 per CPU).
    let sized = rtbox_config::parse_str(&boxes_text(
        std::slice::from_ref(b),
        std::slice::from_ref(&interface),
    ))
    .map_err(|e| e.to_string())?;
    let admission = rtbox_model::admit_with_loop(&sized, rtbox_model::LoopCost::DEFAULT);
    if let Some(r) = admission.refusals.first() {
        return Err(format!("alpha {alpha:.3}: not admitted: {r}"));
    }
    Ok((interface, alpha))
}

/// Pinned boxes P0 and P1 for `tasks`: first fit by decreasing utilization, a task fitting on
/// a CPU when that CPU's box with it still has an admissible interface.
fn partition(tasks: &[TaskSpec], margin_pct: u64) -> Result<Vec<SetBox>, String> {
    let mut order: Vec<&TaskSpec> = tasks.iter().collect();
    order.sort_by(|a, b| {
        (b.wcet as u128 * a.period as u128).cmp(&(a.wcet as u128 * b.period as u128))
    });
    let mut boxes: Vec<SetBox> = (0..2)
        .map(|c| SetBox {
            name: format!("P{c}"),
            cpus: c.to_string(),
            policy: "fifo",
            placement: "pinned",
            tasks: Vec::new(),
        })
        .collect();
    for t in order {
        let fit = (0..boxes.len()).find(|&c| {
            let mut trial = boxes[c].clone();
            trial.tasks.push(TaskSpec {
                box_name: Some(trial.name.clone()),
                ..t.clone()
            });
            synthesize(&trial, margin_pct).is_ok()
        });
        let c = fit.ok_or(format!("{} fits on no CPU", t.name))?;
        let name = boxes[c].name.clone();
        boxes[c].tasks.push(TaskSpec {
            box_name: Some(name),
            ..t.clone()
        });
    }
    boxes.retain(|b| !b.tasks.is_empty());
    Ok(boxes)
}

/// Sizes boxes of `kind` for `tasks` with WCETs `margin_pct` larger: per box the smallest BDM
/// interface (delay [`DELTA`]) rtbox's synthesis finds. `Err` with the reason when there is
/// none, or when its bandwidth is above what the daemon admits.
pub fn size_kind(
    index: u64,
    kind: Kind,
    tasks: Vec<TaskSpec>,
    margin_pct: u64,
) -> Result<SizedSet, String> {
    let boxes = match kind {
        Kind::Pinned => partition(&tasks, margin_pct)?,
        Kind::Global | Kind::Edf => vec![SetBox {
            name: "A".into(),
            cpus: "0-1".into(),
            policy: if kind == Kind::Edf { "edf" } else { "fifo" },
            placement: "global",
            tasks: tasks.clone(),
        }],
    };
    let mut interfaces = Vec::new();
    let mut summary = Vec::new();
    for b in &boxes {
        let (line, alpha) = synthesize(b, margin_pct)?;
        interfaces.push(line);
        summary.push(format!("{} {:.3}", b.name, alpha));
    }
    let config = boxes_text(&boxes, &interfaces);
    // Together: the loop polls at the shortest server period of all boxes, which every CPU
    // pays (a pinned set's small second box made the daemon refuse a set each box passed).
    let system = rtbox_config::parse_str(&config).map_err(|e| e.to_string())?;
    let admission = rtbox_model::admit_with_loop(&system, rtbox_model::LoopCost::DEFAULT);
    if let Some(r) = admission.refusals.first() {
        return Err(format!(
            "{}: not admitted together: {r}",
            summary.join(", ")
        ));
    }
    let tasks = boxes.iter().flat_map(|b| b.tasks.clone()).collect();
    Ok(SizedSet {
        index,
        kind,
        tasks,
        margin_pct,
        work_pct: 100,
        interface: summary.join(", "),
        boxes: boxes.iter().map(|b| b.name.clone()).collect(),
        config,
    })
}

/// [`size_kind`] with the kind of set `index` ([`Kind::of`]).
pub fn size(index: u64, tasks: Vec<TaskSpec>, margin_pct: u64) -> Result<SizedSet, String> {
    size_kind(index, Kind::of(index), tasks, margin_pct)
}

/// A recorded canary wake-up: CPU, when it was due, how late it came (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Late {
    pub cpu: u32,
    pub due: u64,
    pub late: u64,
}

/// Rule: a job that finished `lateness` after its deadline missed because of the machine when,
/// on one CPU, the canary's lateness inside the job's window (`from` .. `end`) adds up to at
/// least `lateness`: the vCPU was stopped (or a higher class ran) at least that long while
/// work the job waited for was pending, more than the slack it had, so no scheduling in the
/// guest could have met the deadline. Otherwise the miss is rtbox's. `from` is the start of
/// the job's level busy period ([`busy_start`]), not its release: a stall just before the
/// release that left higher-priority (or the task's own earlier) work pending delays the job
/// as much as one inside its own window.
pub fn during_stall(from: u64, end: u64, lateness: u64, late: &[Late]) -> bool {
    stalls_per_cpu(from, end, late)
        .values()
        .any(|&s| s >= lateness)
}

/// The canaries' lateness inside the window `from` .. `end`, summed per CPU (CPUs without any
/// are left out).
pub fn stalls_per_cpu(from: u64, end: u64, late: &[Late]) -> std::collections::BTreeMap<u32, u64> {
    let mut per_cpu = std::collections::BTreeMap::new();
    for l in late {
        if l.due + l.late >= from && l.due <= end {
            *per_cpu.entry(l.cpu).or_default() += l.late;
        }
    }
    per_cpu
}

/// Rule: the most the machine's stalls can have delayed a job whose level busy period runs
/// `from` .. `end`, in a box with bandwidth `alpha` on each of its CPUs `cpus`: every canary
/// stall of length X on one of them inside that window takes up to X of supply from the level
/// directly; and if a member was running on that CPU during the stall, its server was charged
/// X for time it did not get (neither the perf clock nor the kernel's runtime tells a vCPU the
/// host stopped from one that ran, and this host reports no steal for such stalls), which the
/// hard CBS pays back by withholding X of budget, up to X / alpha of wall time without supply.
/// Bound: the sum of X (1 + 1 / alpha). An upper bound (the logs do not show whether a member
/// was running during each stall); a lateness above it is not the machine's.
pub fn stall_bound(from: u64, end: u64, late: &[Late], cpus: &[(u32, f64)]) -> u64 {
    late.iter()
        .filter(|l| l.due + l.late >= from && l.due <= end)
        .filter_map(|l| {
            let (_, alpha) = cpus.iter().find(|(c, _)| *c == l.cpu)?;
            Some(l.late as f64 * (1.0 + 1.0 / alpha.max(1e-3)))
        })
        .sum::<f64>()
        .round() as u64
}

/// Rule: the start of the busy period at a job's level that contains its release `release`:
/// the last instant at or before it when no job of its level was pending. `pending` holds
/// (release, end) of every job of the level (the task itself and the tasks its box runs
/// before it: higher or equal priority in a FIFO box, every task of an EDF box). A job
/// pending over an instant keeps the level busy there; one that ended exactly at it does not.
/// (The level-i busy period of response-time analysis, Lehoczky 1990, found from the logged
/// jobs instead of the WCETs.)
pub fn busy_start(pending: &[(u64, u64)], release: u64) -> u64 {
    let mut b = release;
    while let Some(r) = pending
        .iter()
        .filter(|&&(r, e)| r < b && e > b)
        .map(|&(r, _)| r)
        .min()
    {
        b = r;
    }
    b
}

/// The tasks whose jobs keep task `t`'s level busy in `set` (same box; in a FIFO box those
/// with a priority at least `t`'s, in an EDF box all; the daemon ranks an EDF box's threads by
/// their own priorities, so this is the wider window).
fn level_of<'a>(set: &'a SizedSet, t: &TaskSpec) -> Vec<&'a str> {
    set.tasks
        .iter()
        .filter(|u| u.box_name == t.box_name)
        .filter(|u| set.kind == Kind::Edf || u.priority >= t.priority)
        .map(|u| u.name.as_str())
        .collect()
}

/// What one task did in one real run.
#[derive(Debug, Clone, Default)]
pub struct TaskOutcome {
    pub name: String,
    pub jobs: u64,
    pub misses: u64,
    /// Misses not explained by a canary stall ([`during_stall`]): (release, us after the
    /// task's first release; lateness, ns).
    pub own: Vec<(u64, u64)>,
    /// The misses of `own` as `missed` gives them (for [`miss_report`]).
    pub own_windows: Vec<(u64, u64, u64)>,
    /// Every miss: (release, end, start of its level busy period), CLOCK_MONOTONIC ns.
    pub missed: Vec<(u64, u64, u64)>,
}

/// What one real run of a set measured.
#[derive(Debug, Clone, Default)]
pub struct RunOutcome {
    pub tasks: Vec<TaskOutcome>,
    pub canary_worst: u64,
    /// Canary wake-ups later than 2 ms.
    pub stalls: usize,
    pub steal_ns: u64,
    /// CPU time the jobs used over the run against their nominal WCETs (rt-app: the whole
    /// process's CPU time; `rtbox load`: the jobs' own CPU clocks).
    pub cpu_over_wcet: f64,
    /// The largest CPU time of one job against its WCET (`rtbox load` only; 0 for rt-app).
    pub job_cpu_max: f64,
    /// The daemon's threads when its stop did not finish (`None`: it stopped).
    pub stop_hung: Option<String>,
    /// Every canary wake-up later than 0.5 ms (kept so that a miss can be checked).
    pub canary: Vec<Late>,
}

impl RunOutcome {
    pub fn jobs(&self) -> u64 {
        self.tasks.iter().map(|t| t.jobs).sum()
    }
    pub fn misses(&self) -> u64 {
        self.tasks.iter().map(|t| t.misses).sum()
    }
    pub fn own_misses(&self) -> usize {
        self.tasks.iter().map(|t| t.own.len()).sum()
    }
}

/// The same set in `rtbox sim`: (jobs, misses).
pub fn simulate(rtbox: &Path, config: &Path, secs: u64) -> Result<(u64, u64), String> {
    let out = Command::new(rtbox)
        .arg("sim")
        .arg(config)
        .args(["--duration", &format!("{secs}s"), "--json"])
        .output()
        .map_err(|e| e.to_string())?;
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("rtbox sim: {e}"))?;
    let tasks = v["tasks"].as_array().ok_or("rtbox sim: no tasks")?;
    let sum = |k: &str| tasks.iter().filter_map(|t| t[k].as_u64()).sum::<u64>();
    Ok((sum("jobs"), sum("misses")))
}

/// rt-app's ns per loop: the smallest of three calibrations (the least disturbed one), each
/// run at SCHED_FIFO 90 so unmanaged normal load does not lengthen it (measured beside one
/// hog per CPU as a normal process: 427 ns per loop against 15 on an idle CPU).
pub fn calibrate(dir: &Path) -> Option<u64> {
    let json = r#"{"tasks":{"c":{"loop":1,"run":1000}},"global":{"duration":1,"calibration":"CPU0","logdir":"LOGDIR","log_basename":"cal"}}"#
        .replace("LOGDIR", &dir.display().to_string());
    let f = dir.join("cal.json");
    std::fs::write(&f, json).ok()?;
    (0..3)
        .filter_map(|_| {
            let out = Command::new("chrt")
                .args(["-f", "90", "rt-app"])
                .arg(&f)
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out.stderr).to_string()
                + &String::from_utf8_lossy(&out.stdout);
            let at = text.find("pLoad = ")? + "pLoad = ".len();
            text[at..].split("ns").next()?.trim().parse::<u64>().ok()
        })
        .min()
}

/// Every rt-app thread's first job is released this long after rt-app's common start.
/// rt-app releases job k of every thread at its common start + k P; with its default
/// `lock_pages` the main thread faults in each new thread's stack before it runs, so on a busy
/// machine the last threads started 100-250 ms after that start and their first jobs were late
/// from the outset, with or without rtbox (measured beside one hog per CPU: plain SCHED_FIFO
/// rt-app, 23-55 misses per 3 s run, all in its first ~120 ms). A common delay lets every
/// thread start (and join its box) before the first release: the first job of every task is
/// then released together, the critical instant the analysis assumes.
pub const START_DELAY_US: i64 = 300_000;

/// rt-app JSON `json` with `"delay": delay_us` in every task.
pub fn with_start_delay(json: &str, delay_us: i64) -> Result<String, String> {
    let mut v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("rt-app JSON: {e}"))?;
    let tasks = v["tasks"]
        .as_object_mut()
        .ok_or("rt-app JSON without tasks")?;
    for t in tasks.values_mut() {
        if let Some(o) = t.as_object_mut() {
            o.insert("delay".into(), delay_us.into());
        }
    }
    serde_json::to_string_pretty(&v).map_err(|e| e.to_string())
}

/// rt-app JSON `json` with every "run" event scaled to `pct` percent (rounded down, at least
/// 1 us).
pub fn with_work(json: &str, pct: u64) -> Result<String, String> {
    fn scale(v: &mut serde_json::Value, pct: u64) {
        match v {
            serde_json::Value::Object(o) => {
                for (k, x) in o.iter_mut() {
                    match x.as_u64() {
                        Some(us) if k == "run" => *x = (us * pct / 100).max(1).into(),
                        _ => scale(x, pct),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| scale(x, pct)),
            _ => {}
        }
    }
    let mut v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("rt-app JSON: {e}"))?;
    scale(&mut v, pct);
    serde_json::to_string_pretty(&v).map_err(|e| e.to_string())
}

/// Whether rt-app can be run.
pub fn rt_app_present() -> bool {
    Command::new("rt-app")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// One SCHED_FIFO 99 thread pinned to `cpu`, waking every 1 ms on an absolute timer until
/// `stop`, recording every wake-up later than [`CANARY_RECORD`].
pub(crate) fn canary(cpu: u32, stop: Arc<AtomicBool>, late: Arc<Mutex<Vec<Late>>>) {
    let tid = sched::gettid();
    let _ = sched::set_affinity(tid, &[cpu]);
    let _ = sched::set_attr(tid, &SchedAttr::fifo(99));
    let mut next = rtbox_linux::monotonic_ns() + 1_000_000;
    while !stop.load(Ordering::Relaxed) {
        rtbox_linux::sleep_until(next);
        let now = rtbox_linux::monotonic_ns();
        let l = now.saturating_sub(next);
        if l > CANARY_RECORD {
            late.lock().unwrap().push(Late {
                cpu,
                due: next,
                late: l,
            });
        }
        next = (next + 1_000_000).max(now + 500_000);
    }
}

fn children_cpu_ns() -> u64 {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is a valid rusage to fill.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// A daemon this run started; stopped whatever happens ([`crate::stopwatch::stop_daemon`]:
/// SIGTERM, 10 s, then recorded, released and killed, never waited for without bound).
pub(crate) struct Daemon {
    child: std::process::Child,
    record: PathBuf,
    hung: Option<String>,
}

impl Daemon {
    /// `rtbox daemon --config cfg` with its socket (`dir/sock`), journal and log in `dir`;
    /// returns once the socket exists (at most 10 s).
    pub(crate) fn start(rtbox: &Path, cfg: &Path, dir: &Path) -> Result<Daemon, String> {
        Daemon::start_with(rtbox, cfg, dir, &[])
    }

    /// [`Daemon::start`] with more arguments of `rtbox daemon` (`--sensor bpf`).
    pub(crate) fn start_with(
        rtbox: &Path,
        cfg: &Path,
        dir: &Path,
        args: &[&str],
    ) -> Result<Daemon, String> {
        let sock = dir.join("sock");
        let daemon = Daemon {
            record: dir.join("daemon-stop-hung.txt"),
            hung: None,
            child: Command::new(rtbox)
                .arg("daemon")
                .arg("--config")
                .arg(cfg)
                .arg("--socket")
                .arg(&sock)
                .arg("--state")
                .arg(dir.join("state.json"))
                .args(args)
                .stderr(std::fs::File::create(dir.join("daemon.log")).map_err(|e| e.to_string())?)
                .spawn()
                .map_err(|e| format!("daemon: {e}"))?,
        };
        let t0 = Instant::now();
        while !sock.exists() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !sock.exists() {
            drop(daemon);
            let log = std::fs::read_to_string(dir.join("daemon.log")).unwrap_or_default();
            return Err(format!(
                "daemon did not start: {}",
                log.lines().last().unwrap_or("no log")
            ));
        }
        Ok(daemon)
    }

    /// Stops it now; what its threads did when the stop did not finish.
    pub(crate) fn stop(&mut self) -> Option<String> {
        if self.hung.is_none() && matches!(self.child.try_wait(), Ok(None)) {
            let out = crate::stopwatch::stop_daemon(
                &mut self.child,
                Duration::from_secs(10),
                Some(&self.record),
            );
            if let crate::stopwatch::StopOutcome::Hung(r) = out {
                eprintln!("fidelity: the daemon's stop did not finish in 10 s:\n{r}");
                self.hung = Some(r);
            }
        }
        self.hung.clone()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs `set` for real for `secs` seconds: the daemon with the set's configuration, rt-app
/// inside box A (`rtbox exec`), the canaries and steal over the same window. `dir` is a fresh
/// scratch directory; `calibration` rt-app's ns per loop.
pub fn run(
    rtbox: &Path,
    set: &SizedSet,
    secs: u64,
    workload: Workload,
    dir: &Path,
) -> Result<RunOutcome, String> {
    let _ = std::fs::remove_dir_all(dir);
    let logdir = dir.join("log");
    std::fs::create_dir_all(&logdir).map_err(|e| e.to_string())?;
    let cfg = dir.join("set.toml");
    std::fs::write(&cfg, &set.config).map_err(|e| e.to_string())?;
    for b in set.boxes.iter().filter(|_| workload != Workload::Load) {
        let Workload::RtApp { calibration } = workload else {
            unreachable!()
        };
        let out = Command::new(rtbox)
            .arg("rt-app")
            .arg(&cfg)
            .args(["--box", b, "--duration", &format!("{secs}s"), "--logdir"])
            .arg(&logdir)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "rtbox rt-app: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let json = String::from_utf8_lossy(&out.stdout).replace(
            "\"calibration\": \"CPU0\"",
            &format!("\"calibration\": {calibration}"),
        );
        let json = with_work(&with_start_delay(&json, START_DELAY_US)?, set.work_pct)?;
        std::fs::write(dir.join(format!("{b}.json")), json).map_err(|e| e.to_string())?;
    }
    let sock = dir.join("sock");
    let mut daemon = Daemon::start(rtbox, &cfg, dir)?;
    let stop = Arc::new(AtomicBool::new(false));
    let late = Arc::new(Mutex::new(Vec::new()));
    let canaries: Vec<_> = (0..2)
        .map(|cpu| {
            let (stop, late) = (stop.clone(), late.clone());
            std::thread::spawn(move || canary(cpu, stop, late))
        })
        .collect();
    let steal0 = crate::host_steal_ns().unwrap_or(0);
    let cpu0 = children_cpu_ns();
    // Baseline (environment RTBOX_FIDELITY_PLAIN=1): the same rt-app JSON as plain
    // SCHED_FIFO threads, outside any box (the daemon still runs, with an empty box).
    let plain = std::env::var_os("RTBOX_FIDELITY_PLAIN").is_some();
    // One rt-app per box, started together, each inside its box.
    let children: Vec<_> = set
        .boxes
        .iter()
        .map(|b| {
            let mut cmd = if plain {
                Command::new(if workload == Workload::Load {
                    rtbox.as_os_str()
                } else {
                    "rt-app".as_ref()
                })
            } else {
                let mut c = Command::new(rtbox);
                c.args(["exec", b, "--socket"]).arg(&sock).arg("--");
                match workload {
                    Workload::Load => c.arg(rtbox),
                    Workload::RtApp { .. } => c.arg("rt-app"),
                };
                c
            };
            match workload {
                Workload::Load => cmd
                    .arg("load")
                    .arg(&cfg)
                    .args(["--box", b, "--duration", &format!("{secs}s")])
                    .args(["--delay", &format!("{START_DELAY_US}us"), "--logdir"])
                    .arg(&logdir),
                Workload::RtApp { .. } => cmd.arg(dir.join(format!("{b}.json"))),
            };
            cmd.stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| e.to_string())
        })
        .collect();
    let mut status = Ok(());
    for c in children {
        match c.and_then(|mut c| c.wait().map_err(|e| e.to_string())) {
            Ok(st) if st.success() => {}
            Ok(st) => status = Err(st.to_string()),
            Err(e) => status = Err(e),
        }
    }
    let cpu_used = children_cpu_ns().saturating_sub(cpu0);
    let steal_ns = crate::host_steal_ns().unwrap_or(0).saturating_sub(steal0);
    stop.store(true, Ordering::Relaxed);
    for c in canaries {
        let _ = c.join();
    }
    let stop_hung = daemon.stop();
    if let Err(st) = status {
        return Err(format!("the workload inside the box: {st}"));
    }
    let late = late.lock().unwrap().clone();
    let mut outcome = RunOutcome {
        canary_worst: late.iter().map(|l| l.late).max().unwrap_or(0),
        stalls: late.iter().filter(|l| l.late > 2_000_000).count(),
        steal_ns,
        stop_hung,
        canary: late.clone(),
        ..RunOutcome::default()
    };
    let mut demand = 0u64;
    let mut job_cpu = 0u64;
    let mut all = std::collections::BTreeMap::new();
    for t in &set.tasks {
        all.insert(t.name.clone(), task_jobs(workload, &logdir, t)?);
    }
    for t in &set.tasks {
        let jobs = &all[&t.name];
        let mut o = TaskOutcome {
            name: t.name.clone(),
            jobs: jobs.len() as u64,
            ..TaskOutcome::default()
        };
        demand += jobs.len() as u64 * t.wcet;
        for j in jobs {
            if let Some(c) = j.cpu {
                job_cpu += c;
                outcome.job_cpu_max = outcome.job_cpu_max.max(c as f64 / t.wcet as f64);
            }
        }
        let level: Vec<(u64, u64)> = level_of(set, t)
            .iter()
            .flat_map(|n| all[*n].iter().map(|j| (j.release, j.end)))
            .collect();
        let first = jobs.first().map_or(0, |j| j.release);
        for j in jobs {
            let Some(lateness) = j.end.checked_sub(j.release + t.deadline).filter(|&l| l > 0)
            else {
                continue;
            };
            o.misses += 1;
            let from = busy_start(&level, j.release);
            o.missed.push((j.release, j.end, from));
            if !during_stall(from, j.end, lateness, &late) {
                o.own.push(((j.release - first) / 1000, lateness));
                o.own_windows.push((j.release, j.end, from));
            }
        }
        outcome.tasks.push(o);
    }
    // rtbox load: the jobs' own CPU clocks (its main thread only waits); rt-app: the process's.
    let used = if workload == Workload::Load {
        job_cpu
    } else {
        cpu_used
    };
    outcome.cpu_over_wcet = if demand > 0 {
        used as f64 / demand as f64
    } else {
        0.0
    };
    Ok(outcome)
}

/// What runs the set's jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// `rtbox load` (`rtbox_task::load`): every job burns exactly its WCET of its thread's own
    /// CPU clock, whatever the machine's speed, and logs its release, start and end.
    Load,
    /// rt-app with its `run` loops calibrated at `calibration` ns per loop: a job's CPU time
    /// grows when the machine is slower than at calibration (1.6-2.0 times here beside load).
    RtApp { calibration: u64 },
}

/// One job as a log shows it: release and end (CLOCK_MONOTONIC ns), CPU time when known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    pub release: u64,
    pub end: u64,
    /// The job's own CPU time (`rtbox load` logs it; rt-app does not).
    pub cpu: Option<u64>,
}

/// Task `t`'s jobs from the logs in `logdir`.
fn task_jobs(workload: Workload, logdir: &Path, t: &TaskSpec) -> Result<Vec<Job>, String> {
    if workload == Workload::Load {
        let f = logdir.join(format!("{}.log", t.name));
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        let jobs =
            rtbox_task::load::parse_log(&text).map_err(|e| format!("{}: {e}", f.display()))?;
        return Ok(jobs
            .iter()
            .map(|j| Job {
                release: j.release,
                end: j.end,
                cpu: Some(j.cpu),
            })
            .collect());
    }
    let log = std::fs::read_dir(logdir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name().is_some_and(|n| {
                n.to_string_lossy()
                    .starts_with(&format!("rt-app-{}-", t.name))
            })
        })
        .ok_or(format!("no rt-app log of {}", t.name))?;
    let text = std::fs::read_to_string(&log).map_err(|e| e.to_string())?;
    let rows = parse_log(&text).map_err(|e| format!("{}: {e}", log.display()))?;
    Ok(rows
        .iter()
        .map(|r| Job {
            // release = end + slack - P (rt-app's us, CLOCK_MONOTONIC).
            release: ((r.end + r.slack) * 1000) as u64 - t.period,
            end: (r.end * 1000) as u64,
            cpu: None,
        })
        .collect())
}

/// The daemon's line on its loop over the whole run (logged at stop), from its log `log`.
pub fn loop_line(log: &str) -> Option<&str> {
    log.lines()
        .find(|l| l.contains("loop over the run"))
        .map(str::trim)
}

/// What a CI failure needs to tell a miss's cause, read from a run's directory `dir` (as
/// [`run`] left it) for the misses outside stalls in `o`: the daemon's warnings and its loop's
/// cost over the run against the admitted one, and for the first misses the level busy period
/// around each, with every job of the set inside it and the canary's late wake-ups there
/// (times in ms from the busy period's start). A failing test prints it: the run's files do
/// not outlive the CI machine.
pub fn miss_report(set: &SizedSet, o: &RunOutcome, dir: &Path) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let log = std::fs::read_to_string(dir.join("daemon.log")).unwrap_or_default();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .collect();
    let _ = writeln!(out, "daemon log: {} warnings", warnings.len());
    for l in warnings.iter().take(20) {
        let _ = writeln!(out, "  {l}");
    }
    if let Some(l) = loop_line(&log) {
        let _ = writeln!(out, "  {l}");
    }
    let ms = |t: u64, from: u64| (t as f64 - from as f64) / 1e6;
    let windows = o
        .tasks
        .iter()
        .flat_map(|t| t.own_windows.iter().map(move |m| (t.name.as_str(), *m)))
        .take(3);
    for (name, (release, end, from)) in windows {
        let _ = writeln!(
            out,
            "set {} {name}: released {:.2}, ended {:.2} ms after its busy period began",
            set.index,
            ms(release, from),
            ms(end, from)
        );
        for t in &set.tasks {
            let f = dir.join("log").join(format!("{}.log", t.name));
            let jobs = std::fs::read_to_string(f)
                .ok()
                .and_then(|text| rtbox_task::load::parse_log(&text).ok())
                .unwrap_or_default();
            for j in jobs.iter().filter(|j| j.end >= from && j.release <= end) {
                let _ = writeln!(
                    out,
                    "  {} (prio {}) job: release {:.2} start {:.2} end {:.2} cpu {:.2}",
                    t.name,
                    t.priority.map_or("-".to_string(), |p| p.to_string()),
                    ms(j.release, from),
                    ms(j.start, from),
                    ms(j.end, from),
                    j.cpu as f64 / 1e6
                );
            }
        }
        for l in o
            .canary
            .iter()
            .filter(|l| l.due + l.late >= from && l.due <= end)
        {
            let _ = writeln!(
                out,
                "  canary CPU {}: due {:.2}, {:.2} ms late",
                l.cpu,
                ms(l.due, from),
                l.late as f64 / 1e6
            );
        }
    }
    out
}

/// A scratch directory for set `index` under the system's temporary directory.
pub fn scratch(tag: &str, index: u64) -> PathBuf {
    std::env::temp_dir().join(format!(
        "rtbox-fidelity-{tag}-{}-{index}",
        std::process::id()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(cpu: u32, due_ms: u64, late_ms: u64) -> Late {
        Late {
            cpu,
            due: due_ms * 1_000_000,
            late: late_ms * 1_000_000,
        }
    }

    #[test]
    fn a_miss_is_the_machines_only_when_one_cpu_stalled_at_least_as_long() {
        let ms = 1_000_000;
        let stalls = [l(0, 105, 4), l(0, 112, 3), l(1, 110, 20)];
        // Job 100..150 ms late by 20 ms: CPU 1 stalled 20 ms inside it.
        assert!(during_stall(100 * ms, 150 * ms, 20 * ms, &stalls));
        // Late by 21 ms: no CPU stalled that long (CPU 0: 7 ms, CPU 1: 20 ms).
        assert!(!during_stall(100 * ms, 150 * ms, 21 * ms, &stalls));
        // CPU 0's two stalls add up (7 ms) for a 6 ms miss.
        assert!(during_stall(100 * ms, 150 * ms, 6 * ms, &stalls[..2]));
        // Stalls outside the job's window excuse nothing.
        assert!(!during_stall(200 * ms, 250 * ms, ms, &stalls));
    }

    #[test]
    fn a_stall_before_the_release_counts_when_it_left_the_level_busy() {
        let ms = 1_000_000;
        // Higher-priority job 90..112 (pending over 100), the late job 100..160 (due 150).
        let level = [
            (90 * ms, 112 * ms),
            (100 * ms, 160 * ms),
            (40 * ms, 50 * ms),
        ];
        assert_eq!(busy_start(&level, 100 * ms), 90 * ms);
        // Chains: 70..95 overlaps 90..112, so the busy period starts at 70.
        let chain = [
            (70 * ms, 95 * ms),
            (90 * ms, 112 * ms),
            (100 * ms, 160 * ms),
        ];
        assert_eq!(busy_start(&chain, 100 * ms), 70 * ms);
        // A job that ended exactly at the release leaves an idle instant there.
        assert_eq!(busy_start(&[(80 * ms, 100 * ms)], 100 * ms), 100 * ms);
        // A 12 ms stall over 86..98 ms: outside the job's own window, inside its busy period.
        let stall = [l(0, 86, 12)];
        assert!(!during_stall(100 * ms, 160 * ms, 10 * ms, &stall));
        assert!(during_stall(
            busy_start(&level, 100 * ms),
            160 * ms,
            10 * ms,
            &stall
        ));
        // ...but never more than the stall: 13 ms late is rtbox's.
        assert!(!during_stall(90 * ms, 160 * ms, 13 * ms, &stall));
    }

    #[test]
    fn a_charged_stall_costs_a_small_box_its_payback_too() {
        let ms = 1_000_000;
        let stalls = [l(1, 100, 10), l(0, 105, 4), l(1, 300, 50)];
        // Box on CPU 1 at 0.25: 10 ms directly plus 40 ms of payback.
        assert_eq!(
            stall_bound(90 * ms, 200 * ms, &stalls, &[(1, 0.25)]),
            50 * ms
        );
        // A global box at 0.5 on both CPUs: (10 + 4) x 3.
        assert_eq!(
            stall_bound(90 * ms, 200 * ms, &stalls, &[(0, 0.5), (1, 0.5)]),
            42 * ms
        );
        // Stalls outside the window or on other CPUs count nothing.
        assert_eq!(stall_bound(90 * ms, 200 * ms, &stalls, &[(2, 0.5)]), 0);
    }

    #[test]
    fn every_task_gets_the_start_delay() {
        let j = r#"{"tasks":{"t0":{"priority":2,"run":1000},"t1":{"run":5}},"global":{}}"#;
        let out: serde_json::Value =
            serde_json::from_str(&with_start_delay(j, 300_000).unwrap()).unwrap();
        assert_eq!(out["tasks"]["t0"]["delay"], 300_000);
        assert_eq!(out["tasks"]["t1"]["delay"], 300_000);
        assert_eq!(out["tasks"]["t0"]["run"], 1000);
        assert!(with_start_delay("{}", 1).is_err());
    }

    #[test]
    fn work_scales_every_run_event_only() {
        let j = r#"{"tasks":{"t0":{"run":1000,"timer":{"period":20000}},"t1":{"phases":{"p":{"run":3}}}},"global":{}}"#;
        let out: serde_json::Value = serde_json::from_str(&with_work(j, 62).unwrap()).unwrap();
        assert_eq!(out["tasks"]["t0"]["run"], 620);
        assert_eq!(out["tasks"]["t0"]["timer"]["period"], 20000);
        assert_eq!(out["tasks"]["t1"]["phases"]["p"]["run"], 1);
    }

    #[test]
    fn sets_are_reproducible_and_sized_with_the_margin() {
        let a = draw(7, 3);
        assert_eq!(a, draw(7, 3));
        assert!((3..=5).contains(&a.len()));
        assert!(a
            .iter()
            .all(|t| t.priority.is_some() && t.deadline == t.period));
        assert_eq!(with_margin(1000, 25), 1250);
        assert_eq!(with_margin(1001, 25), 1252);
        // A light set always gets an admissible interface, sized for the inflated WCETs.
        let light = vec![TaskSpec {
            priority: Some(1),
            box_name: Some("A".into()),
            ..TaskSpec::periodic("t0", 2_000_000, 20_000_000)
        }];
        let s = size_kind(0, Kind::Global, light.clone(), 25).unwrap();
        assert!(s.interface.starts_with("A 0."), "{}", s.interface);
        assert!(s.config.contains("interface.bdm"), "{}", s.config);
        assert!(
            s.config.contains("wcet = \"2000000ns\""),
            "nominal WCET runs"
        );
        let sys = rtbox_config::parse_str(&s.config).unwrap();
        assert!(
            rtbox_analysis::synth::synthesize_box(&sys, "A", Request::Bdm { delta: DELTA }).is_ok()
        );
        assert!(rtbox_model::admit_with_loop(&sys, rtbox_model::LoopCost::DEFAULT).admitted());
        // The kinds take turns; an EDF box is sized with the EDF test.
        assert_eq!(
            [Kind::of(0), Kind::of(1), Kind::of(2), Kind::of(3)],
            [Kind::Global, Kind::Pinned, Kind::Edf, Kind::Global]
        );
        let e = size_kind(2, Kind::Edf, light, 25).unwrap();
        assert!(e.config.contains("policy = \"edf\""), "{}", e.config);
    }

    #[test]
    fn pinned_sets_are_partitioned_into_one_admitted_box_per_cpu() {
        let t = |name: &str, c: Nanos, p: Nanos, prio: u32| TaskSpec {
            priority: Some(prio),
            box_name: Some("A".into()),
            ..TaskSpec::periodic(name, c, p)
        };
        // 0.4 + 0.35 + 0.3 (+ 10 %): not all on one CPU.
        let tasks = vec![
            t("a", 8_000_000, 20_000_000, 3),
            t("b", 10_500_000, 30_000_000, 2),
            t("c", 12_000_000, 40_000_000, 1),
        ];
        let s = size_kind(1, Kind::Pinned, tasks, 10).unwrap();
        assert_eq!(s.boxes, vec!["P0".to_string(), "P1".to_string()]);
        let sys = rtbox_config::parse_str(&s.config).unwrap();
        assert!(rtbox_model::admit_with_loop(&sys, rtbox_model::LoopCost::DEFAULT).admitted());
        assert_eq!(sys.tasks_of("P0").count() + sys.tasks_of("P1").count(), 3);
        // First fit by decreasing utilization: a (0.4) on CPU 0 first.
        assert!(sys.tasks_of("P0").any(|x| x.name == "a"));
        // Too heavy for two CPUs: refused with the reason.
        let heavy: Vec<TaskSpec> = (0..5)
            .map(|i| t(&format!("h{i}"), 9_000_000, 20_000_000, 5 - i))
            .collect();
        let e = size_kind(4, Kind::Pinned, heavy, 10).unwrap_err();
        assert!(e.contains("fits on no CPU"), "{e}");
    }

    #[test]
    fn a_miss_report_shows_the_jobs_and_stalls_of_the_busy_period_and_the_warnings() {
        let ms = 1_000_000;
        let t = |name: &str, c: Nanos, p: Nanos, prio: u32| TaskSpec {
            priority: Some(prio),
            box_name: Some("A".into()),
            ..TaskSpec::periodic(name, c, p)
        };
        let s = size_kind(
            0,
            Kind::Global,
            vec![t("hi", 2 * ms, 10 * ms, 2), t("lo", 4 * ms, 20 * ms, 1)],
            10,
        )
        .unwrap();
        let dir = std::env::temp_dir().join(format!("rtbox-miss-report-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("log")).unwrap();
        let base = 1_000 * ms;
        // lo: released at 0, ran 4 ms but ended at 23 ms (due 20); an older job outside.
        std::fs::write(
            dir.join("log/lo.log"),
            format!(
                "# task lo\n{} {} {} {}\n{} {} {} {}\n",
                base - 20 * ms,
                base - 19 * ms,
                base - 15 * ms,
                4 * ms,
                base,
                base + 18 * ms,
                base + 23 * ms,
                4 * ms
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("log/hi.log"),
            format!(
                "{} {} {} {}\n",
                base + 10 * ms,
                base + 10 * ms,
                base + 12 * ms,
                2 * ms
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("daemon.log"),
            "x  INFO rtbox: started\nx  WARN rtbox: the loop's step cost is above the admitted one\nx  INFO rtbox: loop over the run steps=10 per_step_us=91.5 admitted_us=70\n",
        )
        .unwrap();
        let o = RunOutcome {
            tasks: vec![TaskOutcome {
                name: "lo".into(),
                jobs: 2,
                misses: 1,
                own: vec![(20_000, 3 * ms)],
                own_windows: vec![(base, base + 23 * ms, base)],
                missed: vec![(base, base + 23 * ms, base)],
            }],
            // 1 ms on CPU 1 inside the window: too short to excuse a 3 ms miss.
            canary: vec![Late {
                cpu: 1,
                due: base + 5 * ms,
                late: ms,
            }],
            ..RunOutcome::default()
        };
        let r = miss_report(&s, &o, &dir);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            r.contains("1 warnings") && r.contains("above the admitted"),
            "{r}"
        );
        assert!(r.contains("lo: released 0.00, ended 23.00"), "{r}");
        assert!(
            r.contains("lo (prio 1) job: release 0.00 start 18.00 end 23.00 cpu 4.00"),
            "{r}"
        );
        assert!(r.contains("hi (prio 2) job: release 10.00"), "{r}");
        assert!(
            !r.contains("release -20.00"),
            "a job outside the window: {r}"
        );
        assert!(r.contains("canary CPU 1: due 5.00, 1.00 ms late"), "{r}");
    }
}
