//! Containers the daemon holds as members: which cgroup is which container (id, name,
//! engine), for the OCI hook's join and leave and for the per-container metrics.
//!
//! A container is always attached as its cgroup (`Target::Cgroup`); this table only adds
//! what the cgroup does not say. A record whose cgroup is no longer attached (detached by
//! `--cgroup`, its box deleted) is dropped when next looked at.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::ocihook::JoinTarget;
use crate::runtime::{Runtime, RuntimeError, Target};

/// One container held in a box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub id: String,
    pub name: String,
    /// `podman`, `docker` (attached by name) or `oci` (joined by the OCI hook).
    pub engine: &'static str,
    pub cgroup: PathBuf,
    pub box_name: String,
    /// The box was made for this container and goes when it leaves.
    pub owns_box: bool,
}

/// The containers held, by cgroup.
#[derive(Debug, Default)]
pub struct Joined {
    records: Vec<Record>,
}

impl Joined {
    /// Remembers a container attached by `rtbox attach --container`.
    pub fn record(&mut self, r: Record) {
        self.records.retain(|x| x.cgroup != r.cgroup);
        self.records.push(r);
    }

    /// Forgets the container of cgroup `dir` (detached).
    pub fn forget_cgroup(&mut self, dir: &Path) {
        self.records.retain(|x| x.cgroup != dir);
    }

    /// Drops records whose cgroup is no longer attached.
    fn prune(&mut self, rt: &Runtime) {
        let attached = rt.attached_cgroups();
        self.records.retain(|r| attached.contains(&r.cgroup));
    }

    /// The containers held, for `rtbox status --json`.
    pub fn status(&mut self, rt: &Runtime) -> serde_json::Value {
        self.prune(rt);
        self.records
            .iter()
            .map(|r| {
                serde_json::json!({
                    "id": r.id,
                    "name": r.name,
                    "engine": r.engine,
                    "box": r.box_name,
                    "cgroup": r.cgroup.display().to_string(),
                    "own_box": r.owns_box,
                })
            })
            .collect()
    }

    /// The OCI hook at createRuntime: container `id`, whose init process is `pid`, joins its
    /// box (made first when the annotations ask for one of its own; admission may refuse it,
    /// and then nothing changed). The container is attached as the cgroup of `pid`.
    pub fn join(
        &mut self,
        rt: &mut Runtime,
        id: &str,
        name: &str,
        pid: i32,
        target: JoinTarget,
    ) -> Result<serde_json::Value, RuntimeError> {
        self.prune(rt);
        if let Some(r) = self.records.iter().find(|r| r.id == id) {
            return Err(RuntimeError::BadRequest(format!(
                "container {id} already joined box \"{}\"",
                r.box_name
            )));
        }
        let cgroup = crate::container::cgroup_dir(&rt.layout(), pid).ok_or_else(|| {
            RuntimeError::Container(crate::container::ContainerError::NoCgroup {
                name: name.to_string(),
                pid,
            })
        })?;
        let (box_name, owns_box) = match target {
            JoinTarget::Box(b) => (b, false),
            JoinTarget::Create(req) => {
                let spec = req.to_spec().map_err(RuntimeError::BadRequest)?;
                let host = crate::host::online()?;
                crate::host::check_spec(&spec, &host).map_err(RuntimeError::UnknownCpu)?;
                rt.create_box(spec)?;
                (req.name.clone(), true)
            }
        };
        let threads = match rt.attach(&box_name, Target::Cgroup(cgroup.clone())) {
            Ok(n) => n,
            Err(e) => {
                if owns_box {
                    let _ = rt.delete_box(&box_name);
                }
                return Err(e);
            }
        };
        tracing::info!(container = %id, name, box_name, threads, cgroup = %cgroup.display(), "container joined (OCI hook)");
        self.records.push(Record {
            id: id.to_string(),
            name: name.to_string(),
            engine: "oci",
            cgroup: cgroup.clone(),
            box_name: box_name.clone(),
            owns_box,
        });
        Ok(serde_json::json!({
            "box": box_name,
            "threads": threads,
            "cgroup": cgroup.display().to_string(),
            "created_box": owns_box,
        }))
    }

    /// The OCI hook at poststop: releases container `id` and deletes the box made for it. A
    /// container the daemon does not hold (never joined, or the daemon restarted since, which
    /// released it) is no error: there is nothing left to release.
    pub fn leave(&mut self, rt: &mut Runtime, id: &str) -> Result<serde_json::Value, RuntimeError> {
        let Some(i) = self.records.iter().position(|r| r.id == id) else {
            return Ok(serde_json::json!({"released": false, "threads": 0}));
        };
        let r = self.records.remove(i);
        let threads = match rt.detach(None, Some(r.cgroup.clone()), None) {
            Ok(n) => n,
            Err(RuntimeError::NotAttached { .. }) => 0,
            Err(e) => return Err(e),
        };
        if r.owns_box {
            match rt.delete_box(&r.box_name) {
                Ok(()) | Err(RuntimeError::NoSuchBox { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        tracing::info!(container = %id, box_name = %r.box_name, threads, deleted_box = r.owns_box, "container left (OCI hook)");
        Ok(serde_json::json!({
            "released": true,
            "threads": threads,
            "box": r.box_name,
            "deleted_box": r.owns_box,
        }))
    }

    /// Per-container metrics (Prometheus text): one info line per container held, its member
    /// threads, and the CPU time its own cgroup counted (every thread of the container, as the
    /// container engine's own accounting sees it).
    pub fn render_metrics(&mut self, rt: &Runtime) -> String {
        self.prune(rt);
        let layout = rt.layout();
        let mut out = String::new();
        let label = |r: &Record| {
            let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
            format!(
                "{{box=\"{}\",container_id=\"{}\",container_name=\"{}\",engine=\"{}\"}}",
                esc(&r.box_name),
                esc(&r.id),
                esc(&r.name),
                r.engine
            )
        };
        let _ = writeln!(out, "# HELP rtbox_container_info A container held in a box (attached by name or joined by the OCI hook)");
        let _ = writeln!(out, "# TYPE rtbox_container_info gauge");
        for r in &self.records {
            let _ = writeln!(out, "rtbox_container_info{} 1", label(r));
        }
        let _ = writeln!(
            out,
            "# HELP rtbox_container_member_threads Threads of the container that are members of its box"
        );
        let _ = writeln!(out, "# TYPE rtbox_container_member_threads gauge");
        for r in &self.records {
            let n = rt
                .member_stops(&r.box_name)
                .into_iter()
                .filter(|(_, pid, _)| {
                    crate::container::cgroup_dir(&layout, *pid).as_deref() == Some(&r.cgroup)
                })
                .count();
            let _ = writeln!(out, "rtbox_container_member_threads{} {n}", label(r));
        }
        let _ = writeln!(
            out,
            "# HELP rtbox_container_cpu_seconds_total CPU time the container's own cgroup counted (all its threads)"
        );
        let _ = writeln!(out, "# TYPE rtbox_container_cpu_seconds_total counter");
        for r in &self.records {
            if let Some(ns) = cgroup_usage_ns(&r.cgroup) {
                let _ = writeln!(
                    out,
                    "rtbox_container_cpu_seconds_total{} {}",
                    label(r),
                    ns as f64 / 1e9
                );
            }
        }
        out
    }
}

/// CPU time a cgroup counted: `usage_usec` of a v2 `cpu.stat`, else a v1 `cpuacct.usage`.
fn cgroup_usage_ns(dir: &Path) -> Option<u64> {
    if let Ok(text) = std::fs::read_to_string(dir.join("cpu.stat")) {
        if let Some(us) = text
            .lines()
            .find_map(|l| l.strip_prefix("usage_usec "))
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            return Some(us * 1000);
        }
    }
    std::fs::read_to_string(dir.join("cpuacct.usage"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_read_from_v2_cpu_stat_or_v1_cpuacct() {
        let d = std::env::temp_dir().join(format!("rtbox-joined-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        assert_eq!(cgroup_usage_ns(&d), None);
        std::fs::write(d.join("cpuacct.usage"), "1500\n").unwrap();
        assert_eq!(cgroup_usage_ns(&d), Some(1500));
        std::fs::write(d.join("cpu.stat"), "usage_usec 7\nuser_usec 5\n").unwrap();
        assert_eq!(cgroup_usage_ns(&d), Some(7000));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
