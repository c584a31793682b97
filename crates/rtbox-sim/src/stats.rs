//! Streaming statistics with memory independent of the number of samples.

use rtbox_model::Nanos;
use serde::Serialize;

/// Sub-buckets per power of two: percentiles are exact to within 1/32 (about 3 %).
const SUB_BITS: u32 = 5;
const SUB: usize = 1 << SUB_BITS;
const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB;

/// A log-linear histogram of nanosecond values (fixed 1 920 buckets) plus exact min, max, sum.
#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    min: Nanos,
    max: Nanos,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            count: 0,
            sum: 0,
            min: Nanos::MAX,
            max: 0,
        }
    }
}

fn bucket(v: Nanos) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB_BITS;
    let sub = ((v >> shift) as usize) & (SUB - 1);
    ((shift + 1) as usize) * SUB + sub
}

/// The largest value that falls in bucket `b`.
fn bucket_high(b: usize) -> Nanos {
    if b < SUB {
        return b as u64;
    }
    let shift = (b / SUB - 1) as u32;
    let sub = (b % SUB) as u64;
    let low = (SUB as u64 + sub) << shift;
    low + ((1u64 << shift) - 1)
}

impl Histogram {
    pub fn record(&mut self, v: Nanos) {
        self.counts[bucket(v)] += 1;
        self.count += 1;
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The value below which a fraction `q` of samples fall, as the upper edge of its bucket,
    /// clamped to the exact maximum (so p100 = max).
    pub fn quantile(&self, q: f64) -> Nanos {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_high(b).clamp(self.min, self.max);
            }
        }
        self.max
    }

    pub fn summary(&self) -> Summary {
        if self.count == 0 {
            return Summary::default();
        }
        Summary {
            count: self.count,
            min: self.min,
            mean: (self.sum / u128::from(self.count)) as Nanos,
            max: self.max,
            p50: self.quantile(0.50),
            p90: self.quantile(0.90),
            p99: self.quantile(0.99),
        }
    }
}

/// Response-time statistics in nanoseconds (percentiles within about 3 %).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub count: u64,
    pub min: Nanos,
    pub mean: Nanos,
    pub max: Nanos,
    pub p50: Nanos,
    pub p90: Nanos,
    pub p99: Nanos,
}

/// PRM supply bound sbf(t) of a periodic resource (Pi, Theta) (Shin & Lee 2003, as stated in
/// analysis-facts.md): 0 for t < Pi - Theta; else with k = floor((t - (Pi - Theta)) / Pi),
/// k Theta + max(0, t - 2 (Pi - Theta) - k Pi). A hard CBS (Q, P) supplies at least PRM(P, Q).
pub fn prm_sbf(pi: Nanos, theta: Nanos, t: Nanos) -> Nanos {
    let gap = pi - theta;
    if t < gap {
        return 0;
    }
    let k = (t - gap) / pi;
    let rest = t.saturating_sub(2 * gap + k * pi);
    k * theta + rest
}

/// Tracks the smallest supply a server received over windows of fixed lengths, counting only
/// windows during which its box kept it saturated (enough ready work for every vCPU).
///
/// Supply S(t) is piecewise linear; the minimum of S(t + L) - S(t) is reached where t or t + L is
/// a breakpoint, so only those windows are evaluated. Memory: the breakpoints of the last
/// max(L) nanoseconds.
#[derive(Debug, Clone)]
pub struct SupplyTracker {
    pub windows: Vec<Nanos>,
    pub worst: Vec<Option<Nanos>>,
    /// (time, cumulative supply) of the current saturated interval; the last point is "now".
    points: std::collections::VecDeque<(Nanos, Nanos)>,
    /// Per window: index (absolute, counting popped points) of the next start point to evaluate.
    next_start: Vec<u64>,
    popped: u64,
    supply: Nanos,
    running: bool,
    since: Nanos,
    saturated: bool,
}

impl SupplyTracker {
    pub fn new(windows: Vec<Nanos>) -> Self {
        let n = windows.len();
        SupplyTracker {
            windows,
            worst: vec![None; n],
            points: Default::default(),
            next_start: vec![0; n],
            popped: 0,
            supply: 0,
            running: false,
            since: 0,
            saturated: false,
        }
    }

    fn value_at(&self, t: Nanos) -> Nanos {
        // Linear interpolation between the breakpoints around t (t inside the interval).
        let i = self.points.partition_point(|p| p.0 <= t);
        if i == 0 {
            return self.points[0].1;
        }
        let (t0, s0) = self.points[i - 1];
        match self.points.get(i) {
            None => s0,
            Some(&(t1, s1)) => {
                let rate_num = s1 - s0;
                let span = t1 - t0;
                s0 + ((u128::from(rate_num) * u128::from(t - t0)) / u128::from(span.max(1))) as u64
            }
        }
    }

    fn note(&mut self, w: usize, v: Nanos) {
        self.worst[w] = Some(self.worst[w].map_or(v, |x| x.min(v)));
    }

    /// Appends a breakpoint at `now` (the supply has grown linearly since the previous one) and
    /// evaluates the windows it completes. Outside a saturated interval only the supply is
    /// brought up to date: that short path is inlined into the callers, the window evaluation
    /// is not.
    #[inline]
    fn push(&mut self, now: Nanos) {
        if self.running {
            self.supply += now - self.since;
        }
        self.since = now;
        if self.saturated {
            self.push_saturated(now);
        }
    }

    /// The part of [`SupplyTracker::push`] inside a saturated interval.
    #[inline(never)]
    fn push_saturated(&mut self, now: Nanos) {
        if self.points.back().is_some_and(|p| p.0 == now) {
            self.points.pop_back();
        }
        self.points.push_back((now, self.supply));
        let start = self.points[0].0;
        for w in 0..self.windows.len() {
            let len = self.windows[w];
            if now < start + len {
                continue;
            }
            // Window ending at this breakpoint.
            let v = self.supply - self.value_at(now - len);
            self.note(w, v);
            // Windows starting at breakpoints whose end has now been reached.
            loop {
                let idx = self.next_start[w].max(self.popped);
                let rel = (idx - self.popped) as usize;
                match self.points.get(rel) {
                    Some(&(b, sb)) if b + len <= now => {
                        let v = self.value_at(b + len) - sb;
                        self.note(w, v);
                        self.next_start[w] = idx + 1;
                    }
                    _ => break,
                }
            }
        }
        // Drop points no window needs any more.
        let keep_from = now.saturating_sub(self.windows.iter().copied().max().unwrap_or(0));
        while self.points.len() > 2 && self.points[1].0 <= keep_from {
            let min_next = self.next_start.iter().copied().min().unwrap_or(0);
            if min_next <= self.popped {
                break;
            }
            self.points.pop_front();
            self.popped += 1;
        }
    }

    /// The server starts or stops receiving CPU time at `now`.
    pub fn set_running(&mut self, now: Nanos, running: bool) {
        if running != self.running {
            self.push(now);
            self.running = running;
        }
    }

    /// The server's box becomes saturated or not at `now`; a saturated interval ends all windows.
    pub fn set_saturated(&mut self, now: Nanos, saturated: bool) {
        if saturated == self.saturated {
            return;
        }
        self.push(now);
        self.saturated = saturated;
        self.points.clear();
        self.popped = 0;
        self.next_start.iter_mut().for_each(|x| *x = 0);
        if saturated {
            self.points.push_back((now, self.supply));
        }
    }

    pub fn finish(&mut self, now: Nanos) {
        self.push(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_percentiles_are_close() {
        let mut h = Histogram::default();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let s = h.summary();
        assert_eq!((s.min, s.max, s.count), (1000, 10_000_000, 10_000));
        assert_eq!(s.mean, 5_000_500);
        for (q, exact) in [(0.5, 5_000_000f64), (0.9, 9_000_000.0), (0.99, 9_900_000.0)] {
            let got = h.quantile(q) as f64;
            assert!((got - exact).abs() / exact < 0.04, "q{q}: {got} vs {exact}");
            assert!(got >= exact, "quantiles are upper edges");
        }
        assert_eq!(h.quantile(1.0), 10_000_000);
    }

    #[test]
    fn buckets_cover_every_value() {
        for v in [0u64, 1, 31, 32, 33, 1000, 1 << 40, u64::MAX] {
            let b = bucket(v);
            assert!(b < BUCKETS);
            assert!(bucket_high(b) >= v, "{v}");
        }
    }

    #[test]
    fn prm_sbf_matches_the_formula() {
        // PRM(Pi = 6, Theta = 3): nothing for 2(Pi - Theta) = 6, then rate 1 for 3.
        let got: Vec<u64> = (0..=15).map(|t| prm_sbf(6, 3, t)).collect();
        assert_eq!(got, vec![0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 3, 3, 3, 4, 5, 6]);
        assert_eq!(prm_sbf(10, 10, 7), 7);
    }

    /// Against brute force: random on/off supply with saturated gaps, every integer window start.
    #[test]
    fn supply_tracker_matches_brute_force() {
        let mut rng = crate::workload::Rng::new(5);
        for _ in 0..50 {
            let windows = vec![3, 7, 20];
            let mut tr = SupplyTracker::new(windows.clone());
            // Timeline of 200 units: per unit, saturated? running?
            let mut sat = Vec::new();
            let mut run = Vec::new();
            let (mut s, mut r) = (true, false);
            for _ in 0..200 {
                if rng.between(0, 9) == 0 {
                    s = !s;
                }
                if rng.between(0, 2) == 0 {
                    r = !r;
                }
                sat.push(s);
                run.push(r);
            }
            for t in 0..200u64 {
                tr.set_saturated(t, sat[t as usize]);
                tr.set_running(t, run[t as usize]);
            }
            tr.set_saturated(200, false);
            for (w, &len) in windows.iter().enumerate() {
                let mut best: Option<u64> = None;
                for start in 0..200usize {
                    let end = start + len as usize;
                    if end > 200 || !sat[start..end].iter().all(|&x| x) {
                        continue;
                    }
                    let v = run[start..end].iter().filter(|&&x| x).count() as u64;
                    best = Some(best.map_or(v, |b: u64| b.min(v)));
                }
                assert_eq!(tr.worst[w], best, "window {len}");
            }
        }
    }

    #[test]
    fn supply_tracker_finds_the_worst_window() {
        // Runs [0,3) and [9,12) and [12,15): the worst window of length 6 is [3,9) with 0.
        let mut s = SupplyTracker::new(vec![6, 12]);
        s.set_saturated(0, true);
        s.set_running(0, true);
        s.set_running(3, false);
        s.set_running(9, true);
        s.set_running(15, false);
        s.finish(18);
        assert_eq!(s.worst, vec![Some(0), Some(6)]);
    }
}
