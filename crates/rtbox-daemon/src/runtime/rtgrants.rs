//! RT runtime given to the v1 cpu cgroups of members (RT group scheduling), so that no member
//! leaves its cgroup to become SCHED_FIFO (`rtbox_linux::rtgrant`). One grant per cgroup, held
//! while any member thread in it is managed.

use std::collections::{BTreeMap, BTreeSet};

use rtbox_core::Scheduler;
use rtbox_linux::cgroup::{self, Layout};
use rtbox_linux::rtgrant::{self, Increment};
use rtbox_linux::snapshot::ThreadSnapshot;

/// RT runtime per (default 1 s) period a member of `box_name` may need in its cgroup: its
/// largest server's bandwidth over the period, plus two budgets (an RT period not aligned with
/// the server's periods may hold one server period more than its share, and overruns are paid
/// back only in the next server period) and 10 ms of slack, at most the whole period. Too
/// little would let the kernel's RT group throttling stop the member for the rest of its 1 s
/// period, on top of rtbox's own throttling.
pub fn want_us(sched: &Scheduler, box_name: &str) -> i64 {
    const PERIOD_US: u128 = 1_000_000;
    sched
        .box_info(box_name)
        .map(|b| {
            b.servers
                .iter()
                .map(|&s| {
                    let v = sched.server(s);
                    let share = (v.budget as u128 * PERIOD_US).div_ceil(v.period.max(1) as u128);
                    (share + 2 * (v.budget as u128).div_ceil(1000) + 10_000).min(PERIOD_US) as i64
                })
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// The cgroups given RT runtime and the member threads that hold each grant.
#[derive(Debug, Default)]
pub struct RtGrants {
    holders: BTreeMap<String, BTreeSet<i32>>,
    /// Cgroups whose grant nobody holds any more but the kernel refused to take back (a member
    /// that just exited still counts there): kept on record and retried by [`RtGrants::retry`].
    leftover: BTreeSet<String>,
}

impl RtGrants {
    /// Before the journal is saved: plans the grant a new member needs (its v1 cpu cgroup has
    /// no RT runtime) into `grants`, or adds it to the holders of one already made.
    pub fn plan(
        &mut self,
        layout: &Layout,
        snap: &ThreadSnapshot,
        want: i64,
        grants: &mut BTreeMap<String, Vec<Increment>>,
    ) {
        let Some(v1) = snap.cgroups.v1_cpu.as_ref().filter(|v| v.as_str() != "/") else {
            return;
        };
        if let Some(h) = self.holders.get_mut(v1) {
            h.insert(snap.tid);
            return;
        }
        // A grant still on record (its take-back was refused) serves the new member as it is.
        if grants.contains_key(v1) && self.leftover.remove(v1) {
            self.holders.insert(v1.clone(), BTreeSet::from([snap.tid]));
            return;
        }
        if !cgroup::v1_cpu_denies_rt(layout, v1) {
            return;
        }
        match rtgrant::plan(layout, v1, want) {
            Ok(incs) => {
                grants.insert(v1.clone(), incs);
                self.holders.insert(v1.clone(), BTreeSet::from([snap.tid]));
            }
            Err(e) => {
                tracing::warn!(tid = snap.tid, cgroup = %v1, error = %e, "cannot give the member's cgroup RT runtime; it stays at its policy");
            }
        }
    }

    /// After the journal is saved: writes the grants planned for the cgroups `fresh` (those
    /// this batch of members planned; the others are in the kernel already).
    pub fn apply(
        &mut self,
        layout: &Layout,
        fresh: &[String],
        grants: &mut BTreeMap<String, Vec<Increment>>,
    ) {
        for cg in fresh {
            let Some(incs) = grants.get(cg) else { continue };
            if let Err(e) = rtgrant::apply(layout, incs) {
                tracing::warn!(cgroup = %cg, error = %e, "cannot give the member's cgroup RT runtime");
                grants.remove(cg);
                self.holders.remove(cg);
            } else {
                tracing::info!(cgroup = %cg, increments = ?incs, "v1 cpu cgroup given RT runtime");
            }
        }
    }

    /// A member left (after its policy is back): the last one of a cgroup takes its grant
    /// back.
    pub fn release(
        &mut self,
        layout: &Layout,
        tid: i32,
        grants: &mut BTreeMap<String, Vec<Increment>>,
    ) {
        let emptied: Vec<String> = self
            .holders
            .iter_mut()
            .filter_map(|(cg, h)| (h.remove(&tid) && h.is_empty()).then(|| cg.clone()))
            .collect();
        for cg in emptied {
            self.holders.remove(&cg);
            self.take_back(layout, cg, grants);
        }
    }

    /// Member `old` is now thread `new` (an exec by a thread other than its process's
    /// leader): it holds its grants under its new tid.
    pub fn rename(&mut self, old: i32, new: i32) {
        for h in self.holders.values_mut() {
            if h.remove(&old) {
                h.insert(new);
            }
        }
    }

    /// Returns a grant nobody holds; what the kernel refuses stays on record for a retry.
    fn take_back(
        &mut self,
        layout: &Layout,
        cg: String,
        grants: &mut BTreeMap<String, Vec<Increment>>,
    ) {
        let Some(incs) = grants.remove(&cg) else {
            return;
        };
        let (left, err) = rtgrant::undo_partial(layout, &incs);
        if let Some(e) = err {
            tracing::debug!(cgroup = %cg, error = %e, "RT runtime not taken back yet; retried");
        }
        if !left.is_empty() {
            grants.insert(cg.clone(), left);
            self.leftover.insert(cg);
        }
    }

    /// Retries the take-back of grants the kernel refused before.
    pub fn retry(&mut self, layout: &Layout, grants: &mut BTreeMap<String, Vec<Increment>>) {
        for cg in std::mem::take(&mut self.leftover) {
            self.take_back(layout, cg, grants);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtbox_linux::cgroup::LayoutKind;
    use std::fs;

    /// A take-back the kernel refuses (here: an unreadable file) keeps the grant on record,
    /// and the retry returns it once the cgroup lets go.
    #[test]
    fn a_refused_take_back_stays_on_record_until_a_retry_succeeds() {
        let root = std::env::temp_dir().join(format!("rtbox-rtgrants-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        for (rel, v) in [("", 950_000), ("pod", 100_000), ("pod/b", 0)] {
            fs::create_dir_all(root.join(rel)).unwrap();
            fs::write(root.join(rel).join("cpu.rt_runtime_us"), v.to_string()).unwrap();
        }
        let layout = Layout {
            kind: LayoutKind::V1,
            v2: None,
            v1_cpu: Some(root.clone()),
        };
        let incs = rtgrant::plan(&layout, "/pod/b", 300_000).unwrap();
        rtgrant::apply(&layout, &incs).unwrap();
        let mut grants = BTreeMap::from([("/pod/b".to_string(), incs.clone())]);
        let mut rt = RtGrants::default();
        rt.holders.insert("/pod/b".into(), BTreeSet::from([7]));
        let file = root.join("pod/b/cpu.rt_runtime_us");
        fs::remove_file(&file).unwrap();
        fs::create_dir(&file).unwrap();
        rt.release(&layout, 7, &mut grants);
        assert_eq!(grants.get("/pod/b"), Some(&vec![incs[1].clone()]));
        rt.retry(&layout, &mut grants);
        assert!(
            grants.contains_key("/pod/b"),
            "still refused: still on record"
        );
        fs::remove_dir(&file).unwrap();
        fs::write(&file, "300000").unwrap();
        rt.retry(&layout, &mut grants);
        assert!(grants.is_empty());
        let read =
            |rel: &str| fs::read_to_string(root.join(rel).join("cpu.rt_runtime_us")).unwrap();
        assert_eq!(read("pod/b").trim(), "0");
        assert_eq!(read("pod").trim(), "100000");
        let _ = fs::remove_dir_all(&root);
    }
}
