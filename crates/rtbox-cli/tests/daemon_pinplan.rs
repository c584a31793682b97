//! Members of a pinned box that are configured tasks run on the vCPU the analysis's partition
//! chose (`rtbox_analysis::pin_plan`), not on the fallback's least-loaded vCPU (issue 20).
//!
//! The box: pinned on CPUs 0-1, 9 ms / 10 ms per CPU; tasks a (0.5), b (0.45), c (0.1). First
//! fit by decreasing utilization puts a on CPU 0, b on CPU 1 (0.95 does not fit beside a), c on
//! CPU 0. The fallback, by join order (the main thread of `rtbox load`, then a, b, c), would
//! put a on CPU 1, b on CPU 0, c on CPU 1: every task elsewhere. `rtbox load` runs the three
//! inside the box; the test reads each thread's allowed CPUs by its name. Needs root;
//! otherwise it prints why it skips. Takes the machine-wide real-runtime lock.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[allow(dead_code)] // shared helpers; this test uses a few
mod root;
use root::{root_or_skip, TestDaemon};

const CONFIG: &str = r#"
[platform]
cpus = 2

[[box]]
name = "P"
cpus = "0-1"
policy = "fifo"
placement = "pinned"
interface.per_cpu = { budget = "9ms", period = "10ms" }

[[task]]
name = "a"
box = "P"
priority = 30
wcet = "10ms"
period = "20ms"

[[task]]
name = "b"
box = "P"
priority = 20
wcet = "13500us"
period = "30ms"

[[task]]
name = "c"
box = "P"
priority = 10
wcet = "4ms"
period = "40ms"
"#;

/// The CPUs thread `tid` of `pid` may run on (`Cpus_allowed_list`).
fn allowed(pid: u32, tid: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// (thread name, allowed CPUs) of every thread of `pid`.
fn threads(pid: u32) -> Vec<(String, String)> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    rd.flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .map(|tid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                .unwrap_or_default()
                .trim()
                .to_string();
            (comm, allowed(pid, &tid))
        })
        .collect()
}

#[test]
fn pinned_members_run_on_the_analysis_partition() {
    let name = "pinned_members_run_on_the_analysis_partition";
    if !root_or_skip(name, "runs the real daemon") {
        return;
    }
    let _turn = root::realtime_turn();
    let system = rtbox_config::parse_str(CONFIG).expect("config");
    let plan = rtbox_analysis::pin_plan(&system);
    let want: Vec<(&str, u32)> = ["a", "b", "c"]
        .iter()
        .map(|t| (*t, plan.cpu("P", t).expect("planned")))
        .collect();
    assert_eq!(want, vec![("a", 0), ("b", 1), ("c", 0)], "the partition");
    let d = TestDaemon::start("pinplan", Some(CONFIG), &[]);
    let cfg = d.dir.join("config.toml");
    let mut load = Command::new(env!("CARGO_BIN_EXE_rtbox"))
        .args(["exec", "P", "--socket"])
        .arg(&d.sock)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_rtbox"))
        .arg("load")
        .arg(&cfg)
        .args([
            "--box",
            "P",
            "--duration",
            "2s",
            "--delay",
            "200ms",
            "--logdir",
        ])
        .arg(&d.dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("rtbox exec");
    // `rtbox exec` execs the load in its own process: its threads are the load's.
    let pid = load.id();
    let t0 = Instant::now();
    let mut seen = Vec::new();
    while t0.elapsed() < Duration::from_millis(1500) {
        std::thread::sleep(Duration::from_millis(100));
        seen = threads(pid);
        let placed = want
            .iter()
            .all(|(t, cpu)| seen.iter().any(|(n, c)| n == t && *c == cpu.to_string()));
        if placed {
            break;
        }
    }
    let _ = load.wait();
    for (t, cpu) in &want {
        let got = seen.iter().find(|(n, _)| n == t);
        assert_eq!(
            got.map(|(_, c)| c.as_str()),
            Some(cpu.to_string().as_str()),
            "task {t}: planned CPU {cpu}; threads seen {seen:?}; daemon log:\n{}",
            d.log()
        );
    }
    eprintln!("{name}: threads and their CPUs {seen:?}");
}
