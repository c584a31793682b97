//! Issue 15: the daemon's systemd unit (`contrib/systemd/rtbox.service`) reloads with SIGHUP
//! and passes `systemd-analyze verify` with this build's binary in place of the installed one.

use std::process::Command;

const UNIT: &str = include_str!("../../../contrib/systemd/rtbox.service");

#[test]
fn the_unit_reloads_by_sighup_and_verifies() {
    assert!(UNIT.contains("\nExecReload=/bin/kill -HUP $MAINPID\n"));
    assert!(UNIT.contains("\nExecStart=/usr/local/bin/rtbox daemon "));
    let Ok(probe) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("the_unit_reloads_by_sighup_and_verifies: verify skipped: no systemd-analyze");
        return;
    };
    assert!(probe.status.success());
    let dir = std::env::temp_dir().join(format!("rtbox-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let unit = dir.join("rtbox.service");
    std::fs::write(
        &unit,
        UNIT.replace("/usr/local/bin/rtbox", env!("CARGO_BIN_EXE_rtbox")),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .expect("systemd-analyze verify");
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.trim().is_empty(), "{err}");
}
