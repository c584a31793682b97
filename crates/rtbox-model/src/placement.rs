//! Where the members of a pinned box run: each sits on one vCPU (one server of the box) for
//! good. This module owns the placement as data and the rule for tasks nobody planned.
//!
//! - A task that names a `cpu` sits on the box's server on that CPU.
//! - A task with WCET and period (configuration and simulator tasks) sits where the
//!   partitioning of the analysis put it (`rtbox_analysis::pin_plan`: decreasing utilization,
//!   first/best/worst fit with the exact one-vCPU test). The analysis computes a [`PinPlan`]
//!   and the scheduling core follows it, so the bound the analysis reports is for the vCPU the
//!   task really runs on.
//! - A task without timing information (a thread the runtime adopts) or one the analysis could
//!   not place goes to [`least_loaded_vcpu`].

use std::collections::BTreeMap;

/// The CPU (of a pinned box's vCPU) chosen for each task, by (box name, task name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PinPlan {
    cpus: BTreeMap<(String, String), u32>,
}

impl PinPlan {
    /// Places task `task` of box `box_name` on the box's vCPU on `cpu`.
    pub fn insert(&mut self, box_name: &str, task: &str, cpu: u32) {
        self.cpus
            .insert((box_name.to_string(), task.to_string()), cpu);
    }

    /// The planned CPU of a task, if the plan has one.
    pub fn cpu(&self, box_name: &str, task: &str) -> Option<u32> {
        // BTreeMap lookups need an owned key of the same type; plans are small.
        self.cpus
            .get(&(box_name.to_string(), task.to_string()))
            .copied()
    }

    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty()
    }

    pub fn len(&self) -> usize {
        self.cpus.len()
    }
}

/// The fallback rule for a task without WCET and period: the vCPU with the fewest members,
/// ties to the lowest CPU id. Without demand figures the member count is the only load
/// measure, and it spreads tasks registered one after another in round-robin order.
/// `vcpus` yields (CPU id, members now) per vCPU of the box; `None` when it yields nothing.
pub fn least_loaded_vcpu(vcpus: impl IntoIterator<Item = (u32, usize)>) -> Option<u32> {
    vcpus
        .into_iter()
        .min_by_key(|&(cpu, members)| (members, cpu))
        .map(|(cpu, _)| cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fewest_members_first_then_lowest_cpu() {
        assert_eq!(least_loaded_vcpu([(3, 1), (1, 2), (2, 1)]), Some(2));
        assert_eq!(least_loaded_vcpu([(5, 0), (4, 0)]), Some(4));
        assert_eq!(least_loaded_vcpu(std::iter::empty()), None);
    }

    #[test]
    fn a_plan_answers_by_box_and_task() {
        let mut p = PinPlan::default();
        p.insert("b", "t", 3);
        assert_eq!(p.cpu("b", "t"), Some(3));
        assert_eq!(p.cpu("c", "t"), None);
        assert_eq!(p.cpu("b", "u"), None);
        assert_eq!(p.len(), 1);
    }
}
