//! `rtbox load`: a configuration's tasks as periodic threads whose jobs burn exactly their WCET
//! of thread CPU time, one log per task; bad input is refused with the field named. Runs as
//! any user (the threads' SCHED_FIFO request fails quietly without the privilege); as root the
//! threads are real SCHED_FIFO threads, so the run takes the machine-wide real-runtime lock.

use std::process::Command;

const CONFIG: &str = r#"
[platform]
cpus = 2

[[box]]
name = "A"
cpus = "0-1"
interface.bdm = { alpha = 0.5, delta = "5ms" }

[[task]]
name = "fast"
box = "A"
wcet = "1ms"
period = "10ms"

[[task]]
name = "slow"
box = "A"
wcet = "2ms"
period = "25ms"
"#;

fn dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("rtbox-load-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("c.toml"), CONFIG).unwrap();
    d
}

fn load(d: &std::path::Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rtbox"))
        .arg("load")
        .arg(d.join("c.toml"))
        .args(args)
        .arg("--logdir")
        .arg(d)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_task_runs_its_jobs_of_exactly_its_wcet_and_logs_them() {
    let _turn = rtbox_linux::is_root().then(rtbox_harness::turn::realtime_turn);
    let d = dir("run");
    let (code, err) = load(
        &d,
        &["--box", "A", "--duration", "100ms", "--delay", "20ms"],
    );
    assert_eq!(code, 0, "{err}");
    for (task, wcet, jobs) in [("fast", 1_000_000u64, 10), ("slow", 2_000_000, 4)] {
        let text = std::fs::read_to_string(d.join(format!("{task}.log"))).unwrap();
        let rows = rtbox_task::load::parse_log(&text).unwrap();
        assert_eq!(rows.len(), jobs, "{task}: {text}");
        for r in &rows {
            assert!(r.cpu >= wcet, "{task}: job of {} ns CPU", r.cpu);
            assert!(r.start >= r.release && r.end > r.start);
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_input_is_refused_with_the_field_named() {
    let d = dir("bad");
    let (code, err) = load(&d, &["--duration", "soon"]);
    assert_eq!(code, 2);
    assert!(err.contains("--duration"), "{err}");
    let (code, err) = load(&d, &["--box", "B", "--duration", "1s"]);
    assert_eq!(code, 2);
    assert!(err.contains("--box = \"B\" is not a box"), "{err}");
    assert!(!d.join("fast.log").exists(), "nothing ran");
    let _ = std::fs::remove_dir_all(&d);
}
