//! Issue 5: `rtbox check` validates and lists a config's members without touching processes.

use std::process::Command;

fn check(name: &str, text: &str) -> (i32, String, String) {
    let dir =
        std::env::temp_dir().join(format!("rtbox-check-members-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("c.toml");
    std::fs::write(&f, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rtbox"))
        .arg("check")
        .arg(&f)
        .output()
        .expect("run rtbox check");
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

const HEAD: &str =
    "[platform]\ncpus = 2\n\n[[box]]\nname = \"a\"\ninterface.per_cpu = \"10000 100000\"\n";

#[test]
fn members_are_listed_not_required_to_exist() {
    // pid 2147483647 cannot exist (above pid_max): check does not look at processes.
    let (code, out, err) = check(
        "ok",
        &format!(
            "{HEAD}members = {{ pids = [2147483647], commands = [[\"rt-app\", \"x.json\"]] }}\n"
        ),
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("  a: pids [2147483647], command rt-app x.json\n"),
        "{out}"
    );
    assert!(out.ends_with("admitted\n"), "{out}");
}

#[test]
fn bad_member_is_invalid_input_with_line() {
    let (code, _, err) = check(
        "bad",
        &format!("{HEAD}members = {{ cgroups = [\"foo\"] }}\n"),
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("line 7: box \"a\": members.cgroups[0] = \"foo\" is not an absolute path"),
        "{err}"
    );
}

/// Issue 15: `rtbox check` lists container members (their existence is the daemon's to check).
#[test]
fn check_lists_container_members() {
    let dir = std::env::temp_dir().join(format!("rtbox-check-containers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("c.toml");
    std::fs::write(
        &f,
        "[platform]\ncpus = 2\n\n[[box]]\nname = \"a\"\ncpus = \"1\"\ninterface.per_cpu = { budget = \"30ms\", period = \"100ms\" }\nmembers = { containers = [\"web\"] }\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rtbox"))
        .arg("check")
        .arg(&f)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("  a: container web"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
