//! Issue 17: the limited carry-in global EDF test on MPR boxes, against the BCL-interference
//! test rtbox had before, and its safety in simulation under an adversarial supply.
//!
//! Random implicit-deadline task sets on random MPR(Pi, Theta, m) boxes (m = 2..4) with global
//! EDF inside are analysed by both tests. Every set the union accepts is simulated on exactly m
//! CPUs that an adversary box fills completely (platform cap 1): on each CPU an adversary
//! server of budget 2 (Pi - Q_i) every 2 Pi beside the MPR server (Q_i, Pi). The adversary is
//! declared first, so it wins EDF ties: the MPR server gets its budget at the start of one
//! period and at the end of the next, the PRM's worst blackout of 2 (Pi - Q_i) on every CPU at
//! once. Each set runs three times: synchronous releases, releases at the start of the first
//! blackout, and sporadic releases, every job taking its WCET.

use rtbox_analysis::carry_in::limited_carry_in;
use rtbox_analysis::global::global_edf;
use rtbox_analysis::{Mpr, Task};
use rtbox_model::{
    mpr_budgets, Arrival, Bandwidth, BoxSpec, Interface, Nanos, Placement, Platform, Policy,
    ServerSpec, System, TaskSpec,
};
use rtbox_sim::{simulate, SimOptions};
use rtbox_workload::taskset::{Deadlines, TaskSetParams, UtilMethod};
use rtbox_workload::Rng;

use crate::pool::run_indexed;

const MS: Nanos = 1_000_000;

/// The experiment's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CarryInParams {
    pub sets: usize,
    pub seed: u64,
    /// Simulated time per run: the hyperperiod plus the longest period, capped here.
    pub max_duration: Nanos,
    pub threads: usize,
    /// Draw m + 1 to 3 m + 2 tasks per set instead of 2 m to 5 m.
    pub few_tasks: bool,
}

/// One random case: the MPR interface and the task set (box `b`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    pub mpr: Mpr,
    pub tasks: Vec<TaskSpec>,
}

/// Totals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CarryInReport {
    pub sets: usize,
    /// Accepted by the BCL-interference test (rtbox before issue 17).
    pub bcl: usize,
    /// Accepted by the limited carry-in test.
    pub carry_in: usize,
    /// Accepted by either (what `rtbox analyze` now accepts).
    pub union: usize,
    pub runs: u64,
    pub jobs: u64,
    pub simulated: u128,
    /// Deadline misses of accepted sets (each a description of the case).
    pub misses: Vec<String>,
    pub errors: Vec<String>,
}

impl CarryInReport {
    /// Union acceptance over BCL acceptance.
    pub fn gain(&self) -> f64 {
        self.union as f64 / self.bcl.max(1) as f64
    }
}

/// Case `index` of the experiment seeded `seed`: m in 2..=4, Pi in {5, 10, 20} ms, Theta
/// 40-95 % of m Pi, 2 m to 5 m tasks (m + 1 to 3 m + 2 with `few_tasks`; RandFixedSum, each at most 0.9 CPU) using
/// 20-100 % of Theta / Pi, periods log-uniform 10-100 ms on a 1 ms grid.
pub fn random_case(seed: u64, index: usize, few_tasks: bool) -> Case {
    let mut rng = Rng::stream(seed, index as u64);
    loop {
        let m = rng.range_inclusive(2, 4) as u32;
        let pi = [5, 10, 20][rng.range_inclusive(0, 2) as usize] * MS;
        let share = rng.range_inclusive(40, 95);
        let theta = pi * u64::from(m) * share / 100;
        let (lo, hi) = if few_tasks {
            (u64::from(m) + 1, 3 * u64::from(m) + 2)
        } else {
            (2 * u64::from(m), 5 * u64::from(m))
        };
        let n = rng.range_inclusive(lo, hi) as usize;
        let fraction = 0.2 + 0.8 * rng.uniform();
        let params = TaskSetParams {
            tasks: n,
            utilization: (theta as f64 / pi as f64 * fraction).min(n as f64 * 0.9),
            method: UtilMethod::RandFixedSum,
            max_task_util: 0.9,
            period_min: 10 * MS,
            period_max: 100 * MS,
            granularity: MS,
            deadlines: Deadlines::Implicit,
            box_name: Some("b".into()),
            ..TaskSetParams::default()
        };
        if let Ok(tasks) = params.generate(&mut rng) {
            let mpr = Mpr {
                period: pi,
                budget: theta,
                m,
            };
            return Case { mpr, tasks };
        }
    }
}

fn analysis_tasks(case: &Case) -> Vec<Task> {
    case.tasks
        .iter()
        .map(|t| Task::with_deadline(t.wcet, t.deadline, t.period))
        .collect()
}

/// (BCL accepts, limited carry-in accepts).
pub fn verdicts(case: &Case) -> (bool, bool) {
    let ts = analysis_tasks(case);
    let all = |v: Vec<rtbox_analysis::global::GlobalVerdict>| v.iter().all(|x| x.schedulable);
    (
        all(global_edf(&ts, &case.mpr)),
        all(limited_carry_in(&ts, &case.mpr)),
    )
}

/// The case on m fully loaded CPUs with the adversary box of the module doc; `offset` delays
/// every release of the box's tasks, `sporadic` makes them sporadic.
pub fn adversarial_system(case: &Case, offset: Nanos, sporadic: bool) -> Result<System, String> {
    let Mpr { period, budget, m } = case.mpr;
    let mut platform = Platform::with_cpus(m);
    platform.cap = Bandwidth::ONE;
    let mut servers = Vec::new();
    let mut tasks = Vec::new();
    for (cpu, q) in mpr_budgets(budget, m).into_iter().enumerate() {
        if q < period {
            servers.push(ServerSpec {
                cpu: cpu as u32,
                budget: 2 * (period - q),
                period: 2 * period,
            });
            // Always ready: one job of a second every second.
            let mut hog = TaskSpec::periodic(format!("adv{cpu}"), 1_000 * MS, 1_000 * MS);
            hog.box_name = Some("adv".into());
            hog.cpu = Some(cpu as u32);
            tasks.push(hog);
        }
    }
    let mut specs = Vec::new();
    if !servers.is_empty() {
        let mut adv = BoxSpec::new("adv", Interface::Servers(servers));
        adv.placement = Placement::Pinned;
        specs.push(adv);
    }
    let mut b = BoxSpec::new(
        "b",
        Interface::Mpr {
            theta: budget,
            pi: period,
            m,
        },
    );
    b.policy = Policy::Edf;
    b.placement = Placement::Global;
    specs.push(b);
    for t in &case.tasks {
        let mut t = t.clone();
        t.offset = offset;
        if sporadic {
            t.arrival = Arrival::Sporadic;
        }
        tasks.push(t);
    }
    System::new(platform, specs, tasks).map_err(|e| e.to_string())
}

fn duration_for(tasks: &[TaskSpec], cap: Nanos) -> Nanos {
    let mut h: Nanos = 1;
    for t in tasks {
        h = h / gcd(h, t.period) * t.period;
        if h > cap {
            return cap;
        }
    }
    let longest = tasks.iter().map(|t| t.period).max().unwrap_or(0);
    (h + longest).min(cap)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Describes a case for a miss report.
pub fn describe(case: &Case) -> String {
    let tasks: Vec<String> = case
        .tasks
        .iter()
        .map(|t| format!("({}, {})", t.wcet, t.period))
        .collect();
    format!(
        "MPR(Pi={}, Theta={}, m={}) tasks (C, T) ns: {}",
        case.mpr.period,
        case.mpr.budget,
        case.mpr.m,
        tasks.join(" ")
    )
}

#[derive(Default)]
struct Outcome {
    bcl: bool,
    carry_in: bool,
    runs: u64,
    jobs: u64,
    simulated: u128,
    misses: Vec<String>,
    errors: Vec<String>,
}

fn run_case(params: &CarryInParams, index: usize) -> Outcome {
    let case = random_case(params.seed, index, params.few_tasks);
    let (bcl, carry_in) = verdicts(&case);
    let mut out = Outcome {
        bcl,
        carry_in,
        ..Outcome::default()
    };
    if !(bcl || carry_in) {
        return out;
    }
    let duration = duration_for(&case.tasks, params.max_duration);
    let first_blackout = mpr_budgets(case.mpr.budget, case.mpr.m)[0];
    let variants = [
        ("synchronous", 0, false),
        ("at the blackout", first_blackout, false),
        ("sporadic", 0, true),
    ];
    for (name, offset, sporadic) in variants {
        let system = match adversarial_system(&case, offset, sporadic) {
            Ok(s) => s,
            Err(e) => {
                out.errors.push(format!("set {index}: {e}"));
                return out;
            }
        };
        let opts = SimOptions {
            duration: duration + offset,
            seed: params.seed ^ index as u64,
            supply_windows: false,
            ..SimOptions::default()
        };
        let report = match simulate(&system, &opts) {
            Ok(r) => r,
            Err(e) => {
                out.errors.push(format!("set {index} ({name}): {e}"));
                return out;
            }
        };
        out.runs += 1;
        out.simulated += u128::from(duration);
        for t in &case.tasks {
            let Some(r) = report.task(&t.name) else {
                out.errors
                    .push(format!("set {index}: {} not reported", t.name));
                continue;
            };
            out.jobs += r.jobs;
            if r.misses > 0 {
                out.misses.push(format!(
                    "set {index} ({name}; BCL {bcl}, carry-in {carry_in}): {} missed {} of {} \
                     (max response {} ns); {}",
                    t.name,
                    r.misses,
                    r.released,
                    r.response.max,
                    describe(&case)
                ));
            }
        }
    }
    out
}

/// Runs the experiment.
pub fn run(params: &CarryInParams, progress: &(dyn Fn(usize, usize) + Sync)) -> CarryInReport {
    let outcomes = run_indexed(
        params.sets,
        params.threads,
        |i| run_case(params, i),
        progress,
    );
    let mut report = CarryInReport {
        sets: params.sets,
        ..CarryInReport::default()
    };
    for o in outcomes {
        report.bcl += usize::from(o.bcl);
        report.carry_in += usize::from(o.carry_in);
        report.union += usize::from(o.bcl || o.carry_in);
        report.runs += o.runs;
        report.jobs += o.jobs;
        report.simulated += o.simulated;
        report.misses.extend(o.misses);
        report.errors.extend(o.errors);
    }
    report
}
