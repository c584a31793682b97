//! Random utilization vectors: UUniFast, UUniFast-Discard and RandFixedSum.
//!
//! Floats are fine here: utilizations exist only at generation time and become integer
//! execution times (`C = round(u T)`) before any analysis or simulation sees them.

use crate::rng::Rng;

/// UUniFast (Bini & Buttazzo 2005): `n` utilizations summing to `total`, uniform on the
/// simplex {u_i >= 0, sum u_i = total}. Each u_i / total ~ Beta(1, n - 1).
///
/// Rule: with `rest` the sum still to share among the last `k` tasks, the sum left for the
/// last `k - 1` is `rest * r^(1/(k-1))`, r ~ U(0,1) (the largest of k-1 uniforms); the
/// difference goes to the current task.
pub fn uunifast(rng: &mut Rng, n: usize, total: f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let mut rest = total;
    for k in (2..=n).rev() {
        let next = rest * rng.uniform_open0().powf(1.0 / (k - 1) as f64);
        out.push(rest - next);
        rest = next;
    }
    out.push(rest);
    out
}

/// Whether every utilization fits one CPU share `cap` (UUniFast-Discard's acceptance rule).
pub fn within_cap(utils: &[f64], cap: f64) -> bool {
    utils.iter().all(|&u| u <= cap)
}

/// Why no utilization vector could be drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum UtilError {
    /// `total` is not in [0, n * cap].
    Infeasible { n: usize, total: f64, cap: f64 },
    /// UUniFast-Discard rejected every one of `attempts` draws (acceptance is tiny near
    /// total = n * cap; use RandFixedSum there).
    TooManyRejections { attempts: u32 },
}

impl std::fmt::Display for UtilError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UtilError::Infeasible { n, total, cap } => write!(
                f,
                "utilization {total} cannot be split among {n} tasks of at most {cap} each"
            ),
            UtilError::TooManyRejections { attempts } => write!(
                f,
                "UUniFast-Discard rejected {attempts} draws in a row (use randfixedsum for \
                 utilizations close to n x cap)"
            ),
        }
    }
}

impl std::error::Error for UtilError {}

fn check_feasible(n: usize, total: f64, cap: f64) -> Result<(), UtilError> {
    let ok = n > 0
        && total.is_finite()
        && cap.is_finite()
        && cap > 0.0
        && total >= 0.0
        && total <= n as f64 * cap * (1.0 + 1e-12);
    if ok {
        Ok(())
    } else {
        Err(UtilError::Infeasible { n, total, cap })
    }
}

/// UUniFast-Discard (Davis & Burns): UUniFast draws until every u_i <= `cap`; the accepted
/// vectors are uniform on {0 <= u_i <= cap, sum = total}. Returns the vector and the number of
/// draws it took.
pub fn uunifast_discard(
    rng: &mut Rng,
    n: usize,
    total: f64,
    cap: f64,
    max_attempts: u32,
) -> Result<(Vec<f64>, u32), UtilError> {
    check_feasible(n, total, cap)?;
    for attempt in 1..=max_attempts {
        let utils = uunifast(rng, n, total);
        if within_cap(&utils, cap) {
            return Ok((utils, attempt));
        }
    }
    Err(UtilError::TooManyRejections {
        attempts: max_attempts,
    })
}

/// RandFixedSum (Stafford; Emberson, Stafford & Davis 2010): `n` values uniform on
/// {lo <= u_i <= hi, sum = total}, with no rejection, so it works right up to total = n hi.
pub fn rand_fixed_sum(
    rng: &mut Rng,
    n: usize,
    total: f64,
    lo: f64,
    hi: f64,
) -> Result<Vec<f64>, UtilError> {
    let width = hi - lo;
    if width.is_nan() || width <= 0.0 || !lo.is_finite() || n == 0 {
        return Err(UtilError::Infeasible { n, total, cap: hi });
    }
    let unit_sum = (total - n as f64 * lo) / width;
    if !(-1e-12..=n as f64 * (1.0 + 1e-12)).contains(&unit_sum) {
        return Err(UtilError::Infeasible { n, total, cap: hi });
    }
    let x = unit_cube_fixed_sum(rng, n, unit_sum.clamp(0.0, n as f64));
    Ok(x.into_iter().map(|v| lo + width * v).collect())
}

/// Uniform sample of the slice S = {x in [0,1]^n, sum x = s}.
///
/// The math (Stafford): with k = floor(s), S is a union of (n-1)-simplices whose vertices are
/// points of the slice on the edges of the unit cube. Build the point coordinate by
/// coordinate. `vol[m][j]` is proportional to the volume of the slice of an m-cube whose sum
/// lies in the j-th unit layer around s; it obeys a two-term recursion (the new coordinate
/// either stays in the same layer or drops one). `down[m][j]` is the probability of dropping,
/// the share of the recursion's second term. Sampling walks the layers with those
/// probabilities and places the point inside the chosen simplex with the stick-breaking rule
/// for uniform simplex points (a Beta(m, 1) variate `r^(1/m)` per step). A final shuffle
/// removes the order in which coordinates were built.
fn unit_cube_fixed_sum(rng: &mut Rng, n: usize, s: f64) -> Vec<f64> {
    if n == 1 {
        return vec![s];
    }
    let k = (s.floor() as usize).min(n - 1);
    let s = s.clamp(k as f64, (k + 1) as f64);
    // Distances of s from the layer boundaries: above[j] = s - (k - j), below[j] = (k + n - j) - s.
    let above: Vec<f64> = (0..n).map(|j| s - k as f64 + j as f64).collect();
    let below: Vec<f64> = (0..n).map(|j| (k + n - j) as f64 - s).collect();
    // vol[m-1][j] for m = 1..=n dimensions, j = 0..=n layers; the seed value is large so that
    // the ratios keep precision (only ratios matter).
    let mut vol = vec![vec![0.0f64; n + 1]; n];
    vol[0][1] = f64::MAX;
    let mut down = vec![vec![0.0f64; n]; n - 1];
    let tiny = f64::MIN_POSITIVE * f64::EPSILON;
    for m in 2..=n {
        for j in 1..=m {
            let stay = vol[m - 2][j] * above[j - 1] / m as f64;
            let drop = vol[m - 2][j - 1] * below[n - m + j - 1] / m as f64;
            vol[m - 1][j] = stay + drop;
            let total = vol[m - 1][j] + tiny;
            down[m - 2][j - 1] = if below[n - m + j - 1] > above[j - 1] {
                drop / total
            } else {
                1.0 - stay / total
            };
        }
    }
    let mut x = vec![0.0; n];
    let mut remaining = s;
    let mut layer = k + 1; // 1-based column into `down`
    let mut base = 0.0; // common part of every coordinate still to come
    let mut scale = 1.0; // product of the stick-breaking factors so far
    for m in (1..n).rev() {
        let dropped = rng.uniform() <= down[m - 1][layer - 1];
        let step = rng.uniform().powf(1.0 / m as f64);
        base += (1.0 - step) * scale * remaining / (m + 1) as f64;
        scale *= step;
        let e = if dropped { 1.0 } else { 0.0 };
        x[n - m - 1] = base + scale * e;
        if dropped {
            remaining -= 1.0;
            layer = layer.saturating_sub(1).max(1);
        }
    }
    x[n - 1] = base + scale * remaining;
    rng.shuffle(&mut x);
    for v in &mut x {
        *v = v.clamp(0.0, 1.0);
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uunifast_sums_to_total() {
        let mut rng = Rng::seed(3);
        for n in 1..10 {
            let u = uunifast(&mut rng, n, 2.5);
            assert_eq!(u.len(), n);
            assert!(u.iter().all(|&x| x >= 0.0));
            assert!((u.iter().sum::<f64>() - 2.5).abs() < 1e-9);
        }
    }

    #[test]
    fn rand_fixed_sum_respects_bounds_and_sum() {
        let mut rng = Rng::seed(4);
        for n in 1..30 {
            for total in [
                0.0,
                0.3 * n as f64,
                0.5 * n as f64,
                0.97 * n as f64,
                n as f64,
            ] {
                let u = rand_fixed_sum(&mut rng, n, total, 0.0, 1.0).unwrap();
                assert!(u.iter().all(|&x| (0.0..=1.0).contains(&x)), "{u:?}");
                assert!(
                    (u.iter().sum::<f64>() - total).abs() < 1e-9,
                    "n {n} total {total}"
                );
            }
        }
        let u = rand_fixed_sum(&mut rng, 5, 2.0, 0.1, 0.6).unwrap();
        assert!(u.iter().all(|&x| (0.1..=0.6 + 1e-12).contains(&x)));
    }

    #[test]
    fn infeasible_totals_are_refused() {
        let mut rng = Rng::seed(5);
        assert!(rand_fixed_sum(&mut rng, 3, 3.5, 0.0, 1.0).is_err());
        assert!(uunifast_discard(&mut rng, 3, 3.5, 1.0, 10).is_err());
        assert!(matches!(
            uunifast_discard(&mut rng, 20, 19.99, 1.0, 5),
            Err(UtilError::TooManyRejections { attempts: 5 })
        ));
    }
}
