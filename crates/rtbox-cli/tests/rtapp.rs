//! `rtbox rt-app` writes a configuration's tasks as rt-app JSON that reads back to the same
//! tasks (issue 4: the same workload in the simulator and for real).

use std::process::Command;

fn rtbox(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rtbox"))
        .args(args)
        .output()
        .expect("rtbox runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn example(name: &str) -> String {
    format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn box_tasks_round_trip_through_rt_app_json() {
    let (code, out, err) = rtbox(&[
        "rt-app",
        &example("bdm-validation.toml"),
        "--box",
        "Y1",
        "--duration",
        "2s",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let tasks = v["tasks"].as_object().expect("tasks object");
    assert_eq!(tasks.len(), 3);
    assert_eq!(tasks["tau2"]["run"], 140_000);
    assert_eq!(tasks["tau2"]["priority"], 12);
    assert_eq!(tasks["tau2"]["timer"]["mode"], "absolute");
    assert_eq!(v["global"]["duration"], 2);
    let parsed = rtbox_workload::rtapp::parse(&out).expect("reads back");
    assert_eq!(parsed.duration, Some(2_000_000_000));
    let system = rtbox_config::load_file(example("bdm-validation.toml")).unwrap();
    for t in system.tasks_of("Y1") {
        let p = parsed
            .tasks
            .iter()
            .find(|p| p.name == t.name)
            .expect("task kept");
        assert_eq!(
            (p.wcet, p.period, p.deadline, p.priority),
            (t.wcet, t.period, t.deadline, t.priority)
        );
    }
}

#[test]
fn bad_arguments_are_named() {
    let (code, _, err) = rtbox(&["rt-app", &example("bdm-validation.toml"), "--box", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("--box = \"nope\" is not a box"), "{err}");
    let (code, _, err) = rtbox(&["rt-app", &example("bdm-validation.toml"), "--policy", "rr"]);
    assert_eq!(code, 2);
    assert!(err.contains("--policy = \"rr\""), "{err}");
}
