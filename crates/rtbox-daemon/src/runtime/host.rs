//! The runtime's side of the host's own real-time work ([`crate::hostwatch`]): the members'
//! band chosen at start, the load every admission counts, and the check of the running boxes
//! when that load changes (a deadline task started later: new boxes are refused; running ones
//! keep running, with a warning and the refusal in status).

use rtbox_linux::hostthreads;
use rtbox_model::{admit_on_host, HostLoad, PrioRange, Refusal};

use super::Runtime;
use crate::hostwatch::{default_band, HostReport, HostWatch};

/// The host's watch and what the runtime decided from it.
pub struct HostState {
    pub watch: HostWatch,
    /// The members' SCHED_FIFO range.
    pub band: PrioRange,
    /// Why that band.
    pub band_reason: String,
    /// The load generation the running boxes were last checked against.
    checked: u64,
    /// The latest report the loop took (`HostWatch::fresh`), and its publication number.
    cached: HostReport,
    seen: u64,
    /// Refusals of the running boxes under the latest load (empty: they fit).
    pub over: Vec<Refusal>,
    /// The members' change count the scanner's copy of the member set was made at.
    shared: Option<u64>,
}

impl HostState {
    /// Chooses the band (configured, else [`default_band`] from the host's threads) and starts
    /// the watch, whose first scan is done before this returns.
    pub fn start(configured: Option<PrioRange>, online: rtbox_model::CpuSet) -> HostState {
        let (band, band_reason) = match configured {
            Some(b) => (b, "configured".to_string()),
            None => {
                let threads = hostthreads::scan_host(&|_| false, &|_| false).unwrap_or_default();
                default_band(hostthreads::all_interrupts_threaded(), &threads)
            }
        };
        tracing::info!(band = %band, reason = %band_reason, "members' SCHED_FIFO band");
        let watch = HostWatch::start(band, online);
        let cached = watch.report();
        let seen = watch.published();
        let checked = cached.generation;
        for (cpu, h) in &cached.load.cpus {
            if h.deadline_tasks > 0 {
                tracing::info!(
                    cpu,
                    deadline = %h.deadline.format(4),
                    tasks = h.deadline_tasks,
                    "SCHED_DEADLINE tasks outside rtbox: counted before boxes"
                );
            }
        }
        HostState {
            watch,
            band,
            band_reason,
            checked,
            cached,
            seen,
            over: Vec::new(),
            shared: None,
        }
    }

    /// Hands the scanner the member set when it changed (O(members), only then).
    pub fn share_members(&mut self, members: &super::members::Members) {
        if self.shared == Some(members.changes) {
            return;
        }
        let tids = std::sync::Arc::new(members.by_tid.keys().copied().collect());
        if self.watch.set_members(tids) {
            self.shared = Some(members.changes);
        }
    }

    /// Takes the scanner's latest report if there is a new one and its lock is free.
    fn refresh(&mut self) {
        if let Some((r, n)) = self.watch.fresh(self.seen) {
            self.cached = r;
            self.seen = n;
        }
    }

    /// The load admission counts now.
    pub fn load(&mut self) -> HostLoad {
        self.refresh();
        self.cached.load.clone()
    }

    /// The latest report, for status and metrics.
    pub fn report(&self) -> &HostReport {
        &self.cached
    }
}

impl Runtime {
    /// When the host's load changed since the last check, admits the running boxes again under
    /// it; a refusal is logged once per change and kept for status (the boxes keep running:
    /// stopping a reservation because someone else started a deadline task would be worse).
    pub(super) fn check_host(&mut self) {
        self.host.refresh();
        let generation = self.host.cached.generation;
        if generation == self.host.checked {
            return;
        }
        self.host.checked = generation;
        let adm = admit_on_host(&self.system, self.loop_cost(), &self.host.cached.load);
        let over: Vec<Refusal> = adm
            .refusals
            .into_iter()
            .filter(|r| matches!(r, Refusal::HostOverCap { .. }))
            .collect();
        for r in &over {
            tracing::warn!(refusal = %r, "the host's own real-time work no longer leaves the running boxes their reservations; new boxes are refused until it fits");
        }
        if over.is_empty() && !self.host.over.is_empty() {
            tracing::info!("the running boxes fit beside the host's real-time work again");
        }
        self.host.over = over;
    }

    /// The host's real-time work and the band, as status shows them.
    pub fn host_status(&self) -> serde_json::Value {
        let mut v = self.host.report().to_json();
        v["band_reason"] = self.host.band_reason.clone().into();
        v["over"] = self
            .host
            .over
            .iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .into();
        v
    }

    /// The latest report of the host's real-time threads.
    pub fn host_report(&self) -> HostReport {
        self.host.report().clone()
    }

    /// How many refusals the running boxes have under the host's current load.
    pub fn host_over(&self) -> usize {
        self.host.over.len()
    }

    /// The members' SCHED_FIFO range.
    pub fn band(&self) -> PrioRange {
        self.host.band
    }
}
