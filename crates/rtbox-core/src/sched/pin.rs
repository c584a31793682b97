//! The vCPU a member of a pinned box sits on (rules in `rtbox_model::placement`).

use rtbox_model::least_loaded_vcpu;

use rtbox_model::{Nanos, Placement};

use super::Scheduler;
use crate::types::{CoreError, Event, ServerId, TaskId, TaskParams};

impl Scheduler {
    /// The home server in pinned box `b` of task `p`: its named CPU (`cpu_idx`), else the
    /// CPU of the plan, else the box's vCPU with the fewest members (lowest CPU on ties).
    pub(super) fn pinned_home(
        &self,
        b: usize,
        p: &TaskParams,
        cpu_idx: Option<usize>,
    ) -> Result<ServerId, CoreError> {
        let bx = &self.boxes[b];
        let on_cpu = |ci: usize| {
            bx.servers
                .iter()
                .copied()
                .find(|s| self.servers[s.index()].cpu_idx == ci)
        };
        if let Some(ci) = cpu_idx {
            return on_cpu(ci).ok_or_else(|| CoreError::NoServerOnCpu {
                task: p.name.clone(),
                box_name: bx.name.clone(),
                cpu: p.cpu.unwrap_or(0),
            });
        }
        // A planned CPU always has a server of the box when the plan is of this system; a
        // stale plan falls through to the fallback rather than refusing the task.
        if let Some(home) = self
            .plan
            .cpu(&bx.name, &p.name)
            .and_then(|c| self.cpu_idx(c))
            .and_then(on_cpu)
        {
            return Ok(home);
        }
        let loads = bx.servers.iter().map(|s| {
            let srv = &self.servers[s.index()];
            (self.cpus[srv.cpu_idx].id, srv.members.len())
        });
        let cpu = least_loaded_vcpu(loads).expect("a pinned box with servers");
        let ci = self
            .cpu_idx(cpu)
            .expect("a server's CPU is on the platform");
        Ok(on_cpu(ci).expect("the chosen CPU has a server of the box"))
    }

    /// Moves a member of a pinned box to the box's vCPU on `cpu` (a plug-in's `migrate_task`,
    /// seed 001 section IV). The member keeps its readiness and FIFO place; a ready member
    /// competes on its new vCPU from the next decision, as `set_cpus_allowed_ptr` moves a
    /// runnable task to the new CPU's run queue. Returns the new home server.
    pub fn move_member(&mut self, now: Nanos, t: TaskId, cpu: u32) -> Result<ServerId, CoreError> {
        let tk = *self.task(t)?;
        let name = self.spec(t).name.clone();
        let (Some(b), Some(from)) = (tk.box_idx, tk.home) else {
            return Err(CoreError::NotPinnedMember { task: name });
        };
        if self.boxes[b].placement != Placement::Pinned {
            return Err(CoreError::NotPinnedMember { task: name });
        }
        let ci = self.cpu_idx(cpu).ok_or_else(|| CoreError::UnknownCpu {
            task: name.clone(),
            cpu,
        })?;
        let to = self.boxes[b]
            .servers
            .iter()
            .copied()
            .find(|s| self.servers[s.index()].cpu_idx == ci)
            .ok_or_else(|| CoreError::NoServerOnCpu {
                task: name,
                box_name: self.boxes[b].name.clone(),
                cpu,
            })?;
        if to == from {
            return Ok(to);
        }
        let old = &mut self.servers[from.index()].members;
        if let Some(i) = old.iter().position(|&x| x == t) {
            old.remove(i);
        }
        self.servers[to.index()].members.push(t);
        let tk = &mut self.tasks[t.index()];
        tk.home = Some(to);
        tk.placed = Some(to);
        tk.cpu_idx = Some(ci);
        self.servers[to.index()].migrations += 1;
        if self.opts.record_events {
            self.events.push_back(Event::Migrated {
                at: now,
                task: t,
                from,
                to,
            });
        }
        self.dirty = true;
        self.all_touched = true;
        Ok(to)
    }
}

#[cfg(test)]
mod tests {
    use rtbox_model::{BoxSpec, Interface, PinPlan, Placement, Platform, System};

    use crate::{Options, Scheduler, TaskParams};

    fn pinned(cpus: u32) -> System {
        let mut b = BoxSpec::new(
            "vm",
            Interface::PerCpu {
                budget: 10,
                period: 100,
            },
        );
        b.placement = Placement::Pinned;
        System::new(Platform::with_cpus(cpus), vec![b], vec![]).unwrap()
    }

    fn member(name: &str, cpu: Option<u32>) -> TaskParams {
        TaskParams {
            box_name: Some("vm".into()),
            cpu,
            ..TaskParams::background(name, 1)
        }
    }

    fn cpu_of(s: &Scheduler, t: crate::TaskId) -> u32 {
        s.server(s.placement(t).expect("pinned")).cpu
    }

    #[test]
    fn unplanned_members_go_to_the_vcpu_with_fewest_members() {
        let mut s = Scheduler::new(&pinned(3), Options::default()).unwrap();
        let named = s.add_task(member("n", Some(0))).unwrap();
        let a = s.add_task(member("a", None)).unwrap();
        let b = s.add_task(member("b", None)).unwrap();
        let c = s.add_task(member("c", None)).unwrap();
        // CPU 0 holds the named task: 1 and 2 first, then the lowest of the three ties.
        let got: Vec<u32> = [named, a, b, c].iter().map(|&t| cpu_of(&s, t)).collect();
        assert_eq!(got, vec![0, 1, 2, 0]);
    }

    #[test]
    fn planned_members_follow_the_plan_and_a_named_cpu_wins() {
        let mut plan = PinPlan::default();
        plan.insert("vm", "a", 2);
        plan.insert("vm", "b", 2);
        plan.insert("vm", "n", 1);
        // A stale entry (no such CPU) falls back instead of refusing the task.
        plan.insert("vm", "stale", 7);
        let mut s = Scheduler::with_plan(&pinned(3), Options::default(), plan).unwrap();
        let a = s.add_task(member("a", None)).unwrap();
        let b = s.add_task(member("b", None)).unwrap();
        let n = s.add_task(member("n", Some(0))).unwrap();
        let stale = s.add_task(member("stale", None)).unwrap();
        let got: Vec<u32> = [a, b, n, stale].iter().map(|&t| cpu_of(&s, t)).collect();
        assert_eq!(got, vec![2, 2, 0, 1]);
    }
}

#[cfg(test)]
mod move_tests {
    use rtbox_model::{BoxSpec, Interface, Placement, Platform, System};

    use crate::{CoreError, Options, Scheduler, TaskParams};

    fn boxed(placement: Placement) -> Scheduler {
        let mut b = BoxSpec::new(
            "g",
            Interface::PerCpu {
                budget: 5,
                period: 10,
            },
        );
        b.placement = placement;
        let sys = System::new(Platform::with_cpus(2), vec![b], vec![]).unwrap();
        Scheduler::new(&sys, Options::default()).unwrap()
    }

    fn member(name: &str, cpu: u32) -> TaskParams {
        TaskParams {
            box_name: Some("g".into()),
            cpu: Some(cpu),
            ..TaskParams::background(name, 1)
        }
    }

    #[test]
    fn a_ready_member_runs_on_its_new_vcpu() {
        let mut s = boxed(Placement::Pinned);
        let a = s.add_task(member("a", 0)).unwrap();
        let b = s.add_task(member("b", 0)).unwrap();
        s.wake(0, a, None).unwrap();
        s.wake(0, b, None).unwrap();
        s.advance(0);
        assert!(s.running(1).is_none(), "both on CPU 0, one waits");
        let to = s.move_member(0, b, 1).unwrap();
        assert_eq!(s.server(to).cpu, 1);
        s.advance(0);
        assert_eq!(s.running(0).map(|r| r.task), Some(a));
        assert_eq!(s.running(1).map(|r| r.task), Some(b));
        assert_eq!(s.placement(b), Some(to));
    }

    #[test]
    fn only_pinned_members_move() {
        let mut s = boxed(Placement::Global);
        let a = s
            .add_task(TaskParams {
                box_name: Some("g".into()),
                ..TaskParams::background("a", 1)
            })
            .unwrap();
        assert!(matches!(
            s.move_member(0, a, 1),
            Err(CoreError::NotPinnedMember { .. })
        ));
        let mut p = boxed(Placement::Pinned);
        let b = p.add_task(member("b", 0)).unwrap();
        assert!(matches!(
            p.move_member(0, b, 7),
            Err(CoreError::UnknownCpu { .. })
        ));
    }
}
