//! Seed 001 plug-ins through two drivers of the same core: the simulator (implicit accounting,
//! `rtbox_sim::plugin::PluginModel`) and a virtual-time replay of the daemon's plug-in driver
//! (`rtbox_daemon::runtime::plugins::PluginDriver`, the code the daemon's loop runs, over a fake
//! kernel with measured accounting: every running server is charged what its member executed,
//! tasks' jobs reach the driver as the job pages' counts). The job-level schedules (every job's
//! release and completion time) must be identical.

use std::collections::VecDeque;

use rtbox_core::{Accounting, Options, Scheduler, TaskId, TaskParams};
use rtbox_daemon::runtime::plugins::{GroupTask, JobCounts, PluginDriver};
use rtbox_model::{Nanos, PluginKind, System};
use rtbox_sim::{simulate, SimOptions};

const MS: Nanos = 1_000_000;

/// (task, job, release, finish) of every completed job, sorted.
type Schedule = Vec<(String, u64, Nanos, Nanos)>;

fn system(plugin: PluginKind, cpus: u32, tasks: &[(Nanos, Nanos)]) -> System {
    let mut text = format!(
        "[platform]\ncpus = {cpus}\ncap = 1.0\n\n[[box]]\nname = \"g\"\nplugin = \"{}\"\n\
         interface.per_cpu = {{ budget = \"10ms\", period = \"10ms\" }}\n",
        plugin.name()
    );
    for (i, (c, t)) in tasks.iter().enumerate() {
        text += &format!(
            "\n[[task]]\nname = \"t{i}\"\nbox = \"g\"\nwcet = \"{c}ns\"\nperiod = \"{t}ns\"\n"
        );
    }
    rtbox_config::parse_str(&text).expect("scenario parses")
}

/// The simulated schedule and the number of migrations it made.
fn simulated(sys: &System, end: Nanos) -> (Schedule, u64) {
    let opts = SimOptions {
        duration: end,
        record_jobs: true,
        ..SimOptions::default()
    };
    let r = simulate(sys, &opts).expect("simulates");
    let migrations = r.cpus.iter().map(|c| c.migrations).sum();
    let mut out: Schedule = r
        .jobs
        .expect("jobs recorded")
        .into_iter()
        .filter_map(|j| j.finish.map(|f| (j.task, j.seq, j.release, f)))
        .collect();
    out.sort();
    (out, migrations)
}

/// The daemon's driver in virtual time: its plug-in module (`rtbox_daemon::runtime::plugins`,
/// the code the enforcement loop runs) over a core in measured accounting, with a fake kernel
/// below: each CPU runs what the core dispatched and is charged what it executed, members wake
/// and block as the daemon's sensor would report, the job pages' counts are the completed jobs,
/// and the task API's releases are nominal (first release at 0).
fn replayed(sys: &System, end: Nanos) -> Schedule {
    let opts = Options {
        accounting: Accounting::Measured,
        record_events: false,
        ..Options::default()
    };
    let mut sched = Scheduler::new(sys, opts).expect("admitted");
    // Members join with no priority of their own (normal threads), as the daemon attaches them.
    let ids: Vec<TaskId> = sys
        .tasks
        .iter()
        .map(|spec| {
            let mut tp = TaskParams::from_spec(spec);
            tp.priority = 0;
            sched.add_task(tp).expect("task registers")
        })
        .collect();
    let tasks: Vec<GroupTask> = sys
        .tasks
        .iter()
        .enumerate()
        .map(|(t, spec)| GroupTask {
            key: t as i32,
            task: ids[t],
            box_name: "g".into(),
            wcet: spec.wcet,
            period: spec.period,
            deadline: spec.deadline,
        })
        .collect();
    // Boxes as the daemon runs them: no tasks in the system, they come through the task API.
    let boxes = System::new(
        sys.platform.clone(),
        sys.boxes().iter().map(|b| b.spec.clone()).collect(),
        vec![],
    )
    .expect("boxes");
    let mut driver = PluginDriver::default();
    assert!(driver
        .set_tasks(0, &mut sched, &boxes, tasks.clone())
        .expect("placed"));

    let n = sys.tasks.len();
    // Per task: pending jobs (seq, release, left), jobs released and completed.
    let mut jobs: Vec<VecDeque<(u64, Nanos, Nanos)>> = vec![VecDeque::new(); n];
    let mut released = vec![0u64; n];
    let mut completed = vec![0u64; n];
    let mut out = Schedule::new();
    let mut now = 0;
    loop {
        // Releases due now (nominal: job k at k T); a task with no pending job wakes.
        for t in 0..n {
            let spec = &sys.tasks[t];
            if released[t] * spec.period == now {
                jobs[t].push_back((released[t], now, spec.wcet));
                released[t] += 1;
                if jobs[t].len() == 1 {
                    sched.wake(now, ids[t], Some(now + spec.deadline)).unwrap();
                }
            }
        }
        // The loop's step: the plug-in half, the core, who runs.
        assert!(!driver
            .set_tasks(now, &mut sched, &boxes, tasks.clone())
            .unwrap());
        let first = Some(0);
        driver
            .feed(now, &mut sched, |k| {
                let t = k as usize;
                Some(JobCounts::nominal(
                    first,
                    sys.tasks[t].period,
                    now,
                    completed[t],
                ))
            })
            .unwrap();
        sched.advance(now);
        driver.observe(now, &sched);
        let running: Vec<Option<(usize, Option<rtbox_core::ServerId>)>> = (0..sched.cpu_count())
            .map(|c| sched.running_at(c).map(|r| (r.task.index(), r.server)))
            .collect();

        let mut next = end;
        for tm in [sched.next_timer(), driver.next_timer()]
            .into_iter()
            .flatten()
        {
            next = next.min(tm);
        }
        for &(t, _) in running.iter().flatten() {
            next = next.min(now + jobs[t].front().unwrap().2);
        }
        let dt = next - now;
        // Measured accounting: each CPU's server is charged what its member executed.
        for &(t, server) in running.iter().flatten() {
            jobs[t].front_mut().unwrap().2 -= dt;
            if let Some(s) = server {
                sched.charge(next, s, dt).unwrap();
            }
        }
        now = next;
        if now >= end {
            break;
        }
        sched.update(now);
        for &(t, _) in running.iter().flatten() {
            if jobs[t].front().unwrap().2 > 0 {
                continue;
            }
            let (seq, rel, _) = jobs[t].pop_front().unwrap();
            completed[t] += 1;
            out.push((sys.tasks[t].name.clone(), seq, rel, now));
            match jobs[t].front() {
                Some(&(_, r, _)) => {
                    sched
                        .wake(now, ids[t], Some(r + sys.tasks[t].deadline))
                        .unwrap();
                }
                None => sched.block(now, ids[t]).unwrap(),
            }
        }
    }
    out.sort();
    out
}

/// Asserts both drivers agree; returns the simulated migrations.
fn assert_same(kind: PluginKind, cpus: u32, tasks: &[(Nanos, Nanos)], end: Nanos) -> u64 {
    let sys = system(kind, cpus, tasks);
    let (a, migrations) = simulated(&sys, end);
    let b = replayed(&sys, end);
    assert!(a.len() > tasks.len(), "{}: too few jobs", kind.name());
    let first = a.iter().zip(&b).position(|(x, y)| x != y);
    assert!(
        a == b,
        "{} on {cpus} CPUs: schedules differ (sim {} jobs, replay {} jobs), first at {:?}: {:?} vs {:?}",
        kind.name(),
        a.len(),
        b.len(),
        first,
        first.map(|i| &a[i]),
        first.map(|i| &b[i])
    );
    migrations
}

#[test]
fn three_heavy_tasks_same_schedule_in_both_drivers() {
    for kind in PluginKind::ALL {
        assert_same(kind, 2, &[(5_500_000, 10 * MS); 3], 200 * MS);
    }
}

#[test]
fn mixed_set_on_four_cpus_same_schedule_in_both_drivers() {
    // Heavy and light tasks with distinct periods: FP-PM splits, G-FP and FP-US migrate at
    // releases and completions, FP-US lifts the heavy ones (U >= 4/10).
    let set = [
        (MS, 5 * MS),
        (2 * MS, 8 * MS),
        (6 * MS, 10 * MS),
        (9 * MS, 16 * MS),
        (11 * MS, 20 * MS),
        (14 * MS, 25 * MS),
        (22 * MS, 40 * MS),
    ];
    for kind in PluginKind::ALL {
        let migrations = assert_same(kind, 4, &set, 400 * MS);
        // The plug-ins that move tasks did move them (the comparison covers migrations).
        match kind {
            PluginKind::FpFf => assert_eq!(migrations, 0, "fp-ff never migrates"),
            _ => assert!(migrations > 0, "{}: no migration", kind.name()),
        }
    }
}
