//! Issue 4: `rtbox sweep` writes success ratios (CSV, SVG) and refuses bad input with exit 2.

use std::process::Command;

fn rtbox() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rtbox"))
}

#[test]
fn sweep_writes_csv_and_svg() {
    let dir = std::env::temp_dir().join(format!("rtbox-sweep-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (csv, svg) = (dir.join("r.csv"), dir.join("r.svg"));
    let out = rtbox()
        .args([
            "sweep",
            "--cpus",
            "2",
            "--utilizations",
            "0.2,1.9",
            "--sets",
            "10",
        ])
        .args([
            "--tasks",
            "4",
            "--evaluate",
            "analysis,sim",
            "--quiet",
            "--csv",
        ])
        .arg(&csv)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "utilization,sets,analysis,sim-rtbox");
    // 0.2 CPUs of a 2 x 0.95 box always passes; 1.9 (the whole reservation) never passes
    // the analysis.
    assert_eq!(lines[1], "0.2,10,1.0000,1.0000");
    assert!(lines[2].starts_with("1.9,10,0.0000,"), "{text}");
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("sim-rtbox"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sweep_refuses_bad_options_with_exit_2() {
    for (args, needle) in [
        (vec!["--utilizations", "1:0.5:0.1"], "--utilizations"),
        (vec!["--method", "magic"], "--method"),
        (vec!["--evaluate", "analysis,simulate"], "--evaluate"),
        (vec!["--periods", "10ms"], "--periods"),
        (vec!["--granularity", "0ns"], "granularity"),
        (vec!["--box", "x"], "--config"),
    ] {
        let out = rtbox()
            .arg("sweep")
            .args(&args)
            .arg("--quiet")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
