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
}

impl Stat {
    /// Whether the thread wants a CPU now.
    pub fn runnable(&self) -> bool {
        self.state == 'R'
    }
}

/// Parse the content of a stat file (the command name may contain spaces and parentheses).
pub fn parse_stat(text: &str) -> Option<Stat> {
    let close = text.rfind(')')?;
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // rest[0] = state (field 3), rest[1] = ppid (4), rest[19] = starttime (22).
    Some(Stat {
        state: rest.first()?.chars().next()?,
        ppid: rest.get(1)?.parse().ok()?,
        starttime: rest.get(19)?.parse().ok()?,
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

/// The owner uid of a process (for the non-root client rule: same uid only).
pub fn uid(pid: i32) -> Result<u32, LinuxError> {
    let path = PathBuf::from(format!("/proc/{pid}/status"));
    let text = fs::read_to_string(&path).map_err(|_| LinuxError::NoSuchThread(pid))?;
    text.lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1)?.parse().ok())
        .ok_or(LinuxError::Parse {
            path,
            what: "Uid".into(),
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parses_names_with_spaces_and_parens() {
        let s = "42 (a (b) c) R 7 42 42 0 -1 4194560 0 0 0 0 1 2 0 0 20 0 3 0 12345 0 0";
        let st = parse_stat(s).unwrap();
        assert_eq!(st.state, 'R');
        assert_eq!(st.ppid, 7);
        assert_eq!(st.starttime, 12345);
        assert!(parse_stat("1 (x) R").is_none());
    }

    #[test]
    fn own_process_lists_this_thread() {
        let pid = std::process::id() as i32;
        let tid = crate::sched::gettid();
        assert!(threads_of(pid).unwrap().contains(&tid));
        assert_eq!(tgid(tid).unwrap(), pid);
        assert_eq!(stat(tid).unwrap().state, 'R');
        assert!(all_pids().unwrap().contains(&pid));
        assert!(matches!(
            threads_of(i32::MAX - 3),
            Err(LinuxError::NoSuchThread(_))
        ));
    }
}
