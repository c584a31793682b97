//! The standard benchmark scenario of issue 4: 8 CPUs, 8 BDM boxes with global placement,
//! 100 periodic tasks with log-uniform periods in [1 ms, 100 ms], total utilization about 75 %.

use rtbox_model::{Bandwidth, BoxSpec, CpuSet, Interface, Platform, System, TaskSpec};

use crate::workload::Rng;

/// UUniFast (Bini & Buttazzo 2005): `n` utilizations summing to `total`.
pub fn uunifast(rng: &mut Rng, n: usize, total: f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(n);
    let mut sum = total;
    for i in 1..n {
        let next = sum * rng.unit().powf(1.0 / (n - i) as f64);
        out.push(sum - next);
        sum = next;
    }
    out.push(sum);
    out
}

/// Builds the standard scenario for a seed. Box k has a BDM platform (alpha 0.235, Delta 2 ms)
/// on the four CPUs k..k+3 (mod 8), so every CPU carries four boxes (0.95 of the CPU); each box
/// holds 12 or 13 tasks with 0.75 CPU of utilization in total, priorities rate-monotonic.
pub fn standard_system(seed: u64) -> System {
    let mut rng = Rng::new(seed);
    let platform = Platform::with_cpus(8);
    let mut boxes = Vec::new();
    let mut tasks = Vec::new();
    for k in 0..8u32 {
        let name = format!("box{k}");
        let mut cpus = CpuSet::new();
        for j in 0..4 {
            cpus.insert((k + j) % 8);
        }
        let mut b = BoxSpec::new(
            name.clone(),
            Interface::Bdm {
                alpha: Bandwidth::parse_decimal("0.235").unwrap_or(Bandwidth::ZERO),
                delta: 2_000_000,
            },
        );
        b.cpus = Some(cpus);
        boxes.push(b);
        let n = if k < 4 { 13 } else { 12 };
        for (i, u) in uunifast(&mut rng, n, 0.75).into_iter().enumerate() {
            // Log-uniform period in [1 ms, 100 ms], granularity 10 us.
            let period = (1e6 * 100f64.powf(rng.unit())) as u64 / 10_000 * 10_000;
            let wcet = ((u * period as f64) as u64).max(1_000);
            let mut t = TaskSpec::periodic(format!("b{k}t{i}"), wcet.min(period), period);
            t.box_name = Some(name.clone());
            tasks.push(t);
        }
    }
    // Deadline-monotonic (here rate-monotonic: D = T) priorities by the model's rule.
    let levels = rtbox_model::priority_levels(&tasks);
    for (t, level) in tasks.iter_mut().zip(levels) {
        t.priority = Some(level);
    }
    System::new(platform, boxes, tasks).expect("the standard scenario is valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uunifast_sums_and_spreads() {
        let mut rng = Rng::new(3);
        let mut first = 0.0;
        for _ in 0..2000 {
            let u = uunifast(&mut rng, 4, 2.0);
            assert!((u.iter().sum::<f64>() - 2.0).abs() < 1e-9);
            assert!(u.iter().all(|&x| x >= 0.0));
            first += u[0];
        }
        // Each share has mean U / n.
        assert!((first / 2000.0 - 0.5).abs() < 0.05, "{}", first / 2000.0);
    }

    #[test]
    fn standard_scenario_shape() {
        let s = standard_system(1);
        assert_eq!(s.tasks.len(), 100);
        assert_eq!(s.boxes().len(), 8);
        let u: f64 = s
            .tasks
            .iter()
            .map(|t| t.wcet as f64 / t.period as f64)
            .sum();
        assert!((u - 6.0).abs() < 0.1, "total utilization {u}");
        assert!(s
            .tasks
            .iter()
            .all(|t| (1_000_000..=100_000_000).contains(&t.period)));
        assert!(rtbox_model::admit(&s).admitted());
    }
}
