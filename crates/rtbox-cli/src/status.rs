//! `rtbox status [--json] [--metrics]`: per box and CPU: Q, P, budget left, consumed CPU time,
//! throttle count, members.

use std::path::PathBuf;
use std::process::ExitCode;

use rtbox_daemon::protocol::Request;
use rtbox_daemon::DEFAULT_SOCKET;
use rtbox_model::format_ms;

use crate::table::{Align, Table};

#[derive(clap::Args)]
pub struct Args {
    #[arg(long)]
    pub json: bool,
    /// Print the Prometheus text exposition instead.
    #[arg(long, conflicts_with = "json")]
    pub metrics: bool,
    #[arg(long, default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
}

pub fn run(args: Args) -> ExitCode {
    if args.metrics {
        return match crate::client::call("status", &args.socket, &Request::Metrics {}) {
            Ok(v) => {
                print!("{}", v["text"].as_str().unwrap_or(""));
                ExitCode::SUCCESS
            }
            Err(c) => c,
        };
    }
    let v = match crate::client::call("status", &args.socket, &Request::Status {}) {
        Ok(v) => v,
        Err(c) => return c,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    let mut t = Table::new(
        &[
            "box",
            "cpu",
            "Q",
            "P",
            "left",
            "consumed",
            "throttles",
            "moved in",
            "members",
        ],
        &[
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Left,
        ],
    );
    let ms = |x: &serde_json::Value| x.as_u64().map(format_ms).unwrap_or_default();
    for s in v["servers"].as_array().into_iter().flatten() {
        let left = s["runtime"].as_i64().unwrap_or(0);
        let left = if left < 0 {
            format!("-{}", format_ms((-left) as u64))
        } else {
            format_ms(left as u64)
        };
        let members: Vec<String> = s["members"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| m.to_string())
            .collect();
        t.row(vec![
            s["box"].as_str().unwrap_or("").to_string(),
            s["cpu"].to_string(),
            ms(&s["budget"]),
            ms(&s["period"]),
            left,
            ms(&s["consumed"]),
            s["throttles"].to_string(),
            s["migrations"].to_string(),
            members.join(","),
        ]);
    }
    print!("{}", t.render(0));
    let lp = &v["loop"];
    if let Some(sensor) = v["sensor"].as_str() {
        println!("sensor: {sensor}");
    }
    let lat = &v["cpu_latency"];
    if lat.is_object() {
        match (
            lat["limit_us"].as_u64(),
            lat["held"].as_bool(),
            lat["error"].as_str(),
        ) {
            (None, _, _) => println!("cpu latency: not limited (--cpu-latency-us off)"),
            (Some(us), Some(true), _) => println!("cpu latency: {us} us, held"),
            (Some(us), _, Some(e)) => println!("cpu latency: {us} us asked, not held: {e}"),
            (Some(us), _, None) => {
                println!("cpu latency: {us} us, held while boxes exist (none now)")
            }
        }
    }
    if let Some(steps) = lp["steps"].as_u64() {
        let us = |x: &serde_json::Value| x.as_u64().map(|n| format!("{:.1} us", n as f64 / 1e3));
        println!(
            "loop: {steps} steps ({} short), {:.3} s CPU; last 10 s: {} per step, {} CPU (admitted {} per step){}",
            lp["short_steps"].as_u64().unwrap_or(0),
            lp["cpu_ns"].as_u64().unwrap_or(0) as f64 / 1e9,
            us(&lp["window_step_ns"]).unwrap_or_else(|| "-".into()),
            lp["window_cpu"]
                .as_f64()
                .map_or_else(|| "-".into(), |c| format!("{c:.3}")),
            us(&lp["admitted_step_ns"]).unwrap_or_else(|| "-".into()),
            if lp["over"].as_bool() == Some(true) {
                "  ABOVE ADMISSION"
            } else {
                ""
            }
        );
    }
    for b in v["boxes"].as_array().into_iter().flatten() {
        let n = b["members"].as_array().map_or(0, |m| m.len());
        println!(
            "box {}: {} {} {} ({} threads)",
            b["name"].as_str().unwrap_or(""),
            b["interface"].as_str().unwrap_or(""),
            b["mode"].as_str().unwrap_or(""),
            b["placement"].as_str().unwrap_or(""),
            n
        );
        for m in b["stops"].as_array().into_iter().flatten() {
            let how = match m["mechanism"].as_str() {
                Some("freeze") => format!("freeze {}", m["group"].as_str().unwrap_or("")),
                Some("idle") => format!("SCHED_IDLE ({})", m["reason"].as_str().unwrap_or("")),
                _ => "-".to_string(),
            };
            println!(
                "  thread {} (process {}): stop by {how}",
                m["tid"], m["pid"]
            );
        }
    }
    if let Some(tasks) = tasks_table(&v["tasks"]) {
        print!("periodic tasks (jobs):\n{tasks}");
    }
    print!("{}", render_host(&v["host"]));
    ExitCode::SUCCESS
}

/// The periodic tasks of the task API and their jobs, `None` without tasks. Percentiles are
/// over the last jobs the daemon keeps (see docs/api.md).
fn tasks_table(tasks: &serde_json::Value) -> Option<String> {
    let rows = tasks.as_array().filter(|r| !r.is_empty())?;
    let mut t = Table::new(
        &[
            "box",
            "pid",
            "tid",
            "state",
            "C",
            "T",
            "D",
            "prio",
            "released",
            "completed",
            "misses",
            "overruns",
            "resp p99",
            "resp max",
            "lat p99",
            "lat max",
        ],
        &[
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
        ],
    );
    let ms = |x: &serde_json::Value| x.as_u64().map(format_ms).unwrap_or_else(|| "-".into());
    let us = |x: &serde_json::Value| {
        x.as_u64()
            .map(|n| format!("{:.1} us", n as f64 / 1e3))
            .unwrap_or_else(|| "-".into())
    };
    for r in rows {
        t.row(vec![
            r["box"].as_str().unwrap_or("").to_string(),
            r["pid"].to_string(),
            r["tid"].to_string(),
            r["state"].as_str().unwrap_or("").to_string(),
            ms(&r["wcet_ns"]),
            ms(&r["period_ns"]),
            ms(&r["deadline_ns"]),
            r["priority"].as_u64().map_or("-".into(), |p| p.to_string()),
            r["released"].to_string(),
            r["completed"].to_string(),
            r["misses"].to_string(),
            r["overruns"].to_string(),
            ms(&r["response_p99_ns"]),
            ms(&r["max_response_ns"]),
            us(&r["latency_p99_ns"]),
            us(&r["latency_max_ns"]),
        ]);
    }
    Some(t.render(0))
}

/// The host's own real-time work: per CPU what admission counts, the threads above the
/// members' band or counted, and running boxes that no longer fit.
fn render_host(h: &serde_json::Value) -> String {
    let mut out = String::new();
    if h.is_null() {
        return out;
    }
    out.push_str(&format!(
        "members' band: SCHED_FIFO {} ({}){}\n",
        h["band"].as_str().unwrap_or("?"),
        h["band_reason"].as_str().unwrap_or(""),
        if h["preempt_rt"].as_bool() == Some(true) {
            "; PREEMPT_RT kernel"
        } else {
            ""
        }
    ));
    for c in h["cpus"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "host CPU {}: SCHED_DEADLINE outside rtbox {:.4} ({} tasks; the kernel accounts {:.4}), kernel threads above members {:.4}: {:.4} counted by admission\n",
            c["cpu"],
            c["deadline"].as_f64().unwrap_or(0.0),
            c["deadline_tasks"],
            c["deadline_kernel_accounting"].as_f64().unwrap_or(0.0),
            c["kernel_threads"].as_f64().unwrap_or(0.0),
            c["admitted"].as_f64().unwrap_or(0.0),
        ));
    }
    let lo_hi: Vec<u64> = h["band"]
        .as_str()
        .unwrap_or("")
        .split('-')
        .filter_map(|x| x.parse().ok())
        .collect();
    let hi = lo_hi.get(1).copied().unwrap_or(89);
    for t in h["threads"].as_array().into_iter().flatten() {
        let above = t["policy"] != "deadline" && t["priority"].as_u64().unwrap_or(0) > hi;
        if t["admitted"].as_bool() != Some(true) && !above {
            continue;
        }
        let params = if t["policy"] == "deadline" {
            format!(
                "{}/{}",
                format_ms(t["runtime_ns"].as_u64().unwrap_or(0)),
                format_ms(t["period_ns"].as_u64().unwrap_or(0))
            )
        } else {
            format!("{} {}", t["policy"].as_str().unwrap_or(""), t["priority"])
        };
        out.push_str(&format!(
            "  {} thread {} ({}) {} on CPUs {}: {}{}\n",
            t["kind"].as_str().unwrap_or(""),
            t["tid"],
            t["comm"].as_str().unwrap_or(""),
            params,
            t["cpus"].as_str().unwrap_or(""),
            t["cpu_share"]
                .as_f64()
                .map_or_else(|| "CPU not measured yet".into(), |s| format!("{s:.4} CPU")),
            if above { ", above every box" } else { "" }
        ));
    }
    for r in h["over"].as_array().into_iter().flatten() {
        out.push_str(&format!("  NOT FITTING: {}\n", r.as_str().unwrap_or("")));
    }
    out
}
