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
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

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
        // SAFETY: attr is a valid perf_event_attr of the stated size.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const RawPerfAttr,
                tid,
                -1i32,
                -1i32,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(LinuxError::last("perf_event_open", tid));
        }
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
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
}
