//! The seed's multicore plug-ins (seed 001 section V.B) and the plain `fp` baseline.
//!
//! Each placement or migration rule is one small function below, named after what it decides.

use rtbox_model::{Nanos, PluginKind};

use super::{cpu_schedulable, levels, FpTest, GroupCtx, Load, Plugin, Scope, Verdict};

/// The built-in plug-in of a box's `plugin` field.
pub fn builtin(kind: PluginKind) -> Box<dyn Plugin> {
    match kind {
        PluginKind::Fp => Box::new(Fp),
        PluginKind::FpFf => Box::new(FpFf::default()),
        PluginKind::FpPm => Box::new(FpPm::default()),
        PluginKind::GFp => Box::new(GFp { separate: false }),
        PluginKind::FpUs => Box::new(GFp { separate: true }),
    }
}

// ---- rules ---------------------------------------------------------------------------------

/// First fit by response-time analysis (seed 001 section V.B.1, FP-FF; RTA of Audsley et al.
/// 1993, the seed's [25]): the first CPU, in index order, on which `load` and every load already
/// there meet their deadlines.
pub fn first_fit(
    test: &dyn FpTest,
    cpus: &[u32],
    per_cpu: &[Vec<Load>],
    load: Load,
) -> Option<usize> {
    (0..cpus.len()).find(|&k| {
        let mut loads = per_cpu[k].clone();
        loads.push(load);
        cpu_schedulable(test, cpus[k], &loads)
    })
}

/// DM-PM's share of a migratory task on one CPU (Kato and Yamasaki 2009, the seed's [26]; seed
/// 001 section V.B.2): the largest execution `c <= left`, released up to `jitter` after the
/// job's arrival at priority `prio`, with which every load on the CPU (the share included)
/// still meets its deadline. Returns `(c, response of the share from the job's arrival)`, or
/// `None` when not even 1 ns fits. Binary search: more execution never helps schedulability.
pub fn migratory_share(
    test: &dyn FpTest,
    cpu: u32,
    on_cpu: &[Vec<Load>],
    share: Load,
    left: Nanos,
) -> Option<(Nanos, Nanos)> {
    let check = |c: Nanos| -> Option<Nanos> {
        let mut loads = on_cpu.concat();
        loads.push(Load { wcet: c, ..share });
        let me = loads.len() - 1;
        let r = test.response(cpu, &loads, me)?;
        cpu_schedulable(test, cpu, &loads).then_some(r)
    };
    let mut best = (1, check(1)?);
    let (mut lo, mut hi) = (1, left);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        match check(mid) {
            Some(r) => {
                best = (mid, r);
                lo = mid;
            }
            None => hi = mid - 1,
        }
    }
    Some(best)
}

/// Heavy task of utilization separation (Andersson, Baruah and Jonsson 2001, the seed's [27];
/// seed 001 section V.B.3): `U >= m / (3m - 2)`, exactly in integers.
pub fn is_heavy(ctx: &GroupCtx, t: usize) -> bool {
    let m = ctx.m() as u64;
    ctx.task(t).utilization_at_least(m, 3 * m - 2)
}

/// G-FP at a release (seed 001 section V.B.3): an idle CPU (the task's own first), else the CPU
/// whose most urgent task is the least urgent, if below the released task; else stay.
pub fn gfp_release_cpu(ctx: &GroupCtx, t: usize) -> Option<u32> {
    let idle = |c: u32| ctx.top(c, Some(t)).is_none();
    if ctx.cpu_of(t).is_some_and(idle) {
        return None;
    }
    if let Some(&c) = ctx.cpus().iter().find(|&&c| idle(c)) {
        return Some(c);
    }
    let level = |c: u32| ctx.top(c, Some(t)).map_or(0, |x| ctx.priority_of(x));
    let mine = ctx.cpu_of(t).map(level);
    let (lowest, c) = ctx.cpus().iter().map(|&c| (level(c), c)).min()?;
    if lowest >= ctx.priority_of(t) || mine == Some(lowest) {
        return None;
    }
    Some(c)
}

/// G-FP at a completion on `cpu` (seed 001 section V.B.3): the most urgent ready task that is
/// waiting on another CPU moves to `cpu` if it is more urgent than what `cpu` runs now.
pub fn gfp_pull_to(ctx: &GroupCtx, cpu: u32) -> Option<usize> {
    let waiting = (0..ctx.len()).filter(|&j| {
        ctx.is_ready(j)
            && ctx.cpu_of(j) != Some(cpu)
            && ctx.cpu_of(j).and_then(|c| ctx.top(c, None)) != Some(j)
    });
    let best = waiting.max_by_key(|&j| (ctx.priority_of(j), std::cmp::Reverse(j)))?;
    match ctx.top(cpu, None) {
        Some(x) if ctx.priority_of(x) >= ctx.priority_of(best) => None,
        _ => Some(best),
    }
}

// ---- fp ------------------------------------------------------------------------------------

/// Plain fixed priority (the seed's baseline FP): DM priorities, the scheduler's own global
/// placement (Linux's SCHED_FIFO push/pull; the core's global placement in a box).
#[derive(Debug, Default)]
pub struct Fp;

/// The verdict of a global plug-in: the global FP test over every task of the group at the
/// priorities `prio` gives them.
fn global_verdict(
    ctx: &GroupCtx,
    t: usize,
    test: &dyn FpTest,
    prio: impl Fn(usize) -> u32,
) -> Verdict {
    let loads: Vec<Load> = (0..ctx.len())
        .map(|j| Load::of(ctx.task(j), prio(j)))
        .collect();
    if test.global(&loads)[t] {
        Verdict::Guaranteed
    } else {
        Verdict::Unproven
    }
}

impl Plugin for Fp {
    fn name(&self) -> &str {
        "fp"
    }
    fn scope(&self) -> Scope {
        Scope::Global
    }
    fn task_admitted(&mut self, ctx: &mut GroupCtx, t: usize, test: &dyn FpTest) -> Verdict {
        let n = ctx.len();
        ctx.set_priority(t, levels::normal(ctx.task(t).priority, n));
        global_verdict(ctx, t, test, |j| levels::normal(ctx.task(j).priority, n))
    }
}

// ---- fp-ff ---------------------------------------------------------------------------------

/// Partitioned FP, first fit by RTA, DM priorities; a task that fits no CPU runs in the
/// background (below every admitted task) on the least loaded CPU.
#[derive(Debug, Default)]
pub struct FpFf {
    per_cpu: Vec<Vec<Load>>,
}

impl Plugin for FpFf {
    fn name(&self) -> &str {
        "fp-ff"
    }
    fn task_admitted(&mut self, ctx: &mut GroupCtx, t: usize, test: &dyn FpTest) -> Verdict {
        self.per_cpu.resize(ctx.m(), Vec::new());
        let n = ctx.len();
        let dm = ctx.task(t).priority;
        let load = Load::of(ctx.task(t), levels::normal(dm, n));
        match first_fit(test, ctx.cpus(), &self.per_cpu, load) {
            Some(k) => {
                self.per_cpu[k].push(load);
                let cpu = ctx.cpus()[k];
                let _ = ctx.migrate(t, cpu);
                ctx.set_priority(t, load.priority);
                Verdict::Guaranteed
            }
            None => {
                let cpu = ctx.least_loaded_cpu();
                let _ = ctx.migrate(t, cpu);
                ctx.set_priority(t, levels::background(dm));
                Verdict::Background
            }
        }
    }
}

// ---- fp-pm ---------------------------------------------------------------------------------

/// Semi-partitioned DM-PM: first fit like FP-FF; a task that fits no CPU is split into shares
/// over CPUs in index order ([`migratory_share`]), runs at the highest priority, starts each job
/// on its first share's CPU and moves on when that share's budget is used. A task that cannot
/// be split either gets the lowest priority.
#[derive(Debug, Default)]
pub struct FpPm {
    per_cpu: Vec<Vec<Load>>,
    /// Per task: its shares `(cpu, budget)` when migratory.
    shares: Vec<Vec<(u32, Nanos)>>,
    /// Per task: the share the current job is on.
    stage: Vec<usize>,
}

impl FpPm {
    /// The shares of a task that fits no CPU whole, or `None` (nothing committed then).
    fn split(
        &self,
        ctx: &GroupCtx,
        t: usize,
        test: &dyn FpTest,
        prio: u32,
    ) -> Option<Vec<(usize, Nanos, Load)>> {
        let task = ctx.task(t);
        let mut left = task.wcet;
        let mut jitter = 0;
        let mut shares = Vec::new();
        for k in 0..ctx.m() {
            let share = Load {
                jitter,
                ..Load::of(task, prio)
            };
            let Some((c, r)) =
                migratory_share(test, ctx.cpus()[k], &self.per_cpu[k..=k], share, left)
            else {
                continue;
            };
            shares.push((k, c, Load { wcet: c, ..share }));
            left -= c;
            if left == 0 {
                return (r <= task.deadline).then_some(shares);
            }
            // The next share is released once this one is done: at most `r` after arrival.
            jitter = r;
        }
        None
    }
}

impl Plugin for FpPm {
    fn name(&self) -> &str {
        "fp-pm"
    }
    fn task_admitted(&mut self, ctx: &mut GroupCtx, t: usize, test: &dyn FpTest) -> Verdict {
        self.per_cpu.resize(ctx.m(), Vec::new());
        self.shares.resize(ctx.len(), Vec::new());
        self.stage.resize(ctx.len(), 0);
        let n = ctx.len();
        let dm = ctx.task(t).priority;
        let load = Load::of(ctx.task(t), levels::normal(dm, n));
        if let Some(k) = first_fit(test, ctx.cpus(), &self.per_cpu, load) {
            self.per_cpu[k].push(load);
            let cpu = ctx.cpus()[k];
            let _ = ctx.migrate(t, cpu);
            ctx.set_priority(t, load.priority);
            return Verdict::Guaranteed;
        }
        let top = levels::top(dm, n);
        if let Some(shares) = self.split(ctx, t, test, top) {
            for &(k, c, l) in &shares {
                self.per_cpu[k].push(l);
                self.shares[t].push((ctx.cpus()[k], c));
            }
            let first = self.shares[t][0].0;
            let _ = ctx.migrate(t, first);
            ctx.set_priority(t, top);
            return Verdict::Guaranteed;
        }
        let cpu = ctx.least_loaded_cpu();
        let _ = ctx.migrate(t, cpu);
        ctx.set_priority(t, levels::background(dm));
        Verdict::Background
    }

    fn job_released(&mut self, ctx: &mut GroupCtx, t: usize) {
        let Some(&(cpu, budget)) = self.shares[t].first() else {
            return;
        };
        self.stage[t] = 0;
        let _ = ctx.migrate(t, cpu);
        if self.shares[t].len() > 1 {
            ctx.arm_budget(t, budget);
        }
    }

    fn budget_used(&mut self, ctx: &mut GroupCtx, t: usize) {
        let next = self.stage[t] + 1;
        let Some(&(cpu, budget)) = self.shares[t].get(next) else {
            return;
        };
        self.stage[t] = next;
        let _ = ctx.migrate(t, cpu);
        if next + 1 < self.shares[t].len() {
            ctx.arm_budget(t, budget);
        }
    }
}

// ---- g-fp, fp-us ---------------------------------------------------------------------------

/// Global FP imitated with migrations at job release and completion (seed 001 section V.B.3);
/// with `separate` it is FP-US: heavy tasks ([`is_heavy`]) at the highest priority.
#[derive(Debug)]
pub struct GFp {
    pub separate: bool,
}

impl GFp {
    fn level(&self, ctx: &GroupCtx, t: usize) -> u32 {
        let dm = ctx.task(t).priority;
        if self.separate && is_heavy(ctx, t) {
            levels::top(dm, ctx.len())
        } else {
            levels::normal(dm, ctx.len())
        }
    }
}

impl Plugin for GFp {
    fn name(&self) -> &str {
        if self.separate {
            "fp-us"
        } else {
            "g-fp"
        }
    }
    fn task_admitted(&mut self, ctx: &mut GroupCtx, t: usize, test: &dyn FpTest) -> Verdict {
        let level = self.level(ctx, t);
        ctx.set_priority(t, level);
        let cpu = ctx.least_loaded_cpu();
        let _ = ctx.migrate(t, cpu);
        global_verdict(ctx, t, test, |j| self.level(ctx, j))
    }
    fn job_released(&mut self, ctx: &mut GroupCtx, t: usize) {
        if let Some(c) = gfp_release_cpu(ctx, t) {
            let _ = ctx.migrate(t, c);
        }
    }
    fn job_completed(&mut self, ctx: &mut GroupCtx, t: usize) {
        let Some(cpu) = ctx.cpu_of(t) else { return };
        if let Some(j) = gfp_pull_to(ctx, cpu) {
            let _ = ctx.migrate(j, cpu);
        }
    }
}
