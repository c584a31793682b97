//! Criterion benchmarks of every test on task sets of 10, 50 and 200 tasks, BDM synthesis of a
//! 100-task box, and the throughput of G-FP-on-BDM on random 20-task sets.
//! Figures are recorded in docs/benchmarks-analysis.md.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rtbox_analysis::global::{
    bc_rta, bcl, gfb, global_edf, global_fp, theorem1, theorem1_schedulable,
};
use rtbox_analysis::partition::{partition, Heuristic, LocalPolicy};
use rtbox_analysis::supply::{Bdm, Mpr, Prm};
use rtbox_analysis::synth::{min_bdm_alpha, min_mpr, min_server_budget};
use rtbox_analysis::task::assign_deadline_monotonic;
use rtbox_analysis::uni::{edf, fp};
use rtbox_analysis::Task;
use rtbox_model::{Bandwidth, Placement, Policy};

const MS: u64 = 1_000_000;

/// xorshift64*: a small deterministic generator for benchmark inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// n tasks with total utilization `u` (UUniFast), periods log-uniform in [10 ms, 1 s] rounded
/// to 1 ms, implicit deadlines, deadline-monotonic priorities.
fn task_set(rng: &mut Rng, n: usize, u: f64) -> Vec<Task> {
    let mut left = u;
    let mut utils = Vec::with_capacity(n);
    for i in 1..n {
        let next = left * rng.unit().powf(1.0 / (n - i) as f64);
        utils.push(left - next);
        left = next;
    }
    utils.push(left);
    let mut ts: Vec<Task> = utils
        .iter()
        .map(|&ui| {
            let period =
                ((10.0f64.ln() + rng.unit() * (100.0f64).ln()).exp().round() as u64).max(10) * MS;
            let wcet = ((ui.min(0.95) * period as f64) as u64).max(1000);
            Task::new(wcet, period)
        })
        .collect();
    assign_deadline_monotonic(&mut ts);
    ts
}

fn quick() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
}

fn bench_tests(c: &mut Criterion) {
    let mut rng = Rng(0x5eed_0003);
    let prm = Prm::new(10 * MS, 9 * MS);
    let bdm = Bdm {
        alpha: Bandwidth::parse_decimal("0.9").unwrap(),
        delta: 10 * MS,
        m: 4,
    };
    let mpr = Mpr {
        period: 10 * MS,
        budget: 36 * MS,
        m: 4,
    };
    let mut g = c.benchmark_group("tests");
    for n in [10usize, 50, 200] {
        let uni = task_set(&mut rng, n, 0.6);
        let multi = task_set(&mut rng, n, 1.6);
        g.bench_with_input(BenchmarkId::new("uni_edf_prm", n), &uni, |b, ts| {
            b.iter(|| edf(black_box(ts), &prm))
        });
        g.bench_with_input(BenchmarkId::new("uni_fp_rta_prm", n), &uni, |b, ts| {
            b.iter(|| fp(black_box(ts), &prm))
        });
        g.bench_with_input(BenchmarkId::new("gfp_theorem1_bdm", n), &multi, |b, ts| {
            b.iter(|| theorem1(black_box(ts), &bdm))
        });
        g.bench_with_input(BenchmarkId::new("gedf_mpr", n), &multi, |b, ts| {
            b.iter(|| global_edf(black_box(ts), &mpr))
        });
        g.bench_with_input(BenchmarkId::new("gfp_rta_mpr", n), &multi, |b, ts| {
            b.iter(|| global_fp(black_box(ts), &mpr))
        });
        g.bench_with_input(BenchmarkId::new("gfb_dedicated", n), &multi, |b, ts| {
            b.iter(|| gfb(black_box(ts), 4))
        });
        g.bench_with_input(BenchmarkId::new("bcl_dedicated", n), &multi, |b, ts| {
            b.iter(|| bcl(black_box(ts), 4))
        });
        g.bench_with_input(BenchmarkId::new("bc_rta_dedicated", n), &multi, |b, ts| {
            b.iter(|| bc_rta(black_box(ts), 4))
        });
        let vcpus = vec![Prm::new(10 * MS, 9 * MS); 4];
        let pins = vec![None; n];
        g.bench_with_input(BenchmarkId::new("partition_ff_fp", n), &multi, |b, ts| {
            b.iter(|| {
                partition(
                    black_box(ts),
                    &pins,
                    &vcpus,
                    LocalPolicy::Fp,
                    Heuristic::FirstFit,
                )
            })
        });
        g.bench_with_input(BenchmarkId::new("partition_ff_edf", n), &multi, |b, ts| {
            b.iter(|| {
                partition(
                    black_box(ts),
                    &pins,
                    &vcpus,
                    LocalPolicy::Edf,
                    Heuristic::FirstFit,
                )
            })
        });
    }
    g.finish();
}

fn bench_synthesis(c: &mut Criterion) {
    let mut rng = Rng(0x5eed_0100);
    let ts = task_set(&mut rng, 100, 1.2);
    let mut g = c.benchmark_group("synthesis");
    g.bench_function("bdm_alpha_100_tasks_m4", |b| {
        b.iter(|| {
            min_bdm_alpha(
                black_box(&ts),
                &[],
                4,
                5 * MS,
                Policy::Fifo,
                Placement::Global,
            )
        })
    });
    g.bench_function("mpr_theta_100_tasks_m4", |b| {
        b.iter(|| {
            min_mpr(
                black_box(&ts),
                &[],
                4,
                5 * MS,
                Policy::Edf,
                Placement::Global,
            )
        })
    });
    g.bench_function("server_budget_100_tasks_m4", |b| {
        b.iter(|| {
            min_server_budget(
                black_box(&ts),
                &[],
                4,
                5 * MS,
                Policy::Fifo,
                Placement::Global,
            )
        })
    });
    g.finish();
}

fn bench_throughput(c: &mut Criterion) {
    let mut rng = Rng(0x5eed_0020);
    let sets: Vec<Vec<Task>> = (0..1000)
        .map(|_| {
            let u = 0.5 + 1.5 * rng.unit();
            task_set(&mut rng, 20, u)
        })
        .collect();
    let bdm = Bdm {
        alpha: Bandwidth::parse_decimal("0.8").unwrap(),
        delta: 10 * MS,
        m: 4,
    };
    let mut g = c.benchmark_group("throughput");
    g.throughput(Throughput::Elements(sets.len() as u64));
    g.bench_function("gfp_theorem1_bdm_20_tasks", |b| {
        b.iter(|| {
            sets.iter()
                .filter(|ts| theorem1_schedulable(black_box(ts), &bdm))
                .count()
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = quick();
    targets = bench_tests, bench_synthesis, bench_throughput
}
criterion_main!(benches);
