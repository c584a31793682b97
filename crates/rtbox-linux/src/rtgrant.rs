//! RT runtime for a v1 `cpu` cgroup that has none, instead of moving the member out of it.
//!
//! With RT group scheduling (`CONFIG_RT_GROUP_SCHED`, v1 `cpu` controller) a thread whose cpu
//! cgroup has `cpu.rt_runtime_us` = 0 cannot become SCHED_FIFO (EPERM); a new cgroup starts at
//! 0, so every container a runtime makes is such a cgroup. The member stays where it is and
//! its cgroup is given RT runtime: `want` more on the cgroup, and on each ancestor only what it
//! lacks for the sum of its children (`tg_rt_schedulable()` in `kernel/sched/rt.c`: the
//! children's RT bandwidth must fit in the parent's, the top level in the global limit). All
//! periods are assumed equal (the kernel's default, 1 s everywhere). A grant is a list of
//! increments, recorded in the journal before it is written; returning it subtracts each
//! increment again, the cgroup's own first.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cgroup::Layout;
use crate::LinuxError;

/// RT runtime added to one v1 cpu cgroup (path relative to the hierarchy's root), us.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Increment {
    pub cgroup: String,
    pub runtime_us: i64,
}

fn runtime(dir: &Path) -> Option<i64> {
    fs::read_to_string(dir.join("cpu.rt_runtime_us"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// RT runtime of `dir`'s direct children, summed (negative: unlimited, counted as none).
fn children_runtime(dir: &Path) -> i64 {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| runtime(&e.path()))
        .filter(|r| *r > 0)
        .sum()
}

/// The increments that give v1 cpu cgroup `rel` at least `want` us of RT runtime per period
/// (none when it has that already). Nothing is written. Errors when the top level cannot fit
/// it under the global limit, naming the numbers.
pub fn plan(layout: &Layout, rel: &str, want: i64) -> Result<Vec<Increment>, LinuxError> {
    let root = layout
        .v1_cpu
        .as_ref()
        .ok_or_else(|| LinuxError::Invalid("no v1 cpu hierarchy".into()))?;
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    if parts.is_empty() {
        return Ok(Vec::new());
    }
    let dirs: Vec<(String, PathBuf)> = (1..=parts.len())
        .map(|i| {
            let r = format!("/{}", parts[..i].join("/"));
            let d = root.join(r.trim_start_matches('/'));
            (r, d)
        })
        .collect();
    let (leaf_rel, leaf) = dirs.last().expect("non-empty");
    let have = runtime(leaf).ok_or_else(|| {
        LinuxError::Invalid(format!(
            "{leaf_rel}: no cpu.rt_runtime_us (no RT group scheduling)"
        ))
    })?;
    if have < 0 || have >= want {
        return Ok(Vec::new());
    }
    let mut incs = vec![Increment {
        cgroup: leaf_rel.clone(),
        runtime_us: want - have,
    }];
    // Walk up while a parent lacks room for its children's new sum.
    let mut need = want - have;
    for i in (0..dirs.len()).rev() {
        let parent = if i == 0 {
            root.clone()
        } else {
            dirs[i - 1].1.clone()
        };
        let p_runtime = runtime(&parent).unwrap_or(0);
        if p_runtime < 0 {
            break;
        }
        let free = p_runtime - children_runtime(&parent);
        if free >= need {
            break;
        }
        if i == 0 {
            return Err(LinuxError::Invalid(format!(
                "RT group scheduling: {want} us of RT runtime per period for v1 cpu cgroup \
                 {rel} do not fit: {free} us left under the global limit of {p_runtime} us"
            )));
        }
        need -= free.max(0);
        incs.push(Increment {
            cgroup: dirs[i - 1].0.clone(),
            runtime_us: need,
        });
    }
    incs.reverse();
    Ok(incs)
}

/// Writes planned increments, parents first. On failure the ones written are taken back.
pub fn apply(layout: &Layout, incs: &[Increment]) -> Result<(), LinuxError> {
    for (i, inc) in incs.iter().enumerate() {
        if let Err(e) = add(layout, inc, inc.runtime_us) {
            let _ = undo(layout, &incs[..i]);
            return Err(e);
        }
    }
    Ok(())
}

/// Takes increments back, the deepest cgroup first (a parent may not drop below its
/// children). Call after the members' policies are back to normal: a cgroup with RT threads
/// cannot go back to 0. Every one is tried; the first error is returned.
pub fn undo(layout: &Layout, incs: &[Increment]) -> Result<(), LinuxError> {
    undo_partial(layout, incs).1.map_or(Ok(()), Err)
}

/// [`undo`] that also returns the increments the kernel still refuses to take back (in plan
/// order), so that the caller can keep them on record and retry. The refusal is usually
/// transient: a member that just exited still counts as an RT task of its cgroup until the
/// kernel has released it (`tg_has_rt_tasks()` in `kernel/sched/rt.c`), so its cgroup cannot
/// go back to 0, nor its parent below the children's sum. Dropping such an increment instead
/// would leave the parent with RT runtime nobody returns.
pub fn undo_partial(layout: &Layout, incs: &[Increment]) -> (Vec<Increment>, Option<LinuxError>) {
    let mut first = None;
    let mut left = Vec::new();
    for inc in incs.iter().rev() {
        if let Err(e) = add(layout, inc, -inc.runtime_us) {
            // A cgroup removed meanwhile (the container is gone) needs nothing back.
            if !e.is_gone() {
                first.get_or_insert(e);
                left.push(inc.clone());
            }
        }
    }
    left.reverse();
    (left, first)
}

fn add(layout: &Layout, inc: &Increment, delta: i64) -> Result<(), LinuxError> {
    let root = layout
        .v1_cpu
        .as_ref()
        .ok_or_else(|| LinuxError::Invalid("no v1 cpu hierarchy".into()))?;
    let f = root
        .join(inc.cgroup.trim_start_matches('/'))
        .join("cpu.rt_runtime_us");
    let now: i64 = fs::read_to_string(&f)
        .map_err(|e| LinuxError::io(&f, e))?
        .trim()
        .parse()
        .map_err(|_| LinuxError::Parse {
            path: f.clone(),
            what: "cpu.rt_runtime_us".into(),
        })?;
    fs::write(&f, (now + delta).max(0).to_string()).map_err(|e| LinuxError::io(&f, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(root: &Path, files: &[(&str, i64)]) {
        for (rel, v) in files {
            let d = root.join(rel);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("cpu.rt_runtime_us"), v.to_string()).unwrap();
        }
    }

    #[test]
    fn a_grant_adds_to_the_cgroup_and_only_what_ancestors_lack() {
        let root = std::env::temp_dir().join(format!("rtbox-rtgrant-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        tree(
            &root,
            &[
                ("", 950_000),
                ("pod", 100_000),
                ("pod/a", 100_000),
                ("pod/b", 0),
                ("other", 0),
            ],
        );
        let layout = Layout {
            kind: crate::cgroup::LayoutKind::V1,
            v2: None,
            v1_cpu: Some(root.clone()),
        };
        let incs = plan(&layout, "/pod/b", 300_000).unwrap();
        assert_eq!(
            incs,
            vec![
                Increment {
                    cgroup: "/pod".into(),
                    runtime_us: 300_000
                },
                Increment {
                    cgroup: "/pod/b".into(),
                    runtime_us: 300_000
                }
            ],
            "the parent is full (a has all of it): it grows by what b needs"
        );
        apply(&layout, &incs).unwrap();
        assert_eq!(runtime(&root.join("pod")), Some(400_000));
        assert_eq!(runtime(&root.join("pod/b")), Some(300_000));
        assert_eq!(plan(&layout, "/pod/b", 300_000).unwrap(), vec![], "has it");
        undo(&layout, &incs).unwrap();
        assert_eq!(runtime(&root.join("pod")), Some(100_000));
        assert_eq!(runtime(&root.join("pod/b")), Some(0));
        // A refused take-back stays on record, and a later retry finishes it.
        apply(&layout, &incs).unwrap();
        let file = root.join("pod/b/cpu.rt_runtime_us");
        fs::remove_file(&file).unwrap();
        fs::create_dir(&file).unwrap();
        let (left, err) = undo_partial(&layout, &incs);
        assert!(err.is_some());
        assert_eq!(left, vec![incs[1].clone()], "only the refused one is left");
        assert_eq!(runtime(&root.join("pod")), Some(100_000));
        fs::remove_dir(&file).unwrap();
        fs::write(&file, "300000").unwrap();
        assert_eq!(undo_partial(&layout, &left).0, vec![]);
        assert_eq!(runtime(&root.join("pod/b")), Some(0));
        let e = plan(&layout, "/pod/b", 900_000).unwrap_err().to_string();
        assert!(
            e.contains("do not fit: 850000 us left under the global limit of 950000 us"),
            "{e}"
        );
        let _ = fs::remove_dir_all(&root);
    }
}
