//! Raw TOML values to the model, with the line of every value kept for error messages.

use std::collections::HashMap;

use rtbox_model::{
    parse_control_string, parse_duration, Arrival, Bandwidth, BoxSpec, CpuSet, Interface, Mode,
    ModelError, Nanos, Placement, Platform, PluginConflict, PluginKind, Policy, ServerSpec,
    Subject, System, TaskSpec, DEFAULT_CAP,
};
use toml::Value;

use crate::error::ConfigError;
use crate::line_of;
use crate::raw::{Field, RawBox, RawConfig, RawInterface, RawTask};

/// Remembers where each (object, field) was written, to put a line on model errors.
struct Lines<'a> {
    text: &'a str,
    at: HashMap<(String, String), usize>,
}

fn subject_key(s: &Subject) -> String {
    match s {
        Subject::Platform => "platform".into(),
        Subject::Box(n) => format!("box:{n}"),
        Subject::Task(n) => format!("task:{n}"),
    }
}

impl<'a> Lines<'a> {
    fn note(&mut self, subject: &Subject, field: &str, span: std::ops::Range<usize>) -> usize {
        let line = line_of(self.text, span.start);
        // The last occurrence wins: for a duplicated name, that is the duplicate.
        self.at
            .insert((subject_key(subject), field.to_string()), line);
        line
    }

    /// The line of `field` or of its closest written ancestor, else of the object itself.
    fn find(&self, subject: &Subject, field: &str) -> Option<usize> {
        let key = subject_key(subject);
        let mut f = field.to_string();
        loop {
            if let Some(&l) = self.at.get(&(key.clone(), f.clone())) {
                return Some(l);
            }
            match f.rfind(['.', '[']) {
                Some(i) => f.truncate(i),
                None => break,
            }
        }
        self.at.get(&(key, "name".to_string())).copied()
    }

    fn error(
        &mut self,
        subject: &Subject,
        field: &str,
        span: std::ops::Range<usize>,
        reason: String,
    ) -> ConfigError {
        let line = self.note(subject, field, span);
        ConfigError::invalid(Some(line), ModelError::new(subject.clone(), field, reason))
    }
}

/// Short text of a raw value for messages: `"20xs"`, `1.2`, `[...]`.
pub(crate) fn show(v: &Value) -> String {
    match v {
        Value::Array(_) => "an array".into(),
        Value::Table(_) => "a table".into(),
        other => other.to_string(),
    }
}

pub(crate) fn to_system(text: &str, raw: RawConfig) -> Result<System, ConfigError> {
    let mut lines = Lines {
        text,
        at: HashMap::new(),
    };
    let platform = platform(&mut lines, raw.platform.as_ref())?;
    let boxes = raw
        .boxes
        .iter()
        .map(|b| box_spec(&mut lines, b))
        .collect::<Result<Vec<_>, _>>()?;
    let tasks = raw
        .tasks
        .iter()
        .map(|t| task_spec(&mut lines, t))
        .collect::<Result<Vec<_>, _>>()?;
    System::new(platform, boxes, tasks).map_err(|e| {
        let line = lines.find(&e.subject, &e.field);
        ConfigError::invalid(line, e)
    })
}

/// The platform's `priorities = "LOW-HIGH"` (the daemon's members' band), if written.
pub(crate) fn priorities(
    text: &str,
    raw: Option<&crate::raw::RawPlatform>,
) -> Result<Option<rtbox_model::PrioRange>, ConfigError> {
    let Some(f) = raw.and_then(|p| p.priorities.as_ref()) else {
        return Ok(None);
    };
    let line = Some(line_of(text, f.span().start));
    let fail = |reason: String| {
        ConfigError::invalid(
            line,
            ModelError::new(Subject::Platform, "priorities", reason),
        )
    };
    let Value::String(t) = f.get_ref() else {
        return Err(fail(format!(
            "= {} must be a string \"LOW-HIGH\" such as \"40-89\"",
            show(f.get_ref())
        )));
    };
    rtbox_model::PrioRange::parse(t)
        .map(Some)
        .map_err(|e| fail(format!("= \"{t}\": {e}")))
}

fn platform(
    lines: &mut Lines,
    raw: Option<&crate::raw::RawPlatform>,
) -> Result<Platform, ConfigError> {
    let p = Subject::Platform;
    let Some(raw) = raw else {
        return Err(ConfigError::invalid(
            None,
            ModelError::new(
                p,
                "",
                "missing [platform] table (at least `cpus = N` or `cpus = \"0-3\"`)",
            ),
        ));
    };
    let Some(cpus_field) = &raw.cpus else {
        return Err(ConfigError::invalid(
            None,
            ModelError::new(
                p,
                "cpus",
                "is required (a count such as 2, or a list such as \"0-3,6\")",
            ),
        ));
    };
    let cpus = cpu_set(lines, &p, "cpus", cpus_field, true)?;
    let cap = match &raw.cap {
        Some(f) => fraction(lines, &p, "cap", f)?,
        None => Bandwidth::parse_decimal(DEFAULT_CAP).unwrap_or(Bandwidth::ONE),
    };
    lines.note(&p, "cpus", cpus_field.span());
    if let Some(f) = &raw.cap {
        lines.note(&p, "cap", f.span());
    }
    Platform::new(cpus, cap).map_err(|e| {
        let line = lines.find(&e.subject, &e.field);
        ConfigError::invalid(line, e)
    })
}

fn cpu_set(
    lines: &mut Lines,
    s: &Subject,
    path: &str,
    f: &Field,
    count_ok: bool,
) -> Result<CpuSet, ConfigError> {
    match f.get_ref() {
        Value::Integer(n) if count_ok => {
            if *n < 1 || *n > i64::from(rtbox_model::cpuset::MAX_CPU) + 1 {
                return Err(lines.error(
                    s,
                    path,
                    f.span(),
                    format!("= {n} is not a CPU count in 1..=8192"),
                ));
            }
            Ok(CpuSet::first(*n as u32))
        }
        Value::String(text) => CpuSet::parse(text).map_err(|e| {
            lines.error(
                s,
                path,
                f.span(),
                format!("= \"{text}\" is not a CPU list: {e}"),
            )
        }),
        other => Err(lines.error(
            s,
            path,
            f.span(),
            format!(
                "= {} must be a CPU list string such as \"0-3,6\"{}",
                show(other),
                if count_ok { " or a CPU count" } else { "" }
            ),
        )),
    }
}

fn duration(lines: &mut Lines, s: &Subject, path: &str, f: &Field) -> Result<Nanos, ConfigError> {
    lines.note(s, path, f.span());
    match f.get_ref() {
        Value::String(text) => parse_duration(text)
            .map_err(|e| lines.error(s, path, f.span(), format!("= \"{text}\": {e}"))),
        Value::Integer(n) => Err(lines.error(
            s,
            path,
            f.span(),
            format!("= {n} has no unit: write a string such as \"{n}ms\" (units: ns, us, ms, s)"),
        )),
        other => Err(lines.error(
            s,
            path,
            f.span(),
            format!("= {} is not a duration (write e.g. \"10ms\")", show(other)),
        )),
    }
}

fn fraction(
    lines: &mut Lines,
    s: &Subject,
    path: &str,
    f: &Field,
) -> Result<Bandwidth, ConfigError> {
    lines.note(s, path, f.span());
    let x = match f.get_ref() {
        Value::Float(x) => *x,
        Value::Integer(n) => *n as f64,
        other => {
            return Err(lines.error(
                s,
                path,
                f.span(),
                format!("= {} is not a number", show(other)),
            ));
        }
    };
    Bandwidth::from_f64(x).ok_or_else(|| {
        lines.error(
            s,
            path,
            f.span(),
            format!("= {x} is not a non-negative number"),
        )
    })
}

fn unsigned(
    lines: &mut Lines,
    s: &Subject,
    path: &str,
    f: &Field,
    max: u64,
) -> Result<u64, ConfigError> {
    lines.note(s, path, f.span());
    match f.get_ref() {
        Value::Integer(n) if *n >= 0 && (*n as u64) <= max => Ok(*n as u64),
        Value::Integer(n) => {
            Err(lines.error(s, path, f.span(), format!("= {n} is not in 0..={max}")))
        }
        other => Err(lines.error(
            s,
            path,
            f.span(),
            format!("= {} is not a whole number", show(other)),
        )),
    }
}

fn named<T: Copy>(
    lines: &mut Lines,
    s: &Subject,
    path: &str,
    f: Option<&toml::Spanned<String>>,
    from: fn(&str) -> Option<T>,
    names: &[&str],
    default: T,
) -> Result<T, ConfigError> {
    let Some(f) = f else { return Ok(default) };
    lines.note(s, path, f.span());
    from(f.get_ref()).ok_or_else(|| {
        lines.error(
            s,
            path,
            f.span(),
            format!("= \"{}\" is not one of {}", f.get_ref(), names.join(", ")),
        )
    })
}

fn box_spec(lines: &mut Lines, raw: &RawBox) -> Result<BoxSpec, ConfigError> {
    let name = raw.name.get_ref().clone();
    let s = Subject::Box(name.clone());
    lines.note(&s, "name", raw.name.span());
    let Some(iface) = &raw.interface else {
        return Err(lines.error(
            &s,
            "interface",
            raw.name.span(),
            "is missing: give one of servers, per_cpu, bdm, mpr, shared".into(),
        ));
    };
    let interface = interface(lines, &s, iface, raw.name.span())?;
    let cpus = match &raw.cpus {
        Some(f) => {
            lines.note(&s, "cpus", f.span());
            Some(cpu_set(lines, &s, "cpus", f, false)?)
        }
        None => None,
    };
    if let Some(p) = &raw.parent {
        lines.note(&s, "parent", p.span());
    }
    let plugin = plugin(lines, &s, raw)?;
    Ok(BoxSpec {
        name,
        parent: raw.parent.as_ref().map(|p| p.get_ref().clone()),
        cpus,
        interface,
        policy: named(
            lines,
            &s,
            "policy",
            raw.policy.as_ref(),
            Policy::from_name,
            Policy::NAMES,
            Policy::default(),
        )?,
        placement: named(
            lines,
            &s,
            "placement",
            raw.placement.as_ref(),
            Placement::from_name,
            Placement::NAMES,
            plugin.map_or(Placement::default(), PluginKind::placement),
        )?,
        mode: named(
            lines,
            &s,
            "mode",
            raw.mode.as_ref(),
            Mode::from_name,
            Mode::NAMES,
            Mode::default(),
        )?,
        plugin,
    })
}

/// A box's `plugin`: one of the built-in names. A plug-in orders members by fixed priority,
/// so the box's `policy` must be `fifo` (or absent); it also decides where members run, so an
/// explicit `placement` must be the one the plug-in needs (`fp`: global, the others: pinned).
fn plugin(lines: &mut Lines, s: &Subject, raw: &RawBox) -> Result<Option<PluginKind>, ConfigError> {
    let Some(f) = &raw.plugin else {
        return Ok(None);
    };
    lines.note(s, "plugin", f.span());
    let Some(kind) = PluginKind::from_name(f.get_ref()) else {
        return Err(lines.error(
            s,
            "plugin",
            f.span(),
            format!(
                "= \"{}\" is not one of {}",
                f.get_ref(),
                PluginKind::NAMES.join(", ")
            ),
        ));
    };
    // The rule is the model's (`PluginKind::check_box`); an unknown name is reported by the
    // field's own check.
    let policy = raw
        .policy
        .as_ref()
        .and_then(|p| Policy::from_name(p.get_ref()));
    let placement = raw
        .placement
        .as_ref()
        .and_then(|p| Placement::from_name(p.get_ref()));
    if let Err(e) = kind.check_box(policy, placement) {
        let span = match e {
            PluginConflict::Policy { .. } => raw.policy.as_ref().map(|p| p.span()),
            PluginConflict::Placement { .. } => raw.placement.as_ref().map(|p| p.span()),
        };
        return Err(lines.error(s, e.field(), span.unwrap_or_default(), e.to_string()));
    }
    Ok(Some(kind))
}

fn interface(
    lines: &mut Lines,
    s: &Subject,
    raw: &RawInterface,
    span: std::ops::Range<usize>,
) -> Result<Interface, ConfigError> {
    let given: Vec<&str> = [
        ("servers", raw.servers.is_some()),
        ("per_cpu", raw.per_cpu.is_some()),
        ("bdm", raw.bdm.is_some()),
        ("mpr", raw.mpr.is_some()),
        ("shared", raw.shared.is_some()),
    ]
    .into_iter()
    .filter_map(|(n, present)| present.then_some(n))
    .collect();
    if given.len() != 1 {
        let found = if given.is_empty() {
            "none".to_string()
        } else {
            given.join(" and ")
        };
        return Err(lines.error(
            s,
            "interface",
            span,
            format!("give exactly one of servers, per_cpu, bdm, mpr, shared (found {found})"),
        ));
    }
    if let Some(f) = &raw.servers {
        return Ok(Interface::Servers(servers(lines, s, f)?));
    }
    if let Some(f) = &raw.per_cpu {
        return per_cpu(lines, s, f);
    }
    if let Some(b) = &raw.bdm {
        return Ok(Interface::Bdm {
            alpha: fraction(lines, s, "interface.bdm.alpha", &b.alpha)?,
            delta: duration(lines, s, "interface.bdm.delta", &b.delta)?,
        });
    }
    if let Some(m) = &raw.mpr {
        return Ok(Interface::Mpr {
            theta: duration(lines, s, "interface.mpr.theta", &m.theta)?,
            pi: duration(lines, s, "interface.mpr.pi", &m.pi)?,
            m: unsigned(lines, s, "interface.mpr.m", &m.m, 8192)? as u32,
        });
    }
    let sh = raw
        .shared
        .as_ref()
        .ok_or_else(|| lines.error(s, "interface", 0..0, "internal: no interface".into()))?;
    Ok(Interface::Shared {
        weight: unsigned(lines, s, "interface.shared.weight", &sh.weight, 1_000_000)? as u32,
    })
}

/// `servers` is the seed-000 string `"0 100000/1000000 1 20000/500000"` (microseconds) or an
/// array of `{ cpu, budget, period }` tables.
fn servers(lines: &mut Lines, s: &Subject, f: &Field) -> Result<Vec<ServerSpec>, ConfigError> {
    let path = "interface.servers";
    lines.note(s, path, f.span());
    match f.get_ref() {
        Value::String(text) => parse_control_string(text)
            .map_err(|e| lines.error(s, path, f.span(), format!("= \"{text}\": {e}"))),
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let p = format!("{path}[{i}]");
                let Value::Table(t) = item else {
                    return Err(lines.error(s, &p, f.span(), format!("= {} is not a {{ cpu, budget, period }} table", show(item))));
                };
                if let Some(k) = t.keys().find(|k| !matches!(k.as_str(), "cpu" | "budget" | "period")) {
                    return Err(lines.error(s, &p, f.span(), format!("unknown field \"{k}\", expected cpu, budget or period")));
                }
                let get = |k: &str| t.get(k).cloned().map(|v| toml::Spanned::new(f.span(), v));
                let (Some(cpu), Some(budget), Some(period)) = (get("cpu"), get("budget"), get("period")) else {
                    return Err(lines.error(s, &p, f.span(), "needs cpu, budget and period".into()));
                };
                out.push(ServerSpec {
                    cpu: unsigned(lines, s, &format!("{p}.cpu"), &cpu, u64::from(rtbox_model::cpuset::MAX_CPU))? as u32,
                    budget: duration(lines, s, &format!("{p}.budget"), &budget)?,
                    period: duration(lines, s, &format!("{p}.period"), &period)?,
                });
            }
            Ok(out)
        }
        other => Err(lines.error(
            s,
            path,
            f.span(),
            format!("= {} must be a string \"CPU budget/period ...\" (microseconds) or an array of tables", show(other)),
        )),
    }
}

/// `per_cpu` is `"runtime period"` in microseconds (the `cpu.rt.max` style) or
/// `{ budget, period }` with units.
fn per_cpu(lines: &mut Lines, s: &Subject, f: &Field) -> Result<Interface, ConfigError> {
    let path = "interface.per_cpu";
    lines.note(s, path, f.span());
    match f.get_ref() {
        Value::String(text) => {
            let words: Vec<&str> = text.split_whitespace().collect();
            let us = |w: &str| w.parse::<u64>().ok().and_then(|v| v.checked_mul(1_000));
            match words.as_slice() {
                [q, p] => match (us(q), us(p)) {
                    (Some(budget), Some(period)) => Ok(Interface::PerCpu { budget, period }),
                    _ => Err(lines.error(s, path, f.span(), format!("= \"{text}\" must be two whole numbers of microseconds, \"runtime period\""))),
                },
                _ => Err(lines.error(s, path, f.span(), format!("= \"{text}\" must be \"runtime period\" in microseconds, e.g. \"10000 100000\""))),
            }
        }
        Value::Table(t) => {
            if let Some(k) = t
                .keys()
                .find(|k| !matches!(k.as_str(), "budget" | "period"))
            {
                return Err(lines.error(
                    s,
                    path,
                    f.span(),
                    format!("unknown field \"{k}\", expected budget or period"),
                ));
            }
            let get = |k: &str| t.get(k).cloned().map(|v| toml::Spanned::new(f.span(), v));
            let (Some(budget), Some(period)) = (get("budget"), get("period")) else {
                return Err(lines.error(s, path, f.span(), "needs budget and period".into()));
            };
            Ok(Interface::PerCpu {
                budget: duration(lines, s, &format!("{path}.budget"), &budget)?,
                period: duration(lines, s, &format!("{path}.period"), &period)?,
            })
        }
        other => Err(lines.error(
            s,
            path,
            f.span(),
            format!(
                "= {} must be \"runtime period\" (microseconds) or {{ budget, period }}",
                show(other)
            ),
        )),
    }
}

fn task_spec(lines: &mut Lines, raw: &RawTask) -> Result<TaskSpec, ConfigError> {
    let name = raw.name.get_ref().clone();
    let s = Subject::Task(name.clone());
    lines.note(&s, "name", raw.name.span());
    let wcet = duration(lines, &s, "wcet", &raw.wcet)?;
    let period = duration(lines, &s, "period", &raw.period)?;
    let opt_dur =
        |lines: &mut Lines, path: &str, f: &Option<Field>| -> Result<Option<Nanos>, ConfigError> {
            f.as_ref().map(|f| duration(lines, &s, path, f)).transpose()
        };
    let deadline = opt_dur(lines, "deadline", &raw.deadline)?.unwrap_or(period);
    let bcet = opt_dur(lines, "bcet", &raw.bcet)?;
    let offset = opt_dur(lines, "offset", &raw.offset)?.unwrap_or(0);
    let jitter = opt_dur(lines, "jitter", &raw.jitter)?.unwrap_or(0);
    let priority = raw
        .priority
        .as_ref()
        .map(|f| unsigned(lines, &s, "priority", f, 1_000_000).map(|v| v as u32))
        .transpose()?;
    let cpu = raw
        .cpu
        .as_ref()
        .map(|f| {
            unsigned(lines, &s, "cpu", f, u64::from(rtbox_model::cpuset::MAX_CPU)).map(|v| v as u32)
        })
        .transpose()?;
    let arrival = named(
        lines,
        &s,
        "arrival",
        raw.arrival.as_ref(),
        |x| match x {
            "periodic" => Some(Arrival::Periodic),
            "sporadic" => Some(Arrival::Sporadic),
            _ => None,
        },
        &["periodic", "sporadic"],
        Arrival::Periodic,
    )?;
    for (field, v) in [("box", &raw.box_name), ("after", &raw.after)] {
        if let Some(v) = v {
            lines.note(&s, field, v.span());
        }
    }
    Ok(TaskSpec {
        name,
        box_name: raw.box_name.as_ref().map(|b| b.get_ref().clone()),
        wcet,
        bcet,
        period,
        deadline,
        priority,
        cpu,
        offset,
        jitter,
        arrival,
        after: raw.after.as_ref().map(|a| a.get_ref().clone()),
    })
}
