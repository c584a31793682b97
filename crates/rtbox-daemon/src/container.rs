//! Containers by name or id: the engine (Podman, then Docker) is asked for the container's
//! main process (`inspect`), and the container is attached as the cgroup that process is in,
//! so every process the container runs (also ones started later by `exec`) joins, and a
//! container that restarts (same id, same cgroup path) rejoins through the cgroup scan.
//!
//! The engines' command-line clients are used (`podman inspect`, `docker inspect`): both print
//! the same JSON fields (`Id`, `Name`, `State.Pid`, `State.Running`), need no library, and
//! talk to whatever daemon or storage the host has configured.

use std::path::PathBuf;
use std::process::Command;

use rtbox_linux::cgroup::{self, Layout};

/// A container engine rtbox asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Podman,
    Docker,
}

impl Engine {
    pub fn command(self) -> &'static str {
        match self {
            Engine::Podman => "podman",
            Engine::Docker => "docker",
        }
    }
}

/// A running container, found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub engine: Engine,
    pub id: String,
    pub name: String,
    /// Its main process.
    pub pid: i32,
    /// The cgroup directory of its main process (v2 if there is one, else v1 cpu).
    pub cgroup: PathBuf,
}

/// Why a container could not be found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContainerError {
    /// No engine knows it (`tried`: the engines that were asked and what they said).
    NoSuchContainer {
        name: String,
        tried: Vec<String>,
    },
    NotRunning {
        name: String,
        engine: Engine,
    },
    /// Its process has no cgroup rtbox can attach.
    NoCgroup {
        name: String,
        pid: i32,
    },
}

impl std::fmt::Display for ContainerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ContainerError::NoSuchContainer { name, tried } => {
                write!(f, "no container named \"{name}\"")?;
                if tried.is_empty() {
                    write!(f, " (neither podman nor docker is installed)")
                } else {
                    write!(f, " ({})", tried.join("; "))
                }
            }
            ContainerError::NotRunning { name, engine } => write!(
                f,
                "container \"{name}\" ({}) is not running",
                engine.command()
            ),
            ContainerError::NoCgroup { name, pid } => write!(
                f,
                "container \"{name}\": process {pid} has no cgroup rtbox can attach"
            ),
        }
    }
}

impl std::error::Error for ContainerError {}

/// The fields of one `inspect` record rtbox reads.
#[derive(Debug, PartialEq, Eq)]
struct Inspected {
    id: String,
    name: String,
    pid: i32,
    running: bool,
}

/// Parses the JSON array `podman inspect` / `docker inspect` print.
fn parse_inspect(text: &str) -> Option<Inspected> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let c = v.as_array()?.first()?;
    Some(Inspected {
        id: c["Id"].as_str()?.to_string(),
        name: c["Name"]
            .as_str()
            .unwrap_or("")
            .trim_start_matches('/')
            .to_string(),
        pid: c["State"]["Pid"].as_i64().unwrap_or(0) as i32,
        running: c["State"]["Running"].as_bool().unwrap_or(false),
    })
}

/// Asks each engine in turn; `Ok(None)` from an engine that is not installed.
fn inspect(engine: Engine, name: &str) -> Result<Option<Inspected>, String> {
    let out = match Command::new(engine.command())
        .args(["inspect", "--type", "container", name])
        .output()
    {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", engine.command())),
    };
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err.lines().last().unwrap_or("").trim();
        return Err(format!("{}: {line}", engine.command()));
    }
    parse_inspect(&String::from_utf8_lossy(&out.stdout))
        .map(Some)
        .ok_or_else(|| format!("{}: inspect printed no container", engine.command()))
}

/// The cgroup directory of process `pid`: its v2 cgroup where there is a v2 hierarchy, else
/// its v1 cpu cgroup.
pub fn cgroup_dir(layout: &Layout, pid: i32) -> Option<PathBuf> {
    let cg = cgroup::thread_cgroups(pid).ok()?;
    let (root, rel) = match (&layout.v2, cg.v2, &layout.v1_cpu, cg.v1_cpu) {
        (Some(r), Some(rel), _, _) => (r.clone(), rel),
        (_, _, Some(r), Some(rel)) => (r.clone(), rel),
        _ => return None,
    };
    // A member forked by an attached process may sit in its stop group: the container's
    // cgroup is the one without them.
    let rel = rtbox_linux::stopgroup::original_of(&rel);
    Some(root.join(rel.trim_start_matches('/')))
}

/// The engine that knows container `name` (Podman first, then Docker) and what it says.
fn inspect_any(name: &str) -> Result<(Engine, Inspected), ContainerError> {
    let mut tried = Vec::new();
    for engine in [Engine::Podman, Engine::Docker] {
        match inspect(engine, name) {
            Ok(Some(c)) => return Ok((engine, c)),
            Ok(None) => {}
            Err(e) => tried.push(e),
        }
    }
    Err(ContainerError::NoSuchContainer {
        name: name.to_string(),
        tried,
    })
}

/// The full id of container `name`, running or not (its cgroup paths contain it).
pub fn id_of(name: &str) -> Result<String, ContainerError> {
    inspect_any(name).map(|(_, c)| c.id)
}

/// Finds a running container by name or id (Podman first, then Docker).
pub fn find(layout: &Layout, name: &str) -> Result<Found, ContainerError> {
    let (engine, c) = inspect_any(name)?;
    if !c.running || c.pid <= 0 {
        return Err(ContainerError::NotRunning {
            name: name.to_string(),
            engine,
        });
    }
    let cgroup = cgroup_dir(layout, c.pid).ok_or(ContainerError::NoCgroup {
        name: name.to_string(),
        pid: c.pid,
    })?;
    Ok(Found {
        engine,
        id: c.id,
        name: c.name,
        pid: c.pid,
        cgroup,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inspect_output_of_both_engines_is_read() {
        let podman = r#"[{"Id":"fda0","Name":"web","State":{"Pid":25740,"Running":true}}]"#;
        assert_eq!(
            parse_inspect(podman),
            Some(Inspected {
                id: "fda0".into(),
                name: "web".into(),
                pid: 25740,
                running: true
            })
        );
        let docker = r#"[{"Id":"ab12","Name":"/db","State":{"Pid":0,"Running":false}}]"#;
        let d = parse_inspect(docker).unwrap();
        assert_eq!((d.name.as_str(), d.pid, d.running), ("db", 0, false));
        assert_eq!(parse_inspect("[]"), None);
        assert_eq!(parse_inspect("not json"), None);
    }

    #[test]
    fn errors_name_the_container_and_what_the_engines_said() {
        let e = ContainerError::NoSuchContainer {
            name: "x".into(),
            tried: vec!["podman: Error: no such container x".into()],
        };
        assert_eq!(
            e.to_string(),
            "no container named \"x\" (podman: Error: no such container x)"
        );
        let e = ContainerError::NoSuchContainer {
            name: "x".into(),
            tried: vec![],
        };
        assert!(e.to_string().contains("neither podman nor docker"));
    }
}
