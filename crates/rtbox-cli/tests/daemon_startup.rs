//! Fidelity at start-up: the members of a global FIFO box get the box's guarantee from their
//! first job. The box and task set are the issue's (BDM 0.83 / 5 ms on 2 CPUs, four rt-app
//! threads, RM priorities; `rtbox analyze`: schedulable, t3 bound 47.5 ms of 50).
//!
//! What used to happen: rt-app's main thread creates its four threads; the loop, saving its
//! journal for the new members, waited ~1 s in fsync on a busy disk, and meanwhile the threads
//! ran unplaced, at rt-app's own priorities, all on their parent's CPU: the lowest one (t3)
//! missed 20-70 deadlines in the first second. Then (fixed since): new threads joined only at
//! the next full /proc scan (their fork event names the process's parent, not the member
//! thread), 10-150 ms after they started, and each cgroup move waited for an RCU grace period.
//! The test keeps the disk busy (a writer that fdatasyncs in a loop, as other processes'
//! builds do) so that such a stall shows. Last (fixed 27 November): a thread that set its own
//! priority between its join and its first placement lost that priority to the placement and
//! ranked lowest for the whole run; single t2 jobs then came 1-25 ms late mid-run in 3 of 10
//! runs, and this test was ignored. After the fix: 5 of 5 runs of 15 s with no miss at all.
//!
//! The run is `rtbox_harness::fidelity::run`: the real daemon with this configuration,
//! `rtbox load` (every job exactly its WCET of thread CPU time; the box has no margin, so a
//! workload whose jobs grow under load, as rt-app's calibrated loops do, is outside what the
//! analysis promises) inside the box for 4 s (every thread's first job released together 0.3 s after the
//! workload's start, when all threads exist), a SCHED_FIFO
//! 99 canary per CPU. Assertion: no job of any task misses its deadline, except during a
//! machine stall (`fidelity::during_stall`: a canary on one CPU late by at least the job's
//! lateness inside the job's window; the VM's host stops vCPUs for tens of ms at times).
//! Needs root; otherwise it prints why it skips. Takes the machine-wide real-runtime
//! lock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rtbox_harness::fidelity::{self, run, SizedSet, Workload};

#[allow(dead_code)] // shared helpers; this test uses a few
mod root;
use root::root_or_skip;

const CONFIG: &str = r#"
[platform]
cpus = 2

[[box]]
name = "A"
cpus = "0-1"
policy = "fifo"
placement = "global"
interface.bdm = { alpha = 0.83, delta = "5ms" }

[[task]]
name = "t1"
box = "A"
priority = 50
wcet = "9166us"
period = "20ms"

[[task]]
name = "t0"
box = "A"
priority = 49
wcet = "5086us"
period = "25ms"

[[task]]
name = "t2"
box = "A"
priority = 48
wcet = "7556us"
period = "40ms"

[[task]]
name = "t3"
box = "A"
priority = 47
wcet = "6339us"
period = "50ms"
"#;

#[test]
fn every_member_meets_its_deadlines_from_the_first_job() {
    let name = "every_member_meets_its_deadlines_from_the_first_job";
    if !root_or_skip(name, "runs the real daemon") {
        return;
    }
    let _turn = root::realtime_turn();
    let system = rtbox_config::parse_str(CONFIG).expect("the issue's configuration");
    let set = SizedSet {
        index: 0,
        kind: fidelity::Kind::Global,
        tasks: system.tasks_of("A").cloned().collect(),
        margin_pct: 0,
        work_pct: 100,
        interface: "A 0.830".into(),
        boxes: vec!["A".into()],
        config: CONFIG.to_string(),
    };
    let dir = fidelity::scratch("startup", 0);
    std::fs::create_dir_all(&dir).unwrap();
    // A busy disk on the state file's file system.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, file) = (
            stop.clone(),
            std::env::temp_dir().join(format!("rtbox-startup-disk-{}", std::process::id())),
        );
        std::thread::spawn(move || {
            let block = vec![0x5au8; 8 << 20];
            while !stop.load(Ordering::Relaxed) {
                use std::io::Write;
                if let Ok(mut f) = std::fs::File::create(&file) {
                    let _ = f.write_all(&block);
                    let _ = f.sync_data();
                }
            }
            let _ = std::fs::remove_file(&file);
        })
    };
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_rtbox"));
    // RTBOX_STARTUP_SECS: a longer run (the issue's acceptance runs 15 s).
    let secs: u64 = std::env::var("RTBOX_STARTUP_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let o = run(bin, &set, secs, Workload::Load, &dir);
    stop.store(true, Ordering::Relaxed);
    let _ = writer.join();
    let _ = std::fs::remove_dir_all(&dir);
    let o = o.expect("real run");
    let own: Vec<_> = o
        .tasks
        .iter()
        .flat_map(|t| t.own.iter().map(move |m| (t.name.clone(), *m)))
        .collect();
    eprintln!(
        "{name}: {} jobs, {} misses, {} outside machine stalls {:?} (task, (job start us, lateness ns)); \
         canary worst {:.1} ms, {} wake-ups > 2 ms; CPU / WCET {:.2}, largest job {:.2}",
        o.jobs(),
        o.misses(),
        own.len(),
        own,
        o.canary_worst as f64 / 1e6,
        o.stalls,
        o.cpu_over_wcet,
        o.job_cpu_max
    );
    assert!(o.stop_hung.is_none(), "the daemon's stop did not finish");
    for t in &o.tasks {
        assert!(
            t.jobs >= 10 * secs,
            "{} ran only {} jobs in {secs} s",
            t.name,
            t.jobs
        );
    }
    assert!(own.is_empty(), "misses outside machine stalls: {own:?}");
}
