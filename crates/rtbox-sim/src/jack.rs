//! Seed 004's JACK pipeline experiment (section 4.2, Table 1), as a reusable sweep: one group
//! reservation for the whole pipeline versus one deadline reservation per pipeline thread.

use std::collections::BTreeMap;

use rtbox_model::{Interface, Nanos, System};

use crate::{simulate, ModelKind, SimError, SimOptions};

/// The pipeline threads in chain order and their WCETs (ns), and the period D (ns).
pub const STAGES: [(&str, Nanos); 3] = [
    ("jackd", 58_050),
    ("client1", 290_000),
    ("client2", 290_000),
];
pub const PERIOD: Nanos = 2_902_500;

pub fn sum_c() -> Nanos {
    STAGES.iter().map(|s| s.1).sum()
}

/// The configuration with the jack box's budget set to `budget` (period D).
pub fn with_group_budget(base: &System, budget: Nanos) -> Result<System, SimError> {
    let mut specs = base.specs();
    for b in specs.iter_mut().filter(|b| b.name == "jack") {
        b.interface = Interface::PerCpu {
            budget,
            period: PERIOD,
        };
    }
    System::new(base.platform.clone(), specs, base.tasks.clone()).map_err(|e| SimError::BadOption {
        field: "jack.budget".into(),
        reason: e.to_string(),
    })
}

/// The configuration with every stage's end-to-end deadline set to `deadline` (e.g. 2 D, a
/// pipeline that tolerates one period of extra latency).
pub fn with_deadline(base: &System, deadline: Nanos) -> Result<System, SimError> {
    let mut tasks = base.tasks.clone();
    for t in tasks
        .iter_mut()
        .filter(|t| STAGES.iter().any(|s| s.0 == t.name))
    {
        t.deadline = deadline;
    }
    System::new(base.platform.clone(), base.specs(), tasks).map_err(|e| SimError::BadOption {
        field: "deadline".into(),
        reason: e.to_string(),
    })
}

/// Misses of the pipeline (all stages) with the jack box's budget set to `budget`.
pub fn group_misses(base: &System, budget: Nanos, duration: Nanos) -> Result<u64, SimError> {
    let system = with_group_budget(base, budget)?;
    let opts = SimOptions {
        duration,
        supply_windows: false,
        ..SimOptions::default()
    };
    let r = simulate(&system, &opts)?;
    Ok(STAGES
        .iter()
        .map(|(n, _)| r.task(n).map_or(0, |t| t.misses))
        .sum())
}

/// The analysis' verdict on the jack box with budget `budget` (chain analysis,
/// `rtbox_analysis::chain`).
pub fn group_schedulable(base: &System, budget: Nanos) -> bool {
    with_group_budget(base, budget)
        .ok()
        .and_then(|s| rtbox_analysis::analyze_box(&s, "jack").ok())
        .is_some_and(|r| r.schedulable())
}

/// The analysed end-to-end bound of the pipeline with one deadline reservation per stage:
/// each stage, released into its idle reservation, ends within ceil(C_i / Q_i) P_i
/// (`rtbox_analysis::chain::activation_bound`); the bounds add up along the chain.
pub fn dl_end_to_end_bound(params: &BTreeMap<String, (Nanos, Nanos, Nanos)>) -> Option<Nanos> {
    STAGES.iter().try_fold(0u64, |acc, &(n, c)| {
        let &(q, _, p) = params.get(n)?;
        acc.checked_add(rtbox_analysis::chain::activation_bound(c, q, p)?)
    })
}

/// Per-thread deadline reservations from seed 004's Eq. 1 (Q_i = C_i, P_i = D_i = C_i / sum C * D),
/// with every Q_i scaled by `scale` (rounded up to the nanosecond, at most P_i).
pub fn dl_params(scale: f64) -> BTreeMap<String, (Nanos, Nanos, Nanos)> {
    let total = sum_c();
    STAGES
        .iter()
        .map(|&(n, c)| {
            let p = (u128::from(c) * u128::from(PERIOD) / u128::from(total)) as Nanos;
            let q = ((c as f64 * scale).ceil() as Nanos).clamp(1, p);
            (n.to_string(), (q, p, p))
        })
        .collect()
}

/// The pipeline's total deadline bandwidth for a set of parameters.
pub fn dl_bandwidth(params: &BTreeMap<String, (Nanos, Nanos, Nanos)>) -> f64 {
    params.values().map(|&(q, _, p)| q as f64 / p as f64).sum()
}

pub fn dl_misses(base: &System, scale: f64, duration: Nanos) -> Result<u64, SimError> {
    let opts = SimOptions {
        duration,
        model: ModelKind::Deadline,
        dl_params: dl_params(scale),
        supply_windows: false,
        ..SimOptions::default()
    };
    let r = simulate(base, &opts)?;
    Ok(STAGES
        .iter()
        .map(|(n, _)| r.task(n).map_or(0, |t| t.misses))
        .sum())
}
