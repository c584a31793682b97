//! Issue 4: the random task-set generators follow their distributions
//! (analysis-facts.md, "Task-set generation"). Each check is a real statistical test at
//! significance 0.001 with a fixed seed, so CI is stable and a wrong generator still fails.

use rtbox_workload::stats::{beta_1_b_cdf, fixed_sum_marginal_cdf, ks_critical_0001, ks_statistic};
use rtbox_workload::utilization::{rand_fixed_sum, uunifast, uunifast_discard, within_cap};
use rtbox_workload::Rng;

const SAMPLES: usize = 20_000;

#[test]
fn uunifast_shares_are_beta_1_n_minus_1() {
    let mut rng = Rng::seed(0x5eed_0001);
    for (n, total) in [(2usize, 1.0), (4, 2.0), (8, 3.5)] {
        // Each position, not just the first, must follow Beta(1, n-1).
        for pos in [0, n - 1] {
            let shares: Vec<f64> = (0..SAMPLES)
                .map(|_| uunifast(&mut rng, n, total)[pos] / total)
                .collect();
            let d = ks_statistic(&shares, |x| beta_1_b_cdf((n - 1) as f64, x));
            assert!(
                d < ks_critical_0001(SAMPLES),
                "n {n} position {pos}: KS distance {d} vs critical {}",
                ks_critical_0001(SAMPLES)
            );
        }
    }
}

#[test]
fn uunifast_discard_accepts_half_the_sets_for_n4_u2() {
    let mut rng = Rng::seed(0x5eed_0002);
    let trials = 40_000;
    let accepted = (0..trials)
        .filter(|_| within_cap(&uunifast(&mut rng, 4, 2.0), 1.0))
        .count();
    // Binomial(40000, 1/2): sd = 100; 4.5 sd is beyond the 0.999 level.
    let dev = (accepted as f64 - trials as f64 / 2.0).abs();
    assert!(dev < 450.0, "accepted {accepted} of {trials}");
    // The attempt counter of uunifast_discard is geometric with p = 1/2: mean 2.
    let runs = 20_000;
    let attempts: u32 = (0..runs)
        .map(|_| uunifast_discard(&mut rng, 4, 2.0, 1.0, 1000).unwrap().1)
        .sum();
    let mean = attempts as f64 / runs as f64;
    // sd of the mean = sqrt(2)/sqrt(runs) = 0.01.
    assert!((mean - 2.0).abs() < 0.05, "mean attempts {mean}");
}

#[test]
fn randfixedsum_n2_is_uniform_on_the_feasible_interval() {
    let mut rng = Rng::seed(0x5eed_0003);
    for total in [0.3, 1.0, 1.7] {
        let (lo, hi) = (f64::max(0.0, total - 1.0), f64::min(1.0, total));
        let first: Vec<f64> = (0..SAMPLES)
            .map(|_| rand_fixed_sum(&mut rng, 2, total, 0.0, 1.0).unwrap()[0])
            .collect();
        let d = ks_statistic(&first, |x| ((x - lo) / (hi - lo)).clamp(0.0, 1.0));
        assert!(d < ks_critical_0001(SAMPLES), "U {total}: KS {d}");
    }
}

#[test]
fn randfixedsum_marginals_match_the_exact_law_for_small_n() {
    let mut rng = Rng::seed(0x5eed_0004);
    for (n, total) in [(3usize, 1.5), (3, 0.6), (5, 3.7), (6, 2.2)] {
        for pos in [0, n - 1] {
            let xs: Vec<f64> = (0..SAMPLES)
                .map(|_| rand_fixed_sum(&mut rng, n, total, 0.0, 1.0).unwrap()[pos])
                .collect();
            let d = ks_statistic(&xs, |x| fixed_sum_marginal_cdf(n, total, x));
            assert!(
                d < ks_critical_0001(SAMPLES),
                "n {n} U {total} pos {pos}: KS {d}"
            );
        }
    }
}

#[test]
fn uunifast_discard_agrees_with_randfixedsum() {
    // Both are uniform on the capped simplex: the accepted UUniFast-Discard marginal must
    // follow the same exact law as RandFixedSum.
    let mut rng = Rng::seed(0x5eed_0005);
    let (n, total) = (4usize, 2.0);
    let xs: Vec<f64> = (0..SAMPLES)
        .map(|_| uunifast_discard(&mut rng, n, total, 1.0, 1000).unwrap().0[1])
        .collect();
    let d = ks_statistic(&xs, |x| fixed_sum_marginal_cdf(n, total, x));
    assert!(d < ks_critical_0001(SAMPLES), "KS {d}");
}

#[test]
fn log_uniform_periods_are_uniform_in_log_space() {
    use rtbox_workload::taskset::log_uniform_period;
    let mut rng = Rng::seed(0x5eed_0006);
    // Granularity 1 ns so rounding is negligible against the KS resolution.
    let (min, max) = (1_000_000u64, 100_000_000u64);
    let span = (max as f64 / min as f64).ln();
    let xs: Vec<f64> = (0..SAMPLES)
        .map(|_| (log_uniform_period(&mut rng, min, max, 1) as f64 / min as f64).ln() / span)
        .collect();
    let d = ks_statistic(&xs, |x| x.clamp(0.0, 1.0));
    assert!(d < ks_critical_0001(SAMPLES), "KS {d}");
}
