//! Seed 001's Figure 11 on the real kernel (see `rtbox_harness::exsched`).
//!
//! `exsched_real run RTBOX WORKER OUTDIR FIRST COUNT MS [BUDGET_S]`: sets FIRST..FIRST+COUNT of every
//! point, each under every plug-in for MS milliseconds, appended to OUTDIR/real.csv (rows
//! already there are skipped, so a sweep runs in chunks). Takes the machine-wide real-runtime
//! lock for the chunk and starts no new run after BUDGET_S seconds (default 540).
//!
//! `exsched_real plot OUTDIR`: OUTDIR/fig11-real-m2.svg (real solid, simulated in the same box
//! dashed) and a markdown summary on stdout.
//!
//! `exsched_real heavy RTBOX WORKER RUNS MS WORK_US`: the seed's heavy case (three tasks of
//! 5.5 ms every 10 ms, each job burning WORK_US) in `RealBox::heavy`, under fp-pm and fp-ff,
//! RUNS times each, with the kernel's real-time limit lifted for each run (put back after it);
//! one markdown row per run, each miss told apart as inside a machine stall or not.
//!
//! `exsched_real one RTBOX WORKER LOAD SET PLUGIN MS RUNS [SENSOR [BUDGET_US:PERIOD_US]]`: one
//! set of the sweep under one plug-in, RUNS times (the daemon's sensor `perf` or `bpf`, else its
//! default; the box's interface, else Figure 11's), every miss with the canaries' lateness in
//! its window. `RTBOX_ONE_TASKS="C:T,..."` (us) runs that set instead of the drawn one;
//! `RTBOX_ONE_KEEP=1` keeps each run's directory with the daemon's log.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rtbox_experiment::plot::{paired_plot_svg, Series};
use rtbox_harness::exsched::{
    self, alpha, draw, run_real, simulated, RealBox, RealTask, BOX_BUDGET, BOX_PERIOD,
};
use rtbox_model::PluginKind;

const SEED: u64 = 2012;
const UMIN: f64 = 0.1;
const UMAX: f64 = 1.0;
/// Points x (W = x * m * alpha).
const LOADS: [f64; 7] = [0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];
const HEADER: &str = "load,set,plugin,tasks,jobs,real,misses,own,daemon_misses,background,canary_worst_us,sim_box_misses,sim_whole_misses";

fn main() {
    let a: Vec<String> = std::env::args().collect();
    match a.get(1).map(String::as_str) {
        Some("run") if a.len() >= 8 => run(&a),
        Some("plot") if a.len() >= 3 => plot(Path::new(&a[2])),
        Some("heavy") if a.len() >= 7 => heavy(&a),
        Some("one") if a.len() >= 9 => one(&a),
        _ => {
            eprintln!("usage: exsched_real run RTBOX WORKER OUTDIR FIRST COUNT MS [BUDGET_S] | plot OUTDIR | heavy RTBOX WORKER RUNS MS WORK_US | one RTBOX WORKER LOAD SET PLUGIN MS RUNS [SENSOR [BUDGET_US:PERIOD_US]]");
            std::process::exit(2);
        }
    }
}

fn run(a: &[String]) {
    if !root_or_skip() {
        return;
    }
    let (rtbox, worker, out) = (
        PathBuf::from(&a[2]),
        PathBuf::from(&a[3]),
        PathBuf::from(&a[4]),
    );
    let num = |i: usize, d: u64| a.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (first, count, ms, budget) = (num(5, 0), num(6, 1), num(7, 2000), num(8, 540));
    std::fs::create_dir_all(&out).expect("output directory");
    let csv = out.join("real.csv");
    let done: Vec<String> = std::fs::read_to_string(&csv)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split(',').take(3).collect::<Vec<_>>().join(","))
        .collect();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&csv)
        .expect("real.csv");
    if done.is_empty() {
        writeln!(file, "{HEADER}").unwrap();
    }
    let _turn = rtbox_linux::lock::realtime_turn().expect("machine-wide real-runtime lock");
    let t0 = Instant::now();
    eprintln!(
        "# box {} us / {} us on CPUs 0-1 (alpha {:.2}), U in [{UMIN}, {UMAX}], {ms} ms per run",
        BOX_BUDGET / 1000,
        BOX_PERIOD / 1000,
        alpha()
    );
    let dir = std::env::temp_dir().join(format!("rtbox-exsched-{}", std::process::id()));
    'sets: for set in first..first + count {
        for (p, &load) in LOADS.iter().enumerate() {
            let tasks = draw(SEED, p as u64, set, load, UMIN, UMAX);
            for kind in PluginKind::ALL {
                let key = format!("{load:.1},{set},{}", kind.name());
                if done.contains(&key) {
                    continue;
                }
                if t0.elapsed().as_secs() >= budget {
                    eprintln!("# time budget of {budget} s used; stopping at {key}");
                    break 'sets;
                }
                let (sb, sw) = simulated(kind, &tasks, ms * 1_000_000);
                let fmt = |m: Option<u64>| m.map_or("err".to_string(), |m| m.to_string());
                let real: Vec<RealTask> = tasks.iter().cloned().map(RealTask::whole).collect();
                let tools = (rtbox.as_path(), worker.as_path());
                let platform = RealBox::fig11();
                let row = match run_real(tools, &platform, kind, &real, ms * 1_000_000, &dir) {
                    Ok(o) => format!(
                        "{key},{},{},{},{},{},{},{},{},{},{}",
                        tasks.len(),
                        o.jobs,
                        o.verdict(),
                        o.misses,
                        o.own,
                        o.daemon_misses,
                        o.background,
                        o.canary_worst / 1000,
                        fmt(sb),
                        fmt(sw)
                    ),
                    Err(e) => {
                        eprintln!("# {key}: {e}");
                        format!(
                            "{key},{},0,error,0,0,0,0,0,{},{}",
                            tasks.len(),
                            fmt(sb),
                            fmt(sw)
                        )
                    }
                };
                eprintln!("{row}");
                writeln!(file, "{row}").unwrap();
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("# chunk took {:.0} s", t0.elapsed().as_secs_f64());
}

/// `kernel.sched_rt_runtime_us`, lifted to -1 (no global real-time limit) while this lives.
struct RtLimitLifted(String);

const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";

impl RtLimitLifted {
    fn lift() -> RtLimitLifted {
        let old = std::fs::read_to_string(RT_RUNTIME).expect(RT_RUNTIME);
        std::fs::write(RT_RUNTIME, "-1").expect("lift the kernel's real-time limit");
        RtLimitLifted(old.trim().to_string())
    }
}

impl Drop for RtLimitLifted {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(RT_RUNTIME, &self.0) {
            eprintln!(
                "exsched_real: could not put {RT_RUNTIME} back to {}: {e}",
                self.0
            );
        }
    }
}

fn heavy(a: &[String]) {
    if !root_or_skip() {
        return;
    }
    let (rtbox, worker) = (PathBuf::from(&a[2]), PathBuf::from(&a[3]));
    let num = |i: usize| -> u64 {
        a[i].parse().unwrap_or_else(|_| {
            eprintln!(
                "exsched_real heavy: argument {i} ({:?}) is not a whole number",
                a[i]
            );
            std::process::exit(2)
        })
    };
    let (runs, ms, work_us) = (num(4), num(5), num(6));
    let platform = RealBox::heavy();
    let tasks = exsched::heavy_tasks(work_us * 1000);
    if tasks.iter().any(|t| t.work == 0 || t.work > t.spec.wcet) {
        eprintln!("exsched_real heavy: WORK_US must be 1..=5500");
        std::process::exit(2);
    }
    let specs: Vec<_> = tasks.iter().map(|t| t.spec.clone()).collect();
    let _turn = rtbox_linux::lock::realtime_turn().expect("machine-wide real-runtime lock");
    let dir = std::env::temp_dir().join(format!("rtbox-exsched-heavy-{}", std::process::id()));
    println!(
        "Three tasks of 5.5 ms (work {work_us} us) every 10 ms from one release, box {} us / {} us \
         on CPUs 0-1, cap 1.0, kernel RT limit lifted, BPF sensor, {ms} ms per run\n",
        platform.budget / 1000,
        platform.period / 1000
    );
    println!("| run | plug-in | jobs | misses a b c | outside stalls | daemon misses | background | canary worst, us | simulated misses (WCET) |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut details = Vec::new();
    for run in 1..=runs {
        for kind in [PluginKind::FpPm, PluginKind::FpFf] {
            let sim = platform.simulated(kind, &specs, ms * 1_000_000);
            let tools = (rtbox.as_path(), worker.as_path());
            let lifted = RtLimitLifted::lift();
            let o = run_real(tools, &platform, kind, &tasks, ms * 1_000_000, &dir);
            drop(lifted);
            if let (PluginKind::FpPm, Ok(o)) = (kind, &o) {
                details.extend(misses_of(run, o));
            }
            match o {
                Ok(o) => println!(
                    "| {run} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    kind.name(),
                    o.jobs,
                    o.task_misses
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(" "),
                    o.own,
                    o.daemon_misses,
                    o.background,
                    o.canary_worst / 1000,
                    sim.map_or("refused".into(), |m| m.to_string())
                ),
                Err(e) => println!("| {run} | {} | error: {e} |", kind.name()),
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if !details.is_empty() {
        println!("\nMisses of fp-pm, each with the canaries' lateness inside its window:\n");
        print_misses(&details, &["a", "b", "c"]);
    }
}

/// One row per missed job: run, task, release after the run's first missed one, lateness,
/// the canaries' lateness inside its window per CPU.
fn print_misses(details: &[(u64, u64, exsched::Missed)], names: &[&str]) {
    println!("| run | task | release, ms after the run's first missed one | late, us | canary stalls in its window, us (CPU 0 1) |");
    println!("|---|---|---|---|---|");
    for (run, first, m) in details {
        println!(
            "| {run} | {} | {:.1} | {} | {} |",
            names.get(m.task).unwrap_or(&"?"),
            m.release.saturating_sub(*first) as f64 / 1e6,
            m.lateness / 1000,
            m.stalls
                .iter()
                .map(|s| (s / 1000).to_string())
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
}

/// `one RTBOX WORKER LOAD SET PLUGIN MS RUNS [SENSOR]`: one Figure 11 set (point LOAD as in the sweep,
/// e.g. 0.9) under one plug-in, RUNS times, with every miss against the canaries.
fn one(a: &[String]) {
    if !root_or_skip() {
        return;
    }
    let (rtbox, worker) = (PathBuf::from(&a[2]), PathBuf::from(&a[3]));
    let bad = |what: &str| -> ! {
        eprintln!("exsched_real one: {what}");
        std::process::exit(2)
    };
    let load: f64 = a[4].parse().unwrap_or_else(|_| bad("LOAD is not a number"));
    let Some(p) = LOADS.iter().position(|&l| (l - load).abs() < 1e-9) else {
        bad(&format!("LOAD must be one of {LOADS:?}"))
    };
    let set: u64 = a[5]
        .parse()
        .unwrap_or_else(|_| bad("SET is not a whole number"));
    let Some(kind) = PluginKind::ALL.into_iter().find(|k| k.name() == a[6]) else {
        bad(&format!("unknown plug-in {:?}", a[6]))
    };
    let ms: u64 = a[7]
        .parse()
        .unwrap_or_else(|_| bad("MS is not a whole number"));
    let runs: u64 = a[8]
        .parse()
        .unwrap_or_else(|_| bad("RUNS is not a whole number"));
    let platform = RealBox {
        sensor: match a.get(9).map(String::as_str) {
            None => None,
            Some("perf") => Some("perf"),
            Some("bpf") => Some("bpf"),
            Some(s) => bad(&format!("SENSOR {s:?}: perf or bpf")),
        },
        ..RealBox::fig11()
    };
    // An optional BUDGET_US:PERIOD_US replaces the box's interface (same supply, other
    // server periods).
    let platform = match a.get(10).map(|v| v.split_once(':')) {
        None => platform,
        Some(Some((q, p))) => match (q.parse::<u64>(), p.parse::<u64>()) {
            (Ok(q), Ok(p)) if q > 0 && q <= p => RealBox {
                budget: q * 1000,
                period: p * 1000,
                ..platform
            },
            _ => bad("BOX: want BUDGET_US:PERIOD_US, 0 < budget <= period"),
        },
        Some(None) => bad("BOX: want BUDGET_US:PERIOD_US"),
    };
    // RTBOX_ONE_TASKS="C:T,C:T,..." (us) replaces the drawn set: a smaller case to bisect with.
    let tasks = match std::env::var("RTBOX_ONE_TASKS") {
        Ok(list) => list
            .split(',')
            .enumerate()
            .map(|(i, ct)| {
                let (c, t) = ct
                    .split_once(':')
                    .and_then(|(c, t)| Some((c.parse::<u64>().ok()?, t.parse::<u64>().ok()?)))
                    .filter(|&(c, t)| c > 0 && c <= t)
                    .unwrap_or_else(|| bad(&format!("RTBOX_ONE_TASKS: {ct:?} is not C:T in us")));
                rtbox_model::TaskSpec {
                    box_name: Some(rtbox_experiment::exsched::BOX.into()),
                    ..rtbox_model::TaskSpec::periodic(format!("t{i}"), c * 1000, t * 1000)
                }
            })
            .collect(),
        Err(_) => draw(SEED, p as u64, set, load, UMIN, UMAX),
    };
    let sb = platform.simulated(kind, &tasks, ms * 1_000_000);
    let names: Vec<String> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{i} ({}/{} us)", t.wcet / 1000, t.period / 1000))
        .collect();
    println!(
        "set {set} at {load}, {}: {}; simulated misses in the box: {sb:?}\n",
        kind.name(),
        names.join(", ")
    );
    let real: Vec<RealTask> = tasks.iter().cloned().map(RealTask::whole).collect();
    let _turn = rtbox_linux::lock::realtime_turn().expect("machine-wide real-runtime lock");
    let dir = std::env::temp_dir().join(format!("rtbox-exsched-one-{}", std::process::id()));
    let mut details = Vec::new();
    for run in 1..=runs {
        let tools = (rtbox.as_path(), worker.as_path());
        let dir = dir.join(format!("run{run}"));
        match run_real(tools, &platform, kind, &real, ms * 1_000_000, &dir) {
            Ok(o) => {
                println!(
                    "run {run}: {} jobs, {} ({} outside stalls), daemon {}, canary worst {} us, worst responses {} ms, loop {} steps {:.1} ms",
                    o.jobs,
                    o.misses,
                    o.own,
                    o.daemon_misses,
                    o.canary_worst / 1000,
                    o.task_worst
                        .iter()
                        .map(|w| format!("{:.1}", *w as f64 / 1e6))
                        .collect::<Vec<_>>()
                        .join(" "),
                    o.loop_steps,
                    o.loop_cpu_ns as f64 / 1e6
                );
                details.extend(misses_of(run, &o));
            }
            Err(e) => println!("run {run}: error: {e}"),
        }
    }
    // RTBOX_ONE_KEEP=1 keeps each run's directory (daemon log, journal) for a look afterwards.
    if std::env::var_os("RTBOX_ONE_KEEP").is_some() {
        println!("daemon logs: {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    if !details.is_empty() {
        println!();
        print_misses(&details, &refs);
    }
}

/// Whether this runs as root; otherwise says why it skips.
fn root_or_skip() -> bool {
    let root = rtbox_linux::is_root();
    if !root {
        eprintln!("exsched_real: needs root (runs the daemon and real-time threads); skipped");
    }
    root
}

/// The misses of run `run` for [`print_misses`], each with the run's first missed release.
fn misses_of(run: u64, o: &exsched::RealOutcome) -> Vec<(u64, u64, exsched::Missed)> {
    let first = o.missed.iter().map(|m| m.release).min().unwrap_or(0);
    o.missed.iter().map(|m| (run, first, m.clone())).collect()
}

/// Per plug-in and load: (sets, real ok, real stall-only, sim-in-box ok, sim-whole ok).
type Tally = BTreeMap<(String, String), [u32; 5]>;

fn plot(out: &Path) {
    let text = std::fs::read_to_string(out.join("real.csv")).expect("real.csv");
    // Only sets run at every point under every plug-in (a chunk's time budget may stop
    // inside a set).
    let mut rows_of: BTreeMap<&str, usize> = BTreeMap::new();
    for l in text.lines().skip(1) {
        *rows_of
            .entry(l.split(',').nth(1).unwrap_or(""))
            .or_default() += 1;
    }
    let complete = LOADS.len() * PluginKind::ALL.len();
    let mut t: Tally = BTreeMap::new();
    for l in text.lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        if f.len() < 13 || f[5] == "error" || rows_of.get(f[1]) != Some(&complete) {
            continue;
        }
        let e = t.entry((f[2].to_string(), f[0].to_string())).or_default();
        let n = |i: usize| f[i].parse::<u64>().unwrap_or(u64::MAX);
        let v = exsched::verdict(n(8), n(7));
        e[0] += 1;
        e[1] += u32::from(v == "ok");
        e[2] += u32::from(v == "stall");
        e[3] += u32::from(f[11] == "0");
        e[4] += u32::from(f[12] == "0");
    }
    let names: Vec<&str> = PluginKind::ALL.iter().map(|k| k.name()).collect();
    let curve = |name: &str, col: usize, stall_ok: bool| -> Vec<(f64, f64)> {
        t.iter()
            .filter(|((p, _), _)| p == name)
            .map(|((_, load), e)| {
                let ok = e[col] + if stall_ok { e[2] } else { 0 };
                (load.parse().unwrap_or(0.0), f64::from(ok) / f64::from(e[0]))
            })
            .collect()
    };
    let real_names: Vec<String> = names.iter().map(|n| format!("{n} real")).collect();
    let sim_names: Vec<String> = names.iter().map(|n| format!("{n} sim")).collect();
    let real: Vec<Series> = names
        .iter()
        .zip(&real_names)
        .map(|(n, l)| Series {
            name: l,
            points: curve(n, 1, false),
        })
        .collect();
    let sim: Vec<Series> = names
        .iter()
        .zip(&sim_names)
        .map(|(n, l)| Series {
            name: l,
            points: curve(n, 3, false),
        })
        .collect();
    let sets = t.values().map(|e| e[0]).max().unwrap_or(0);
    let svg = paired_plot_svg(
        &format!(
            "2 CPUs, real kernel vs simulator, U in [10 %, 100 %], {sets} sets per point, box {:.2}",
            alpha()
        ),
        "total utilization W / (m alpha)",
        "fraction of sets meeting all deadlines",
        &real,
        &sim,
    );
    std::fs::write(out.join("fig11-real-m2.svg"), svg).expect("svg");
    println!("| W / (m alpha) | sets | {} |", names.join(" | "));
    println!("|---|---|{}", "---|".repeat(names.len()));
    let loads: Vec<String> = {
        let mut l: Vec<String> = t.keys().map(|k| k.1.clone()).collect();
        l.dedup();
        l.sort();
        l.dedup();
        l
    };
    for load in &loads {
        let n = t
            .get(&(names[0].to_string(), load.clone()))
            .map_or(0, |e| e[0]);
        let cells: Vec<String> = names
            .iter()
            .map(|p| {
                t.get(&(p.to_string(), load.clone()))
                    .map_or("-".into(), |e| {
                        format!("{} ({}) / {} / {}", e[1], e[2], e[3], e[4])
                    })
            })
            .collect();
        println!("| {load} | {n} | {} |", cells.join(" | "));
    }
    println!("\ncells: real ok (runs whose every miss fell in a machine stall, counted apart: in parentheses) / simulated in the same box ok / simulated on whole CPUs ok");
    let mean = |name: &str, col: usize| -> f64 {
        let (ok, n) = t
            .iter()
            .filter(|((p, _), _)| p == name)
            .fold((0, 0), |(o, n), (_, e)| (o + e[col], n + e[0]));
        f64::from(ok) / f64::from(n.max(1))
    };
    for (col, what) in [
        (1, "real"),
        (3, "simulated, same box"),
        (4, "simulated, whole CPUs"),
    ] {
        let mut order: Vec<(&str, f64)> = names.iter().map(|n| (*n, mean(n, col))).collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1));
        println!(
            "mean ratio, {what}, best first: {}",
            order
                .iter()
                .map(|(n, m)| format!("{n} {m:.3}"))
                .collect::<Vec<_>>()
                .join(" > ")
        );
    }
}
