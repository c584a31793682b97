//! Issue 4 scenario 5: the analysis agrees with the simulator.
//!
//! Random boxes (BDM, MPR or per-CPU servers; fifo or edf; global or pinned) get random task
//! sets; for every box that the analysis declares schedulable, the simulator runs it with
//! (a) synchronous periodic releases and every job taking its WCET, and (b) a sporadic variant
//! (random gaps, execution times uniform in [WCET/2, WCET]). Any deadline miss, or any response
//! time above a bound the analysis gave, is a disagreement: a bug in one of the two.

use rtbox_analysis::analyze_box;
use rtbox_model::{
    admit, Arrival, Bandwidth, BoxSpec, Interface, Nanos, Placement, Platform, Policy, System,
};
use rtbox_sim::{simulate, SimOptions};
use rtbox_workload::taskset::{assign_deadline_monotonic, Deadlines, TaskSetParams, UtilMethod};
use rtbox_workload::Rng;

use crate::pool::run_indexed;
use crate::sweep::pin_as_analysed;

const MS: Nanos = 1_000_000;

/// The agreement experiment's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgreementParams {
    /// Random boxes to draw (each is analysed; the schedulable ones are simulated).
    pub boxes: usize,
    pub seed: u64,
    /// Simulated time per run is the hyperperiod plus the longest period, capped here.
    pub max_duration: Nanos,
    pub threads: usize,
    pub profile: Profile,
}

/// How hard the random boxes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// Periods 10-100 ms on a 10 ms grid, 10-70 % of the box's bandwidth: short hyperperiods.
    #[default]
    Standard,
    /// Periods 2-50 ms on a 1 ms grid, 30-100 % of the bandwidth: boxes near the analysis'
    /// limit, periods close to the servers' (long simulations, capped by `max_duration`).
    Stress,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Standard => "standard",
            Profile::Stress => "stress",
        }
    }
}

/// One box where analysis and simulation disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disagreement {
    pub index: usize,
    /// `synchronous` or `sporadic`.
    pub variant: &'static str,
    /// The box and its tasks, readable enough to rebuild the case.
    pub case: String,
    /// What went wrong, per task.
    pub detail: String,
}

/// Totals over all boxes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgreementReport {
    pub boxes: usize,
    /// Boxes the analysis declared schedulable (and therefore simulated twice).
    pub schedulable: usize,
    pub jobs_synchronous: u64,
    pub jobs_sporadic: u64,
    /// Simulated nanoseconds over all runs.
    pub simulated: u128,
    /// Response-time bounds compared with observed maxima.
    pub bounds_checked: u64,
    /// Control: boxes the analysis rejected that did miss deadlines in the synchronous
    /// simulation (shows the simulations can see misses; the rest measures pessimism).
    pub rejected_and_missed: usize,
    pub disagreements: Vec<Disagreement>,
    /// Boxes where a simulation could not run (with the reason).
    pub errors: Vec<String>,
}

/// A random single-box system (index `index` of the experiment seeded `seed`).
pub fn random_box(seed: u64, index: usize, profile: Profile) -> System {
    let mut rng = Rng::stream(seed, index as u64);
    loop {
        if let Some(s) = try_random_box(&mut rng, profile) {
            return s;
        }
    }
}

fn pick<T: Copy>(rng: &mut Rng, items: &[T]) -> T {
    items[rng.range_inclusive(0, items.len() as u64 - 1) as usize]
}

fn try_random_box(rng: &mut Rng, profile: Profile) -> Option<System> {
    let m = pick(rng, &[1u32, 2, 2, 3, 4]);
    let platform = Platform::with_cpus(m);
    let (interface, bandwidth) = match rng.range_inclusive(0, 2) {
        0 => {
            let alpha = rng.range_inclusive(40, 95);
            let delta = pick(rng, &[1, 2, 5, 10]) * MS;
            let iface = Interface::Bdm {
                alpha: Bandwidth::of(alpha, 100),
                delta,
            };
            (iface, m as f64 * alpha as f64 / 100.0)
        }
        1 => {
            let pi = pick(rng, &[5, 10, 20]) * MS;
            let k = rng.range_inclusive(1, m as u64) as u32;
            let share = rng.range_inclusive(40, 95);
            let theta = pi * k as u64 * share / 100;
            let iface = Interface::Mpr { theta, pi, m: k };
            (iface, theta as f64 / pi as f64)
        }
        _ => {
            let period = pick(rng, &[2, 5, 10, 20]) * MS;
            let share = rng.range_inclusive(40, 95);
            let iface = Interface::PerCpu {
                budget: period * share / 100,
                period,
            };
            (iface, m as f64 * share as f64 / 100.0)
        }
    };
    let mut spec = BoxSpec::new("b", interface);
    spec.policy = pick(rng, &[Policy::Fifo, Policy::Edf]);
    spec.placement = pick(rng, &[Placement::Global, Placement::Pinned]);
    let n = rng.range_inclusive(m as u64, 3 * m as u64 + 2) as usize;
    // Utilization: a fraction of what the box receives, low enough that many sets pass the
    // (pessimistic) tests.
    let (low, high, pmin, pmax, grid) = match profile {
        Profile::Standard => (0.1, 0.7, 10 * MS, 100 * MS, 10 * MS),
        Profile::Stress => (0.3, 1.0, 2 * MS, 50 * MS, MS),
    };
    let fraction = low + (high - low) * rng.uniform();
    let params = TaskSetParams {
        tasks: n,
        utilization: (bandwidth * fraction).min(n as f64 * 0.9),
        method: UtilMethod::RandFixedSum,
        max_task_util: 0.9,
        period_min: pmin,
        period_max: pmax,
        granularity: grid,
        deadlines: if rng.uniform() < 0.5 {
            Deadlines::Implicit
        } else {
            Deadlines::Constrained
        },
        box_name: Some("b".into()),
        ..TaskSetParams::default()
    };
    let mut tasks = params.generate(rng).ok()?;
    assign_deadline_monotonic(&mut tasks);
    let system = System::new(platform, vec![spec], tasks).ok()?;
    admit(&system).admitted().then_some(system)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Hyperperiod plus the longest period (so the last job of the hyperperiod can finish), capped.
fn duration_for(system: &System, cap: Nanos) -> Nanos {
    let mut h: Nanos = 1;
    for t in &system.tasks {
        h = h / gcd(h, t.period) * t.period;
        if h > cap {
            return cap;
        }
    }
    let longest = system.tasks.iter().map(|t| t.period).max().unwrap_or(0);
    (h + longest).min(cap)
}

/// Describes a box and its tasks for a disagreement report.
pub fn describe(system: &System) -> String {
    let b = &system.boxes()[0];
    let mut s = format!(
        "cpus={} interface={:?} policy={} placement={}; tasks:",
        system.platform.cpus,
        b.spec.interface,
        b.spec.policy.name(),
        b.spec.placement.name()
    );
    for t in &system.tasks {
        s.push_str(&format!(
            " {}(C={} T={} D={} prio={:?} cpu={:?})",
            t.name, t.wcet, t.period, t.deadline, t.priority, t.cpu
        ));
    }
    s
}

/// The outcome for one box.
#[derive(Debug, Clone, Default)]
struct BoxOutcome {
    schedulable: bool,
    jobs_sync: u64,
    jobs_sporadic: u64,
    simulated: u128,
    bounds_checked: u64,
    rejected_and_missed: bool,
    disagreements: Vec<Disagreement>,
    error: Option<String>,
}

fn check_box(params: &AgreementParams, index: usize) -> BoxOutcome {
    let mut out = BoxOutcome::default();
    let system = random_box(params.seed, index, params.profile);
    let report = match analyze_box(&system, "b") {
        Ok(r) => r,
        Err(e) => {
            out.error = Some(format!("box {index}: analysis: {e}"));
            return out;
        }
    };
    if !report.schedulable() {
        // Control run: the global/partitioned placement as analysed, synchronous WCETs.
        let system = if system.boxes()[0].spec.placement == Placement::Pinned {
            pin_as_analysed(&system, "b", &report).unwrap_or(system)
        } else {
            system
        };
        let opts = SimOptions {
            duration: duration_for(&system, params.max_duration),
            supply_windows: false,
            ..SimOptions::default()
        };
        out.rejected_and_missed = simulate(&system, &opts).is_ok_and(|r| r.total_misses() > 0);
        return out;
    }
    out.schedulable = true;
    let system = if system.boxes()[0].spec.placement == Placement::Pinned {
        match pin_as_analysed(&system, "b", &report) {
            Ok(s) => s,
            Err(e) => {
                out.error = Some(format!("box {index}: {e}"));
                return out;
            }
        }
    } else {
        system
    };
    let bounds: Vec<Option<Nanos>> = report.verdict.tasks.iter().map(|t| t.response).collect();
    let duration = duration_for(&system, params.max_duration);
    for variant in ["synchronous", "sporadic"] {
        let run_system = if variant == "synchronous" {
            system.clone()
        } else {
            let tasks = system
                .tasks
                .iter()
                .map(|t| {
                    let mut t = t.clone();
                    t.arrival = Arrival::Sporadic;
                    t.bcet = Some((t.wcet / 2).max(1));
                    t
                })
                .collect();
            match System::new(system.platform.clone(), system.specs(), tasks) {
                Ok(s) => s,
                Err(e) => {
                    out.error = Some(format!("box {index}: {e}"));
                    return out;
                }
            }
        };
        let opts = SimOptions {
            duration,
            seed: params.seed ^ index as u64,
            supply_windows: false,
            ..SimOptions::default()
        };
        let rep = match simulate(&run_system, &opts) {
            Ok(r) => r,
            Err(e) => {
                out.error = Some(format!("box {index} ({variant}): simulation: {e}"));
                return out;
            }
        };
        out.simulated += u128::from(duration);
        let mut problems = Vec::new();
        for (i, spec) in run_system.tasks.iter().enumerate() {
            let Some(t) = rep.task(&spec.name) else {
                problems.push(format!("{} missing from the report", spec.name));
                continue;
            };
            if variant == "synchronous" {
                out.jobs_sync += t.jobs;
            } else {
                out.jobs_sporadic += t.jobs;
            }
            if t.misses > 0 {
                problems.push(format!(
                    "{}: {} of {} jobs missed (max response {} ns, D = {} ns)",
                    spec.name, t.misses, t.released, t.response.max, spec.deadline
                ));
            }
            if let Some(Some(bound)) = bounds.get(i) {
                out.bounds_checked += 1;
                if t.response.count > 0 && t.response.max > *bound {
                    problems.push(format!(
                        "{}: observed response {} ns above the analysis bound {} ns",
                        spec.name, t.response.max, bound
                    ));
                }
            }
        }
        if !problems.is_empty() {
            out.disagreements.push(Disagreement {
                index,
                variant,
                case: format!(
                    "{} [test {}, duration {} ns]",
                    describe(&run_system),
                    report.verdict.test.describe(),
                    duration
                ),
                detail: problems.join("; "),
            });
        }
    }
    out
}

/// Runs the experiment over `params.boxes` random boxes on all cores.
pub fn check_agreement(
    params: &AgreementParams,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> AgreementReport {
    let outcomes = run_indexed(
        params.boxes,
        params.threads,
        |i| check_box(params, i),
        progress,
    );
    let mut r = AgreementReport {
        boxes: params.boxes,
        ..AgreementReport::default()
    };
    for o in outcomes {
        r.schedulable += usize::from(o.schedulable);
        r.jobs_synchronous += o.jobs_sync;
        r.jobs_sporadic += o.jobs_sporadic;
        r.simulated += o.simulated;
        r.bounds_checked += o.bounds_checked;
        r.rejected_and_missed += usize::from(o.rejected_and_missed);
        r.disagreements.extend(o.disagreements);
        r.errors.extend(o.error);
    }
    r
}
