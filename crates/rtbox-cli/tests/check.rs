//! `rtbox check` on the example configurations (issue 2 acceptance).

use std::path::PathBuf;
use std::process::Command;

fn example(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples")).join(name)
}

/// Runs `rtbox check ARGS`, returns (exit code, stdout, stderr).
fn check(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rtbox"))
        .arg("check")
        .args(args)
        .output()
        .expect("rtbox runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bdm_validation_is_admitted_with_seed_002_servers() {
    let path = example("bdm-validation.toml");
    let path = path.to_str().unwrap();
    // Seed 002 reserves 0.94 of each CPU: the kernel-free schedule admits it, the daemon's
    // enforcement loop does not fit beside it with either sensor (issue 5, session 6 loop
    // cost; issue 14, the BPF sensor's measured step).
    let (code, out, err) = check(&[path, "--sensor", "perf"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("CPU 0: reservations 0.9400 + enforcement loop 0.0567"),
        "{err}"
    );
    let (code, out, err) = check(&[path, "--sensor", "bpf"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("CPU 0: reservations 0.9400 + enforcement loop")
            && err.contains("a poll every 100ms"),
        "the BPF loop has no poll but its safety scan: {err}"
    );
    let (code, out, _) = check(&[path, "--loop-step-us", "0"]);
    assert_eq!(code, 0, "{out}");
    for cpu in ["Y1@0", "Y1@1"] {
        let line = out
            .lines()
            .find(|l| l.contains(cpu))
            .expect("Y1 server row");
        assert!(
            line.contains("25.714 ms") && line.contains("35.714 ms"),
            "{line}"
        );
    }
    for cpu in ["Y2@0", "Y2@1"] {
        let line = out
            .lines()
            .find(|l| l.contains(cpu))
            .expect("Y2 server row");
        assert!(
            line.contains("2.821 ms") && line.contains("12.821 ms"),
            "{line}"
        );
    }
    let totals: Vec<&str> = out
        .lines()
        .filter(|l| l.trim_start().starts_with("total"))
        .collect();
    assert_eq!(totals.len(), 2);
    for t in totals {
        assert!(t.contains("0.9400") && t.contains("<= cap 0.95"), "{t}");
    }
}

#[test]
fn oversubscribed_is_refused_with_the_numbers() {
    let (code, _, err) = check(&[example("oversubscribed.toml").to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("CPU 1: boxes a (0.60) + b (0.44) = 1.04 > cap 0.95"),
        "{err}"
    );
}

#[test]
fn every_other_example_is_admitted() {
    for name in [
        "oxc-control.toml",
        "container-4vcpu.toml",
        "rclinux-shares.toml",
        "rclinux-mixed.toml",
        "jack-pipeline.toml",
    ] {
        let (code, out, err) = check(&[example(name).to_str().unwrap()]);
        assert_eq!(code, 0, "{name}: {out}{err}");
        assert!(out.ends_with("admitted\n"), "{name}: {out}");
    }
}

#[test]
fn oxc_child_is_carved_out_of_its_parent() {
    let (_, out, _) = check(&[example("oxc-control.toml").to_str().unwrap()]);
    let parent0 = out.lines().find(|l| l.contains("cg@0")).expect("cg@0 row");
    assert!(
        parent0.contains("0.0500") && parent0.contains("remainder"),
        "{parent0}"
    );
    let child1 = out
        .lines()
        .find(|l| l.contains("cg/cg_0@1"))
        .expect("child row");
    assert!(child1.contains("0.0200"), "{child1}");
}

#[test]
fn json_verdict_matches_the_table() {
    let (code, out, _) = check(&["--json", example("oversubscribed.toml").to_str().unwrap()]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(v["admitted"], false);
    assert_eq!(v["cpus"][1]["servers"].as_array().map(Vec::len), Some(2));
    assert!((v["cpus"][1]["total"].as_f64().unwrap() - 1.04).abs() < 1e-9);
    assert!(v["refusals"][0]
        .as_str()
        .unwrap()
        .starts_with("CPU 1: boxes a"));
}

#[test]
fn invalid_input_exits_2_with_one_precise_line() {
    let dir = std::env::temp_dir().join(format!("rtbox-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[platform]\ncpus = 2\n[[box]]\nname = \"Y1\"\ninterface.bdm = { alpha = 1.2, delta = \"20ms\" }\n",
    )
    .unwrap();
    let (code, out, err) = check(&[bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("line 5: box \"Y1\": interface.bdm.alpha = 1.2 is not in (0, 1)"),
        "{err}"
    );
    let (code, _, err) = check(&[dir.join("missing.toml").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot read"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn usage_errors_exit_2() {
    let (code, _, err) = check(&["--no-such-flag"]);
    assert_eq!(code, 2, "{err}");
}

/// Issue 5: `rtbox check` refuses what the daemon refuses: the enforcement loop's own time is
/// admitted with the reservations (4 boxes of 200 us / 1 ms fit the cap alone, not with the
/// loop); `--loop-step-us 0` checks the reservations alone.
#[test]
fn the_daemon_loop_is_admitted_like_the_daemon_does() {
    let dir = std::env::temp_dir().join(format!("rtbox-check-loop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("fast.toml");
    let mut text = String::from("[platform]\ncpus = 2\n");
    for i in 0..4 {
        text.push_str(&format!(
            "[[box]]\nname = \"O{i}\"\ncpus = \"0-1\"\ninterface.per_cpu = {{ budget = \"200us\", period = \"1ms\" }}\n"
        ));
    }
    std::fs::write(&cfg, text).unwrap();
    let path = cfg.to_str().unwrap();
    let (code, out, err) = check(&[path, "--sensor", "perf"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("CPU 0: reservations 0.8000 + enforcement loop 0.9000 (4 servers, 2 steps of 100us per period, a poll every 1ms) = 1.7000 > cap 0.9500"),
        "{err}"
    );
    assert!(
        out.contains("with loop") && out.contains("1.7000  > cap 0.95"),
        "{out}"
    );
    let (code, out, err) = check(&[path, "--sensor", "bogus"]);
    assert_eq!(code, 2, "a bad sensor is bad input: {out}{err}");
    assert!(err.contains("bpf, perf or auto"), "{err}");
    let (code, out, err) = check(&[path, "--loop-step-us", "0"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("with loop"), "{out}");
    let (code, out, _) = check(&[path, "--json", "--sensor", "perf"]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        (v["cpus"][0]["loop"].as_f64().unwrap() - 0.9).abs() < 1e-9,
        "{v}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `rtbox check` analyses a file for its own `[platform]` (possibly another machine);
/// `--host` also refuses CPUs this machine does not have, as the daemon does.
#[test]
fn check_host_refuses_cpus_this_machine_lacks() {
    let n = rtbox_linux::sched::online_cpus();
    let dir = std::env::temp_dir().join(format!("rtbox-check-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("big.toml");
    std::fs::write(
        &file,
        format!(
            "[platform]\ncpus = {}\n\n[[box]]\nname = \"far\"\ncpus = \"{n}\"\ninterface.per_cpu = {{ budget = \"1ms\", period = \"10ms\" }}\n",
            n + 1
        ),
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let (code, out, err) = check(&[path]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = check(&[path, "--host"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(&format!("box \"far\": CPU {n} is not online on this host")),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 19: the configurations the runtime cannot enforce are refused precisely: a budget
/// below one loop step plus the stop latency (the minimum in the message), a period above the
/// kernel's deadline maximum (refused, exit 1), and invalid servers (zero budget, budget above
/// the period: invalid input, exit 2, naming the field). The kernel-free schedule
/// (`--loop-step-us 0`, the analysis and the simulator) keeps any positive budget.
#[test]
fn configurations_the_runtime_cannot_enforce_are_refused_precisely() {
    let dir = std::env::temp_dir().join(format!("rtbox-check-hcbs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, budget: &str, period: &str| {
        let file = dir.join(name);
        std::fs::write(
            &file,
            format!("[platform]\ncpus = 2\n[[box]]\nname = \"a\"\ncpus = \"1\"\ninterface.per_cpu = {{ budget = \"{budget}\", period = \"{period}\" }}\n"),
        )
        .unwrap();
        file.to_str().unwrap().to_string()
    };
    let tiny = write("tiny.toml", "10us", "1ms");
    let (code, out, err) = check(&[&tiny, "--sensor", "perf"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("box \"a\" on CPU 1: budget 10us is below the 155us the runtime can enforce (one loop step of 100us + stop latency 55us)"),
        "{err}"
    );
    // The BPF loop's measured step is smaller.
    let (code, out, err) = check(&[&tiny, "--sensor", "bpf"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("budget 10us is below the 125us the runtime can enforce (one loop step of 70us + stop latency 55us)"),
        "{err}"
    );
    // A cheaper measured step lowers the minimum with it.
    let (code, _, err) = check(&[&tiny, "--loop-step-us", "20"]);
    assert_eq!(code, 1);
    assert!(err.contains("below the 75us"), "{err}");
    let (code, out, err) = check(&[&tiny, "--loop-step-us", "0"]);
    assert_eq!(code, 0, "{out}{err}");
    let analyze = Command::new(env!("CARGO_BIN_EXE_rtbox"))
        .args(["analyze", &tiny])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&analyze.stderr).contains("below the"),
        "the analysis keeps any positive budget"
    );
    let long = write("long.toml", "1s", "5s");
    let (code, out, err) = check(&[&long]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("period 5s is longer than the 4194304us the runtime accepts"),
        "{err}"
    );
    let zero = write("zero.toml", "0us", "1ms");
    let (code, _, err) = check(&[&zero]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("budget"), "{err}");
    let over = write("over.toml", "2ms", "1ms");
    let (code, _, err) = check(&[&over]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("larger than the period 1ms"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
