//! The socket protocol: one JSON object per line each way.
//!
//! Requests carry `"op"`: `create`, `set`, `delete`, `attach`, `detach`, `status`, `metrics`.
//! Every reply is `{"ok": true, ...}` or `{"ok": false, "error": "..."}`; a malformed or refused
//! request changes nothing.

use serde::{Deserialize, Serialize};

use rtbox_model::{
    parse_control_string, parse_duration, BoxSpec, CpuSet, Interface, Mode, Placement, PluginKind,
    Policy,
};

/// A box as a request describes it. Exactly one of: `budget`+`period` (the same server on every
/// CPU of the box), `servers` (control string, seed-000 syntax), `weight` (shared box).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoxReq {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// CPU list such as "0-1".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// Duration with unit, e.g. "20ms".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub servers: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// A scheduler plug-in over the box's periodic tasks (`fp`, `fp-ff`, `fp-pm`, `g-fp`,
    /// `fp-us`; docs/exsched.md). The policy must be `fifo` or left out; the placement is the
    /// plug-in's unless given (and then must be it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// User ids besides root who may attach their own processes to the box and its children;
    /// on `set`, absent keeps the box's users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<Vec<u32>>,
}

/// One request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
pub enum Request {
    Create {
        #[serde(rename = "box")]
        spec: BoxReq,
    },
    Set {
        #[serde(rename = "box")]
        spec: BoxReq,
    },
    Delete {
        name: String,
    },
    Attach {
        #[serde(rename = "box")]
        box_name: String,
        #[serde(default)]
        pid: Option<i32>,
        #[serde(default)]
        cgroup: Option<String>,
        /// A Podman or Docker container's name or id: its cgroup is attached.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        container: Option<String>,
    },
    Detach {
        #[serde(default)]
        pid: Option<i32>,
        #[serde(default)]
        cgroup: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        container: Option<String>,
        #[serde(default, rename = "box")]
        box_name: Option<String>,
    },
    Status {},
    Metrics {},
    /// Periodic-task API: thread `tid` of process `pid` enters `box` as a periodic task (the
    /// process joins the box unless it is a member of it); the reply names its job page.
    #[serde(rename = "task_enter")]
    TaskEnter {
        #[serde(rename = "box")]
        box_name: String,
        pid: i32,
        tid: i32,
    },
    /// The task declares its timing (integer nanoseconds) and starts releasing jobs.
    #[serde(rename = "task_run")]
    TaskRun {
        pid: i32,
        tid: i32,
        wcet_ns: u64,
        period_ns: u64,
        deadline_ns: u64,
        #[serde(default)]
        priority: Option<u32>,
    },
    /// The task leaves; its figures stay in status.
    #[serde(rename = "task_exit")]
    TaskExit {
        pid: i32,
        tid: i32,
    },
    /// The OCI hook at createRuntime: container `id` (init process `pid`) joins `box`, or a
    /// box made for it from `create` (`ocihook.rs`, `joined.rs`).
    #[serde(rename = "container_join")]
    ContainerJoin {
        id: String,
        name: String,
        pid: i32,
        #[serde(default, rename = "box", skip_serializing_if = "Option::is_none")]
        box_name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        create: Option<BoxReq>,
    },
    /// The OCI hook at poststop: container `id` is released, a box made for it deleted.
    #[serde(rename = "container_leave")]
    ContainerLeave {
        id: String,
    },
}

impl Request {
    /// The request's `op` as it appears on the wire (for logs).
    pub fn op(&self) -> &'static str {
        match self {
            Request::Create { .. } => "create",
            Request::Set { .. } => "set",
            Request::Delete { .. } => "delete",
            Request::Attach { .. } => "attach",
            Request::Detach { .. } => "detach",
            Request::Status {} => "status",
            Request::Metrics {} => "metrics",
            Request::TaskEnter { .. } => "task_enter",
            Request::TaskRun { .. } => "task_run",
            Request::TaskExit { .. } => "task_exit",
            Request::ContainerJoin { .. } => "container_join",
            Request::ContainerLeave { .. } => "container_leave",
        }
    }
}

/// Parse one request line; the error names what is wrong.
pub fn parse_request(line: &str) -> Result<Request, String> {
    serde_json::from_str(line).map_err(|e| format!("malformed request: {e}"))
}

fn field_err(name: &str, field: &str, why: impl std::fmt::Display) -> String {
    format!("box \"{name}\": {field}: {why}")
}

impl BoxReq {
    /// Convert to a model box; the error names the field. (Cross-box rules are checked by
    /// `System::new` and admission.)
    pub fn to_spec(&self) -> Result<BoxSpec, String> {
        let n = &self.name;
        let dur = |field: &str, v: &Option<String>| -> Result<Option<u64>, String> {
            v.as_deref()
                .map(|s| parse_duration(s).map_err(|e| field_err(n, field, e)))
                .transpose()
        };
        let budget = dur("budget", &self.budget)?;
        let period = dur("period", &self.period)?;
        let interface = match (budget, period, &self.servers, self.weight) {
            (Some(budget), Some(period), None, None) => Interface::PerCpu { budget, period },
            (None, None, Some(s), None) => Interface::Servers(
                parse_control_string(s).map_err(|e| field_err(n, "servers", e.0))?,
            ),
            (None, None, None, Some(weight)) => Interface::Shared { weight },
            (Some(_), None, None, None) | (None, Some(_), None, None) => {
                return Err(field_err(n, "budget/period", "both are needed"))
            }
            _ => {
                return Err(field_err(
                    n,
                    "interface",
                    "give exactly one of budget+period, servers, weight",
                ))
            }
        };
        let mut spec = BoxSpec::new(n.clone(), interface);
        spec.parent = self.parent.clone();
        if let Some(c) = &self.cpus {
            spec.cpus = Some(CpuSet::parse(c).map_err(|e| field_err(n, "cpus", e.0))?);
        }
        if let Some(p) = &self.policy {
            spec.policy = Policy::from_name(p).ok_or_else(|| {
                field_err(n, "policy", format!("\"{p}\" is not fifo, edf or fair"))
            })?;
        }
        if let Some(p) = &self.placement {
            spec.placement = Placement::from_name(p).ok_or_else(|| {
                field_err(n, "placement", format!("\"{p}\" is not global or pinned"))
            })?;
        }
        if let Some(m) = &self.mode {
            spec.mode = Mode::from_name(m)
                .ok_or_else(|| field_err(n, "mode", format!("\"{m}\" is not hard or reclaim")))?;
        }
        if let Some(p) = &self.plugin {
            let kind = PluginKind::from_name(p).ok_or_else(|| {
                field_err(
                    n,
                    "plugin",
                    format!("\"{p}\" is not one of {}", PluginKind::NAMES.join(", ")),
                )
            })?;
            kind.check_box(
                self.policy.is_some().then_some(spec.policy),
                self.placement.is_some().then_some(spec.placement),
            )
            .map_err(|e| format!("box \"{n}\": {} {e}", e.field()))?;
            spec.placement = kind.placement();
            spec.plugin = Some(kind);
        }
        Ok(spec)
    }
}

/// A successful reply with extra fields, or an error reply.
pub fn reply_ok(data: serde_json::Value) -> String {
    let mut v = serde_json::json!({"ok": true});
    if let (Some(o), serde_json::Value::Object(d)) = (v.as_object_mut(), data) {
        o.extend(d);
    }
    v.to_string()
}

pub fn reply_err(msg: &str) -> String {
    serde_json::json!({"ok": false, "error": msg}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_bad_ones_are_named() {
        let r = parse_request(
            r#"{"op":"create","box":{"name":"A","budget":"20ms","period":"100ms","cpus":"0"}}"#,
        )
        .unwrap();
        let Request::Create { spec } = r else {
            panic!()
        };
        let s = spec.to_spec().unwrap();
        assert_eq!(
            s.interface,
            Interface::PerCpu {
                budget: 20_000_000,
                period: 100_000_000
            }
        );
        assert!(parse_request(r#"{"op":"explode"}"#).is_err());
        assert!(parse_request(r#"{"op":"status","x":1}"#).is_err());
        assert!(parse_request("not json").is_err());
        let bad = BoxReq {
            name: "B".into(),
            budget: Some("20".into()),
            period: Some("1s".into()),
            ..Default::default()
        };
        assert!(bad.to_spec().unwrap_err().contains("budget"));
        let both = BoxReq {
            name: "C".into(),
            weight: Some(2),
            servers: Some("0 1000/2000".into()),
            ..Default::default()
        };
        assert!(both.to_spec().unwrap_err().contains("exactly one"));
        let mode = BoxReq {
            name: "D".into(),
            weight: Some(1),
            mode: Some("soft".into()),
            ..Default::default()
        };
        assert!(mode.to_spec().unwrap_err().contains("mode"));
    }

    #[test]
    fn a_box_request_can_name_a_plugin_and_conflicts_are_named() {
        let r = parse_request(
            r#"{"op":"create","box":{"name":"P","budget":"4ms","period":"5ms","cpus":"0-1","plugin":"fp-pm"}}"#,
        )
        .unwrap();
        let Request::Create { spec } = r else {
            panic!()
        };
        let s = spec.to_spec().unwrap();
        assert_eq!(s.plugin, Some(PluginKind::FpPm));
        assert_eq!(s.placement, Placement::Pinned);
        assert_eq!(s.policy, Policy::Fifo);
        let req = |plugin: &str, policy: Option<&str>, placement: Option<&str>| BoxReq {
            name: "P".into(),
            budget: Some("4ms".into()),
            period: Some("5ms".into()),
            plugin: Some(plugin.into()),
            policy: policy.map(Into::into),
            placement: placement.map(Into::into),
            ..Default::default()
        };
        // `fp` is global.
        assert_eq!(
            req("fp", Some("fifo"), None).to_spec().unwrap().placement,
            Placement::Global
        );
        let e = req("dm-pm", None, None).to_spec().unwrap_err();
        assert_eq!(
            e,
            "box \"P\": plugin: \"dm-pm\" is not one of fp, fp-ff, fp-pm, g-fp, fp-us"
        );
        let e = req("fp-pm", Some("edf"), None).to_spec().unwrap_err();
        assert!(
            e.starts_with("box \"P\": policy = \"edf\" cannot run plugin \"fp-pm\""),
            "{e}"
        );
        let e = req("fp-ff", None, Some("global")).to_spec().unwrap_err();
        assert!(
            e.contains("placement = \"global\" conflicts with plugin \"fp-ff\", which needs placement = \"pinned\""),
            "{e}"
        );
        // A bad policy name is the policy's own error, before the plug-in's.
        let e = req("fp-ff", Some("rr"), None).to_spec().unwrap_err();
        assert!(e.contains("\"rr\" is not fifo"), "{e}");
    }

    #[test]
    fn task_requests_round_trip_and_need_their_fields() {
        let r = Request::TaskRun {
            pid: 10,
            tid: 11,
            wcet_ns: 2_000_000,
            period_ns: 10_000_000,
            deadline_ns: 10_000_000,
            priority: Some(50),
        };
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.contains(r#""op":"task_run""#), "{line}");
        assert_eq!(parse_request(&line).unwrap(), r);
        let e = parse_request(r#"{"op":"task_enter","box":"A","pid":1}"#).unwrap_err();
        assert!(e.contains("tid"), "{e}");
        assert!(parse_request(r#"{"op":"task_exit","pid":1,"tid":1}"#).is_ok());
    }
}
