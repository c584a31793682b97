//! The daemon process: locks, watchdog, socket, signals (stop, reload) and the enforcement
//! loop.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use rtbox_config::{BoxUsers, ConfigError, UserRef};
use rtbox_linux::fdwait::EventFd;
use rtbox_linux::lock::{lock_path, PidLock};
use rtbox_linux::sched::{self, SchedAttr};
use rtbox_linux::watchdog::Watchdog;
use rtbox_linux::{procfs, LinuxError};
use rtbox_model::Bandwidth;
use rtbox_model::{Platform, System};

use crate::access::Access;
use crate::host::{self, UnknownCpu};
use crate::protocol::{parse_request, reply_err, reply_ok, Request};
use crate::runtime::{Runtime, RuntimeError, RuntimeOptions, Target, LOOP_PRIO};
use crate::start::{self, ConfigMembers, MemberError};

/// Daemon settings.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub socket: PathBuf,
    pub state_file: PathBuf,
    /// The config file `system`, `members` and `users` came from: SIGHUP reads it again.
    pub config_path: Option<PathBuf>,
    /// Boxes to keep from the start (a config file already loaded).
    pub system: Option<System>,
    /// Members the config names (attached and started after admission, see `start.rs`).
    pub members: Vec<rtbox_config::BoxMembers>,
    /// Group allowed to use the socket besides root.
    pub group: Option<u32>,
    /// Users besides root who may use each box (names are looked up at start).
    pub users: Vec<BoxUsers>,
    pub poll: u64,
    /// CPU time of one enforcement step, admitted with the reservations (0: not admitted);
    /// `None`: the measured cost of the sensor in use (`LoopCost::DEFAULT` or `LoopCost::BPF`).
    pub loop_step: Option<u64>,
    /// Which sensor the loop uses (`--sensor`).
    pub sensor: crate::runtime::sensor::SensorChoice,
    /// The members' SCHED_FIFO band (`--priorities`, `[runtime] priorities`); `None`: chosen
    /// from the host's threads.
    pub priorities: Option<rtbox_model::PrioRange>,
    /// Where `/metrics` is served over HTTP (`--metrics-listen`); `None`: only the socket.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// The CPU latency limit held while there are boxes (`--cpu-latency-us`); `None`: off.
    pub cpu_latency: Option<u32>,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            socket: PathBuf::from(crate::DEFAULT_SOCKET),
            state_file: PathBuf::from(crate::DEFAULT_STATE),
            config_path: None,
            system: None,
            members: Vec::new(),
            group: None,
            users: Vec::new(),
            poll: rtbox_model::LoopCost::DEFAULT.poll,
            loop_step: None,
            sensor: Default::default(),
            priorities: None,
            metrics_listen: None,
            cpu_latency: Some(0),
        }
    }
}

/// Why the daemon could not run. Nothing was changed in any case; the binary words them.
#[derive(Debug)]
pub enum DaemonError {
    NotRoot,
    /// The socket could not be bound, or its mode or owner set.
    Socket {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Another daemon (or its watchdog, still restoring) holds the socket's lock.
    SocketTaken {
        socket: PathBuf,
        lock: PathBuf,
        holder: Option<i32>,
    },
    /// Another daemon (or its watchdog, still restoring) holds the state file's lock.
    StateTaken {
        state: PathBuf,
        lock: PathBuf,
        holder: Option<i32>,
    },
    /// The signal handlers could not be installed.
    Signals(std::io::Error),
    Runtime(RuntimeError),
    Linux(LinuxError),
    /// A configured member does not exist or could not be attached.
    Members(MemberError),
    /// A box's `users` names a user the system does not know.
    User(UserError),
    /// The config names a CPU this host does not have online.
    UnknownCpu(UnknownCpu),
    /// `--metrics-listen` could not be bound.
    Metrics(crate::metricshttp::ListenError),
}

/// A box's `users[index]` that could not be looked up.
#[derive(Debug)]
pub struct UserError {
    pub line: usize,
    pub box_name: String,
    pub index: usize,
    pub source: LinuxError,
}

impl std::fmt::Display for UserError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "config line {}: box \"{}\": users[{}]: {}",
            self.line, self.box_name, self.index, self.source
        )
    }
}

impl std::error::Error for UserError {}

/// Why a reload (SIGHUP) was refused; the running boxes stay as they were.
#[derive(Debug)]
pub enum ReloadError {
    /// The daemon was started without `--config`.
    NoConfig,
    Config(ConfigError),
    Linux(LinuxError),
    UnknownCpu(UnknownCpu),
    /// `[platform]` differs from the running one (CPUs or cap): that needs a restart.
    Platform {
        running: Platform,
        file: Platform,
    },
    User(UserError),
    Members(MemberError),
    /// Admission (or validation) refused the new box set.
    Runtime(RuntimeError),
}

impl std::fmt::Display for ReloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReloadError::NoConfig => write!(f, "the daemon was started without --config"),
            ReloadError::Config(e) => write!(f, "{e}"),
            ReloadError::Linux(e) => write!(f, "{e}"),
            ReloadError::UnknownCpu(e) => write!(f, "{e}"),
            ReloadError::Platform { running, file } => write!(
                f,
                "[platform] changed (running: cpus {} cap {}; file: cpus {} cap {}); a platform change needs a restart",
                running.cpus,
                running.cap.format(4),
                file.cpus,
                file.cap.format(4)
            ),
            ReloadError::User(e) => write!(f, "{e}"),
            ReloadError::Members(e) => write!(f, "{e}"),
            ReloadError::Runtime(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReloadError {}

/// A request with who sent it and where the answer goes.
struct Incoming {
    req: Result<Request, String>,
    uid: u32,
    reply: mpsc::Sender<String>,
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

fn serve(listener: UnixListener, tx: mpsc::Sender<Incoming>, wake: Option<Arc<EventFd>>) {
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        if CONNECTIONS.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            CONNECTIONS.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(limit = MAX_CONNECTIONS, "connection refused: too many open");
            let _ = writeln!(conn, "{}", reply_err("busy: too many connections"));
            continue;
        }
        let (tx, wake) = (tx.clone(), wake.clone());
        std::thread::spawn(move || {
            connection(conn, tx, wake.as_deref());
            CONNECTIONS.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// Requests of one client, answered in order.
fn connection(conn: UnixStream, tx: mpsc::Sender<Incoming>, wake: Option<&EventFd>) {
    // A peer whose uid cannot be read is nobody in particular: u32::MAX matches no box's users.
    let uid = rtbox_linux::peer::peer_uid(&conn).unwrap_or(u32::MAX);
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
        if let Some(w) = wake {
            w.kick();
        }
        let Ok(answer) = rrx.recv() else { return };
        if w.write_all(answer.as_bytes()).is_err() || w.write_all(b"\n").is_err() || too_long {
            return;
        }
    }
}

/// Takes the lock `PATH.lock` next to `path`, naming the holder when another process has it.
fn lock_beside(path: &Path) -> Result<PidLock, (PathBuf, Option<i32>, Option<LinuxError>)> {
    let lock = lock_path(path);
    PidLock::try_acquire(&lock).map_err(|e| match e {
        LinuxError::Locked { path, holder } => (path, holder, None),
        e => (lock.clone(), None, Some(e)),
    })
}

/// Why the daemon admits against a lower cap than the config's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lowered {
    /// The kernel's RT limit, `sched_rt_runtime_us` of `sched_rt_period_us`.
    RtLimit { runtime_us: u64, period_us: u64 },
    /// The kernel's fair server takes up to this much of each CPU above every RT thread.
    FairServer(sched::FairServer),
}

/// The platform the daemon admits against: the config's (or the host's online CPUs), with the
/// cap lowered to what real-time threads can get from each CPU ([`kernel_cap`]).
fn effective_platform(mut platform: Platform) -> (Platform, Option<Lowered>) {
    let (cap, lowered) = kernel_cap(platform.cap, sched::rt_limit(), sched::fair_server());
    platform.cap = cap;
    (platform, lowered)
}

/// Rule: members run as RT threads, so no CPU gives them more than the kernel's RT limit
/// (`sched_rt_runtime_us / sched_rt_period_us`), nor more than what the kernel's fair server
/// leaves (1 - runtime / period): from 6.12 it runs starving normal threads above every RT
/// thread, with the RT limit lifted too, so a box admitted above it loses supply whenever a
/// normal thread waits on its CPU (measured: misses of the box's tasks once a second, in
/// docs/exsched.md). The cap is the least of the three; the reason is the lowest limit's.
pub fn kernel_cap(
    cap: Bandwidth,
    rt_limit: Option<(u64, u64)>,
    fair: Option<sched::FairServer>,
) -> (Bandwidth, Option<Lowered>) {
    let mut out = (cap, None);
    if let Some((runtime_us, period_us)) = rt_limit {
        let limit = Bandwidth::of(runtime_us.min(period_us), period_us);
        if limit < out.0 {
            out = (
                limit,
                Some(Lowered::RtLimit {
                    runtime_us,
                    period_us,
                }),
            );
        }
    }
    if let Some(fs) = fair {
        let left = Bandwidth::of(fs.period_ns - fs.runtime_ns.min(fs.period_ns), fs.period_ns);
        if left < out.0 {
            out = (left, Some(Lowered::FairServer(fs)));
        }
    }
    out
}

/// The uids of each box's `users` (names through the system's name service).
fn resolve_users(users: &[BoxUsers]) -> Result<Vec<(String, Vec<u32>)>, UserError> {
    let mut out = Vec::new();
    for u in users {
        let mut ids = Vec::new();
        for (index, r) in u.users.iter().enumerate() {
            ids.push(match r {
                UserRef::Uid(n) => *n,
                UserRef::Name(n) => rtbox_linux::users::uid(n).map_err(|source| UserError {
                    line: u.line,
                    box_name: u.box_name.clone(),
                    index,
                    source,
                })?,
            });
        }
        out.push((u.box_name.clone(), ids));
    }
    Ok(out)
}

/// Run the daemon until SIGTERM / SIGINT (SIGHUP reloads `--config`); every touched thread is
/// restored on the way out, and by the watchdog if the daemon dies.
pub fn run(cfg: DaemonConfig) -> Result<(), DaemonError> {
    if !rtbox_linux::is_root() {
        return Err(DaemonError::NotRoot);
    }
    // One daemon per socket: a second one would unlink the first one's socket and answer in
    // its place. Taken before the socket is touched; the watchdog inherits it, so a restart
    // waits until a crashed daemon's threads are back.
    let _socket_lock = lock_beside(&cfg.socket).map_err(|(lock, holder, err)| match err {
        Some(e) => DaemonError::Linux(e),
        None => DaemonError::SocketTaken {
            socket: cfg.socket.clone(),
            lock,
            holder,
        },
    })?;
    // One daemon per state file: a second one would "repair" the first one's members.
    let _state_lock = lock_beside(&cfg.state_file).map_err(|(lock, holder, err)| match err {
        Some(e) => DaemonError::Linux(e),
        None => DaemonError::StateTaken {
            state: cfg.state_file.clone(),
            lock,
            holder,
        },
    })?;
    let mut access = Access::default();
    for (b, ids) in resolve_users(&cfg.users).map_err(DaemonError::User)? {
        access.set(&b, ids);
    }
    let host = host::online().map_err(DaemonError::Linux)?;
    let (platform, specs) = match &cfg.system {
        Some(s) => {
            host::check_system(s, &host).map_err(DaemonError::UnknownCpu)?;
            (s.platform.clone(), s.specs())
        }
        None => (
            Platform {
                cpus: host.clone(),
                ..Platform::with_cpus(1)
            },
            Vec::new(),
        ),
    };
    let planned = start::plan(&cfg.members).map_err(DaemonError::Members)?;
    // Bound before anything changes: an address in use refuses the start.
    let metrics = cfg
        .metrics_listen
        .map(crate::metricshttp::MetricsServer::bind)
        .transpose()
        .map_err(DaemonError::Metrics)?;
    match rtbox_linux::raise_open_files() {
        Ok((before, after)) if after > before => {
            tracing::debug!(before, after, "open files limit raised")
        }
        Ok((_, limit)) => tracing::debug!(limit, "open files limit"),
        Err(e) => tracing::warn!(error = %e, "open files limit not raised"),
    }
    // The watchdog first, while this process has a single thread.
    let _watchdog = Watchdog::spawn(cfg.state_file.clone()).map_err(DaemonError::Linux)?;
    let stop = Arc::new(AtomicBool::new(false));
    let reload = Arc::new(AtomicBool::new(false));
    for s in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(s, Arc::clone(&stop)).map_err(DaemonError::Signals)?;
    }
    signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&reload))
        .map_err(DaemonError::Signals)?;
    // A stopped daemon leaves its members unenforced (at their band, or frozen) for as long as
    // it stays stopped: the terminal's stop signals (Ctrl-Z, a background read or write) are
    // caught and only logged. SIGSTOP cannot be caught; the watchdog looks after that one.
    let tstp = Arc::new(AtomicBool::new(false));
    let continued = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGCONT, Arc::clone(&continued))
        .map_err(DaemonError::Signals)?;
    for s in [
        signal_hook::consts::SIGTSTP,
        signal_hook::consts::SIGTTIN,
        signal_hook::consts::SIGTTOU,
    ] {
        signal_hook::flag::register(s, Arc::clone(&tstp)).map_err(DaemonError::Signals)?;
    }
    let (platform, lowered) = effective_platform(platform);
    match lowered {
        Some(Lowered::RtLimit {
            runtime_us,
            period_us,
        }) => tracing::warn!(
            runtime_us,
            period_us,
            cap = %platform.cap.format(4),
            "kernel RT limit (sched_rt_runtime_us/sched_rt_period_us) is below the platform cap: admitting against the limit"
        ),
        Some(Lowered::FairServer(fs)) => tracing::warn!(
            runtime_ns = fs.runtime_ns,
            period_ns = fs.period_ns,
            read = fs.read,
            cap = %platform.cap.format(4),
            "the kernel's fair server runs starving normal threads above real-time ones on every CPU (also with the RT limit lifted; parameters read from debugfs if `read`, else the kernel's default): admitting against what it leaves"
        ),
        None => {}
    }
    let mut rt = Runtime::new(
        platform,
        specs,
        RuntimeOptions {
            state_file: cfg.state_file.clone(),
            poll: cfg.poll,
            step_cost: cfg.loop_step.unwrap_or(rtbox_model::LoopCost::DEFAULT.step),
            bpf_step_cost: cfg.loop_step.unwrap_or(rtbox_model::LoopCost::BPF.step),
            sensor: cfg.sensor,
            priorities: cfg.priorities,
            cpu_latency: cfg.cpu_latency,
            ..RuntimeOptions::default()
        },
    )
    .map_err(DaemonError::Runtime)?;
    if let Some(s) = &cfg.system {
        rt.set_pin_plan(rtbox_analysis::pin_plan(s));
    }
    // Configured members, after admission and while still single-threaded and not yet FIFO
    // (started commands must not inherit the loop's priority).
    let mut members = ConfigMembers::default();
    if let Err(e) = start::attach_members(&mut rt, &cfg.members, planned, &mut members) {
        rt.shutdown();
        start::stop_commands(&mut members.commands);
        return Err(DaemonError::Members(e));
    }
    let listener = match bind(&cfg) {
        Ok(l) => l,
        Err(e) => {
            rt.shutdown();
            start::stop_commands(&mut members.commands);
            return Err(e);
        }
    };
    let (tx, rx) = mpsc::channel::<Incoming>();
    if let Some(server) = metrics {
        if let Err(e) = serve_metrics(server, tx.clone()) {
            rt.shutdown();
            start::stop_commands(&mut members.commands);
            let _ = std::fs::remove_file(&cfg.socket);
            return Err(e);
        }
    }
    let mut joined = crate::joined::Joined::default();
    // Requests wake the loop (a missing eventfd: they wait for its next step, as before).
    let wake = match EventFd::new() {
        Ok(fd) => {
            let fd = Arc::new(fd);
            rt.wake_on_requests(fd.clone());
            Some(fd)
        }
        Err(e) => {
            tracing::warn!(error = %e, "requests wait for the loop's next step (no eventfd)");
            None
        }
    };
    std::thread::Builder::new()
        .name("rtbox-socket".into())
        .spawn(move || serve(listener, tx, wake))
        .map_err(|source| DaemonError::Socket {
            path: cfg.socket.clone(),
            source,
        })?;
    // The loop thread runs above every member (RESET_ON_FORK: nothing inherits it).
    let normal = sched::get_attr(0).unwrap_or(SchedAttr::other(0));
    if let Err(e) = sched::set_attr(0, &SchedAttr::fifo(LOOP_PRIO)) {
        tracing::warn!(priority = LOOP_PRIO, error = %e, "cannot raise the loop to SCHED_FIFO");
    }
    // Lowers the loop while it spins in the kernel on a thread below it (see spinguard.rs).
    let spin = crate::spinguard::SpinGuard::start(SchedAttr::fifo(LOOP_PRIO));
    tracing::info!(
        socket = %cfg.socket.display(),
        layout = ?rt.layout.kind,
        boxes = rt.specs().len(),
        "listening"
    );
    while !stop.load(Ordering::SeqCst) {
        if let Some(g) = &spin {
            g.beat();
        }
        if continued.swap(false, Ordering::SeqCst) {
            tracing::warn!("continued after a stop: every member is placed again, and what members ran meanwhile is charged to no box");
            rt.resume_after_stop();
        }
        if tstp.swap(false, Ordering::SeqCst) {
            tracing::warn!("terminal stop signal ignored: a stopped daemon would leave its boxes unenforced (stop it with SIGTERM or Ctrl-C)");
        }
        if reload.swap(false, Ordering::SeqCst) {
            rt.forget_ahead();
            on_reload(
                &mut rt,
                &mut access,
                &mut members,
                cfg.config_path.as_deref(),
            );
        }
        // Answers go out after the step: a process attached by `rtbox exec` waits for the
        // answer before it runs its command, so it starts placed (band, CPUs), not just joined.
        let mut answers = Vec::new();
        while let Ok(inc) = rx.try_recv() {
            answers.push((
                handle(&mut rt, &mut access, &mut joined, inc.req, inc.uid),
                inc.reply,
            ));
        }
        if !answers.is_empty() {
            rt.forget_ahead();
        }
        let now = rt.now();
        rt.step(now);
        for (answer, reply) in answers {
            let _ = reply.send(answer);
        }
        rt.read_job_pages(false);
        start::reap_commands(&mut members.commands);
        let next = rt.next_wakeup(rt.now());
        rt.follow_exhaustion();
        rt.wait_until(rt.to_monotonic(next));
    }
    // The loop's whole-run figures, against what admission counted (a short run never
    // closes a window of `loopcost`, so its per-step check never spoke).
    let admitted_us = rt.admitted_step() as f64 / 1e3;
    let lp = rt.loop_usage();
    tracing::info!(
        steps = lp.steps,
        short_steps = lp.short_steps,
        cpu_ms = lp.cpu_ns as f64 / 1e6,
        per_step_us = lp.cpu_ns as f64 / 1e3 / lp.steps.max(1) as f64,
        admitted_us,
        "loop over the run"
    );
    tracing::info!("stopping: restoring every managed thread");
    drop(spin);
    rt.unpin_loop();
    crate::stopping::leave_realtime(&normal);
    rt.shutdown();
    // Commands the config started are the daemon's: restored above, then terminated.
    start::stop_commands(&mut members.commands);
    let _ = std::fs::remove_file(&cfg.socket);
    tracing::info!("stopped");
    Ok(())
}

/// Bind the socket (a stale file of a dead daemon is replaced: the socket lock says no live
/// daemon owns it), owner root, mode 0600 or 0660 with `--group`.
fn bind(cfg: &DaemonConfig) -> Result<UnixListener, DaemonError> {
    let err = |source| DaemonError::Socket {
        path: cfg.socket.clone(),
        source,
    };
    if let Some(dir) = cfg.socket.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::remove_file(&cfg.socket);
    let listener = UnixListener::bind(&cfg.socket).map_err(err)?;
    let mode = if cfg.group.is_some() { 0o660 } else { 0o600 };
    std::fs::set_permissions(&cfg.socket, std::fs::Permissions::from_mode(mode)).map_err(err)?;
    if let Some(g) = cfg.group {
        std::os::unix::fs::chown(&cfg.socket, Some(0), Some(g)).map_err(err)?;
    }
    Ok(listener)
}

/// Serves `--metrics-listen` from a thread of its own; each scrape is a `metrics` request on
/// the loop's queue (as from a client without rights: it only reads).
fn serve_metrics(
    server: crate::metricshttp::MetricsServer,
    tx: mpsc::Sender<Incoming>,
) -> Result<(), DaemonError> {
    let addr = server.addr();
    tracing::info!(addr = ?addr, "serving /metrics over HTTP");
    let ask = move |timeout| {
        let (rtx, rrx) = mpsc::channel();
        tx.send(Incoming {
            req: Ok(Request::Metrics {}),
            uid: u32::MAX,
            reply: rtx,
        })
        .ok()?;
        let answer: serde_json::Value =
            serde_json::from_str(&rrx.recv_timeout(timeout).ok()?).ok()?;
        answer["text"].as_str().map(str::to_string)
    };
    std::thread::Builder::new()
        .name("rtbox-metrics".into())
        .spawn(move || server.serve(ask))
        .map_err(|source| DaemonError::Socket {
            path: PathBuf::from(addr.map(|a| a.to_string()).unwrap_or_default()),
            source,
        })?;
    Ok(())
}

/// SIGHUP: reload and log the outcome (a refusal keeps everything as it was).
fn on_reload(
    rt: &mut Runtime,
    access: &mut Access,
    members: &mut ConfigMembers,
    path: Option<&Path>,
) {
    let file = path.map(|p| p.display().to_string()).unwrap_or_default();
    match reload(rt, access, members, path) {
        Ok(changes) => tracing::info!(
            config = %file,
            added = %changes.added.join(","),
            changed = %changes.changed.join(","),
            removed = %changes.removed.join(","),
            boxes = rt.specs().len(),
            "reload applied"
        ),
        Err(e) => tracing::warn!(
            config = %file,
            reason = %e,
            "reload refused; the running boxes are kept"
        ),
    }
}

/// Box names a reload added, changed and removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
}

/// Read the config again and apply it as a whole: everything is checked (syntax, host CPUs,
/// platform, users, members, admission of the whole box set) before anything changes. Then
/// members of removed boxes are released and the config's members attached (a member that
/// fails to join now is logged; the boxes stay applied).
pub fn reload(
    rt: &mut Runtime,
    access: &mut Access,
    members: &mut ConfigMembers,
    path: Option<&Path>,
) -> Result<Changes, ReloadError> {
    let path = path.ok_or(ReloadError::NoConfig)?;
    let cfg = rtbox_config::load_file_with_members(path).map_err(ReloadError::Config)?;
    let host = host::online().map_err(ReloadError::Linux)?;
    host::check_system(&cfg.system, &host).map_err(ReloadError::UnknownCpu)?;
    let (file, _) = effective_platform(cfg.system.platform.clone());
    if file != *rt.platform() {
        return Err(ReloadError::Platform {
            running: rt.platform().clone(),
            file,
        });
    }
    let users = resolve_users(&cfg.users).map_err(ReloadError::User)?;
    let planned = start::plan(&cfg.members).map_err(ReloadError::Members)?;
    let specs = cfg.system.specs();
    let changes = diff(rt.specs(), &specs);
    rt.replace_boxes(specs).map_err(ReloadError::Runtime)?;
    rt.set_pin_plan(rtbox_analysis::pin_plan(&cfg.system));
    *access = Access::default();
    for (b, ids) in users {
        access.set(&b, ids);
    }
    start::forget_removed(members, rt);
    if let Err(e) = start::attach_members(rt, &cfg.members, planned, members) {
        tracing::warn!(error = %e, "reload: a config member could not join");
    }
    Ok(changes)
}

/// What differs between two box sets, by name.
fn diff(old: &[rtbox_model::BoxSpec], new: &[rtbox_model::BoxSpec]) -> Changes {
    let mut c = Changes::default();
    for n in new {
        match old.iter().find(|o| o.name == n.name) {
            None => c.added.push(n.name.clone()),
            Some(o) if o != n => c.changed.push(n.name.clone()),
            Some(_) => {}
        }
    }
    c.removed = old
        .iter()
        .filter(|o| !new.iter().any(|n| n.name == o.name))
        .map(|o| o.name.clone())
        .collect();
    c
}

/// Answer one request; refused and failed actions are logged.
pub fn handle(
    rt: &mut Runtime,
    access: &mut Access,
    joined: &mut crate::joined::Joined,
    req: Result<Request, String>,
    uid: u32,
) -> String {
    let req = match req {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(uid, error = %e, "request refused");
            return reply_err(&e);
        }
    };
    let op = req.op();
    let r = dispatch(rt, access, joined, req, uid);
    match r {
        Ok(v) => reply_ok(v),
        Err(e) => {
            tracing::warn!(op, uid, error = %e, "request failed");
            reply_err(&e.to_string())
        }
    }
}

/// Refuses a box request that names a CPU the host does not have online.
fn on_host(spec: &rtbox_model::BoxSpec) -> Result<(), RuntimeError> {
    let host = host::online()?;
    host::check_spec(spec, &host).map_err(RuntimeError::UnknownCpu)
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
    joined: &mut crate::joined::Joined,
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
            let spec_ = spec.to_spec().map_err(RuntimeError::BadRequest)?;
            on_host(&spec_)?;
            rt.create_box(spec_)?;
            access.set(&spec.name, spec.users.unwrap_or_default());
            Ok(serde_json::json!({}))
        }
        Request::Set { spec } => {
            need_root("box set")?;
            let spec_ = spec.to_spec().map_err(RuntimeError::BadRequest)?;
            on_host(&spec_)?;
            rt.set_box(spec_)?;
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
            container,
        } => {
            let mut found = None;
            let cgroup = match (cgroup, container) {
                (None, Some(name)) if pid.is_none() => {
                    need_root("attaching a container")?;
                    let f = crate::container::find(&rt.layout(), &name)
                        .map_err(RuntimeError::Container)?;
                    tracing::info!(container = %name, id = %f.id, cgroup = %f.cgroup.display(), "container resolved");
                    let dir = f.cgroup.display().to_string();
                    found = Some(f);
                    Some(dir)
                }
                (c, None) => c,
                _ => {
                    return Err(RuntimeError::BadRequest(
                        "attach: give exactly one of pid, cgroup, container".into(),
                    ))
                }
            };
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
            if let Some(f) = found {
                joined.record(crate::joined::Record {
                    id: f.id,
                    name: f.name,
                    engine: f.engine.command(),
                    cgroup: f.cgroup,
                    box_name,
                    owns_box: false,
                });
            }
            Ok(serde_json::json!({"threads": n}))
        }
        Request::Detach {
            pid,
            mut cgroup,
            box_name,
            container,
        } => {
            if let Some(p) = pid {
                may_signal(uid, p)?;
            } else {
                need_root("detach of a cgroup, container or box")?;
            }
            if let Some(name) = container {
                if pid.is_some() || cgroup.is_some() || box_name.is_some() {
                    return Err(RuntimeError::DetachWhat);
                }
                // By id, so that a stopped container (no process, same id) is found too.
                let id = crate::container::id_of(&name).map_err(RuntimeError::Container)?;
                let dir = rt
                    .attached_cgroups()
                    .into_iter()
                    .find(|d| d.to_string_lossy().contains(&id))
                    .ok_or_else(|| {
                        RuntimeError::BadRequest(format!("container \"{name}\" is not attached"))
                    })?;
                cgroup = Some(dir.display().to_string());
            }
            let cgroup = cgroup.map(PathBuf::from);
            let n = rt.detach(pid, cgroup.clone(), box_name.as_deref())?;
            if let Some(dir) = cgroup {
                joined.forget_cgroup(&dir);
            }
            Ok(serde_json::json!({"threads": n}))
        }
        Request::TaskEnter { box_name, pid, tid } => {
            may_signal(uid, pid)?;
            if rt.specs().iter().any(|b| b.name == box_name)
                && !access.may_use(rt.specs(), &box_name, uid)
            {
                return Err(RuntimeError::NotUser { box_name, uid });
            }
            let page = rt.task_enter(&box_name, pid, tid, uid)?;
            Ok(serde_json::json!({"page": page}))
        }
        Request::TaskRun {
            pid,
            tid,
            wcet_ns,
            period_ns,
            deadline_ns,
            priority,
        } => {
            may_signal(uid, pid)?;
            let d = crate::jobpage::Declared {
                wcet: wcet_ns,
                period: period_ns,
                deadline: deadline_ns,
            };
            rt.task_run(pid, tid, d, priority)?;
            Ok(serde_json::json!({}))
        }
        Request::TaskExit { pid, tid } => {
            may_signal(uid, pid)?;
            rt.task_exit(pid, tid)?;
            Ok(serde_json::json!({}))
        }
        Request::ContainerJoin {
            id,
            name,
            pid,
            box_name,
            create,
        } => {
            need_root("a container join (OCI hook)")?;
            let target = match (box_name, create) {
                (Some(b), None) => crate::ocihook::JoinTarget::Box(b),
                (None, Some(c)) => crate::ocihook::JoinTarget::Create(Box::new(c)),
                _ => {
                    return Err(RuntimeError::BadRequest(
                        "container_join: give exactly one of box, create".into(),
                    ))
                }
            };
            joined.join(rt, &id, &name, pid, target)
        }
        Request::ContainerLeave { id } => {
            need_root("a container leave (OCI hook)")?;
            joined.leave(rt, &id)
        }
        Request::Status {} => {
            rt.read_job_pages(true);
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
                        "plugin": b.plugin.map(|k| k.name()),
                        "users": access.users(&b.name),
                        "members": rt.member_tids(&b.name),
                        "stops": crate::status::member_stops(rt, &b.name),
                    })
                })
                .collect();
            let mut lp = serde_json::to_value(rt.loop_usage()).unwrap_or_default();
            lp["admitted_step_ns"] = rt.admitted_step().into();
            lp["sensor"] = rt.sensor_kind().name().into();
            Ok(serde_json::json!({
                "sensor": rt.sensor_kind().name(),
                "cpu_latency": rt.cpu_latency_status(),
                "boxes": boxes,
                "servers": rt.server_rows(),
                "loop": lp,
                "tasks": rt.task_rows(),
                "host": rt.host_status(),
                "containers": joined.status(rt),
                "now_ns": rt.now(),
            }))
        }
        Request::Metrics {} => {
            rt.read_job_pages(true);
            Ok(serde_json::json!({
                "text": crate::metrics::render(&rt.server_rows())
                    + &crate::metrics::render_loop(&rt.loop_usage().clone(), rt.admitted_step())
                    + &crate::metrics::render_tasks(&rt.task_rows())
                    + &crate::metrics::render_host(&rt.host_report(), rt.host_over())
                    + &crate::metrics::render_sensor(rt.sensor_kind().name())
                    + &crate::metrics::render_cpu_latency(rt.cpu_latency_held())
                    + &joined.render_metrics(rt)
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_the_least_of_the_config_the_rt_limit_and_the_fair_servers_rest() {
        let one = Bandwidth::of(1, 1);
        let fs = sched::FAIR_SERVER_DEFAULT;
        // The default machine: RT limit 0.95 and the fair server's 0.95 are equal; the limit
        // is named.
        let (cap, why) = kernel_cap(one, Some((950_000, 1_000_000)), Some(fs));
        assert_eq!(cap, Bandwidth::of(95, 100));
        assert!(matches!(why, Some(Lowered::RtLimit { .. })));
        // The RT limit lifted (-1 reads as none): the fair server still takes its 5 %.
        let (cap, why) = kernel_cap(one, None, Some(fs));
        assert_eq!(cap, Bandwidth::of(95, 100));
        assert_eq!(why, Some(Lowered::FairServer(fs)));
        // Before 6.12 and unlimited: the config's cap.
        assert_eq!(kernel_cap(one, None, None), (one, None));
        // A config below both is kept.
        let low = Bandwidth::of(9, 10);
        assert_eq!(
            kernel_cap(low, Some((950_000, 1_000_000)), Some(fs)),
            (low, None)
        );
        // A lower RT limit wins over the fair server.
        let (cap, why) = kernel_cap(one, Some((800_000, 1_000_000)), Some(fs));
        assert_eq!(cap, Bandwidth::of(8, 10));
        assert!(matches!(
            why,
            Some(Lowered::RtLimit {
                runtime_us: 800_000,
                ..
            })
        ));
    }

    #[test]
    fn a_reload_reports_boxes_added_changed_and_removed_by_name() {
        use rtbox_model::{BoxSpec, Interface};
        let per_cpu = |budget| Interface::PerCpu {
            budget,
            period: 100_000_000,
        };
        let old = vec![
            BoxSpec::new("keep", per_cpu(1_000_000)),
            BoxSpec::new("grow", per_cpu(1_000_000)),
            BoxSpec::new("gone", per_cpu(1_000_000)),
        ];
        let new = vec![
            BoxSpec::new("keep", per_cpu(1_000_000)),
            BoxSpec::new("grow", per_cpu(2_000_000)),
            BoxSpec::new("new", per_cpu(1_000_000)),
        ];
        assert_eq!(
            diff(&old, &new),
            Changes {
                added: vec!["new".into()],
                changed: vec!["grow".into()],
                removed: vec!["gone".into()],
            }
        );
        assert_eq!(diff(&new, &new), Changes::default());
    }

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
