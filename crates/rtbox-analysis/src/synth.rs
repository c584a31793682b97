//! Interface synthesis: the smallest reservation under which a task set passes the test that
//! rtbox applies to it (see [`crate::system::box_verdict`]).
//!
//! Every search returns a boundary: the value found passes and the next smaller value (one ns,
//! or one 10^-12 unit of alpha) fails. For G-FP on BDM the minimal alpha has a closed form.

use std::fmt;

use rtbox_model::{
    bdm_server_params, Bandwidth, Interface, Nanos, Placement, Policy, System, BW_ONE,
};

use crate::global::{prepare, theorem1_interference};
use crate::supply::{Bdm, Mpr, Prm, ServerSet};
use crate::system::{analyze_box, box_schedulable_fast, Reservation};
use crate::task::{from_specs, Task};

/// Why no interface could be found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SynthError {
    /// The box has no tasks: nothing to size.
    NoTasks,
    /// Some task needs more than the largest interface of this kind.
    Infeasible(String),
    /// The requested Delta (or period) is not usable.
    BadParameter(String),
    UnknownBox(String),
}

impl fmt::Display for SynthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SynthError::NoTasks => write!(f, "the box has no tasks to size an interface for"),
            SynthError::Infeasible(why) => write!(f, "no interface of this kind works: {why}"),
            SynthError::BadParameter(why) => write!(f, "{why}"),
            SynthError::UnknownBox(b) => write!(f, "box \"{b}\" does not exist"),
        }
    }
}

impl std::error::Error for SynthError {}

/// Least x in [lo, hi] with `ok(x)`, given `ok(hi)`; the result r has ok(r) and, if r > lo,
/// !ok(r - 1) (a boundary even if `ok` were not monotone).
fn least(mut lo: u64, mut hi: u64, ok: impl Fn(u64) -> bool) -> u64 {
    debug_assert!(ok(hi));
    if ok(lo) {
        return lo;
    }
    // Invariant: !ok(lo), ok(hi).
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// A synthesized BDM interface and the per-CPU server it implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BdmSynthesis {
    pub alpha: Bandwidth,
    pub delta: Nanos,
    pub m: u32,
    /// (Q, P) of each vCPU (seed 002 eq. 5, as rtbox rounds it).
    pub server: (Nanos, Nanos),
}

/// Whether the task set passes on BDM (alpha, delta, m).
pub fn bdm_ok(
    tasks: &[Task],
    pins: &[Option<usize>],
    m: u32,
    alpha: Bandwidth,
    delta: Nanos,
    policy: Policy,
    placement: Placement,
) -> bool {
    if bdm_server_params(alpha, delta).is_none() {
        return false;
    }
    let r = Reservation::Bdm(Bdm { alpha, delta, m });
    box_schedulable_fast(tasks, pins, &r, policy, placement)
}

/// Closed form for G-FP on BDM (seed 002 Theorem 1 on Y_k(t) = k alpha (t - Delta)):
/// task i passes iff some k has k C_i + W_i <= k alpha (D_i - Delta), i.e.
/// alpha >= min_k (k C_i + W_i) / (k (D_i - Delta)); the answer is the largest of these over
/// the tasks, rounded up to 10^-12.
pub fn theorem1_min_alpha(tasks: &[Task], m: u32, delta: Nanos) -> Result<Bandwidth, SynthError> {
    let prepared = prepare(tasks);
    if let Some(i) = prepared.iter().position(Option::is_none) {
        return Err(SynthError::Infeasible(format!(
            "task {} has jitter >= its deadline",
            i + 1
        )));
    }
    let ts: Vec<Task> = prepared.into_iter().flatten().collect();
    let mut worst: u128 = 1;
    for (i, t) in ts.iter().enumerate() {
        if t.deadline <= delta {
            return Err(SynthError::Infeasible(format!(
                "task {} has deadline {} <= Delta {}",
                i + 1,
                rtbox_model::format_duration(t.deadline),
                rtbox_model::format_duration(delta)
            )));
        }
        let w = theorem1_interference(&ts, i, t.deadline);
        let span = u128::from(t.deadline - delta);
        let need = (1..=u128::from(m))
            .map(|k| ((k * u128::from(t.wcet) + w) * u128::from(BW_ONE)).div_ceil(k * span))
            .min()
            .unwrap_or(u128::MAX);
        worst = worst.max(need);
    }
    if worst >= u128::from(BW_ONE) {
        return Err(SynthError::Infeasible(format!(
            "alpha would be {} >= 1",
            Bandwidth::from_units(u64::try_from(worst).unwrap_or(u64::MAX))
        )));
    }
    Ok(Bandwidth::from_units(worst as u64))
}

/// The minimal alpha for a given Delta on m vCPUs under the box's policy and placement.
pub fn min_bdm_alpha(
    tasks: &[Task],
    pins: &[Option<usize>],
    m: u32,
    delta: Nanos,
    policy: Policy,
    placement: Placement,
) -> Result<BdmSynthesis, SynthError> {
    if tasks.is_empty() {
        return Err(SynthError::NoTasks);
    }
    if delta == 0 {
        return Err(SynthError::BadParameter("Delta must be positive".into()));
    }
    let ok = |a: u64| {
        bdm_ok(
            tasks,
            pins,
            m,
            Bandwidth::from_units(a),
            delta,
            policy,
            placement,
        )
    };
    let alpha = if policy == Policy::Fifo && placement == Placement::Global && m > 1 {
        let a = theorem1_min_alpha(tasks, m, delta)?;
        if !ok(a.units()) {
            // Only when the server for this alpha would round to nothing: search upward.
            return Err(SynthError::BadParameter(format!(
                "Delta {} is too small for a server at alpha {a}",
                rtbox_model::format_duration(delta)
            )));
        }
        a
    } else {
        let hi = BW_ONE - 1;
        if !ok(hi) {
            return Err(SynthError::Infeasible(format!(
                "not schedulable even with alpha just below 1 and Delta {}",
                rtbox_model::format_duration(delta)
            )));
        }
        Bandwidth::from_units(least(1, hi, ok))
    };
    let server = bdm_server_params(alpha, delta).ok_or_else(|| {
        SynthError::BadParameter(format!(
            "Delta {} is too small for alpha {alpha}",
            rtbox_model::format_duration(delta)
        ))
    })?;
    Ok(BdmSynthesis {
        alpha,
        delta,
        m,
        server,
    })
}

/// (Delta, minimal alpha) pairs, so users can trade latency against bandwidth.
pub fn bdm_table(
    tasks: &[Task],
    pins: &[Option<usize>],
    m: u32,
    deltas: &[Nanos],
    policy: Policy,
    placement: Placement,
) -> Vec<(Nanos, Result<BdmSynthesis, SynthError>)> {
    deltas
        .iter()
        .map(|&d| (d, min_bdm_alpha(tasks, pins, m, d, policy, placement)))
        .collect()
}

/// The Deltas of the default table: fractions of the smallest deadline.
pub fn default_deltas(tasks: &[Task], requested: Nanos) -> Vec<Nanos> {
    let dmin = tasks.iter().map(|t| t.deadline).min().unwrap_or(0);
    let mut v: Vec<Nanos> = [1u64, 2, 5, 10, 20, 40, 60, 80]
        .iter()
        .map(|pct| dmin * pct / 100)
        .filter(|&d| d > 0)
        .collect();
    v.push(requested);
    v.sort_unstable();
    v.dedup();
    v
}

/// A synthesized MPR interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MprSynthesis {
    pub period: Nanos,
    pub budget: Nanos,
    pub m: u32,
}

/// Whether the task set passes on MPR (pi, theta, m).
pub fn mpr_ok(
    tasks: &[Task],
    pins: &[Option<usize>],
    pi: Nanos,
    theta: Nanos,
    m: u32,
    policy: Policy,
    placement: Placement,
) -> bool {
    let r = Reservation::Mpr(Mpr {
        period: pi,
        budget: theta,
        m,
    });
    box_schedulable_fast(tasks, pins, &r, policy, placement)
}

/// The MPR interface with the least Theta for period Pi: for every m in 1..=max_m whose
/// Theta = m Pi passes, the least passing Theta (binary search); the least of those, ties to
/// the smaller m. A larger m spreads the budget thinner (a longer blackout, 2 (Pi - Theta/m))
/// but lets more jobs run at once, so the smallest feasible m is not always the cheapest.
pub fn min_mpr(
    tasks: &[Task],
    pins: &[Option<usize>],
    max_m: u32,
    pi: Nanos,
    policy: Policy,
    placement: Placement,
) -> Result<MprSynthesis, SynthError> {
    if tasks.is_empty() {
        return Err(SynthError::NoTasks);
    }
    if pi == 0 {
        return Err(SynthError::BadParameter("Pi must be positive".into()));
    }
    min_mpr_by(max_m, pi, |theta, m| {
        mpr_ok(tasks, pins, pi, theta, m, policy, placement)
    })
}

/// The search of [`min_mpr`] with any test `ok(theta, m)` (monotone in Theta).
fn min_mpr_by(
    max_m: u32,
    pi: Nanos,
    ok: impl Fn(Nanos, u32) -> bool,
) -> Result<MprSynthesis, SynthError> {
    let mut best: Option<MprSynthesis> = None;
    for m in 1..=max_m {
        let hi = u64::from(m) * pi;
        if ok(hi, m) {
            let theta = least(1, hi, |t| ok(t, m));
            if best.is_none_or(|b| theta < b.budget) {
                best = Some(MprSynthesis {
                    period: pi,
                    budget: theta,
                    m,
                });
            }
        }
    }
    best.ok_or_else(|| {
        SynthError::Infeasible(format!(
            "not schedulable with Theta = m Pi for any m up to {max_m}"
        ))
    })
}

/// Whether box `name` of `system` is schedulable with `interface` instead of its own, by the
/// whole-box analysis (chains and single-task boxes use `chain.rs`, which needs the
/// configuration's `after` links and not only the task parameters).
pub fn box_ok_with(system: &System, name: &str, interface: &Interface) -> bool {
    let mut specs = system.specs();
    for b in specs.iter_mut().filter(|b| b.name == name) {
        b.interface = interface.clone();
    }
    System::new(system.platform.clone(), specs, system.tasks.clone())
        .ok()
        .and_then(|s| analyze_box(&s, name).ok())
        .is_some_and(|r| r.schedulable())
}

/// Synthesis through [`box_ok_with`] (boxes with chains or a single task).
fn synthesize_whole_box(
    system: &System,
    name: &str,
    m: u32,
    request: Request,
) -> Result<(Interface, Option<(Nanos, Nanos)>), SynthError> {
    let ok = |i: Interface| box_ok_with(system, name, &i);
    match request {
        Request::Bdm { delta } => {
            if delta == 0 {
                return Err(SynthError::BadParameter("Delta must be positive".into()));
            }
            let iface = |a: u64| Interface::Bdm {
                alpha: Bandwidth::from_units(a),
                delta,
            };
            let hi = BW_ONE - 1;
            if !ok(iface(hi)) {
                return Err(SynthError::Infeasible(format!(
                    "not schedulable even with alpha just below 1 and Delta {}",
                    rtbox_model::format_duration(delta)
                )));
            }
            let alpha = Bandwidth::from_units(least(1, hi, |a| ok(iface(a))));
            Ok((
                Interface::Bdm { alpha, delta },
                bdm_server_params(alpha, delta),
            ))
        }
        Request::Mpr { pi } => {
            if pi == 0 {
                return Err(SynthError::BadParameter("Pi must be positive".into()));
            }
            let s = min_mpr_by(m, pi, |theta, m| ok(Interface::Mpr { theta, pi, m }))?;
            Ok((
                Interface::Mpr {
                    theta: s.budget,
                    pi,
                    m: s.m,
                },
                None,
            ))
        }
        Request::Server { period } => {
            if period == 0 {
                return Err(SynthError::BadParameter(
                    "the period must be positive".into(),
                ));
            }
            let iface = |q: u64| Interface::PerCpu { budget: q, period };
            if !ok(iface(period)) {
                return Err(SynthError::Infeasible(format!(
                    "not schedulable even with full servers (Q = P = {})",
                    rtbox_model::format_duration(period)
                )));
            }
            let q = least(1, period, |q| ok(iface(q)));
            Ok((Interface::PerCpu { budget: q, period }, None))
        }
    }
}

/// Whether the task set passes with budget Q every `period` on each of `m` vCPUs.
pub fn server_ok(
    tasks: &[Task],
    pins: &[Option<usize>],
    m: u32,
    q: Nanos,
    period: Nanos,
    policy: Policy,
    placement: Placement,
) -> bool {
    let r = Reservation::Servers(ServerSet::new(vec![Prm::new(period, q); m as usize]));
    box_schedulable_fast(tasks, pins, &r, policy, placement)
}

/// The minimal budget Q for period P with one server per vCPU (m vCPUs).
pub fn min_server_budget(
    tasks: &[Task],
    pins: &[Option<usize>],
    m: u32,
    period: Nanos,
    policy: Policy,
    placement: Placement,
) -> Result<Nanos, SynthError> {
    if tasks.is_empty() {
        return Err(SynthError::NoTasks);
    }
    if period == 0 {
        return Err(SynthError::BadParameter(
            "the period must be positive".into(),
        ));
    }
    let ok = |q: u64| server_ok(tasks, pins, m, q, period, policy, placement);
    if !ok(period) {
        return Err(SynthError::Infeasible(format!(
            "not schedulable even with full servers (Q = P = {}) on {m} vCPU(s)",
            rtbox_model::format_duration(period)
        )));
    }
    Ok(least(1, period, ok))
}

/// What to synthesize for a box.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    Bdm { delta: Nanos },
    Mpr { pi: Nanos },
    Server { period: Nanos },
}

/// A synthesized interface for a box, with the entry to paste into the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synthesis {
    pub box_name: String,
    pub interface: Interface,
    /// For BDM: the (Delta, alpha) trade-off table.
    pub table: Vec<(Nanos, Option<Bandwidth>)>,
    /// For BDM: the per-vCPU server (Q, P).
    pub server: Option<(Nanos, Nanos)>,
    pub toml: String,
}

/// Synthesizes the minimal interface of `request`'s kind for a box of a system, keeping its
/// CPUs, policy and placement.
pub fn synthesize_box(
    system: &System,
    name: &str,
    request: Request,
) -> Result<Synthesis, SynthError> {
    let rb = system
        .get(name)
        .ok_or_else(|| SynthError::UnknownBox(name.to_string()))?;
    let specs: Vec<_> = system.tasks_of(name).collect();
    let tasks = from_specs(specs.iter().copied());
    let cpus: Vec<u32> = rb.cpus.iter().collect();
    let pins: Vec<Option<usize>> = specs
        .iter()
        .map(|s| s.cpu.and_then(|c| cpus.iter().position(|&x| x == c)))
        .collect();
    let m = cpus.len() as u32;
    let (policy, placement) = (rb.spec.policy, rb.spec.placement);
    let chained = specs.len() == 1
        || specs.iter().any(|s| {
            s.after
                .as_deref()
                .is_some_and(|a| specs.iter().any(|o| o.name == a))
        });
    if chained {
        let (interface, server) = synthesize_whole_box(system, name, m, request)?;
        let toml = box_entry_toml(system, name, &interface);
        return Ok(Synthesis {
            box_name: name.to_string(),
            interface,
            table: Vec::new(),
            server,
            toml,
        });
    }
    let (interface, table, server) = match request {
        Request::Bdm { delta } => {
            let s = min_bdm_alpha(&tasks, &pins, m, delta, policy, placement)?;
            let table = bdm_table(
                &tasks,
                &pins,
                m,
                &default_deltas(&tasks, delta),
                policy,
                placement,
            )
            .into_iter()
            .map(|(d, r)| (d, r.ok().map(|s| s.alpha)))
            .collect();
            (
                Interface::Bdm {
                    alpha: s.alpha,
                    delta,
                },
                table,
                Some(s.server),
            )
        }
        Request::Mpr { pi } => {
            let s = min_mpr(&tasks, &pins, m, pi, policy, placement)?;
            (
                Interface::Mpr {
                    theta: s.budget,
                    pi,
                    m: s.m,
                },
                Vec::new(),
                None,
            )
        }
        Request::Server { period } => {
            let q = min_server_budget(&tasks, &pins, m, period, policy, placement)?;
            (Interface::PerCpu { budget: q, period }, Vec::new(), None)
        }
    };
    let toml = box_entry_toml(system, name, &interface);
    Ok(Synthesis {
        box_name: name.to_string(),
        interface,
        table,
        server,
        toml,
    })
}

/// A `[[box]]` entry for the configuration file: the box as declared, with `interface`.
pub fn box_entry_toml(system: &System, name: &str, interface: &Interface) -> String {
    let fmt = rtbox_model::format_duration;
    let mut out = String::from("[[box]]\n");
    out.push_str(&format!("name = \"{name}\"\n"));
    if let Some(rb) = system.get(name) {
        let spec = &rb.spec;
        if let Some(p) = &spec.parent {
            out.push_str(&format!("parent = \"{p}\"\n"));
        }
        if let Some(c) = &spec.cpus {
            out.push_str(&format!("cpus = \"{c}\"\n"));
        }
        out.push_str(&format!("policy = \"{}\"\n", spec.policy.name()));
        out.push_str(&format!("placement = \"{}\"\n", spec.placement.name()));
        if spec.mode != rtbox_model::Mode::default() {
            out.push_str(&format!("mode = \"{}\"\n", spec.mode.name()));
        }
    }
    let iface = match interface {
        Interface::Bdm { alpha, delta } => {
            format!(
                "interface.bdm = {{ alpha = {alpha}, delta = \"{}\" }}",
                fmt(*delta)
            )
        }
        Interface::Mpr { theta, pi, m } => format!(
            "interface.mpr = {{ theta = \"{}\", pi = \"{}\", m = {m} }}",
            fmt(*theta),
            fmt(*pi)
        ),
        Interface::PerCpu { budget, period } => format!(
            "interface.per_cpu = {{ budget = \"{}\", period = \"{}\" }}",
            fmt(*budget),
            fmt(*period)
        ),
        Interface::Servers(list) => {
            let parts: Vec<String> = list
                .iter()
                .map(|s| {
                    format!(
                        "{{ cpu = {}, budget = \"{}\", period = \"{}\" }}",
                        s.cpu,
                        fmt(s.budget),
                        fmt(s.period)
                    )
                })
                .collect();
            format!("interface.servers = [{}]", parts.join(", "))
        }
        Interface::Shared { weight } => format!("interface.shared = {{ weight = {weight} }}"),
    };
    out.push_str(&iface);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::global::theorem1_schedulable;

    const MS: u64 = 1_000_000;

    fn y1() -> Vec<Task> {
        vec![
            Task::new(10 * MS, 60 * MS).prio(13),
            Task::new(140 * MS, 270 * MS).prio(12),
            Task::new(90 * MS, 520 * MS).prio(11),
        ]
    }

    #[test]
    fn bdm_alpha_for_y1_is_minimal_and_below_table1() {
        let s = min_bdm_alpha(&y1(), &[], 2, 20 * MS, Policy::Fifo, Placement::Global).unwrap();
        assert!(
            s.alpha <= Bandwidth::parse_decimal("0.72").unwrap(),
            "{}",
            s.alpha
        );
        let b = |a: Bandwidth| Bdm {
            alpha: a,
            delta: 20 * MS,
            m: 2,
        };
        assert!(theorem1_schedulable(&y1(), &b(s.alpha)));
        assert!(!theorem1_schedulable(
            &y1(),
            &b(Bandwidth::from_units(s.alpha.units() - 1))
        ));
    }

    #[test]
    fn closed_form_equals_search() {
        let ts = y1();
        let closed = theorem1_min_alpha(&ts, 2, 20 * MS).unwrap();
        let ok = |a: u64| {
            theorem1_schedulable(
                &ts,
                &Bdm {
                    alpha: Bandwidth::from_units(a),
                    delta: 20 * MS,
                    m: 2,
                },
            )
        };
        assert_eq!(closed.units(), least(1, BW_ONE - 1, ok));
    }

    #[test]
    fn mpr_and_server_synthesis_are_minimal() {
        let ts = vec![
            Task::new(2, 10).prio(3),
            Task::new(3, 15).prio(2),
            Task::new(5, 30).prio(1),
        ];
        for policy in [Policy::Fifo, Policy::Edf] {
            let s = min_mpr(&ts, &[], 2, 5, policy, Placement::Global).unwrap();
            assert!(mpr_ok(
                &ts,
                &[],
                5,
                s.budget,
                s.m,
                policy,
                Placement::Global
            ));
            assert!(!mpr_ok(
                &ts,
                &[],
                5,
                s.budget - 1,
                s.m,
                policy,
                Placement::Global
            ));
            // No other m does with less (Theta - 1 fails for every m, so does any smaller).
            for m in 1..=2 {
                let theta = (s.budget - 1).min(5 * u64::from(m));
                assert!(!mpr_ok(&ts, &[], 5, theta, m, policy, Placement::Global));
            }
            for placement in [Placement::Global, Placement::Pinned] {
                let q = min_server_budget(&ts, &[], 2, 5, policy, placement).unwrap();
                assert!(server_ok(&ts, &[], 2, q, 5, policy, placement));
                assert!(!server_ok(&ts, &[], 2, q - 1, 5, policy, placement));
            }
        }
    }

    #[test]
    fn infeasible_delta_is_reported() {
        let e = min_bdm_alpha(&y1(), &[], 2, 60 * MS, Policy::Fifo, Placement::Global).unwrap_err();
        assert!(matches!(e, SynthError::Infeasible(_)), "{e}");
    }
}
