//! Statistical oracles for testing generators: the Kolmogorov-Smirnov statistic and the
//! distributions the generators must follow (analysis-facts.md, "Task-set generation").

/// The one-sample Kolmogorov-Smirnov statistic: the largest distance between the empirical
/// distribution of `samples` and the continuous distribution function `cdf`.
pub fn ks_statistic(samples: &[f64], cdf: impl Fn(f64) -> f64) -> f64 {
    let mut sorted: Vec<f64> = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    let mut d: f64 = 0.0;
    for (i, &x) in sorted.iter().enumerate() {
        let f = cdf(x);
        d = d.max((i + 1) as f64 / n - f).max(f - i as f64 / n);
    }
    d
}

/// The asymptotic critical value of the KS statistic for `n` samples at significance 0.001
/// (c(0.001) = sqrt(-ln(0.0005)/2) = 1.949...): a correct generator exceeds it once in 1000
/// seeds.
pub fn ks_critical_0001(n: usize) -> f64 {
    (-(0.0005f64).ln() / 2.0).sqrt() / (n as f64).sqrt()
}

/// Distribution function of Beta(1, b): 1 - (1 - x)^b on [0, 1].
pub fn beta_1_b_cdf(b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        0.0
    } else if x >= 1.0 {
        1.0
    } else {
        1.0 - (1.0 - x).powf(b)
    }
}

/// Distribution function of the Irwin-Hall law (sum of `k` independent U(0,1)):
/// F_k(t) = 1/k! sum_{j=0}^{floor t} (-1)^j C(k,j) (t-j)^k. Exact enough for small k only
/// (the alternating sum cancels badly beyond k ~ 10), which is all the tests need.
pub fn irwin_hall_cdf(k: usize, t: f64) -> f64 {
    if t <= 0.0 {
        return 0.0;
    }
    if t >= k as f64 {
        return 1.0;
    }
    let mut sum = 0.0;
    let mut binom = 1.0;
    let mut fact = 1.0;
    for i in 1..=k {
        fact *= i as f64;
    }
    for j in 0..=k {
        if j as f64 > t {
            break;
        }
        let sign = if j % 2 == 0 { 1.0 } else { -1.0 };
        sum += sign * binom * (t - j as f64).powi(k as i32);
        binom = binom * (k - j) as f64 / (j + 1) as f64;
    }
    (sum / fact).clamp(0.0, 1.0)
}

/// Distribution function of u_1 when (u_1..u_n) is uniform on {0 <= u_i <= 1, sum = s}:
/// the density of u_1 = x is proportional to the (n-1)-fold Irwin-Hall density at s - x, so
/// P(u_1 <= x) = (F(s) - F(s - x)) / (F(s) - F(s - 1)) with F = F_{n-1}.
pub fn fixed_sum_marginal_cdf(n: usize, s: f64, x: f64) -> f64 {
    assert!(n >= 2);
    let lo = (s - (n - 1) as f64).max(0.0);
    let hi = s.min(1.0);
    if x <= lo {
        return 0.0;
    }
    if x >= hi {
        return 1.0;
    }
    let f = |t: f64| irwin_hall_cdf(n - 1, t);
    (f(s) - f(s - x)) / (f(s) - f(s - 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn irwin_hall_known_values() {
        assert!((irwin_hall_cdf(1, 0.3) - 0.3).abs() < 1e-12);
        // Sum of two uniforms: F(1) = 1/2, F(0.5) = 0.125, F(1.5) = 0.875.
        assert!((irwin_hall_cdf(2, 1.0) - 0.5).abs() < 1e-12);
        assert!((irwin_hall_cdf(2, 0.5) - 0.125).abs() < 1e-12);
        assert!((irwin_hall_cdf(2, 1.5) - 0.875).abs() < 1e-12);
        // Symmetry: F_k(k/2) = 1/2.
        assert!((irwin_hall_cdf(5, 2.5) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn n2_marginal_is_uniform_on_the_fact_interval() {
        // analysis-facts.md: for n = 2 u_1 is uniform on [max(0, U-1), min(1, U)].
        for s in [0.4, 1.0, 1.3] {
            let (lo, hi) = (f64::max(0.0, s - 1.0), f64::min(1.0, s));
            for k in 0..=10 {
                let x = lo + (hi - lo) * k as f64 / 10.0;
                let want = (x - lo) / (hi - lo);
                assert!((fixed_sum_marginal_cdf(2, s, x) - want).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn ks_detects_a_wrong_distribution() {
        let uniform: Vec<f64> = (0..1000).map(|i| (i as f64 + 0.5) / 1000.0).collect();
        assert!(ks_statistic(&uniform, |x| x) < 0.001);
        let squared: Vec<f64> = uniform.iter().map(|x| x * x).collect();
        assert!(ks_statistic(&squared, |x| x) > ks_critical_0001(1000));
    }
}
