//! Timers and wake-up counters as file descriptors (timerfd, eventfd), and waiting on them:
//! what the backstop threads sleep on. Safe wrappers with typed errors.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::LinuxError;

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// Reads (and so resets) an 8-byte counter; whether it had been set.
fn read_counter(fd: BorrowedFd<'_>) -> bool {
    let mut buf = [0u8; 8];
    // SAFETY: buf is 8 writable bytes, the size of a timerfd or eventfd counter.
    unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) == 8 }
}

/// A one-shot CLOCK_MONOTONIC timer (non-blocking, close-on-exec). It fires on the CPU that
/// armed it (the hrtimer is queued there).
#[derive(Debug)]
pub struct TimerFd(OwnedFd);

impl TimerFd {
    pub fn new() -> Result<TimerFd, LinuxError> {
        // SAFETY: plain syscall; the result is checked.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
            )
        };
        if fd < 0 {
            return Err(LinuxError::last("timerfd_create", 0));
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(TimerFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Arms it to fire once at CLOCK_MONOTONIC `at` (0 disarms).
    pub fn arm_at(&self, at: u64) -> Result<(), LinuxError> {
        let spec = libc::itimerspec {
            it_interval: timespec(0),
            it_value: timespec(at),
        };
        // SAFETY: spec is a valid itimerspec; the old value is not wanted.
        let r = unsafe {
            libc::timerfd_settime(
                self.0.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            return Err(LinuxError::last("timerfd_settime", 0));
        }
        Ok(())
    }

    /// Whether it fired since the last call (resets it).
    pub fn take_expired(&self) -> bool {
        read_counter(self.0.as_fd())
    }
}

impl AsFd for TimerFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// A wake-up counter (non-blocking, close-on-exec).
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> Result<EventFd, LinuxError> {
        // SAFETY: plain syscall; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(LinuxError::last("eventfd", 0));
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Adds 1 (wakes a waiter). A full counter (2^64 - 2) already wakes every waiter, so a
    /// failed write loses nothing.
    pub fn kick(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: 8 readable bytes, the size of an eventfd increment.
        unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    /// Whether it was kicked since the last call (resets it).
    pub fn take(&self) -> bool {
        read_counter(self.0.as_fd())
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// Waits until one of `fds` is readable, or `timeout_ns` passed (`None`: no timeout);
/// returns which are readable. A signal ends the wait early with none readable.
pub fn wait_readable(
    fds: &[BorrowedFd<'_>],
    timeout_ns: Option<u64>,
) -> Result<Vec<bool>, LinuxError> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|f| libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = timeout_ns.map(timespec);
    let tp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: pfds is a valid array of its length; tp is null or a valid timespec; no signal
    // mask change.
    let n = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            tp,
            std::ptr::null(),
        )
    };
    if n < 0 {
        if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(LinuxError::last("ppoll", 0));
    }
    Ok(pfds.iter().map(|p| p.revents & libc::POLLIN != 0).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kick_wakes_a_waiter_once() {
        let e = EventFd::new().unwrap();
        assert_eq!(
            wait_readable(&[e.as_fd()], Some(1_000_000)).unwrap(),
            vec![false]
        );
        e.kick();
        e.kick();
        assert_eq!(wait_readable(&[e.as_fd()], Some(0)).unwrap(), vec![true]);
        assert!(e.take());
        assert!(!e.take(), "both kicks taken at once");
    }

    #[test]
    fn a_timer_fires_at_its_time_and_not_once_disarmed() {
        let t = TimerFd::new().unwrap();
        let e = EventFd::new().unwrap();
        t.arm_at(crate::monotonic_ns() + 2_000_000).unwrap();
        let r = wait_readable(&[e.as_fd(), t.as_fd()], Some(5_000_000_000)).unwrap();
        assert_eq!(r, vec![false, true]);
        assert!(t.take_expired());
        t.arm_at(crate::monotonic_ns() + 2_000_000).unwrap();
        t.arm_at(0).unwrap();
        assert_eq!(
            wait_readable(&[t.as_fd()], Some(10_000_000)).unwrap(),
            vec![false]
        );
        assert!(!t.take_expired());
    }
}
