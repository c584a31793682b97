//! Fixed-point CPU bandwidth: the fraction of one CPU that a server or box owns.
//!
//! The unit is 10^-12 CPU. A decimal scale keeps user-facing values such as the 0.95 admission cap
//! exact, and 10^-12 is far below anything a timer can enforce. Server bandwidths round *up*
//! (admission never under-counts a reservation); remainders round down.

use std::fmt;
use std::iter::Sum;
use std::ops::{Add, Sub};

/// One CPU, in bandwidth units.
pub const BW_ONE: u64 = 1_000_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bandwidth(u64);

impl Bandwidth {
    pub const ZERO: Bandwidth = Bandwidth(0);
    pub const ONE: Bandwidth = Bandwidth(BW_ONE);

    pub const fn from_units(units: u64) -> Self {
        Bandwidth(units)
    }

    pub const fn units(self) -> u64 {
        self.0
    }

    /// `budget / period`, rounded up. `period` must be positive.
    pub fn of(budget: u64, period: u64) -> Self {
        debug_assert!(period > 0, "bandwidth of a zero period");
        let num = u128::from(budget) * u128::from(BW_ONE);
        let den = u128::from(period);
        Bandwidth(u64::try_from(num.div_ceil(den)).unwrap_or(u64::MAX))
    }

    /// The budget this bandwidth gives over `period`, rounded down.
    pub fn budget_floor(self, period: u64) -> u64 {
        let v = u128::from(self.0) * u128::from(period) / u128::from(BW_ONE);
        u64::try_from(v).unwrap_or(u64::MAX)
    }

    /// The budget this bandwidth gives over `period`, rounded up.
    pub fn budget_ceil(self, period: u64) -> u64 {
        let v = (u128::from(self.0) * u128::from(period)).div_ceil(u128::from(BW_ONE));
        u64::try_from(v).unwrap_or(u64::MAX)
    }

    /// Parses a decimal such as `0.72` exactly (at most 12 decimals).
    pub fn parse_decimal(text: &str) -> Option<Self> {
        crate::time::parse_scaled_decimal(text.trim(), BW_ONE)
            .ok()
            .map(Bandwidth)
    }

    /// Converts a float from the edge (a TOML number, a CLI flag), rounding to the nearest unit.
    /// Returns `None` for NaN, negatives and values above 2^20 CPUs.
    pub fn from_f64(x: f64) -> Option<Self> {
        if !x.is_finite() || !(0.0..=1_048_576.0).contains(&x) {
            return None;
        }
        Some(Bandwidth((x * BW_ONE as f64).round() as u64))
    }

    /// For display and plots only.
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / BW_ONE as f64
    }

    pub fn saturating_sub(self, other: Bandwidth) -> Bandwidth {
        Bandwidth(self.0.saturating_sub(other.0))
    }

    /// Formats with `digits` decimals, rounded half up.
    pub fn format(self, digits: u32) -> String {
        let digits = digits.min(12);
        let step = 10u64.pow(12 - digits);
        let rounded = (u128::from(self.0) + u128::from(step / 2)) / u128::from(step);
        let scale = 10u128.pow(digits);
        if digits == 0 {
            return format!("{rounded}");
        }
        format!(
            "{}.{:0width$}",
            rounded / scale,
            rounded % scale,
            width = digits as usize
        )
    }
}

impl fmt::Display for Bandwidth {
    /// Shortest exact decimal: `0.72`, `0.3333333333`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let int = self.0 / BW_ONE;
        let frac = self.0 % BW_ONE;
        if frac == 0 {
            return write!(f, "{int}");
        }
        let digits = format!("{frac:012}");
        write!(f, "{int}.{}", digits.trim_end_matches('0'))
    }
}

impl Add for Bandwidth {
    type Output = Bandwidth;
    fn add(self, rhs: Bandwidth) -> Bandwidth {
        Bandwidth(self.0.saturating_add(rhs.0))
    }
}

impl Sub for Bandwidth {
    type Output = Bandwidth;
    fn sub(self, rhs: Bandwidth) -> Bandwidth {
        debug_assert!(self.0 >= rhs.0, "bandwidth underflow");
        Bandwidth(self.0.saturating_sub(rhs.0))
    }
}

impl Sum for Bandwidth {
    fn sum<I: Iterator<Item = Bandwidth>>(iter: I) -> Bandwidth {
        iter.fold(Bandwidth::ZERO, Add::add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_rounds_up() {
        assert_eq!(Bandwidth::of(1, 3).units(), 333_333_333_334);
        assert_eq!(
            Bandwidth::of(30, 100),
            Bandwidth::parse_decimal("0.3").unwrap()
        );
        assert_eq!(Bandwidth::of(5, 5), Bandwidth::ONE);
    }

    #[test]
    fn decimals_are_exact() {
        assert_eq!(
            Bandwidth::parse_decimal("0.95").unwrap().units(),
            950_000_000_000
        );
        assert_eq!(Bandwidth::from_f64(0.72), Bandwidth::parse_decimal("0.72"));
        assert_eq!(
            Bandwidth::parse_decimal("0.72").unwrap().to_string(),
            "0.72"
        );
        assert_eq!(Bandwidth::parse_decimal("1.0000000000001"), None);
        assert_eq!(Bandwidth::from_f64(f64::NAN), None);
        assert_eq!(Bandwidth::from_f64(-0.1), None);
    }

    #[test]
    fn formats_rounded() {
        let b = Bandwidth::of(2, 3);
        assert_eq!(b.format(2), "0.67");
        assert_eq!(b.format(4), "0.6667");
        assert_eq!(Bandwidth::ONE.format(2), "1.00");
    }

    #[test]
    fn budgets_from_bandwidth() {
        let b = Bandwidth::parse_decimal("0.25").unwrap();
        assert_eq!(b.budget_floor(10), 2);
        assert_eq!(b.budget_ceil(10), 3);
    }

    proptest::proptest! {
        #[test]
        fn of_is_never_below_the_ratio(q in 0u64..1u64 << 40, p in 1u64..1u64 << 40) {
            let b = Bandwidth::of(q, p);
            // b >= q/p  <=>  b * p >= q * ONE
            proptest::prop_assert!(u128::from(b.units()) * u128::from(p) >= u128::from(q) * u128::from(BW_ONE));
            proptest::prop_assert!(b.budget_ceil(p) >= q);
        }
    }
}
