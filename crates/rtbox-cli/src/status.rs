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
            members.join(","),
        ]);
    }
    print!("{}", t.render(0));
    let lp = &v["loop"];
    if let Some(steps) = lp["steps"].as_u64() {
        let us = |x: &serde_json::Value| x.as_u64().map(|n| format!("{:.1} us", n as f64 / 1e3));
        println!(
            "loop: {steps} steps, {:.3} s CPU; last 10 s: {} per step, {} CPU (admitted {} per step){}",
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
    ExitCode::SUCCESS
}
