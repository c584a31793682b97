//! A thread's CPU-time clock, readable from any thread of the process (`pthread_getcpuclockid`):
//! the daemon's spin guard tells a loop that spins from one that sleeps by it.

/// The CPU clock of one thread of this process.
#[derive(Debug, Clone, Copy)]
pub struct CpuClock(libc::clockid_t);

impl CpuClock {
    /// The calling thread's clock.
    pub fn of_this_thread() -> Option<CpuClock> {
        let mut id: libc::clockid_t = 0;
        // SAFETY: pthread_self is always valid; id is a valid out pointer.
        let r = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
        (r == 0).then_some(CpuClock(id))
    }

    /// CPU time the thread has used, ns (`None` once it is gone).
    pub fn read(&self) -> Option<u64> {
        // SAFETY: an all-zero timespec is valid; clock_gettime fills it.
        let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
        // SAFETY: ts is a valid out pointer.
        let r = unsafe { libc::clock_gettime(self.0, &mut ts) };
        (r == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_thread_reads_a_busy_threads_clock_going_up() {
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            tx.send(CpuClock::of_this_thread().unwrap()).unwrap();
            let t0 = std::time::Instant::now();
            while t0.elapsed() < std::time::Duration::from_millis(300) {
                std::hint::spin_loop();
            }
        });
        let c = rx.recv().unwrap();
        let a = c.read().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let b = c.read().unwrap();
        t.join().unwrap();
        assert!(
            b > a + 1_000_000,
            "a busy thread's clock moved {} ns",
            b - a
        );
    }
}
