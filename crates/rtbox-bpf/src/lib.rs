//! The rtbox BPF sensor: members' runtime as the kernel counts it, their readiness, and
//! wake-ups of the enforcement loop only when its core must decide.
//!
//! The program (`src/bpf/sensor.bpf.c`, built by `build.rs` with clang through libbpf-cargo,
//! CO-RE against the kernel's BTF) runs on the scheduler tracepoints `sched_switch`,
//! `sched_wakeup(_new)`, `sched_process_fork` and `sched_process_exit`. The daemon writes which
//! threads are members and the server slot each is placed on; it reads each member's figures
//! from a memory-mapped array (no system call per member) and sleeps on the ring buffer's
//! descriptor, which becomes readable when a server gains its first or loses its last runnable
//! member, or a member forks or exits.
//!
//! The programs are attached through BPF links owned by this process's descriptors: when the
//! daemon dies, for any reason, the kernel detaches them.

mod figs;

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};

use figs::{Fig, Shared};
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
    /// The server (slot) gained its first runnable member.
    ServerActive(u32),
    /// The server (slot) lost its last runnable member.
    ServerIdle(u32),
    /// A member (`parent` tid) created thread `tid` of process `pid`.
    Fork { tid: u32, pid: u32, parent: u32 },
    /// Member thread `tid` of process `pid` exits.
    Exit { tid: u32, pid: u32 },
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
            1 => Some(Event::ServerActive(arg)),
            2 => Some(Event::ServerIdle(arg)),
            3 => Some(Event::Fork {
                tid,
                pid,
                parent: arg,
            }),
            4 => Some(Event::Exit { tid, pid }),
            _ => None,
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

/// A loaded and attached sensor. Dropping it detaches the programs.
pub struct Sensor {
    shared: Shared,
    members: libbpf_rs::MapHandle,
    ring: libbpf_rs::RingBuffer<'static>,
    queue: Arc<Mutex<VecDeque<Event>>>,
    /// Free member slots (stack) and the slot of each tid.
    free: Vec<u32>,
    slots: std::collections::HashMap<u32, u32>,
    // Declared last: dropped after the maps and the ring buffer that refer to it.
    _links: Vec<libbpf_rs::Link>,
    _object: libbpf_rs::Object,
}

impl std::fmt::Debug for Sensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sensor")
            .field("members", &self.slots.len())
            .finish()
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
            ring,
            queue,
            free: (0..MAX_MEMBERS as u32).rev().collect(),
            slots: Default::default(),
            _links: links,
            _object: object,
        })
    }

    /// The descriptor that becomes readable when events wait (an epoll descriptor: sleep on it
    /// with `poll`/`ppoll` together with the loop's other descriptors).
    pub fn fd(&self) -> RawFd {
        self.ring.epoll_fd().as_raw_fd()
    }

    /// Takes the events that are waiting, in order.
    pub fn drain(&mut self) -> Vec<Event> {
        let _ = self.ring.consume();
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        q.drain(..).collect()
    }

    /// Events the program could not queue (ring buffer full): after any, rescan everything.
    pub fn lost_events(&self) -> u64 {
        self.shared.lost()
    }

    /// Makes `tid` a member placed on `server`; `ready` is its readiness now (from /proc), which
    /// the program keeps from its next switch or wake-up on.
    pub fn add(&mut self, tid: u32, server: u32, ready: bool) -> Result<(), SensorError> {
        check_server(server)?;
        if self.slots.contains_key(&tid) {
            self.set_server(tid, server)?;
            return Ok(());
        }
        let slot = self
            .free
            .pop()
            .ok_or(SensorError::Full { max: MAX_MEMBERS })?;
        let state = if ready {
            State::Runnable
        } else {
            State::Blocked
        };
        self.shared.fig(slot).reset(server, state);
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
            self.free.push(slot);
            return Err(SensorError::Load(format!("members map: {e}")));
        }
        self.slots.insert(tid, slot);
        Ok(())
    }

    /// Places member `tid` on another server (the program counts it there from its next switch).
    pub fn set_server(&mut self, tid: u32, server: u32) -> Result<(), SensorError> {
        check_server(server)?;
        if let Some(&slot) = self.slots.get(&tid) {
            self.shared.fig(slot).set_server(server);
        }
        Ok(())
    }

    /// Forgets member `tid`.
    pub fn remove(&mut self, tid: u32) {
        let Some(slot) = self.slots.remove(&tid) else {
            return;
        };
        let _ = libbpf_rs::MapCore::delete(&self.members, &tid.to_ne_bytes());
        // The program no longer finds the tid; take its runnable count back.
        let counted = self.shared.fig(slot).take_counted();
        if counted >= 0 {
            self.shared.runnable_add(counted as u32, -1);
        }
        self.free.push(slot);
    }

    /// Marks member `tid` as about to be stopped by the loop: its blocking and the wake-up of
    /// its restart are the loop's own doing and wake nobody.
    pub fn quiet(&self, tid: u32) {
        if let Some(&slot) = self.slots.get(&tid) {
            self.shared.fig(slot).set_quiet();
        }
    }

    /// The member's figures at `now` (CLOCK_MONOTONIC ns), or None for a non-member.
    pub fn read(&self, tid: u32, now: u64) -> Option<Reading> {
        let slot = *self.slots.get(&tid)?;
        Some(self.shared.fig(slot).read(now))
    }

    /// Runnable members the program counts on server slot `server`.
    pub fn runnable(&self, server: u32) -> i32 {
        self.shared.runnable(server)
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// No members.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
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

// The figures are only touched through `Shared`'s atomic and volatile accessors.
#[allow(dead_code)]
fn _assert_send() {
    fn is_send<T: Send>() {}
    is_send::<Sensor>();
    let _ = std::mem::size_of::<Fig>();
}
