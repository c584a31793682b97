//! A subset of rt-app's JSON workload format, in and out.
//!
//! Supported: periodic threads whose (single) phase is one or more `run` events followed by an
//! absolute or relative `timer` (a periodic task, period = timer period) or by a `sleep` (a
//! sporadic task: the next job comes at least run + sleep later); the scheduling properties
//! `policy`, `priority`, `dl-runtime`/`dl-period`/`dl-deadline`, `cpus`, `delay`, `instance`,
//! `loop`. Times in rt-app are whole microseconds. Everything else is refused with the JSON
//! path of the offending field.
//!
//! The emitter writes one thread per task with `run` (calibrated CPU work: throttled time is
//! not counted as work done) and an absolute `timer` (lateness is not forgiven), per
//! linux-facts.md. Because rt-app knows neither boxes nor nanoseconds nor FIFO deadlines, the
//! emitter adds a top-level `"rtbox"` object (ignored by rt-app, which reads only `tasks`,
//! `global` and `resources`) holding each task's box and exact values, so that
//! `parse(emit(tasks))` gives the tasks back exactly.

use std::collections::BTreeMap;

use rtbox_model::{fifo_priorities, Arrival, FifoPriorityError, Nanos, TaskSpec};

use crate::json::Json;

const NS_PER_US: Nanos = 1_000;
const NS_PER_S: Nanos = 1_000_000_000;

/// A refused rt-app file: the JSON path (e.g. `tasks.cam.phases.p1.lock`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtAppError {
    pub path: String,
    pub reason: String,
}

impl std::fmt::Display for RtAppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "{}: {}", self.path, self.reason)
        }
    }
}

impl std::error::Error for RtAppError {}

fn err(path: &str, reason: impl Into<String>) -> RtAppError {
    RtAppError {
        path: path.to_string(),
        reason: reason.into(),
    }
}

/// Linux scheduling classes rt-app can set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedPolicy {
    Other,
    Idle,
    Fifo,
    Rr,
    Deadline,
}

impl SchedPolicy {
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "SCHED_OTHER" => Some(SchedPolicy::Other),
            "SCHED_IDLE" => Some(SchedPolicy::Idle),
            "SCHED_FIFO" => Some(SchedPolicy::Fifo),
            "SCHED_RR" => Some(SchedPolicy::Rr),
            "SCHED_DEADLINE" => Some(SchedPolicy::Deadline),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            SchedPolicy::Other => "SCHED_OTHER",
            SchedPolicy::Idle => "SCHED_IDLE",
            SchedPolicy::Fifo => "SCHED_FIFO",
            SchedPolicy::Rr => "SCHED_RR",
            SchedPolicy::Deadline => "SCHED_DEADLINE",
        }
    }
    pub fn is_rt(self) -> bool {
        matches!(self, SchedPolicy::Fifo | SchedPolicy::Rr)
    }
}

/// How an rt-app timer measures its period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerMode {
    /// From the first use: late jobs do not shift later releases.
    Absolute,
    /// From the end of the phase: lateness is forgiven.
    Relative,
}

/// SCHED_DEADLINE parameters in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DlParams {
    pub runtime: Nanos,
    pub period: Nanos,
    pub deadline: Nanos,
}

/// What rt-app will do with one thread, beyond its `TaskSpec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtAppThread {
    /// The task's name (`name-i` for instance i when `instance` > 1).
    pub name: String,
    pub policy: SchedPolicy,
    /// The rt-app priority (RT priority for FIFO/RR, nice for OTHER).
    pub priority: i64,
    pub cpus: Vec<u32>,
    pub dl: Option<DlParams>,
    /// `None` for sleep-based (sporadic) threads.
    pub timer: Option<TimerMode>,
}

/// A parsed rt-app workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtAppWorkload {
    /// `global.duration`, if it is not -1.
    pub duration: Option<Nanos>,
    pub threads: Vec<RtAppThread>,
    /// One task per thread, same order.
    pub tasks: Vec<TaskSpec>,
}

/// Parses an rt-app JSON workload (the subset described in the module docs).
pub fn parse(text: &str) -> Result<RtAppWorkload, RtAppError> {
    let root = Json::parse(text).map_err(|e| err("", format!("not valid JSON: {e}")))?;
    let Json::Object(top) = root else {
        return Err(err(
            "",
            format!("the file must hold a JSON object, not {}", root.kind()),
        ));
    };
    let mut tasks_obj = None;
    let mut global = None;
    let mut meta = None;
    for (k, v) in &top {
        match k.as_str() {
            "tasks" => tasks_obj = Some(v),
            "global" => global = Some(v),
            "rtbox" => meta = Some(v),
            "resources" => match v {
                Json::Object(kv) if kv.is_empty() => {}
                _ => {
                    return Err(err(
                        "resources",
                        "resources (mutexes, conditions) are not supported",
                    ))
                }
            },
            other => return Err(err(other, "unknown top-level key (expected tasks, global)")),
        }
    }
    let (duration, default_policy) = match global {
        Some(g) => parse_global(g)?,
        None => (None, SchedPolicy::Other),
    };
    let tasks_obj =
        tasks_obj.ok_or_else(|| err("tasks", "missing (rt-app needs a tasks object)"))?;
    let Json::Object(entries) = tasks_obj else {
        return Err(err(
            "tasks",
            format!("must be an object of threads, not {}", tasks_obj.kind()),
        ));
    };
    if entries.is_empty() {
        return Err(err("tasks", "is empty"));
    }
    let meta = match meta {
        Some(m) => parse_meta(m)?,
        None => BTreeMap::new(),
    };
    let mut threads = Vec::new();
    let mut tasks = Vec::new();
    for (name, body) in entries {
        let path = format!("tasks.{name}");
        for (thread, task) in parse_thread(&path, name, body, default_policy)? {
            if threads.iter().any(|t: &RtAppThread| t.name == thread.name) {
                return Err(err(
                    &path,
                    format!("thread name \"{}\" is used twice", thread.name),
                ));
            }
            threads.push(thread);
            tasks.push(task);
        }
    }
    for (name, m) in &meta {
        let Some(i) = tasks.iter().position(|t| &t.name == name) else {
            return Err(err(
                &format!("rtbox.tasks.{name}"),
                "names no thread of tasks",
            ));
        };
        apply_meta(&format!("rtbox.tasks.{name}"), &mut tasks[i], m)?;
    }
    Ok(RtAppWorkload {
        duration,
        threads,
        tasks,
    })
}

fn parse_global(g: &Json) -> Result<(Option<Nanos>, SchedPolicy), RtAppError> {
    let Json::Object(kv) = g else {
        return Err(err(
            "global",
            format!("must be an object, not {}", g.kind()),
        ));
    };
    let mut duration = None;
    let mut policy = SchedPolicy::Other;
    for (k, v) in kv {
        let path = format!("global.{k}");
        match k.as_str() {
            "duration" => match v {
                Json::Int(-1) => duration = None,
                Json::Int(s) if *s > 0 => {
                    duration = Some(
                        (*s as Nanos)
                            .checked_mul(NS_PER_S)
                            .ok_or_else(|| err(&path, "is too large"))?,
                    )
                }
                _ => return Err(err(&path, "must be a positive number of seconds or -1")),
            },
            "default_policy" => policy = parse_policy(&path, v)?,
            // Settings that change how rt-app runs or logs, not the schedule.
            "calibration" | "pi_enabled" | "lock_pages" | "logdir" | "log_basename"
            | "log_size" | "ftrace" | "gnuplot" | "io_device" | "mem_buffer_size"
            | "cumulative_slack" => {}
            _ => return Err(err(&path, "unknown global setting")),
        }
    }
    Ok((duration, policy))
}

fn parse_policy(path: &str, v: &Json) -> Result<SchedPolicy, RtAppError> {
    match v {
        Json::Str(s) => SchedPolicy::from_name(s).ok_or_else(|| {
            err(
                path,
                format!("\"{s}\" is not a policy (SCHED_OTHER, SCHED_IDLE, SCHED_FIFO, SCHED_RR, SCHED_DEADLINE)"),
            )
        }),
        other => Err(err(path, format!("must be a string, not {}", other.kind()))),
    }
}

/// A non-negative integer number of microseconds, as ns.
fn micros(path: &str, v: &Json, positive: bool) -> Result<Nanos, RtAppError> {
    match v {
        Json::Int(us) if *us > 0 || (!positive && *us == 0) => (*us as Nanos)
            .checked_mul(NS_PER_US)
            .ok_or_else(|| err(path, "is too large")),
        Json::Int(us) => Err(err(
            path,
            format!(
                "= {us} must be {} (microseconds)",
                if positive { "positive" } else { "non-negative" }
            ),
        )),
        other => Err(err(
            path,
            format!(
                "must be an integer number of microseconds, not {}",
                other.kind()
            ),
        )),
    }
}

/// Scheduling properties that may appear on a thread or on its phase.
#[derive(Debug, Clone, Default)]
struct Props {
    policy: Option<SchedPolicy>,
    priority: Option<i64>,
    cpus: Option<Vec<u32>>,
    dl_runtime: Option<Nanos>,
    dl_period: Option<Nanos>,
    dl_deadline: Option<Nanos>,
}

/// Takes `key` into `props` if it is a scheduling property; returns whether it was one.
fn take_prop(path: &str, key: &str, v: &Json, props: &mut Props) -> Result<bool, RtAppError> {
    match key {
        "policy" => props.policy = Some(parse_policy(path, v)?),
        "priority" => match v {
            Json::Int(p) => props.priority = Some(*p),
            other => {
                return Err(err(
                    path,
                    format!("must be an integer, not {}", other.kind()),
                ))
            }
        },
        "cpus" => {
            let Json::Array(items) = v else {
                return Err(err(
                    path,
                    format!("must be an array of CPU numbers, not {}", v.kind()),
                ));
            };
            let mut cpus = Vec::new();
            for (i, c) in items.iter().enumerate() {
                match c {
                    Json::Int(c) if (0..=i64::from(u32::MAX)).contains(c) => cpus.push(*c as u32),
                    _ => return Err(err(&format!("{path}[{i}]"), "must be a CPU number")),
                }
            }
            if cpus.is_empty() {
                return Err(err(path, "is empty"));
            }
            props.cpus = Some(cpus);
        }
        "dl-runtime" => props.dl_runtime = Some(micros(path, v, true)?),
        "dl-period" => props.dl_period = Some(micros(path, v, true)?),
        "dl-deadline" => props.dl_deadline = Some(micros(path, v, true)?),
        _ => return Ok(false),
    }
    Ok(true)
}

impl Props {
    fn overlay(&self, phase: &Props) -> Props {
        Props {
            policy: phase.policy.or(self.policy),
            priority: phase.priority.or(self.priority),
            cpus: phase.cpus.clone().or_else(|| self.cpus.clone()),
            dl_runtime: phase.dl_runtime.or(self.dl_runtime),
            dl_period: phase.dl_period.or(self.dl_period),
            dl_deadline: phase.dl_deadline.or(self.dl_deadline),
        }
    }
}

/// One job's shape: total `run` work, then how the thread waits for the next job.
#[derive(Debug, Clone, Default)]
struct JobShape {
    run: Nanos,
    end: Option<(Nanos, Option<TimerMode>)>,
}

/// rt-app event names that this subset refuses, with the reason.
const UNSUPPORTED_EVENTS: &[(&str, &str)] = &[
    (
        "runtime",
        "is wall-clock spinning (throttled time counts as work); use \"run\"",
    ),
    ("iorun", "I/O events are not supported"),
    ("membind_nodes", "NUMA binding is not supported"),
    ("mem", "memory events are not supported"),
    ("lock", "mutexes are not supported"),
    ("unlock", "mutexes are not supported"),
    ("wait", "condition variables are not supported"),
    ("signal", "condition variables are not supported"),
    ("broad", "condition variables are not supported"),
    ("sync", "condition variables are not supported"),
    ("barrier", "barriers are not supported"),
    ("suspend", "suspend/resume is not supported"),
    ("resume", "suspend/resume is not supported"),
    ("yield", "yield is not supported"),
    ("fork", "fork is not supported"),
    ("util_min", "utilization clamping is not supported"),
    ("util_max", "utilization clamping is not supported"),
    (
        "taskgroup",
        "task groups are not supported (rtbox places threads in boxes itself)",
    ),
];

/// Adds one event to the job shape; `kind` is the event name the key starts with.
fn take_event(path: &str, key: &str, v: &Json, job: &mut JobShape) -> Result<(), RtAppError> {
    // rt-app names repeated events with a suffix: run0, run1, timer0...
    if let Some((_, why)) = UNSUPPORTED_EVENTS
        .iter()
        .find(|(name, _)| key.starts_with(name))
    {
        return Err(err(path, *why));
    }
    if key.starts_with("run") {
        if job.end.is_some() {
            return Err(err(
                path,
                "a run after a sleep or timer would be a self-suspending job, which is not supported",
            ));
        }
        job.run += micros(path, v, true)?;
    } else if key.starts_with("sleep") {
        if job.end.is_some() {
            return Err(err(path, "only one sleep or timer per job is supported"));
        }
        if job.run == 0 {
            return Err(err(path, "a sleep must follow the job's run events"));
        }
        job.end = Some((micros(path, v, true)?, None));
    } else if key.starts_with("timer") {
        if job.end.is_some() {
            return Err(err(path, "only one sleep or timer per job is supported"));
        }
        if job.run == 0 {
            return Err(err(path, "a timer must follow the job's run events"));
        }
        let Json::Object(kv) = v else {
            return Err(err(
                path,
                format!("must be an object {{ref, period, mode}}, not {}", v.kind()),
            ));
        };
        let mut period = None;
        let mut mode = TimerMode::Relative;
        for (k, x) in kv {
            let p = format!("{path}.{k}");
            match k.as_str() {
                "ref" => {
                    if !matches!(x, Json::Str(_)) {
                        return Err(err(&p, "must be a string"));
                    }
                }
                "period" => period = Some(micros(&p, x, true)?),
                "mode" => {
                    mode = match x {
                        Json::Str(s) if s == "absolute" => TimerMode::Absolute,
                        Json::Str(s) if s == "relative" => TimerMode::Relative,
                        _ => return Err(err(&p, "must be \"absolute\" or \"relative\"")),
                    }
                }
                _ => return Err(err(&p, "unknown timer field (ref, period, mode)")),
            }
        }
        let period = period.ok_or_else(|| err(path, "timer has no period"))?;
        job.end = Some((period, Some(mode)));
    } else {
        return Err(err(path, "unknown property or event"));
    }
    Ok(())
}

fn parse_thread(
    path: &str,
    name: &str,
    body: &Json,
    default_policy: SchedPolicy,
) -> Result<Vec<(RtAppThread, TaskSpec)>, RtAppError> {
    let Json::Object(kv) = body else {
        return Err(err(
            path,
            format!("a thread must be an object, not {}", body.kind()),
        ));
    };
    let mut props = Props::default();
    let mut instances = 1i64;
    let mut delay = 0;
    let mut phases = None;
    let mut job = JobShape::default();
    let mut has_events = false;
    for (k, v) in kv {
        let p = format!("{path}.{k}");
        match k.as_str() {
            "instance" => match v {
                Json::Int(i) if *i >= 1 => instances = *i,
                _ => return Err(err(&p, "must be an integer >= 1")),
            },
            "delay" => delay = micros(&p, v, false)?,
            "loop" => check_loop(&p, v)?,
            "phases" => phases = Some((p, v)),
            _ => {
                if !take_prop(&p, k, v, &mut props)? {
                    take_event(&p, k, v, &mut job)?;
                    has_events = true;
                }
            }
        }
    }
    let (props, job, job_path) = match phases {
        Some((p, v)) => {
            if has_events {
                return Err(err(path, "has both phases and events of its own"));
            }
            let Json::Object(list) = v else {
                return Err(err(&p, "must be an object of phases"));
            };
            if list.len() != 1 {
                return Err(err(
                    &p,
                    format!(
                        "has {} phases; only a single periodic phase is supported",
                        list.len()
                    ),
                ));
            }
            let (phase_name, phase) = &list[0];
            let pp = format!("{p}.{phase_name}");
            let Json::Object(events) = phase else {
                return Err(err(&pp, "a phase must be an object"));
            };
            let mut phase_props = Props::default();
            let mut job = JobShape::default();
            for (k, v) in events {
                let ep = format!("{pp}.{k}");
                if k == "loop" {
                    check_loop(&ep, v)?;
                } else if !take_prop(&ep, k, v, &mut phase_props)? {
                    take_event(&ep, k, v, &mut job)?;
                }
            }
            (props.overlay(&phase_props), job, pp)
        }
        None => (props, job, path.to_string()),
    };
    if job.run == 0 {
        return Err(err(&job_path, "has no run event"));
    }
    let Some((wait, timer)) = job.end else {
        return Err(err(
            &job_path,
            "has no timer or sleep after its run events: the thread would never wait, so it is not periodic",
        ));
    };
    let policy = props.policy.unwrap_or(default_policy);
    let priority = props
        .priority
        .unwrap_or(if policy.is_rt() { 10 } else { 0 });
    if policy.is_rt() && !(1..=99).contains(&priority) {
        return Err(err(
            &format!("{path}.priority"),
            format!("= {priority} is not an RT priority (1..99)"),
        ));
    }
    let dl = if policy == SchedPolicy::Deadline {
        let runtime = props
            .dl_runtime
            .ok_or_else(|| err(&format!("{path}.dl-runtime"), "missing for SCHED_DEADLINE"))?;
        let period = props.dl_period.unwrap_or(runtime);
        let deadline = props.dl_deadline.unwrap_or(period);
        if !(runtime <= deadline && deadline <= period) {
            return Err(err(
                path,
                "SCHED_DEADLINE needs dl-runtime <= dl-deadline <= dl-period",
            ));
        }
        Some(DlParams {
            runtime,
            period,
            deadline,
        })
    } else {
        if props.dl_runtime.is_some() || props.dl_period.is_some() || props.dl_deadline.is_some() {
            return Err(err(
                path,
                format!(
                    "dl-* parameters need policy SCHED_DEADLINE, not {}",
                    policy.name()
                ),
            ));
        }
        None
    };
    let (period, arrival) = match timer {
        Some(_) => (wait, Arrival::Periodic),
        // run then sleep: the next job is released at least run + sleep after this one.
        None => (wait + job.run, Arrival::Sporadic),
    };
    let deadline = dl.map_or(period, |d| d.deadline).min(period);
    let cpus = props.cpus.unwrap_or_default();
    let mut out = Vec::new();
    for i in 0..instances {
        let tname = if instances == 1 {
            name.to_string()
        } else {
            format!("{name}-{i}")
        };
        let mut task = TaskSpec::periodic(tname.clone(), job.run, period);
        task.deadline = deadline;
        task.arrival = arrival;
        task.offset = delay;
        task.priority = policy.is_rt().then_some(priority as u32);
        task.cpu = (cpus.len() == 1).then(|| cpus[0]);
        let thread = RtAppThread {
            name: tname,
            policy,
            priority,
            cpus: cpus.clone(),
            dl,
            timer,
        };
        out.push((thread, task));
    }
    Ok(out)
}

fn check_loop(path: &str, v: &Json) -> Result<(), RtAppError> {
    match v {
        Json::Int(n) if *n == -1 || *n >= 1 => Ok(()),
        _ => Err(err(path, "must be -1 (forever) or a positive count")),
    }
}

/// Exact values the `"rtbox"` object carries for one task.
#[derive(Debug, Clone, Default)]
struct Meta {
    box_name: Option<String>,
    wcet_ns: Option<Nanos>,
    bcet_ns: Option<Nanos>,
    period_ns: Option<Nanos>,
    deadline_ns: Option<Nanos>,
    offset_ns: Option<Nanos>,
    priority: Option<u32>,
    sporadic: bool,
}

fn parse_meta(m: &Json) -> Result<BTreeMap<String, Meta>, RtAppError> {
    let Json::Object(kv) = m else {
        return Err(err("rtbox", "must be an object"));
    };
    let mut out = BTreeMap::new();
    for (k, v) in kv {
        match (k.as_str(), v) {
            ("version", Json::Int(1)) => {}
            ("version", _) => return Err(err("rtbox.version", "only version 1 is known")),
            ("tasks", Json::Object(tasks)) => {
                for (name, t) in tasks {
                    let path = format!("rtbox.tasks.{name}");
                    let Json::Object(fields) = t else {
                        return Err(err(&path, "must be an object"));
                    };
                    let mut meta = Meta::default();
                    for (f, x) in fields {
                        let p = format!("{path}.{f}");
                        let ns = |x: &Json| match x {
                            Json::Int(n) if *n >= 0 => Ok(*n as Nanos),
                            _ => Err(err(&p, "must be a non-negative integer (ns)")),
                        };
                        match f.as_str() {
                            "box" => match x {
                                Json::Str(s) => meta.box_name = Some(s.clone()),
                                _ => return Err(err(&p, "must be a string")),
                            },
                            "wcet_ns" => meta.wcet_ns = Some(ns(x)?),
                            "bcet_ns" => meta.bcet_ns = Some(ns(x)?),
                            "period_ns" => meta.period_ns = Some(ns(x)?),
                            "deadline_ns" => meta.deadline_ns = Some(ns(x)?),
                            "offset_ns" => meta.offset_ns = Some(ns(x)?),
                            "priority" => {
                                let v = ns(x)?;
                                meta.priority =
                                    Some(u32::try_from(v).map_err(|_| err(&p, "is too large"))?)
                            }
                            "arrival" => match x {
                                Json::Str(s) if s == "sporadic" => meta.sporadic = true,
                                Json::Str(s) if s == "periodic" => meta.sporadic = false,
                                _ => return Err(err(&p, "must be \"periodic\" or \"sporadic\"")),
                            },
                            _ => return Err(err(&p, "unknown field")),
                        }
                    }
                    out.insert(name.clone(), meta);
                }
            }
            ("tasks", _) => return Err(err("rtbox.tasks", "must be an object")),
            _ => return Err(err(&format!("rtbox.{k}"), "unknown field")),
        }
    }
    Ok(out)
}

/// Overrides a task's µs-rounded values with the exact ones, refusing values that do not
/// match what rt-app itself will run (a hand-edited file must stay consistent).
fn apply_meta(path: &str, task: &mut TaskSpec, m: &Meta) -> Result<(), RtAppError> {
    if let Some(w) = m.wcet_ns {
        if w == 0 || w.div_ceil(NS_PER_US) * NS_PER_US != task.wcet {
            return Err(err(
                &format!("{path}.wcet_ns"),
                format!(
                    "= {w} does not round up to the thread's run of {} us",
                    task.wcet / NS_PER_US
                ),
            ));
        }
        task.wcet = w;
    }
    if let Some(b) = m.bcet_ns {
        if b == 0 || b > task.wcet {
            return Err(err(&format!("{path}.bcet_ns"), "must be in (0, wcet_ns]"));
        }
        task.bcet = Some(b);
    }
    if let Some(p) = m.period_ns {
        if p != task.period {
            return Err(err(
                &format!("{path}.period_ns"),
                format!("= {p} differs from the timer period {}", task.period),
            ));
        }
    }
    if let Some(d) = m.deadline_ns {
        if d == 0 || d > task.period {
            return Err(err(
                &format!("{path}.deadline_ns"),
                "must be in (0, period]",
            ));
        }
        task.deadline = d;
    }
    if let Some(o) = m.offset_ns {
        if o.div_ceil(NS_PER_US) * NS_PER_US != task.offset {
            return Err(err(
                &format!("{path}.offset_ns"),
                "does not round up to the thread's delay",
            ));
        }
        task.offset = o;
    }
    if m.priority.is_some() {
        task.priority = m.priority;
    }
    task.box_name = m.box_name.clone();
    if m.sporadic {
        task.arrival = Arrival::Sporadic;
    }
    Ok(())
}

/// Which Linux class the emitted threads use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EmitPolicy {
    /// SCHED_FIFO at the task's priority (unset: deadline monotonic, counting down from 99 or
    /// from just below the lowest explicit priority; `rtbox_model::fifo_priorities`).
    #[default]
    Fifo,
    /// One SCHED_DEADLINE reservation per thread: runtime = C, period = T, deadline = D.
    Deadline,
}

/// Settings of the emitted `global` object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmitOptions {
    pub policy: EmitPolicy,
    /// `global.duration` in whole seconds (rounded up); `None` writes -1.
    pub duration: Option<Nanos>,
    /// `global.calibration`: `None` lets rt-app calibrate on CPU0; `Some(ns)` fixes ns per loop.
    pub calibration_ns_per_loop: Option<u64>,
    pub logdir: String,
    pub log_basename: String,
}

impl Default for EmitOptions {
    fn default() -> Self {
        EmitOptions {
            policy: EmitPolicy::Fifo,
            duration: None,
            calibration_ns_per_loop: None,
            logdir: "./".into(),
            log_basename: "rt-app".into(),
        }
    }
}

/// Why tasks cannot be written as rt-app threads.
pub type EmitError = RtAppError;

/// Writes `tasks` as an rt-app JSON workload (see the module docs). Execution times are
/// rounded up to whole µs (rt-app's unit), SCHED_DEADLINE deadlines down; periods must be whole
/// µs; offsets are rounded up.
/// Best-case times are kept in the `rtbox` object only: rt-app runs every job for its WCET.
pub fn emit(tasks: &[TaskSpec], opts: &EmitOptions) -> Result<String, EmitError> {
    let prio = thread_priorities(tasks, opts.policy)?;
    let mut threads = Vec::new();
    let mut meta = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let path = format!("tasks[{i}] ({})", t.name);
        let whole_us = |field: &str, v: Nanos| {
            if v.is_multiple_of(NS_PER_US) {
                Ok(Json::Int((v / NS_PER_US) as i64))
            } else {
                Err(err(
                    &format!("{path}.{field}"),
                    format!("= {v}ns is not a whole number of microseconds (rt-app's unit)"),
                ))
            }
        };
        if t.after.is_some() {
            return Err(err(
                &format!("{path}.after"),
                "chained tasks cannot be expressed in the rt-app subset",
            ));
        }
        if t.jitter != 0 {
            return Err(err(
                &format!("{path}.jitter"),
                "rt-app timers have no release jitter",
            ));
        }
        let run_us = t.wcet.div_ceil(NS_PER_US) as i64;
        let mut body = Vec::new();
        match opts.policy {
            EmitPolicy::Fifo => {
                body.push(("policy".to_string(), Json::Str("SCHED_FIFO".into())));
                body.push(("priority".to_string(), Json::Int(i64::from(prio[i]))));
            }
            EmitPolicy::Deadline => {
                body.push(("policy".to_string(), Json::Str("SCHED_DEADLINE".into())));
                body.push(("dl-runtime".to_string(), Json::Int(run_us)));
                body.push(("dl-period".to_string(), whole_us("period", t.period)?));
                // Rounded down: the reservation's deadline must not be looser than D.
                let dl_deadline = (t.deadline / NS_PER_US) as i64;
                if dl_deadline < run_us {
                    return Err(err(
                        &format!("{path}.deadline"),
                        "is within a microsecond of wcet: SCHED_DEADLINE needs runtime <= deadline in whole us",
                    ));
                }
                body.push(("dl-deadline".to_string(), Json::Int(dl_deadline)));
            }
        }
        if let Some(c) = t.cpu {
            body.push((
                "cpus".to_string(),
                Json::Array(vec![Json::Int(i64::from(c))]),
            ));
        }
        if t.offset > 0 {
            body.push((
                "delay".to_string(),
                Json::Int(t.offset.div_ceil(NS_PER_US) as i64),
            ));
        }
        body.push(("loop".to_string(), Json::Int(-1)));
        body.push(("run".to_string(), Json::Int(run_us)));
        body.push((
            "timer".to_string(),
            Json::Object(vec![
                ("ref".into(), Json::Str("unique".into())),
                ("period".into(), whole_us("period", t.period)?),
                ("mode".into(), Json::Str("absolute".into())),
            ]),
        ));
        threads.push((t.name.clone(), Json::Object(body)));
        let mut m = vec![
            ("wcet_ns".to_string(), Json::Int(t.wcet as i64)),
            ("period_ns".to_string(), Json::Int(t.period as i64)),
            ("deadline_ns".to_string(), Json::Int(t.deadline as i64)),
        ];
        if let Some(b) = &t.box_name {
            m.insert(0, ("box".into(), Json::Str(b.clone())));
        }
        if let Some(b) = t.bcet {
            m.push(("bcet_ns".into(), Json::Int(b as i64)));
        }
        if t.offset > 0 {
            m.push(("offset_ns".into(), Json::Int(t.offset as i64)));
        }
        if let Some(p) = t.priority {
            m.push(("priority".into(), Json::Int(i64::from(p))));
        }
        if t.arrival == Arrival::Sporadic {
            m.push(("arrival".into(), Json::Str("sporadic".into())));
        }
        meta.push((t.name.clone(), Json::Object(m)));
    }
    let duration = opts
        .duration
        .map_or(-1, |d| d.div_ceil(NS_PER_S).max(1) as i64);
    let calibration = match opts.calibration_ns_per_loop {
        Some(ns) => Json::Int(ns as i64),
        None => Json::Str("CPU0".into()),
    };
    let global = Json::Object(vec![
        ("duration".into(), Json::Int(duration)),
        ("calibration".into(), calibration),
        ("default_policy".into(), Json::Str("SCHED_OTHER".into())),
        ("lock_pages".into(), Json::Bool(true)),
        ("logdir".into(), Json::Str(opts.logdir.clone())),
        ("log_basename".into(), Json::Str(opts.log_basename.clone())),
    ]);
    let root = Json::Object(vec![
        ("tasks".into(), Json::Object(threads)),
        ("global".into(), global),
        (
            "rtbox".into(),
            Json::Object(vec![
                ("version".into(), Json::Int(1)),
                ("tasks".into(), Json::Object(meta)),
            ]),
        ),
    ]);
    Ok(root.to_pretty())
}

/// SCHED_FIFO priorities by the model's one rule (`rtbox_model::fifo_priorities`), as an
/// emission error naming the task. SCHED_DEADLINE threads carry no FIFO priority, so for them
/// only an out-of-range explicit priority is refused (it would be written to the metadata).
fn thread_priorities(tasks: &[TaskSpec], policy: EmitPolicy) -> Result<Vec<u32>, EmitError> {
    match fifo_priorities(tasks) {
        Ok(p) => Ok(p),
        Err(FifoPriorityError::TooFewLevels { .. }) if policy == EmitPolicy::Deadline => {
            Ok(Vec::new())
        }
        Err(e @ FifoPriorityError::OutOfRange { task, .. }) => Err(err(
            &format!("tasks[{task}] ({}).priority", tasks[task].name),
            e.to_string(),
        )),
        Err(e) => Err(err("tasks[*].priority", e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_hand_written_periodic_thread() {
        let text = r#"{
            "tasks": {
                "cam": {
                    "policy": "SCHED_FIFO", "priority": 50, "cpus": [1], "delay": 250,
                    "loop": -1,
                    "run0": 2000, "run1": 500,
                    "timer": {"ref": "unique", "period": 10000, "mode": "absolute"}
                },
                "log": {"instance": 2, "run": 1000, "sleep": 9000}
            },
            "global": {"duration": 5, "calibration": "CPU0", "default_policy": "SCHED_OTHER"}
        }"#;
        let w = parse(text).unwrap();
        assert_eq!(w.duration, Some(5 * NS_PER_S));
        assert_eq!(w.tasks.len(), 3);
        let cam = &w.tasks[0];
        assert_eq!(
            (cam.wcet, cam.period, cam.deadline),
            (2_500_000, 10_000_000, 10_000_000)
        );
        assert_eq!(
            (cam.priority, cam.cpu, cam.offset),
            (Some(50), Some(1), 250_000)
        );
        assert_eq!(w.threads[0].timer, Some(TimerMode::Absolute));
        assert_eq!(w.tasks[1].name, "log-0");
        assert_eq!(w.tasks[2].name, "log-1");
        assert_eq!(w.tasks[1].arrival, Arrival::Sporadic);
        assert_eq!(w.tasks[1].period, 10_000_000);
        assert_eq!(w.tasks[1].priority, None);
        assert_eq!(w.threads[1].policy, SchedPolicy::Other);
    }

    #[test]
    fn parses_phases_and_deadline_threads() {
        let text = r#"{"tasks": {"dl": {
            "policy": "SCHED_DEADLINE", "dl-runtime": 3000, "dl-period": 20000, "dl-deadline": 15000,
            "phases": {"p": {"loop": 100, "run": 2000, "timer": {"ref": "t", "period": 20000}}}
        }}}"#;
        let w = parse(text).unwrap();
        let t = &w.tasks[0];
        assert_eq!(
            (t.wcet, t.period, t.deadline),
            (2_000_000, 20_000_000, 15_000_000)
        );
        assert_eq!(
            w.threads[0].dl,
            Some(DlParams {
                runtime: 3_000_000,
                period: 20_000_000,
                deadline: 15_000_000
            })
        );
        assert_eq!(w.threads[0].timer, Some(TimerMode::Relative));
    }

    fn error_of(text: &str) -> RtAppError {
        parse(text).unwrap_err()
    }

    #[test]
    fn errors_name_the_json_path() {
        let e = error_of(
            r#"{"tasks": {"a": {"run": 10, "lock": "m", "timer": {"ref": "x", "period": 100}}}}"#,
        );
        assert_eq!(e.path, "tasks.a.lock");
        let e = error_of(r#"{"tasks": {"a": {"membind_nodes": [0], "run": 1, "sleep": 1}}}"#);
        assert!(e.reason.contains("NUMA"), "{e}");
        let e =
            error_of(r#"{"tasks": {"a": {"runtime": 10, "timer": {"ref": "x", "period": 100}}}}"#);
        assert_eq!(e.path, "tasks.a.runtime");
        assert!(e.reason.contains("use \"run\""));
        let e = error_of(r#"{"tasks": {"a": {"run": 10, "timer": {"ref": "x", "period": -3}}}}"#);
        assert_eq!(e.path, "tasks.a.timer.period");
        let e = error_of(
            r#"{"tasks": {"a": {"run": 10, "timer": {"ref": "x", "period": 100, "mode": "abs"}}}}"#,
        );
        assert_eq!(e.path, "tasks.a.timer.mode");
        let e = error_of(r#"{"tasks": {"a": {"run": 10}}}"#);
        assert_eq!(e.path, "tasks.a");
        let e = error_of(r#"{"tasks": {"a": {"run": 10, "sleep": 5, "run1": 3}}}"#);
        assert_eq!(e.path, "tasks.a.run1");
        let e = error_of(
            r#"{"tasks": {"a": {"policy": "SCHED_FIFO", "priority": 120, "run": 1, "sleep": 1}}}"#,
        );
        assert_eq!(e.path, "tasks.a.priority");
        let e = error_of(
            r#"{"tasks": {"a": {"phases": {"x": {"run": 1, "sleep": 1}, "y": {"run": 1, "sleep": 1}}}}}"#,
        );
        assert_eq!(e.path, "tasks.a.phases");
        let e = error_of(r#"{"tasks": {"a": {"run": 1.5, "sleep": 1}}}"#);
        assert_eq!(e.path, "tasks.a.run");
        let e = error_of(r#"{"tasks": {"a": {"cpus": [0, "x"], "run": 1, "sleep": 1}}}"#);
        assert_eq!(e.path, "tasks.a.cpus[1]");
        let e = error_of(r#"{"tasks": {"a": {"run": 1, "sleep": 1}}, "global": {"duration": 0}}"#);
        assert_eq!(e.path, "global.duration");
        let e =
            error_of(r#"{"tasks": {"a": {"run": 1, "sleep": 1}}, "rtbox": {"tasks": {"b": {}}}}"#);
        assert_eq!(e.path, "rtbox.tasks.b");
        let e = error_of(
            r#"{"tasks": {"a": {"run": 2, "sleep": 1}}, "rtbox": {"tasks": {"a": {"wcet_ns": 5}}}}"#,
        );
        assert_eq!(e.path, "rtbox.tasks.a.wcet_ns");
        let e = error_of(r#"{"tasks": {"a": {"run": 1, "sleep": 1}}, "extra": 1}"#);
        assert_eq!(e.path, "extra");
        assert!(error_of("[1]").reason.contains("object"));
        assert!(error_of("{").reason.contains("not valid JSON"));
    }

    #[test]
    fn emit_refuses_what_rt_app_cannot_express() {
        let mut t = TaskSpec::periodic("a", 1000, 10_000_500);
        let e = emit(std::slice::from_ref(&t), &EmitOptions::default()).unwrap_err();
        assert!(e.path.ends_with(".period"), "{e}");
        t.period = 10_000_000;
        t.jitter = 5;
        assert!(emit(std::slice::from_ref(&t), &EmitOptions::default())
            .unwrap_err()
            .path
            .ends_with(".jitter"));
        t.jitter = 0;
        t.priority = Some(150);
        assert!(emit(&[t], &EmitOptions::default())
            .unwrap_err()
            .path
            .ends_with(".priority"));
    }
}
