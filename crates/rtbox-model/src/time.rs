//! Time in integer nanoseconds, and the unit syntax of configuration files.
//!
//! Every time inside rtbox is a [`Nanos`]: an instant on some clock or a length. Floating point
//! never enters: `1.5s` is parsed digit by digit into 1 500 000 000 ns.

use std::fmt;

/// An instant or a length of time, in nanoseconds.
pub type Nanos = u64;

pub const NS_PER_US: Nanos = 1_000;
pub const NS_PER_MS: Nanos = 1_000_000;
pub const NS_PER_S: Nanos = 1_000_000_000;

/// Why a duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    Empty,
    /// No unit after the number: `"20"` is ambiguous, so it is refused.
    MissingUnit(String),
    UnknownUnit(String),
    BadNumber(String),
    Negative,
    /// The value is not a whole number of nanoseconds (e.g. `0.5ns`).
    SubNanosecond,
    TooLarge,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Empty => write!(f, "empty duration"),
            DurationError::MissingUnit(s) => {
                write!(
                    f,
                    "\"{s}\" has no unit (write e.g. {s}ms; units: ns, us, ms, s)"
                )
            }
            DurationError::UnknownUnit(u) => {
                write!(f, "unknown unit \"{u}\" (units: ns, us, ms, s)")
            }
            DurationError::BadNumber(s) => write!(f, "\"{s}\" is not a number"),
            DurationError::Negative => write!(f, "durations cannot be negative"),
            DurationError::SubNanosecond => write!(f, "not a whole number of nanoseconds"),
            DurationError::TooLarge => write!(f, "too large (limit about 584 years)"),
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses `10ms`, `250us`, `1.5s`, `2000ns` (also `µs`) into nanoseconds.
pub fn parse_duration(text: &str) -> Result<Nanos, DurationError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    if s.starts_with('-') {
        return Err(DurationError::Negative);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(s.len());
    let (number, unit) = (s[..split].trim(), s[split..].trim());
    if number.is_empty() {
        return Err(DurationError::BadNumber(s.to_string()));
    }
    let scale = match unit {
        "" => return Err(DurationError::MissingUnit(number.to_string())),
        "ns" => 1,
        "us" | "µs" | "μs" => NS_PER_US,
        "ms" => NS_PER_MS,
        "s" => NS_PER_S,
        other => return Err(DurationError::UnknownUnit(other.to_string())),
    };
    parse_scaled_decimal(number, scale).map_err(|e| match e {
        DecimalError::Bad => DurationError::BadNumber(number.to_string()),
        DecimalError::Fraction => DurationError::SubNanosecond,
        DecimalError::Overflow => DurationError::TooLarge,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecimalError {
    Bad,
    Fraction,
    Overflow,
}

/// Parses a non-negative decimal `int[.frac]` and multiplies it by `scale` exactly.
pub(crate) fn parse_scaled_decimal(number: &str, scale: u64) -> Result<u64, DecimalError> {
    let number: String = number.chars().filter(|&c| c != '_').collect();
    let (int, frac) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number.as_str(), ""),
    };
    if (int.is_empty() && frac.is_empty())
        || !int.chars().all(|c| c.is_ascii_digit())
        || !frac.chars().all(|c| c.is_ascii_digit())
    {
        return Err(DecimalError::Bad);
    }
    let mut value: u128 = 0;
    for c in int.chars() {
        value = value * 10 + u128::from(c as u8 - b'0');
        if value > u128::from(u64::MAX) {
            return Err(DecimalError::Overflow);
        }
    }
    let mut value = value * u128::from(scale);
    let mut unit = u128::from(scale);
    for c in frac.chars() {
        let digit = u128::from(c as u8 - b'0');
        if unit % 10 != 0 {
            if digit != 0 {
                return Err(DecimalError::Fraction);
            }
            continue;
        }
        unit /= 10;
        value += digit * unit;
    }
    u64::try_from(value).map_err(|_| DecimalError::Overflow)
}

/// Formats a length with the largest unit that keeps it exact: `20ms`, `1500us`, `3ns`.
pub fn format_duration(ns: Nanos) -> String {
    for (unit, scale) in [("s", NS_PER_S), ("ms", NS_PER_MS), ("us", NS_PER_US)] {
        if ns != 0 && ns.is_multiple_of(scale) {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// Formats a length in milliseconds rounded to the microsecond, e.g. `25.714 ms`.
pub fn format_ms(ns: Nanos) -> String {
    let us = (ns + NS_PER_US / 2) / NS_PER_US;
    format!("{}.{:03} ms", us / 1000, us % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("10ms"), Ok(10 * NS_PER_MS));
        assert_eq!(parse_duration("250us"), Ok(250 * NS_PER_US));
        assert_eq!(parse_duration("1.5s"), Ok(1_500 * NS_PER_MS));
        assert_eq!(parse_duration("2000ns"), Ok(2000));
        assert_eq!(parse_duration(" 7 ms "), Ok(7 * NS_PER_MS));
        assert_eq!(parse_duration("0.000000001s"), Ok(1));
        assert_eq!(parse_duration("1_000us"), Ok(NS_PER_MS));
    }

    #[test]
    fn refuses_typos() {
        assert_eq!(
            parse_duration("20"),
            Err(DurationError::MissingUnit("20".into()))
        );
        assert_eq!(
            parse_duration("20mss"),
            Err(DurationError::UnknownUnit("mss".into()))
        );
        assert_eq!(parse_duration("-5ms"), Err(DurationError::Negative));
        assert_eq!(parse_duration("0.5ns"), Err(DurationError::SubNanosecond));
        assert!(matches!(
            parse_duration("1.2.3ms"),
            Err(DurationError::BadNumber(_))
        ));
        assert!(matches!(
            parse_duration("ms"),
            Err(DurationError::BadNumber(_))
        ));
        assert_eq!(
            parse_duration("99999999999999999999s"),
            Err(DurationError::TooLarge)
        );
    }

    #[test]
    fn formats_exactly() {
        assert_eq!(format_duration(20 * NS_PER_MS), "20ms");
        assert_eq!(format_duration(1_500 * NS_PER_US), "1500us");
        assert_eq!(format_duration(3), "3ns");
        assert_eq!(format_duration(0), "0ns");
        assert_eq!(format_ms(25_714_286), "25.714 ms");
    }

    proptest::proptest! {
        #[test]
        fn format_then_parse_round_trips(ns in 0u64..u64::MAX / 2) {
            proptest::prop_assert_eq!(parse_duration(&format_duration(ns)), Ok(ns));
        }
    }
}
