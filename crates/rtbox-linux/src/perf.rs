//! Exact per-thread CPU time of any thread: the perf software task clock
//! (`perf_event_open(PERF_COUNT_SW_TASK_CLOCK, pid = tid, cpu = -1)`). Unlike /proc schedstat or
//! cpuacct, which advance only at the tick, it is exact to the nanosecond at every read.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::LinuxError;

/// `struct perf_event_attr`, first version (64 bytes).
#[repr(C)]
#[derive(Default)]
struct RawPerfAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const PERF_COUNT_SW_DUMMY: u64 = 9;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
/// `perf_event_attr.watermark` (bit 14): wake pollers by bytes written (`wakeup_watermark`).
const ATTR_WATERMARK: u64 = 1 << 14;
/// `perf_event_attr.context_switch` (bit 26): a record at each switch of the thread.
const ATTR_CONTEXT_SWITCH: u64 = 1 << 26;

/// Opens a perf event of thread `tid` on any CPU (`op` names the call in errors).
fn open_event(attr: &RawPerfAttr, tid: i32, op: &'static str) -> Result<OwnedFd, LinuxError> {
    // SAFETY: attr is a valid perf_event_attr of the size it states.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const RawPerfAttr,
            tid,
            -1i32,
            -1i32,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(LinuxError::last(op, tid));
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// An open task-clock counter on one thread.
#[derive(Debug)]
pub struct TaskClock {
    fd: OwnedFd,
    tid: i32,
}

impl TaskClock {
    /// Start counting the CPU time of thread `tid` (from now; earlier time is not included).
    pub fn open(tid: i32) -> Result<Self, LinuxError> {
        let attr = RawPerfAttr {
            type_: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<RawPerfAttr>() as u32,
            config: PERF_COUNT_SW_TASK_CLOCK,
            ..Default::default()
        };
        let fd = open_event(&attr, tid, "perf_event_open")?;
        Ok(TaskClock { fd, tid })
    }

    /// CPU time consumed since `open`, in ns.
    pub fn read(&self) -> Result<u64, LinuxError> {
        let mut v: u64 = 0;
        // SAFETY: v is an 8-byte buffer.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                &mut v as *mut u64 as *mut libc::c_void,
                8,
            )
        };
        if n != 8 {
            return Err(LinuxError::last("read(perf task clock)", self.tid));
        }
        Ok(v)
    }

    pub fn tid(&self) -> i32 {
        self.tid
    }
}

/// Wakes a poller when one thread is switched in: a per-thread dummy event that writes a
/// context switch record (Linux 4.3) at each switch of the thread into a one-page ring, and
/// wakes pollers of its descriptor at every byte written. The perf sensor watches its sleeping
/// members with it, so that one that runs is seen at once without reading every member's clock
/// at every step (issue 14). Hand-written beside [`TaskClock`] (same attribute, one mapping,
/// no record is ever parsed: only the wake-up counts).
#[derive(Debug)]
pub struct SwitchIn {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
    tid: i32,
}

// SAFETY: the mapping is owned by the value; its tail is written through atomics only.
unsafe impl Send for SwitchIn {}
unsafe impl Sync for SwitchIn {}

impl SwitchIn {
    /// Watches thread `tid`'s switches.
    pub fn open(tid: i32) -> Result<Self, LinuxError> {
        let attr = RawPerfAttr {
            type_: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<RawPerfAttr>() as u32,
            config: PERF_COUNT_SW_DUMMY,
            flags: ATTR_CONTEXT_SWITCH | ATTR_WATERMARK,
            // `wakeup_watermark` (a union with `wakeup_events`): wake at every record.
            wakeup_events: 1,
            ..Default::default()
        };
        let fd = open_event(&attr, tid, "perf_event_open(switches)")?;
        let len = 2 * page_size();
        // SAFETY: a shared mapping of the event's ring: one header page, one data page.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(LinuxError::last("mmap(perf switch records)", tid));
        }
        Ok(SwitchIn {
            fd,
            base: base as *mut u8,
            len,
            tid,
        })
    }

    /// The descriptor to poll: readable after a switch of the thread.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }

    /// `data_head` and `data_tail` of `struct perf_event_mmap_page` (offsets 1024 and 1032).
    fn head_tail(&self) -> (&std::sync::atomic::AtomicU64, &std::sync::atomic::AtomicU64) {
        // SAFETY: both lie 8-byte aligned in the mapped header page; the kernel writes the
        // head, we write the tail.
        unsafe {
            (
                &*(self.base.add(1024) as *const std::sync::atomic::AtomicU64),
                &*(self.base.add(1032) as *const std::sync::atomic::AtomicU64),
            )
        }
    }

    /// Drops the records written so far, so that the ring has room for the next one (a full
    /// ring writes nothing and wakes nobody) and [`SwitchIn::ran`] starts from now.
    pub fn clear(&self) {
        use std::sync::atomic::Ordering;
        let (head, tail) = self.head_tail();
        tail.store(head.load(Ordering::Acquire), Ordering::Release);
    }

    /// Whether the thread was switched since the last [`SwitchIn::clear`]: read from the
    /// mapped ring, no system call.
    pub fn ran(&self) -> bool {
        use std::sync::atomic::Ordering;
        let (head, tail) = self.head_tail();
        head.load(Ordering::Acquire) != tail.load(Ordering::Relaxed)
    }
}

impl Drop for SwitchIn {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`, unmapped once.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

/// The threads whose [`SwitchIn`] is armed, on one epoll descriptor the loop sleeps on: it
/// becomes readable when one of them runs. Which one, the loop reads from each ring
/// ([`SwitchIn::ran`]): a perf descriptor's readiness is taken by the first poll of it, and
/// the poll of the epoll descriptor that wakes the loop is that first poll. Each fires once
/// (`EPOLLONESHOT`) and is disarmed when seen, so a member that then keeps running wakes
/// nobody.
#[derive(Debug)]
pub struct SwitchWatch {
    epoll: nix::sys::epoll::Epoll,
}

impl SwitchWatch {
    pub fn new() -> Result<Self, LinuxError> {
        use nix::sys::epoll::{Epoll, EpollCreateFlags};
        Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)
            .map(|epoll| SwitchWatch { epoll })
            .map_err(|e| LinuxError::Syscall {
                op: "epoll_create1",
                tid: -1,
                errno: e as i32,
            })
    }

    /// The descriptor to sleep on: readable after an armed thread ran.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.epoll.0.as_fd()
    }

    /// Arms `w`: from now, a switch of its thread makes [`SwitchIn::ran`] true and the watch
    /// readable (once: `EPOLLONESHOT`).
    pub fn arm(&self, w: &SwitchIn) -> Result<(), LinuxError> {
        use nix::sys::epoll::{EpollEvent, EpollFlags};
        w.clear();
        let flags = EpollFlags::EPOLLIN | EpollFlags::EPOLLONESHOT;
        let mut ev = EpollEvent::new(flags, w.tid as u64);
        let r = match self.epoll.add(w.fd(), ev) {
            Err(nix::errno::Errno::EEXIST) => self.epoll.modify(w.fd(), &mut ev),
            r => r,
        };
        r.map_err(|e| LinuxError::Syscall {
            op: "epoll_ctl",
            tid: w.tid,
            errno: e as i32,
        })
    }

    /// The threads whose event hung up (the thread exited, or an `execve` by another thread
    /// of its process replaced it): epoll reports a hang-up whatever the mask, and it stays
    /// readable, so each must leave the watch ([`SwitchWatch::disarm`]) or the loop's sleep
    /// returns at once for ever. Without waiting.
    pub fn hung_up(&self) -> Vec<i32> {
        use nix::sys::epoll::{EpollEvent, EpollFlags, EpollTimeout};
        let mut out = Vec::new();
        let mut evs = [EpollEvent::empty(); 64];
        while let Ok(n) = self.epoll.wait(&mut evs, EpollTimeout::ZERO) {
            out.extend(
                evs[..n]
                    .iter()
                    .filter(|e| {
                        e.events()
                            .intersects(EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR)
                    })
                    .map(|e| e.data() as i32),
            );
            if n < evs.len() {
                break;
            }
        }
        out
    }

    /// Disarms `w`: it leaves the watch (a registered descriptor still reports errors and
    /// hang-ups whatever its mask, and a wake-up of its queue made the watch readable).
    pub fn disarm(&self, w: &SwitchIn) {
        let _ = self.epoll.delete(w.fd());
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_thread_clock_grows_with_work_and_not_beyond_wall_time() {
        let tid = crate::sched::gettid();
        let clock = match TaskClock::open(tid) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("skipping: perf task clock unavailable here ({e})");
                return;
            }
        };
        let t0 = crate::monotonic_ns();
        let a = clock.read().unwrap();
        let mut x = 0u64;
        while crate::monotonic_ns() - t0 < 20_000_000 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        let b = clock.read().unwrap();
        let wall = crate::monotonic_ns() - t0;
        assert!(x > 0);
        assert!(b > a, "clock did not advance: {a} -> {b}");
        assert!(
            b - a <= wall + 1_000_000,
            "more CPU than wall time: {} > {wall}",
            b - a
        );
    }

    /// Whether `fd` is readable within `ms`.
    fn readable(fd: std::os::fd::BorrowedFd<'_>, ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, ms) == 1 }
    }

    /// A thread asleep on a channel that runs once at each [`Parked::run_once`] and ends when
    /// dropped (or at [`Parked::end`]).
    struct Parked {
        tid: i32,
        go: Option<std::sync::mpsc::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Parked {
        fn new() -> Self {
            let (tx, rx) = std::sync::mpsc::channel();
            let (go, go_rx) = std::sync::mpsc::channel::<()>();
            let thread = std::thread::spawn(move || {
                tx.send(crate::sched::gettid()).unwrap();
                while go_rx.recv().is_ok() {}
            });
            Parked {
                tid: rx.recv().unwrap(),
                go: Some(go),
                thread: Some(thread),
            }
        }

        fn run_once(&self) {
            self.go.as_ref().unwrap().send(()).unwrap();
        }

        /// Lets the thread end, and waits for it.
        fn end(&mut self) {
            self.go.take();
            if let Some(t) = self.thread.take() {
                t.join().unwrap();
            }
        }
    }

    impl Drop for Parked {
        fn drop(&mut self) {
            self.end();
        }
    }

    /// A thread asleep since before the watch opened wakes its poller at its first switch in,
    /// and after a clear at its next one; while it sleeps, nothing wakes the poller.
    #[test]
    fn a_sleeper_that_runs_wakes_the_poller() {
        let sleeper = Parked::new();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let w = match SwitchIn::open(sleeper.tid) {
            Ok(w) => w,
            Err(e) => {
                eprintln!("skipping: perf switch records unavailable here ({e})");
                return;
            }
        };
        assert!(!readable(w.fd(), 50), "asleep: no wake-up");
        sleeper.run_once();
        assert!(readable(w.fd(), 500), "the first run woke the poller");
        std::thread::sleep(std::time::Duration::from_millis(30));
        w.clear();
        // Drain the poll state left by the first run's records.
        let _ = readable(w.fd(), 0);
        assert!(!readable(w.fd(), 50), "asleep again: no wake-up");
        sleeper.run_once();
        assert!(readable(w.fd(), 500), "the second run woke the poller");
    }

    /// A parked thread's switch records and a watch, or `None` (with the reason printed).
    fn watched() -> Option<(Parked, SwitchIn, SwitchWatch)> {
        let sleeper = Parked::new();
        match (SwitchIn::open(sleeper.tid), SwitchWatch::new()) {
            (Ok(w), Ok(watch)) => Some((sleeper, w, watch)),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("skipping: perf switch records unavailable here ({e})");
                None
            }
        }
    }

    /// An armed thread wakes the watch when it runs, and shows it in its ring; disarmed, it
    /// wakes it no more.
    #[test]
    fn an_armed_thread_fires_once() {
        let Some((sleeper, w, watch)) = watched() else {
            return;
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        watch.arm(&w).unwrap();
        assert!(!readable(watch.fd(), 50), "asleep: the watch stays quiet");
        assert!(!w.ran());
        sleeper.run_once();
        assert!(readable(watch.fd(), 500), "its run woke the watch");
        assert!(w.ran());
        watch.disarm(&w);
        sleeper.run_once();
        assert!(!readable(watch.fd(), 50), "disarmed: quiet");
    }

    /// A watched thread that exits hangs its event up: the watch names it.
    #[test]
    fn an_exited_thread_hangs_up() {
        let Some((mut sleeper, w, watch)) = watched() else {
            return;
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        watch.arm(&w).unwrap();
        assert!(watch.hung_up().is_empty(), "alive and asleep");
        sleeper.end();
        assert!(readable(watch.fd(), 500), "the exit woke the watch");
        assert_eq!(watch.hung_up(), vec![sleeper.tid]);
        watch.disarm(&w);
        assert!(!readable(watch.fd(), 50), "gone from the watch: quiet");
    }
}
