//! The SCHED_FIFO priorities the runtime gives members (`rtbox daemon --priorities LOW-HIGH`,
//! the config's `[runtime] priorities`). Pure vocabulary and validation; the daemon chooses the
//! default from the host's threads (docs/runtime.md, "Priorities and unmanaged threads").

use std::fmt;

/// The highest priority a member may get: 97 is the backstop threads' and the watchdog's, 98
/// the enforcement loop's, and both must preempt every member.
pub const BAND_MAX: u32 = 96;

/// An inclusive range of SCHED_FIFO priorities for members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PrioRange {
    pub lo: u32,
    pub hi: u32,
}

/// Why a priority range is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BandError {
    /// Not `LOW-HIGH` with two integers.
    Syntax(String),
    /// An end outside 1..=[`BAND_MAX`].
    OutOfRange { value: u32 },
    /// LOW above HIGH.
    Reversed { lo: u32, hi: u32 },
}

impl fmt::Display for BandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BandError::Syntax(t) => write!(f, "\"{t}\" is not LOW-HIGH (two SCHED_FIFO priorities, e.g. 40-89)"),
            BandError::OutOfRange { value } => write!(
                f,
                "priority {value} is outside 1-{BAND_MAX} (97 is the backstop's and the watchdog's, 98 the enforcement loop's)"
            ),
            BandError::Reversed { lo, hi } => write!(f, "LOW {lo} is above HIGH {hi}"),
        }
    }
}

impl std::error::Error for BandError {}

impl PrioRange {
    /// 40..89: the band on kernels without threaded interrupts.
    pub const DEFAULT: PrioRange = PrioRange { lo: 40, hi: 89 };

    /// A validated range.
    pub fn new(lo: u32, hi: u32) -> Result<Self, BandError> {
        for value in [lo, hi] {
            if !(1..=BAND_MAX).contains(&value) {
                return Err(BandError::OutOfRange { value });
            }
        }
        if lo > hi {
            return Err(BandError::Reversed { lo, hi });
        }
        Ok(PrioRange { lo, hi })
    }

    /// Parses `LOW-HIGH`.
    pub fn parse(text: &str) -> Result<Self, BandError> {
        let syntax = || BandError::Syntax(text.to_string());
        let (lo, hi) = text.trim().split_once('-').ok_or_else(syntax)?;
        let lo = lo.trim().parse().map_err(|_| syntax())?;
        let hi = hi.trim().parse().map_err(|_| syntax())?;
        PrioRange::new(lo, hi)
    }

    /// How many priorities the band spans.
    pub fn width(&self) -> u32 {
        self.hi - self.lo + 1
    }
}

impl fmt::Display for PrioRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.lo, self.hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_parsed_and_refused_precisely() {
        assert_eq!(PrioRange::parse("10-49"), Ok(PrioRange { lo: 10, hi: 49 }));
        assert_eq!(PrioRange::parse(" 5 - 5 "), Ok(PrioRange { lo: 5, hi: 5 }));
        assert_eq!(
            PrioRange::parse("40").unwrap_err().to_string(),
            "\"40\" is not LOW-HIGH (two SCHED_FIFO priorities, e.g. 40-89)"
        );
        assert_eq!(
            PrioRange::parse("40-98").unwrap_err(),
            BandError::OutOfRange { value: 98 }
        );
        assert_eq!(
            PrioRange::parse("0-10").unwrap_err(),
            BandError::OutOfRange { value: 0 }
        );
        assert_eq!(
            PrioRange::parse("60-50").unwrap_err().to_string(),
            "LOW 60 is above HIGH 50"
        );
        assert_eq!(PrioRange::DEFAULT.width(), 50);
    }
}
