//! Time to placement of a member's new threads: how long a thread created inside a box runs
//! before rtbox has it (a) in its own freeze group, charged to the box (joined), and (b) in the
//! box's priority band at the rank it gave itself (placed), when the thread sets its own
//! SCHED_FIFO priority right after it starts, as rt-app's threads do.
//!
//! `cargo run --release -p rtbox-harness --example placement -- RTBOX_BIN [THREADS]`
//! starts `RTBOX_BIN daemon` with one global FIFO box on CPUs 0-1, runs this program inside it
//! with `rtbox exec`, and prints per-thread figures and their median / p90 / max. Needs root;
//! takes the machine-wide real-runtime lock.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rtbox_harness::percentile;
use rtbox_linux::sched::{self, SchedAttr};

const CONFIG: &str = r#"
[platform]
cpus = 2

[[box]]
name = "A"
cpus = "0-1"
policy = "fifo"
placement = "global"
interface.bdm = { alpha = 0.5, delta = "10ms" }
"#;

/// The priority the new threads give themselves: below rtbox's bands (40..89), so a band
/// priority shows that rtbox re-ranked the thread after its own change.
const OWN_PRIO: u32 = 30;
const GIVE_UP: u64 = 1_000_000_000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        let n = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
        child(n);
        return;
    }
    if !rtbox_linux::is_root() {
        eprintln!("placement: needs root (runs the rtbox daemon); skipped");
        return;
    }
    let Some(bin) = args.get(1) else {
        eprintln!("usage: placement RTBOX_BIN [THREADS]");
        std::process::exit(2);
    };
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(30);
    let _turn = rtbox_linux::lock::realtime_turn().expect("machine-wide real-runtime lock");
    let dir = std::env::temp_dir().join(format!("rtbox-placement-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("box.toml"), CONFIG).unwrap();
    let mut daemon = Command::new(bin)
        .arg("daemon")
        .arg("--config")
        .arg(dir.join("box.toml"))
        .arg("--socket")
        .arg(dir.join("sock"))
        .arg("--state")
        .arg(dir.join("state.json"))
        .stderr(Stdio::null())
        .spawn()
        .expect("start daemon");
    let t0 = Instant::now();
    while !dir.join("sock").exists() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let me = std::env::current_exe().unwrap();
    let out = Command::new(bin)
        .args(["exec", "A", "--socket"])
        .arg(dir.join("sock"))
        .arg("--")
        .arg(me)
        .args(["child", &n.to_string()])
        .stderr(Stdio::inherit())
        .output()
        .expect("rtbox exec");
    // SAFETY: plain kill(2) of our own child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let _ = daemon.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<[u64; 4]> = text
        .lines()
        .filter_map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            (v.len() == 4).then(|| [v[0], v[1], v[2], v[3]])
        })
        .collect();
    println!("binary: {bin}; {} threads", rows.len());
    println!("| figure (us after pthread_create) | median | p90 | max |");
    println!("|---|---|---|---|");
    for (i, what) in [
        (0, "thread's first instruction"),
        (2, "joined (own freeze group)"),
        (3, "placed (band, own rank)"),
    ] {
        let mut v: Vec<u64> = rows.iter().map(|r| r[i]).collect();
        v.sort_unstable();
        println!(
            "| {what} | {} | {} | {} |",
            percentile(&v, 50.0) / 1000,
            percentile(&v, 90.0) / 1000,
            v.last().copied().unwrap_or(0) / 1000
        );
    }
    println!(
        "threads already joined at their first instruction: {} of {}",
        rows.iter().filter(|r| r[1] == 1).count(),
        rows.len()
    );
}

/// Inside the box: creates `n` threads one after another; each prints
/// `first_instruction_ns joined_at_start joined_ns placed_ns` (ns after its creation).
fn child(n: usize) {
    for _ in 0..n {
        let created = rtbox_linux::monotonic_ns();
        let h = std::thread::spawn(move || {
            let start = rtbox_linux::monotonic_ns();
            let tid = sched::gettid();
            let at_start = joined(tid);
            let own = SchedAttr {
                flags: 0,
                ..SchedAttr::fifo(OWN_PRIO)
            };
            let _ = sched::set_attr(0, &own);
            let (mut j, mut p) = (None, None);
            while j.is_none() || p.is_none() {
                let now = rtbox_linux::monotonic_ns();
                if now - start > GIVE_UP {
                    break;
                }
                if j.is_none() && joined(tid) {
                    j = Some(now);
                }
                if p.is_none() && placed(tid) {
                    p = Some(now);
                }
            }
            let f = |t: Option<u64>| t.map_or(GIVE_UP, |t| t - created);
            println!(
                "{} {} {} {}",
                start - created,
                at_start as u8,
                if at_start { 0 } else { f(j) },
                f(p)
            );
        });
        let _ = h.join();
        std::thread::sleep(Duration::from_millis(30));
    }
}

/// In its own threaded freeze group (`.../p<pid>/t<tid>`): rtbox took it as a member.
fn joined(tid: i32) -> bool {
    std::fs::read_to_string("/proc/thread-self/cgroup")
        .map(|c| {
            c.lines()
                .any(|l| l.starts_with("0::") && l.ends_with(&format!("/t{tid}")))
        })
        .unwrap_or(false)
}

/// In rtbox's band range after its own change to [`OWN_PRIO`].
fn placed(tid: i32) -> bool {
    sched::get_attr(tid).is_ok_and(|a| a.is_rt() && (40..=89).contains(&a.priority))
}
