//! Builds the sensor's BPF object from `src/bpf/sensor.bpf.c` with clang (libbpf-cargo), CO-RE
//! against a `vmlinux.h` that bpftool dumps from the build machine's kernel BTF
//! (`/sys/kernel/btf/vmlinux`, or `RTBOX_VMLINUX_BTF`). Nothing pre-built is checked in.
//!
//! Without clang, bpftool or kernel BTF the crate still builds, with `rtbox_bpf_missing` set:
//! the sensor then refuses to load with a typed reason and the daemon uses its perf path.
//! With `RTBOX_REQUIRE_BPF=1` (the test suite on a machine with kernel BTF) a failed build is
//! an error instead: a program that stopped compiling would otherwise only leave a warning,
//! and every test would pass on the perf fallback.

use std::env;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

const SRC: &str = "src/bpf/sensor.bpf.c";

fn main() {
    println!("cargo:rustc-check-cfg=cfg(rtbox_bpf_missing)");
    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-changed=src/bpf/sensor.h");
    println!("cargo:rerun-if-env-changed=RTBOX_VMLINUX_BTF");
    println!("cargo:rerun-if-env-changed=RTBOX_REQUIRE_BPF");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    if let Err(why) = build(&out) {
        if env::var("RTBOX_REQUIRE_BPF").is_ok_and(|v| v == "1") {
            panic!("rtbox-bpf: BPF sensor not built and RTBOX_REQUIRE_BPF=1: {why}");
        }
        println!("cargo:warning=rtbox-bpf: BPF sensor not built ({why}); the daemon will use its perf sensor");
        println!("cargo:rustc-cfg=rtbox_bpf_missing");
        println!("cargo:rustc-env=RTBOX_BPF_MISSING={why}");
    }
}

fn build(out: &std::path::Path) -> Result<(), String> {
    let btf = env::var("RTBOX_VMLINUX_BTF").unwrap_or_else(|_| "/sys/kernel/btf/vmlinux".into());
    let dump = Command::new("bpftool")
        .args(["btf", "dump", "file", &btf, "format", "c"])
        .output()
        .map_err(|e| format!("bpftool: {e}"))?;
    if !dump.status.success() {
        return Err(format!(
            "bpftool btf dump {btf}: {}",
            String::from_utf8_lossy(&dump.stderr).trim()
        ));
    }
    let include = out.join("include");
    fs::create_dir_all(&include).map_err(|e| e.to_string())?;
    fs::write(include.join("vmlinux.h"), &dump.stdout).map_err(|e| e.to_string())?;
    let obj = out.join("sensor.bpf.o");
    libbpf_cargo::SkeletonBuilder::new()
        .source(SRC)
        .obj(&obj)
        .clang_args([
            "-Wall".to_string(),
            // Atomic fetch-and-add with a result (the per-server counts) needs BPF ISA v3.
            "-mcpu=v3".to_string(),
            format!("-I{}", include.display()),
        ])
        .build()
        .map_err(|e| format!("clang: {e:#}"))?;
    Ok(())
}
