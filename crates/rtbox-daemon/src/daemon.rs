//! The daemon process: watchdog, socket, signal handling and the enforcement loop.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use rtbox_linux::sched::{self, SchedAttr};
use rtbox_linux::watchdog::Watchdog;
use rtbox_linux::{procfs, LinuxError};
use rtbox_model::{Platform, System};

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
            poll: 1_000_000,
            loop_step: rtbox_model::DEFAULT_LOOP_STEP,
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
}

impl std::fmt::Display for DaemonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DaemonError::NotRoot => write!(f, "the daemon must run as root"),
            DaemonError::Socket(p, e) => write!(f, "socket {}: {e}", p.display()),
            DaemonError::Runtime(e) => write!(f, "{e}"),
            DaemonError::Linux(e) => write!(f, "{e}"),
            DaemonError::Members(e) => write!(f, "{e}; refusing to start (nothing changed)"),
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

fn serve(listener: UnixListener, tx: mpsc::Sender<Incoming>) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let tx = tx.clone();
        std::thread::spawn(move || {
            let uid = peer_uid(&conn);
            let Ok(mut w) = conn.try_clone() else { return };
            let r = BufReader::new(conn);
            for line in r.lines() {
                let Ok(line) = line else { return };
                let (rtx, rrx) = mpsc::channel();
                let req = if line.trim().is_empty() {
                    Err("malformed request: empty line".to_string())
                } else if line.len() > 64 * 1024 {
                    Err("malformed request: longer than 64 KiB".to_string())
                } else {
                    parse_request(&line)
                };
                if tx
                    .send(Incoming {
                        req,
                        uid,
                        reply: rtx,
                    })
                    .is_err()
                {
                    return;
                }
                let Ok(answer) = rrx.recv() else { return };
                if w.write_all(answer.as_bytes()).is_err() || w.write_all(b"\n").is_err() {
                    return;
                }
            }
        });
    }
}

/// Run the daemon until SIGTERM / SIGINT / SIGHUP; every touched thread is restored on the way
/// out, and by the watchdog if the daemon dies.
pub fn run(cfg: DaemonConfig) -> Result<(), DaemonError> {
    if !rtbox_linux::is_root() {
        return Err(DaemonError::NotRoot);
    }
    // The watchdog first, while this process has a single thread.
    let _watchdog = Watchdog::spawn(cfg.state_file.clone()).map_err(DaemonError::Linux)?;
    let (platform, specs) = match &cfg.system {
        Some(s) => (s.platform.clone(), s.specs()),
        None => (Platform::with_cpus(sched::online_cpus()), Vec::new()),
    };
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
    for l in rt.log.drain(..) {
        eprintln!("rtbox daemon: {l}");
    }
    // Configured members, after admission and while still single-threaded and not yet FIFO
    // (started commands must not inherit the loop's priority).
    let mut commands = match crate::start::attach_members(&mut rt, &cfg.members) {
        Ok(c) => c,
        Err(e) => {
            rt.shutdown();
            for l in rt.log.drain(..) {
                eprintln!("rtbox daemon: {l}");
            }
            return Err(DaemonError::Members(e));
        }
    };
    for l in rt.log.drain(..) {
        eprintln!("rtbox daemon: {l}");
    }
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
            let answer = handle(&mut rt, inc.req, inc.uid);
            let _ = inc.reply.send(answer);
        }
        let now = rt.now();
        rt.step(now);
        for l in rt.log.drain(..) {
            eprintln!("rtbox daemon: {l}");
        }
        for l in crate::start::reap_commands(&mut commands) {
            eprintln!("rtbox daemon: {l}");
        }
        let next = rt.next_wakeup(rt.now());
        rt.follow_exhaustion();
        rt.sleep_until(rt.to_monotonic(next));
    }
    eprintln!("rtbox daemon: stopping, restoring every managed thread");
    rt.shutdown();
    for l in rt.log.drain(..) {
        eprintln!("rtbox daemon: {l}");
    }
    // Commands the config started are the daemon's: restored above, then terminated.
    crate::start::stop_commands(&mut commands);
    let _ = std::fs::remove_file(&cfg.socket);
    Ok(())
}

/// Answer one request; refused and failed actions are logged.
pub fn handle(rt: &mut Runtime, req: Result<Request, String>, uid: u32) -> String {
    let req = match req {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rtbox daemon: refused: {e}");
            return reply_err(&e);
        }
    };
    let r = dispatch(rt, req.clone(), uid);
    match r {
        Ok(v) => reply_ok(v),
        Err(e) => {
            eprintln!("rtbox daemon: {req:?}: {e}");
            reply_err(&e.to_string())
        }
    }
}

fn dispatch(rt: &mut Runtime, req: Request, uid: u32) -> Result<serde_json::Value, RuntimeError> {
    let root = uid == 0;
    let need_root = |what: &str| {
        if root {
            Ok(())
        } else {
            Err(RuntimeError::Refused(format!("{what} needs root")))
        }
    };
    match req {
        Request::Create { spec } => {
            need_root("box create")?;
            rt.create_box(spec.to_spec().map_err(RuntimeError::Invalid)?)?;
            Ok(serde_json::json!({}))
        }
        Request::Set { spec } => {
            need_root("box set")?;
            rt.set_box(spec.to_spec().map_err(RuntimeError::Invalid)?)?;
            Ok(serde_json::json!({}))
        }
        Request::Delete { name } => {
            need_root("box delete")?;
            rt.delete_box(&name)?;
            Ok(serde_json::json!({}))
        }
        Request::Attach {
            box_name,
            pid,
            cgroup,
        } => {
            let target = match (pid, cgroup) {
                (Some(p), None) if p > 0 => {
                    if !root && procfs::uid(p).ok() != Some(uid) {
                        return Err(RuntimeError::Refused(format!(
                            "process {p} does not belong to uid {uid}"
                        )));
                    }
                    Target::Pid(p)
                }
                (Some(p), None) => {
                    return Err(RuntimeError::Invalid(format!(
                        "pid = {p} is not a process id"
                    )))
                }
                (None, Some(c)) => {
                    need_root("attaching a cgroup")?;
                    Target::Cgroup(PathBuf::from(c))
                }
                _ => {
                    return Err(RuntimeError::Invalid(
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
                if !root && procfs::uid(p).ok() != Some(uid) {
                    return Err(RuntimeError::Refused(format!(
                        "process {p} does not belong to uid {uid}"
                    )));
                }
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
                        "members": rt.member_tids(&b.name),
                    })
                })
                .collect();
            Ok(serde_json::json!({
                "boxes": boxes,
                "servers": rt.server_rows(),
                "now_ns": rt.now(),
            }))
        }
        Request::Metrics {} => Ok(serde_json::json!({
            "text": crate::metrics::render(&rt.server_rows())
        })),
    }
}
