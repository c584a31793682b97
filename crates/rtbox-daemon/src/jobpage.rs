//! The per-task job page: one 4 KiB shared-memory page through which a periodic task (the
//! periodic-task API, crates/rtbox-task) tells the daemon about every job without a socket
//! request per job.
//!
//! The daemon creates the page as a file in its job directory (`STATE.jobs/<tid>` beside its
//! state file, mode 0600, owned by the task's user) when the task enters, and both map it
//! shared. Every field is a naturally aligned little-endian `u64` accessed as an atomic; each
//! field has one writer:
//!
//! | word | field | writer |
//! |---|---|---|
//! | 0 | magic `RTBOXJP1` | daemon, at creation |
//! | 1 | layout version (1) | daemon |
//! | 2 | tid of the task | daemon |
//! | 3, 4, 5 | declared WCET, period, relative deadline (ns; 0 until `run`) | daemon, at `run` |
//! | 6 | state: 0 entered, 1 running, 2 exited | task |
//! | 7 | first release (CLOCK_MONOTONIC ns) | task |
//! | 8 | jobs released (a job in progress counts; `exit` withdraws an unstarted one) | task |
//! | 9 | jobs completed | task |
//! | 10 | deadline misses (completion after release + D) | task |
//! | 11 | WCET overruns (job CPU time above the declared WCET) | task |
//! | 12 | largest response time (completion - release) | task |
//! | 13 | largest job CPU time | task |
//! | 14 | largest release latency (start - release) | task |
//! | 15 | total job CPU time | task |
//! | 32.. | ring of [`RING`] job records, 5 words each | task |
//!
//! A ring record is `seq, release, start, end, exec` for job `seq - 1` (jobs counted from 0),
//! written at the job's completion into slot `job % RING` under a per-record seqlock: the task
//! stores `seq = 0`, then the fields, then `seq = job + 1` (release order); the daemon reads
//! `seq`, the fields, and `seq` again, and keeps the record only if both reads name the job it
//! expects. The counters are exact whatever the daemon misses; the ring gives it the per-job
//! figures (response time, release latency) of the last [`RING`] jobs, which it reads at its
//! scans (every few ms), so at periods of 100 us or more it sees every job.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{fence, AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};

/// Size of a job page in bytes.
pub const PAGE_BYTES: usize = 4096;
/// `RTBOXJP1` as a little-endian word.
pub const MAGIC: u64 = u64::from_le_bytes(*b"RTBOXJP1");
pub const VERSION: u64 = 1;
/// Job records kept in the ring.
pub const RING: u64 = 64;

const W_MAGIC: usize = 0;
const W_VERSION: usize = 1;
const W_TID: usize = 2;
const W_WCET: usize = 3;
const W_PERIOD: usize = 4;
const W_DEADLINE: usize = 5;
const W_STATE: usize = 6;
const W_FIRST_RELEASE: usize = 7;
const W_RELEASED: usize = 8;
const W_COMPLETED: usize = 9;
const W_MISSES: usize = 10;
const W_OVERRUNS: usize = 11;
const W_MAX_RESPONSE: usize = 12;
const W_MAX_EXEC: usize = 13;
const W_MAX_LATENCY: usize = 14;
const W_TOTAL_EXEC: usize = 15;
const W_RING: usize = 32;
const RECORD_WORDS: usize = 5;

const _: () = assert!(W_RING * 8 + RING as usize * RECORD_WORDS * 8 <= PAGE_BYTES);

/// What the task declared at `run` (integer nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Declared {
    pub wcet: u64,
    pub period: u64,
    pub deadline: u64,
}

/// The task's life as the page shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageState {
    Entered,
    Running,
    Exited,
}

impl PageState {
    fn word(self) -> u64 {
        match self {
            PageState::Entered => 0,
            PageState::Running => 1,
            PageState::Exited => 2,
        }
    }

    fn from_word(w: u64) -> PageState {
        match w {
            1 => PageState::Running,
            2 => PageState::Exited,
            _ => PageState::Entered,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PageState::Entered => "entered",
            PageState::Running => "running",
            PageState::Exited => "exited",
        }
    }
}

/// One finished job (CLOCK_MONOTONIC ns; `exec` is the task's own thread CPU time in the job).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JobRecord {
    pub job: u64,
    pub release: u64,
    pub start: u64,
    pub end: u64,
    pub exec: u64,
}

impl JobRecord {
    /// Response time: completion minus the job's nominal release.
    pub fn response(&self) -> u64 {
        self.end.saturating_sub(self.release)
    }

    /// Release latency (the jitter of the release): when the job started running after its
    /// sleep, minus its nominal release.
    pub fn latency(&self) -> u64 {
        self.start.saturating_sub(self.release)
    }

    /// A job misses its deadline when it completes after its release plus the relative
    /// deadline D (completion exactly at the deadline is in time).
    pub fn missed(&self, deadline: u64) -> bool {
        self.end > self.release.saturating_add(deadline)
    }

    /// A job overruns when its own CPU time exceeds the declared WCET.
    pub fn overran(&self, wcet: u64) -> bool {
        self.exec > wcet
    }
}

/// The task's counters as read from the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct PageCounters {
    pub first_release: u64,
    pub released: u64,
    pub completed: u64,
    pub misses: u64,
    pub overruns: u64,
    pub max_response: u64,
    pub max_exec: u64,
    pub max_latency: u64,
    pub total_exec: u64,
}

/// A mapped job page.
pub struct JobPage {
    map: MmapRaw,
}

impl std::fmt::Debug for JobPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobPage").field("tid", &self.tid()).finish()
    }
}

fn bad(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_string())
}

impl JobPage {
    /// Daemon side: create the page file (refused if it exists), owned by `uid`, and map it.
    pub fn create(path: &Path, tid: i32, uid: u32) -> io::Result<JobPage> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        file.set_len(PAGE_BYTES as u64)?;
        std::os::unix::fs::fchown(&file, Some(uid), None)?;
        let page = JobPage::map(&file)?;
        page.w(W_TID).store(tid as u64, Ordering::Relaxed);
        page.w(W_VERSION).store(VERSION, Ordering::Relaxed);
        page.w(W_MAGIC).store(MAGIC, Ordering::Release);
        Ok(page)
    }

    /// Task side: map the page the daemon created; refuses a file that is not a job page of
    /// this layout.
    pub fn open(path: &Path) -> io::Result<JobPage> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        if file.metadata()?.len() < PAGE_BYTES as u64 {
            return Err(bad("job page is shorter than a page"));
        }
        let page = JobPage::map(&file)?;
        if page.w(W_MAGIC).load(Ordering::Acquire) != MAGIC {
            return Err(bad("not an rtbox job page (magic)"));
        }
        if page.w(W_VERSION).load(Ordering::Relaxed) != VERSION {
            return Err(bad("job page layout version differs from this library's"));
        }
        Ok(page)
    }

    fn map(file: &File) -> io::Result<JobPage> {
        let map = MmapOptions::new().len(PAGE_BYTES).map_raw(file)?;
        Ok(JobPage { map })
    }

    fn w(&self, i: usize) -> &AtomicU64 {
        debug_assert!((i + 1) * 8 <= PAGE_BYTES);
        // SAFETY: the mapping is PAGE_BYTES long, page aligned (so every word is 8-aligned) and
        // lives as long as `self`; the page is only ever accessed through atomics, by this and
        // other processes, so shared mutation is sound.
        unsafe { &*(self.map.as_mut_ptr().add(i * 8) as *const AtomicU64) }
    }

    pub fn tid(&self) -> i32 {
        self.w(W_TID).load(Ordering::Relaxed) as i32
    }

    /// Daemon side: record the declaration it accepted.
    pub fn declare(&self, d: Declared) {
        self.w(W_WCET).store(d.wcet, Ordering::Relaxed);
        self.w(W_PERIOD).store(d.period, Ordering::Relaxed);
        self.w(W_DEADLINE).store(d.deadline, Ordering::Release);
    }

    pub fn declared(&self) -> Declared {
        Declared {
            deadline: self.w(W_DEADLINE).load(Ordering::Acquire),
            wcet: self.w(W_WCET).load(Ordering::Relaxed),
            period: self.w(W_PERIOD).load(Ordering::Relaxed),
        }
    }

    pub fn state(&self) -> PageState {
        PageState::from_word(self.w(W_STATE).load(Ordering::Acquire))
    }

    /// Task side.
    pub fn set_state(&self, s: PageState) {
        self.w(W_STATE).store(s.word(), Ordering::Release);
    }

    /// Task side: the first job's release.
    pub fn start(&self, first_release: u64) {
        self.w(W_FIRST_RELEASE)
            .store(first_release, Ordering::Relaxed);
    }

    /// Task side: a job was released and started running `latency` after its release.
    pub fn released(&self, latency: u64) {
        self.w(W_MAX_LATENCY).fetch_max(latency, Ordering::Relaxed);
        self.w(W_RELEASED).fetch_add(1, Ordering::Release);
    }

    /// Task side, at `exit`: the job released last never ran (the seed's loop ends with a
    /// wait), so it is not counted.
    pub fn withdraw(&self) {
        let w = self.w(W_RELEASED);
        let released = w.load(Ordering::Relaxed);
        debug_assert!(released > self.w(W_COMPLETED).load(Ordering::Relaxed));
        w.store(released.saturating_sub(1), Ordering::Release);
    }

    /// Task side: job `r.job` completed. The ring record first (seqlock), then the counters,
    /// `completed` last, so a reader that sees `completed = n` finds job n-1 in the ring.
    pub fn completed(&self, r: &JobRecord, d: Declared) {
        let base = W_RING + (r.job % RING) as usize * RECORD_WORDS;
        let seq = self.w(base);
        seq.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        self.w(base + 1).store(r.release, Ordering::Relaxed);
        self.w(base + 2).store(r.start, Ordering::Relaxed);
        self.w(base + 3).store(r.end, Ordering::Relaxed);
        self.w(base + 4).store(r.exec, Ordering::Relaxed);
        seq.store(r.job + 1, Ordering::Release);
        if r.missed(d.deadline) {
            self.w(W_MISSES).fetch_add(1, Ordering::Relaxed);
        }
        if r.overran(d.wcet) {
            self.w(W_OVERRUNS).fetch_add(1, Ordering::Relaxed);
        }
        self.w(W_MAX_RESPONSE)
            .fetch_max(r.response(), Ordering::Relaxed);
        self.w(W_MAX_EXEC).fetch_max(r.exec, Ordering::Relaxed);
        self.w(W_TOTAL_EXEC).fetch_add(r.exec, Ordering::Relaxed);
        self.w(W_COMPLETED).fetch_add(1, Ordering::Release);
    }

    /// Daemon side: the counters (each exact; read one after the other).
    pub fn counters(&self) -> PageCounters {
        PageCounters {
            completed: self.w(W_COMPLETED).load(Ordering::Acquire),
            released: self.w(W_RELEASED).load(Ordering::Acquire),
            first_release: self.w(W_FIRST_RELEASE).load(Ordering::Relaxed),
            misses: self.w(W_MISSES).load(Ordering::Relaxed),
            overruns: self.w(W_OVERRUNS).load(Ordering::Relaxed),
            max_response: self.w(W_MAX_RESPONSE).load(Ordering::Relaxed),
            max_exec: self.w(W_MAX_EXEC).load(Ordering::Relaxed),
            max_latency: self.w(W_MAX_LATENCY).load(Ordering::Relaxed),
            total_exec: self.w(W_TOTAL_EXEC).load(Ordering::Relaxed),
        }
    }

    /// Daemon side: job `job`'s record if the ring still holds it and no write overlapped the
    /// read.
    pub fn record(&self, job: u64) -> Option<JobRecord> {
        let base = W_RING + (job % RING) as usize * RECORD_WORDS;
        let seq = self.w(base);
        if seq.load(Ordering::Acquire) != job + 1 {
            return None;
        }
        let r = JobRecord {
            job,
            release: self.w(base + 1).load(Ordering::Relaxed),
            start: self.w(base + 2).load(Ordering::Relaxed),
            end: self.w(base + 3).load(Ordering::Relaxed),
            exec: self.w(base + 4).load(Ordering::Relaxed),
        };
        fence(Ordering::Acquire);
        (seq.load(Ordering::Relaxed) == job + 1).then_some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(tag: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("rtbox-jobpage-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        p
    }

    fn me() -> u32 {
        // SAFETY: getuid has no preconditions.
        unsafe { libc::getuid() }
    }

    #[test]
    fn task_and_daemon_see_the_same_jobs_through_two_mappings() {
        let path = tmp("two");
        let daemon = JobPage::create(&path, 42, me()).unwrap();
        let task = JobPage::open(&path).unwrap();
        assert_eq!(task.tid(), 42);
        let d = Declared {
            wcet: 2_000_000,
            period: 10_000_000,
            deadline: 10_000_000,
        };
        daemon.declare(d);
        assert_eq!(task.declared(), d);
        task.set_state(PageState::Running);
        task.start(1_000);
        for job in 0..100u64 {
            let release = 1_000 + job * d.period;
            task.released(5 + job);
            // Job 7 finishes late, job 9 runs over its WCET.
            let end = release + if job == 7 { 11_000_000 } else { 2_500_000 };
            let exec = if job == 9 { 2_100_000 } else { 1_900_000 };
            task.completed(
                &JobRecord {
                    job,
                    release,
                    start: release + 5 + job,
                    end,
                    exec,
                },
                d,
            );
        }
        assert_eq!(daemon.state(), PageState::Running);
        let c = daemon.counters();
        assert_eq!((c.released, c.completed), (100, 100));
        assert_eq!((c.misses, c.overruns), (1, 1));
        assert_eq!(c.max_response, 11_000_000);
        assert_eq!(c.max_latency, 104);
        assert_eq!(c.max_exec, 2_100_000);
        // The ring holds the last RING jobs only.
        assert!(daemon.record(100 - RING - 1).is_none());
        let r = daemon.record(99).unwrap();
        assert_eq!(r.latency(), 104);
        assert_eq!(r.response(), 2_500_000);
        assert!(daemon.record(100).is_none());
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_job_exactly_at_its_deadline_is_in_time() {
        let r = JobRecord {
            job: 0,
            release: 100,
            start: 100,
            end: 200,
            exec: 50,
        };
        assert!(!r.missed(100));
        assert!(r.missed(99));
        assert!(!r.overran(50));
        assert!(r.overran(49));
    }

    #[test]
    fn a_file_that_is_not_a_page_is_refused_and_a_page_is_not_recreated() {
        let path = tmp("bad");
        std::fs::write(&path, vec![0u8; PAGE_BYTES]).unwrap();
        assert_eq!(
            JobPage::open(&path).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        assert!(JobPage::create(&path, 1, me()).is_err());
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn withdraw_takes_back_the_unstarted_last_release() {
        let path = tmp("withdraw");
        let p = JobPage::create(&path, 1, me()).unwrap();
        p.released(0);
        p.completed(
            &JobRecord {
                job: 0,
                ..Default::default()
            },
            Declared::default(),
        );
        p.released(0);
        p.withdraw();
        assert_eq!(p.counters().released, 1);
        let _ = std::fs::remove_file(&path);
    }
}
