//! A thread's CPU-time clock, readable from any thread of the process (`pthread_getcpuclockid`),
//! and an alarm on it: the daemon's spin guard sleeps until the loop has used a given amount of
//! CPU, so it costs nothing while the loop is cheap (a periodic look at the clock cost ~50 us of
//! CPU per wake-up on a VM).

use nix::sys::pthread::{pthread_kill, pthread_self, Pthread};
use nix::sys::signal::{SigEvent, SigSet, SigevNotify, Signal};
use nix::sys::time::TimeSpec;
use nix::sys::timer::{Expiration, Timer, TimerSetTimeFlags};
use nix::time::ClockId;

use crate::error::LinuxError;

/// The signal a [`CpuAlarm`] is delivered by, to its waiting thread only (which blocks it; the
/// daemon uses SIGUSR2 for nothing else).
const ALARM_SIGNAL: Signal = Signal::SIGUSR2;

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

/// A one-shot alarm on another thread's CPU clock, delivered to the thread that made it.
///
/// POSIX CPU timers (`timer_create` on a thread's CPU clock, `SIGEV_THREAD_ID`) are checked by
/// the kernel at the watched thread's ticks, so the alarm goes off within a tick of the CPU
/// time being used, and the waiting thread sleeps until then.
pub struct CpuAlarm {
    timer: Timer,
    set: SigSet,
    waiter: Pthread,
}

impl CpuAlarm {
    /// An alarm on `clock`, delivered to (and waited for by) the calling thread, which blocks
    /// the alarm's signal from now on.
    pub fn new(clock: CpuClock) -> Result<CpuAlarm, LinuxError> {
        let mut set = SigSet::empty();
        set.add(ALARM_SIGNAL);
        set.thread_block().map_err(|e| sys("pthread_sigmask", e))?;
        let event = SigEvent::new(SigevNotify::SigevThreadId {
            signal: ALARM_SIGNAL,
            thread_id: crate::sched::gettid(),
            si_value: 0,
        });
        let timer =
            Timer::new(ClockId::from_raw(clock.0), event).map_err(|e| sys("timer_create", e))?;
        Ok(CpuAlarm {
            timer,
            set,
            waiter: pthread_self(),
        })
    }

    /// Goes off once the watched thread has used `cpu_ns` more of CPU (replaces any earlier
    /// setting).
    pub fn arm_after(&mut self, cpu_ns: u64) -> Result<(), LinuxError> {
        let after = TimeSpec::from_duration(std::time::Duration::from_nanos(cpu_ns.max(1)));
        self.timer
            .set(Expiration::OneShot(after), TimerSetTimeFlags::empty())
            .map_err(|e| sys("timer_settime", e))
    }

    /// Sleeps until the alarm goes off or another thread [`CpuAlarm::waker`]'s it.
    pub fn wait(&self) -> Result<(), LinuxError> {
        self.set.wait().map(drop).map_err(|e| sys("sigwait", e))
    }

    /// What another thread uses to end a [`CpuAlarm::wait`] early (to stop the waiter).
    pub fn waker(&self) -> AlarmWaker {
        AlarmWaker(self.waiter)
    }
}

/// Ends the wait of a [`CpuAlarm`]'s thread.
#[derive(Debug, Clone, Copy)]
pub struct AlarmWaker(Pthread);

impl AlarmWaker {
    pub fn wake(&self) -> Result<(), LinuxError> {
        pthread_kill(self.0, ALARM_SIGNAL).map_err(|e| sys("pthread_kill", e))
    }
}

fn sys(op: &'static str, e: nix::errno::Errno) -> LinuxError {
    LinuxError::Syscall {
        op,
        tid: 0,
        errno: e as i32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The alarm sleeps while the watched thread sleeps, and goes off once it has used the CPU.
    #[test]
    fn an_alarm_goes_off_only_after_the_watched_thread_used_its_cpu() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let busy = std::thread::spawn(move || {
            tx.send(CpuClock::of_this_thread().unwrap()).unwrap();
            // Sleeps first, then spins until it has used 40 ms of CPU (however busy the
            // machine), twice what the alarm waits for.
            go_rx.recv().unwrap();
            let me = CpuClock::of_this_thread().unwrap();
            let t0 = me.read().unwrap();
            while me.read().unwrap() - t0 < 40_000_000 {
                std::hint::spin_loop();
            }
        });
        let clock = rx.recv().unwrap();
        let mut alarm = CpuAlarm::new(clock).expect("alarm");
        alarm.arm_after(20_000_000).expect("arm");
        let before = clock.read().unwrap();
        // 100 ms asleep: the watched thread used no CPU, so the signal is not pending.
        std::thread::sleep(std::time::Duration::from_millis(100));
        // SAFETY: an all-zero sigset is valid; sigpending fills it, sigismember reads it.
        let went_off = unsafe {
            let mut pending: libc::sigset_t = std::mem::zeroed();
            libc::sigpending(&mut pending);
            libc::sigismember(&pending, ALARM_SIGNAL as i32) == 1
        };
        assert!(!went_off, "went off while the thread slept");
        go_tx.send(()).unwrap();
        alarm.wait().expect("wait");
        let used = clock.read().unwrap() - before;
        assert!(used >= 20_000_000, "went off after {used} ns of CPU");
        busy.join().unwrap();
        // A waker ends a wait without the alarm.
        let waker = alarm.waker();
        std::thread::spawn(move || waker.wake().unwrap())
            .join()
            .unwrap();
        alarm.wait().expect("woken");
    }

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
