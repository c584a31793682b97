//! Seed 001's Figure 11 in the simulator: the fraction of random periodic task sets that meet
//! every deadline under each plug-in (fp, fp-ff, fp-pm, g-fp, fp-us), for a range of per-task
//! utilizations (Umin, Umax) and a number of CPUs, as the total utilization W grows.
//!
//! Task sets are drawn as the seed describes (section VI.B): each task's utilization uniform in
//! [Umin, Umax], its period uniform in [1 ms, 100 ms], C = U T, implicit deadlines, DM
//! priorities (`rtbox_model::priority_levels`), tasks added until the total reaches W (the last
//! one trimmed so that every set carries exactly W). Each set runs in a box over all CPUs
//! whose servers are whole CPUs (budget = period, platform cap 1), so only the plug-in
//! decides; success means no job missed its deadline in the simulated time.
//! Sets are drawn from per-(panel, point, set) random streams, so results do not depend on the
//! number of threads.

use rtbox_model::{
    Bandwidth, BoxSpec, CpuSet, Interface, Nanos, Platform, PluginKind, System, TaskSpec,
};
use rtbox_sim::{simulate, SimOptions};
use rtbox_workload::Rng;

use crate::plot::{line_plot_svg, Series};
use crate::pool::run_indexed;

const MS: Nanos = 1_000_000;
/// The box every set runs in.
pub const BOX: &str = "exsched";

/// One panel of the figure.
#[derive(Debug, Clone)]
pub struct Panel {
    pub cpus: u32,
    /// Per-task utilization range, e.g. (0.1, 1.0).
    pub umin: f64,
    pub umax: f64,
    /// Total utilization W per point, normalized by the CPU count (W / m).
    pub loads: Vec<f64>,
}

/// The experiment's settings.
#[derive(Debug, Clone)]
pub struct Fig11Spec {
    pub panels: Vec<Panel>,
    pub plugins: Vec<PluginKind>,
    pub sets_per_point: usize,
    /// Simulated time per set (synchronous release at 0).
    pub duration: Nanos,
    pub seed: u64,
    /// Worker threads; 0 uses every core.
    pub threads: usize,
}

/// The outcome of one panel: per point, successes per plug-in.
#[derive(Debug, Clone, PartialEq)]
pub struct PanelResult {
    pub cpus: u32,
    pub umin: f64,
    pub umax: f64,
    pub sets: usize,
    pub plugins: Vec<PluginKind>,
    /// (normalized load W/m, successes per plug-in).
    pub points: Vec<(f64, Vec<usize>)>,
}

/// A task set as the seed draws it (see the module documentation).
pub fn seed_task_set(rng: &mut Rng, umin: f64, umax: f64, total: f64) -> Vec<TaskSpec> {
    let mut tasks = Vec::new();
    let mut sum = 0.0;
    while sum < total - 1e-9 {
        let mut u = umin + (umax - umin) * rng.uniform();
        if sum + u > total {
            u = total - sum;
        }
        sum += u;
        // Periods on a 1 us grid, uniform in [1 ms, 100 ms].
        let period = rng.range_inclusive(1_000, 100_000) * 1_000;
        let wcet = ((u * period as f64).round() as Nanos).clamp(1, period);
        let mut t = TaskSpec::periodic(format!("t{}", tasks.len()), wcet, period);
        t.box_name = Some(BOX.to_string());
        tasks.push(t);
    }
    tasks
}

/// The system of one set under one plug-in: m whole CPUs, one box over all of them.
pub fn system_for(cpus: u32, plugin: PluginKind, tasks: Vec<TaskSpec>) -> System {
    system_in(cpus, plugin, tasks, WHOLE_CPUS, Bandwidth::ONE).expect("whole CPUs admit the box")
}

/// Whole CPUs: the seed's platform (budget = period).
pub const WHOLE_CPUS: Interface = Interface::PerCpu {
    budget: 100 * MS,
    period: 100 * MS,
};

/// The system of one set under one plug-in in one box of interface `iface` on CPUs 0..m, on a
/// platform whose cap is `cap` (the real kernel's runs use a box smaller than whole CPUs:
/// `rtbox_harness::exsched`). Errors if the box is not admitted.
pub fn system_in(
    cpus: u32,
    plugin: PluginKind,
    tasks: Vec<TaskSpec>,
    iface: Interface,
    cap: Bandwidth,
) -> Result<System, String> {
    let platform = Platform::new(CpuSet::first(cpus), cap).map_err(|e| e.to_string())?;
    let mut b = BoxSpec::new(BOX, iface);
    b.plugin = Some(plugin);
    b.placement = plugin.placement();
    System::new(platform, vec![b], tasks).map_err(|e| e.to_string())
}

/// Whether the set meets every deadline under `plugin` in `duration` of simulated time.
pub fn meets_all_deadlines(
    cpus: u32,
    plugin: PluginKind,
    tasks: &[TaskSpec],
    duration: Nanos,
) -> bool {
    simulated_misses(&system_for(cpus, plugin, tasks.to_vec()), duration) == Some(0)
}

/// Deadline misses of `sys` in `duration` of simulated time from a synchronous release
/// (`None`: the simulation failed).
pub fn simulated_misses(sys: &System, duration: Nanos) -> Option<u64> {
    let opts = SimOptions {
        duration,
        supply_windows: false,
        ..SimOptions::default()
    };
    simulate(sys, &opts).ok().map(|r| r.total_misses())
}

/// Runs every panel; `progress(done, total)` after each set.
pub fn run(spec: &Fig11Spec, progress: &(dyn Fn(usize, usize) + Sync)) -> Vec<PanelResult> {
    let mut jobs = Vec::new();
    for (p, panel) in spec.panels.iter().enumerate() {
        for (i, _) in panel.loads.iter().enumerate() {
            for s in 0..spec.sets_per_point {
                jobs.push((p, i, s));
            }
        }
    }
    let outcomes = run_indexed(
        jobs.len(),
        spec.threads,
        |j| {
            let (p, i, s) = jobs[j];
            let panel = &spec.panels[p];
            let stream = ((p as u64) << 40) | ((i as u64) << 20) | s as u64;
            let mut rng = Rng::stream(spec.seed, stream);
            let total = panel.loads[i] * f64::from(panel.cpus);
            let tasks = seed_task_set(&mut rng, panel.umin, panel.umax, total);
            spec.plugins
                .iter()
                .map(|&k| meets_all_deadlines(panel.cpus, k, &tasks, spec.duration))
                .collect::<Vec<bool>>()
        },
        progress,
    );
    let mut out: Vec<PanelResult> = spec
        .panels
        .iter()
        .map(|panel| PanelResult {
            cpus: panel.cpus,
            umin: panel.umin,
            umax: panel.umax,
            sets: spec.sets_per_point,
            plugins: spec.plugins.clone(),
            points: panel
                .loads
                .iter()
                .map(|&w| (w, vec![0; spec.plugins.len()]))
                .collect(),
        })
        .collect();
    for (&(p, i, _), ok) in jobs.iter().zip(outcomes) {
        for (k, met) in ok.into_iter().enumerate() {
            out[p].points[i].1[k] += usize::from(met);
        }
    }
    out
}

impl PanelResult {
    /// A short name: `m4-u10-50`.
    pub fn name(&self) -> String {
        format!(
            "m{}-u{}-{}",
            self.cpus,
            (self.umin * 100.0).round(),
            (self.umax * 100.0).round()
        )
    }

    /// `load,<plug-in ratios...>`, one line per point.
    pub fn to_csv(&self) -> String {
        let names: Vec<&str> = self.plugins.iter().map(|k| k.name()).collect();
        let mut s = format!("load,{}\n", names.join(","));
        for (w, ok) in &self.points {
            s.push_str(&format!("{w:.2}"));
            for &n in ok {
                s.push_str(&format!(",{:.3}", n as f64 / self.sets as f64));
            }
            s.push('\n');
        }
        s
    }

    pub fn to_svg(&self) -> String {
        let series: Vec<Series> = self
            .plugins
            .iter()
            .enumerate()
            .map(|(k, kind)| Series {
                name: kind.name(),
                points: self
                    .points
                    .iter()
                    .map(|(w, ok)| (*w, ok[k] as f64 / self.sets as f64))
                    .collect(),
            })
            .collect();
        line_plot_svg(
            &format!(
                "{} CPUs, task utilization [{:.0} %, {:.0} %], {} sets per point",
                self.cpus,
                self.umin * 100.0,
                self.umax * 100.0,
                self.sets
            ),
            "total utilization W / m",
            "fraction of sets meeting all deadlines",
            &series,
        )
    }

    /// The mean success ratio of each plug-in over the panel's points (the area under its
    /// curve, for ordering the plug-ins).
    pub fn mean_ratio(&self) -> Vec<f64> {
        (0..self.plugins.len())
            .map(|k| {
                let sum: usize = self.points.iter().map(|(_, ok)| ok[k]).sum();
                sum as f64 / (self.sets * self.points.len()).max(1) as f64
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_carry_exactly_w_within_the_ranges() {
        let mut rng = Rng::seed(7);
        for _ in 0..50 {
            let tasks = seed_task_set(&mut rng, 0.5, 1.0, 3.2);
            let u: f64 = tasks.iter().map(|t| t.wcet as f64 / t.period as f64).sum();
            assert!((u - 3.2).abs() < 1e-3, "total {u}");
            for t in &tasks[..tasks.len() - 1] {
                let ui = t.wcet as f64 / t.period as f64;
                assert!((0.5 - 1e-6..=1.0 + 1e-6).contains(&ui), "{ui}");
                assert!((MS..=100 * MS).contains(&t.period));
                assert_eq!(t.deadline, t.period);
            }
        }
    }

    #[test]
    fn heavy_overload_case_orders_fp_pm_above_fp_ff() {
        // m + 1 tasks of 55 %: the seed's example of why FP-FF and FP fail and FP-PM does not.
        let tasks: Vec<TaskSpec> = (0..3)
            .map(|i| {
                let mut t = TaskSpec::periodic(format!("t{i}"), 5_500_000, 10 * MS);
                t.box_name = Some(BOX.into());
                t
            })
            .collect();
        assert!(meets_all_deadlines(2, PluginKind::FpPm, &tasks, 200 * MS));
        assert!(!meets_all_deadlines(2, PluginKind::FpFf, &tasks, 200 * MS));
        assert!(!meets_all_deadlines(2, PluginKind::Fp, &tasks, 200 * MS));
    }

    #[test]
    fn a_small_run_counts_every_set_once() {
        let spec = Fig11Spec {
            panels: vec![Panel {
                cpus: 2,
                umin: 0.1,
                umax: 0.5,
                loads: vec![0.3, 0.9],
            }],
            plugins: PluginKind::ALL.to_vec(),
            sets_per_point: 6,
            duration: 200 * MS,
            seed: 3,
            threads: 2,
        };
        let r = run(&spec, &|_, _| {});
        assert_eq!(r.len(), 1);
        // At 30 % load every plug-in schedules every light set; the counts never exceed the sets.
        assert!(
            r[0].points[0].1.iter().all(|&n| n == 6),
            "{:?}",
            r[0].points
        );
        assert!(r[0].points[1].1.iter().all(|&n| n <= 6));
        // Same seed, one thread: same result.
        let again = run(&Fig11Spec { threads: 1, ..spec }, &|_, _| {});
        assert_eq!(r, again);
        assert!(r[0]
            .to_csv()
            .starts_with("load,fp,fp-ff,fp-pm,g-fp,fp-us\n0.30,1.000"));
    }
}
