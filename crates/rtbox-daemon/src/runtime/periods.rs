//! Per-server figures across periods (overruns per finished period, from the core's events),
//! and the cumulative counters that metrics show, kept monotonic across box changes.

use std::collections::BTreeMap;

use rtbox_model::Nanos;

/// A server as the figures name it: its box and CPU (stable across box changes, unlike the
/// core's server ids).
pub type ServerKey = (String, u32);

/// Samples kept per list at most (a long run must not grow without bound).
const MAX_SAMPLES: usize = 100_000;

/// Per-server figures kept across periods.
#[derive(Debug, Clone, Default)]
pub struct ServerStats {
    /// Time and consumed counter at the last replenishment.
    last_replenish: Option<(Nanos, Nanos)>,
    /// Overrun of each finished period that throttled, in ns (capped list).
    pub overruns: Vec<u64>,
    /// Overrun already consumed when the loop detected the exhaustion, in ns (capped list):
    /// the part of `overruns` due to detection delay; the rest is the stop latency.
    pub detected: Vec<u64>,
    /// With `RuntimeOptions::audit`: the members charged to the server and their kernel CPU
    /// time at the last replenishment.
    last_kernel: Option<(Vec<i32>, u64)>,
    /// With `RuntimeOptions::audit`: the overrun of each throttled period by the kernel's
    /// own accounting (see `procfs::sum_exec_runtime`), ns.
    pub kernel_overruns: Vec<u64>,
    /// With `RuntimeOptions::audit`: periods whose charged overrun exceeded 100 us, as
    /// (replenish time, charged overrun, kernel overrun).
    pub outliers: Vec<(Nanos, u64, u64)>,
}

/// A server's state at one core event, as the figures need it.
#[derive(Debug, Clone, Copy)]
pub struct ServerFigures {
    pub budget: Nanos,
    pub period: Nanos,
    /// Budget left (negative after an overrun).
    pub runtime: i64,
    /// The core's consumed counter.
    pub consumed: Nanos,
}

impl ServerStats {
    /// The server throttled. The core replenishes on throttle: the new budget is Q minus the
    /// overrun, so what was consumed beyond Q when the loop saw it is `budget - runtime`.
    pub fn throttled(&mut self, s: ServerFigures) {
        let over = i64::try_from(s.budget).unwrap_or(i64::MAX) - s.runtime;
        if self.detected.len() < MAX_SAMPLES {
            self.detected.push(over.max(0).unsigned_abs());
        }
    }

    /// A new server period without a throttle: the rest of the old budget was consumed below
    /// Q, so only the new period is measured from here.
    pub fn renewed(&mut self, now: Nanos, s: ServerFigures) {
        self.last_replenish = Some((now, s.consumed));
        self.last_kernel = None;
    }

    /// The server was replenished after a throttle. Consumption between two replenishments
    /// one period apart (within a quarter period) is one period's; beyond Q it is an overrun.
    /// `kernel`: with the audit, the members charged and their kernel CPU time now; the
    /// kernel's overrun counts only when the same members are at both ends.
    pub fn replenished(&mut self, now: Nanos, s: ServerFigures, kernel: Option<(Vec<i32>, u64)>) {
        if let Some((t, c)) = self.last_replenish {
            let used = s.consumed.saturating_sub(c);
            let gap = now - t;
            if gap.abs_diff(s.period) <= s.period / 4 && self.overruns.len() < MAX_SAMPLES {
                let over = used.saturating_sub(s.budget);
                self.overruns.push(over);
                if let (Some((t1, k)), Some((t0, k0))) = (&kernel, &self.last_kernel) {
                    let kover = k.saturating_sub(*k0).saturating_sub(s.budget);
                    if t1 == t0 {
                        self.kernel_overruns.push(kover);
                        if over > 100_000 {
                            self.outliers.push((now, over, kover));
                        }
                    }
                }
            }
        }
        self.last_replenish = Some((now, s.consumed));
        self.last_kernel = kernel;
    }

    /// The worst overrun of a finished period so far.
    pub fn max_overrun(&self) -> u64 {
        self.overruns.iter().max().copied().unwrap_or(0)
    }
}

/// Counters that only grow while the daemon runs (Prometheus `_total`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub consumed: Nanos,
    pub throttles: u64,
    /// Members that came onto the server from another vCPU of their box.
    pub migrations: u64,
}

impl Counters {
    /// A core server's live counters.
    pub fn of(info: &rtbox_core::ServerInfo<'_>) -> Self {
        Counters {
            consumed: info.consumed,
            throttles: info.throttle_count,
            migrations: info.migrations,
        }
    }
}

/// The figures of every server, by box and CPU.
#[derive(Debug, Default)]
pub struct Periods {
    pub stats: BTreeMap<ServerKey, ServerStats>,
    /// Per server: what its earlier core servers counted before box changes replaced them,
    /// added to the live core counters so the totals never go back.
    carried: BTreeMap<ServerKey, Counters>,
}

impl Periods {
    pub fn entry(&mut self, key: ServerKey) -> &mut ServerStats {
        self.stats.entry(key).or_default()
    }

    pub fn get(&self, key: &ServerKey) -> Option<&ServerStats> {
        self.stats.get(key)
    }

    /// The cumulative counters of a server whose live core counters are `live`.
    pub fn totals(&self, key: &ServerKey, live: Counters) -> Counters {
        let c = self.carried.get(key).copied().unwrap_or_default();
        Counters {
            consumed: c.consumed + live.consumed,
            throttles: c.throttles + live.throttles,
            migrations: c.migrations + live.migrations,
        }
    }

    /// A box change: `before` and `after` are the live core counters of every server before
    /// and after it. Each server's total stays where it was (a server the core kept counts
    /// on; one it rebuilt starts again from the carried total; a deleted box's total is kept
    /// should the box come back). The figures of servers that no longer exist are dropped;
    /// those of `changed` boxes, and of servers whose counters went back (rebuilt), keep their
    /// samples but measure the next period afresh (its budget or start differs).
    pub fn reconfigured(
        &mut self,
        before: &BTreeMap<ServerKey, Counters>,
        after: &BTreeMap<ServerKey, Counters>,
        changed: &[String],
    ) {
        for (key, live) in before {
            let total = self.totals(key, *live);
            let now = after.get(key).copied().unwrap_or_default();
            if now.consumed < live.consumed || changed.contains(&key.0) {
                if let Some(st) = self.stats.get_mut(key) {
                    st.last_replenish = None;
                    st.last_kernel = None;
                }
            }
            debug_assert!(
                now.consumed <= total.consumed
                    && now.throttles <= total.throttles
                    && now.migrations <= total.migrations,
                "a live counter above its total"
            );
            self.carried.insert(
                key.clone(),
                Counters {
                    consumed: total.consumed.saturating_sub(now.consumed),
                    throttles: total.throttles.saturating_sub(now.throttles),
                    migrations: total.migrations.saturating_sub(now.migrations),
                },
            );
        }
        self.stats.retain(|k, _| after.contains_key(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn fig(consumed: Nanos, runtime: i64) -> ServerFigures {
        ServerFigures {
            budget: 2 * MS,
            period: 10 * MS,
            runtime,
            consumed,
        }
    }

    #[test]
    fn a_period_between_two_replenishments_counts_its_overrun() {
        let mut st = ServerStats::default();
        st.replenished(10 * MS, fig(5 * MS, 0), None);
        assert!(st.overruns.is_empty(), "no earlier replenishment");
        // 2.3 ms consumed in one period of Q = 2 ms: 0.3 ms over.
        st.replenished(20 * MS, fig(7_300_000, 0), None);
        assert_eq!(st.overruns, vec![300_000]);
        // A gap of two periods is not one period's consumption.
        st.replenished(40 * MS, fig(12 * MS, 0), None);
        assert_eq!(st.overruns.len(), 1);
        assert_eq!(st.max_overrun(), 300_000);
    }

    #[test]
    fn a_renewal_restarts_the_measurement_and_a_throttle_records_the_detected_overrun() {
        let mut st = ServerStats::default();
        st.replenished(10 * MS, fig(MS, 0), None);
        st.renewed(15 * MS, fig(9 * MS, 0));
        st.replenished(25 * MS, fig(10 * MS, 0), None);
        assert_eq!(
            st.overruns,
            vec![0],
            "measured from the renewal, not the replenishment"
        );
        st.throttled(fig(10 * MS, 1_960_000));
        st.throttled(fig(10 * MS, 3_000_000));
        assert_eq!(st.detected, vec![40_000, 0]);
    }

    #[test]
    fn the_kernel_overrun_counts_only_with_the_same_members_at_both_ends() {
        let mut st = ServerStats::default();
        st.replenished(10 * MS, fig(0, 0), Some((vec![1], 100 * MS)));
        st.replenished(20 * MS, fig(2 * MS, 0), Some((vec![1], 102_200_000)));
        assert_eq!(st.kernel_overruns, vec![200_000]);
        st.replenished(30 * MS, fig(4 * MS, 0), Some((vec![1, 2], 105 * MS)));
        assert_eq!(st.kernel_overruns.len(), 1);
    }

    #[test]
    fn counters_never_go_back_across_reconfigurations() {
        let a: ServerKey = ("a".into(), 0);
        let b: ServerKey = ("b".into(), 0);
        // Migrations take the throttles' values here, so they are checked alongside them.
        let c = |consumed, throttles| Counters {
            consumed,
            throttles,
            migrations: throttles,
        };
        let mut p = Periods::default();
        p.entry(a.clone()).overruns.push(5);
        p.entry(a.clone()).replenished(0, fig(10, 0), None);
        p.entry(b.clone()).overruns.push(7);
        // "b" is changed: the core rebuilds its server (0), keeps "a"'s (counting on).
        let before = BTreeMap::from([(a.clone(), c(10, 3)), (b.clone(), c(20, 4))]);
        let after = BTreeMap::from([(a.clone(), c(10, 3)), (b.clone(), c(0, 0))]);
        p.reconfigured(&before, &after, &["b".to_string()]);
        assert_eq!(p.totals(&a, c(12, 3)), c(12, 3));
        assert_eq!(p.totals(&b, c(1, 0)), c(21, 4));
        assert!(p.get(&a).is_some(), "the unchanged box keeps its figures");
        assert_eq!(
            p.get(&b).map(|s| s.overruns.clone()),
            Some(vec![7]),
            "samples kept"
        );
        assert!(
            p.get(&b).unwrap().last_replenish.is_none(),
            "next period measured afresh"
        );
        assert_eq!(
            p.get(&a).unwrap().last_replenish,
            Some((0, 10)),
            "the unchanged server's period goes on"
        );
        // "b" deleted, then created again: still no step back.
        let before = BTreeMap::from([(a.clone(), c(12, 3)), (b.clone(), c(1, 0))]);
        let after = BTreeMap::from([(a.clone(), c(12, 3))]);
        p.reconfigured(&before, &after, &[]);
        assert!(p.get(&b).is_none(), "a deleted box's figures go");
        let before = after.clone();
        let after = BTreeMap::from([(a.clone(), c(12, 3)), (b.clone(), c(0, 0))]);
        p.reconfigured(&before, &after, &["b".to_string()]);
        assert_eq!(p.totals(&b, c(0, 0)), c(21, 4));
        // A core that rebuilt "a" too (every server from zero) changes nothing for metrics.
        let before = BTreeMap::from([(a.clone(), c(15, 5))]);
        let after = BTreeMap::from([(a.clone(), c(0, 0))]);
        p.reconfigured(&before, &after, &[]);
        assert_eq!(p.totals(&a, c(0, 0)), c(15, 5));
    }
}
