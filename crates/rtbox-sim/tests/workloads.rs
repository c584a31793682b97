//! Issue 4: workload features (chains, sporadic arrivals, jitter, execution-time models) and the
//! baselines on small systems with known answers.

use rtbox_model::{Arrival, BoxSpec, Interface, Nanos, Platform, System, TaskSpec};
use rtbox_sim::{simulate, ModelKind, SimOptions};

const MS: Nanos = 1_000_000;

fn boxed(mut t: TaskSpec, b: &str) -> TaskSpec {
    t.box_name = Some(b.into());
    t
}

fn one_box(tasks: Vec<TaskSpec>) -> System {
    let b = BoxSpec::new(
        "b",
        Interface::PerCpu {
            budget: 90 * MS,
            period: 100 * MS,
        },
    );
    let mut platform = Platform::with_cpus(1);
    platform.cap = rtbox_model::Bandwidth::ONE;
    System::new(platform, vec![b], tasks).unwrap()
}

#[test]
fn chain_releases_successor_on_completion() {
    let a = boxed(TaskSpec::periodic("a", MS, 10 * MS), "b");
    let mut c = boxed(TaskSpec::periodic("c", 2 * MS, 10 * MS), "b");
    c.after = Some("a".into());
    let opts = SimOptions {
        duration: 1000 * MS,
        record_jobs: true,
        ..SimOptions::default()
    };
    let r = simulate(&one_box(vec![a, c]), &opts).unwrap();
    let (ra, rc) = (r.task("a").unwrap(), r.task("c").unwrap());
    assert_eq!(ra.jobs, 100);
    assert_eq!(rc.jobs, 100);
    // End-to-end: c completes 3 ms after a's arrival (server budget is never short here).
    assert_eq!((rc.response.min, rc.response.max), (3 * MS, 3 * MS));
    let jobs = r.jobs.clone().unwrap();
    let first_c = jobs.iter().find(|j| j.task == "c").unwrap();
    assert_eq!(
        (first_c.arrival, first_c.release, first_c.deadline),
        (0, MS, 10 * MS)
    );
}

#[test]
fn sporadic_gaps_and_jitter_stay_in_their_bounds() {
    let mut s = boxed(TaskSpec::periodic("s", MS, 10 * MS), "b");
    s.arrival = Arrival::Sporadic;
    let mut j = boxed(TaskSpec::periodic("j", MS, 10 * MS), "b");
    j.jitter = 3 * MS;
    j.offset = 5 * MS;
    let opts = SimOptions {
        duration: 10_000 * MS,
        record_jobs: true,
        seed: 9,
        ..SimOptions::default()
    };
    let r = simulate(&one_box(vec![s, j]), &opts).unwrap();
    let jobs = r.jobs.clone().unwrap();
    let arrivals: Vec<Nanos> = jobs
        .iter()
        .filter(|x| x.task == "s")
        .map(|x| x.arrival)
        .collect();
    let mut sorted = arrivals.clone();
    sorted.sort_unstable();
    let gaps: Vec<Nanos> = sorted.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.iter().all(|&g| (10 * MS..=15 * MS).contains(&g)));
    assert!(gaps.iter().any(|&g| g > 11 * MS), "gaps vary");
    let n = r.task("s").unwrap().released;
    assert!(
        (700..=900).contains(&n),
        "about 10 s / 12.5 ms releases: {n}"
    );
    let jit: Vec<Nanos> = jobs
        .iter()
        .filter(|x| x.task == "j")
        .map(|x| x.release - x.arrival)
        .collect();
    assert!(jit.iter().all(|&d| d <= 3 * MS));
    assert!(jit.iter().any(|&d| d > MS) && jit.iter().any(|&d| d < 2 * MS));
    assert!(jobs
        .iter()
        .filter(|x| x.task == "j")
        .all(|x| x.arrival % (10 * MS) == 5 * MS));
}

#[test]
fn execution_times_fixed_uniform_and_listed() {
    let mut u = boxed(TaskSpec::periodic("u", 4 * MS, 10 * MS), "b");
    u.bcet = Some(2 * MS);
    let l = boxed(TaskSpec::periodic("l", 4 * MS, 10 * MS), "b");
    let mut opts = SimOptions {
        duration: 10_000 * MS,
        record_jobs: true,
        ..SimOptions::default()
    };
    opts.exec_lists.insert("l".into(), vec![MS, 2 * MS, 3 * MS]);
    let r = simulate(&one_box(vec![u, l]), &opts).unwrap();
    let jobs = r.jobs.clone().unwrap();
    let ue: Vec<Nanos> = jobs
        .iter()
        .filter(|j| j.task == "u")
        .map(|j| j.exec)
        .collect();
    assert!(ue.iter().all(|&e| (2 * MS..=4 * MS).contains(&e)));
    let mean = ue.iter().sum::<u64>() as f64 / ue.len() as f64;
    assert!((mean / MS as f64 - 3.0).abs() < 0.1, "uniform mean {mean}");
    let mut le: Vec<(u64, Nanos)> = jobs
        .iter()
        .filter(|j| j.task == "l")
        .map(|j| (j.seq, j.exec))
        .collect();
    le.sort_unstable();
    assert_eq!(
        le[..4].iter().map(|x| x.1).collect::<Vec<_>>(),
        vec![MS, 2 * MS, 3 * MS, MS]
    );
    // A list for an unknown task is refused with its name.
    let mut bad = SimOptions::default();
    bad.exec_lists.insert("nope".into(), vec![1]);
    let e = simulate(&one_box(vec![]), &bad).unwrap_err();
    assert!(e.to_string().contains("\"nope\""));
}

#[test]
fn baselines_fp_and_deadline_on_one_cpu() {
    let mut hi = boxed(TaskSpec::periodic("hi", 3 * MS, 10 * MS), "b");
    hi.priority = Some(10);
    let mut lo = boxed(TaskSpec::periodic("lo", 4 * MS, 10 * MS), "b");
    lo.priority = Some(5);
    let system = one_box(vec![hi, lo]);
    let fp = simulate(
        &system,
        &SimOptions {
            duration: 100 * MS,
            model: ModelKind::Fp,
            ..SimOptions::default()
        },
    )
    .unwrap();
    assert_eq!(fp.task("hi").unwrap().response.max, 3 * MS);
    assert_eq!(fp.task("lo").unwrap().response.max, 7 * MS);
    // Deadline: "lo" gets only 2 ms per 10 ms, so each 4 ms job takes two periods.
    let mut opts = SimOptions {
        duration: 1000 * MS,
        model: ModelKind::Deadline,
        ..SimOptions::default()
    };
    opts.dl_params
        .insert("lo".into(), (2 * MS, 10 * MS, 10 * MS));
    let dl = simulate(&system, &opts).unwrap();
    assert_eq!(dl.task("hi").unwrap().misses, 0);
    assert!(dl.task("lo").unwrap().misses > 40);
    let srv = dl.servers.iter().find(|s| s.name == "dl:lo").unwrap();
    assert!(srv.throttles > 40);
    assert!(srv.consumed <= 102 * 2 * MS);
}

/// The kernel's SCHED_DEADLINE tie rule: at equal deadlines the running reservation keeps its
/// CPU (`dl_entity_preempt` is a strict `dl_time_before`). Two CPUs, T0 and T1 3 ms every 5 ms,
/// T2 3 ms every 10 ms, all released at 0: at 5 ms the new jobs of T0 and T1 have deadline
/// 10 ms like the running T2, which finishes at 6 ms (as in Linux and SimSo), not at 9 ms.
#[test]
fn deadline_ties_keep_the_running_reservation() {
    let b = BoxSpec::new(
        "b",
        Interface::PerCpu {
            budget: MS,
            period: 10 * MS,
        },
    );
    let tasks = vec![
        boxed(TaskSpec::periodic("T0", 3 * MS, 5 * MS), "b"),
        boxed(TaskSpec::periodic("T1", 3 * MS, 5 * MS), "b"),
        boxed(TaskSpec::periodic("T2", 3 * MS, 10 * MS), "b"),
    ];
    let system = System::new(Platform::with_cpus(2), vec![b], tasks).unwrap();
    let r = simulate(
        &system,
        &SimOptions {
            duration: 10 * MS,
            model: ModelKind::Deadline,
            record_jobs: true,
            ..SimOptions::default()
        },
    )
    .unwrap();
    let jobs = r.jobs.as_ref().unwrap();
    let finish = |task: &str, seq: u64| {
        jobs.iter()
            .find(|j| j.task == task && j.seq == seq)
            .and_then(|j| j.finish)
    };
    assert_eq!(finish("T2", 0), Some(6 * MS));
    // The first jobs of T0 and T1 (deadline 5 ms) ran first, side by side.
    assert_eq!(
        (finish("T0", 0), finish("T1", 0)),
        (Some(3 * MS), Some(3 * MS))
    );
    // At 5 ms T0 woke first and took the free CPU; T1 waited for T2.
    assert_eq!(
        (finish("T0", 1), finish("T1", 1)),
        (Some(8 * MS), Some(9 * MS))
    );
}

/// Supply of a pinned box's servers is tracked with the core's own placement (round robin over
/// the box's servers for members without a `cpu`): `b` is the box's second member, so it lives
/// on the server of CPU 1, which it keeps busy; the server of CPU 0 only sees light work.
#[test]
fn pinned_supply_follows_the_cores_placement() {
    let mut b = BoxSpec::new(
        "p",
        Interface::PerCpu {
            budget: 5 * MS,
            period: 10 * MS,
        },
    );
    b.placement = rtbox_model::Placement::Pinned;
    b.cpus = Some(rtbox_model::CpuSet::first(2));
    let tasks = vec![
        boxed(TaskSpec::periodic("a", MS, 10 * MS), "p"),
        boxed(TaskSpec::periodic("b", 1000 * MS, 1000 * MS), "p"),
    ];
    let system = System::new(Platform::with_cpus(2), vec![b], tasks).unwrap();
    let r = simulate(
        &system,
        &SimOptions {
            duration: 500 * MS,
            ..SimOptions::default()
        },
    )
    .unwrap();
    let server = |cpu: u32| r.servers.iter().find(|s| s.cpu == cpu).unwrap();
    let busy = &server(1).supply[1];
    assert_eq!(busy.window, 10 * MS);
    assert!(busy.worst.is_some_and(|w| w >= busy.sbf), "{busy:?}");
    assert!(server(0).supply.iter().all(|w| w.worst.is_none()));
    assert_eq!(server(1).consumed, 250 * MS);
}

/// The report counts the members moved onto each server. A task of 4 ms every 10 ms in a global
/// box of 2 ms / 10 ms on each of two CPUs needs both vCPUs every period, so it moves onto
/// each of them every period; pinned, it stays on one (and gets 2 ms a period).
#[test]
fn the_report_counts_members_moved_onto_each_server() {
    let run = |placement| {
        let mut b = BoxSpec::new(
            "g",
            Interface::PerCpu {
                budget: 2 * MS,
                period: 10 * MS,
            },
        );
        b.placement = placement;
        let tasks = vec![boxed(TaskSpec::periodic("t", 4 * MS, 10 * MS), "g")];
        let system = System::new(Platform::with_cpus(2), vec![b], tasks).unwrap();
        let opts = SimOptions {
            duration: 100 * MS,
            model: ModelKind::Rtbox,
            ..SimOptions::default()
        };
        simulate(&system, &opts).unwrap().servers
    };
    let global = run(rtbox_model::Placement::Global);
    assert_eq!(global.len(), 2);
    for s in &global {
        assert!(
            (9..=10).contains(&s.migrations),
            "{}: {} members moved in over 10 periods",
            s.name,
            s.migrations
        );
    }
    let pinned = run(rtbox_model::Placement::Pinned);
    assert!(pinned.iter().all(|s| s.migrations == 0), "{pinned:?}");
}
