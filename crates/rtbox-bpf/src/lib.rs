//! The rtbox BPF sensor: members' runtime as the kernel counts it, their readiness, and
//! wake-ups of the enforcement loop only when its core must decide.
//!
//! The program (`src/bpf/sensor.bpf.c`, built by `build.rs` with clang through libbpf-cargo,
//! CO-RE against the kernel's BTF) runs on the scheduler tracepoints `sched_switch`,
//! `sched_wakeup(_new)`, `sched_process_fork` and `sched_process_exit`. The daemon writes which
//! threads are members and the server slot each is placed on; it reads each member's figures
//! from a memory-mapped array (no system call per member; a dirty bit per member, set after
//! each write, tells which moved: [`Sensor::take_dirty`]) and sleeps on the ring buffer's
//! descriptor, which becomes readable when a server gains its first or loses its last runnable
//! member, or a member forks or exits.
//!
//! The programs are attached through BPF links owned by this process's descriptors: when the
//! daemon dies, for any reason, the kernel detaches them.

mod figs;

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};

use figs::Shared;
pub use figs::{Reading, State, MAX_MEMBERS, MAX_SERVERS};

/// Why the sensor cannot be used; the daemon then falls back to its perf sensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SensorError {
    /// The BPF object was not built with this binary (no clang, bpftool or kernel BTF at build
    /// time).
    NotBuilt(&'static str),
    /// The kernel refused the object or one of its programs (no BTF, no CAP_BPF/CAP_PERFMON,
    /// lockdown, verifier).
    Load(String),
    /// Every member slot is taken.
    Full { max: usize },
    /// A server slot beyond the program's table.
    ServerSlot { slot: u32, max: usize },
}

impl std::fmt::Display for SensorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SensorError::NotBuilt(why) => write!(f, "BPF sensor not built into this binary: {why}"),
            SensorError::Load(why) => write!(f, "BPF sensor did not load: {why}"),
            SensorError::Full { max } => write!(f, "BPF sensor full: {max} members at most"),
            SensorError::ServerSlot { slot, max } => {
                write!(f, "BPF sensor: server slot {slot} beyond {max}")
            }
        }
    }
}

impl std::error::Error for SensorError {}

/// What woke the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The server (slot) gained its first runnable member, thread `tid`.
    ServerActive { server: u32, tid: u32 },
    /// The server (slot) lost its last runnable member, thread `tid`.
    ServerIdle { server: u32, tid: u32 },
    /// A member (`parent` tid) created thread `tid` of process `pid`.
    Fork { tid: u32, pid: u32, parent: u32 },
    /// Member thread `tid` of process `pid`, registered in `slot`, exits.
    Exit { tid: u32, pid: u32, slot: u32 },
    /// Member thread `old` of process `pid`, not its leader, called exec: it is now thread
    /// `tid` (the leader's tid; the leader and every other thread exited).
    Exec { tid: u32, pid: u32, old: u32 },
}

impl Event {
    /// Decodes one ring-buffer record (`struct rtbox_event`).
    fn decode(data: &[u8]) -> Option<Event> {
        let word = |i: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(
                data.get(4 * i..4 * i + 4)?.try_into().ok()?,
            ))
        };
        let (kind, tid, pid, arg) = (word(0)?, word(1)?, word(2)?, word(3)?);
        match kind {
            1 => Some(Event::ServerActive { server: arg, tid }),
            2 => Some(Event::ServerIdle { server: arg, tid }),
            3 => Some(Event::Fork {
                tid,
                pid,
                parent: arg,
            }),
            4 => Some(Event::Exit {
                tid,
                pid,
                slot: arg,
            }),
            5 => Some(Event::Exec { tid, pid, old: arg }),
            _ => None,
        }
    }
}

/// Whether the sensor can be tried here: built into this binary, and the kernel has BTF (what
/// CO-RE needs). Loading may still be refused (no privileges, lockdown).
pub fn available() -> Result<(), SensorError> {
    #[cfg(rtbox_bpf_missing)]
    {
        Err(SensorError::NotBuilt(env!("RTBOX_BPF_MISSING")))
    }
    #[cfg(not(rtbox_bpf_missing))]
    {
        if std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            Ok(())
        } else {
            Err(SensorError::Load(
                "no kernel BTF (/sys/kernel/btf/vmlinux)".into(),
            ))
        }
    }
}

/// Reads monotonic time as the program stamps it (`bpf_ktime_get_ns` is CLOCK_MONOTONIC).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(not(rtbox_bpf_missing))]
static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sensor.bpf.o"));

/// Free member slots (stack), the slot of each tid and the tid of each slot (0: free).
#[derive(Default)]
struct Slots {
    free: Vec<u32>,
    of: std::collections::HashMap<u32, u32>,
    tid_of: Vec<u32>,
}

/// A loaded and attached sensor. Dropping it (and every [`Registration`]) detaches the programs.
pub struct Sensor {
    shared: Shared,
    members: libbpf_rs::MapHandle,
    /// Consumed by the loop only; in a mutex because libbpf's ring-buffer manager is not Sync.
    ring: Mutex<libbpf_rs::RingBuffer<'static>>,
    queue: Arc<Mutex<VecDeque<Event>>>,
    slots: Mutex<Slots>,
    // Declared last: dropped after the maps and the ring buffer that refer to it.
    _links: Vec<libbpf_rs::Link>,
    _object: libbpf_rs::Object,
}

impl std::fmt::Debug for Sensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sensor")
            .field("members", &self.len())
            .finish()
    }
}

/// A member as the sensor knows it: its figures, readable from any thread (the backstop's
/// too). The member leaves the sensor when the last clone of its registration goes.
#[derive(Debug)]
pub struct Registration {
    sensor: Arc<Sensor>,
    tid: u32,
    slot: u32,
}

impl Registration {
    /// Registers `tid` with `sensor` on server slot `server`. `runtime_ns`: its CPU time now
    /// (the kernel's, from /proc); `ready`: runnable now. The program keeps both from the
    /// member's next switch or wake-up on; until then a ready member counts as running since
    /// now (it may be running, and a running member that is never preempted is never switched).
    pub fn new(
        sensor: &Arc<Sensor>,
        tid: u32,
        server: u32,
        runtime_ns: u64,
        ready: bool,
    ) -> Result<Self, SensorError> {
        let slot = sensor.add(tid, server, runtime_ns, ready)?;
        Ok(Registration {
            sensor: Arc::clone(sensor),
            tid,
            slot,
        })
    }

    /// The member's figures at CLOCK_MONOTONIC `now`.
    pub fn read(&self, now: u64) -> Reading {
        self.sensor.shared.fig(self.slot).read(now)
    }

    /// The member's CPU time before its registration that its figures leave out (known from
    /// its first switch, when it was registered as running; else 0).
    pub fn pre_join_ns(&self) -> u64 {
        self.sensor.shared.pre_join_ns(self.slot)
    }

    /// CPU time consumed so far, ns (see [`Reading::runtime_ns`]).
    pub fn runtime_now(&self) -> u64 {
        self.read(now_ns()).runtime_ns
    }

    /// Places the member on server slot `server` (counted there from its next switch).
    pub fn set_server(&self, server: u32) {
        self.sensor
            .shared
            .fig(self.slot)
            .set_server(server.min(MAX_SERVERS as u32 - 1));
    }

    /// The server slot it is placed on, and whether each of its wake-ups and blocks wakes the
    /// loop ([`Registration::set_server`], [`Registration::set_every`]).
    pub fn placement(&self) -> (u32, bool) {
        self.sensor.shared.fig(self.slot).placement()
    }

    /// Whether each wake-up and block of the member wakes the loop (a global box's member),
    /// not only its server's first and last runnable member.
    pub fn set_every(&self, every: bool) {
        self.sensor.shared.fig(self.slot).set_every(every);
    }

    /// Whether the program marked the member's figures written since [`Sensor::take_dirty`]
    /// last took the marks (debug checks of the loop's shortcut).
    pub fn dirty(&self) -> bool {
        self.sensor.shared.dirty(self.slot)
    }

    /// The loop is about to stop the member: its block and the restart's wake-up wake nobody.
    pub fn quiet(&self) {
        self.sensor.shared.fig(self.slot).set_quiet();
    }

    pub fn tid(&self) -> u32 {
        self.tid
    }

    /// Its slot in the program's table (named by its exit event).
    pub fn slot(&self) -> u32 {
        self.slot
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.sensor.remove(self.tid, self.slot);
    }
}

impl Sensor {
    /// Loads the program, attaches it to the scheduler tracepoints and maps its figures.
    pub fn load() -> Result<Sensor, SensorError> {
        #[cfg(rtbox_bpf_missing)]
        {
            Err(SensorError::NotBuilt(env!("RTBOX_BPF_MISSING")))
        }
        #[cfg(not(rtbox_bpf_missing))]
        {
            Self::load_object(OBJECT)
        }
    }

    #[cfg(not(rtbox_bpf_missing))]
    fn load_object(bytes: &[u8]) -> Result<Sensor, SensorError> {
        use libbpf_rs::{AsRawLibbpf, MapCore, ObjectBuilder, RingBufferBuilder};
        let load = |what: &str, e: libbpf_rs::Error| SensorError::Load(format!("{what}: {e}"));
        let open = ObjectBuilder::default()
            .name("rtbox_sensor")
            .map_err(|e| load("name", e))?
            .open_memory(bytes)
            .map_err(|e| load("open", e))?;
        let object = open.load().map_err(|e| load("load", e))?;
        let mut links = Vec::new();
        for prog in object.progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            links.push(
                prog.attach()
                    .map_err(|e| load(&format!("attach {name}"), e))?,
            );
        }
        let map = |suffix: &str| {
            object
                .maps()
                .find(|m| m.name().to_string_lossy().ends_with(suffix))
                .ok_or_else(|| SensorError::Load(format!("map {suffix} missing")))
        };
        let members_map = map("members")?;
        let members =
            libbpf_rs::MapHandle::try_from(&members_map).map_err(|e| load("members", e))?;
        let bss = map(".bss")?;
        let mut size: libbpf_rs::libbpf_sys::size_t = 0;
        // SAFETY: the map belongs to the loaded object, which the sensor keeps; libbpf has
        // mapped `.bss` of a loaded object into this process (BPF_F_MMAPABLE), and the mapping
        // lives as long as the object.
        let base = unsafe {
            libbpf_rs::libbpf_sys::bpf_map__initial_value(
                bss.as_libbpf_object().as_ptr(),
                &mut size,
            )
        };
        let shared = Shared::new(base.cast(), size as usize)
            .ok_or_else(|| SensorError::Load(format!("figures mapping of {size} bytes")))?;
        let queue: Arc<Mutex<VecDeque<Event>>> = Arc::default();
        let sink = Arc::clone(&queue);
        let events = map("events")?;
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&events, move |data: &[u8]| {
                if let Some(e) = Event::decode(data) {
                    sink.lock().unwrap_or_else(|p| p.into_inner()).push_back(e);
                }
                0
            })
            .map_err(|e| load("ring buffer", e))?;
        let ring = builder.build().map_err(|e| load("ring buffer", e))?;
        Ok(Sensor {
            shared,
            members,
            ring: Mutex::new(ring),
            queue,
            slots: Mutex::new(Slots {
                free: (0..MAX_MEMBERS as u32).rev().collect(),
                of: Default::default(),
                tid_of: vec![0; MAX_MEMBERS],
            }),
            _links: links,
            _object: object,
        })
    }

    /// The descriptor that becomes readable when events wait (an epoll descriptor: sleep on it
    /// with `poll`/`ppoll` together with the loop's other descriptors).
    pub fn fd(&self) -> RawFd {
        self.ring
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .epoll_fd()
            .as_raw_fd()
    }

    /// Takes the events that are waiting, in order.
    pub fn drain(&self) -> Vec<Event> {
        let _ = self
            .ring
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .consume();
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        q.drain(..).collect()
    }

    /// The members whose figures the program wrote since the last call (a switch, a wake-up,
    /// an exit), in slot order; clears their marks. A member not listed reads as it did at
    /// the last call: the loop need not read it.
    pub fn take_dirty(&self) -> Vec<u32> {
        let slots = self.slots();
        let mut tids = Vec::new();
        self.shared.take_dirty(|slot| {
            let tid = slots.tid_of[slot as usize];
            if tid != 0 {
                tids.push(tid);
            }
        });
        tids
    }

    /// Events the program could not queue (ring buffer full): after any, rescan everything.
    pub fn lost_events(&self) -> u64 {
        self.shared.lost()
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `tid` a member placed on `server`; `ready` is its readiness now (from /proc), which
    /// the program keeps from its next switch or wake-up on. Returns its slot.
    fn add(&self, tid: u32, server: u32, runtime_ns: u64, ready: bool) -> Result<u32, SensorError> {
        check_server(server)?;
        let mut slots = self.slots();
        let slot = slots
            .free
            .pop()
            .ok_or(SensorError::Full { max: MAX_MEMBERS })?;
        let since = if ready { now_ns() } else { 0 };
        self.shared.reset(slot, server, runtime_ns, since);
        if ready {
            // Counted as the program would have, had it seen the member wake.
            self.shared.runnable_add(server, 1);
        }
        if let Err(e) = libbpf_rs::MapCore::update(
            &self.members,
            &tid.to_ne_bytes(),
            &slot.to_ne_bytes(),
            libbpf_rs::MapFlags::ANY,
        ) {
            if ready {
                self.shared.runnable_add(server, -1);
            }
            slots.free.push(slot);
            return Err(SensorError::Load(format!("members map: {e}")));
        }
        // A registration of `tid` still held (by a backstop's plan) is of a thread that has
        // gone: its tid now names another thread (a reused tid, or the thread that took its
        // process leader's tid at an exec). The map names the new slot; the old one is freed
        // when its last holder lets go, and its marks name nobody.
        if let Some(stale) = slots.of.insert(tid, slot) {
            slots.tid_of[stale as usize] = 0;
        }
        slots.tid_of[slot as usize] = tid;
        // Its first reading is news to the loop, as if the program had written it.
        self.shared.mark_dirty(slot);
        Ok(slot)
    }

    /// Forgets member `tid` registered in `slot`; the map keeps a later registration of the
    /// same tid.
    fn remove(&self, tid: u32, slot: u32) {
        let mut slots = self.slots();
        if slots.of.get(&tid) == Some(&slot) {
            slots.of.remove(&tid);
            let _ = libbpf_rs::MapCore::delete(&self.members, &tid.to_ne_bytes());
        }
        if slots.tid_of[slot as usize] == tid {
            slots.tid_of[slot as usize] = 0;
        }
        // The program no longer finds the tid; take its runnable count back.
        let counted = self.shared.fig(slot).take_counted();
        if counted >= 0 {
            self.shared.runnable_add(counted as u32, -1);
        }
        slots.free.push(slot);
    }

    /// Runnable members the program counts on server slot `server`.
    pub fn runnable(&self, server: u32) -> i32 {
        self.shared.runnable(server)
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.slots().of.len()
    }

    /// No members.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn check_server(server: u32) -> Result<(), SensorError> {
    if (server as usize) < MAX_SERVERS {
        Ok(())
    } else {
        Err(SensorError::ServerSlot {
            slot: server,
            max: MAX_SERVERS,
        })
    }
}

// Shared with the backstop threads through registrations.
#[allow(dead_code)]
fn _assert_send_sync() {
    fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<Registration>();
}
