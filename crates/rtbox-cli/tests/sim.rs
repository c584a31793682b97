//! Issue 4: `rtbox sim` end to end: exit codes, JSON, and the output files.

use std::process::Command;

fn rtbox() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rtbox"))
}

fn example(name: &str) -> String {
    format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn sim_writes_every_output() {
    let dir = std::env::temp_dir().join(format!("rtbox-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (csv, trace, gantt) = (
        dir.join("jobs.csv"),
        dir.join("trace.json"),
        dir.join("g.svg"),
    );
    let out = rtbox()
        .args([
            "sim",
            &example("container-4vcpu.toml"),
            "--duration",
            "1s",
            "--json",
        ])
        .arg("--csv")
        .arg(&csv)
        .arg("--trace")
        .arg(&trace)
        .arg("--gantt")
        .arg(&gantt)
        .output()
        .unwrap();
    // The busy task's single job never finishes within 1 s, but its deadline is later: no miss.
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["model"], "rtbox");
    assert_eq!(report["tasks"][0]["executed"], 400_000_000u64);
    let csv_text = std::fs::read_to_string(&csv).unwrap();
    assert!(csv_text.starts_with("task,seq,"));
    let tr: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert!(tr["traceEvents"].as_array().unwrap().len() > 10);
    let svg = std::fs::read_to_string(&gantt).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("vm@3"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sim_exit_codes() {
    // RT throttling misses deadlines on the seed 002 setup: exit 1.
    let out = rtbox()
        .args([
            "sim",
            &example("bdm-validation.toml"),
            "--duration",
            "5s",
            "--model",
            "rt-throttling",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("deadline misses"));
    // Bad flags name the flag.
    let out = rtbox()
        .args([
            "sim",
            &example("bdm-validation.toml"),
            "--duration",
            "5",
            "--model",
            "rtbox",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--duration"));
    let out = rtbox()
        .args(["sim", &example("bdm-validation.toml"), "--model", "cfs"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"cfs\""));
    let out = rtbox().args(["sim", "/nonexistent.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `--model deadline` follows the kernel's tie rule: a running reservation keeps its CPU against
/// an equal deadline (`dl_entity_preempt`). T2 finishes at 6 ms, as in Linux and SimSo.
#[test]
fn sim_deadline_model_keeps_the_running_job_at_equal_deadlines() {
    let dir = std::env::temp_dir().join(format!("rtbox-sim-dl-tie-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (config, csv) = (dir.join("tie.toml"), dir.join("jobs.csv"));
    let mut text = String::from(
        "[platform]\ncpus = 2\n\n[[box]]\nname = \"b\"\ninterface.per_cpu = { budget = \"1ms\", period = \"10ms\" }\n",
    );
    for (name, period) in [("T0", "5ms"), ("T1", "5ms"), ("T2", "10ms")] {
        text.push_str(&format!(
            "\n[[task]]\nname = \"{name}\"\nbox = \"b\"\nwcet = \"3ms\"\nperiod = \"{period}\"\n"
        ));
    }
    std::fs::write(&config, text).unwrap();
    let out = rtbox()
        .arg("sim")
        .arg(&config)
        .args(["--duration", "10ms", "--model", "deadline", "--csv"])
        .arg(&csv)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let jobs = std::fs::read_to_string(&csv).unwrap();
    let t2 = jobs
        .lines()
        .find(|l| l.starts_with("T2,0,"))
        .unwrap_or_else(|| panic!("no first job of T2 in\n{jobs}"));
    let finish = t2.split(',').nth(6).unwrap();
    assert_eq!(finish, "6000000", "{jobs}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `rtbox sim` reports each pinned task on the CPU `rtbox analyze` placed it on (the
/// reproducer of the shared placement: `s2` must not land next to `big`).
#[test]
fn sim_reports_the_placement_the_analysis_chose() {
    let dir = std::env::temp_dir().join(format!("rtbox-sim-place-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("pinned.toml");
    std::fs::write(
        &file,
        r#"
[platform]
cpus = 2

[[box]]
name = "p"
cpus = "0-1"
placement = "pinned"
interface.per_cpu = { budget = "9ms", period = "10ms" }

[[task]]
name = "big"
box = "p"
wcet = "8ms"
period = "10ms"

[[task]]
name = "s1"
box = "p"
wcet = "1ms"
period = "10ms"

[[task]]
name = "s2"
box = "p"
wcet = "1ms"
period = "10ms"
"#,
    )
    .unwrap();
    let run = |args: &[&str]| -> serde_json::Value {
        let out = rtbox()
            .args(args)
            .arg(&file)
            .arg("--json")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let analysed = run(&["analyze"]);
    let simulated = run(&["sim", "--duration", "1s"]);
    let tasks = analysed["boxes"][0]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 3);
    for t in tasks {
        let name = t["task"].as_str().unwrap();
        let s = simulated["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap();
        assert!(t["cpu"].is_u64(), "{name}: analysed without a CPU");
        assert_eq!(s["cpu"], t["cpu"], "{name}");
        assert!(
            s["response"]["max"].as_u64().unwrap() <= t["response_bound_ns"].as_u64().unwrap(),
            "{name}: simulated response above its bound"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
