//! rt-app's per-thread log (`rt-app-<thread>-<i>.log`): one line per activation with columns
//! `idx perf run period start end rel_st slack c_duration c_period wu_lat` (µs), and deadline
//! misses counted from it (linux-facts.md: a job missed when `slack < 0` for D = P, or
//! `slack < P - D` for a constrained deadline D).
//!
//! The columns are read by the names in the `#idx ...` header when there is one, so older
//! rt-app versions with fewer columns still parse; without a header the standard order is
//! assumed.

use rtbox_model::Nanos;

/// One logged activation (all times in µs, as rt-app writes them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogRow {
    pub idx: i64,
    pub perf: i64,
    pub run: i64,
    pub period: i64,
    pub start: i64,
    pub end: i64,
    pub rel_st: i64,
    pub slack: i64,
    pub c_duration: Option<i64>,
    pub c_period: Option<i64>,
    pub wu_lat: Option<i64>,
}

/// A log line that could not be read: 1-based line number and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogError {
    pub line: usize,
    pub reason: String,
}

impl std::fmt::Display for LogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for LogError {}

const STANDARD: &[&str] = &[
    "idx",
    "perf",
    "run",
    "period",
    "start",
    "end",
    "rel_st",
    "slack",
    "c_duration",
    "c_period",
    "wu_lat",
];
const REQUIRED: &[&str] = &[
    "idx", "perf", "run", "period", "start", "end", "rel_st", "slack",
];

/// Parses a whole log. Comment lines (`#`) other than the column header are skipped.
pub fn parse_log(text: &str) -> Result<Vec<LogRow>, LogError> {
    let mut columns: Vec<String> = STANDARD.iter().map(|s| s.to_string()).collect();
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix('#') {
            let names: Vec<String> = rest.split_whitespace().map(str::to_string).collect();
            if names.first().map(String::as_str) == Some("idx") {
                if let Some(missing) = REQUIRED.iter().find(|r| !names.iter().any(|n| n == *r)) {
                    return Err(LogError {
                        line: lineno,
                        reason: format!("header has no \"{missing}\" column"),
                    });
                }
                columns = names;
            }
            continue;
        }
        let fields: Vec<&str> = trimmed.split_whitespace().collect();
        if fields.len() != columns.len() {
            return Err(LogError {
                line: lineno,
                reason: format!(
                    "{} fields, the header names {}",
                    fields.len(),
                    columns.len()
                ),
            });
        }
        let mut row = LogRow::default();
        for (name, text) in columns.iter().zip(&fields) {
            let v: i64 = text.parse().map_err(|_| LogError {
                line: lineno,
                reason: format!("column {name}: \"{text}\" is not an integer"),
            })?;
            match name.as_str() {
                "idx" => row.idx = v,
                "perf" => row.perf = v,
                "run" => row.run = v,
                "period" => row.period = v,
                "start" => row.start = v,
                "end" => row.end = v,
                "rel_st" => row.rel_st = v,
                "slack" => row.slack = v,
                "c_duration" => row.c_duration = Some(v),
                "c_period" => row.c_period = Some(v),
                "wu_lat" => row.wu_lat = Some(v),
                _ => {} // columns of newer versions we do not use
            }
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Deadline misses of one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MissSummary {
    pub jobs: u64,
    pub misses: u64,
    /// Largest amount by which a job finished after its deadline, in ns (0 if none).
    pub max_lateness: Nanos,
}

/// Rule: a job missed its deadline D when it finished later than D after its release. rt-app's
/// `slack` is the time from the job's end to the next release (release + P), so the job met D
/// exactly when slack >= P - D (slack >= 0 for implicit deadlines). `P` is the row's
/// configured period `c_period` when logged, else `period`.
pub fn job_missed(row: &LogRow, period: Nanos, deadline: Nanos) -> Option<Nanos> {
    let p = row
        .c_period
        .filter(|&c| c > 0)
        .map_or(period as i128, |c| c as i128 * 1000);
    let need = p - deadline as i128;
    let slack = row.slack as i128 * 1000;
    (slack < need).then(|| (need - slack) as Nanos)
}

/// Counts misses over a log for a thread with period `period` and deadline `deadline` (ns).
pub fn count_misses(rows: &[LogRow], period: Nanos, deadline: Nanos) -> MissSummary {
    let mut s = MissSummary::default();
    for row in rows {
        s.jobs += 1;
        if let Some(late) = job_missed(row, period, deadline) {
            s.misses += 1;
            s.max_lateness = s.max_lateness.max(late);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "# Policy : SCHED_FIFO priority : 50
#idx     perf      run   period           start             end          rel_st      slack c_duration   c_period     wu_lat
   0    92164    19935    98965    504549567051    504549666016            2443      78701      20000     100000        266
   0    92164    19408    99952    504549666063    504549766015          101455       -217      20000     100000        265
   0    92164    19428    99952    504549766062    504549866014          201454      15000      20000     100000        264
";

    #[test]
    fn parses_and_counts_misses() {
        let rows = parse_log(LOG).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[1].slack, -217);
        assert_eq!(rows[0].c_period, Some(100_000));
        assert_eq!(rows[2].wu_lat, Some(264));
        // Implicit deadline: only the negative slack misses, 217 us late.
        let s = count_misses(&rows, 100_000_000, 100_000_000);
        assert_eq!((s.jobs, s.misses, s.max_lateness), (3, 1, 217_000));
        // D = 80 ms: slack must be >= 20 ms; 15 ms is 5 ms late, 78.7 ms fine.
        let s = count_misses(&rows, 100_000_000, 80_000_000);
        assert_eq!((s.misses, s.max_lateness), (2, 20_217_000));
    }

    #[test]
    fn older_headers_with_fewer_columns_parse() {
        let log = "#idx perf run period start end rel_st slack\n 0 1 2 3 4 5 6 -1\n";
        let rows = parse_log(log).unwrap();
        assert_eq!(rows[0].slack, -1);
        assert_eq!(rows[0].c_period, None);
        assert_eq!(count_misses(&rows, 1000, 1000).misses, 1);
    }

    #[test]
    fn bad_lines_are_located() {
        let e = parse_log("#idx perf run period start end rel_st slack\n1 2 3\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse_log("0 1 2 3 4 5 6 x 8 9 10\n").unwrap_err();
        assert!(e.reason.contains("slack"), "{e}");
        let e = parse_log("#idx perf run\n").unwrap_err();
        assert!(e.reason.contains("period"));
    }
}
