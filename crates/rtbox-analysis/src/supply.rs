//! Supply bound functions: the least CPU time a reservation guarantees in any interval.
//!
//! Every function here is exact integer arithmetic on nanoseconds and returns the *floor* of the
//! (possibly fractional) bound, which is exact for comparisons against integer demand. A supply
//! is never negative. Sources: Shin & Lee 2003 (periodic resource), Easwaran, Anand & Lee 2007
//! (explicit-deadline periodic), Mok et al. (bounded delay), Bini et al. 2009 / seed 002
//! (multi-supply Y_k and the BDM interface), Shin, Easwaran & Lee 2008 (MPR, in the corrected
//! closed form of `analysis-facts.md`).

use rtbox_model::{bdm_server_params, mpr_budgets, Bandwidth, Nanos, Server, BW_ONE};

use crate::math::{ceil_div, floor_div};

/// An amount of CPU time (CPU-nanoseconds); wide so that m * t never overflows.
pub type Work = u128;

/// A linear lower bound `sbf(t) >= rate * (t - delay)` with an exact rational rate (CPUs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Linear {
    pub rate_num: u128,
    pub rate_den: u128,
    pub delay: Nanos,
}

impl Linear {
    /// floor(rate * max(0, t - delay)).
    pub fn at(&self, t: Nanos) -> Work {
        let x = u128::from(t.saturating_sub(self.delay));
        x * self.rate_num / self.rate_den
    }

    /// The rate in bandwidth units, rounded down (display and conservative sums).
    pub fn rate_floor(&self) -> Bandwidth {
        let u = self.rate_num * u128::from(BW_ONE) / self.rate_den;
        Bandwidth::from_units(u64::try_from(u).unwrap_or(u64::MAX))
    }
}

/// A single supply bound function with at most `parallelism()` CPUs used at once.
pub trait Supply {
    /// The least CPU time supplied in any interval of length `t` (floor).
    fn sbf(&self, t: Nanos) -> Work;
    /// The most CPUs supplied at the same instant.
    fn parallelism(&self) -> u32;
    /// A linear lower bound of [`Supply::sbf`].
    fn linear(&self) -> Linear;
    /// The smallest `t` with `sbf(t) >= w`, or `None` if the supply never reaches `w`.
    fn time_to_supply(&self, w: Work) -> Option<Nanos> {
        time_to_supply_by_search(|t| self.sbf(t), self.linear(), w)
    }
    /// A short description for reports, e.g. `PRM(P=10ms, Q=4ms)`.
    fn describe(&self) -> String;
    /// Pushes onto `out` every corner of the real-valued bound in `[lo, hi]` (each as the two
    /// integers around it), so that between two consecutive pushed points the bound is linear
    /// (its floor the floor of a linear function). `false` when the supply cannot list them;
    /// tests that need them then do not apply.
    fn corners(&self, lo: Nanos, hi: Nanos, out: &mut Vec<Nanos>) -> bool {
        let _ = (lo, hi, out);
        false
    }
}

/// Pushes `first + k step` and the integer before it, for every k with the point in `[lo, hi]`.
fn push_progression(first: Nanos, step: Nanos, lo: Nanos, hi: Nanos, out: &mut Vec<Nanos>) {
    let step = step.max(1);
    let k0 = lo.saturating_sub(first) / step;
    let mut x = first.saturating_add(k0.saturating_mul(step));
    while x <= hi.saturating_add(1) {
        out.push(x.saturating_sub(1));
        out.push(x);
        x = match x.checked_add(step) {
            Some(v) => v,
            None => break,
        };
    }
}

/// Smallest `t` with `f(t) >= w` for a monotone `f` dominated from below by `lin`.
pub fn time_to_supply_by_search(f: impl Fn(Nanos) -> Work, lin: Linear, w: Work) -> Option<Nanos> {
    if w == 0 {
        return Some(0);
    }
    if lin.rate_num == 0 {
        return None;
    }
    // lin.at(hi) >= w, hence f(hi) >= w.
    let hi = u128::from(lin.delay) + (w * lin.rate_den).div_ceil(lin.rate_num);
    let mut hi = u64::try_from(hi).ok()?;
    let mut lo = 0u64; // f(lo) < w is not known yet; search the least hi.
    if f(lo) >= w {
        return Some(0);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if f(mid) >= w {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    debug_assert!(f(hi) >= w);
    Some(hi)
}

/// Multi-supply (seed 002, Definition 2): `y(k, t)` is the least CPU time with parallelism at
/// most `k` in any interval of length `t`, for `k` in `1..=m()`.
pub trait MultiSupply {
    fn m(&self) -> u32;
    fn y(&self, k: u32, t: Nanos) -> Work;
    /// Smallest `t` with `y(k, t) >= w`.
    fn time_to_y(&self, k: u32, w: Work) -> Option<Nanos>;
    fn describe(&self) -> String;
}

fn fmt(ns: Nanos) -> String {
    rtbox_model::format_duration(ns)
}

// ---------------------------------------------------------------------------------------------
// Periodic resource (hard CBS)

/// Periodic resource model PRM(Pi, Theta): Theta time units every Pi; a hard CBS (Q, P)
/// supplies at least PRM(P, Q) (seed 000, section 1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prm {
    pub period: Nanos,
    pub budget: Nanos,
}

impl Prm {
    pub fn new(period: Nanos, budget: Nanos) -> Self {
        debug_assert!(period > 0 && budget <= period);
        Prm { period, budget }
    }

    pub fn of_server(s: &Server) -> Self {
        Prm::new(s.period, s.budget.min(s.period))
    }
}

/// Shin & Lee 2003: zero for t < Pi - Theta; else with k = floor((t - (Pi - Theta)) / Pi),
/// sbf(t) = k Theta + max(0, t - 2 (Pi - Theta) - k Pi).
pub fn prm_sbf(period: Nanos, budget: Nanos, t: Nanos) -> Work {
    let gap = period - budget;
    if t <= gap || budget == 0 {
        return 0;
    }
    let k = (t - gap) / period;
    let tail = (t - gap) - k * period; // in [0, Pi)
    let extra = tail.saturating_sub(gap);
    debug_assert!(extra <= budget);
    u128::from(k) * u128::from(budget) + u128::from(extra)
}

impl Supply for Prm {
    /// Corners where each rising part of the bound starts, 2 (P - Q) + k P, and ends,
    /// (P - Q) + k P.
    fn corners(&self, lo: Nanos, hi: Nanos, out: &mut Vec<Nanos>) -> bool {
        let gap = self.period - self.budget;
        push_progression(gap, self.period, lo, hi, out);
        push_progression(2 * gap, self.period, lo, hi, out);
        true
    }
    fn sbf(&self, t: Nanos) -> Work {
        prm_sbf(self.period, self.budget, t)
    }
    fn parallelism(&self) -> u32 {
        1
    }
    /// (Theta / Pi) (t - 2 (Pi - Theta)).
    fn linear(&self) -> Linear {
        Linear {
            rate_num: u128::from(self.budget),
            rate_den: u128::from(self.period),
            delay: 2 * (self.period - self.budget),
        }
    }
    /// Closed-form inverse: w = k Theta + r with 0 < r <= Theta is reached at
    /// t = (Pi - Theta) + k Pi + (Pi - Theta) + r.
    fn time_to_supply(&self, w: Work) -> Option<Nanos> {
        if w == 0 {
            return Some(0);
        }
        if self.budget == 0 {
            return None;
        }
        let q = u128::from(self.budget);
        let k = (w - 1) / q;
        let r = w - k * q;
        let gap = u128::from(self.period - self.budget);
        u64::try_from(2 * gap + k * u128::from(self.period) + r).ok()
    }
    fn describe(&self) -> String {
        format!("PRM(P={}, Q={})", fmt(self.period), fmt(self.budget))
    }
}

// ---------------------------------------------------------------------------------------------
// Explicit-deadline periodic resource

/// EDP(Pi, Theta, Delta) (Easwaran, Anand & Lee 2007): Theta every Pi, delivered within Delta
/// of each period start. PRM is the case Delta = Pi.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edp {
    pub period: Nanos,
    pub budget: Nanos,
    pub deadline: Nanos,
}

impl Supply for Edp {
    /// Blackout x = Pi + Delta - 2 Theta; for t >= Delta - Theta with
    /// y = floor((t - (Delta - Theta)) / Pi): sbf(t) = y Theta + max(0, t - x - y Pi).
    fn sbf(&self, t: Nanos) -> Work {
        let (p, q, d) = (
            i128::from(self.period),
            i128::from(self.budget),
            i128::from(self.deadline),
        );
        let t = i128::from(t);
        if q == 0 || t < d - q {
            return 0;
        }
        let x = p + d - 2 * q;
        let y = floor_div(t - (d - q), p);
        let v = y * q + (t - x - y * p).clamp(0, q);
        v.max(0) as Work
    }
    fn parallelism(&self) -> u32 {
        1
    }
    /// (Theta / Pi) (t - (Pi + Delta - 2 Theta)).
    fn linear(&self) -> Linear {
        Linear {
            rate_num: u128::from(self.budget),
            rate_den: u128::from(self.period),
            delay: (self.period + self.deadline).saturating_sub(2 * self.budget),
        }
    }
    fn describe(&self) -> String {
        format!(
            "EDP(P={}, Q={}, D={})",
            fmt(self.period),
            fmt(self.budget),
            fmt(self.deadline)
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Bounded delay

/// Bounded-delay resource BDR(alpha, Delta): sbf(t) = max(0, alpha (t - Delta)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bdr {
    pub alpha: Bandwidth,
    pub delay: Nanos,
}

impl Bdr {
    /// The BDR a periodic resource dominates: BDR(Theta/Pi, 2 (Pi - Theta)), with the rate
    /// rounded down to 10^-12 so that it stays a lower bound.
    pub fn of_prm(p: &Prm) -> Bdr {
        Bdr {
            alpha: p.linear().rate_floor(),
            delay: 2 * (p.period - p.budget),
        }
    }
}

impl Supply for Bdr {
    fn sbf(&self, t: Nanos) -> Work {
        let x = u128::from(t.saturating_sub(self.delay));
        x * u128::from(self.alpha.units()) / u128::from(BW_ONE)
    }
    fn parallelism(&self) -> u32 {
        1
    }
    fn linear(&self) -> Linear {
        Linear {
            rate_num: u128::from(self.alpha.units()),
            rate_den: u128::from(BW_ONE),
            delay: self.delay,
        }
    }
    fn time_to_supply(&self, w: Work) -> Option<Nanos> {
        bdm_time_to_y(self.alpha, self.delay, 1, w)
    }
    fn describe(&self) -> String {
        format!("BDR(alpha={}, Delta={})", self.alpha, fmt(self.delay))
    }
}

// ---------------------------------------------------------------------------------------------
// BDM virtual platform

/// The BDM interface (alpha, Delta) on m virtual processors (seed 002, eq. 3):
/// Y_k(t) = k alpha max(0, t - Delta). alpha is the rate of ONE virtual processor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bdm {
    pub alpha: Bandwidth,
    pub delta: Nanos,
    pub m: u32,
}

/// floor(k alpha max(0, t - Delta)).
#[inline]
pub fn bdm_y(alpha: Bandwidth, delta: Nanos, k: u32, t: Nanos) -> Work {
    let x = u128::from(t.saturating_sub(delta));
    x * u128::from(k) * u128::from(alpha.units()) / u128::from(BW_ONE)
}

/// Smallest t with k alpha (t - Delta) >= w: t = Delta + ceil(w / (k alpha)).
#[inline]
pub fn bdm_time_to_y(alpha: Bandwidth, delta: Nanos, k: u32, w: Work) -> Option<Nanos> {
    if w == 0 {
        return Some(0);
    }
    let rate = u128::from(k) * u128::from(alpha.units());
    if rate == 0 {
        return None;
    }
    let x = (w * u128::from(BW_ONE)).div_ceil(rate);
    u64::try_from(u128::from(delta) + x).ok()
}

impl Bdm {
    /// The per-CPU hard CBS (Q, P) that implements it (seed 002, eq. 5), as rtbox rounds it.
    pub fn server(&self) -> Option<(Nanos, Nanos)> {
        bdm_server_params(self.alpha, self.delta)
    }
}

impl MultiSupply for Bdm {
    fn m(&self) -> u32 {
        self.m
    }
    fn y(&self, k: u32, t: Nanos) -> Work {
        debug_assert!(k >= 1 && k <= self.m);
        bdm_y(self.alpha, self.delta, k, t)
    }
    fn time_to_y(&self, k: u32, w: Work) -> Option<Nanos> {
        bdm_time_to_y(self.alpha, self.delta, k, w)
    }
    fn describe(&self) -> String {
        format!(
            "BDM(alpha={}, Delta={}, m={})",
            self.alpha,
            fmt(self.delta),
            self.m
        )
    }
}

/// The BDM platform used as one supply with parallelism m: Y_m.
impl Supply for Bdm {
    /// One corner, at Delta.
    fn corners(&self, _lo: Nanos, _hi: Nanos, out: &mut Vec<Nanos>) -> bool {
        out.extend([self.delta.saturating_sub(1), self.delta]);
        true
    }
    fn sbf(&self, t: Nanos) -> Work {
        bdm_y(self.alpha, self.delta, self.m, t)
    }
    fn parallelism(&self) -> u32 {
        self.m
    }
    fn linear(&self) -> Linear {
        Linear {
            rate_num: u128::from(self.m) * u128::from(self.alpha.units()),
            rate_den: u128::from(BW_ONE),
            delay: self.delta,
        }
    }
    fn time_to_supply(&self, w: Work) -> Option<Nanos> {
        bdm_time_to_y(self.alpha, self.delta, self.m, w)
    }
    fn describe(&self) -> String {
        MultiSupply::describe(self)
    }
}

// ---------------------------------------------------------------------------------------------
// Multiprocessor periodic resource

/// MPR(Pi, Theta, m) (Shin, Easwaran & Lee 2008): Theta every Pi on at most m CPUs at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mpr {
    pub period: Nanos,
    pub budget: Nanos,
    pub m: u32,
}

/// Safe MPR supply (continuous-time closed form, `analysis-facts.md`; the ECRTS'08 printed
/// form over-estimates): with t'' = t - (Pi - Theta/m) and x'' = t'' - floor(t''/Pi) Pi,
/// sbf(t) = floor(t''/Pi) Theta + max(0, m x'' - (m Pi - Theta)), clamped at 0.
/// Computed scaled by m so that Theta/m stays exact.
pub fn mpr_sbf(period: Nanos, budget: Nanos, m: u32, t: Nanos) -> Work {
    let (p, q, m) = (i128::from(period), i128::from(budget), i128::from(m));
    let mt2 = m * i128::from(t) - (m * p - q); // m t''
    if mt2 <= 0 || q == 0 {
        return 0;
    }
    let k = floor_div(mt2, m * p);
    let mx2 = mt2 - k * m * p; // m x'' in [0, m Pi)
    let v = k * q + (mx2 - (m * p - q)).max(0);
    debug_assert!(v >= 0);
    v as Work
}

impl Supply for Mpr {
    /// Corners where m t'' is a multiple of m Pi (rising part ends) and where it is
    /// m Pi - Theta past one (rising part starts): m t = c + k m Pi with c = m Pi - Theta or
    /// 2 (m Pi - Theta); each as the integers around c / m + k Pi.
    fn corners(&self, lo: Nanos, hi: Nanos, out: &mut Vec<Nanos>) -> bool {
        let m = u64::from(self.m.max(1));
        let gap = (m * self.period).saturating_sub(self.budget);
        for c in [gap, 2 * gap] {
            let (whole, frac) = (c / m, c % m);
            push_progression(whole + u64::from(frac > 0), self.period, lo, hi, out);
            push_progression(whole, self.period, lo, hi, out);
        }
        true
    }
    fn sbf(&self, t: Nanos) -> Work {
        mpr_sbf(self.period, self.budget, self.m, t)
    }
    fn parallelism(&self) -> u32 {
        self.m
    }
    /// (Theta/Pi) (t - 2 (Pi - Theta/m)), delay rounded up to whole ns.
    fn linear(&self) -> Linear {
        let (p, q, m) = (
            i128::from(self.period),
            i128::from(self.budget),
            i128::from(self.m),
        );
        let delay = ceil_div(2 * (m * p - q), m).max(0);
        Linear {
            rate_num: u128::from(self.budget),
            rate_den: u128::from(self.period),
            delay: delay as Nanos,
        }
    }
    fn describe(&self) -> String {
        format!(
            "MPR(Pi={}, Theta={}, m={})",
            fmt(self.period),
            fmt(self.budget),
            self.m
        )
    }
}

impl Mpr {
    /// The m hard CBS servers rtbox runs for it (`rtbox_model::mpr_budgets`: floor split, the
    /// remainder as +1 ns on the first servers).
    pub fn servers(&self) -> Vec<Prm> {
        mpr_budgets(self.budget, self.m)
            .into_iter()
            .filter(|&b| b > 0)
            .map(|b| Prm::new(self.period, b))
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Dedicated CPUs

/// m whole CPUs: sbf(t) = m t, Y_k(t) = k t.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dedicated {
    pub m: u32,
}

impl Supply for Dedicated {
    /// Linear: no corner.
    fn corners(&self, _lo: Nanos, _hi: Nanos, _out: &mut Vec<Nanos>) -> bool {
        true
    }
    fn sbf(&self, t: Nanos) -> Work {
        u128::from(self.m) * u128::from(t)
    }
    fn parallelism(&self) -> u32 {
        self.m
    }
    fn linear(&self) -> Linear {
        Linear {
            rate_num: u128::from(self.m),
            rate_den: 1,
            delay: 0,
        }
    }
    fn time_to_supply(&self, w: Work) -> Option<Nanos> {
        u64::try_from(w.div_ceil(u128::from(self.m.max(1)))).ok()
    }
    fn describe(&self) -> String {
        format!("{} dedicated CPU(s)", self.m)
    }
}

impl MultiSupply for Dedicated {
    fn m(&self) -> u32 {
        self.m
    }
    fn y(&self, k: u32, t: Nanos) -> Work {
        u128::from(k) * u128::from(t)
    }
    fn time_to_y(&self, k: u32, w: Work) -> Option<Nanos> {
        u64::try_from(w.div_ceil(u128::from(k.max(1)))).ok()
    }
    fn describe(&self) -> String {
        Supply::describe(self)
    }
}

// ---------------------------------------------------------------------------------------------
// Explicit (possibly asymmetric) per-CPU servers

/// A box's hard CBS servers, one per CPU, each with its own (Q, P).
///
/// As one supply: the servers' phases are independent, so the worst total is the sum of the
/// per-server worst cases, sbf(t) = sum_i sbf_PRM_i(t), with parallelism = number of servers.
/// As a multi-supply: with at most k CPUs counted at once, any k servers' supplies still count
/// fully, so Y_k(t) >= the sum of the k largest sbf_PRM_i(t).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSet {
    servers: Vec<Prm>,
    uniform: bool,
}

impl ServerSet {
    pub fn new(servers: Vec<Prm>) -> Self {
        let uniform = servers.windows(2).all(|w| w[0] == w[1]);
        ServerSet { servers, uniform }
    }

    pub fn from_servers(servers: &[Server]) -> Self {
        ServerSet::new(servers.iter().map(Prm::of_server).collect())
    }

    pub fn servers(&self) -> &[Prm] {
        &self.servers
    }
}

impl Supply for ServerSet {
    /// The union of the servers' corners (a sum of piecewise-linear bounds).
    fn corners(&self, lo: Nanos, hi: Nanos, out: &mut Vec<Nanos>) -> bool {
        self.servers.iter().all(|s| s.corners(lo, hi, out))
    }
    fn sbf(&self, t: Nanos) -> Work {
        self.servers.iter().map(|s| s.sbf(t)).sum()
    }
    fn parallelism(&self) -> u32 {
        self.servers.len() as u32
    }
    /// Sum of rates (exact, over the product-free common form sum Q_i/P_i as a scaled floor)
    /// with the largest delay.
    fn linear(&self) -> Linear {
        // Exact when all periods are equal; otherwise rounded down to 10^-12 CPU (safe).
        let delay = self
            .servers
            .iter()
            .map(|s| 2 * (s.period - s.budget))
            .max()
            .unwrap_or(0);
        if let Some(first) = self.servers.first() {
            if self.servers.iter().all(|s| s.period == first.period) {
                return Linear {
                    rate_num: self.servers.iter().map(|s| u128::from(s.budget)).sum(),
                    rate_den: u128::from(first.period),
                    delay,
                };
            }
        }
        let units: u128 = self
            .servers
            .iter()
            .map(|s| u128::from(s.budget) * u128::from(BW_ONE) / u128::from(s.period))
            .sum();
        Linear {
            rate_num: units,
            rate_den: u128::from(BW_ONE),
            delay,
        }
    }
    fn describe(&self) -> String {
        let parts: Vec<String> = self.servers.iter().map(|s| s.describe()).collect();
        format!("servers [{}]", parts.join(", "))
    }
}

impl MultiSupply for ServerSet {
    fn m(&self) -> u32 {
        self.servers.len() as u32
    }
    fn y(&self, k: u32, t: Nanos) -> Work {
        let k = k.min(self.m()) as usize;
        if self.uniform {
            return self.servers.first().map_or(0, |s| s.sbf(t)) * k as u128;
        }
        let mut v: Vec<Work> = self.servers.iter().map(|s| s.sbf(t)).collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v.iter().take(k).sum()
    }
    fn time_to_y(&self, k: u32, w: Work) -> Option<Nanos> {
        if self.uniform {
            let s = self.servers.first()?;
            return s.time_to_supply(w.div_ceil(u128::from(k.max(1))));
        }
        let lin = {
            // The k fastest servers with the largest delay give a valid linear bound of Y_k.
            let mut rates: Vec<&Prm> = self.servers.iter().collect();
            rates.sort_by(|a, b| {
                (u128::from(b.budget) * u128::from(a.period))
                    .cmp(&(u128::from(a.budget) * u128::from(b.period)))
            });
            ServerSet::new(rates.into_iter().take(k as usize).copied().collect()).linear()
        };
        time_to_supply_by_search(|t| self.y(k, t), lin, w)
    }
    fn describe(&self) -> String {
        Supply::describe(self)
    }
}

/// Brute-force reference used by the tests: the least supply of a periodic resource over
/// every window placement and every way to place each period's budget, on integer time slots.
pub mod oracle {

    /// Per period [kPi, (k+1)Pi), `theta` units are placed in [kPi, kPi + dl), at most `m` per
    /// slot, adversarially. The least overlap of that period with a window is
    /// max(0, theta - m * (slots of [kPi, kPi+dl) outside the window)). Minimised over window
    /// starts s in [0, Pi).
    pub fn periodic(pi: u64, theta: u64, dl: u64, m: u64, t: u64) -> u64 {
        let mut best = u64::MAX;
        for s in 0..pi {
            let (ws, we) = (s, s + t);
            let mut total = 0;
            let mut k = 0;
            while k * pi < we {
                let (ps, pe) = (k * pi, k * pi + dl);
                let inside = we.min(pe).saturating_sub(ws.max(ps));
                let outside = (pe - ps) - inside;
                total += theta.saturating_sub(m * outside);
                k += 1;
            }
            best = best.min(total);
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prm_closed_form_equals_brute_force() {
        for pi in 1..=9u64 {
            for theta in 0..=pi {
                for t in 0..=4 * pi {
                    assert_eq!(
                        prm_sbf(pi, theta, t),
                        u128::from(oracle::periodic(pi, theta, pi, 1, t)),
                        "PRM({pi},{theta}) at {t}"
                    );
                }
            }
        }
    }

    #[test]
    fn edp_closed_form_equals_brute_force() {
        for pi in 1..=8u64 {
            for theta in 0..=pi {
                for dl in theta.max(1)..=pi {
                    let e = Edp {
                        period: pi,
                        budget: theta,
                        deadline: dl,
                    };
                    for t in 0..=4 * pi {
                        assert_eq!(
                            e.sbf(t),
                            u128::from(oracle::periodic(pi, theta, dl, 1, t)),
                            "EDP({pi},{theta},{dl}) at {t}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn mpr_closed_form_never_exceeds_brute_force() {
        for m in 1..=4u32 {
            for pi in 1..=7u64 {
                for theta in 0..=u64::from(m) * pi {
                    for t in 0..=4 * pi {
                        let exact = oracle::periodic(pi, theta, pi, u64::from(m), t);
                        assert!(
                            mpr_sbf(pi, theta, m, t) <= u128::from(exact),
                            "MPR({pi},{theta},{m}) at {t}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn mpr_smallest_overestimate_case_is_safe() {
        // The printed ECRTS'08 bound gives 3 here; the true least supply is 2.
        assert_eq!(oracle::periodic(2, 3, 2, 2, 2), 2);
        assert!(mpr_sbf(2, 3, 2, 2) <= 2);
    }

    #[test]
    fn prm_dominates_its_bounded_delay_resource() {
        for (p, q) in [(5, 3), (10, 4), (7, 7), (9, 1), (3, 2)] {
            let prm = Prm::new(p, q);
            let bdr = Bdr::of_prm(&prm);
            assert_eq!(bdr.delay, 2 * (p - q));
            for t in 0..10 * p {
                assert!(bdr.sbf(t) <= prm.sbf(t), "PRM({p},{q}) at {t}");
            }
        }
    }

    #[test]
    fn bdm_matches_the_interface_line() {
        let b = Bdm {
            alpha: Bandwidth::parse_decimal("0.72").unwrap(),
            delta: 20,
            m: 2,
        };
        assert_eq!(b.y(2, 270), 360);
        assert_eq!(b.y(1, 20), 0);
        assert_eq!(b.time_to_y(2, 360), Some(270));
        assert_eq!(b.time_to_y(2, 361), Some(271));
    }

    #[test]
    fn bdm_servers_dominate_the_interface() {
        // The per-CPU server rtbox builds for BDM supplies at least alpha (t - Delta).
        for a in ["0.72", "0.22", "0.5", "0.05", "0.95"] {
            let alpha = Bandwidth::parse_decimal(a).unwrap();
            let b = Bdm {
                alpha,
                delta: 20_000_000,
                m: 2,
            };
            let (q, p) = b.server().unwrap();
            let servers = ServerSet::new(vec![Prm::new(p, q); 2]);
            for t in (0..400_000_000).step_by(999_983) {
                for k in 1..=2 {
                    assert!(servers.y(k, t) >= b.y(k, t), "alpha {a} k {k} t {t}");
                }
            }
        }
    }

    /// Brute force for two asymmetric servers: every pair of phases and every placement of
    /// each period's budget; Y_k counts at most k of the two CPUs at an instant.
    fn two_servers_brute(a: Prm, b: Prm, k: u64, t: u64) -> u64 {
        fn patterns(pi: u64, theta: u64) -> Vec<u64> {
            (0u64..1 << pi)
                .filter(|x| x.count_ones() as u64 == theta)
                .collect()
        }
        // Supply of a server over [0, t) given phase and one pattern per period.
        fn slots(p: Prm, phase: u64, pats: &[u64], t: u64) -> Vec<u64> {
            (0..t)
                .map(|x| {
                    let y = x + phase;
                    let (per, off) = (y / p.period, y % p.period);
                    (pats[per as usize] >> off) & 1
                })
                .collect()
        }
        fn all_seqs(pi: u64, theta: u64, n: usize) -> Vec<Vec<u64>> {
            let ps = patterns(pi, theta);
            let mut out = vec![vec![]];
            for _ in 0..n {
                out = out
                    .into_iter()
                    .flat_map(|v| {
                        ps.iter().map(move |&p| {
                            let mut w = v.clone();
                            w.push(p);
                            w
                        })
                    })
                    .collect();
            }
            out
        }
        let na = ((t + a.period) / a.period + 1) as usize;
        let nb = ((t + b.period) / b.period + 1) as usize;
        let sa = all_seqs(a.period, a.budget, na);
        let sb = all_seqs(b.period, b.budget, nb);
        let mut best = u64::MAX;
        for pa in 0..a.period {
            for pb in 0..b.period {
                for x in &sa {
                    let va = slots(a, pa, x, t);
                    for y in &sb {
                        let vb = slots(b, pb, y, t);
                        let s: u64 = va.iter().zip(&vb).map(|(p, q)| (p + q).min(k)).sum();
                        best = best.min(s);
                    }
                }
            }
        }
        best
    }

    #[test]
    fn asymmetric_servers_agree_with_phasing_brute_force() {
        let cases = [
            (Prm::new(3, 2), Prm::new(4, 1)),
            (Prm::new(3, 1), Prm::new(2, 1)),
            (Prm::new(4, 2), Prm::new(3, 2)),
        ];
        for (a, b) in cases {
            let set = ServerSet::new(vec![a, b]);
            for t in 0..=7 {
                // Full parallelism: exact (independent phases).
                assert_eq!(
                    set.y(2, t),
                    u128::from(two_servers_brute(a, b, 2, t)),
                    "{a:?} {b:?} k=2 t={t}"
                );
                assert_eq!(set.sbf(t), set.y(2, t));
                // Parallelism 1: a safe lower bound.
                assert!(
                    set.y(1, t) <= u128::from(two_servers_brute(a, b, 1, t)),
                    "{a:?} {b:?} k=1 t={t}"
                );
            }
        }
    }

    #[test]
    fn inverse_finds_the_least_time() {
        let supplies: Vec<Box<dyn Supply>> = vec![
            Box::new(Prm::new(10, 4)),
            Box::new(Edp {
                period: 11,
                budget: 2,
                deadline: 5,
            }),
            Box::new(Mpr {
                period: 10,
                budget: 25,
                m: 3,
            }),
            Box::new(Bdr {
                alpha: Bandwidth::parse_decimal("0.3").unwrap(),
                delay: 7,
            }),
            Box::new(ServerSet::new(vec![Prm::new(5, 3), Prm::new(7, 2)])),
            Box::new(Dedicated { m: 3 }),
        ];
        for s in &supplies {
            for w in 0..60u128 {
                let t = s.time_to_supply(w).unwrap();
                assert!(s.sbf(t) >= w, "{}: w={w}", s.describe());
                assert!(t == 0 || s.sbf(t - 1) < w, "{}: w={w} t={t}", s.describe());
            }
        }
    }

    proptest! {
        #[test]
        fn supplies_are_monotone_and_below_their_rate(
            pi in 1u64..200, a in 0u64..200, m in 1u32..5, dl in 0u64..200, t in 0u64..2000
        ) {
            let theta = a % (pi + 1);
            let mtheta = a % (u64::from(m) * pi + 1);
            let dl = theta.max(1).max(dl % (pi + 1)).min(pi);
            let supplies: Vec<Box<dyn Supply>> = vec![
                Box::new(Prm::new(pi, theta)),
                Box::new(Edp { period: pi, budget: theta, deadline: dl }),
                Box::new(Mpr { period: pi, budget: mtheta, m }),
                Box::new(Bdr { alpha: Bandwidth::of(theta, pi), delay: dl }),
                Box::new(ServerSet::new(vec![Prm::new(pi, theta), Prm::new(pi + 3, theta.min(pi + 3))])),
            ];
            for s in &supplies {
                let (now, next) = (s.sbf(t), s.sbf(t + 1));
                prop_assert!(now <= next, "{} not monotone at {}", s.describe(), t);
                prop_assert!(next - now <= u128::from(s.parallelism()), "{} too steep", s.describe());
                let lin = s.linear();
                // Below the long-run rate times t (rounded up), above its linear bound.
                prop_assert!(now * lin.rate_den <= lin.rate_num * u128::from(t) + lin.rate_den, "{} above rate*t", s.describe());
                prop_assert!(lin.at(t) <= now, "{} below its linear bound at {}", s.describe(), t);
            }
        }
    }
}
