//! From a box's interface to its hard CBS servers, one per CPU.

use std::fmt;

use crate::bandwidth::{Bandwidth, BW_ONE};
use crate::cpuset::CpuSet;
use crate::error::{ModelError, Subject};
use crate::system::{Interface, Platform, ServerSpec};
use crate::time::{format_duration, Nanos, NS_PER_US};

/// One hard CBS (budget Q per period P) of a box on one physical CPU: a vCPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Server {
    pub cpu: u32,
    pub budget: Nanos,
    pub period: Nanos,
}

impl Server {
    /// Q/P rounded up.
    pub fn bandwidth(&self) -> Bandwidth {
        Bandwidth::of(self.budget, self.period)
    }
}

/// BDM platform (alpha, Delta) to the per-CPU server (Q, P) of seed 002, eq. 5:
/// P = Delta / (2 (1 - alpha)), Q = alpha P.
///
/// P is rounded down and Q up, so the server's rate is at least alpha and its
/// worst-case service delay 2 (P - Q) is at most Delta: the rounding only helps.
pub fn bdm_server_params(alpha: Bandwidth, delta: Nanos) -> Option<(Nanos, Nanos)> {
    if alpha == Bandwidth::ZERO || alpha >= Bandwidth::ONE || delta == 0 {
        return None;
    }
    let one_minus = u128::from(BW_ONE - alpha.units());
    let period = u128::from(delta) * u128::from(BW_ONE) / (2 * one_minus);
    let period = u64::try_from(period).ok()?;
    let budget = alpha.budget_ceil(period).min(period);
    if period == 0 || budget == 0 {
        return None;
    }
    Some((budget, period))
}

/// MPR (Theta, Pi, m) to m servers of period Pi. Distribution rule used everywhere in rtbox:
/// Theta is split evenly, floor(Theta / m) each, and the remainder (Theta mod m, less than m ns)
/// adds 1 ns to the first servers, so the budgets sum to exactly Theta.
pub fn mpr_budgets(theta: Nanos, m: u32) -> Vec<Nanos> {
    let m64 = u64::from(m.max(1));
    let base = theta / m64;
    let extra = theta % m64;
    (0..m64).map(|i| base + u64::from(i < extra)).collect()
}

/// The servers a box's interface gives it on its CPU set; validates the interface's numbers.
pub fn box_servers(
    name: &str,
    interface: &Interface,
    cpus: &CpuSet,
    platform: &Platform,
) -> Result<Vec<Server>, ModelError> {
    let err =
        |field: &str, reason: String| ModelError::new(Subject::Box(name.into()), field, reason);
    let check_qp = |field: &str, budget: Nanos, period: Nanos| -> Result<(), ModelError> {
        if period == 0 {
            return Err(err(
                &format!("{field}.period"),
                "= 0ns must be positive".into(),
            ));
        }
        if budget == 0 {
            return Err(err(
                &format!("{field}.budget"),
                "= 0ns must be positive".into(),
            ));
        }
        if budget > period {
            return Err(err(
                &format!("{field}.budget"),
                format!(
                    "= {} is larger than the period {}",
                    format_duration(budget),
                    format_duration(period)
                ),
            ));
        }
        Ok(())
    };
    match interface {
        Interface::Servers(list) => {
            if list.is_empty() {
                return Err(err("interface.servers", "lists no server".into()));
            }
            let mut seen = CpuSet::new();
            let mut out = Vec::with_capacity(list.len());
            for (i, s) in list.iter().enumerate() {
                let field = format!("interface.servers[{i}]");
                if !platform.cpus.contains(s.cpu) {
                    return Err(err(
                        &format!("{field}.cpu"),
                        format!(
                            "= {} is not a CPU of the platform ({})",
                            s.cpu, platform.cpus
                        ),
                    ));
                }
                if !cpus.contains(s.cpu) {
                    return Err(err(
                        &format!("{field}.cpu"),
                        format!("= {} is not in the box's CPUs ({cpus})", s.cpu),
                    ));
                }
                if seen.contains(s.cpu) {
                    return Err(err(
                        &format!("{field}.cpu"),
                        format!("= {} has a server already", s.cpu),
                    ));
                }
                seen.insert(s.cpu);
                check_qp(&field, s.budget, s.period)?;
                out.push(Server {
                    cpu: s.cpu,
                    budget: s.budget,
                    period: s.period,
                });
            }
            Ok(out)
        }
        Interface::PerCpu { budget, period } => {
            check_qp("interface.per_cpu", *budget, *period)?;
            Ok(cpus
                .iter()
                .map(|cpu| Server {
                    cpu,
                    budget: *budget,
                    period: *period,
                })
                .collect())
        }
        Interface::Bdm { alpha, delta } => {
            if *alpha == Bandwidth::ZERO || *alpha >= Bandwidth::ONE {
                return Err(err(
                    "interface.bdm.alpha",
                    format!("= {alpha} is not in (0, 1)"),
                ));
            }
            if *delta == 0 {
                return Err(err("interface.bdm.delta", "= 0ns must be positive".into()));
            }
            let (budget, period) = bdm_server_params(*alpha, *delta).ok_or_else(|| {
                err(
                    "interface.bdm.delta",
                    format!(
                        "= {} is too small for alpha {alpha}: the server period would round to 0",
                        format_duration(*delta)
                    ),
                )
            })?;
            Ok(cpus
                .iter()
                .map(|cpu| Server {
                    cpu,
                    budget,
                    period,
                })
                .collect())
        }
        Interface::Mpr { theta, pi, m } => {
            if *pi == 0 {
                return Err(err("interface.mpr.pi", "= 0ns must be positive".into()));
            }
            if *theta == 0 {
                return Err(err("interface.mpr.theta", "= 0ns must be positive".into()));
            }
            if *m == 0 {
                return Err(err("interface.mpr.m", "= 0 must be at least 1".into()));
            }
            if *m as usize > cpus.len() {
                return Err(err(
                    "interface.mpr.m",
                    format!(
                        "= {m} is larger than the box's {} CPUs ({cpus})",
                        cpus.len()
                    ),
                ));
            }
            if u128::from(*theta) > u128::from(*m) * u128::from(*pi) {
                return Err(err(
                    "interface.mpr.theta",
                    format!(
                        "= {} is larger than m * pi = {m} * {}",
                        format_duration(*theta),
                        format_duration(*pi)
                    ),
                ));
            }
            let budgets = mpr_budgets(*theta, *m);
            Ok(cpus
                .iter()
                .zip(budgets)
                .map(|(cpu, budget)| Server {
                    cpu,
                    budget,
                    period: *pi,
                })
                .filter(|s| s.budget > 0)
                .collect())
        }
        Interface::Shared { weight } => {
            if *weight == 0 {
                return Err(err(
                    "interface.shared.weight",
                    "= 0 must be at least 1".into(),
                ));
            }
            Ok(Vec::new())
        }
    }
}

/// Why a seed-000 control string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlStringError(pub String);

impl fmt::Display for ControlStringError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ControlStringError {}

/// Parses the seed-000 control syntax `"0 100000/1000000 1 20000/500000"`: pairs of a CPU
/// number and `budget/period` in microseconds.
pub fn parse_control_string(text: &str) -> Result<Vec<ServerSpec>, ControlStringError> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.is_empty() {
        return Err(ControlStringError("is empty".into()));
    }
    if !words.len().is_multiple_of(2) {
        return Err(ControlStringError(format!(
            "\"{text}\" must be pairs of \"CPU budget/period\" (microseconds); found {} words",
            words.len()
        )));
    }
    let mut out = Vec::with_capacity(words.len() / 2);
    for pair in words.chunks(2) {
        let cpu = pair[0]
            .parse::<u32>()
            .map_err(|_| ControlStringError(format!("\"{}\" is not a CPU number", pair[0])))?;
        let (q, p) = pair[1].split_once('/').ok_or_else(|| {
            ControlStringError(format!(
                "\"{}\" after CPU {cpu} is not budget/period in microseconds",
                pair[1]
            ))
        })?;
        let us = |s: &str, what: &str| -> Result<Nanos, ControlStringError> {
            s.parse::<u64>()
                .ok()
                .and_then(|v| v.checked_mul(NS_PER_US))
                .ok_or_else(|| {
                    ControlStringError(format!(
                        "{what} \"{s}\" of CPU {cpu} is not a whole number of microseconds"
                    ))
                })
        };
        out.push(ServerSpec {
            cpu,
            budget: us(q, "budget")?,
            period: us(p, "period")?,
        });
    }
    Ok(out)
}

/// Prints servers in the seed-000 control syntax (microseconds, rounded down).
pub fn format_control_string(servers: &[ServerSpec]) -> String {
    servers
        .iter()
        .map(|s| {
            format!(
                "{} {}/{}",
                s.cpu,
                s.budget / NS_PER_US,
                s.period / NS_PER_US
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::format_ms;

    #[test]
    fn bdm_matches_seed_002_table_1() {
        // Y1: alpha 0.72, Delta 20 ms -> P = 35.714 ms, Q = 25.714 ms.
        let (q, p) =
            bdm_server_params(Bandwidth::parse_decimal("0.72").unwrap(), 20_000_000).unwrap();
        assert_eq!(format_ms(q), "25.714 ms");
        assert_eq!(format_ms(p), "35.714 ms");
        assert!(2 * (p - q) <= 20_000_000);
        // Y2: alpha 0.22 -> P = 12.821 ms, Q = 2.821 ms.
        let (q, p) =
            bdm_server_params(Bandwidth::parse_decimal("0.22").unwrap(), 20_000_000).unwrap();
        assert_eq!(format_ms(q), "2.821 ms");
        assert_eq!(format_ms(p), "12.821 ms");
    }

    #[test]
    fn mpr_split_sums_to_theta() {
        assert_eq!(mpr_budgets(30_000_000, 4), vec![7_500_000; 4]);
        assert_eq!(mpr_budgets(10, 4), vec![3, 3, 2, 2]);
    }

    #[test]
    fn control_string_round_trips() {
        let s = "0 100000/1000000 1 20000/500000";
        let servers = parse_control_string(s).unwrap();
        assert_eq!(
            servers[0],
            ServerSpec {
                cpu: 0,
                budget: 100_000_000,
                period: 1_000_000_000
            }
        );
        assert_eq!(
            servers[1],
            ServerSpec {
                cpu: 1,
                budget: 20_000_000,
                period: 500_000_000
            }
        );
        assert_eq!(format_control_string(&servers), s);
    }

    #[test]
    fn control_string_errors_name_the_word() {
        assert!(parse_control_string("0 100000/1000000 1")
            .unwrap_err()
            .0
            .contains("pairs"));
        assert!(parse_control_string("x 1/2")
            .unwrap_err()
            .0
            .contains("\"x\""));
        assert!(parse_control_string("0 12")
            .unwrap_err()
            .0
            .contains("budget/period"));
        assert!(parse_control_string("0 1/-2")
            .unwrap_err()
            .0
            .contains("period"));
        assert!(parse_control_string("").is_err());
    }

    proptest::proptest! {
        #[test]
        fn control_string_round_trips_any(pairs in proptest::collection::vec((0u32..64, 1u64..10_000_000, 1u64..10_000_000), 1..6)) {
            let specs: Vec<ServerSpec> = pairs.iter().map(|&(cpu, q, p)| ServerSpec { cpu, budget: q * 1000, period: p * 1000 }).collect();
            let text = format_control_string(&specs);
            proptest::prop_assert_eq!(parse_control_string(&text).unwrap(), specs);
        }

        #[test]
        fn bdm_server_keeps_rate_and_delay(a in 1u64..999_999, delta in 1_000u64..10_000_000_000) {
            let alpha = Bandwidth::from_units(a * 1_000_000);
            if let Some((q, p)) = bdm_server_params(alpha, delta) {
                proptest::prop_assert!(Bandwidth::of(q, p) >= alpha);
                proptest::prop_assert!(2 * (p - q) <= delta);
                proptest::prop_assert!(q <= p);
            }
        }
    }
}
