//! A mutex with priority inheritance (a POSIX `PTHREAD_PRIO_INHERIT` mutex, a PI futex in the
//! kernel): while a higher-priority thread waits for it, the holder runs at the waiter's
//! priority.
//!
//! Why not `std::sync::Mutex`: its futex has no priority inheritance. The per-CPU backstop
//! threads (SCHED_FIFO 97) share their plans with the enforcement loop under a lock, and the
//! loop thaws members while it holds that lock. A loop not above the member it just thawed (a
//! loop driven from a normal thread) was preempted there by that member, and the backstop
//! threads then waited on the lock while the member ran on unguarded: measured with an
//! unmanaged hog per CPU, a 20/100 ms box ran 156 ms in a row. With inheritance the waiting
//! backstop lifts the holder above the members, it finishes at once, and the backstop acts.
//! No crate on hand offers a PI mutex; this is the plain pthread one.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

/// A priority-inheriting mutex around a `T`.
pub struct PiMutex<T> {
    /// Boxed: a pthread mutex must not move once initialised.
    raw: Box<UnsafeCell<libc::pthread_mutex_t>>,
    data: UnsafeCell<T>,
}

// SAFETY: the data is only reached through a guard, which holds the mutex.
unsafe impl<T: Send> Send for PiMutex<T> {}
// SAFETY: as above: one guard at a time.
unsafe impl<T: Send> Sync for PiMutex<T> {}

impl<T> PiMutex<T> {
    pub fn new(value: T) -> Self {
        let raw = Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
        // SAFETY: attr is initialised before use and destroyed after; the mutex is initialised
        // in place (boxed, never moved) with it. Both calls only fail for invalid arguments or
        // without memory; a failed protocol leaves a plain mutex, still correct, without PI.
        unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            libc::pthread_mutexattr_init(&mut attr);
            libc::pthread_mutexattr_setprotocol(&mut attr, libc::PTHREAD_PRIO_INHERIT);
            libc::pthread_mutex_init(raw.get(), &attr);
            libc::pthread_mutexattr_destroy(&mut attr);
        }
        PiMutex {
            raw,
            data: UnsafeCell::new(value),
        }
    }

    /// Waits for the mutex (lifting its holder to this thread's priority meanwhile).
    pub fn lock(&self) -> PiGuard<'_, T> {
        // SAFETY: the mutex was initialised in `new` and lives as long as `self`.
        let r = unsafe { libc::pthread_mutex_lock(self.raw.get()) };
        // Only EDEADLK (relocking from the holder) or EINVAL could come back; neither can
        // happen through guards.
        assert_eq!(r, 0, "pthread_mutex_lock: {r}");
        PiGuard {
            m: self,
            _here: std::marker::PhantomData,
        }
    }
}

impl<T> Drop for PiMutex<T> {
    fn drop(&mut self) {
        // SAFETY: no guard can outlive `self`, so the mutex is unlocked.
        unsafe { libc::pthread_mutex_destroy(self.raw.get()) };
    }
}

/// Holds a [`PiMutex`]; unlocks it when dropped.
pub struct PiGuard<'a, T> {
    m: &'a PiMutex<T>,
    /// Not Send: a PI mutex must be unlocked by the thread that locked it.
    _here: std::marker::PhantomData<*const ()>,
}

impl<T> Deref for PiGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the mutex.
        unsafe { &*self.m.data.get() }
    }
}

impl<T> DerefMut for PiGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the mutex, and `&mut self` makes this the only reference.
        unsafe { &mut *self.m.data.get() }
    }
}

impl<T> Drop for PiGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this thread holds the mutex (a PI mutex must be unlocked by its owner; the
        // guard is not Send, so it is dropped on the locking thread).
        unsafe { libc::pthread_mutex_unlock(self.m.raw.get()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn guards_exclude_each_other() {
        let m = Arc::new(PiMutex::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        let mut g = m.lock();
                        let v = *g;
                        std::hint::black_box(&v);
                        *g = v + 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*m.lock(), 40_000);
    }

    /// The point of the type: a SCHED_FIFO waiter lifts a normal holder that a busier FIFO
    /// thread keeps off its CPU. Holder and hog share CPU 0; the holder takes the lock, then
    /// the hog (FIFO 10) starts spinning on CPU 0; the waiter (FIFO 20, on the other CPU)
    /// waits for the lock. Without inheritance the holder would wait for the hog to stop
    /// (here: 1 s); with it, the holder runs at 20 above the hog and lets go at once.
    #[test]
    fn a_fifo_waiter_lifts_a_normal_holder_above_a_fifo_hog() {
        use crate::sched::{self, SchedAttr};
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::time::{Duration, Instant};
        if !crate::is_root() {
            eprintln!("skipped: needs root (SCHED_FIFO threads)");
            return;
        }
        if sched::online_cpus() < 2 {
            eprintln!("skipped: needs 2 CPUs");
            return;
        }
        let m = Arc::new(PiMutex::new(()));
        let spin = Arc::new(AtomicBool::new(true));
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let holder = {
            let (m, spin) = (m.clone(), spin.clone());
            std::thread::spawn(move || {
                sched::set_affinity(0, &[0]).unwrap();
                let g = m.lock();
                held_tx.send(()).unwrap();
                // Busy until the hog has taken CPU 0, then release: with the hog at FIFO 10
                // this only gets further when lifted (or when the hog stops).
                let t0 = Instant::now();
                while spin.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(5) {
                    std::hint::spin_loop();
                    if t0.elapsed() > Duration::from_millis(50) {
                        break;
                    }
                }
                drop(g);
            })
        };
        held_rx.recv().unwrap();
        let hog = {
            let spin = spin.clone();
            std::thread::spawn(move || {
                sched::set_affinity(0, &[0]).unwrap();
                sched::set_attr(0, &SchedAttr::fifo(10)).unwrap();
                let t0 = Instant::now();
                while spin.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(1) {
                    std::hint::spin_loop();
                }
            })
        };
        std::thread::sleep(Duration::from_millis(10));
        let waiter = {
            let m = m.clone();
            std::thread::spawn(move || {
                sched::set_affinity(0, &[1]).unwrap();
                sched::set_attr(0, &SchedAttr::fifo(20)).unwrap();
                let t0 = Instant::now();
                drop(m.lock());
                t0.elapsed()
            })
        };
        let waited = waiter.join().unwrap();
        spin.store(false, Ordering::Relaxed);
        hog.join().unwrap();
        holder.join().unwrap();
        eprintln!(
            "waited {:.2} ms for a lifted holder",
            waited.as_secs_f64() * 1e3
        );
        // The holder needs at most ~50 ms of CPU once lifted; the hog alone would hold it 1 s.
        assert!(waited < Duration::from_millis(500), "waited {waited:?}");
    }
}
