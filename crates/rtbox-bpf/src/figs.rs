//! The memory the program and the daemon share (`.bss` of the object, mapped by libbpf):
//! one `Fig` per member slot, the runnable count per server slot, the lost-event count, a
//! dirty bit per member slot (set by the program after each write of the slot's figures), and
//! per member slot its CPU time before its join that its figures leave out.
//! Layout as `struct rtbox_fig` / the globals of `bpf/sensor.bpf.c` (checked by a test against
//! the constants of `bpf/sensor.h`).

use std::sync::atomic::{fence, AtomicI32, AtomicU32, AtomicU64, Ordering};

/// Member slots (`RTBOX_MAX_MEMBERS`).
pub const MAX_MEMBERS: usize = 8192;
/// Server slots (`RTBOX_MAX_SERVERS`).
pub const MAX_SERVERS: usize = 1024;

/// A member as the kernel last switched it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Blocked,
    Runnable,
    Running,
    Exited,
}

impl State {
    fn from_raw(v: u32) -> State {
        match v {
            1 => State::Runnable,
            2 => State::Running,
            3 => State::Exited,
            _ => State::Blocked,
        }
    }

    fn raw(self) -> u32 {
        match self {
            State::Blocked => 0,
            State::Runnable => 1,
            State::Running => 2,
            State::Exited => 3,
        }
    }

    /// Runnable in the CBS sense: running or waiting for a CPU.
    pub fn ready(self) -> bool {
        matches!(self, State::Runnable | State::Running)
    }
}

/// One consistent reading of a member's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// CPU time the member consumed, in ns: the kernel's `sum_exec_runtime` at its last switch,
    /// plus the time since its switch-in while it runs (wall time: it includes host steal
    /// until the next switch corrects it).
    pub runtime_ns: u64,
    pub state: State,
    /// CPU of its last switch-in.
    pub cpu: u32,
    /// Exact kernel figure (the member is off CPU), as opposed to one extrapolated while on CPU.
    pub exact: bool,
    pub switches: u64,
    pub wakeups: u64,
}

/// `struct rtbox_fig`: 64 bytes.
#[repr(C)]
pub struct Fig {
    seq: AtomicU32,
    state: AtomicU32,
    sum_ns: AtomicU64,
    on_cpu_since: AtomicU64,
    switches: AtomicU64,
    wakeups: AtomicU64,
    cpu: AtomicU32,
    server: AtomicU32,
    counted: AtomicI32,
    quiet: AtomicU32,
    every: AtomicU32,
    joined: AtomicU32,
}

const _: () = assert!(std::mem::size_of::<Fig>() == 64);

impl Fig {
    /// Starts a new member on `server` (the slot is not in the members map yet) with `sum` ns
    /// consumed, running since `since` (0: blocked).
    pub fn reset(&self, server: u32, sum: u64, since: u64) {
        let state = if since != 0 {
            State::Running
        } else {
            State::Blocked
        };
        self.seq.store(0, Ordering::Relaxed);
        self.state.store(state.raw(), Ordering::Relaxed);
        self.sum_ns.store(sum, Ordering::Relaxed);
        self.on_cpu_since.store(since, Ordering::Relaxed);
        self.switches.store(0, Ordering::Relaxed);
        self.wakeups.store(0, Ordering::Relaxed);
        self.cpu.store(0, Ordering::Relaxed);
        self.server.store(server, Ordering::Relaxed);
        let counted = if state.ready() { server as i32 } else { -1 };
        self.counted.store(counted, Ordering::Relaxed);
        self.every.store(0, Ordering::Relaxed);
        // Taken as running, its figure may be as old as its last tick: the program finds the
        // difference at its first switch (`pre_join` in the program).
        self.joined.store(u32::from(since != 0), Ordering::Relaxed);
        self.quiet.store(0, Ordering::Release);
    }

    pub fn set_server(&self, server: u32) {
        self.server.store(server, Ordering::Release);
    }

    /// Whether each of the member's wake-ups and blocks wakes the loop (a global box's
    /// member), not only its server's first and last runnable member.
    pub fn set_every(&self, every: bool) {
        self.every.store(u32::from(every), Ordering::Release);
    }

    /// The server and the every-change flag the daemon set.
    pub fn placement(&self) -> (u32, bool) {
        (
            self.server.load(Ordering::Acquire),
            self.every.load(Ordering::Acquire) != 0,
        )
    }

    pub fn set_quiet(&self) {
        self.quiet.store(1, Ordering::Release);
    }

    /// Takes the server the member is counted runnable under (-1: none) and clears it.
    pub fn take_counted(&self) -> i32 {
        self.counted.swap(-1, Ordering::AcqRel)
    }

    /// A consistent reading (the program writes inside an odd sequence count).
    pub fn read(&self, now: u64) -> Reading {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let state = State::from_raw(self.state.load(Ordering::Relaxed));
            let sum = self.sum_ns.load(Ordering::Relaxed);
            let since = self.on_cpu_since.load(Ordering::Relaxed);
            let cpu = self.cpu.load(Ordering::Relaxed);
            let switches = self.switches.load(Ordering::Relaxed);
            let wakeups = self.wakeups.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) != s1 {
                continue;
            }
            let running = state == State::Running && since != 0;
            let runtime_ns = if running {
                sum + now.saturating_sub(since)
            } else {
                sum
            };
            return Reading {
                runtime_ns,
                state,
                cpu,
                exact: !running,
                switches,
                wakeups,
            };
        }
    }
}

/// Words of the dirty bitmap (`dirty[RTBOX_MAX_MEMBERS / 64]`).
const DIRTY_WORDS: usize = MAX_MEMBERS / 64;

/// `.bss` of the program: `figs[MAX_MEMBERS]`, `runnable[MAX_SERVERS]`, `lost_events`,
/// `dirty[MAX_MEMBERS / 64]`, `pre_join[MAX_MEMBERS]`.
pub struct Shared {
    base: *mut u8,
    runnable_off: usize,
    lost_off: usize,
    dirty_off: usize,
    pre_join_off: usize,
}

// SAFETY: the mapping is process-wide memory shared with the kernel; every access goes through
// atomics, so moving or sharing the handle between threads is sound.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// Wraps libbpf's mapping of `.bss`; None when it is too small for the layout.
    pub fn new(base: *mut u8, size: usize) -> Option<Shared> {
        let runnable_off = MAX_MEMBERS * std::mem::size_of::<Fig>();
        let lost_off = runnable_off + MAX_SERVERS * 4;
        let dirty_off = lost_off + 8;
        let pre_join_off = dirty_off + DIRTY_WORDS * 8;
        (!base.is_null()
            && size >= pre_join_off + MAX_MEMBERS * 8
            && (base as usize).is_multiple_of(64))
        .then_some(Shared {
            base,
            runnable_off,
            lost_off,
            dirty_off,
            pre_join_off,
        })
    }

    fn pre_join(&self, slot: u32) -> &AtomicU64 {
        assert!((slot as usize) < MAX_MEMBERS);
        // SAFETY: in bounds (checked above and at construction), 8-byte aligned.
        unsafe { &*(self.base.add(self.pre_join_off + slot as usize * 8) as *const AtomicU64) }
    }

    /// Starts a new member in slot `slot` (not in the members map yet): see [`Fig::reset`].
    pub fn reset(&self, slot: u32, server: u32, sum: u64, since: u64) {
        self.pre_join(slot).store(0, Ordering::Relaxed);
        self.fig(slot).reset(server, sum, since);
    }

    /// The CPU time before its join that slot `slot`'s figures leave out (found at the
    /// member's first switch when it was registered as running).
    pub fn pre_join_ns(&self, slot: u32) -> u64 {
        self.pre_join(slot).load(Ordering::Acquire)
    }

    fn dirty_word(&self, w: usize) -> &AtomicU64 {
        assert!(w < DIRTY_WORDS);
        // SAFETY: in bounds (checked at construction), 8-byte aligned.
        unsafe { &*(self.base.add(self.dirty_off + w * 8) as *const AtomicU64) }
    }

    /// Calls `f` with every slot marked dirty since the last call and clears the marks. A
    /// write after the clearing marks its slot again (the program marks after writing), so
    /// a slot read after this call shows every write up to its mark.
    pub fn take_dirty(&self, mut f: impl FnMut(u32)) {
        for w in 0..DIRTY_WORDS {
            let word = self.dirty_word(w);
            if word.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut bits = word.swap(0, Ordering::AcqRel);
            while bits != 0 {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                f((w * 64) as u32 + b);
            }
        }
    }

    /// Whether slot `slot` is marked dirty now (not cleared).
    pub fn dirty(&self, slot: u32) -> bool {
        let slot = slot as usize;
        self.dirty_word(slot / 64).load(Ordering::Acquire) & (1 << (slot % 64)) != 0
    }

    /// Marks slot `slot` dirty, as the program does (a new member's first reading).
    pub fn mark_dirty(&self, slot: u32) {
        let slot = slot as usize;
        self.dirty_word(slot / 64)
            .fetch_or(1 << (slot % 64), Ordering::AcqRel);
    }

    pub fn fig(&self, slot: u32) -> &Fig {
        assert!((slot as usize) < MAX_MEMBERS);
        // SAFETY: in bounds (checked above and at construction), aligned, and Fig is all atomics.
        unsafe { &*(self.base.add(slot as usize * std::mem::size_of::<Fig>()) as *const Fig) }
    }

    fn count(&self, server: u32) -> &AtomicI32 {
        assert!((server as usize) < MAX_SERVERS);
        // SAFETY: in bounds, 4-byte aligned.
        unsafe { &*(self.base.add(self.runnable_off + server as usize * 4) as *const AtomicI32) }
    }

    pub fn runnable(&self, server: u32) -> i32 {
        self.count(server).load(Ordering::Acquire)
    }

    pub fn runnable_add(&self, server: u32, d: i32) {
        self.count(server).fetch_add(d, Ordering::AcqRel);
    }

    pub fn lost(&self) -> u64 {
        // SAFETY: in bounds, 8-byte aligned.
        unsafe { &*(self.base.add(self.lost_off) as *const AtomicU64) }.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_programs_header() {
        let h = include_str!("bpf/sensor.h");
        assert!(h.contains(&format!("#define RTBOX_MAX_MEMBERS {MAX_MEMBERS}")));
        assert!(h.contains(&format!("#define RTBOX_MAX_SERVERS {MAX_SERVERS}")));
        assert_eq!(std::mem::size_of::<Fig>(), 64);
        assert_eq!(std::mem::offset_of!(Fig, server), 44);
        assert_eq!(std::mem::offset_of!(Fig, quiet), 52);
        assert_eq!(std::mem::offset_of!(Fig, every), 56);
        assert_eq!(std::mem::offset_of!(Fig, joined), 60);
        assert!(h.contains("__u32 every;"));
        assert!(h.contains("__u32 joined;"));
    }

    #[test]
    fn a_running_member_is_extrapolated_and_a_stopped_one_exact() {
        let size = 64 * MAX_MEMBERS + 4 * MAX_SERVERS + 8 + MAX_MEMBERS / 8 + 8 * MAX_MEMBERS;
        let layout = std::alloc::Layout::from_size_align(size, 64).unwrap();
        // SAFETY: non-zero size; freed below with the same layout.
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        let shared = Shared::new(base, size).expect("aligned and large enough");
        let f = shared.fig(3);
        shared.pre_join(3).store(5, Ordering::Relaxed);
        shared.reset(3, 7, 1_000, 0);
        assert_eq!(
            shared.pre_join_ns(3),
            0,
            "a new member has no time before its join"
        );
        assert_eq!(
            f.joined.load(Ordering::Relaxed),
            0,
            "registered blocked: exact"
        );
        let r = f.read(5_000);
        assert_eq!(
            (r.runtime_ns, r.exact, r.state.ready()),
            (1_000, true, false)
        );
        f.reset(7, 1_000, 4_500);
        assert_eq!(
            f.joined.load(Ordering::Relaxed),
            1,
            "registered running: may be stale"
        );
        let r = f.read(5_000);
        assert_eq!(
            (r.runtime_ns, r.exact, r.state),
            (1_500, false, State::Running)
        );
        f.state.store(State::Runnable.raw(), Ordering::Relaxed);
        f.on_cpu_since.store(0, Ordering::Relaxed);
        assert!(f.read(5_000).state.ready());
        f.state.store(State::Running.raw(), Ordering::Relaxed);
        f.on_cpu_since.store(4_000, Ordering::Relaxed);
        let r = f.read(5_000);
        assert_eq!((r.runtime_ns, r.exact), (2_000, false));
        f.state.store(State::Blocked.raw(), Ordering::Relaxed);
        assert!(!f.read(5_000).state.ready());
        shared.runnable_add(5, 1);
        assert_eq!(shared.runnable(5), 1);
        assert!(Shared::new(base, size - 1).is_none());
        let mut seen = Vec::new();
        shared.take_dirty(|s| seen.push(s));
        assert!(seen.is_empty());
        for s in [3, 64, 8191] {
            shared.mark_dirty(s);
        }
        assert!(shared.dirty(64) && !shared.dirty(65));
        shared.take_dirty(|s| seen.push(s));
        assert_eq!(seen, vec![3, 64, 8191], "every mark, in slot order");
        assert!(!shared.dirty(64), "taken marks are cleared");
        // SAFETY: allocated above with this layout.
        unsafe { std::alloc::dealloc(base, layout) };
    }
}
