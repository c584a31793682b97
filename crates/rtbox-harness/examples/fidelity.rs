//! Fidelity of analysis-sized boxes on the real kernel (see `rtbox_harness::fidelity`):
//! `fidelity RTBOX_BIN FIRST COUNT SECS [MARGIN_PCT] [SEED] [WORK_PCT] [load|rt-app]` runs sets
//! FIRST..FIRST+COUNT for SECS seconds each and prints one table row per set, the simulator's
//! figures beside the real ones. The workload is `rtbox load` (jobs of exactly their WCET of
//! CPU time; the default) or rt-app (calibrated loops, WORK_PCT % of each WCET). Takes the
//! machine-wide real-runtime lock for the whole chunk. Needs root (and rt-app for rt-app);
//! experiments/fidelity.sh runs it in chunks beside unmanaged load.

use std::path::PathBuf;

use rtbox_harness::fidelity::{
    self, calibrate, draw, rt_app_present, run, simulate, size, Workload,
};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        eprintln!(
            "usage: fidelity RTBOX_BIN FIRST COUNT SECS [MARGIN_PCT] [SEED] [WORK_PCT] [load|rt-app]"
        );
        std::process::exit(2);
    }
    let rt_app = a.get(8).is_some_and(|w| w == "rt-app");
    if !rtbox_linux::is_root() || (rt_app && !rt_app_present()) {
        eprintln!("fidelity: needs root (and rt-app, Debian package rt-app, for rt-app); skipped");
        return;
    }
    let rtbox = PathBuf::from(&a[1]);
    let num = |i: usize, d: u64| a.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (first, count, secs) = (num(2, 0), num(3, 20), num(4, 4));
    let (margin, seed, work) = (num(5, fidelity::MARGIN_PCT), num(6, 2026), num(7, 100));
    // RTBOX_FIDELITY_KEEP=DIR: every set's canary records, and the job logs of sets with a
    // miss, are kept in DIR/set-INDEX/ (so that a miss can be checked).
    let keep = std::env::var_os("RTBOX_FIDELITY_KEEP").map(PathBuf::from);
    // RTBOX_FIDELITY_KIND=NAME (e.g. "global EDF"): only the sets of that kind run.
    let only = std::env::var("RTBOX_FIDELITY_KIND").ok();
    let _turn = rtbox_linux::lock::realtime_turn().expect("machine-wide real-runtime lock");
    let workload = if rt_app {
        let cal_dir = fidelity::scratch("cal", first);
        std::fs::create_dir_all(&cal_dir).unwrap();
        let Some(calibration) = calibrate(&cal_dir) else {
            eprintln!("fidelity: rt-app calibration failed");
            std::process::exit(1);
        };
        let _ = std::fs::remove_dir_all(&cal_dir);
        Workload::RtApp { calibration }
    } else {
        Workload::Load
    };
    let what = match workload {
        Workload::Load => "rtbox load (every job exactly its WCET of thread CPU time)".to_string(),
        Workload::RtApp { calibration } => {
            format!("rt-app, work {work} % of WCET, calibration {calibration} ns/loop")
        }
    };
    println!(
        "# seed {seed}, sets {first}..{}, {secs} s each, WCET margin {margin} %, workload {what}",
        first + count
    );
    for i in first..first + count {
        if only
            .as_deref()
            .is_some_and(|k| k != fidelity::Kind::of(i).name())
        {
            continue;
        }
        let set = match size(i, draw(seed, i), margin) {
            Ok(s) => fidelity::SizedSet {
                work_pct: work,
                ..s
            },
            Err(why) => {
                println!(
                    "| {i} | {} | not sized: {why} |",
                    fidelity::Kind::of(i).name()
                );
                continue;
            }
        };
        let dir = fidelity::scratch("run", i);
        let sim = {
            let _ = std::fs::create_dir_all(&dir);
            let f = dir.join("sim.toml");
            let _ = std::fs::write(&f, &set.config);
            simulate(&rtbox, &f, secs)
        };
        let (sim_jobs, sim_misses) = sim.unwrap_or((0, u64::MAX));
        match run(&rtbox, &set, secs, workload, &dir) {
            Ok(o) => {
                if let Some(k) = &keep {
                    keep_records(k, i, &dir, &o);
                }
                let own: Vec<String> = o
                    .tasks
                    .iter()
                    .flat_map(|t| {
                        t.own.iter().map(move |(at, late)| {
                            format!(
                                "{}@{:.0}ms+{:.1}ms",
                                t.name,
                                *at as f64 / 1e3,
                                *late as f64 / 1e6
                            )
                        })
                    })
                    .collect();
                println!(
                    "| {i} | {} | {} | {:.3} | {} | {} | {} | {} | {:.1} | {} | {:.1} | {:.2} ({:.2}) | {} | {} | {} |",
                    set.kind.name(),
                    set.tasks.len(),
                    set.utilization(),
                    set.interface,
                    o.jobs(),
                    o.misses(),
                    o.own_misses(),
                    o.canary_worst as f64 / 1e6,
                    o.stalls,
                    o.steal_ns as f64 / 1e6,
                    o.cpu_over_wcet,
                    o.job_cpu_max,
                    sim_jobs,
                    sim_misses,
                    own.join(" ")
                );
                if o.stop_hung.is_some() {
                    println!(
                        "| {i} | {} | the daemon's stop did not finish in 10 s (its threads on stderr) |",
                        set.kind.name()
                    );
                }
            }
            Err(e) => println!("| {i} | {} | run failed: {e} |", set.kind.name()),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Keeps set `i`'s canary records (`canary.txt`: CPU, due, late, ns) and, when it missed a
/// deadline, its job logs and misses (`misses.txt`: task, release, end, busy-period start, ns).
fn keep_records(keep: &std::path::Path, i: u64, dir: &std::path::Path, o: &fidelity::RunOutcome) {
    let to = keep.join(format!("set-{i}"));
    let _ = std::fs::create_dir_all(&to);
    let canary: String = o
        .canary
        .iter()
        .map(|l| format!("{} {} {}\n", l.cpu, l.due, l.late))
        .collect();
    let _ = std::fs::write(to.join("canary.txt"), canary);
    if o.misses() == 0 {
        return;
    }
    let misses: String = o
        .tasks
        .iter()
        .flat_map(|t| {
            t.missed
                .iter()
                .map(move |(r, e, b)| format!("{} {r} {e} {b}\n", t.name))
        })
        .collect();
    let _ = std::fs::write(to.join("misses.txt"), misses);
    if let Ok(rd) = std::fs::read_dir(dir.join("log")) {
        for f in rd.flatten() {
            let _ = std::fs::copy(f.path(), to.join(f.file_name()));
        }
    }
    let _ = std::fs::copy(dir.join("set.toml"), to.join("set.toml"));
    let _ = std::fs::copy(dir.join("daemon.log"), to.join("daemon.log"));
}
