//! The OCI hook's reading of a container: what the runtime's state (OCI runtime spec,
//! "State" and "Hooks") and the container's `io.rtbox.*` annotations ask for.
//!
//! The runtime runs the hook with the container's state JSON on stdin. At `createRuntime`
//! (status `creating`: the container's init process exists in the container's cgroups but has
//! not run the user's program yet) the container joins its box; at `poststop` (status
//! `stopped`) it is released, and a box made for it is deleted. See docs/containers.md.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::protocol::BoxReq;

/// The annotation naming an existing box to join.
pub const BOX: &str = "io.rtbox.box";
/// Budget, period and CPUs of a box made for the container alone.
pub const BUDGET: &str = "io.rtbox.budget";
pub const PERIOD: &str = "io.rtbox.period";
pub const CPUS: &str = "io.rtbox.cpus";
/// A name for the container in status and metrics (Podman passes none to hooks).
pub const NAME: &str = "io.rtbox.name";
/// Every annotation rtbox reads; any other `io.rtbox.*` one is a mistake and refused.
const KNOWN: [&str; 5] = [BOX, BUDGET, PERIOD, CPUS, NAME];
/// Kubernetes' names, set by CRI-O: the container is labelled `namespace/pod/container`.
const K8S_NAMESPACE: &str = "io.kubernetes.pod.namespace";
const K8S_POD: &str = "io.kubernetes.pod.name";
const K8S_CONTAINER: &str = "io.kubernetes.container.name";
/// CRI-O marks a pod's infra (pause) container `sandbox`: it gets the pod's annotations too,
/// but holds no work, so it joins nothing.
const CRIO_TYPE: &str = "io.kubernetes.cri-o.ContainerType";

/// The fields of the OCI state rtbox reads (others are ignored, as the spec allows).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct OciState {
    pub id: String,
    pub status: String,
    /// Absent once the container stopped.
    #[serde(default)]
    pub pid: Option<i32>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// Which box a joining container goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinTarget {
    /// An existing box, by name.
    Box(String),
    /// A box made for this container (named [`own_box_name`]), deleted when it stops.
    Create(Box<BoxReq>),
}

/// What the hook does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookAction {
    /// No `io.rtbox.*` annotation: nothing to do.
    Nothing,
    Join {
        id: String,
        name: String,
        pid: i32,
        target: JoinTarget,
    },
    Leave {
        id: String,
    },
}

/// Why the hook refuses; the container does not start (at `createRuntime`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookError {
    /// stdin is not an OCI state.
    BadState(String),
    /// A joining container's state has no process id.
    NoPid {
        id: String,
    },
    /// The hook ran at a stage it has nothing to do at.
    Status {
        status: String,
    },
    UnknownAnnotation {
        key: String,
    },
    BadAnnotation {
        key: String,
        value: String,
        why: String,
    },
    /// `io.rtbox.box` together with a box of the container's own.
    BoxAndBudget,
    /// One of budget/period without the other (or cpus alone).
    Missing {
        key: &'static str,
        given: String,
    },
}

impl std::fmt::Display for HookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HookError::BadState(e) => write!(f, "stdin is not an OCI state: {e}"),
            HookError::NoPid { id } => write!(
                f,
                "container {id}: the OCI state has no pid (is the hook configured for the createRuntime stage?)"
            ),
            HookError::Status { status } => write!(
                f,
                "OCI state status \"{status}\": the hook joins at createRuntime (status \"creating\") and releases at poststop (status \"stopped\")"
            ),
            HookError::UnknownAnnotation { key } => write!(
                f,
                "annotation {key}: unknown (rtbox reads {})",
                KNOWN.join(", ")
            ),
            HookError::BadAnnotation { key, value, why } => {
                write!(f, "annotation {key}=\"{value}\": {why}")
            }
            HookError::BoxAndBudget => write!(
                f,
                "annotations {BOX} and {BUDGET}/{PERIOD}/{CPUS}: give either a box to join or the container's own box, not both"
            ),
            HookError::Missing { key, given } => {
                write!(f, "annotation {key} is missing (needed with {given})")
            }
        }
    }
}

impl std::error::Error for HookError {}

/// Reads the runtime's state JSON.
pub fn parse_state(text: &str) -> Result<OciState, HookError> {
    serde_json::from_str(text).map_err(|e| HookError::BadState(e.to_string()))
}

/// The box made for container `id`: `ctr-` and the first 12 characters of its id (the short
/// id engines print).
pub fn own_box_name(id: &str) -> String {
    format!("ctr-{}", id.chars().take(12).collect::<String>())
}

/// The container's name for status and metrics: `io.rtbox.name`, else Kubernetes'
/// `namespace/pod/container` (CRI-O), else the short id.
fn display_name(s: &OciState) -> String {
    let a = &s.annotations;
    if let Some(n) = a.get(NAME) {
        return n.clone();
    }
    match (a.get(K8S_NAMESPACE), a.get(K8S_POD), a.get(K8S_CONTAINER)) {
        (Some(ns), Some(pod), Some(c)) => format!("{ns}/{pod}/{c}"),
        _ => s.id.chars().take(12).collect(),
    }
}

/// Checks a duration annotation with the model's parser (the same one box requests use).
fn duration(a: &BTreeMap<String, String>, key: &str) -> Result<Option<String>, HookError> {
    let Some(v) = a.get(key) else { return Ok(None) };
    rtbox_model::parse_duration(v).map_err(|e| HookError::BadAnnotation {
        key: key.into(),
        value: v.clone(),
        why: e.to_string(),
    })?;
    Ok(Some(v.clone()))
}

/// Which box the annotations ask for; `None` when they ask for none. Every `io.rtbox.*` key is
/// checked, so a typo is refused rather than ignored.
pub fn target(a: &BTreeMap<String, String>) -> Result<Option<JoinTarget>, HookError> {
    if let Some(k) = a
        .keys()
        .find(|k| k.starts_with("io.rtbox.") && !KNOWN.contains(&k.as_str()))
    {
        return Err(HookError::UnknownAnnotation { key: k.clone() });
    }
    let budget = duration(a, BUDGET)?;
    let period = duration(a, PERIOD)?;
    let cpus = a.get(CPUS).cloned();
    if let Some(c) = &cpus {
        rtbox_model::CpuSet::parse(c).map_err(|e| HookError::BadAnnotation {
            key: CPUS.into(),
            value: c.clone(),
            why: e.0,
        })?;
    }
    let own = budget.is_some() || period.is_some() || cpus.is_some();
    match (a.get(BOX), own) {
        (Some(_), true) => Err(HookError::BoxAndBudget),
        (Some(b), false) if b.trim().is_empty() => Err(HookError::BadAnnotation {
            key: BOX.into(),
            value: b.clone(),
            why: "empty box name".into(),
        }),
        (Some(b), false) => Ok(Some(JoinTarget::Box(b.clone()))),
        (None, false) => Ok(None),
        (None, true) => {
            let given = |k: &str| a.keys().find(|x| *x == k).cloned();
            let any = [BUDGET, PERIOD, CPUS]
                .into_iter()
                .filter_map(given)
                .collect::<Vec<_>>()
                .join(", ");
            let budget = budget.ok_or(HookError::Missing {
                key: BUDGET,
                given: any.clone(),
            })?;
            let period = period.ok_or(HookError::Missing {
                key: PERIOD,
                given: any,
            })?;
            Ok(Some(JoinTarget::Create(Box::new(BoxReq {
                name: String::new(),
                budget: Some(budget),
                period: Some(period),
                cpus,
                ..Default::default()
            }))))
        }
    }
}

/// What to do for this state: join while the container is being created, leave once it
/// stopped.
pub fn plan(s: &OciState) -> Result<HookAction, HookError> {
    if s.annotations.get(CRIO_TYPE).map(String::as_str) == Some("sandbox") {
        return Ok(HookAction::Nothing);
    }
    let Some(mut target) = target(&s.annotations)? else {
        return Ok(HookAction::Nothing);
    };
    match s.status.as_str() {
        "creating" | "created" => {
            let pid = s
                .pid
                .filter(|p| *p > 0)
                .ok_or(HookError::NoPid { id: s.id.clone() })?;
            if let JoinTarget::Create(req) = &mut target {
                req.name = own_box_name(&s.id);
            }
            Ok(HookAction::Join {
                id: s.id.clone(),
                name: display_name(s),
                pid,
                target,
            })
        }
        "stopped" => Ok(HookAction::Leave { id: s.id.clone() }),
        other => Err(HookError::Status {
            status: other.into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The state runc gave the hook at createRuntime under Podman 4.3 (trimmed).
    const CREATING: &str = r#"{"ociVersion":"1.0.2-dev","id":"15b3f5f85642ca9633b4ef25ecfaf97354b54c5c97f6ca3c726d4c1ee6a7d414","status":"creating","pid":9362,"bundle":"/var/lib/containers/storage/overlay-containers/15b3/userdata","annotations":{"io.container.manager":"libpod","io.rtbox.box":"audio"}}"#;

    fn with(status: &str, pairs: &[(&str, &str)]) -> OciState {
        OciState {
            id: "0123456789abcdef".into(),
            status: status.into(),
            pid: Some(42),
            annotations: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn podman_state_at_create_runtime_joins_the_named_box() {
        let s = parse_state(CREATING).unwrap();
        assert_eq!(
            plan(&s).unwrap(),
            HookAction::Join {
                id: s.id.clone(),
                name: "15b3f5f85642".into(),
                pid: 9362,
                target: JoinTarget::Box("audio".into()),
            }
        );
        let stopped = CREATING.replace("\"creating\",\"pid\":9362", "\"stopped\"");
        assert_eq!(
            plan(&parse_state(&stopped).unwrap()).unwrap(),
            HookAction::Leave { id: s.id }
        );
    }

    #[test]
    fn budget_and_period_make_the_containers_own_box() {
        let s = with(
            "creating",
            &[
                (BUDGET, "20ms"),
                (PERIOD, "100ms"),
                (CPUS, "1"),
                (K8S_NAMESPACE, "rt"),
                (K8S_POD, "mixer"),
                (K8S_CONTAINER, "dsp"),
            ],
        );
        let HookAction::Join { name, target, .. } = plan(&s).unwrap() else {
            panic!()
        };
        assert_eq!(name, "rt/mixer/dsp");
        let JoinTarget::Create(req) = target else {
            panic!()
        };
        assert_eq!(req.name, "ctr-0123456789ab");
        assert_eq!(
            (
                req.budget.as_deref(),
                req.period.as_deref(),
                req.cpus.as_deref()
            ),
            (Some("20ms"), Some("100ms"), Some("1"))
        );
        // The daemon's own check accepts what the hook accepted.
        req.to_spec().unwrap();
    }

    #[test]
    fn no_annotation_does_nothing_and_bad_ones_are_named() {
        assert_eq!(
            plan(&with("creating", &[("other", "x")])).unwrap(),
            HookAction::Nothing
        );
        // A pod's infra container has the pod's annotations and holds no work.
        assert_eq!(
            plan(&with("creating", &[(BOX, "a"), (CRIO_TYPE, "sandbox")])).unwrap(),
            HookAction::Nothing
        );
        let e = |pairs: &[(&str, &str)]| plan(&with("creating", pairs)).unwrap_err().to_string();
        assert_eq!(
            e(&[(BUDGET, "20"), (PERIOD, "100ms")]),
            format!(
                "annotation io.rtbox.budget=\"20\": {}",
                rtbox_model::parse_duration("20").unwrap_err()
            )
        );
        assert_eq!(
            e(&[(BUDGET, "20ms")]),
            "annotation io.rtbox.period is missing (needed with io.rtbox.budget)"
        );
        assert!(e(&[(BOX, "a"), (BUDGET, "1ms")]).contains("not both"));
        assert!(e(&[("io.rtbox.buget", "1ms")]).starts_with("annotation io.rtbox.buget: unknown"));
        assert!(e(&[(BUDGET, "1ms"), (PERIOD, "2ms"), (CPUS, "x")])
            .starts_with("annotation io.rtbox.cpus=\"x\""));
        assert!(e(&[(BOX, " ")]).contains("empty box name"));
        let mut s = with("creating", &[(BOX, "a")]);
        s.pid = None;
        assert!(plan(&s).unwrap_err().to_string().contains("no pid"));
        assert!(plan(&with("running", &[(BOX, "a")]))
            .unwrap_err()
            .to_string()
            .contains("createRuntime"));
        assert!(parse_state("{}").is_err());
    }
}
