//! Issue 4: the core stays pure (no I/O, no clocks, no threads) and depends only on the model.

use std::fs;
use std::path::Path;

#[test]
fn core_depends_only_on_the_model() {
    let manifest = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .expect("read Cargo.toml");
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .expect("a [dependencies] section")
        .split("\n[")
        .next()
        .unwrap_or("");
    let names: Vec<&str> = deps
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split('=').next().map(str::trim))
        .collect();
    assert_eq!(
        names,
        vec!["rtbox-model"],
        "rtbox-core may depend on rtbox-model only"
    );
}

#[test]
fn core_sources_use_no_io_clock_or_threads() {
    let forbidden = [
        "std::time",
        "std::thread",
        "std::fs",
        "std::io",
        "std::net",
        "std::process",
        "std::env",
        "std::sync",
        "Instant",
        "SystemTime",
        "println!",
        "eprintln!",
    ];
    // Every source file, submodule directories included.
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    let mut files = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    let mut checked = 0;
    for path in files {
        let text = fs::read_to_string(&path).expect("read source");
        for word in forbidden {
            assert!(
                !text.contains(word),
                "{} uses {word}: the core must stay pure",
                path.display()
            );
        }
        checked += 1;
    }
    assert!(
        checked >= 5,
        "expected the core's source files, found {checked}"
    );
}
