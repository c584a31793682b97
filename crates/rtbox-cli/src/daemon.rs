//! `rtbox daemon [--config FILE]`: run the enforcement runtime (root).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use rtbox_daemon::{DaemonConfig, DaemonError, DEFAULT_SOCKET, DEFAULT_STATE};
use tracing_subscriber::EnvFilter;

#[derive(clap::Args)]
pub struct Args {
    /// Boxes to keep from the start (TOML, see docs/config.md); SIGHUP reads it again.
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[arg(long, default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Crash journal (restored by the watchdog or the next daemon).
    #[arg(long, default_value = DEFAULT_STATE)]
    pub state: PathBuf,
    /// Group (name or gid) allowed to use the socket besides root; what its users may do is
    /// set per box (`users` in the config, `rtbox box create --user`).
    #[arg(long)]
    pub group: Option<String>,
    /// Shortest poll interval of the enforcement loop, in microseconds: between core timers the
    /// loop polls its members after the smallest budget left of any running server, but at
    /// least this long and at most the 4 ms scan interval apart.
    #[arg(long, default_value_t = 1000)]
    pub poll_us: u64,
    /// CPU time of one enforcement-loop step in microseconds, admitted with the reservations
    /// (2 steps per server period on the server's CPU; 0 admits the reservations alone).
    /// Default: the measured step of the sensor in use (100 with perf, 70 with bpf, whose loop
    /// has no poll).
    #[arg(long)]
    pub loop_step_us: Option<u64>,
    /// The members' SCHED_FIFO band, LOW-HIGH within 1-96 (overrides the config's
    /// `[platform] priorities`). Default: 40-89, or just below the threaded interrupts on a
    /// kernel whose handlers all run as threads (PREEMPT_RT, `threadirqs`).
    #[arg(long, value_name = "LOW-HIGH", value_parser = parse_priorities)]
    pub priorities: Option<rtbox_model::PrioRange>,
    /// What tells the enforcement loop what members do: `bpf` (scheduler tracepoints,
    /// event-driven, no polling), `perf` (perf clocks, /proc, a poll every 1-4 ms), or `auto`
    /// (bpf when its program loads, else perf; the choice is logged and shown by status).
    /// Default: the RTBOX_SENSOR environment variable (the test suites run once with each),
    /// else `auto`.
    #[arg(long)]
    pub sensor: Option<rtbox_daemon::runtime::sensor::SensorChoice>,
    /// The CPU wake-up latency limit held while boxes exist, in microseconds, or `off`. The
    /// kernel's CPU latency QoS (/dev/cpu_dma_latency, as cyclictest and tuned's real-time
    /// profiles use it): idle CPUs take no idle state slower to leave, so the loop, the
    /// backstops and the members wake fast. 0 (the default) makes idle CPUs poll: on a
    /// virtual machine a wake-up from a halted vCPU cost the woken thread 41-46 us of CPU
    /// (9.5 us polling). `off` saves power (laptops) at that price. Released when the last box
    /// goes and when the daemon exits, however it exits.
    #[arg(long, default_value = "0", value_parser = parse_cpu_latency)]
    pub cpu_latency_us: CpuLatency,
    /// Serve `/metrics` over HTTP (Prometheus text format) at ADDR: `PORT` (loopback only),
    /// `:PORT` (loopback) or `HOST:PORT` (e.g. `0.0.0.0:9464` to expose it beyond the host).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Log filter (`error`, `warn`, `info`, `debug`, `trace`, or per-target directives);
    /// overrides the RTBOX_LOG environment variable. Default: RTBOX_LOG, else `info`.
    #[arg(long)]
    pub log_level: Option<String>,
}

/// Where the log filter comes from: `--log-level`, else `RTBOX_LOG`, else `info`.
fn filter(flag: Option<&str>) -> Result<EnvFilter, String> {
    let (text, from) = match flag {
        Some(f) => (f.to_string(), "--log-level"),
        None => match std::env::var("RTBOX_LOG") {
            Ok(v) if !v.trim().is_empty() => (v, "RTBOX_LOG"),
            _ => ("info".to_string(), "default"),
        },
    };
    EnvFilter::try_new(&text).map_err(|e| format!("{from} = \"{text}\": {e}"))
}

/// Log lines on stderr: timestamp, level, target, message and fields; colours only on a
/// terminal (journald and files get plain text).
fn init_logging(filter: EnvFilter) {
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

pub fn run(args: Args) -> ExitCode {
    match filter(args.log_level.as_deref()) {
        Ok(f) => init_logging(f),
        Err(e) => {
            eprintln!("rtbox daemon: {e}");
            return ExitCode::from(2);
        }
    }
    let group = match args
        .group
        .as_deref()
        .map(rtbox_linux::users::gid)
        .transpose()
    {
        Ok(g) => g,
        Err(e) => {
            tracing::error!("--group: {e}");
            return ExitCode::from(2);
        }
    };
    let (system, members, users, file_priorities) = match &args.config {
        Some(p) => match rtbox_config::load_file_with_members(p) {
            Ok(c) => (Some(c.system), c.members, c.users, c.priorities),
            Err(e) => {
                tracing::error!("{}: {e}", p.display());
                return ExitCode::from(2);
            }
        },
        None => (None, Vec::new(), Vec::new(), None),
    };
    // The sensor: the option, else RTBOX_SENSOR, else the default; a wrong value in the
    // environment is refused like a wrong option, not silently replaced.
    let sensor = match args.sensor.map_or_else(
        rtbox_daemon::runtime::sensor::SensorChoice::daemon_default,
        Ok,
    ) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::from(2);
        }
    };
    let metrics_listen = match args
        .metrics_listen
        .as_deref()
        .map(rtbox_daemon::metricshttp::listen_addr)
        .transpose()
    {
        Ok(a) => a,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::from(2);
        }
    };
    let cfg = DaemonConfig {
        socket: args.socket,
        state_file: args.state,
        config_path: args.config,
        system,
        members,
        group,
        users,
        poll: args.poll_us.max(100) * 1000,
        loop_step: args.loop_step_us.map(|us| us.saturating_mul(1000)),
        priorities: args.priorities.or(file_priorities),
        sensor,
        metrics_listen,
        cpu_latency: args.cpu_latency_us.0,
    };
    match rtbox_daemon::run(cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{}", describe(&e));
            ExitCode::from(1)
        }
    }
}

/// The words for why the daemon did not run.
fn describe(e: &DaemonError) -> String {
    let holder = |h: &Option<i32>| match h {
        Some(p) => format!("process {p}"),
        None => "another process".to_string(),
    };
    match e {
        DaemonError::NotRoot => "the daemon must run as root".into(),
        DaemonError::Socket { path, source } => format!("socket {}: {source}", path.display()),
        DaemonError::SocketTaken {
            socket,
            lock,
            holder: h,
        } => format!(
            "socket {} belongs to another rtbox daemon ({} holds {}); one daemon per socket, refusing to start (nothing changed)",
            socket.display(),
            holder(h),
            lock.display()
        ),
        DaemonError::StateTaken {
            state,
            lock,
            holder: h,
        } => format!(
            "state file {} belongs to another rtbox daemon or its watchdog ({} holds {}); one daemon per state file, refusing to start (nothing changed)",
            state.display(),
            holder(h),
            lock.display()
        ),
        DaemonError::Signals(e) => format!("cannot install signal handlers: {e}"),
        DaemonError::Runtime(e) => e.to_string(),
        DaemonError::Linux(e) => e.to_string(),
        DaemonError::Members(e) => format!("{e}; refusing to start (nothing changed)"),
        DaemonError::User(e) => format!("{e}; refusing to start (nothing changed)"),
        DaemonError::UnknownCpu(e) => format!("{e}; refusing to start (nothing changed)"),
        DaemonError::Metrics(e) => format!("{e}; refusing to start (nothing changed)"),
    }
}

/// `--cpu-latency-us`: microseconds, or `off` (`None`).
#[derive(Debug, Clone, Copy)]
pub struct CpuLatency(Option<u32>);

fn parse_cpu_latency(text: &str) -> Result<CpuLatency, String> {
    if text == "off" {
        return Ok(CpuLatency(None));
    }
    match text.parse::<u32>() {
        Ok(us) if us <= i32::MAX as u32 => Ok(CpuLatency(Some(us))),
        _ => Err(format!(
            "`{text}`: a whole number of microseconds (0-{}) or `off`",
            i32::MAX
        )),
    }
}

/// `--priorities LOW-HIGH`, with the model's precise reason.
fn parse_priorities(text: &str) -> Result<rtbox_model::PrioRange, String> {
    rtbox_model::PrioRange::parse(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_flag_wins_and_a_bad_filter_is_named() {
        assert!(filter(Some("debug")).is_ok());
        let e = filter(Some("rtbox=notalevel")).unwrap_err();
        assert!(e.starts_with("--log-level = \"rtbox=notalevel\""), "{e}");
    }

    #[test]
    fn the_cpu_latency_is_microseconds_or_off() {
        assert_eq!(parse_cpu_latency("0").unwrap().0, Some(0));
        assert_eq!(parse_cpu_latency("off").unwrap().0, None);
        for bad in ["-1", "1.5", "3000000000", "none"] {
            let e = parse_cpu_latency(bad).unwrap_err();
            assert!(e.contains("microseconds") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn a_taken_socket_names_the_holder() {
        let e = DaemonError::SocketTaken {
            socket: "/run/x.sock".into(),
            lock: "/run/x.sock.lock".into(),
            holder: Some(42),
        };
        assert_eq!(
            describe(&e),
            "socket /run/x.sock belongs to another rtbox daemon (process 42 holds /run/x.sock.lock); one daemon per socket, refusing to start (nothing changed)"
        );
    }
}
