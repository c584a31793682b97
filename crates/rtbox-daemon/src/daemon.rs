//! The daemon process: watchdog, socket, signal handling and the enforcement loop.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use rtbox_linux::sched::{self, SchedAttr};
use rtbox_linux::watchdog::Watchdog;
use rtbox_linux::{procfs, LinuxError};
use rtbox_model::{Platform, System};

use crate::access::Access;
use crate::protocol::{parse_request, reply_err, reply_ok, Request};
use crate::runtime::{Runtime, RuntimeError, RuntimeOptions, Target, LOOP_PRIO};

/// Daemon settings.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub socket: PathBuf,
    pub state_file: PathBuf,
    /// Boxes to keep from the start (a config file already loaded).
    pub system: Option<System>,
    /// Members the config names (attached and started after admission, see `start.rs`).
    pub members: Vec<rtbox_config::BoxMembers>,
    /// Group allowed to use the socket besides root.
    pub group: Option<u32>,
    /// Users besides root who may use each box (names are looked up at start).
    pub users: Vec<rtbox_config::BoxUsers>,
    pub poll: u64,
    /// CPU time of one enforcement step, admitted with the reservations (0: not admitted).
    pub loop_step: u64,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            socket: PathBuf::from(crate::DEFAULT_SOCKET),
            state_file: PathBuf::from(crate::DEFAULT_STATE),
            system: None,
            members: Vec::new(),
            group: None,
            users: Vec::new(),
            poll: rtbox_model::LoopCost::DEFAULT.poll,
            loop_step: rtbox_model::LoopCost::DEFAULT.step,
        }
    }
}

/// Why the daemon could not run.
#[derive(Debug)]
pub enum DaemonError {
    NotRoot,
    Socket(PathBuf, std::io::Error),
    Runtime(RuntimeError),
    Linux(LinuxError),
    /// A configured member does not exist or could not be attached; nothing was changed.
    Members(crate::start::MemberError),
    /// A box's `users` names an unknown user.
    Users(String),
    /// Another daemon (or its watchdog, still restoring) holds the state file's lock.
    AlreadyRunning(PathBuf),
}

impl std::fmt::Display for DaemonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DaemonError::NotRoot => write!(f, "the daemon must run as root"),
            DaemonError::Socket(p, e) => write!(f, "socket {}: {e}", p.display()),
            DaemonError::Runtime(e) => write!(f, "{e}"),
            DaemonError::Linux(e) => write!(f, "{e}"),
            DaemonError::Members(e) => write!(f, "{e}; refusing to start (nothing changed)"),
            DaemonError::Users(e) => write!(f, "{e}; refusing to start (nothing changed)"),
            DaemonError::AlreadyRunning(p) => write!(
                f,
                "another rtbox daemon holds {}; one daemon per state file (nothing changed)",
                p.display()
            ),
        }
    }
}

impl std::error::Error for DaemonError {}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// A request with who sent it and where the answer goes.
struct Incoming {
    req: Result<Request, String>,
    uid: u32,
    reply: mpsc::Sender<String>,
}

fn peer_uid(s: &UnixStream) -> u32 {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred/len are valid out pointers of the right size.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    };
    if r == 0 {
        cred.uid
    } else {
        u32::MAX
    }
}

/// Longest request line; a longer one ends the connection (it cannot be resynchronised).
const MAX_REQUEST: usize = 64 * 1024;
/// Connections served at once; more are answered with an error and closed.
const MAX_CONNECTIONS: usize = 64;

static CONNECTIONS: AtomicUsize = AtomicUsize::new(0);

/// Why a request line could not be read as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BadLine {
    /// Longer than [`MAX_REQUEST`]: the rest of it cannot be told from the next request.
    TooLong,
    /// Not UTF-8 from this byte on.
    NotUtf8(usize),
}

impl std::fmt::Display for BadLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadLine::TooLong => write!(
                f,
                "malformed request: longer than {} KiB",
                MAX_REQUEST / 1024
            ),
            BadLine::NotUtf8(at) => write!(f, "malformed request: not UTF-8 (byte {at})"),
        }
    }
}

/// One request line: at most [`MAX_REQUEST`] bytes read, `Ok(None)` at the end of input.
fn read_request<R: BufRead>(r: &mut R) -> std::io::Result<Option<Result<String, BadLine>>> {
    let mut buf = Vec::new();
    let n =
        <&mut R as std::io::Read>::take(r, MAX_REQUEST as u64 + 1).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') && buf.len() > MAX_REQUEST {
        return Ok(Some(Err(BadLine::TooLong)));
    }
    Ok(Some(String::from_utf8(buf).map_err(|e| {
        BadLine::NotUtf8(e.utf8_error().valid_up_to())
    })))
}

fn serve(listener: UnixListener, tx: mpsc::Sender<Incoming>) {
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        if CONNECTIONS.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            CONNECTIONS.fetch_sub(1, Ordering::SeqCst);
            eprintln!("rtbox daemon: refused a connection: {MAX_CONNECTIONS} already open");
            let _ = writeln!(conn, "{}", reply_err("busy: too many connections"));
            continue;
        }
        let tx = tx.clone();
        std::thread::spawn(move || {
            connection(conn, tx);
            CONNECTIONS.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// Requests of one client, answered in order.
fn connection(conn: UnixStream, tx: mpsc::Sender<Incoming>) {
    let uid = peer_uid(&conn);
    let Ok(mut w) = conn.try_clone() else { return };
    let mut r = BufReader::new(conn);
    loop {
        let Ok(Some(line)) = read_request(&mut r) else {
            return;
        };
        let too_long = line == Err(BadLine::TooLong);
        let req = line.map_err(|e| e.to_string()).and_then(|l| {
            if l.trim().is_empty() {
                Err("malformed request: empty line".to_string())
            } else {
                parse_request(l.trim_end_matches(['\n', '\r']))
            }
        });
        let (rtx, rrx) = mpsc::channel();
        let sent = tx.send(Incoming {
            req,
            uid,
            reply: rtx,
        });
        if sent.is_err() {
            return;
        }
        let Ok(answer) = rrx.recv() else { return };
        if w.write_all(answer.as_bytes()).is_err() || w.write_all(b"\n").is_err() || too_long {
            return;
        }
    }
}

/// Takes the exclusive lock `STATE.lock` next to the state file, or says who holds it.
fn lock_state(state: &std::path::Path) -> Result<std::fs::File, DaemonError> {
    use std::os::fd::AsRawFd;
    let mut name = state.as_os_str().to_owned();
    name.push(".lock");
    let path = PathBuf::from(name);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| DaemonError::Linux(LinuxError::io(&path, e)))?;
    // SAFETY: flock on a file descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(DaemonError::AlreadyRunning(path));
    }
    Ok(f)
}

/// Run the daemon until SIGTERM / SIGINT / SIGHUP; every touched thread is restored on the way
/// out, and by the watchdog if the daemon dies.
pub fn run(cfg: DaemonConfig) -> Result<(), DaemonError> {
    if !rtbox_linux::is_root() {
        return Err(DaemonError::NotRoot);
    }
    let mut access = Access::default();
    for u in &cfg.users {
        let mut ids = Vec::new();
        for (i, r) in u.users.iter().enumerate() {
            ids.push(match r {
                rtbox_config::UserRef::Uid(n) => *n,
                rtbox_config::UserRef::Name(n) => rtbox_linux::users::uid(n).map_err(|e| {
                    DaemonError::Users(format!(
                        "line {}: box \"{}\": users[{i}]: {e}",
                        u.line, u.box_name
                    ))
                })?,
            });
        }
        access.set(&u.box_name, ids);
    }
    // One daemon per state file: a second one would "repair" the first one's members. The
    // watchdog inherits the lock, so a restart waits until a crashed daemon's threads are back.
    let _lock = lock_state(&cfg.state_file)?;
    // The watchdog first, while this process has a single thread.
    let _watchdog = Watchdog::spawn(cfg.state_file.clone()).map_err(DaemonError::Linux)?;
    let (mut platform, specs) = match &cfg.system {
        Some(s) => (s.platform.clone(), s.specs()),
        None => (Platform::with_cpus(sched::online_cpus()), Vec::new()),
    };
    // Members run as RT threads: no CPU can give them more than the kernel's RT limit.
    if let Some((runtime, period)) = sched::rt_limit() {
        let limit = rtbox_model::Bandwidth::of(runtime.min(period), period);
        if limit < platform.cap {
            eprintln!(
                "rtbox daemon: kernel RT limit sched_rt_runtime_us/sched_rt_period_us = {runtime}/{period} is below the platform cap {}: admitting against {}",
                platform.cap.format(4),
                limit.format(4)
            );
            platform.cap = limit;
        }
    }
    let mut rt = Runtime::new(
        platform,
        specs,
        RuntimeOptions {
            state_file: cfg.state_file.clone(),
            poll: cfg.poll,
            step_cost: cfg.loop_step,
            ..RuntimeOptions::default()
        },
    )
    .map_err(DaemonError::Runtime)?;
    // Configured members, after admission and while still single-threaded and not yet FIFO
    // (started commands must not inherit the loop's priority).
    let mut commands = match crate::start::attach_members(&mut rt, &cfg.members) {
        Ok(c) => c,
        Err(e) => {
            rt.shutdown();
            return Err(DaemonError::Members(e));
        }
    };
    if let Some(dir) = cfg.socket.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::remove_file(&cfg.socket);
    let listener =
        UnixListener::bind(&cfg.socket).map_err(|e| DaemonError::Socket(cfg.socket.clone(), e))?;
    let mode = if cfg.group.is_some() { 0o660 } else { 0o600 };
    std::fs::set_permissions(&cfg.socket, std::fs::Permissions::from_mode(mode))
        .map_err(|e| DaemonError::Socket(cfg.socket.clone(), e))?;
    if let Some(g) = cfg.group {
        let c =
            std::ffi::CString::new(cfg.socket.as_os_str().as_encoded_bytes()).unwrap_or_default();
        // SAFETY: c is a valid NUL-terminated path.
        unsafe { libc::chown(c.as_ptr(), 0, g) };
    }
    // SAFETY: installing a handler that only stores to an atomic.
    unsafe {
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::signal(s, on_signal as *const () as libc::sighandler_t);
        }
    }
    let (tx, rx) = mpsc::channel::<Incoming>();
    std::thread::Builder::new()
        .name("rtbox-socket".into())
        .spawn(move || serve(listener, tx))
        .map_err(|e| DaemonError::Socket(cfg.socket.clone(), e))?;
    // The loop thread runs above every member (RESET_ON_FORK: nothing inherits it).
    if let Err(e) = sched::set_attr(0, &SchedAttr::fifo(LOOP_PRIO)) {
        eprintln!("rtbox daemon: cannot raise the loop to FIFO {LOOP_PRIO}: {e}");
    }
    eprintln!(
        "rtbox daemon: listening on {} (layout {:?})",
        cfg.socket.display(),
        rt.layout.kind
    );
    while !STOP.load(Ordering::SeqCst) {
        while let Ok(inc) = rx.try_recv() {
            let answer = handle(&mut rt, &mut access, inc.req, inc.uid);
            let _ = inc.reply.send(answer);
        }
        let now = rt.now();
        rt.step(now);
        for l in crate::start::reap_commands(&mut commands) {
            eprintln!("rtbox daemon: {l}");
        }
        let next = rt.next_wakeup(rt.now());
        rt.follow_exhaustion();
        rt.sleep_until(rt.to_monotonic(next));
    }
    eprintln!("rtbox daemon: stopping, restoring every managed thread");
    rt.shutdown();
    // Commands the config started are the daemon's: restored above, then terminated.
    crate::start::stop_commands(&mut commands);
    let _ = std::fs::remove_file(&cfg.socket);
    Ok(())
}

/// Answer one request; refused and failed actions are logged.
pub fn handle(
    rt: &mut Runtime,
    access: &mut Access,
    req: Result<Request, String>,
    uid: u32,
) -> String {
    let req = match req {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rtbox daemon: refused: {e}");
            return reply_err(&e);
        }
    };
    let r = dispatch(rt, access, req.clone(), uid);
    match r {
        Ok(v) => reply_ok(v),
        Err(e) => {
            eprintln!("rtbox daemon: {req:?}: {e}");
            reply_err(&e.to_string())
        }
    }
}

/// Refuses unless `uid` could signal process `pid` (root, or its real or saved uid).
fn may_signal(uid: u32, pid: i32) -> Result<(), RuntimeError> {
    if uid == 0 || procfs::signal_uids(pid).is_ok_and(|ids| ids.contains(&uid)) {
        Ok(())
    } else {
        Err(RuntimeError::NotOwner { pid, uid })
    }
}

fn dispatch(
    rt: &mut Runtime,
    access: &mut Access,
    req: Request,
    uid: u32,
) -> Result<serde_json::Value, RuntimeError> {
    let root = uid == 0;
    let need_root = |what: &'static str| {
        if root {
            Ok(())
        } else {
            Err(RuntimeError::NeedsRoot { what })
        }
    };
    match req {
        Request::Create { spec } => {
            need_root("box create")?;
            rt.create_box(spec.to_spec().map_err(RuntimeError::BadRequest)?)?;
            access.set(&spec.name, spec.users.unwrap_or_default());
            Ok(serde_json::json!({}))
        }
        Request::Set { spec } => {
            need_root("box set")?;
            rt.set_box(spec.to_spec().map_err(RuntimeError::BadRequest)?)?;
            if let Some(u) = spec.users {
                access.set(&spec.name, u);
            }
            Ok(serde_json::json!({}))
        }
        Request::Delete { name } => {
            need_root("box delete")?;
            rt.delete_box(&name)?;
            access.retain(rt.specs());
            Ok(serde_json::json!({}))
        }
        Request::Attach {
            box_name,
            pid,
            cgroup,
        } => {
            let target = match (pid, cgroup) {
                (Some(p), None) if p > 0 => {
                    may_signal(uid, p)?;
                    if rt.specs().iter().any(|b| b.name == box_name)
                        && !access.may_use(rt.specs(), &box_name, uid)
                    {
                        return Err(RuntimeError::NotUser { box_name, uid });
                    }
                    Target::Pid(p)
                }
                (Some(p), None) => {
                    return Err(RuntimeError::BadRequest(format!(
                        "pid = {p} is not a process id"
                    )))
                }
                (None, Some(c)) => {
                    need_root("attaching a cgroup")?;
                    Target::Cgroup(PathBuf::from(c))
                }
                _ => {
                    return Err(RuntimeError::BadRequest(
                        "attach: give exactly one of pid, cgroup".into(),
                    ))
                }
            };
            let n = rt.attach(&box_name, target)?;
            Ok(serde_json::json!({"threads": n}))
        }
        Request::Detach {
            pid,
            cgroup,
            box_name,
        } => {
            if let Some(p) = pid {
                may_signal(uid, p)?;
            } else {
                need_root("detach of a cgroup or box")?;
            }
            let n = rt.detach(pid, cgroup.map(PathBuf::from), box_name.as_deref())?;
            Ok(serde_json::json!({"threads": n}))
        }
        Request::Status {} => {
            let boxes: Vec<serde_json::Value> = rt
                .specs()
                .iter()
                .map(|b| {
                    serde_json::json!({
                        "name": b.name,
                        "parent": b.parent,
                        "interface": b.interface.kind(),
                        "mode": b.mode.name(),
                        "placement": b.placement.name(),
                        "policy": b.policy.name(),
                        "users": access.users(&b.name),
                        "members": rt.member_tids(&b.name),
                    })
                })
                .collect();
            let mut lp = serde_json::to_value(rt.loop_usage()).unwrap_or_default();
            lp["admitted_step_ns"] = rt.admitted_step().into();
            Ok(serde_json::json!({
                "boxes": boxes,
                "servers": rt.server_rows(),
                "loop": lp,
                "now_ns": rt.now(),
            }))
        }
        Request::Metrics {} => Ok(serde_json::json!({
            "text": crate::metrics::render(&rt.server_rows())
                + &crate::metrics::render_loop(rt.loop_usage(), rt.admitted_step())
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_bounded_and_non_utf8_gets_an_answer() {
        // Issue 5 (security): malformed requests get an error, never a hang or a silent close.
        let mut input: Vec<u8> = b"{\"op\":\"status\"}\n\xff\xfe\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', MAX_REQUEST + 10));
        input.extend(b"\n{\"op\":\"status\"}\n");
        let mut r = BufReader::new(&input[..]);
        let first = read_request(&mut r).unwrap().unwrap().unwrap();
        assert_eq!(first, "{\"op\":\"status\"}\n");
        let bad = read_request(&mut r).unwrap().unwrap().unwrap_err();
        assert_eq!(bad.to_string(), "malformed request: not UTF-8 (byte 0)");
        let long = read_request(&mut r).unwrap().unwrap().unwrap_err();
        assert_eq!(long.to_string(), "malformed request: longer than 64 KiB");
        let mut r = BufReader::new(&b""[..]);
        assert!(read_request(&mut r).unwrap().is_none());
    }
}
