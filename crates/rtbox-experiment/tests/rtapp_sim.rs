//! Issue 4: the same workload runs in the simulator and for real. A task set written as rt-app
//! JSON and read back simulates exactly like the original.

use rtbox_model::{BoxSpec, Interface, Platform, Policy, System};
use rtbox_sim::{simulate, SimOptions};
use rtbox_workload::rtapp::{emit, parse, EmitOptions};
use rtbox_workload::taskset::{Priorities, TaskSetParams};
use rtbox_workload::Rng;

#[test]
fn rt_app_round_trip_simulates_identically() {
    let mut rng = Rng::seed(3);
    let mut b = BoxSpec::new(
        "app",
        Interface::PerCpu {
            budget: 8_000_000,
            period: 10_000_000,
        },
    );
    b.policy = Policy::Fifo;
    for _ in 0..10 {
        let params = TaskSetParams {
            tasks: 5,
            utilization: 1.2,
            priorities: Priorities::DeadlineMonotonic,
            box_name: Some("app".into()),
            granularity: 1_000,
            ..TaskSetParams::default()
        };
        let tasks = params.generate(&mut rng).unwrap();
        let json = emit(&tasks, &EmitOptions::default()).unwrap();
        let back = parse(&json).unwrap().tasks;
        let a = System::new(Platform::with_cpus(2), vec![b.clone()], tasks).unwrap();
        let z = System::new(Platform::with_cpus(2), vec![b.clone()], back).unwrap();
        let opts = SimOptions {
            duration: 2_000_000_000,
            ..SimOptions::default()
        };
        let (ra, rz) = (simulate(&a, &opts).unwrap(), simulate(&z, &opts).unwrap());
        assert!(ra.tasks.iter().map(|t| t.jobs).sum::<u64>() > 50);
        for (x, y) in ra.tasks.iter().zip(&rz.tasks) {
            assert_eq!(
                (x.jobs, x.misses, x.response.max, x.executed),
                (y.jobs, y.misses, y.response.max, y.executed)
            );
        }
    }
}
