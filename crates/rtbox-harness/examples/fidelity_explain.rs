//! Explains the deadline misses of fidelity runs from their kept records
//! (`RTBOX_FIDELITY_KEEP=DIR experiments/fidelity.sh ...`): `fidelity_explain DIR`, for every
//! `DIR/set-N/` with a miss, prints per set the misses outside stalls by the window rule
//! ([`fidelity::during_stall`] over the level busy period) and, for each, the most the canary's
//! stalls can explain once a charged stall's payback is counted ([`fidelity::stall_bound`]).
//! No root, no lock: it only reads files.

use std::path::Path;

use rtbox_harness::fidelity::{during_stall, stall_bound, Late};
use rtbox_model::Interface;

fn read_canary(dir: &Path) -> Vec<Late> {
    std::fs::read_to_string(dir.join("canary.txt"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            (v.len() == 3).then(|| Late {
                cpu: v[0] as u32,
                due: v[1],
                late: v[2],
            })
        })
        .collect()
}

fn main() {
    let Some(root) = std::env::args().nth(1) else {
        eprintln!("usage: fidelity_explain DIR");
        std::process::exit(2);
    };
    let mut sets: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(&root)
        .expect("records directory")
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            Some((n.strip_prefix("set-")?.parse().ok()?, e.path()))
        })
        .collect();
    sets.sort();
    println!("| set | misses | outside stalls (window rule) | largest such lateness ms | stall bound of that miss ms (payback counted) | beyond the bound |");
    println!("|---|---|---|---|---|---|");
    for (i, dir) in sets {
        let Ok(misses) = std::fs::read_to_string(dir.join("misses.txt")) else {
            continue;
        };
        let Ok(system) = std::fs::read_to_string(dir.join("set.toml"))
            .map_err(|e| e.to_string())
            .and_then(|t| rtbox_config::parse_str(&t).map_err(|e| e.to_string()))
        else {
            continue;
        };
        let late = read_canary(&dir);
        let (mut n, mut own, mut beyond) = (0, 0, 0);
        let mut worst: Option<(u64, u64)> = None;
        for line in misses.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [task, r, e, b] = f[..] else { continue };
            let (Ok(r), Ok(e), Ok(b)) = (r.parse::<u64>(), e.parse::<u64>(), b.parse::<u64>())
            else {
                continue;
            };
            let Some(t) = system.tasks.iter().find(|t| t.name == task) else {
                continue;
            };
            let b = b.min(r);
            let lateness = e.saturating_sub(r + t.deadline);
            n += 1;
            if during_stall(b, e, lateness, &late) {
                continue;
            }
            own += 1;
            let bx = t.box_name.as_deref().and_then(|n| system.get(n));
            let cpus: Vec<(u32, f64)> = bx
                .map(|bx| {
                    let alpha = match &bx.spec.interface {
                        Interface::Bdm { alpha, .. } => alpha.as_f64(),
                        _ => 1.0,
                    };
                    bx.cpus.iter().map(|c| (c, alpha)).collect()
                })
                .unwrap_or_default();
            let bound = stall_bound(b, e, &late, &cpus);
            if lateness > bound {
                beyond += 1;
            }
            if worst.is_none_or(|(l, _)| lateness > l) {
                worst = Some((lateness, bound));
            }
        }
        if own == 0 {
            continue;
        }
        let (l, bound) = worst.unwrap_or_default();
        println!(
            "| {i} | {n} | {own} | {:.1} | {:.1} | {beyond} |",
            l as f64 / 1e6,
            bound as f64 / 1e6
        );
    }
}
