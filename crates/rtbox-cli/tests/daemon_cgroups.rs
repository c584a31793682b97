//! Issue 15: membership keeps every cgroup. The real daemon against processes in a cgroup of
//! their own: while managed every v1 line of /proc/PID/cgroup is unchanged and the v2 line is
//! inside the process's own cgroup (its threaded stop group); `detach --cgroup` releases every
//! thread it attached; where the kernel refuses a threaded child the member is stopped by
//! SCHED_IDLE and moves nowhere; release, SIGTERM and kill -9 put every thread back and remove
//! the stop groups. Needs root and cgroup v2; otherwise each test prints why it skips.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rtbox_linux::cgroup;
use rtbox_linux::sched;
use rtbox_linux::stopgroup::keeps_cgroups;

mod root;
use root::{hog, root_or_skip, state, Proc, TestDaemon as Daemon};

/// A v2 cgroup of the test's own, removed at the end (its processes are killed first).
struct TestCgroup {
    rel: String,
    dir: PathBuf,
}

impl TestCgroup {
    fn new(v2: &Path, tag: &str) -> TestCgroup {
        let rel = format!("/rtbox-test-{tag}-{}", std::process::id());
        let dir = v2.join(rel.trim_start_matches('/'));
        std::fs::create_dir_all(&dir).expect("create test cgroup");
        TestCgroup { rel, dir }
    }

    fn enter(&self, sub: &str, pid: i32) {
        let d = self.dir.join(sub);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cgroup.procs"), pid.to_string()).expect("move into test cgroup");
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // Deepest first; a directory left behind by rtbox would make this fail loudly in the
        // tests' own assertions before.
        let mut dirs = vec![];
        let mut todo = vec![self.dir.clone()];
        while let Some(d) = todo.pop() {
            if let Ok(rd) = std::fs::read_dir(&d) {
                for e in rd.flatten() {
                    if e.path().is_dir() {
                        todo.push(e.path());
                    }
                }
            }
            dirs.push(d);
        }
        for d in dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

impl Daemon {
    /// The stop mechanism of each member of `box_name` (`rtbox status --json`).
    fn stops(&self, box_name: &str) -> Vec<serde_json::Value> {
        let v: serde_json::Value =
            serde_json::from_str(&self.ok(&["status", "--json"])).expect("status JSON");
        v["boxes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == box_name)
            .expect("box")["stops"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

/// Every thread's /proc/.../cgroup text, by tid.
fn cgroup_lines(pid: i32) -> Vec<(i32, String)> {
    rtbox_linux::procfs::threads_of(pid)
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            let text =
                std::fs::read_to_string(format!("/proc/{pid}/task/{t}/cgroup")).unwrap_or_default();
            (t, text)
        })
        .collect()
}

/// Asserts the rule for every thread of `pid` against `before`.
fn assert_rule(pid: i32, before: &[(i32, String)], when: &str) {
    for (t, now) in cgroup_lines(pid) {
        if let Some((_, b)) = before.iter().find(|(bt, _)| *bt == t) {
            if let Err(e) = keeps_cgroups(b, &now) {
                panic!("{when}: thread {t} of process {pid}: {e}");
            }
        }
    }
}

/// Polls until every thread of every process is back: the same cgroup lines, a normal policy.
fn wait_back(procs: &[(i32, Vec<(i32, String)>)], limit: Duration, when: &str) {
    let t0 = Instant::now();
    loop {
        let back = procs.iter().all(|(pid, before)| {
            cgroup_lines(*pid) == *before && !sched::get_attr(*pid).unwrap().is_rt()
        });
        if back {
            eprintln!("{when}: back after {:?}", t0.elapsed());
            return;
        }
        assert!(
            t0.elapsed() < limit,
            "{when}: not back after {limit:?}: {:?}",
            procs
                .iter()
                .map(|(p, _)| cgroup_lines(*p))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// No stop group left anywhere below `dir`.
fn no_stop_groups(dir: &Path) -> bool {
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                if e.file_name().to_string_lossy().starts_with("rtbox-t") {
                    return false;
                }
                todo.push(e.path());
            }
        }
    }
    true
}

fn setup(name: &str) -> Option<(root::Turn, PathBuf)> {
    if !root_or_skip(name, "real SCHED_FIFO threads, cgroups") {
        return None;
    }
    let Some(v2) = cgroup::detect().ok().and_then(|l| l.v2) else {
        eprintln!("{name}: skipped: no cgroup v2 hierarchy on this machine");
        return None;
    };
    Some((root::realtime_turn(), v2))
}

/// [`setup`] for the Podman tests: Podman installed, 2 CPUs, and the local test image made.
fn podman_setup(name: &str) -> Option<(root::Turn, PathBuf)> {
    let turn = setup(name)?;
    if Command::new("podman").arg("--version").output().is_err() {
        eprintln!("{name}: skipped: podman is not installed (scripts/setup.sh installs it)");
        return None;
    }
    if sched::online_cpus() < 2 {
        eprintln!("{name}: skipped: needs 2 CPUs");
        return None;
    }
    test_image().expect("test image");
    Some(turn)
}

/// Issue 15: attach by cgroup keeps every member inside its cgroup (v1 lines unchanged, v2
/// inside), `status` names the freeze of its own stop group, `detach --cgroup` releases every
/// thread it attached, and SIGTERM and kill -9 of the daemon put every thread back.
#[test]
fn members_stay_in_their_cgroup_and_detach_cgroup_releases_all() {
    let Some((_turn, v2)) = setup("members_stay_in_their_cgroup_and_detach_cgroup_releases_all")
    else {
        return;
    };
    let cg = TestCgroup::new(&v2, "keep");
    let hogs: Vec<Proc> = vec![hog(), hog()];
    let pids: Vec<i32> = hogs.iter().map(|h| h.0.id() as i32).collect();
    for &p in &pids {
        cg.enter("app", p);
    }
    let app = cg.dir.join("app");
    let app_s = app.to_str().unwrap().to_string();
    let before: Vec<(i32, Vec<(i32, String)>)> =
        pids.iter().map(|&p| (p, cgroup_lines(p))).collect();

    for round in ["detach", "SIGTERM", "kill -9"] {
        let mut d = Daemon::start("cg-keep", None, &[]);
        d.ok(&[
            "box", "create", "A", "--budget", "10ms", "--period", "100ms", "--cpus", "0",
        ]);
        let out = d.ok(&["attach", "A", "--cgroup", &app_s]);
        assert!(out.contains("attached 2 threads"), "{round}: {out}");
        // Managed for a while: FIFO, each in its own stop group inside `app`, throttled and
        // thawed by freezes.
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(600) {
            for (pid, b) in &before {
                assert_rule(*pid, b, round);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            pids.iter().any(|&p| sched::get_attr(p).unwrap().is_rt()),
            "{round}: no member at a real-time policy"
        );
        for &p in &pids {
            let v2_line = cgroup::thread_cgroups(p).unwrap().v2.unwrap();
            assert_eq!(v2_line, format!("{}/app/rtbox-t{p}", cg.rel), "{round}");
        }
        let stops = d.stops("A");
        assert_eq!(stops.len(), 2, "{stops:?}");
        for s in &stops {
            assert_eq!(s["mechanism"], "freeze", "{s}");
            assert!(s["group"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{}/app/", cg.rel)));
        }
        let text = d.ok(&["status"]);
        assert!(text.contains("stop by freeze"), "{text}");
        match round {
            "detach" => {
                let out = d.ok(&["detach", "--cgroup", &app_s]);
                assert!(out.contains("released 2 threads"), "{out}");
                wait_back(&before, Duration::from_secs(1), round);
            }
            "SIGTERM" => {
                d.signal(libc::SIGTERM);
                wait_back(&before, Duration::from_secs(2), round);
            }
            _ => {
                d.signal(libc::SIGKILL);
                wait_back(&before, Duration::from_secs(3), round);
            }
        }
        assert!(no_stop_groups(&cg.dir), "{round}: a stop group was left");
    }
}

/// Issue 15: where the kernel refuses a threaded child (the member's cgroup has a populated
/// domain child), the member is stopped by SCHED_IDLE: nothing moves, `status` says why, and
/// its box still holds it back.
#[test]
fn where_the_kernel_refuses_a_stop_group_nothing_moves() {
    let Some((_turn, v2)) = setup("where_the_kernel_refuses_a_stop_group_nothing_moves") else {
        return;
    };
    let cg = TestCgroup::new(&v2, "refuse");
    let h = hog();
    let pid = h.0.id() as i32;
    cg.enter("app", pid);
    let other = Proc(Command::new("sleep").arg("600").spawn().unwrap());
    cg.enter("app/sub", other.0.id() as i32);
    let before = cgroup_lines(pid);
    let orig = state(pid);
    let mut d = Daemon::start("cg-refuse", None, &[]);
    d.ok(&[
        "box", "create", "A", "--budget", "10ms", "--period", "100ms", "--cpus", "0",
    ]);
    d.ok(&["attach", "A", "--pid", &pid.to_string()]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(cgroup_lines(pid), before, "nothing moved");
    let stops = d.stops("A");
    assert_eq!(stops.len(), 1, "{stops:?}");
    assert_eq!(stops[0]["mechanism"], "idle", "{stops:?}");
    assert!(
        stops[0]["reason"]
            .as_str()
            .unwrap()
            .contains(&format!("{}/app", cg.rel)),
        "{stops:?}"
    );
    assert!(d.ok(&["status"]).contains("stop by SCHED_IDLE"));
    d.signal(libc::SIGTERM);
    wait_back(&[(pid, before)], Duration::from_secs(2), "SIGTERM");
    assert_eq!(state(pid), orig, "policy, affinity and cgroups back");
    assert!(no_stop_groups(&cg.dir));
    drop(other);
    drop(h);
}

/// Podman with what this machine needs (`docs/runtime.md`, containers): runc (crun refuses the
/// hybrid layout) and limits below the VM's hard limits.
fn podman(args: &[&str]) -> (bool, String) {
    let out = Command::new("podman").args(args).output().expect("podman");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string()
            + &String::from_utf8_lossy(&out.stderr),
    )
}

const IMAGE: &str = "localhost/rtbox-test-busybox:latest";

/// The test image, from this machine's busybox (no registry needed): `podman import` of a root
/// file system holding the static busybox and its `sh` link.
fn test_image() -> Result<(), String> {
    if podman(&["image", "exists", IMAGE]).0 {
        return Ok(());
    }
    let bb = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .ok_or("no busybox binary (package busybox-static)")?;
    let root = std::env::temp_dir().join(format!("rtbox-image-{}", std::process::id()));
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::copy(bb, root.join("bin/busybox")).map_err(|e| e.to_string())?;
    std::os::unix::fs::symlink("busybox", root.join("bin/sh")).map_err(|e| e.to_string())?;
    let tar = root.with_extension("tar");
    let ok = Command::new("tar")
        .arg("-C")
        .arg(&root)
        .args(["-cf"])
        .arg(&tar)
        .arg(".")
        .status()
        .is_ok_and(|s| s.success());
    let imported = ok && podman(&["import", tar.to_str().unwrap(), IMAGE]).0;
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_file(&tar);
    imported.then_some(()).ok_or("podman import failed".into())
}

/// A running busy-loop container; removed when dropped.
struct Container(String);

impl Container {
    fn busy(name: &str) -> Container {
        let (ok, out) = podman(&[
            "run",
            "-d",
            "--name",
            name,
            "--runtime",
            "runc",
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
            IMAGE,
            "sh",
            "-c",
            "while :; do :; done",
        ]);
        assert!(ok, "podman run: {out}");
        Container(name.to_string())
    }

    fn pid(&self) -> i32 {
        podman(&["inspect", "--format", "{{.State.Pid}}", &self.0])
            .1
            .trim()
            .parse()
            .expect("container pid")
    }

    /// The `cpu.stat` of the container's own cgroup (its v2 cgroup, which counts every thread
    /// of its subtree).
    fn cpu_stat(&self, v2: &Path) -> PathBuf {
        let rel = cgroup::thread_cgroups(self.pid()).unwrap().v2.unwrap();
        let rel = rtbox_linux::stopgroup::original_of(&rel);
        v2.join(rel.trim_start_matches('/')).join("cpu.stat")
    }
}

/// Steal time of CPU `cpu` so far (`/proc/stat`, USER_HZ ticks), us.
fn cpu_steal_us(cpu: u32) -> u64 {
    let hz = 100; // USER_HZ, fixed by the kernel's ABI
    std::fs::read_to_string("/proc/stat")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(&format!("cpu{cpu} ")))
        .and_then(|l| l.split_whitespace().nth(8)?.parse::<u64>().ok())
        .map_or(0, |ticks| ticks * 1_000_000 / hz)
}

/// CPU time a cgroup used (`usage_usec` of its `cpu.stat`), us.
fn usage_us(cpu_stat: &Path) -> u64 {
    std::fs::read_to_string(cpu_stat)
        .expect("cpu.stat")
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
        .expect("usage_usec")
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman(&["rm", "-f", "-t", "0", &self.0]);
    }
}

/// Issue 15 acceptance: two Podman containers, each a busy loop, attached by name to boxes of
/// 0.3 and 0.2 of CPU 1, each get their share within 0.01 CPU by the kernel's accounting of
/// the container's own cgroup; every member's /proc/PID/cgroup keeps the rule while managed,
/// after `detach --container`, after SIGTERM and after kill -9 of the daemon; a missing
/// container gets a clear error; a restarted container rejoins its box.
#[test]
fn podman_containers_by_name_get_their_share_and_keep_their_cgroups() {
    let name = "podman_containers_by_name_get_their_share_and_keep_their_cgroups";
    let Some((_turn, v2)) = podman_setup(name) else {
        return;
    };
    let tag = std::process::id();
    let (na, nb) = (format!("rtbox-test-a-{tag}"), format!("rtbox-test-b-{tag}"));
    let (ca, cb) = (Container::busy(&na), Container::busy(&nb));
    let before: Vec<(i32, Vec<(i32, String)>)> = [&ca, &cb]
        .iter()
        .map(|c| (c.pid(), cgroup_lines(c.pid())))
        .collect();
    let boxes = |d: &Daemon| {
        d.ok(&[
            "box", "create", "A", "--budget", "30ms", "--period", "100ms", "--cpus", "1",
        ]);
        d.ok(&[
            "box", "create", "B", "--budget", "20ms", "--period", "100ms", "--cpus", "1",
        ]);
        d.ok(&["attach", "A", "--container", &na]);
        d.ok(&["attach", "B", "--container", &nb]);
    };

    // Shares, measured by the containers' own cgroups.
    let mut d = Daemon::start("cg-podman", None, &[]);
    boxes(&d);
    std::thread::sleep(Duration::from_millis(500));
    let (fa, fb) = (ca.cpu_stat(&v2), cb.cpu_stat(&v2));
    let steal0 = cpu_steal_us(1);
    let (a0, b0, t0) = (usage_us(&fa), usage_us(&fb), Instant::now());
    while t0.elapsed() < Duration::from_secs(20) {
        for (pid, b) in &before {
            assert_rule(*pid, b, "managed");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (a1, b1) = (usage_us(&fa), usage_us(&fb));
    let us = t0.elapsed().as_secs_f64() * 1e6;
    let (sa, sb) = ((a1 - a0) as f64 / us, (b1 - b0) as f64 / us);
    // What the host took from CPU 1 (its steal) cannot be delivered: allowed on top of 0.01.
    let steal = (cpu_steal_us(1) - steal0) as f64 / us;
    eprintln!(
        "{name}: container shares {sa:.4} (box 0.3), {sb:.4} (box 0.2); CPU 1 steal {steal:.4}"
    );
    let tol = 0.01 + steal;
    assert!(
        (sa - 0.3).abs() <= tol,
        "container A got {sa:.4} of 0.3 (steal {steal:.4})"
    );
    assert!(
        (sb - 0.2).abs() <= tol,
        "container B got {sb:.4} of 0.2 (steal {steal:.4})"
    );
    for s in d.stops("A").iter().chain(d.stops("B").iter()) {
        assert_eq!(s["mechanism"], "freeze", "{s}");
    }

    // A missing container: a clear error, nothing changes.
    let (code, out) = d.rtbox(&["attach", "A", "--container", "rtbox-no-such-container"]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("no container named \"rtbox-no-such-container\""),
        "{out}"
    );

    // detach --container releases it; the other stays.
    let out = d.ok(&["detach", "--container", &na]);
    assert!(!out.contains("released 0 threads"), "{out}");
    wait_back(&before[..1], Duration::from_secs(2), "detach --container");
    assert!(sched::get_attr(cb.pid()).unwrap().is_rt() || !d.stops("B").is_empty());

    // A restarted container rejoins (same id, same cgroup).
    d.ok(&["attach", "A", "--container", &na]);
    let (ok, out) = podman(&["restart", "-t", "0", &na]);
    assert!(ok, "podman restart: {out}");
    let new_pid = ca.pid();
    let t0 = Instant::now();
    while !d.stops("A").iter().any(|s| s["pid"] == new_pid) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "restarted container (process {new_pid}) did not rejoin: {:?}",
            d.stops("A")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // It may have joined while still `runc init` (Go, several threads) before its exec of the
    // container's `sh`: its threads are compared once the exec is done.
    wait_for(
        Duration::from_secs(5),
        "the restarted container's exec",
        || std::fs::read_to_string(format!("/proc/{new_pid}/comm")).is_ok_and(|c| c.trim() == "sh"),
    );
    let before: Vec<(i32, Vec<(i32, String)>)> = vec![
        (new_pid, {
            // Its lines before rtbox: the v2 line without the stop group.
            cgroup_lines(new_pid)
                .into_iter()
                .map(|(t, l)| (t, l.replace(&format!("/rtbox-t{t}"), "")))
                .collect()
        }),
        before[1].clone(),
    ];

    d.signal(libc::SIGTERM);
    wait_back(&before, Duration::from_secs(3), "SIGTERM");

    let mut d = Daemon::start("cg-podman9", None, &[]);
    boxes(&d);
    std::thread::sleep(Duration::from_millis(500));
    for (pid, b) in &before {
        assert_rule(*pid, b, "managed again");
    }
    d.signal(libc::SIGKILL);
    wait_back(&before, Duration::from_secs(3), "kill -9");

    // By the config: `members.containers`.
    let mut d = Daemon::start(
        "cg-podmancfg",
        Some(&format!(
            "[platform]\ncpus = 2\n\n[[box]]\nname = \"cfg\"\ncpus = \"1\"\ninterface.per_cpu = {{ budget = \"30ms\", period = \"100ms\" }}\nmembers = {{ containers = [\"{nb}\"] }}\n"
        )),
        &[],
    );
    let stops = d.stops("cfg");
    assert!(
        stops
            .iter()
            .any(|s| s["pid"] == cb.pid() && s["mechanism"] == "freeze"),
        "{stops:?}"
    );
    assert_rule(cb.pid(), &before[1].1, "config member");
    d.signal(libc::SIGTERM);
    wait_back(
        &before,
        Duration::from_secs(3),
        "SIGTERM of the config's daemon",
    );
    for c in [&ca, &cb] {
        let rel = cgroup::thread_cgroups(c.pid()).unwrap().v2.unwrap();
        assert!(no_stop_groups(&v2.join(rel.trim_start_matches('/'))));
    }
}

/// Issue 15: a config naming a container that does not exist: the daemon refuses to start,
/// naming the line, the box, the field and what the engines said; nothing changed.
#[test]
fn a_config_naming_a_missing_container_is_refused_precisely() {
    let name = "a_config_naming_a_missing_container_is_refused_precisely";
    let Some((_turn, _v2)) = setup(name) else {
        return;
    };
    let dir = Daemon::temp_dir("cg-nocontainer");
    let out = Daemon::command(
        &dir,
        Some("[platform]\ncpus = 2\n\n[[box]]\nname = \"cfg\"\ncpus = \"1\"\ninterface.per_cpu = { budget = \"30ms\", period = \"100ms\" }\nmembers = { containers = [\"rtbox-no-such-container\"] }\n"),
        &[],
    )
    .output()
    .expect("daemon");
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{msg}");
    assert!(
        msg.contains(
            "box \"cfg\": members.containers[0] = \"rtbox-no-such-container\": no container named \"rtbox-no-such-container\""
        ) && msg.contains("refusing to start (nothing changed)"),
        "{msg}"
    );
    assert!(!dir.join("sock").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shipped hooks.d file (contrib/oci/hooks.d/rtbox.json) pointed at this build's binary
/// and the test daemon's socket, in a directory of its own for `podman --hooks-dir`.
struct HooksDir(PathBuf);

impl HooksDir {
    fn new(sock: &Path) -> HooksDir {
        let shipped =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/oci/hooks.d/rtbox.json");
        let mut hook: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(shipped).expect("contrib hook file"))
                .expect("hook JSON");
        hook["hook"]["path"] = env!("CARGO_BIN_EXE_rtbox").into();
        hook["hook"]["args"] = serde_json::json!(["rtbox", "oci-hook", "--socket", sock]);
        let dir = std::env::temp_dir().join(format!("rtbox-hooks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("rtbox.json"), hook.to_string()).unwrap();
        HooksDir(dir)
    }

    /// `podman --hooks-dir DIR run -d` of the test image with `annotations`, running `script`.
    fn run(&self, name: &str, annotations: &[&str], script: &str) -> (bool, String) {
        let mut args = vec![
            "--hooks-dir",
            self.0.to_str().unwrap(),
            "run",
            "-d",
            "--name",
            name,
            "--runtime",
            "runc",
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
        ];
        for a in annotations {
            args.extend(["--annotation", a]);
        }
        args.extend([IMAGE, "sh", "-c", script]);
        podman(&args)
    }
}

impl Drop for HooksDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A free loopback port (bound and let go; the daemon binds it right after).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET /metrics` over HTTP: the status line and the body.
fn scrape(port: u16) -> (String, String) {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("metrics port");
    c.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

/// v1 `cpuacct.usage` (ns) of the container's cpuacct cgroup: what `podman stats` reads on
/// a cgroup v1 host.
fn cpuacct_ns(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let rel = text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
        ctrl.split(',')
            .any(|c| c == "cpuacct")
            .then(|| path.to_string())
    })?;
    ["/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct"]
        .iter()
        .find_map(|m| std::fs::read_to_string(format!("{m}{rel}/cpuacct.usage")).ok())
        .and_then(|t| t.trim().parse().ok())
}

/// Polls `cond` for up to `limit`.
fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < limit, "{what}: not after {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 15, the OCI hook: with the shipped hooks.d file, a container annotated
/// `io.rtbox.box=audio` is a member of `audio` before its first instruction (its first command
/// sees its init in its stop group at SCHED_FIFO) without any `rtbox attach`, keeps its
/// cgroups, is counted by its own cgroups (v2 `cpu.stat` and the v1 `cpuacct` `podman stats`
/// reads), appears in `/metrics` over HTTP with its id, and is released at stop. A container
/// annotated with a budget gets a box of its own, deleted at stop. A bad annotation, a missing
/// box or a missing daemon stop the container from starting, with the reason.
#[test]
fn annotated_podman_containers_join_by_the_oci_hook_and_leave_at_stop() {
    let name = "annotated_podman_containers_join_by_the_oci_hook_and_leave_at_stop";
    let Some((_turn, v2)) = podman_setup(name) else {
        return;
    };
    let port = free_port();
    // The daemon with --metrics-listen PORT (loopback).
    let mut d = Daemon::start("cg-hook", None, &["--metrics-listen", &port.to_string()]);
    d.ok(&[
        "box", "create", "audio", "--budget", "30ms", "--period", "100ms", "--cpus", "1",
    ]);
    let hooks = HooksDir::new(&d.sock);
    let tag = std::process::id();
    let (na, nb) = (format!("rtbox-hook-a-{tag}"), format!("rtbox-hook-b-{tag}"));

    // Joins by annotation; its first commands print what its init (pid 1 inside) is.
    let (ok, out) = hooks.run(
        &na,
        &["io.rtbox.box=audio"],
        "cat /proc/1/cgroup; grep policy /proc/1/sched; while :; do :; done",
    );
    assert!(ok, "podman run with io.rtbox.box: {out}");
    let ca = Container(na.clone());
    let pid = ca.pid();
    let id = podman(&["inspect", "--format", "{{.Id}}", &na]).1;
    wait_for(Duration::from_secs(5), "first output", || {
        podman(&["logs", &na]).1.contains("policy")
    });
    let logs = podman(&["logs", &na]).1;
    assert!(
        logs.contains(&format!("libpod-{id}/rtbox-t{pid}")),
        "the first instruction did not run in the box's stop group: {logs}"
    );
    let policy = logs
        .lines()
        .find(|l| l.starts_with("policy"))
        .and_then(|l| l.split(':').nth(1))
        .map(|v| v.trim().to_string());
    assert_eq!(
        policy.as_deref(),
        Some("1"),
        "not SCHED_FIFO at its first instruction: {logs}"
    );
    let stops = d.stops("audio");
    assert!(
        stops
            .iter()
            .any(|s| s["pid"] == pid && s["mechanism"] == "freeze"),
        "{stops:?}"
    );
    // Its cgroups: every v1 line names the container's own cgroup, the v2 line is inside it.
    for (t, text) in cgroup_lines(pid) {
        for l in text.lines() {
            assert!(l.contains(&format!("libpod-{id}")), "thread {t}: {l}");
        }
        let before: String = text.replace(&format!("/rtbox-t{t}"), "");
        keeps_cgroups(&before, &text).unwrap();
    }
    // Counted by its own cgroups while held: the v2 cpu.stat and the v1 cpuacct that
    // `podman stats` reads agree, at about the box's share.
    let fa = ca.cpu_stat(&v2);
    let (u0, c0, t0) = (
        usage_us(&fa),
        cpuacct_ns(pid).expect("cpuacct"),
        Instant::now(),
    );
    std::thread::sleep(Duration::from_secs(3));
    let (u1, c1) = (usage_us(&fa), cpuacct_ns(pid).unwrap());
    let us = t0.elapsed().as_secs_f64() * 1e6;
    let (s2, s1) = ((u1 - u0) as f64 / us, (c1 - c0) as f64 / 1e3 / us);
    eprintln!("{name}: v2 cpu.stat share {s2:.4}, v1 cpuacct share {s1:.4} (box 0.3)");
    assert!((s2 - s1).abs() < 0.01, "v2 {s2:.4} vs cpuacct {s1:.4}");
    assert!(s1 > 0.2 && s1 < 0.32, "cpuacct share {s1:.4} of a 0.3 box");

    // A box of its own from budget annotations.
    let (ok, out) = hooks.run(
        &nb,
        &[
            "io.rtbox.budget=20ms",
            "io.rtbox.period=100ms",
            "io.rtbox.cpus=1",
        ],
        "while :; do :; done",
    );
    assert!(ok, "podman run with io.rtbox.budget: {out}");
    let cb = Container(nb.clone());
    let id_b = podman(&["inspect", "--format", "{{.Id}}", &nb]).1;
    let own = format!("ctr-{}", &id_b[..12]);
    assert!(
        d.stops(&own).iter().any(|s| s["pid"] == cb.pid()),
        "{own}: {:?}",
        d.stops(&own)
    );

    // Metrics over HTTP, labelled by container.
    let (status, body) = scrape(port);
    assert!(status.contains("200"), "{status}");
    let label_a = format!(
        "{{box=\"audio\",container_id=\"{id}\",container_name=\"{}\",engine=\"oci\"}}",
        &id[..12]
    );
    assert!(
        body.contains(&format!("rtbox_container_info{label_a} 1")),
        "{body}"
    );
    assert!(
        body.contains(&format!("rtbox_container_member_threads{label_a} 1")),
        "{body}"
    );
    assert!(body.contains(&format!("rtbox_container_cpu_seconds_total{label_a} ")));
    assert!(body.contains(&format!("container_id=\"{id_b}\"")), "{body}");
    let st: serde_json::Value = serde_json::from_str(&d.ok(&["status", "--json"])).unwrap();
    let held = st["containers"].as_array().expect("containers in status");
    assert!(
        held.iter()
            .any(|c| c["id"] == id.as_str() && c["box"] == "audio" && c["engine"] == "oci"),
        "{held:?}"
    );
    assert!(
        held.iter()
            .any(|c| c["id"] == id_b.as_str() && c["box"] == own.as_str() && c["own_box"] == true),
        "{held:?}"
    );
    assert!(body.contains("rtbox_server_budget_seconds{box=\"audio\",cpu=\"1\"} 0.03"));
    assert!(scrape(port).0.contains("200"));

    // Restarted: it leaves (poststop) and joins again (createRuntime) with its new process.
    // (Podman reads the hooks again when it re-creates the container: the same --hooks-dir.)
    let (ok, out) = podman(&[
        "--hooks-dir",
        hooks.0.to_str().unwrap(),
        "restart",
        "-t",
        "0",
        &na,
    ]);
    assert!(ok, "podman restart: {out}");
    let new_pid = ca.pid();
    assert_ne!(new_pid, pid);
    wait_for(Duration::from_secs(5), "rejoin after restart", || {
        let s = d.stops("audio");
        s.iter().any(|s| s["pid"] == new_pid) && !s.iter().any(|s| s["pid"] == pid)
    });

    // Stopped: released by the poststop hook, its own box deleted.
    let (ok, out) = podman(&["stop", "-t", "0", &na]);
    assert!(ok, "{out}");
    let (ok, out) = podman(&["stop", "-t", "0", &nb]);
    assert!(ok, "{out}");
    wait_for(Duration::from_secs(10), "release at stop", || {
        d.stops("audio").is_empty()
            && !d.ok(&["status"]).contains(&own)
            && !scrape(port).1.contains("rtbox_container_info{")
    });
    assert!(no_stop_groups(&v2.join("libpod_parent")));

    // Refusals: the container does not start and says why.
    let (ok, out) = hooks.run(
        &format!("rtbox-hook-c-{tag}"),
        &["io.rtbox.budget=20"],
        "true",
    );
    let _c = Container(format!("rtbox-hook-c-{tag}"));
    assert!(!ok, "a bad annotation was accepted");
    assert!(
        out.contains("annotation io.rtbox.budget=\\\"20\\\"")
            || out.contains("annotation io.rtbox.budget=\"20\""),
        "{out}"
    );
    let (ok, out) = hooks.run(
        &format!("rtbox-hook-d-{tag}"),
        &["io.rtbox.box=nosuch"],
        "true",
    );
    let _d = Container(format!("rtbox-hook-d-{tag}"));
    assert!(!ok);
    assert!(
        out.contains("nosuch") && out.contains("does not exist"),
        "{out}"
    );
    d.signal(libc::SIGTERM);
    let (ok, out) = hooks.run(
        &format!("rtbox-hook-e-{tag}"),
        &["io.rtbox.box=audio"],
        "true",
    );
    let _e = Container(format!("rtbox-hook-e-{tag}"));
    assert!(!ok);
    assert!(out.contains("cannot reach the rtbox daemon"), "{out}");
    drop(ca);
    drop(cb);
}

/// A Docker daemon for the test: the host's own if `docker version` reaches one, else a
/// `dockerd` of the test's own on a private socket (no bridge, no iptables), stopped at the
/// end. `host`: the `DOCKER_HOST` value both the test and the rtbox daemon use.
struct Dockerd {
    child: Option<Child>,
    host: Option<String>,
    exec_root: PathBuf,
}

impl Dockerd {
    fn start() -> Result<Dockerd, String> {
        let reach = |host: Option<&str>| {
            let mut c = Command::new("docker");
            c.args(["version", "--format", "{{.Server.Version}}"]);
            if let Some(h) = host {
                c.env("DOCKER_HOST", h);
            }
            c.output().is_ok_and(|o| o.status.success())
        };
        let exec_root = std::env::temp_dir().join(format!("rtbox-dockerd-{}", std::process::id()));
        if reach(None) {
            return Ok(Dockerd {
                child: None,
                host: None,
                exec_root,
            });
        }
        if Command::new("dockerd").arg("--version").output().is_err() {
            return Err("no Docker daemon reachable and no dockerd (package docker.io)".into());
        }
        let sock = format!("unix://{}/docker.sock", exec_root.display());
        std::fs::create_dir_all(&exec_root).unwrap();
        let log = std::fs::File::create(exec_root.join("dockerd.log")).unwrap();
        let child = Command::new("dockerd")
            .args([
                "--iptables=false",
                "--ip6tables=false",
                "--bridge=none",
                "-H",
                &sock,
            ])
            .arg("--exec-root")
            .arg(exec_root.join("exec"))
            .arg("--pidfile")
            .arg(exec_root.join("dockerd.pid"))
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| format!("dockerd: {e}"))?;
        let d = Dockerd {
            child: Some(child),
            host: Some(sock.clone()),
            exec_root,
        };
        let t0 = Instant::now();
        while !reach(Some(&sock)) {
            if t0.elapsed() > Duration::from_secs(30) {
                return Err(format!(
                    "dockerd did not answer within 30 s: {}",
                    std::fs::read_to_string(d.exec_root.join("dockerd.log")).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(d)
    }

    fn docker(&self, args: &[&str]) -> (bool, String) {
        let mut c = Command::new("docker");
        c.args(args);
        if let Some(h) = &self.host {
            c.env("DOCKER_HOST", h);
        }
        let out = c.output().expect("docker");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).trim().to_string()
                + &String::from_utf8_lossy(&out.stderr),
        )
    }
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            root::terminate(&mut c, Duration::from_secs(20));
        }
        let _ = std::fs::remove_dir_all(&self.exec_root);
    }
}

/// Issue 15, Docker: a Docker container attached by name gets its box's share by its own
/// cgroup's accounting, keeps its cgroups while held, and `detach --container` gives every
/// thread back. (The same engine lookup as Podman: `docker inspect` when Podman does not know
/// the name.)
#[test]
fn docker_containers_by_name_get_their_share_and_are_given_back() {
    let name = "docker_containers_by_name_get_their_share_and_are_given_back";
    let Some((_turn, v2)) = setup(name) else {
        return;
    };
    if sched::online_cpus() < 2 {
        eprintln!("{name}: skipped: needs 2 CPUs");
        return;
    }
    if Command::new("docker").arg("--version").output().is_err() {
        eprintln!("{name}: skipped: no docker client (scripts/setup.sh installs docker.io)");
        return;
    }
    let dockerd = match Dockerd::start() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{name}: skipped: {e}");
            return;
        }
    };
    // The image: the same busybox root file system, by `docker import`.
    let image = "rtbox-test-busybox:latest";
    if !dockerd.docker(&["image", "inspect", image]).0 {
        let root = std::env::temp_dir().join(format!("rtbox-dimage-{}", std::process::id()));
        std::fs::create_dir_all(root.join("bin")).unwrap();
        let bb = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("busybox (package busybox-static)");
        std::fs::copy(bb, root.join("bin/busybox")).unwrap();
        std::os::unix::fs::symlink("busybox", root.join("bin/sh")).unwrap();
        let tar = root.with_extension("tar");
        assert!(Command::new("tar")
            .arg("-C")
            .arg(&root)
            .arg("-cf")
            .arg(&tar)
            .arg(".")
            .status()
            .unwrap()
            .success());
        let (ok, out) = dockerd.docker(&["import", tar.to_str().unwrap(), image]);
        let _ = std::fs::remove_dir_all(&root);
        let _ = std::fs::remove_file(&tar);
        assert!(ok, "docker import: {out}");
    }
    let cname = format!("rtbox-docker-{}", std::process::id());
    let (ok, out) = dockerd.docker(&[
        "run",
        "-d",
        "--name",
        &cname,
        "--network",
        "none",
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=1024:1024",
        image,
        "sh",
        "-c",
        "while :; do :; done",
    ]);
    struct Rm<'a>(&'a Dockerd, String);
    impl Drop for Rm<'_> {
        fn drop(&mut self) {
            let _ = self.0.docker(&["rm", "-f", &self.1]);
        }
    }
    let _rm = Rm(&dockerd, cname.clone());
    assert!(ok, "docker run: {out}");
    let pid: i32 = dockerd
        .docker(&["inspect", "--format", "{{.State.Pid}}", &cname])
        .1
        .parse()
        .expect("pid");
    let before = vec![(pid, cgroup_lines(pid))];

    let dir = Daemon::temp_dir("cg-docker");
    let mut cmd = Daemon::command(&dir, None, &[]);
    if let Some(h) = &dockerd.host {
        cmd.env("DOCKER_HOST", h);
    }
    let mut d = Daemon::spawn(cmd, dir, true);
    d.ok(&[
        "box", "create", "D", "--budget", "30ms", "--period", "100ms", "--cpus", "1",
    ]);
    d.ok(&["attach", "D", "--container", &cname]);
    std::thread::sleep(Duration::from_millis(500));
    let rel = cgroup::thread_cgroups(pid).unwrap().v2.unwrap();
    let stat = v2
        .join(rtbox_linux::stopgroup::original_of(&rel).trim_start_matches('/'))
        .join("cpu.stat");
    let steal0 = cpu_steal_us(1);
    let (u0, t0) = (usage_us(&stat), Instant::now());
    while t0.elapsed() < Duration::from_secs(15) {
        assert_rule(pid, &before[0].1, "docker, managed");
        std::thread::sleep(Duration::from_millis(100));
    }
    let us = t0.elapsed().as_secs_f64() * 1e6;
    let share = (usage_us(&stat) - u0) as f64 / us;
    let steal = (cpu_steal_us(1) - steal0) as f64 / us;
    eprintln!("{name}: Docker container share {share:.4} (box 0.3); CPU 1 steal {steal:.4}");
    // The 0.01 acceptance is the Podman test's (20 s); this one checks the Docker path with
    // a shorter window, where one unreported VM stall weighs more.
    assert!(
        (share - 0.3).abs() <= 0.02 + steal,
        "Docker container got {share:.4} of 0.3 (steal {steal:.4})"
    );
    assert!(d
        .stops("D")
        .iter()
        .any(|s| s["pid"] == pid && s["mechanism"] == "freeze"));
    let out = d.ok(&["detach", "--container", &cname]);
    assert!(out.contains("released 1 threads"), "{out}");
    wait_back(&before, Duration::from_secs(2), "docker detach --container");
    d.signal(libc::SIGTERM);
    let _ = dockerd.docker(&["rm", "-f", &cname]);
    let _ = dockerd.docker(&["rmi", image]);
    let own = rtbox_linux::stopgroup::original_of(&rel);
    assert!(no_stop_groups(&v2.join(own.trim_start_matches('/'))));
}

/// Issue 15: `detach --cgroup` releases every thread it attached, of a multi-threaded member
/// too: each thread held in its own stop group inside the cgroup at a real-time policy, then
/// every thread back in the cgroup at its own policy, no stop group left.
#[test]
fn detach_cgroup_releases_every_thread_of_a_multithreaded_member() {
    let name = "detach_cgroup_releases_every_thread_of_a_multithreaded_member";
    let Some((_turn, v2)) = setup(name) else {
        return;
    };
    // Four threads: the main one and three sleeping ones.
    let Ok(child) = Command::new("python3")
        .args([
            "-c",
            "import threading,time\nfor _ in range(3): threading.Thread(target=time.sleep,args=(600,),daemon=True).start()\ntime.sleep(600)",
        ])
        .spawn()
    else {
        eprintln!("{name}: skipped: no python3 to run a multi-threaded member");
        return;
    };
    let mt = Proc(child);
    let pid = mt.0.id() as i32;
    wait_for(Duration::from_secs(5), "four threads", || {
        rtbox_linux::procfs::threads_of(pid)
            .unwrap_or_default()
            .len()
            == 4
    });
    let h = hog();
    let cg = TestCgroup::new(&v2, "threads");
    cg.enter("app", pid);
    cg.enter("app", h.0.id() as i32);
    let app = cg.dir.join("app");
    let before: Vec<(i32, Vec<(i32, String)>)> = [pid, h.0.id() as i32]
        .iter()
        .map(|&p| (p, cgroup_lines(p)))
        .collect();
    let d = Daemon::start("cg-threads", None, &[]);
    d.ok(&[
        "box", "create", "T", "--budget", "10ms", "--period", "100ms", "--cpus", "0",
    ]);
    let out = d.ok(&["attach", "T", "--cgroup", app.to_str().unwrap()]);
    assert!(out.contains("attached 5 threads"), "{out}");
    std::thread::sleep(Duration::from_millis(300));
    for t in rtbox_linux::procfs::threads_of(pid).unwrap() {
        let v2_line = std::fs::read_to_string(format!("/proc/{pid}/task/{t}/cgroup")).unwrap();
        assert!(
            v2_line.contains(&format!("0::{}/app/rtbox-t{t}", cg.rel)),
            "thread {t}: {v2_line}"
        );
        assert!(
            sched::get_attr(t).unwrap().is_rt(),
            "thread {t} not real-time"
        );
    }
    let out = d.ok(&["detach", "--cgroup", app.to_str().unwrap()]);
    assert!(out.contains("released 5 threads"), "{out}");
    wait_back(&before, Duration::from_secs(2), "detach --cgroup");
    for t in rtbox_linux::procfs::threads_of(pid).unwrap() {
        assert!(
            !sched::get_attr(t).unwrap().is_rt(),
            "thread {t} still real-time"
        );
    }
    assert!(no_stop_groups(&cg.dir));
    drop(d);
    drop(mt);
    drop(h);
}

/// `--metrics-listen` on an address in use: the daemon refuses to start, naming the address,
/// and changed nothing (no socket).
#[test]
fn a_metrics_address_in_use_refuses_the_start() {
    let name = "a_metrics_address_in_use_refuses_the_start";
    let Some((_turn, _v2)) = setup(name) else {
        return;
    };
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = Daemon::temp_dir("cg-metricsbusy");
    let out = Daemon::command(&dir, None, &[])
        .args(["--metrics-listen", &port.to_string()])
        .output()
        .expect("daemon");
    let msg = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{msg}");
    assert!(
        msg.contains(&format!("--metrics-listen 127.0.0.1:{port}: "))
            && msg.contains("refusing to start (nothing changed)"),
        "{msg}"
    );
    assert!(!dir.join("sock").exists());
    let (code, msg) = {
        let o = Daemon::command(&dir, None, &[])
            .args(["--metrics-listen", "localhost:notaport"])
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    assert_eq!(code, Some(2), "{msg}");
    assert!(
        msg.contains("--metrics-listen \"localhost:notaport\""),
        "{msg}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
