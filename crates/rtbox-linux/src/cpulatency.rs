//! The kernel's CPU latency QoS (`/dev/cpu_dma_latency`, the kernel's
//! Documentation/power/pm_qos_interface.rst): while a process keeps that device open with a
//! limit written to it, the idle governor chooses no idle state whose exit takes longer, on any
//! CPU. Closing the file, also by the kernel when the process dies (`kill -9` included), removes
//! the request: a hold cannot outlive its holder.
//!
//! Why the runtime holds one: on a virtual machine a thread woken on a halted vCPU pays the
//! halt's exit in its own CPU time. Measured on a 2-vCPU KVM guest (haltpoll, 6.18): a
//! SCHED_FIFO thread that only sleeps to an absolute time every 10 ms used 41-46 us of CPU per
//! wake-up and woke 104-110 us late; with a limit of 0 us, 9.5 us and 27 us. Cyclictest and
//! tuned's real-time profiles hold the same limit for the same reason. The price: idle CPUs poll
//! instead of halting (power on a laptop; the host sees a busy vCPU).
//!
//! Hand-written: the interface is one open and one 4-byte write; no maintained crate wraps it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::LinuxError;

/// The kernel's device for system-wide CPU latency requests.
pub const DEVICE: &str = "/dev/cpu_dma_latency";

/// A CPU latency request in force while this value lives.
#[derive(Debug)]
pub struct CpuLatencyHold {
    /// Open for the request's lifetime: the kernel drops the request when it is closed.
    _file: File,
    us: u32,
    path: PathBuf,
}

impl CpuLatencyHold {
    /// Asks that no CPU take longer than `us` microseconds to leave idle.
    pub fn hold(us: u32) -> Result<Self, LinuxError> {
        Self::hold_at(Path::new(DEVICE), us)
    }

    /// [`CpuLatencyHold::hold`] on another path (tests).
    pub fn hold_at(path: &Path, us: u32) -> Result<Self, LinuxError> {
        // The kernel takes a signed 32-bit value; larger limits are no limit at all.
        let value = i32::try_from(us).map_err(|_| {
            LinuxError::Invalid(format!(
                "CPU latency limit {us} us: at most {} us",
                i32::MAX
            ))
        })?;
        let mut file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| LinuxError::io(path, e))?;
        file.write_all(&value.to_ne_bytes())
            .map_err(|e| LinuxError::io(path, e))?;
        Ok(CpuLatencyHold {
            _file: file,
            us,
            path: path.to_path_buf(),
        })
    }

    /// The limit this hold asks for.
    pub fn limit_us(&self) -> u32 {
        self.us
    }

    /// The limit in force now: the least of every holder's request (the kernel's aggregate).
    pub fn effective_us(&self) -> Result<i32, LinuxError> {
        effective_at(&self.path)
    }
}

/// The CPU latency limit in force (microseconds; `i32::MAX`-like values: none).
pub fn effective() -> Result<i32, LinuxError> {
    effective_at(Path::new(DEVICE))
}

fn effective_at(path: &Path) -> Result<i32, LinuxError> {
    let mut buf = [0u8; 4];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(|e| LinuxError::io(path, e))?;
    Ok(i32::from_ne_bytes(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_writes_its_limit_as_the_kernel_reads_it() {
        let dir = std::env::temp_dir().join(format!("rtbox-cpulat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("dev");
        std::fs::write(&f, b"").unwrap();
        let h = CpuLatencyHold::hold_at(&f, 7).unwrap();
        assert_eq!(h.limit_us(), 7);
        assert_eq!(std::fs::read(&f).unwrap(), 7i32.to_ne_bytes());
        assert_eq!(h.effective_us().unwrap(), 7);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_limit_beyond_the_kernels_range_is_refused_and_nothing_is_opened() {
        let e = CpuLatencyHold::hold_at(Path::new("/nonexistent/rtbox"), u32::MAX).unwrap_err();
        assert!(e.to_string().contains("at most"), "{e}");
    }

    /// On the real device: a hold is the limit in force. (That its drop gives the limit back
    /// is the kernel's; other holders, such as daemons of tests running beside this one, make
    /// it unobservable here.)
    #[test]
    fn the_real_device_follows_the_hold() {
        if !crate::is_root() || !Path::new(DEVICE).exists() {
            eprintln!("skipped: needs root and {DEVICE}");
            return;
        }
        let h = CpuLatencyHold::hold(0).unwrap();
        assert_eq!(h.effective_us().unwrap(), 0);
        assert_eq!(effective().unwrap(), 0);
    }
}
