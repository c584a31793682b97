//! Report formats: summary table, job CSV, Chrome/Perfetto trace-event JSON, Gantt SVG.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use rtbox_model::Nanos;
use serde_json::{json, Value};

use crate::SimReport;

fn ms(ns: Nanos) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// A plain-text summary: tasks, servers, CPUs.
pub fn summary_table(r: &SimReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "model {}  duration {} s  seed {}  events {}",
        r.model.name(),
        r.duration as f64 / 1e9,
        r.seed,
        r.events
    );
    let _ = writeln!(
        s,
        "\n{:<20} {:<12} {:>4} {:>4} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "task",
        "box",
        "prio",
        "cpu",
        "jobs",
        "misses",
        "min ms",
        "mean ms",
        "p99 ms",
        "max ms",
        "exec %"
    );
    for t in &r.tasks {
        let _ = writeln!(
            s,
            "{:<20} {:<12} {:>4} {:>4} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10.3}",
            t.name,
            t.box_name.as_deref().unwrap_or("-"),
            t.priority.map_or("DM".into(), |p| p.to_string()),
            t.cpu.map_or("-".into(), |c| c.to_string()),
            t.jobs,
            t.misses,
            ms(t.response.min),
            ms(t.response.mean),
            ms(t.response.p99),
            ms(t.response.max),
            100.0 * t.executed as f64 / r.duration.max(1) as f64
        );
    }
    if !r.servers.is_empty() {
        let _ = writeln!(
            s,
            "\n{:<24} {:>10} {:>10} {:>9} {:>10} {:>8}  worst supply / sbf (ms) over P/2 P 2P 3P 4P",
            "server", "budget ms", "period ms", "used %", "throttles", "moved in"
        );
        for sv in &r.servers {
            let windows: Vec<String> = sv
                .supply
                .iter()
                .map(|w| match w.worst {
                    Some(x) => format!(
                        "{}/{}{}",
                        ms(x),
                        ms(w.sbf),
                        if x < w.sbf { "!" } else { "" }
                    ),
                    None => "-".into(),
                })
                .collect();
            let _ = writeln!(
                s,
                "{:<24} {:>10} {:>10} {:>9.3} {:>10} {:>8}  {}",
                sv.name,
                ms(sv.budget),
                ms(sv.period),
                100.0 * sv.consumed as f64 / r.duration.max(1) as f64,
                sv.throttles,
                sv.migrations,
                windows.join(" ")
            );
        }
    }
    let _ = writeln!(
        s,
        "\n{:<6} {:>8} {:>12} {:>11}",
        "cpu", "util %", "preemptions", "migrations"
    );
    for c in &r.cpus {
        let _ = writeln!(
            s,
            "{:<6} {:>8.3} {:>12} {:>11}",
            c.cpu,
            100.0 * c.utilization,
            c.preemptions,
            c.migrations
        );
    }
    s
}

/// One line per job: `task,seq,arrival_ns,release_ns,deadline_ns,exec_ns,finish_ns,response_ns,missed`
/// (finish and response empty for unfinished jobs). Needs `record_jobs`.
pub fn write_jobs_csv(r: &SimReport, mut w: impl Write) -> io::Result<()> {
    writeln!(
        w,
        "task,seq,arrival_ns,release_ns,deadline_ns,exec_ns,finish_ns,response_ns,missed"
    )?;
    for j in r.jobs.iter().flatten() {
        let (fin, resp) = match j.finish {
            Some(f) => (f.to_string(), (f - j.arrival).to_string()),
            None => (String::new(), String::new()),
        };
        writeln!(
            w,
            "{},{},{},{},{},{},{},{},{}",
            j.task, j.seq, j.arrival, j.release, j.deadline, j.exec, fin, resp, j.missed
        )?;
    }
    Ok(())
}

fn us(ns: Nanos) -> f64 {
    ns as f64 / 1e3
}

/// The trace in the Chrome trace-event JSON format (opens in Perfetto and chrome://tracing):
/// process "CPUs" with one thread per CPU (job segments), process "servers" with one thread per
/// server (throttled intervals), instant events for releases and deadline misses.
pub fn chrome_trace(r: &SimReport) -> Value {
    let mut ev = Vec::new();
    ev.push(json!({"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "CPUs"}}));
    ev.push(json!({"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "servers"}}));
    ev.push(json!({"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "tasks"}}));
    for c in &r.cpus {
        ev.push(
            json!({"name": "thread_name", "ph": "M", "pid": 0, "tid": c.cpu,
            "args": {"name": format!("cpu {}", c.cpu)}}),
        );
    }
    for (i, s) in r.servers.iter().enumerate() {
        ev.push(json!({"name": "thread_name", "ph": "M", "pid": 1, "tid": i,
            "args": {"name": s.name}}));
    }
    let task_idx: BTreeMap<&str, usize> = r
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect();
    for (i, t) in r.tasks.iter().enumerate() {
        ev.push(json!({"name": "thread_name", "ph": "M", "pid": 2, "tid": i,
            "args": {"name": t.name}}));
    }
    let server_idx: BTreeMap<&str, usize> = r
        .servers
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.as_str(), i))
        .collect();
    if let Some(tr) = &r.trace {
        for s in &tr.segments {
            ev.push(
                json!({"name": s.task, "cat": "job", "ph": "X", "pid": 0, "tid": s.cpu,
                "ts": us(s.start), "dur": us(s.end - s.start),
                "args": {"server": s.server}}),
            );
            if let Some(srv) = &s.server {
                ev.push(json!({"name": s.task, "cat": "supply", "ph": "X", "pid": 1,
                    "tid": server_idx.get(srv.as_str()).copied().unwrap_or(0),
                    "ts": us(s.start), "dur": us(s.end - s.start)}));
            }
        }
        for t in &tr.throttles {
            ev.push(
                json!({"name": "throttled", "cat": "throttle", "ph": "X", "pid": 1,
                "tid": server_idx.get(t.server.as_str()).copied().unwrap_or(0),
                "ts": us(t.start), "dur": us(t.end - t.start)}),
            );
        }
        for (task, at) in &tr.releases {
            ev.push(
                json!({"name": "release", "cat": "release", "ph": "i", "s": "t", "pid": 2,
                "tid": task_idx.get(task.as_str()).copied().unwrap_or(0), "ts": us(*at)}),
            );
        }
        for (task, at) in &tr.misses {
            ev.push(
                json!({"name": "deadline miss", "cat": "miss", "ph": "i", "s": "t", "pid": 2,
                "tid": task_idx.get(task.as_str()).copied().unwrap_or(0), "ts": us(*at)}),
            );
        }
    }
    json!({"traceEvents": ev, "displayTimeUnit": "ns",
        "otherData": {"model": r.model.name(), "seed": r.seed}})
}

fn color(i: usize) -> String {
    // Golden-angle hues: distinct colors for neighbouring tasks.
    let hue = (i as f64 * 137.508) % 360.0;
    format!("hsl({hue:.0},65%,55%)")
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A Gantt chart: one row per CPU (jobs coloured by task, tooltips name the server), one row per
/// server (its execution, throttled intervals hatched red), deadline misses as red marks.
pub fn gantt_svg(r: &SimReport) -> String {
    let Some(tr) = &r.trace else {
        return String::from(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"40\"><text x=\"10\" y=\"25\">no trace recorded</text></svg>\n",
        );
    };
    let until = tr.until.max(1);
    let (left, width, row, gap) = (140.0, 1200.0, 22.0, 6.0);
    let x = |t: Nanos| left + width * (t.min(until) as f64) / until as f64;
    let task_idx: BTreeMap<&str, usize> = r
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect();
    let rows = r.cpus.len() + r.servers.len();
    let legend_rows = r.tasks.len().div_ceil(8);
    let height = 40.0 + rows as f64 * (row + gap) + 40.0 + legend_rows as f64 * 18.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0}\" height=\"{height:.0}\" font-family=\"sans-serif\" font-size=\"11\">",
        left + width + 20.0
    );
    let _ = writeln!(
        s,
        "<defs><pattern id=\"thr\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"2\" height=\"6\" fill=\"#222\"/></pattern></defs>"
    );
    let _ = writeln!(
        s,
        "<text x=\"10\" y=\"16\" font-size=\"13\">rtbox sim: model {} ({} ms shown)</text>",
        r.model.name(),
        ms(until)
    );
    let y0 = 30.0;
    let cpu_row: BTreeMap<u32, usize> =
        r.cpus.iter().enumerate().map(|(i, c)| (c.cpu, i)).collect();
    let server_row: BTreeMap<&str, usize> = r
        .servers
        .iter()
        .enumerate()
        .map(|(i, sv)| (sv.name.as_str(), r.cpus.len() + i))
        .collect();
    let ry = |i: usize| y0 + i as f64 * (row + gap);
    for (i, c) in r.cpus.iter().enumerate() {
        let _ = writeln!(
            s,
            "<text x=\"10\" y=\"{:.1}\">cpu {}</text>",
            ry(i) + 15.0,
            c.cpu
        );
        let _ = writeln!(
            s,
            "<rect x=\"{left}\" y=\"{:.1}\" width=\"{width}\" height=\"{row}\" fill=\"#f4f4f4\"/>",
            ry(i)
        );
    }
    for (i, sv) in r.servers.iter().enumerate() {
        let yy = ry(r.cpus.len() + i);
        let _ = writeln!(
            s,
            "<text x=\"10\" y=\"{:.1}\">{}</text>",
            yy + 15.0,
            esc(&sv.name)
        );
        let _ = writeln!(s, "<rect x=\"{left}\" y=\"{yy:.1}\" width=\"{width}\" height=\"{row}\" fill=\"#fafafa\"/>");
    }
    for t in &tr.throttles {
        if let Some(&i) = server_row.get(t.server.as_str()) {
            let _ = writeln!(
                s,
                "<rect x=\"{:.2}\" y=\"{:.1}\" width=\"{:.2}\" height=\"{row}\" fill=\"url(#thr)\" opacity=\"0.6\"><title>{} throttled {}-{} ms</title></rect>",
                x(t.start),
                ry(i),
                (x(t.end) - x(t.start)).max(0.5),
                esc(&t.server),
                ms(t.start),
                ms(t.end)
            );
        }
    }
    for seg in &tr.segments {
        let c = color(task_idx.get(seg.task.as_str()).copied().unwrap_or(0));
        let w = (x(seg.end) - x(seg.start)).max(0.3);
        let title = format!(
            "{} on cpu {} via {} {}-{} ms",
            seg.task,
            seg.cpu,
            seg.server.as_deref().unwrap_or("background"),
            ms(seg.start),
            ms(seg.end)
        );
        if let Some(&i) = cpu_row.get(&seg.cpu) {
            let _ = writeln!(
                s,
                "<rect x=\"{:.2}\" y=\"{:.1}\" width=\"{w:.2}\" height=\"{row}\" fill=\"{c}\"><title>{}</title></rect>",
                x(seg.start),
                ry(i),
                esc(&title)
            );
        }
        if let Some(&i) = seg.server.as_deref().and_then(|sv| server_row.get(sv)) {
            let _ = writeln!(
                s,
                "<rect x=\"{:.2}\" y=\"{:.1}\" width=\"{w:.2}\" height=\"{:.1}\" fill=\"{c}\"><title>{}</title></rect>",
                x(seg.start),
                ry(i) + 4.0,
                row - 8.0,
                esc(&title)
            );
        }
    }
    let bottom = ry(rows);
    for (task, at) in &tr.misses {
        let _ = writeln!(
            s,
            "<path d=\"M{:.2},{:.1} l-4,8 l8,0 z\" fill=\"#d00\"><title>{} missed its deadline ({} ms)</title></path>",
            x(*at),
            bottom,
            esc(task),
            ms(*at)
        );
    }
    // Time axis.
    let _ = writeln!(
        s,
        "<line x1=\"{left}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>",
        bottom + 12.0,
        left + width,
        bottom + 12.0
    );
    for k in 0..=10u64 {
        let t = until / 10 * k;
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x(t),
            bottom + 26.0,
            ms(t)
        );
    }
    for (i, t) in r.tasks.iter().enumerate() {
        let lx = 10.0 + (i % 8) as f64 * 165.0;
        let ly = bottom + 40.0 + (i / 8) as f64 * 18.0;
        let _ = writeln!(
            s,
            "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            ly - 10.0,
            color(i),
            lx + 16.0,
            ly,
            esc(&t.name)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{simulate, SimOptions};
    use rtbox_model::{BoxSpec, Interface, Platform, System, TaskSpec};

    fn report() -> SimReport {
        let b = BoxSpec::new(
            "b",
            Interface::PerCpu {
                budget: 3,
                period: 6,
            },
        );
        let mut t = TaskSpec::periodic("t", 4, 10);
        t.box_name = Some("b".into());
        let system = System::new(Platform::with_cpus(1), vec![b], vec![t]).unwrap();
        let opts = SimOptions {
            duration: 30,
            record_jobs: true,
            record_trace: true,
            ..SimOptions::default()
        };
        simulate(&system, &opts).unwrap()
    }

    #[test]
    fn csv_has_one_line_per_job() {
        let r = report();
        let mut out = Vec::new();
        write_jobs_csv(&r, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + r.jobs.as_ref().unwrap().len());
        assert!(lines[1].starts_with("t,0,0,0,10,4,"), "{}", lines[1]);
    }

    #[test]
    fn chrome_trace_is_valid_json_with_segments() {
        let r = report();
        let v = chrome_trace(&r);
        let text = serde_json::to_string(&v).unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        let evs = back["traceEvents"].as_array().unwrap();
        assert!(evs.iter().any(|e| e["ph"] == "X" && e["cat"] == "job"));
        assert!(evs.iter().any(|e| e["cat"] == "throttle"));
    }

    #[test]
    fn gantt_is_an_svg_with_rows() {
        let svg = gantt_svg(&report());
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("cpu 0") && svg.contains("b@0") && svg.contains("url(#thr)"));
        assert_eq!(svg.matches("<svg").count(), 1);
    }

    #[test]
    fn summary_lists_everything() {
        let text = summary_table(&report());
        assert!(
            text.contains("model rtbox") && text.contains("b@0") && text.contains("preemptions")
        );
    }
}
