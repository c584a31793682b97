//! From the core's state to each member's desired state: EDF ranks become SCHED_FIFO priority
//! bands, members keep their relative priorities inside their box's band, and members whose
//! server is throttled are stopped. Pure: no system calls (tested without root).

use std::collections::BTreeMap;

use rtbox_core::ServerId;
use rtbox_linux::sched::{self, SchedAttr};
use rtbox_model::{CpuSet, Mode, Placement, PrioRange};

use super::apply::Applied;

/// Highest SCHED_FIFO priority given to members by default (the most urgent server's top
/// member); the band is configurable ([`PrioRange`], `rtbox daemon --priorities`).
pub const PRIO_HI: u32 = PrioRange::DEFAULT.hi;
/// Lowest SCHED_FIFO priority given to members by default. Unmanaged RT threads below the band
/// run in what the boxes leave; unmanaged RT threads above it preempt every box.
pub const PRIO_LO: u32 = PrioRange::DEFAULT.lo;

/// A server's band: its top priority and how many priorities it spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Band {
    pub top: u32,
    pub width: u32,
}

/// Per CPU, the non-throttled servers in EDF order (most urgent first) each get an equal band
/// of the members' range `prio` (40..89 by default), the most urgent on top: fixed priorities
/// then run the server with the earliest deadline first, as EDF does (Abeni & Buttazzo 1998,
/// CBS on EDF).
pub fn bands(edf: &BTreeMap<u32, Vec<ServerId>>, prio: PrioRange) -> BTreeMap<ServerId, Band> {
    let range = prio.width();
    let mut out = BTreeMap::new();
    for v in edf.values() {
        let width = (range / v.len().max(1) as u32).max(1);
        for (rank, s) in v.iter().enumerate() {
            let top = prio.hi.saturating_sub(rank as u32 * width).max(prio.lo);
            debug_assert!((prio.lo..=prio.hi).contains(&top), "band outside the range");
            out.insert(*s, Band { top, width });
        }
    }
    out
}

/// The distinct original RT priorities of a box's members, highest first: a member's local
/// rank is its index here.
pub fn local_ranks<'a>(
    members: impl Iterator<Item = (&'a str, u32)>,
) -> BTreeMap<&'a str, Vec<u32>> {
    let mut local: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (b, p) in members {
        local.entry(b).or_default().push(p);
    }
    for v in local.values_mut() {
        v.sort_unstable_by(|a, b| b.cmp(a));
        v.dedup();
    }
    local
}

/// The priority of local rank `rank` inside `band` (ranks past its width share its bottom;
/// never below the band's range, which `bands` builds the bands inside).
pub fn band_priority(band: Band, rank: u32) -> u32 {
    band.top.saturating_sub(rank.min(band.width - 1)).max(1)
}

/// The nice level of a shared box: the heaviest box gets nice 0, a box with 1/1.25 of its
/// weight nice 1, and so on (CFS weights grow by ~1.25 per nice step), capped at 19.
pub fn shared_nice(weight: u32, max_weight: u32) -> i32 {
    let ratio = f64::from(max_weight.max(1)) / f64::from(weight.max(1));
    (ratio.ln() / 1.25f64.ln()).round().clamp(0.0, 19.0) as i32
}

/// A box as `decide` needs it.
#[derive(Debug, Clone)]
pub struct BoxView<'a> {
    pub mode: Mode,
    pub placement: Placement,
    /// `Some(weight)` for a shared box (runs in what the reservations leave).
    pub shared: Option<u32>,
    pub cpus: &'a CpuSet,
    /// Its servers in the core.
    pub servers: &'a [ServerId],
}

/// The boxes `decide` looks members up in, by name: a vector sorted once per step. Built as a
/// `BTreeMap` from an iterator, each step sorted a copy of the boxes first and allocated its
/// nodes, with a vector of CPUs per box: ~3 us of a ~65 us step (issue 14, `perf record`).
#[derive(Debug, Clone, Default)]
pub struct BoxViews<'a>(Vec<(&'a str, BoxView<'a>)>);

impl<'a> BoxViews<'a> {
    pub fn get(&self, name: &str) -> Option<&BoxView<'a>> {
        let i = self.0.binary_search_by(|(n, _)| (*n).cmp(name)).ok()?;
        Some(&self.0[i].1)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut BoxView<'a>> {
        let i = self.0.binary_search_by(|(n, _)| (*n).cmp(name)).ok()?;
        Some(&mut self.0[i].1)
    }

    /// The boxes with their names, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &BoxView<'a>)> {
        self.0.iter().map(|(n, b)| (*n, b))
    }

    pub fn values(&self) -> impl Iterator<Item = &BoxView<'a>> {
        self.0.iter().map(|(_, b)| b)
    }
}

impl<'a> FromIterator<(&'a str, BoxView<'a>)> for BoxViews<'a> {
    fn from_iter<I: IntoIterator<Item = (&'a str, BoxView<'a>)>>(iter: I) -> Self {
        let mut v: Vec<_> = iter.into_iter().collect();
        v.sort_unstable_by(|a, b| a.0.cmp(b.0));
        debug_assert!(
            v.windows(2).all(|w| w[0].0 != w[1].0),
            "box names are unique"
        );
        BoxViews(v)
    }
}

/// A member as `decide` needs it.
#[derive(Debug, Clone)]
pub struct MemberView<'a> {
    pub tid: i32,
    pub box_name: &'a str,
    pub local_prio: u32,
    pub ready: bool,
    /// Asleep by its own doing, as the BPF sensor saw it (never set with perf): it is never
    /// stopped (see [`decide`]).
    pub asleep: bool,
    /// The core's placement of its task.
    pub placed: Option<ServerId>,
    pub last_server: Option<ServerId>,
    pub applied: Option<&'a Applied>,
    /// Its own policy and affinity from before rtbox.
    pub original: SchedAttr,
    pub original_cpus: &'a [u32],
}

/// What a member must look like now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub tid: i32,
    /// The server charged for its CPU time until the next decision.
    pub charge_to: Option<ServerId>,
    pub last_server: Option<ServerId>,
    /// `None`: leave it as it is (its box is gone).
    pub want: Option<Applied>,
}

/// The core's state `decide` reads.
pub struct CoreView<'a> {
    /// Per CPU the non-throttled servers in EDF order.
    pub edf: &'a BTreeMap<u32, Vec<ServerId>>,
    /// The CPU of a server.
    pub cpu_of: &'a dyn Fn(ServerId) -> u32,
    /// Whether a vCPU hosts a member of its box (`rtbox_core::Scheduler::hosts_member`).
    pub hosts: &'a dyn Fn(ServerId) -> bool,
    /// The members' SCHED_FIFO range.
    pub prio: PrioRange,
}

/// Decides what each member must look like after the core's decisions:
/// - a member of a shared box (or one without servers) runs as a normal thread (its own normal
///   policy; an RT or deadline member would preempt every reservation, so it runs as
///   SCHED_OTHER while managed) on the box's CPUs, at a nice level from the box's weight;
/// - a member whose server runs gets its band's priority for its local rank, on the server's
///   CPU; a sleeping member keeps a vCPU with budget so it runs at once when it wakes;
/// - otherwise a hard-mode member is frozen (charged to its last vCPU until the freeze takes
///   effect), a reclaim-mode member runs SCHED_IDLE on the box's server CPUs.
pub fn decide(
    core: &CoreView<'_>,
    boxes: &BoxViews<'_>,
    members: &[MemberView<'_>],
) -> Vec<Decision> {
    decide_ranked(core, boxes, &owned_ranks(members), members)
}

/// The local ranks of `members` by box ([`local_ranks`]), with owned names.
pub fn owned_ranks(members: &[MemberView<'_>]) -> BTreeMap<String, Vec<u32>> {
    local_ranks(members.iter().map(|m| (m.box_name, m.local_prio)))
        .into_iter()
        .map(|(b, v)| (b.to_string(), v))
        .collect()
}

/// The vCPU a ready member of a hard global box waits on while the core places it on none:
/// its last one, if that is not throttled and hosts none of its box's members (`free`): it
/// lost its CPU to another server's earlier deadline. The member's box's won vCPUs all host
/// members at least as urgent (the core places those on the vCPUs that win their CPUs), so it
/// may not run, yet it is not stopped but kept on that vCPU's CPU at its rank in the vCPU's
/// band, below the CPU's EDF winner. (On a vCPU that hosts another member it would wait behind
/// it for nothing: it is stopped when that vCPU runs out, as before.) The kernel then runs it exactly when nothing above it on that CPU can
/// run, which is when the core would place it there: once the winner's members are stopped
/// at its budget exhaustion (the backstop's freeze, without a loop step:
/// `Scheduler::quiet_exhaustion`) or block. A pinned box's members wait on their vCPU the same
/// way (the core places them on it throughout). Charged to that vCPU, whose stop plans it
/// (issue 14: in seed 002's platforms every exhaustion of the other box's server on a CPU
/// needed the loop to thaw the waiting member, half of the loop's wake-ups).
fn waits_on_its_vcpu(
    m: &MemberView<'_>,
    b: &BoxView<'_>,
    free: impl Fn(&ServerId) -> bool,
) -> Option<ServerId> {
    (m.ready && b.mode == Mode::Hard && b.placement == Placement::Global)
        .then_some(m.last_server)
        .flatten()
        .filter(|s| free(s) && b.servers.contains(s))
}

/// [`decide`] for some of the members, with the local ranks `local` of all of them (a
/// member's rank is its place among all its box's members, asleep or not: `rest.rs`).
pub fn decide_ranked(
    core: &CoreView<'_>,
    boxes: &BoxViews<'_>,
    local: &BTreeMap<String, Vec<u32>>,
    members: &[MemberView<'_>],
) -> Vec<Decision> {
    let slot = bands(core.edf, core.prio);
    let max_weight = boxes.values().filter_map(|b| b.shared).max().unwrap_or(1);
    let mut out = Vec::with_capacity(members.len());
    for m in members {
        let Some(b) = boxes.get(m.box_name) else {
            // Unknown box: left as it is, charged to nobody.
            out.push(Decision {
                tid: m.tid,
                charge_to: None,
                last_server: m.last_server,
                want: None,
            });
            continue;
        };
        if b.shared.is_some() || b.servers.is_empty() {
            let mut attr = m.original;
            if attr.is_rt() || attr.policy == sched::SCHED_DEADLINE {
                attr = SchedAttr::other(attr.nice);
            }
            if let Some(weight) = b.shared {
                attr.nice = shared_nice(weight, max_weight);
            }
            out.push(Decision {
                tid: m.tid,
                charge_to: None,
                last_server: m.last_server,
                want: Some(Applied {
                    attr,
                    cpus: b.cpus.iter().collect(),
                    frozen: false,
                }),
            });
            continue;
        }
        let live = |s: &ServerId| slot.contains_key(s);
        let server = m
            .placed
            .filter(live)
            .or_else(|| waits_on_its_vcpu(m, b, |s| live(s) && !(core.hosts)(*s)))
            .or_else(|| {
                if m.ready {
                    None
                } else {
                    m.last_server
                        .filter(live)
                        .or_else(|| b.servers.iter().copied().find(live))
                }
            });
        let d = match server {
            Some(s) => {
                let rank = local
                    .get(m.box_name)
                    .and_then(|v| v.iter().position(|&p| p == m.local_prio))
                    .unwrap_or(0) as u32;
                Decision {
                    tid: m.tid,
                    charge_to: Some(s),
                    last_server: Some(s),
                    want: Some(Applied {
                        attr: SchedAttr::fifo(band_priority(slot[&s], rank)),
                        cpus: vec![(core.cpu_of)(s)],
                        frozen: false,
                    }),
                }
            }
            None => match b.mode {
                // A member asleep by the sensor is never frozen: it cannot run, and a freeze
                // wakes it (the cgroup freezer signals every task it freezes), so it would
                // count as ready, be thawed at the next replenishment, woken again, and so on:
                // with 500 sleeping members that was a sensor event every ~0.2 ms. It keeps
                // what it had (or the box's lowest band on the box's CPUs); if it wakes on a
                // spent server the sensor wakes the loop, which stops it then.
                Mode::Hard if m.asleep && !m.applied.is_some_and(|a| a.frozen) => Decision {
                    tid: m.tid,
                    charge_to: m.last_server.or(m.placed),
                    last_server: m.last_server,
                    want: Some(m.applied.cloned().unwrap_or_else(|| Applied {
                        attr: SchedAttr::fifo(core.prio.lo),
                        cpus: b.cpus.iter().collect(),
                        frozen: false,
                    })),
                },
                Mode::Hard => {
                    let prev = m.applied.cloned().unwrap_or(Applied {
                        attr: SchedAttr::fifo(core.prio.lo),
                        cpus: m.original_cpus.to_vec(),
                        frozen: true,
                    });
                    Decision {
                        tid: m.tid,
                        // Charged to its last vCPU until the freeze takes effect.
                        charge_to: m.last_server.or(m.placed),
                        last_server: m.last_server,
                        want: Some(Applied {
                            frozen: true,
                            ..prev
                        }),
                    }
                }
                Mode::Reclaim => Decision {
                    tid: m.tid,
                    charge_to: None,
                    last_server: m.last_server,
                    want: Some(Applied {
                        attr: SchedAttr::idle(),
                        cpus: b.servers.iter().map(|s| (core.cpu_of)(*s)).collect(),
                        frozen: false,
                    }),
                },
            },
        };
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view<'a>(tid: i32, bx: &'a str, prio: u32, placed: Option<u32>) -> MemberView<'a> {
        MemberView {
            tid,
            box_name: bx,
            local_prio: prio,
            ready: true,
            asleep: false,
            placed: placed.map(ServerId),
            last_server: None,
            applied: None,
            original: SchedAttr::other(0),
            original_cpus: &[0, 1],
        }
    }

    /// The core's state with the default band and no vCPU hosting anybody.
    fn core_view<'a>(
        edf: &'a BTreeMap<u32, Vec<ServerId>>,
        cpu_of: &'a dyn Fn(ServerId) -> u32,
    ) -> CoreView<'a> {
        fn nobody(_: ServerId) -> bool {
            false
        }
        CoreView {
            edf,
            cpu_of,
            hosts: &nobody,
            prio: PrioRange::DEFAULT,
        }
    }

    #[test]
    fn edf_ranks_become_bands_most_urgent_on_top() {
        let edf = BTreeMap::from([(0, vec![ServerId(2), ServerId(0)]), (1, vec![ServerId(1)])]);
        let b = bands(&edf, PrioRange::DEFAULT);
        assert_eq!(b[&ServerId(2)], Band { top: 89, width: 25 });
        assert_eq!(b[&ServerId(0)], Band { top: 64, width: 25 });
        assert_eq!(b[&ServerId(1)], Band { top: 89, width: 50 });
        assert_eq!(band_priority(b[&ServerId(0)], 0), 64);
        assert_eq!(
            band_priority(b[&ServerId(0)], 99),
            40,
            "deep ranks share the bottom"
        );
    }

    /// Issue 19: a configured band (below threaded interrupts at FIFO 50) keeps every member
    /// inside it, however many servers share a CPU.
    #[test]
    fn a_configured_band_holds_every_member() {
        let prio = PrioRange::new(10, 49).unwrap();
        let edf = BTreeMap::from([(0, (0..60).map(ServerId).collect::<Vec<_>>())]);
        let b = bands(&edf, prio);
        assert_eq!(b[&ServerId(0)], Band { top: 49, width: 1 });
        for (s, band) in &b {
            for rank in [0, 1, 5] {
                let p = band_priority(*band, rank);
                assert!((10..=49).contains(&p), "{s:?} rank {rank}: {p}");
            }
        }
        let two = bands(&BTreeMap::from([(1, vec![ServerId(0), ServerId(1)])]), prio);
        assert_eq!(two[&ServerId(1)], Band { top: 29, width: 20 });
        assert_eq!(band_priority(two[&ServerId(1)], 30), 10);
    }

    #[test]
    fn local_ranks_keep_relative_priorities_inside_a_box() {
        let l = local_ranks([("a", 10), ("a", 50), ("a", 10), ("b", 0)].into_iter());
        assert_eq!(l["a"], vec![50, 10]);
        assert_eq!(l["b"], vec![0]);
    }

    #[test]
    fn shared_boxes_get_nice_levels_from_their_weights() {
        assert_eq!(shared_nice(100, 100), 0);
        assert_eq!(shared_nice(80, 100), 1);
        assert_eq!(shared_nice(1, 1_000_000), 19);
    }

    /// Box views are found by name whatever the order they were built in; a member of a box
    /// the core no longer has is left as it is and charged to nobody.
    #[test]
    fn box_views_are_found_by_name_and_an_unknown_box_leaves_its_member_alone() {
        let servers = [ServerId(0)];
        let bx = |shared| BoxView {
            mode: Mode::Hard,
            placement: Placement::Pinned,
            shared,
            cpus: &ONE,
            servers: &servers,
        };
        let boxes: BoxViews<'_> = [("m", bx(None)), ("a", bx(Some(1))), ("z", bx(Some(2)))]
            .into_iter()
            .collect();
        let names: Vec<&str> = boxes.iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["a", "m", "z"]);
        assert_eq!(boxes.get("z").and_then(|b| b.shared), Some(2));
        assert_eq!(boxes.get("m").map(|b| b.shared), Some(None));
        assert!(boxes.get("b").is_none() && boxes.get("").is_none());
        let edf = BTreeMap::from([(1, vec![ServerId(0)])]);
        let cpu_of = |_| 1;
        let core = core_view(&edf, &cpu_of);
        let mut m = view(7, "gone", 0, Some(0));
        m.last_server = Some(ServerId(0));
        let d = decide(&core, &boxes, &[m]).remove(0);
        assert_eq!((d.charge_to, d.want), (None, None));
        assert_eq!(d.last_server, Some(ServerId(0)));
    }

    static BOTH: std::sync::LazyLock<CpuSet> = std::sync::LazyLock::new(|| CpuSet::first(2));
    static ONE: std::sync::LazyLock<CpuSet> =
        std::sync::LazyLock::new(|| CpuSet::parse("1").unwrap());

    fn boxes<'a>(servers: &'a [ServerId], mode: Mode) -> BoxViews<'a> {
        BoxViews::from_iter([
            (
                "rt",
                BoxView {
                    mode,
                    placement: Placement::Global,
                    shared: None,
                    cpus: &BOTH,
                    servers,
                },
            ),
            (
                "bg",
                BoxView {
                    mode: Mode::Hard,
                    placement: Placement::Global,
                    shared: Some(50),
                    cpus: &ONE,
                    servers: &[],
                },
            ),
        ])
    }

    #[test]
    fn running_members_get_their_band_and_cpu_shared_ones_run_normally() {
        let servers = [ServerId(0), ServerId(1)];
        let edf = BTreeMap::from([(0, vec![ServerId(0)]), (1, vec![ServerId(1)])]);
        let cpu_of = |s: ServerId| s.0;
        let core = core_view(&edf, &cpu_of);
        let mut rt = view(7, "bg", 0, None);
        rt.original = SchedAttr::fifo(30);
        let d = decide(
            &core,
            &boxes(&servers, Mode::Hard),
            &[view(5, "rt", 20, Some(1)), view(6, "rt", 10, Some(1)), rt],
        );
        assert_eq!(d[0].charge_to, Some(ServerId(1)));
        assert_eq!(d[0].want.as_ref().unwrap().attr, SchedAttr::fifo(89));
        assert_eq!(d[0].want.as_ref().unwrap().cpus, vec![1]);
        assert_eq!(
            d[1].want.as_ref().unwrap().attr,
            SchedAttr::fifo(88),
            "lower original priority, one below"
        );
        let bg = d[2].want.as_ref().unwrap();
        assert_eq!(
            bg.attr,
            SchedAttr::other(0),
            "an RT member of a shared box runs normal"
        );
        assert_eq!((bg.cpus.clone(), d[2].charge_to), (vec![1], None));
    }

    #[test]
    fn a_throttled_server_freezes_hard_members_and_idles_reclaim_members() {
        let servers = [ServerId(0)];
        let edf = BTreeMap::new(); // every server throttled
        let cpu_of = |s: ServerId| s.0;
        let core = core_view(&edf, &cpu_of);
        let mut m = view(5, "rt", 0, Some(0));
        m.last_server = Some(ServerId(0));
        let before = Applied {
            attr: SchedAttr::fifo(89),
            cpus: vec![0],
            frozen: false,
        };
        m.applied = Some(&before);
        let d = decide(
            &core,
            &boxes(&servers, Mode::Hard),
            std::slice::from_ref(&m),
        );
        assert_eq!(
            d[0].want,
            Some(Applied {
                frozen: true,
                ..before.clone()
            })
        );
        assert_eq!(
            d[0].charge_to,
            Some(ServerId(0)),
            "charged until the freeze lands"
        );
        let d = decide(&core, &boxes(&servers, Mode::Reclaim), &[m]);
        assert_eq!(d[0].want.as_ref().unwrap().attr, SchedAttr::idle());
        assert_eq!(d[0].charge_to, None);
    }

    #[test]
    fn a_sleeping_member_keeps_a_live_vcpu() {
        let servers = [ServerId(0), ServerId(1)];
        let edf = BTreeMap::from([(1, vec![ServerId(1)])]);
        let cpu_of = |s: ServerId| s.0;
        let core = core_view(&edf, &cpu_of);
        let mut m = view(5, "rt", 0, None);
        m.ready = false;
        m.last_server = Some(ServerId(0)); // throttled now
        let d = decide(&core, &boxes(&servers, Mode::Hard), &[m]);
        assert_eq!(d[0].charge_to, Some(ServerId(1)));
        assert_eq!(d[0].want.as_ref().unwrap().cpus, vec![1]);
    }

    /// Issue 14: a ready member of a global box that the core places nowhere waits on its last
    /// vCPU, thawed at that vCPU's band on its CPU, when that vCPU lost its CPU to another
    /// server (live, hosting nobody): the kernel runs it once the winner's members stop. On a
    /// vCPU that hosts another member, or a throttled one, it is frozen; a pinned box's
    /// members are placed by the core and never take this path.
    #[test]
    fn a_waiting_global_member_stays_on_a_vcpu_that_lost_its_cpu() {
        // CPU 0: server 2 (another box) ahead of server 0 (this box's vCPU); CPU 1: server 1.
        let servers = [ServerId(0), ServerId(1)];
        let edf = BTreeMap::from([(0, vec![ServerId(2), ServerId(0)]), (1, vec![ServerId(1)])]);
        let cpu_of = |s: ServerId| if s == ServerId(1) { 1 } else { 0 };
        let decide_with = |hosts: &dyn Fn(ServerId) -> bool, last: u32, mode: Mode| {
            let core = CoreView {
                edf: &edf,
                cpu_of: &cpu_of,
                hosts,
                prio: PrioRange::DEFAULT,
            };
            let mut m = view(5, "rt", 0, None);
            m.last_server = Some(ServerId(last));
            decide(&core, &boxes(&servers, mode), &[m]).remove(0)
        };
        let d = decide_with(&|s| s == ServerId(1), 0, Mode::Hard);
        let want = d.want.unwrap();
        assert!(!want.frozen, "waits on vCPU 0");
        assert_eq!((want.cpus, want.attr), (vec![0], SchedAttr::fifo(64)));
        assert_eq!(d.charge_to, Some(ServerId(0)));
        let d = decide_with(&|_| true, 0, Mode::Hard);
        assert!(d.want.unwrap().frozen, "vCPU 0 hosts another member");
        let d = decide_with(&|s| s == ServerId(1), 1, Mode::Hard);
        assert!(d.want.unwrap().frozen, "its vCPU 1 hosts another member");
        let d = decide_with(&|_| false, 2, Mode::Hard);
        assert!(d.want.unwrap().frozen, "its last vCPU is not its box's");
        let d = decide_with(&|_| false, 0, Mode::Reclaim);
        assert_eq!(
            d.want.unwrap().attr,
            SchedAttr::idle(),
            "reclaim: as before"
        );
        let mut pinned = boxes(&servers, Mode::Hard);
        pinned.get_mut("rt").unwrap().placement = Placement::Pinned;
        let core = core_view(&edf, &cpu_of);
        let mut m = view(5, "rt", 0, None);
        m.last_server = Some(ServerId(0));
        assert!(
            decide(&core, &pinned, &[m])[0]
                .want
                .as_ref()
                .unwrap()
                .frozen
        );
    }

    /// A member asleep by the sensor is not frozen when every server of its box is spent
    /// (a freeze would wake it); one the sensor does not know to be asleep is.
    #[test]
    fn an_asleep_member_is_never_frozen() {
        let servers = [ServerId(0)];
        let edf = BTreeMap::new(); // its only server is throttled
        let cpu_of = |s: ServerId| s.0;
        let core = core_view(&edf, &cpu_of);
        let before = Applied {
            attr: SchedAttr::fifo(89),
            cpus: vec![0],
            frozen: false,
        };
        let mut m = view(5, "rt", 0, None);
        m.ready = false;
        m.asleep = true;
        m.last_server = Some(ServerId(0));
        m.applied = Some(&before);
        let d = decide(
            &core,
            &boxes(&servers, Mode::Hard),
            std::slice::from_ref(&m),
        );
        assert_eq!(d[0].want.as_ref(), Some(&before), "left as it was");
        m.applied = None;
        let d = decide(
            &core,
            &boxes(&servers, Mode::Hard),
            std::slice::from_ref(&m),
        );
        let want = d[0].want.clone().unwrap();
        assert!(!want.frozen, "a new sleeper is not frozen either");
        assert_eq!(want.attr, SchedAttr::fifo(PrioRange::DEFAULT.lo));
        m.asleep = false;
        m.applied = Some(&before);
        let d = decide(&core, &boxes(&servers, Mode::Hard), &[m]);
        assert!(
            d[0].want.as_ref().unwrap().frozen,
            "not known asleep: frozen"
        );
    }
}
