//! `rtbox check FILE [--json] [--loop-step-us N] [--host]`: validate, flatten, admit (with the daemon's
//! enforcement loop, as `rtbox daemon` does), and print the per-CPU table.

use std::path::PathBuf;
use std::process::ExitCode;

use rtbox_model::{
    admit_on_host, format_ms, Admission, HostLoad, LoopCost, Role, LOOP_STEPS_PER_PERIOD,
};
use serde_json::json;

use crate::table::{Align, Table};

#[derive(clap::Args)]
pub struct Args {
    /// Configuration file (TOML).
    pub file: PathBuf,
    /// Print the verdict as JSON.
    #[arg(long)]
    pub json: bool,
    /// CPU time of one step of the daemon's enforcement loop, in microseconds: admitted with
    /// the reservations as `rtbox daemon` does (2 steps per server period, plus its polls). 0 checks the
    /// reservations alone (the schedule the simulator and the analysis model). Default: the
    /// measured step of the sensor's loop.
    #[arg(long)]
    pub loop_step_us: Option<u64>,
    /// The daemon's sensor whose loop is admitted: `perf` (polls every 1-4 ms), `bpf` (no
    /// polls), or `auto`: the one `rtbox daemon --sensor auto` takes on a machine like this one
    /// (bpf where this binary has the program and the kernel has BTF). Default: the one
    /// `rtbox daemon` takes without `--sensor` (RTBOX_SENSOR, else auto).
    #[arg(long)]
    pub sensor: Option<rtbox_daemon::runtime::sensor::SensorChoice>,
    /// Also refuse CPUs this machine does not have online, as `rtbox daemon` does (by default
    /// the file is checked against its own `[platform]`, possibly another machine's).
    #[arg(long)]
    pub host: bool,
}

pub fn run(args: Args) -> ExitCode {
    let (system, members) = match rtbox_config::load_file_with_members(&args.file) {
        Ok(c) => (c.system, c.members),
        Err(e) => {
            eprintln!("rtbox check: {}: {e}", args.file.display());
            return ExitCode::from(2);
        }
    };
    if args.host {
        let on_host = rtbox_daemon::host::online()
            .map_err(|e| e.to_string())
            .and_then(|host| {
                rtbox_daemon::host::check_system(&system, &host).map_err(|e| e.to_string())
            });
        if let Err(e) = on_host {
            eprintln!("rtbox check: {}: refused: {e}", args.file.display());
            return ExitCode::from(1);
        }
    }
    let sensor = match args.sensor.map_or_else(
        rtbox_daemon::runtime::sensor::SensorChoice::daemon_default,
        Ok,
    ) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rtbox check: {e}");
            return ExitCode::from(2);
        }
    };
    let base = sensor.probe().loop_cost();
    let cost = match args.loop_step_us {
        Some(us) => LoopCost {
            step: us.saturating_mul(1000),
            ..base
        },
        None => base,
    };
    // The runtime's limits (loop, minimum budget, longest period); the host's own real-time
    // work is counted by the daemon, which looks at the machine's threads.
    let admission = admit_on_host(&system, cost, &HostLoad::default());
    if args.json {
        let mut v = rtbox_experiment::report::admission(&admission);
        if !members.is_empty() {
            v["members"] = members_json(&members);
        }
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print!("{}", render_members(&members));
        print!("{}", render(&admission));
        if !admission.admitted() {
            for r in &admission.refusals {
                eprintln!("rtbox check: refused: {r}");
            }
        }
    }
    ExitCode::from(if admission.admitted() { 0 } else { 1 })
}

/// The human table: one block per CPU.
pub fn render(a: &Admission) -> String {
    let mut out = String::new();
    for load in &a.cpus {
        if load.servers.is_empty() {
            out.push_str(&format!(
                "CPU {}: no servers (cap {})\n",
                load.cpu,
                load.cap.format(2)
            ));
            continue;
        }
        let mut t = Table::new(
            &["server", "box", "Q", "P", "Q/P", "note"],
            &[
                Align::Left,
                Align::Left,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Left,
            ],
        );
        for s in &load.servers {
            t.row(vec![
                format!("{}@{}", s.box_name, s.cpu),
                s.box_name.clone(),
                format_ms(s.budget),
                format_ms(s.period),
                s.bandwidth.format(4),
                match s.role {
                    Role::Whole => String::new(),
                    Role::Remainder => "remainder after children".into(),
                },
            ]);
        }
        let verdict = |b: rtbox_model::Bandwidth| if b <= load.cap { "<=" } else { ">" };
        t.row(vec![
            "total".into(),
            String::new(),
            String::new(),
            String::new(),
            load.total.format(4),
            format!("{} cap {}", verdict(load.total), load.cap.format(2)),
        ]);
        if load.loop_share > rtbox_model::Bandwidth::ZERO {
            let with_loop = load.total + load.loop_share;
            t.row(vec![
                "loop".into(),
                String::new(),
                String::new(),
                String::new(),
                load.loop_share.format(4),
                format!(
                    "daemon's enforcement loop: {LOOP_STEPS_PER_PERIOD} steps per server period and its polls"
                ),
            ]);
            t.row(vec![
                "with loop".into(),
                String::new(),
                String::new(),
                String::new(),
                with_loop.format(4),
                format!("{} cap {}", verdict(with_loop), load.cap.format(2)),
            ]);
        }
        out.push_str(&format!("CPU {}\n", load.cpu));
        out.push_str(&t.render(2));
    }
    if !a.shared.is_empty() {
        out.push_str("shared boxes (expected share of the unreserved CPU)\n");
        let mut t = Table::new(
            &["box", "CPU", "weight", "share"],
            &[Align::Left, Align::Right, Align::Right, Align::Right],
        );
        for s in &a.shared {
            t.row(vec![
                s.box_name.clone(),
                s.cpu.to_string(),
                s.weight.to_string(),
                s.share.format(4),
            ]);
        }
        out.push_str(&t.render(2));
    }
    out.push_str(if a.admitted() {
        "admitted\n"
    } else {
        "refused\n"
    });
    out
}

/// Members are only listed: whether they exist is checked when the daemon starts.
pub fn render_members(members: &[rtbox_config::BoxMembers]) -> String {
    let mut out = String::new();
    if members.is_empty() {
        return out;
    }
    out.push_str("members (put in by `rtbox daemon --config`; existence checked at start)\n");
    for b in members {
        let m = &b.members;
        let mut parts = Vec::new();
        if !m.pids.is_empty() {
            parts.push(format!("pids {:?}", m.pids));
        }
        for c in &m.cgroups {
            parts.push(format!("cgroup {}", c.display()));
        }
        for c in &m.commands {
            parts.push(format!("command {}", c.join(" ")));
        }
        for c in &m.comms {
            parts.push(format!("comm {c}"));
        }
        for c in &m.containers {
            parts.push(format!("container {c}"));
        }
        if parts.is_empty() {
            parts.push("none".into());
        }
        out.push_str(&format!("  {}: {}\n", b.box_name, parts.join(", ")));
    }
    out
}

fn members_json(members: &[rtbox_config::BoxMembers]) -> serde_json::Value {
    serde_json::Value::Array(
        members
            .iter()
            .map(|b| {
                json!({
                    "box": b.box_name,
                    "pids": b.members.pids,
                    "cgroups": b.members.cgroups.iter().map(|c| c.display().to_string()).collect::<Vec<_>>(),
                    "commands": b.members.commands,
                    "comms": b.members.comms,
                    "containers": b.members.containers,
                })
            })
            .collect(),
    )
}
