//! The reservation model: a platform, a tree of boxes with interfaces, and tasks.
//!
//! A [`System`] is always valid: [`System::new`] checks every rule that does not depend on
//! bandwidth sums (those are admission control's job, see [`crate::admission`]).

use std::collections::{BTreeMap, BTreeSet};

use crate::bandwidth::Bandwidth;
use crate::cpuset::CpuSet;
use crate::error::{ModelError, Subject};
use crate::servers::{box_servers, Server};
use crate::time::{format_duration, Nanos};

/// Default admission cap per CPU: the kernel keeps 5 % of every CPU from RT tasks
/// (`sched_rt_runtime_us` 950000/1000000 and the fair server), so reservations above 0.95
/// could not be honoured.
pub const DEFAULT_CAP: &str = "0.95";

/// The physical CPUs and how much of each may be reserved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    pub cpus: CpuSet,
    pub cap: Bandwidth,
}

impl Platform {
    pub fn new(cpus: CpuSet, cap: Bandwidth) -> Result<Self, ModelError> {
        if cpus.is_empty() {
            return Err(ModelError::new(Subject::Platform, "cpus", "is empty"));
        }
        if cap == Bandwidth::ZERO || cap > Bandwidth::ONE {
            return Err(ModelError::new(
                Subject::Platform,
                "cap",
                format!("= {cap} is not in (0, 1]"),
            ));
        }
        Ok(Platform { cpus, cap })
    }

    /// `count` CPUs numbered from 0, with the default cap.
    pub fn with_cpus(count: u32) -> Self {
        Platform {
            cpus: CpuSet::first(count),
            cap: Bandwidth::parse_decimal(DEFAULT_CAP).unwrap_or(Bandwidth::ONE),
        }
    }
}

/// A hard CBS reservation (budget per period) on one named CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerSpec {
    pub cpu: u32,
    pub budget: Nanos,
    pub period: Nanos,
}

/// How a box states the CPU time it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interface {
    /// Explicit per-CPU servers; CPUs not listed get none.
    Servers(Vec<ServerSpec>),
    /// The same budget/period on every CPU of the box (the `cpu.rt.max` style).
    PerCpu { budget: Nanos, period: Nanos },
    /// A BDM virtual platform: on each CPU of the box a hard CBS with
    /// P = Delta / (2 (1 - alpha)) and Q = alpha P (seed 002, eq. 5).
    Bdm { alpha: Bandwidth, delta: Nanos },
    /// A multiprocessor periodic resource: `theta` every `pi` on `m` servers.
    Mpr { theta: Nanos, pi: Nanos, m: u32 },
    /// No guaranteed servers: a share, by `weight`, of what the parent leaves unreserved.
    Shared { weight: u32 },
}

impl Interface {
    pub fn kind(&self) -> &'static str {
        match self {
            Interface::Servers(_) => "servers",
            Interface::PerCpu { .. } => "per_cpu",
            Interface::Bdm { .. } => "bdm",
            Interface::Mpr { .. } => "mpr",
            Interface::Shared { .. } => "shared",
        }
    }

    pub fn is_shared(&self) -> bool {
        matches!(self, Interface::Shared { .. })
    }
}

/// How a box orders its own members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Policy {
    /// Fixed priorities with Linux FIFO/RR semantics.
    #[default]
    Fifo,
    /// Earliest deadline first among the box's tasks.
    Edf,
    /// Round robin among equals.
    Fair,
}

/// Where a box's members may run among its vCPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Placement {
    /// Members may move between the box's vCPUs (e.g. away from a throttled one).
    #[default]
    Global,
    /// Each member stays on one vCPU.
    Pinned,
}

/// What a throttled server's members may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Nothing until replenishment.
    #[default]
    Hard,
    /// Run only when the CPU would otherwise idle.
    Reclaim,
}

macro_rules! named_enum {
    ($ty:ty { $($name:literal => $v:expr),+ $(,)? }) => {
        impl $ty {
            pub const NAMES: &'static [&'static str] = &[$($name),+];
            pub fn name(self) -> &'static str {
                match self { $(x if x == $v => $name,)+ _ => unreachable!() }
            }
            pub fn from_name(s: &str) -> Option<Self> {
                match s { $($name => Some($v),)+ _ => None }
            }
        }
    };
}
named_enum!(Policy { "fifo" => Policy::Fifo, "edf" => Policy::Edf, "fair" => Policy::Fair });
named_enum!(Placement { "global" => Placement::Global, "pinned" => Placement::Pinned });
named_enum!(Mode { "hard" => Mode::Hard, "reclaim" => Mode::Reclaim });

/// A box as the user describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoxSpec {
    /// Unique name; a path such as `media/audio` names its parent (`media`) too.
    pub name: String,
    pub parent: Option<String>,
    /// CPUs the box may use; `None` means the parent's CPUs (the platform's at the top),
    /// or, for explicit servers, exactly the servers' CPUs.
    pub cpus: Option<CpuSet>,
    pub interface: Interface,
    pub policy: Policy,
    pub placement: Placement,
    pub mode: Mode,
    /// A scheduler plug-in deciding the priority and vCPU of the box's periodic members
    /// (seed 001); `None`: the members keep their own priorities and the box's placement.
    pub plugin: Option<crate::plugin::PluginKind>,
}

impl BoxSpec {
    pub fn new(name: impl Into<String>, interface: Interface) -> Self {
        BoxSpec {
            name: name.into(),
            parent: None,
            cpus: None,
            interface,
            policy: Policy::default(),
            placement: Placement::default(),
            mode: Mode::default(),
            plugin: None,
        }
    }
}

/// Whether a task's jobs arrive exactly every period or at least a period apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Arrival {
    #[default]
    Periodic,
    Sporadic,
}

/// A real-time task for analysis and simulation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSpec {
    pub name: String,
    /// The box it runs in; `None` runs in the background, outside all reservations.
    pub box_name: Option<String>,
    /// Worst-case execution time.
    pub wcet: Nanos,
    /// Best-case execution time; `None` means every job takes `wcet`.
    pub bcet: Option<Nanos>,
    /// Period (periodic) or minimum inter-arrival time (sporadic).
    pub period: Nanos,
    /// Relative deadline.
    pub deadline: Nanos,
    /// Fixed priority, higher is more urgent (as Linux RT priorities); `None` ranks the task
    /// deadline-monotonically below every task with one (`crate::priority`).
    pub priority: Option<u32>,
    /// A CPU to pin the task to (pinned placement), if any.
    pub cpu: Option<u32>,
    /// First release.
    pub offset: Nanos,
    /// Release jitter.
    pub jitter: Nanos,
    pub arrival: Arrival,
    /// Chain predecessor: this task's job is released when a job of `after` completes.
    pub after: Option<String>,
}

impl TaskSpec {
    /// An implicit-deadline periodic task.
    pub fn periodic(name: impl Into<String>, wcet: Nanos, period: Nanos) -> Self {
        TaskSpec {
            name: name.into(),
            box_name: None,
            wcet,
            bcet: None,
            period,
            deadline: period,
            priority: None,
            cpu: None,
            offset: 0,
            jitter: 0,
            arrival: Arrival::Periodic,
            after: None,
        }
    }
}

/// A box after validation, with its resolved CPUs and servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedBox {
    pub spec: BoxSpec,
    /// The resolved parent name.
    pub parent: Option<String>,
    pub cpus: CpuSet,
    /// The box's servers before flattening (empty for shared boxes).
    pub servers: Vec<Server>,
    pub depth: usize,
}

impl ResolvedBox {
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The box's own server on `cpu`, if any.
    pub fn server_on(&self, cpu: u32) -> Option<&Server> {
        self.servers.iter().find(|s| s.cpu == cpu)
    }
}

/// A validated configuration: platform, boxes (parents before children) and tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct System {
    pub platform: Platform,
    boxes: Vec<ResolvedBox>,
    index: BTreeMap<String, usize>,
    pub tasks: Vec<TaskSpec>,
}

impl System {
    /// Validates boxes and tasks against the platform and against each other.
    pub fn new(
        platform: Platform,
        boxes: Vec<BoxSpec>,
        tasks: Vec<TaskSpec>,
    ) -> Result<Self, ModelError> {
        let ordered = order_boxes(boxes)?;
        let mut resolved: Vec<ResolvedBox> = Vec::with_capacity(ordered.len());
        let mut index = BTreeMap::new();
        for (spec, parent) in ordered {
            let parent_box = parent.as_ref().map(|p| &resolved[index[p]]);
            let rb = resolve_box(&platform, spec, parent, parent_box)?;
            index.insert(rb.name().to_string(), resolved.len());
            resolved.push(rb);
        }
        let system = System {
            platform,
            boxes: resolved,
            index,
            tasks: Vec::new(),
        };
        let tasks = validate_tasks(&system, tasks)?;
        Ok(System { tasks, ..system })
    }

    /// Boxes, every parent before its children.
    pub fn boxes(&self) -> &[ResolvedBox] {
        &self.boxes
    }

    pub fn get(&self, name: &str) -> Option<&ResolvedBox> {
        self.index.get(name).map(|&i| &self.boxes[i])
    }

    pub fn children<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a ResolvedBox> + 'a {
        self.boxes
            .iter()
            .filter(move |b| b.parent.as_deref() == Some(name))
    }

    /// The tasks of one box.
    pub fn tasks_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a TaskSpec> + 'a {
        self.tasks
            .iter()
            .filter(move |t| t.box_name.as_deref() == Some(name))
    }

    /// The box specs as given, for rebuilding a changed system (parents first).
    pub fn specs(&self) -> Vec<BoxSpec> {
        self.boxes.iter().map(|b| b.spec.clone()).collect()
    }
}

/// The parent named by `parent` or, failing that, by a path name `a/b`.
fn declared_parent(spec: &BoxSpec) -> Result<Option<String>, ModelError> {
    let from_path = spec.name.rsplit_once('/').map(|(p, _)| p.to_string());
    match (&spec.parent, from_path) {
        (Some(p), Some(q)) if *p != q => Err(ModelError::new(
            Subject::Box(spec.name.clone()),
            "parent",
            format!("= \"{p}\" contradicts the path name, whose parent is \"{q}\""),
        )),
        (Some(p), _) => Ok(Some(p.clone())),
        (None, q) => Ok(q),
    }
}

/// Sorts boxes parents-first; refuses bad names, duplicates, unknown parents and cycles.
fn order_boxes(boxes: Vec<BoxSpec>) -> Result<Vec<(BoxSpec, Option<String>)>, ModelError> {
    let mut names = BTreeSet::new();
    let mut with_parent = Vec::with_capacity(boxes.len());
    for spec in boxes {
        check_name(&spec.name)
            .map_err(|r| ModelError::new(Subject::Box(spec.name.clone()), "name", r))?;
        if !names.insert(spec.name.clone()) {
            return Err(ModelError::new(
                Subject::Box(spec.name.clone()),
                "name",
                "is used by another box (box names must be unique)",
            ));
        }
        let parent = declared_parent(&spec)?;
        with_parent.push((spec, parent));
    }
    for (spec, parent) in &with_parent {
        if let Some(p) = parent {
            if !names.contains(p) {
                return Err(ModelError::new(
                    Subject::Box(spec.name.clone()),
                    "parent",
                    format!("= \"{p}\" is not a box"),
                ));
            }
        }
    }
    let mut placed: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::with_capacity(with_parent.len());
    let mut rest = with_parent;
    while !rest.is_empty() {
        let (ready, waiting): (Vec<_>, Vec<_>) = rest
            .into_iter()
            .partition(|(_, p)| p.as_ref().is_none_or(|p| placed.contains(p)));
        if ready.is_empty() {
            let (spec, _) = &waiting[0];
            let cycle: Vec<&str> = waiting.iter().map(|(s, _)| s.name.as_str()).collect();
            return Err(ModelError::new(
                Subject::Box(spec.name.clone()),
                "parent",
                format!("forms a cycle among boxes {}", cycle.join(", ")),
            ));
        }
        for item in ready {
            placed.insert(item.0.name.clone());
            out.push(item);
        }
        rest = waiting;
    }
    Ok(out)
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("is empty".into());
    }
    if name.len() > 200 {
        return Err("is longer than 200 characters".into());
    }
    if name.split('/').any(|part| part.is_empty()) {
        return Err(format!("= \"{name}\" has an empty path component"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/')))
    {
        return Err(format!(
            "= \"{name}\" contains {c:?} (use letters, digits, '_', '-', '.', '/')"
        ));
    }
    Ok(())
}

fn resolve_box(
    platform: &Platform,
    spec: BoxSpec,
    parent: Option<String>,
    parent_box: Option<&ResolvedBox>,
) -> Result<ResolvedBox, ModelError> {
    let who = || Subject::Box(spec.name.clone());
    if let Some(pb) = parent_box {
        if pb.spec.interface.is_shared() {
            return Err(ModelError::new(
                who(),
                "parent",
                format!(
                    "= \"{}\" is a shared box; only boxes with reserved servers can have children",
                    pb.name()
                ),
            ));
        }
    }
    let available = parent_box.map_or(&platform.cpus, |p| &p.cpus);
    let cpus = match (&spec.cpus, &spec.interface) {
        (Some(c), _) => {
            if c.is_empty() {
                return Err(ModelError::new(who(), "cpus", "is empty"));
            }
            if let Some(bad) = c.iter().find(|&x| !available.contains(x)) {
                let whose = match parent_box {
                    Some(p) => format!("its parent \"{}\" ({})", p.name(), p.cpus),
                    None => format!("the platform ({})", platform.cpus),
                };
                return Err(ModelError::new(
                    who(),
                    "cpus",
                    format!("= \"{c}\" names CPU {bad}, which is not in {whose}"),
                ));
            }
            c.clone()
        }
        (None, Interface::Servers(list)) => {
            if let Some(parent) = parent_box {
                if let Some((i, s)) = list
                    .iter()
                    .enumerate()
                    .find(|(_, s)| !parent.cpus.contains(s.cpu))
                {
                    return Err(ModelError::new(
                        who(),
                        format!("interface.servers[{i}].cpu"),
                        format!(
                            "= {} is not in its parent \"{}\" ({})",
                            s.cpu,
                            parent.name(),
                            parent.cpus
                        ),
                    ));
                }
            }
            list.iter().map(|s| s.cpu).collect()
        }
        (None, _) => available.clone(),
    };
    let servers = box_servers(&spec.name, &spec.interface, &cpus, platform)?;
    let depth = parent_box.map_or(0, |p| p.depth + 1);
    Ok(ResolvedBox {
        spec,
        parent,
        cpus,
        servers,
        depth,
    })
}

fn validate_tasks(system: &System, tasks: Vec<TaskSpec>) -> Result<Vec<TaskSpec>, ModelError> {
    let mut names = BTreeSet::new();
    for t in &tasks {
        let who = || Subject::Task(t.name.clone());
        check_name(&t.name).map_err(|r| ModelError::new(who(), "name", r))?;
        if !names.insert(t.name.clone()) {
            return Err(ModelError::new(who(), "name", "is used by another task"));
        }
        for (field, value) in [
            ("wcet", t.wcet),
            ("period", t.period),
            ("deadline", t.deadline),
        ] {
            if value == 0 {
                return Err(ModelError::new(who(), field, "= 0ns must be positive"));
            }
        }
        if let Some(b) = t.bcet {
            if b > t.wcet {
                return Err(ModelError::new(
                    who(),
                    "bcet",
                    format!(
                        "= {} is above wcet {}",
                        format_duration(b),
                        format_duration(t.wcet)
                    ),
                ));
            }
        }
        let cpus = match &t.box_name {
            Some(b) => match system.get(b) {
                Some(rb) => &rb.cpus,
                None => {
                    return Err(ModelError::new(
                        who(),
                        "box",
                        format!("= \"{b}\" is not a box"),
                    ))
                }
            },
            None => &system.platform.cpus,
        };
        if let Some(c) = t.cpu {
            if !cpus.contains(c) {
                return Err(ModelError::new(
                    who(),
                    "cpu",
                    format!("= {c} is not one of the CPUs it may use ({cpus})"),
                ));
            }
        }
    }
    for t in &tasks {
        if let Some(a) = &t.after {
            if !names.contains(a) || *a == t.name {
                return Err(ModelError::new(
                    Subject::Task(t.name.clone()),
                    "after",
                    format!("= \"{a}\" is not another task"),
                ));
            }
        }
    }
    // Chains must not loop: follow `after` links.
    let after: BTreeMap<&str, &str> = tasks
        .iter()
        .filter_map(|t| t.after.as_deref().map(|a| (t.name.as_str(), a)))
        .collect();
    for t in &tasks {
        let mut cur = t.name.as_str();
        for _ in 0..=tasks.len() {
            match after.get(cur) {
                Some(next) => cur = next,
                None => break,
            }
            if cur == t.name {
                return Err(ModelError::new(
                    Subject::Task(t.name.clone()),
                    "after",
                    "forms a cycle of chained tasks",
                ));
            }
        }
    }
    Ok(tasks)
}
