//! Parts of the `status` reply built from the members table.

use crate::runtime::Runtime;

/// Each member of `box_name` and how it is stopped when throttled:
/// `{"tid", "pid", "mechanism": "freeze", "group"}` (its own threaded cgroup inside its
/// original one) or `{"tid", "pid", "mechanism": "idle", "reason"}` (SCHED_IDLE, nothing moved).
pub fn member_stops(rt: &Runtime, box_name: &str) -> Vec<serde_json::Value> {
    rt.member_stops(box_name)
        .into_iter()
        .map(|(tid, pid, stop)| {
            let mut v = stop
                .and_then(|s| serde_json::to_value(s).ok())
                .unwrap_or_else(|| serde_json::json!({"mechanism": "none"}));
            v["tid"] = tid.into();
            v["pid"] = pid.into();
            v
        })
        .collect()
}
