//! Threads and processes through /proc.

use std::fs;
use std::path::PathBuf;

use crate::LinuxError;

/// The fields of `/proc/<tid>/stat` rtbox uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// R running/runnable, S sleeping, D disk sleep, T stopped, Z zombie, ...
    pub state: char,
    pub ppid: i32,
    /// Start time in clock ticks since boot: (tid, starttime) names a thread uniquely even when
    /// tids are reused.
    pub starttime: u64,
    /// The kernel's `PF_*` flags of the task.
    pub flags: u64,
}

/// `PF_KTHREAD` in a task's flags (include/linux/sched.h).
pub const PF_KTHREAD: u64 = 0x0020_0000;

impl Stat {
    /// Whether the thread wants a CPU now.
    pub fn runnable(&self) -> bool {
        self.state == 'R'
    }

    /// Whether it is a kernel thread.
    pub fn kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }
}

/// Parse the content of a stat file (the command name may contain spaces and parentheses).
pub fn parse_stat(text: &str) -> Option<Stat> {
    let close = text.rfind(')')?;
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // rest[0] = state (field 3), rest[1] = ppid (4), rest[6] = flags (9), rest[19] = starttime
    // (22).
    Some(Stat {
        state: rest.first()?.chars().next()?,
        ppid: rest.get(1)?.parse().ok()?,
        starttime: rest.get(19)?.parse().ok()?,
        flags: rest.get(6)?.parse().ok()?,
    })
}

/// `/proc/<tid>/stat` of any thread (threads are reachable by tid at the top of /proc).
pub fn stat(tid: i32) -> Result<Stat, LinuxError> {
    let path = PathBuf::from(format!("/proc/{tid}/stat"));
    let text = fs::read_to_string(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            LinuxError::NoSuchThread(tid)
        } else {
            LinuxError::io(&path, e)
        }
    })?;
    parse_stat(&text).ok_or(LinuxError::Parse {
        path,
        what: "stat fields".into(),
    })
}

/// A /proc file of one thread kept open and re-read in place: one `pread` without open/close,
/// path lookup or allocation is several times cheaper than reading the file by name. The
/// descriptor names the thread itself, so a reused tid is never mistaken for it (reads fail once
/// the thread is gone).
#[derive(Debug)]
struct Reread<const N: usize> {
    file: fs::File,
    buf: [u8; N],
}

impl<const N: usize> Reread<N> {
    fn open(tid: i32, name: &str) -> Result<Self, LinuxError> {
        let path = PathBuf::from(format!("/proc/{tid}/{name}"));
        let file = fs::File::open(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                LinuxError::NoSuchThread(tid)
            } else {
                LinuxError::io(&path, e)
            }
        })?;
        Ok(Reread { file, buf: [0; N] })
    }

    fn read(&mut self) -> Option<&[u8]> {
        use std::os::unix::fs::FileExt;
        let n = self.file.read_at(&mut self.buf, 0).ok()?;
        Some(&self.buf[..n])
    }
}

/// `/proc/<tid>/stat`, kept open: the loop polls each member's state every step.
#[derive(Debug)]
pub struct StatFile(Reread<512>);

impl StatFile {
    pub fn open(tid: i32) -> Result<StatFile, LinuxError> {
        Reread::open(tid, "stat").map(StatFile)
    }

    /// The thread's state letter now (field 3), `None` once the thread is gone.
    pub fn state(&mut self) -> Option<char> {
        let text = self.0.read()?;
        // The command name may contain ')': the state follows the last one.
        let close = text.iter().rposition(|&b| b == b')')?;
        text.get(close + 2).map(|&b| b as char)
    }

    /// Whether the thread wants a CPU now (false once it is gone).
    pub fn runnable(&mut self) -> bool {
        self.state() == Some('R')
    }

    /// State, RT priority and policy in one read, `None` once the thread is gone.
    pub fn sample(&mut self) -> Option<StatSample> {
        parse_sample(self.0.read()?)
    }
}

/// What one read of `/proc/<tid>/stat` tells the loop: the state letter (field 3) and the
/// thread's own scheduling class, `rt_priority` (field 40) and `policy` (field 41), so a
/// policy change is seen at the next step without a `sched_getattr` per member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatSample {
    pub state: char,
    /// `None` when the read was cut short before field 41.
    pub policy: Option<(u32, u32)>,
}

impl StatSample {
    pub fn runnable(&self) -> bool {
        self.state == 'R'
    }
}

/// Parses a stat line: fields after the last ')' (the command name may contain one) start at
/// field 3.
fn parse_sample(text: &[u8]) -> Option<StatSample> {
    let close = text.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(text.get(close + 2..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    // Field 3 was taken; fields 40 and 41 are the 37th and 38th after it.
    let mut tail = fields.skip(36);
    let policy = match (tail.next(), tail.next()) {
        (Some(prio), Some(pol)) => prio.parse().ok().zip(pol.parse().ok()).map(|(p, q)| (q, p)),
        _ => None,
    };
    Some(StatSample { state, policy })
}

/// `/proc/<tid>/schedstat`, kept open: the kernel's own CPU time of the thread
/// (`se.sum_exec_runtime`). It advances at context switches and ticks only, so it is exact only
/// while the thread is off CPU; unlike the perf task clock it excludes time stolen from the
/// vCPU by the host (with paravirt steal accounting) and, with IRQ time accounting, interrupts.
#[derive(Debug)]
pub struct SchedstatFile(Reread<128>);

impl SchedstatFile {
    pub fn open(tid: i32) -> Result<SchedstatFile, LinuxError> {
        Reread::open(tid, "schedstat").map(SchedstatFile)
    }

    /// `sum_exec_runtime` in ns, `None` once the thread is gone.
    pub fn sum_exec_runtime(&mut self) -> Option<u64> {
        let text = self.0.read()?;
        let end = text.iter().position(|b| !b.is_ascii_digit())?;
        std::str::from_utf8(&text[..end]).ok()?.parse().ok()
    }

    /// How many times the thread was switched in (the third field), `None` once it is gone.
    pub fn switch_ins(&mut self) -> Option<u64> {
        let text = self.0.read()?;
        std::str::from_utf8(text)
            .ok()?
            .split_whitespace()
            .nth(2)?
            .parse()
            .ok()
    }
}

/// The thread group (process) id of a thread.
pub fn tgid(tid: i32) -> Result<i32, LinuxError> {
    let path = PathBuf::from(format!("/proc/{tid}/status"));
    let text = fs::read_to_string(&path).map_err(|_| LinuxError::NoSuchThread(tid))?;
    text.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(LinuxError::Parse {
            path,
            what: "Tgid".into(),
        })
}

/// The real and saved user ids of a process: whom the kernel lets signal it (besides root).
pub fn signal_uids(pid: i32) -> Result<[u32; 2], LinuxError> {
    let path = PathBuf::from(format!("/proc/{pid}/status"));
    let text = fs::read_to_string(&path).map_err(|_| LinuxError::NoSuchThread(pid))?;
    let ids: Vec<u32> = text
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .map(|v| {
            v.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    match ids[..] {
        [real, _, saved, ..] => Ok([real, saved]),
        _ => Err(LinuxError::Parse {
            path,
            what: "Uid".into(),
        }),
    }
}

fn numeric_entries(dir: &str) -> Result<Vec<i32>, LinuxError> {
    let rd = fs::read_dir(dir).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            LinuxError::NoSuchThread(0)
        } else {
            LinuxError::io(dir, e)
        }
    })?;
    let mut out: Vec<i32> = rd
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    out.sort_unstable();
    Ok(out)
}

/// All thread ids of process `pid`, ascending.
pub fn threads_of(pid: i32) -> Result<Vec<i32>, LinuxError> {
    numeric_entries(&format!("/proc/{pid}/task")).map_err(|e| match e {
        LinuxError::NoSuchThread(_) => LinuxError::NoSuchThread(pid),
        e => e,
    })
}

/// All process ids, ascending.
pub fn all_pids() -> Result<Vec<i32>, LinuxError> {
    numeric_entries("/proc")
}

/// Child processes forked by thread `tid` (`/proc/TID/task/TID/children`, needs
/// CONFIG_PROC_CHILDREN). `Ok(None)` when the kernel lacks the file, so callers can fall back
/// to scanning all of /proc. Reading one small file per member is far cheaper than listing and
/// parsing every process of the machine.
pub fn children(tid: i32) -> Result<Option<Vec<i32>>, LinuxError> {
    match std::fs::read_to_string(format!("/proc/{tid}/task/{tid}/children")) {
        Ok(text) => Ok(Some(
            text.split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect(),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::path::Path::new(&format!("/proc/{tid}")).exists() {
                Ok(None)
            } else {
                Err(LinuxError::NoSuchThread(tid))
            }
        }
        Err(_) => Err(LinuxError::NoSuchThread(tid)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_sample_reads_state_and_the_threads_own_policy() {
        // migration/0 on this kernel: SCHED_FIFO (1) at RT priority 99.
        let line = b"18 (mi (g) r) S 2 0 0 0 -1 69238848 0 0 0 0 0 0 0 0 -100 0 1 0 14 0 0 \
18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 0 99 1 0 0 0 0 0 0 0 0 0 0 0";
        let s = parse_sample(line).unwrap();
        assert_eq!(s.state, 'S');
        assert_eq!(s.policy, Some((1, 99)));
        let cut = b"18 (x) R 2 0 0 0";
        assert_eq!(parse_sample(cut).unwrap().policy, None);
        assert!(parse_sample(cut).unwrap().runnable());
    }

    #[test]
    fn stat_parses_names_with_spaces_and_parens() {
        let s = "42 (a (b) c) R 7 42 42 0 -1 4194560 0 0 0 0 1 2 0 0 20 0 3 0 12345 0 0";
        let st = parse_stat(s).unwrap();
        assert_eq!(st.state, 'R');
        assert_eq!(st.ppid, 7);
        assert_eq!(st.starttime, 12345);
        assert_eq!(st.flags, 4194560);
        assert!(!st.kernel_thread());
        // migration/0's flags (above): a kernel thread.
        let k = "18 (migration/0) S 2 0 0 0 -1 69238848 0 0 0 0 0 0 0 0 -100 0 1 0 14 0 0";
        assert!(parse_stat(k).unwrap().kernel_thread());
        assert!(parse_stat("1 (x) R").is_none());
    }

    #[test]
    fn schedstat_counts_this_threads_switch_ins() {
        let tid = crate::sched::gettid();
        let mut f = SchedstatFile::open(tid).unwrap();
        let before = f.switch_ins().expect("three fields");
        assert!(before >= 1, "a running thread was switched in");
        // A sleep blocks the thread; it is switched in again when it wakes.
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(f.switch_ins().unwrap() > before);
        assert!(f.sum_exec_runtime().is_some());
    }

    #[test]
    fn own_process_lists_this_thread() {
        let pid = std::process::id() as i32;
        let tid = crate::sched::gettid();
        assert!(threads_of(pid).unwrap().contains(&tid));
        assert_eq!(tgid(tid).unwrap(), pid);
        assert_eq!(stat(tid).unwrap().state, 'R');
        assert!(all_pids().unwrap().contains(&pid));
        // Regression (issue 5): the re-read stat file sees this running thread.
        let mut sf = StatFile::open(tid).unwrap();
        assert_eq!(sf.state(), Some('R'));
        assert!(sf.runnable());
        assert!(matches!(
            StatFile::open(i32::MAX - 3),
            Err(LinuxError::NoSuchThread(_))
        ));
        // Regression (issue 5): children are found without scanning all of /proc.
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let kids = children(tid).unwrap();
        let cpid = child.id() as i32;
        child.kill().unwrap();
        child.wait().unwrap();
        if let Some(k) = kids {
            assert!(k.contains(&cpid), "{k:?} lacks {cpid}");
        } else {
            eprintln!("children: kernel without CONFIG_PROC_CHILDREN; fallback path only");
        }
        assert!(matches!(
            threads_of(i32::MAX - 3),
            Err(LinuxError::NoSuchThread(_))
        ));
    }
}
