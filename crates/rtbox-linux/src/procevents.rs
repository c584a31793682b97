//! Process events from the kernel's proc connector (netlink `NETLINK_CONNECTOR`, group
//! `CN_IDX_PROC`, kernel `CONFIG_PROC_EVENTS`, root only): every fork (new thread or process)
//! and every exit, as they happen, instead of scanning /proc for them.
//!
//! The socket is non-blocking; the runtime drains it at each step. The kernel drops messages
//! when the socket buffer is full; the next [`ProcEvents::drain`] then reports
//! [`Drained::lost`] and the caller falls back to a full /proc scan.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::LinuxError;

const NETLINK_CONNECTOR: i32 = 11;
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const NLMSG_DONE: u16 = 3;

const NLMSG_HDR: usize = 16;
const CN_MSG: usize = 20;
/// `struct proc_event`: what, cpu, timestamp_ns (8-aligned within the struct), event_data.
const EV_WHAT: usize = NLMSG_HDR + CN_MSG;
const EV_DATA: usize = EV_WHAT + 16;

const PROC_EVENT_FORK: u32 = 0x1;
const PROC_EVENT_EXEC: u32 = 0x2;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;

/// One event of interest. Ids are kernel tids (`pid`) and thread-group ids (`tgid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcEvent {
    /// Thread `parent_tid` (of process `parent_tgid`) created `child_tid`; a new thread when
    /// `child_tgid == parent_tgid`, a new process otherwise.
    Fork {
        parent_tid: i32,
        parent_tgid: i32,
        child_tid: i32,
        child_tgid: i32,
    },
    /// Thread `tid` of process `tgid` called exec.
    Exec { tid: i32, tgid: i32 },
    /// Thread `tid` of process `tgid` exited.
    Exit { tid: i32, tgid: i32 },
}

/// What one drain returned.
#[derive(Debug, Default)]
pub struct Drained {
    pub events: Vec<ProcEvent>,
    /// Messages were dropped since the last drain (socket buffer overrun): rescan.
    pub lost: bool,
}

/// A subscription to the proc connector.
#[derive(Debug)]
pub struct ProcEvents {
    fd: OwnedFd,
}

fn sockaddr(groups: u32) -> libc::sockaddr_nl {
    // SAFETY: an all-zero sockaddr_nl is valid.
    let mut a: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    a.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    a.nl_groups = groups;
    a
}

impl ProcEvents {
    /// Opens a non-blocking netlink socket and subscribes to process events.
    pub fn open() -> Result<ProcEvents, LinuxError> {
        // SAFETY: plain socket(2) call.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                NETLINK_CONNECTOR,
            )
        };
        if raw < 0 {
            return Err(LinuxError::last("socket(NETLINK_CONNECTOR)", 0));
        }
        // SAFETY: raw is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // A larger buffer rides out bursts of forks between two steps.
        let size: libc::c_int = 1 << 20;
        // SAFETY: size is a valid c_int option value.
        unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        let addr = sockaddr(CN_IDX_PROC);
        // SAFETY: addr is a valid sockaddr_nl of the given length.
        let r = unsafe {
            libc::bind(
                raw,
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(LinuxError::last("bind(CN_IDX_PROC)", 0));
        }
        let msg = listen_message(std::process::id());
        let dest = sockaddr(0);
        // SAFETY: msg and dest are valid for the lengths given.
        let n = unsafe {
            libc::sendto(
                raw,
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&dest as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if n < 0 {
            return Err(LinuxError::last("send(PROC_CN_MCAST_LISTEN)", 0));
        }
        Ok(ProcEvents { fd })
    }

    /// Every event queued since the last call (never blocks).
    pub fn drain(&mut self) -> Drained {
        let mut out = Drained::default();
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: buf is valid for its length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::ENOBUFS) => {
                        out.lost = true;
                        continue;
                    }
                    Some(libc::EINTR) => continue,
                    _ => break,
                }
            }
            if n == 0 {
                break;
            }
            parse_datagram(&buf[..n as usize], &mut out.events);
        }
        out
    }
}

/// The socket becomes readable when an event is queued: the loop sleeps on it, so a member's
/// fork is placed when it happens rather than at the next step.
impl AsFd for ProcEvents {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The subscription request: nlmsghdr + cn_msg + `PROC_CN_MCAST_LISTEN`.
fn listen_message(port: u32) -> Vec<u8> {
    let total = NLMSG_HDR + CN_MSG + 4;
    let mut m = Vec::with_capacity(total);
    m.extend_from_slice(&(total as u32).to_ne_bytes());
    m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
    m.extend_from_slice(&0u16.to_ne_bytes()); // flags
    m.extend_from_slice(&0u32.to_ne_bytes()); // seq
    m.extend_from_slice(&port.to_ne_bytes());
    m.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
    m.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // ack
    m.extend_from_slice(&4u16.to_ne_bytes()); // len
    m.extend_from_slice(&0u16.to_ne_bytes()); // flags
    m.extend_from_slice(&PROC_CN_MCAST_LISTEN.to_ne_bytes());
    m
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off + 4)
        .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

fn i32_at(b: &[u8], off: usize) -> Option<i32> {
    u32_at(b, off).map(|v| v as i32)
}

/// Parses the netlink messages of one datagram; malformed or unknown ones are skipped.
fn parse_datagram(mut b: &[u8], out: &mut Vec<ProcEvent>) {
    while b.len() >= NLMSG_HDR {
        let len = u32_at(b, 0).unwrap_or(0) as usize;
        if len < NLMSG_HDR || len > b.len() {
            return;
        }
        if let Some(e) = parse_event(&b[..len]) {
            out.push(e);
        }
        let step = (len + 3) & !3;
        b = &b[step.min(b.len())..];
    }
}

fn parse_event(m: &[u8]) -> Option<ProcEvent> {
    if u32_at(m, NLMSG_HDR)? != CN_IDX_PROC || u32_at(m, NLMSG_HDR + 4)? != CN_VAL_PROC {
        return None;
    }
    let d = EV_DATA;
    match u32_at(m, EV_WHAT)? {
        PROC_EVENT_FORK => Some(ProcEvent::Fork {
            parent_tid: i32_at(m, d)?,
            parent_tgid: i32_at(m, d + 4)?,
            child_tid: i32_at(m, d + 8)?,
            child_tgid: i32_at(m, d + 12)?,
        }),
        PROC_EVENT_EXEC => Some(ProcEvent::Exec {
            tid: i32_at(m, d)?,
            tgid: i32_at(m, d + 4)?,
        }),
        PROC_EVENT_EXIT => Some(ProcEvent::Exit {
            tid: i32_at(m, d)?,
            tgid: i32_at(m, d + 4)?,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message as the kernel lays it out (`struct proc_event` after nlmsghdr + cn_msg).
    fn message(what: u32, data: [u32; 4]) -> Vec<u8> {
        let mut m = Vec::new();
        let total = (EV_DATA + 24) as u32;
        m.extend_from_slice(&total.to_ne_bytes());
        m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
        m.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
        m.extend_from_slice(&[0; 12]);
        m.extend_from_slice(&what.to_ne_bytes());
        m.extend_from_slice(&1u32.to_ne_bytes()); // cpu
        m.extend_from_slice(&123u64.to_ne_bytes()); // timestamp
        for v in data {
            m.extend_from_slice(&v.to_ne_bytes());
        }
        m.extend_from_slice(&[0; 8]);
        assert_eq!(m.len(), total as usize);
        m
    }

    #[test]
    fn parses_fork_exec_exit_and_skips_the_rest() {
        let mut dgram = message(PROC_EVENT_FORK, [10, 10, 11, 11]);
        dgram.extend(message(0x200, [1, 2, 3, 4])); // comm change: ignored
        dgram.extend(message(PROC_EVENT_EXIT, [11, 11, 0, 0]));
        dgram.extend(message(PROC_EVENT_EXEC, [12, 12, 0, 0]));
        let mut out = Vec::new();
        parse_datagram(&dgram, &mut out);
        assert_eq!(
            out,
            vec![
                ProcEvent::Fork {
                    parent_tid: 10,
                    parent_tgid: 10,
                    child_tid: 11,
                    child_tgid: 11
                },
                ProcEvent::Exit { tid: 11, tgid: 11 },
                ProcEvent::Exec { tid: 12, tgid: 12 },
            ]
        );
    }

    #[test]
    fn truncated_or_foreign_messages_are_skipped() {
        let mut out = Vec::new();
        let m = message(PROC_EVENT_FORK, [1, 1, 2, 2]);
        parse_datagram(&m[..m.len() - 30], &mut out);
        let mut foreign = m.clone();
        foreign[NLMSG_HDR] = 9; // another connector index
        parse_datagram(&foreign, &mut out);
        parse_datagram(&[0xff; 7], &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn subscription_message_layout() {
        let m = listen_message(42);
        assert_eq!(m.len(), 40);
        assert_eq!(u32_at(&m, 0), Some(40));
        assert_eq!(u32_at(&m, 12), Some(42));
        assert_eq!(u32_at(&m, NLMSG_HDR), Some(CN_IDX_PROC));
        assert_eq!(u32_at(&m, 36), Some(PROC_CN_MCAST_LISTEN));
    }

    /// Real kernel events (root, CONFIG_PROC_EVENTS): a fork and exit of a child and a new
    /// thread of this process are reported with the right ids.
    #[test]
    fn reports_real_fork_thread_and_exit() {
        if !crate::is_root() {
            eprintln!("skipped: the proc connector needs root");
            return;
        }
        let mut ev = match ProcEvents::open() {
            Ok(e) => e,
            Err(e) => {
                eprintln!("skipped: proc connector unavailable here: {e}");
                return;
            }
        };
        let me = std::process::id() as i32;
        let child = std::process::Command::new("true").spawn().expect("spawn");
        let cpid = child.id() as i32;
        let mut child = child;
        child.wait().expect("wait");
        let t = std::thread::spawn(crate::sched::gettid);
        let ttid = t.join().expect("thread");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let got = ev.drain().events;
        assert!(
            got.iter().any(
                |e| matches!(e, ProcEvent::Fork { parent_tgid, child_tgid, .. }
                if *parent_tgid == me && *child_tgid == cpid)
            ),
            "no fork event for child {cpid}: {got:?}"
        );
        assert!(
            got.iter()
                .any(|e| matches!(e, ProcEvent::Exit { tgid, .. } if *tgid == cpid)),
            "no exit event for child {cpid}"
        );
        assert!(
            got.iter().any(
                |e| matches!(e, ProcEvent::Fork { child_tid, child_tgid, .. }
                if *child_tid == ttid && *child_tgid == me)
            ),
            "no thread-creation event for {ttid}"
        );
    }
}
