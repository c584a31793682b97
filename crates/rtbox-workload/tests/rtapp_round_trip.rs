//! Issue 4: the same workload runs in the simulator and for real. Task sets written as rt-app
//! JSON parse back to the same tasks.

use rtbox_model::{Arrival, TaskSpec};
use rtbox_workload::rtapp::{emit, parse, EmitOptions, EmitPolicy, TimerMode};
use rtbox_workload::taskset::{Deadlines, Priorities, TaskSetParams};
use rtbox_workload::Rng;

fn random_sets() -> Vec<Vec<TaskSpec>> {
    let mut rng = Rng::seed(77);
    let mut out = Vec::new();
    for i in 0..200usize {
        let params = TaskSetParams {
            tasks: 1 + i % 12,
            utilization: 0.2 + (i % 7) as f64 * 0.1,
            max_task_util: 1.0,
            period_min: 1_000_000,
            period_max: 1_000_000_000,
            granularity: 1_000,
            deadlines: if i % 2 == 0 {
                Deadlines::Implicit
            } else {
                Deadlines::Constrained
            },
            priorities: if i % 3 == 0 {
                Priorities::DeadlineMonotonic
            } else {
                Priorities::Unset
            },
            box_name: (i % 4 == 0).then(|| "media/audio".to_string()),
            ..TaskSetParams::default()
        };
        let mut set = params.generate(&mut rng).unwrap();
        for (j, t) in set.iter_mut().enumerate() {
            if j % 3 == 1 {
                t.bcet = Some(t.wcet / 2 + 1);
                t.offset = 1234;
                t.cpu = Some(j as u32 % 4);
            }
            if j % 5 == 4 {
                t.arrival = Arrival::Sporadic;
            }
        }
        out.push(set);
    }
    out
}

#[test]
fn fifo_emission_round_trips_exactly() {
    for set in random_sets() {
        let text = emit(&set, &EmitOptions::default()).unwrap();
        let back = parse(&text).unwrap();
        assert_eq!(back.tasks.len(), set.len());
        for (a, b) in set.iter().zip(&back.tasks) {
            let mut want = a.clone();
            // Unset priorities become the emitted deadline-monotonic SCHED_FIFO ones.
            if want.priority.is_none() {
                want.priority = b.priority;
                assert!(matches!(b.priority, Some(1..=99)));
            }
            assert_eq!(&want, b, "\n{text}");
        }
        assert!(back
            .threads
            .iter()
            .all(|t| t.timer == Some(TimerMode::Absolute)));
    }
}

#[test]
fn deadline_emission_round_trips_and_carries_reservations() {
    for set in random_sets().into_iter().take(50) {
        let opts = EmitOptions {
            policy: EmitPolicy::Deadline,
            duration: Some(3_500_000_000),
            ..EmitOptions::default()
        };
        let text = emit(&set, &opts).unwrap();
        let back = parse(&text).unwrap();
        assert_eq!(back.duration, Some(4_000_000_000));
        for ((a, b), th) in set.iter().zip(&back.tasks).zip(&back.threads) {
            assert_eq!(a, b);
            let dl = th.dl.unwrap();
            assert_eq!(dl.runtime, a.wcet.div_ceil(1000) * 1000);
            assert_eq!(
                (dl.period, dl.deadline),
                (a.period, a.deadline / 1000 * 1000)
            );
        }
    }
}

#[test]
fn without_the_rtbox_object_values_are_rounded_up_to_microseconds() {
    let mut t = TaskSpec::periodic("x", 1_500_001, 10_000_000);
    t.priority = Some(7);
    let text = emit(&[t], &EmitOptions::default()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut plain = v.clone();
    plain.as_object_mut().unwrap().remove("rtbox");
    assert_eq!(v["tasks"]["x"]["run"], 1501);
    assert_eq!(v["tasks"]["x"]["timer"]["mode"], "absolute");
    let back = parse(&plain.to_string()).unwrap();
    assert_eq!(back.tasks[0].wcet, 1_501_000);
    assert_eq!(back.tasks[0].priority, Some(7));
}
