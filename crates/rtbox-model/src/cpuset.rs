//! Sets of CPU numbers, written as Linux CPU lists: `0-3,6`.

use std::collections::BTreeSet;
use std::fmt;

/// The largest CPU number accepted; Linux's own limit is far below it.
pub const MAX_CPU: u32 = 8191;

#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct CpuSet(BTreeSet<u32>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuListError(pub String);

impl fmt::Display for CpuListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CpuListError {}

impl CpuSet {
    /// The empty set (`const`, so a `static` empty set can stand in for a missing one).
    pub const fn new() -> Self {
        CpuSet(BTreeSet::new())
    }

    /// CPUs `0..count`.
    pub fn first(count: u32) -> Self {
        CpuSet((0..count).collect())
    }

    /// Parses a CPU list such as `0-3,6`.
    pub fn parse(text: &str) -> Result<Self, CpuListError> {
        let mut set = BTreeSet::new();
        let text = text.trim();
        if text.is_empty() {
            return Err(CpuListError("empty CPU list".into()));
        }
        for part in text.split(',') {
            let part = part.trim();
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (parse_cpu(a)?, parse_cpu(b)?),
                None => {
                    let c = parse_cpu(part)?;
                    (c, c)
                }
            };
            if lo > hi {
                return Err(CpuListError(format!("range \"{part}\" is backwards")));
            }
            set.extend(lo..=hi);
        }
        Ok(CpuSet(set))
    }

    pub fn insert(&mut self, cpu: u32) {
        self.0.insert(cpu);
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.0.is_subset(&other.0)
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        CpuSet(iter.into_iter().collect())
    }
}

fn parse_cpu(s: &str) -> Result<u32, CpuListError> {
    let s = s.trim();
    match s.parse::<u32>() {
        Ok(c) if c <= MAX_CPU => Ok(c),
        Ok(c) => Err(CpuListError(format!(
            "CPU {c} is above the limit {MAX_CPU}"
        ))),
        Err(_) => Err(CpuListError(format!("\"{s}\" is not a CPU number"))),
    }
}

impl fmt::Display for CpuSet {
    /// The shortest CPU list: `0-3,6`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut iter = self.0.iter().copied().peekable();
        while let Some(lo) = iter.next() {
            let mut hi = lo;
            while iter.peek() == Some(&(hi + 1)) {
                hi = iter.next().unwrap_or(hi);
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists() {
        let s = CpuSet::parse("0-3,6").unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 6]);
        assert_eq!(s.to_string(), "0-3,6");
        assert_eq!(CpuSet::parse("1").unwrap().to_string(), "1");
        assert!(CpuSet::parse("3-1").is_err());
        assert!(CpuSet::parse("a").is_err());
        assert!(CpuSet::parse("").is_err());
        assert!(CpuSet::parse("99999").is_err());
    }

    proptest::proptest! {
        #[test]
        fn display_round_trips(cpus in proptest::collection::btree_set(0u32..64, 1..20)) {
            let s: CpuSet = cpus.into_iter().collect();
            proptest::prop_assert_eq!(CpuSet::parse(&s.to_string()).unwrap(), s);
        }
    }
}
