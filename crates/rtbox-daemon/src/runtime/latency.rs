//! The CPU latency limit the runtime holds while it has boxes (`--cpu-latency-us`): idle CPUs
//! then poll instead of halting, so the loop, the backstops and the members wake fast and
//! cheaply (`rtbox_linux::cpulatency` has the measurements). The kernel drops the request
//! with the daemon's file descriptor, so a crash leaves no limit behind.

use rtbox_linux::cpulatency::CpuLatencyHold;

/// What the runtime asks of the CPUs' idle states, and whether it holds it now.
#[derive(Debug, Default)]
pub struct IdleLatency {
    /// The limit to hold while there are boxes; `None`: leave idle states alone.
    want: Option<u32>,
    hold: Option<CpuLatencyHold>,
    /// Why the last attempt to hold failed (shown by status; the runtime runs on without).
    failed: Option<String>,
}

impl IdleLatency {
    pub fn new(want: Option<u32>) -> Self {
        IdleLatency {
            want,
            hold: None,
            failed: None,
        }
    }

    /// Holds the limit while `boxes`, releases it otherwise. A refusal by the kernel is logged
    /// once and tried again at the next box change.
    pub fn keep(&mut self, boxes: bool) {
        match (self.want, boxes, self.hold.is_some()) {
            (Some(us), true, false) => match CpuLatencyHold::hold(us) {
                Ok(h) => {
                    tracing::info!(
                        limit_us = us,
                        "holding the CPU latency limit while boxes exist"
                    );
                    self.hold = Some(h);
                    self.failed = None;
                }
                Err(e) => {
                    if self.failed.is_none() {
                        tracing::warn!(error = %e, "cannot hold the CPU latency limit; wake-ups from idle stay slow");
                    }
                    self.failed = Some(e.to_string());
                }
            },
            (_, false, true) => {
                tracing::info!("no boxes: CPU latency limit released");
                self.hold = None;
            }
            _ => {}
        }
    }

    /// The limit held now, if any.
    pub fn held_us(&self) -> Option<u32> {
        self.hold.as_ref().map(CpuLatencyHold::limit_us)
    }

    /// For `rtbox status`: the limit asked for, whether it is held, and why not.
    pub fn status(&self) -> serde_json::Value {
        serde_json::json!({
            "limit_us": self.want,
            "held": self.hold.is_some(),
            "error": self.failed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_held_without_a_limit_or_without_boxes() {
        let mut off = IdleLatency::new(None);
        off.keep(true);
        assert_eq!(off.held_us(), None);
        assert_eq!(off.status()["held"], false);
        let mut l = IdleLatency::new(Some(0));
        l.keep(false);
        assert_eq!(l.held_us(), None);
    }

    /// As root on a machine with the device: held with boxes, released when the last goes.
    #[test]
    fn the_limit_follows_the_boxes() {
        if !rtbox_linux::is_root()
            || !std::path::Path::new(rtbox_linux::cpulatency::DEVICE).exists()
        {
            eprintln!("skipped: needs root and the CPU latency device");
            return;
        }
        let mut l = IdleLatency::new(Some(0));
        l.keep(true);
        assert_eq!(l.held_us(), Some(0));
        assert_eq!(rtbox_linux::cpulatency::effective().unwrap(), 0);
        l.keep(false);
        assert_eq!(l.held_us(), None);
        assert_eq!(l.status()["held"], false);
    }
}
