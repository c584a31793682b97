//! Issue 4: randomized wake/block/advance sequences on random systems. Checks, from outside,
//! what the core's debug assertions check inside: a task runs on at most one CPU, a running
//! server is not throttled, runs its own box's members on its own CPU, and no server consumes
//! more than its budget per period (bandwidth isolation).

use rtbox_core::{Options, Scheduler, ServerId, TaskId, TaskParams};
use rtbox_model::{BoxSpec, CpuSet, Interface, Mode, Placement, Platform, Policy, System};

struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

fn random_system(rng: &mut Lcg) -> System {
    let ncpu = 1 + rng.next(4) as u32;
    let nbox = 1 + rng.next(4);
    let mut boxes = Vec::new();
    for b in 0..nbox {
        let period = 10 + rng.next(90);
        // Keep every CPU under 0.95: at most 0.2 per box.
        let budget = 1 + rng.next(period / 5);
        let mut spec = BoxSpec::new(format!("b{b}"), Interface::PerCpu { budget, period });
        let mut cpus = CpuSet::new();
        for c in 0..ncpu {
            if rng.next(3) > 0 || c == 0 {
                cpus.insert(c);
            }
        }
        spec.cpus = Some(cpus);
        spec.policy = [Policy::Fifo, Policy::Edf, Policy::Fair][rng.next(3) as usize];
        spec.placement = [Placement::Global, Placement::Pinned][rng.next(2) as usize];
        spec.mode = [Mode::Hard, Mode::Reclaim][rng.next(2) as usize];
        boxes.push(spec);
    }
    System::new(Platform::with_cpus(ncpu), boxes, vec![]).unwrap()
}

#[test]
fn issue4_random_sequences_keep_the_invariants() {
    let mut rng = Lcg(42);
    for round in 0..200 {
        let system = random_system(&mut rng);
        let mut s = Scheduler::new(&system, Options::default()).unwrap();
        let nbox = system.boxes().len() as u64;
        let ntask = 1 + rng.next(8);
        let mut box_of = Vec::new();
        for t in 0..ntask {
            let b = rng.next(nbox + 1);
            let p = if b == nbox {
                box_of.push(None);
                TaskParams::background(format!("t{t}"), rng.next(99) as u32)
            } else {
                box_of.push(Some(format!("b{b}")));
                TaskParams {
                    box_name: Some(format!("b{b}")),
                    ..TaskParams::background(format!("t{t}"), rng.next(99) as u32)
                }
            };
            s.add_task(p).unwrap();
        }
        let mut now = 0;
        s.advance(0);
        for _ in 0..300 {
            // The protocol: never step past next_timer().
            let limit = s.next_timer().map_or(u64::MAX, |t| t - now);
            let step = match rng.next(2) {
                0 => limit.min(100),
                _ => rng.next(20).min(limit),
            };
            now += step;
            s.update(now);
            for _ in 0..rng.next(3) {
                let t = TaskId(rng.next(ntask) as u32);
                if rng.next(2) == 0 {
                    s.wake(now, t, Some(now + rng.next(100))).unwrap();
                } else {
                    s.block(now, t).unwrap();
                }
            }
            s.advance(now);
            let mut seen = Vec::new();
            for cpu in s.cpus().collect::<Vec<_>>() {
                let Some(r) = s.running(cpu) else { continue };
                assert!(!seen.contains(&r.task), "round {round}: a task on two CPUs");
                seen.push(r.task);
                if let Some(sid) = r.server {
                    let info = s.server(sid);
                    assert!(!info.throttled, "round {round}: throttled server runs");
                    assert!(info.runtime > 0);
                    assert_eq!(info.cpu, cpu);
                    assert_eq!(info.box_name, box_of[r.task.index()].as_deref());
                }
            }
            assert!(s.next_timer().is_none_or(|t| t >= now));
        }
        for i in 0..s.server_count() {
            let info = s.server(ServerId(i as u32));
            let periods = now / info.period + 2;
            assert!(
                info.consumed <= periods * info.budget,
                "round {round}: server {i} consumed {} in {now} (Q {} P {})",
                info.consumed,
                info.budget,
                info.period
            );
        }
    }
}

/// Nested boxes run on the flattened servers: the parent's own members on its remainder.
#[test]
fn issue4_nested_box_members_use_their_own_servers() {
    let parent = BoxSpec::new(
        "media",
        Interface::PerCpu {
            budget: 50,
            period: 100,
        },
    );
    let child = BoxSpec::new(
        "media/audio",
        Interface::PerCpu {
            budget: 20,
            period: 100,
        },
    );
    let system = System::new(Platform::with_cpus(1), vec![parent, child], vec![]).unwrap();
    let mut s = Scheduler::new(&system, Options::default()).unwrap();
    let p = s
        .add_task(TaskParams {
            box_name: Some("media".into()),
            ..TaskParams::background("p", 1)
        })
        .unwrap();
    let c = s
        .add_task(TaskParams {
            box_name: Some("media/audio".into()),
            ..TaskParams::background("c", 1)
        })
        .unwrap();
    s.wake(0, p, None).unwrap();
    s.wake(0, c, None).unwrap();
    let mut now = 0;
    s.advance(0);
    while now < 1000 {
        now = s.next_timer().unwrap().min(1000);
        s.advance(now);
    }
    let used = |name: &str| -> u64 {
        s.box_servers(name)
            .iter()
            .map(|&id| s.server(id).consumed)
            .sum()
    };
    assert_eq!(used("media/audio"), 200, "child: 20 per 100");
    assert_eq!(used("media"), 300, "parent keeps 50 - 20 = 30 per 100");
}

/// Reclaim mode: a throttled box's member runs on an otherwise idle CPU, without budget.
#[test]
fn issue4_reclaim_mode_uses_idle_time_only() {
    let mut b = BoxSpec::new(
        "r",
        Interface::PerCpu {
            budget: 10,
            period: 100,
        },
    );
    b.mode = Mode::Reclaim;
    let system = System::new(Platform::with_cpus(1), vec![b], vec![]).unwrap();
    let mut s = Scheduler::new(&system, Options::default()).unwrap();
    let t = s
        .add_task(TaskParams {
            box_name: Some("r".into()),
            ..TaskParams::background("t", 1)
        })
        .unwrap();
    let bg = s.add_task(TaskParams::background("bg", 1)).unwrap();
    s.wake(0, t, None).unwrap();
    s.advance(0);
    s.advance(10);
    let r = s.running(0).unwrap();
    assert_eq!(
        (r.task, r.server),
        (t, None),
        "reclaims the idle CPU after throttling"
    );
    s.wake(10, bg, None).unwrap();
    s.advance(10);
    assert_eq!(
        s.running(0).unwrap().task,
        bg,
        "background work comes before reclaiming"
    );
    assert_eq!(s.server(s.box_servers("r")[0]).consumed, 10);
}
