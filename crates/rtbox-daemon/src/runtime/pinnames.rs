//! Members of a pinned box that are tasks of the configuration sit on the vCPU the analysis's
//! partition chose for them, not on the fallback's least-loaded vCPU.
//!
//! The partition has one home, `rtbox_analysis::pin_plan` (a [`PinPlan`] by box and task
//! name, the one the analysis reports bounds for and the simulator follows); the daemon is
//! handed it with the configuration ([`super::Runtime::set_pin_plan`]) and only looks up a
//! member's thread name in it. A thread joins when it is forked, before it names itself
//! (rt-app and `rtbox load` name each thread after its task right after it starts), so it is
//! first placed by the fallback; once its name matches a planned task of its box, the core
//! moves it to the planned vCPU (`Scheduler::move_member`, the same move a plug-in's migration
//! makes), and the next step gives it that CPU. The kernel keeps 15 bytes of a thread's name,
//! so a task name longer than that does not match (the member stays where the fallback put it).

use std::collections::BTreeSet;

use rtbox_core::Scheduler;
use rtbox_model::{Nanos, PinPlan};

use super::members::Members;

/// The plan, and the members already moved by it.
#[derive(Debug, Default)]
pub struct PinNames {
    plan: PinPlan,
    moved: BTreeSet<i32>,
}

/// Rule: the planned CPU of a member of box `box_name` whose thread is named `comm`, if the
/// partition placed a task of that name in that box (only pinned boxes have entries).
pub fn planned_cpu(plan: &PinPlan, box_name: &str, comm: &str) -> Option<u32> {
    plan.cpu(box_name, comm.trim_end())
}

fn thread_name(pid: i32, tid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok()
}

impl PinNames {
    /// A new plan (configuration loaded or reloaded): members are looked up again.
    pub fn set_plan(&mut self, plan: PinPlan) {
        self.plan = plan;
        self.moved.clear();
    }

    /// Moves every member not moved yet whose thread name the plan places; `true` when one
    /// moved (its affinity changes at the next decision). One read of the thread's name per
    /// member not yet moved, and none at all without a plan.
    pub fn place(&mut self, members: &Members, sched: &mut Scheduler, now: Nanos) -> bool {
        if self.plan.is_empty() {
            return false;
        }
        self.moved.retain(|t| members.by_tid.contains_key(t));
        let mut any = false;
        for (&tid, m) in &members.by_tid {
            if self.moved.contains(&tid) {
                continue;
            }
            let Some(cpu) =
                thread_name(m.pid, tid).and_then(|n| planned_cpu(&self.plan, &m.box_name, &n))
            else {
                continue;
            };
            match sched.move_member(now, m.task, cpu) {
                Ok(_) => {
                    tracing::debug!(tid, cpu, "member placed on its planned vCPU");
                    self.moved.insert(tid);
                    any = true;
                }
                Err(e) => tracing::debug!(tid, cpu, error = %e, "planned vCPU refused"),
            }
        }
        any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_name_finds_its_planned_cpu_in_its_own_box_only() {
        let mut plan = PinPlan::default();
        plan.insert("P", "t0", 1);
        assert_eq!(planned_cpu(&plan, "P", "t0\n"), Some(1));
        assert_eq!(planned_cpu(&plan, "Q", "t0\n"), None);
        assert_eq!(planned_cpu(&plan, "P", "t1\n"), None);
    }
}
