//! Issue 5: `rtbox daemon --config FILE` puts the members the file names into their boxes at
//! start (pids, commands), restores them on SIGTERM, and refuses to start, changing nothing,
//! when a named pid does not exist. Needs root; otherwise each test prints why it skips.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rtbox_linux::sched;

mod root;
use root::{hog, root_or_skip, state, Proc};

/// A temporary directory with a config, a socket and a state file.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str, config: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("rtbox-members-{tag}-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&d);
        std::fs::write(d.join("box.toml"), config).unwrap();
        Dir(d)
    }

    fn daemon(&self, stderr: Stdio) -> Child {
        Command::new(env!("CARGO_BIN_EXE_rtbox"))
            .arg("daemon")
            .arg("--config")
            .arg(self.0.join("box.toml"))
            .arg("--socket")
            .arg(self.0.join("sock"))
            .arg("--state")
            .arg(self.0.join("state.json"))
            .stderr(stderr)
            .spawn()
            .expect("start daemon")
    }

    fn wait_socket(&self) {
        let t0 = Instant::now();
        while !self.0.join("sock").exists() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(self.0.join("sock").exists(), "daemon socket did not appear");
    }

    /// Member tids of `box_name` from `rtbox status --json`.
    fn members(&self, box_name: &str) -> Vec<i64> {
        let out = Command::new(env!("CARGO_BIN_EXE_rtbox"))
            .args(["status", "--json", "--socket"])
            .arg(self.0.join("sock"))
            .output()
            .expect("rtbox status");
        assert!(out.status.success(), "status failed: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
        let b = v["boxes"]
            .as_array()
            .expect("boxes")
            .iter()
            .find(|b| b["name"] == box_name)
            .unwrap_or_else(|| panic!("no box {box_name} in {v}"));
        b["members"]
            .as_array()
            .expect("members")
            .iter()
            .filter_map(|m| m.as_i64())
            .collect()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn config(members: &str) -> String {
    format!(
        "[platform]\ncpus = 2\n\n[[box]]\nname = \"cfg\"\ncpus = \"0\"\ninterface.per_cpu = {{ budget = \"20ms\", period = \"100ms\" }}\nmembers = {members}\n"
    )
}

fn sigterm(mut d: Proc) -> std::process::ExitStatus {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(d.0.id() as i32, libc::SIGTERM) };
    let st = d.0.wait().expect("wait daemon");
    std::mem::forget(d);
    st
}

#[test]
fn config_pid_member_is_attached_and_restored_on_sigterm() {
    if !root_or_skip(
        "config_pid_member_is_attached_and_restored_on_sigterm",
        "the daemon changes real threads' policy and cgroups",
    ) {
        return;
    }
    let _g = root::realtime_turn();
    let h = hog();
    let pid = h.0.id() as i32;
    let orig = state(pid);
    let dir = Dir::new("pid", &config(&format!("{{ pids = [{pid}] }}")));
    let daemon = Proc(dir.daemon(Stdio::null()));
    dir.wait_socket();
    assert!(
        dir.members("cfg").contains(&i64::from(pid)),
        "hog {pid} is not a member of box cfg"
    );
    // Under the box's rules: pinned to CPU 0 of the box (the affinity may be all CPUs before).
    let t0 = Instant::now();
    while sched::get_affinity(pid).unwrap() != vec![0] && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        sched::get_affinity(pid).unwrap(),
        vec![0],
        "hog not moved to the box's CPU"
    );
    let st = sigterm(daemon);
    assert!(st.success(), "daemon exit {st:?}");
    assert_eq!(state(pid), orig, "SIGTERM did not restore the hog");
}

#[test]
fn config_command_runs_in_its_box_and_is_stopped_with_the_daemon() {
    if !root_or_skip(
        "config_command_runs_in_its_box_and_is_stopped_with_the_daemon",
        "the daemon changes real threads' policy and cgroups",
    ) {
        return;
    }
    let _g = root::realtime_turn();
    let dir = Dir::new("cmd", &config("{ commands = [[\"sleep\", \"60\"]] }"));
    let daemon = Proc(dir.daemon(Stdio::null()));
    dir.wait_socket();
    let members = dir.members("cfg");
    assert_eq!(
        members.len(),
        1,
        "expected the started command: {members:?}"
    );
    let pid = members[0] as i32;
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    assert_eq!(comm.trim(), "sleep", "member {pid} is not the command");
    let st = sigterm(daemon);
    assert!(st.success(), "daemon exit {st:?}");
    // The daemon terminated and reaped its command.
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "command {pid} still exists after the daemon stopped"
    );
}

#[test]
fn missing_pid_refuses_to_start_and_changes_nothing() {
    if !root_or_skip(
        "missing_pid_refuses_to_start_and_changes_nothing",
        "the daemon changes real threads' policy and cgroups",
    ) {
        return;
    }
    let _g = root::realtime_turn();
    let h = hog();
    let pid = h.0.id() as i32;
    let orig = state(pid);
    // A pid that exists is listed before one that does not: it must not stay attached.
    let gone = {
        let mut c = Command::new("true").spawn().unwrap();
        c.wait().unwrap();
        c.id() as i32
    };
    let dir = Dir::new(
        "missing",
        &config(&format!(
            "{{ pids = [{pid}, {gone}], commands = [[\"sleep\", \"60\"]] }}"
        )),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_rtbox"))
        .arg("daemon")
        .arg("--config")
        .arg(dir.0.join("box.toml"))
        .arg("--socket")
        .arg(dir.0.join("sock"))
        .arg("--state")
        .arg(dir.0.join("state.json"))
        .output()
        .expect("run daemon");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(
        err.contains(&format!(
            "config line 8: box \"cfg\": members.pids[1] = {gone}: no such process"
        )),
        "stderr: {err}"
    );
    assert!(!dir.0.join("sock").exists(), "socket created");
    assert_eq!(state(pid), orig, "a refused start changed the hog");
}

#[test]
fn config_comm_attaches_processes_by_name_and_refuses_unknown_names() {
    if !root_or_skip(
        "config_comm_attaches_processes_by_name_and_refuses_unknown_names",
        "the daemon changes real threads' policy and cgroups",
    ) {
        return;
    }
    let _g = root::realtime_turn();
    // A copy of sleep under a name no other process has (comm = the file name, <= 15 bytes).
    let name = format!("rtbx{}", std::process::id() % 100_000_000);
    let dir = Dir::new("comm", &config(&format!("{{ comms = [\"{name}\"] }}")));
    let prog = dir.0.join(&name);
    std::fs::copy("/bin/sleep", &prog).expect("copy /bin/sleep");
    let p = Proc(
        Command::new(&prog)
            .arg("60")
            .spawn()
            .expect("start named process"),
    );
    let pid = p.0.id() as i32;
    let orig = state(pid);
    let daemon = Proc(dir.daemon(Stdio::null()));
    dir.wait_socket();
    assert_eq!(dir.members("cfg"), vec![i64::from(pid)]);
    let st = sigterm(daemon);
    assert!(st.success(), "daemon exit {st:?}");
    assert_eq!(
        state(pid),
        orig,
        "SIGTERM did not restore the named process"
    );
    drop(p);
    // No process of that name any more: the daemon refuses to start.
    let out = Command::new(env!("CARGO_BIN_EXE_rtbox"))
        .arg("daemon")
        .arg("--config")
        .arg(dir.0.join("box.toml"))
        .arg("--socket")
        .arg(dir.0.join("sock"))
        .arg("--state")
        .arg(dir.0.join("state.json"))
        .output()
        .expect("run daemon");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(
        err.contains(&format!(
            "members.comms[0] = \"{name}\": no running process has this name"
        )),
        "stderr: {err}"
    );
}
