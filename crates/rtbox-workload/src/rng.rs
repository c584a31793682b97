//! A small seedable random number generator (xoshiro256** seeded through SplitMix64).
//!
//! Kept in-crate so that a seed names the same task sets forever, whatever version of an
//! external RNG crate is in the lock file.

/// Deterministic 64-bit generator; not cryptographic.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

/// SplitMix64 step: spreads a seed over the whole state so that nearby seeds differ.
fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    pub fn seed(seed: u64) -> Self {
        let mut x = seed;
        let s = [
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
        ];
        Rng { s }
    }

    /// An independent stream for item `index` of the experiment seeded with `seed`: the same
    /// (seed, index) always gives the same stream, whichever thread draws it.
    pub fn stream(seed: u64, index: u64) -> Self {
        let mut x = seed ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03);
        let mixed = splitmix64(&mut x) ^ index;
        Rng::seed(mixed)
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in (0, 1]: safe to take a logarithm or a root of.
    pub fn uniform_open0(&mut self) -> f64 {
        1.0 - self.uniform()
    }

    /// Uniform integer in [lo, hi] (inclusive), without modulo bias.
    pub fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        debug_assert!(lo <= hi);
        let span = hi - lo;
        if span == u64::MAX {
            return self.next_u64();
        }
        let n = span + 1;
        let zone = u64::MAX - (u64::MAX % n) - 1;
        loop {
            let x = self.next_u64();
            if x <= zone {
                return lo + x % n;
            }
        }
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.range_inclusive(0, i as u64) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_different_seeds_differ() {
        let a: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::seed(7);
                move |_| r.next_u64()
            })
            .collect();
        let mut r = Rng::seed(7);
        let b: Vec<u64> = (0..8).map(|_| r.next_u64()).collect();
        assert_eq!(a, b);
        let mut r = Rng::seed(8);
        assert_ne!(a[0], r.next_u64());
        assert_ne!(Rng::stream(1, 0).next_u64(), Rng::stream(1, 1).next_u64());
    }

    #[test]
    fn uniform_stays_in_range_and_has_the_right_mean() {
        let mut r = Rng::seed(1);
        let n = 100_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let x = r.uniform();
            assert!((0.0..1.0).contains(&x));
            sum += x;
        }
        // Mean of U(0,1) is 1/2 with standard error 1/sqrt(12 n) ~ 0.0009: 6 sigma.
        assert!((sum / n as f64 - 0.5).abs() < 0.006);
    }

    #[test]
    fn range_inclusive_hits_both_ends_evenly() {
        let mut r = Rng::seed(2);
        let mut counts = [0u32; 5];
        for _ in 0..50_000 {
            counts[r.range_inclusive(3, 7) as usize - 3] += 1;
        }
        // Chi-square with 4 degrees of freedom; 18.5 is the 0.999 quantile.
        let expected = 10_000.0;
        let chi2: f64 = counts
            .iter()
            .map(|&c| (c as f64 - expected).powi(2) / expected)
            .sum();
        assert!(chi2 < 18.5, "chi2 = {chi2}, counts {counts:?}");
    }
}
