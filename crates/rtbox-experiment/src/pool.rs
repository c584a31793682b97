//! Running independent jobs on all cores, with a progress callback.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The number of worker threads to use when the caller says 0: every available core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `job(i)` for every i in 0..count on `threads` workers (0 = all cores) and returns the
/// results in index order. `progress(done, count)` is called after each job, from the worker
/// that finished it. Jobs are handed out one at a time, so uneven costs balance.
pub fn run_indexed<T: Send>(
    count: usize,
    threads: usize,
    job: impl Fn(usize) -> T + Sync,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Vec<T> {
    let threads = if threads == 0 {
        default_threads()
    } else {
        threads
    }
    .clamp(1, count.max(1));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..count).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    break;
                }
                let r = job(i);
                if let Ok(mut slots) = results.lock() {
                    slots[i] = Some(r);
                }
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                progress(d, count);
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every job index ran exactly once"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_order_whatever_the_thread_count() {
        for threads in [1, 2, 5] {
            let calls = AtomicUsize::new(0);
            let out = run_indexed(100, threads, |i| i * i, &|_, _| {
                calls.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(out, (0..100).map(|i| i * i).collect::<Vec<_>>());
            assert_eq!(calls.load(Ordering::Relaxed), 100);
        }
        assert!(run_indexed(0, 0, |i| i, &|_, _| {}).is_empty());
    }
}
