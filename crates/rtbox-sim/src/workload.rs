//! Job generation: releases, jitter, sporadic gaps, execution times, chains. Deterministic for a
//! seed.

use rtbox_model::{Arrival, Nanos, TaskSpec};

/// SplitMix64: a small, good-enough generator for workloads (not for cryptography).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi]` (integers).
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = hi - lo + 1;
        if span == 0 {
            return self.next_u64();
        }
        lo + ((u128::from(self.next_u64()) * u128::from(span)) >> 64) as u64
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Per-task job source.
#[derive(Debug, Clone)]
pub struct Source {
    /// Nominal arrival of the next job (head tasks).
    pub next_nominal: Nanos,
    exec_list: Option<Vec<Nanos>>,
    exec_pos: usize,
}

impl Source {
    pub fn new(spec: &TaskSpec, exec_list: Option<Vec<Nanos>>) -> Self {
        Source {
            next_nominal: spec.offset,
            exec_list: exec_list.filter(|l| !l.is_empty()),
            exec_pos: 0,
        }
    }

    /// Execution time of the next job: from the per-job list (cyclic), uniform in
    /// [bcet, wcet], or the wcet.
    pub fn exec_time(&mut self, spec: &TaskSpec, rng: &mut Rng) -> Nanos {
        if let Some(list) = &self.exec_list {
            let v = list[self.exec_pos % list.len()];
            self.exec_pos += 1;
            return v.max(1);
        }
        match spec.bcet {
            Some(b) => rng.between(b, spec.wcet).max(1),
            None => spec.wcet,
        }
    }

    /// Advances to the following nominal arrival; returns (nominal, actual release).
    /// Sporadic tasks wait an extra uniform [0, T/2] beyond the minimum inter-arrival time;
    /// jitter delays the release uniformly in [0, J] (the deadline stays relative to the nominal
    /// arrival).
    pub fn take_release(&mut self, spec: &TaskSpec, rng: &mut Rng) -> (Nanos, Nanos) {
        let nominal = self.next_nominal;
        let gap = match spec.arrival {
            Arrival::Periodic => spec.period,
            Arrival::Sporadic => spec.period + rng.between(0, spec.period / 2),
        };
        self.next_nominal = nominal.saturating_add(gap);
        let jitter = if spec.jitter > 0 {
            rng.between(0, spec.jitter)
        } else {
            0
        };
        (nominal, nominal.saturating_add(jitter))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_stays_in_range_and_spreads() {
        let mut r = Rng::new(7);
        let mut seen_lo = false;
        let mut seen_hi = false;
        for _ in 0..10_000 {
            let v = r.between(3, 6);
            assert!((3..=6).contains(&v));
            seen_lo |= v == 3;
            seen_hi |= v == 6;
        }
        assert!(seen_lo && seen_hi);
        let mean: f64 = (0..10_000).map(|_| r.unit()).sum::<f64>() / 10_000.0;
        assert!((mean - 0.5).abs() < 0.02, "{mean}");
    }

    #[test]
    fn periodic_jitter_and_lists() {
        let mut spec = TaskSpec::periodic("t", 5, 10);
        spec.offset = 3;
        spec.jitter = 2;
        let mut s = Source::new(&spec, Some(vec![1, 2]));
        let mut r = Rng::new(1);
        for k in 0..20u64 {
            let (n, a) = s.take_release(&spec, &mut r);
            assert_eq!(n, 3 + 10 * k);
            assert!(a >= n && a <= n + 2);
        }
        assert_eq!(
            (0..3)
                .map(|_| s.exec_time(&spec, &mut r))
                .collect::<Vec<_>>(),
            vec![1, 2, 1]
        );
    }
}
