//! Fast cgroup migrations for new members: the daemon mounts the v2 hierarchy with
//! `favordynmods` while it runs (see `rtbox_linux::dynmods` for the measured why), and takes
//! the option back at a clean stop if it set it. A crash leaves it on, which changes no thread
//! and no cgroup, only the cost of moves (lower) and forks (slightly higher).

use rtbox_linux::cgroup::Layout;
use rtbox_linux::dynmods;

/// Turns `favordynmods` on; whether this call did (so the stop takes it back).
pub fn favor(layout: &Layout) -> bool {
    let Some(v2) = layout.v2.as_deref() else {
        return false;
    };
    match dynmods::favored(v2) {
        Ok(true) => false,
        Ok(false) => match dynmods::set(v2, true) {
            Ok(()) => {
                tracing::info!(mount = %v2.display(), "cgroup v2 remounted with favordynmods (member threads move without an RCU grace period)");
                true
            }
            Err(e) => {
                tracing::warn!(mount = %v2.display(), error = %e, "cannot set favordynmods; new members may wait tens of ms for their cgroup move");
                false
            }
        },
        Err(e) => {
            tracing::warn!(error = %e, "cgroup v2 mount options unreadable");
            false
        }
    }
}

/// Takes `favordynmods` back if [`favor`] set it.
pub fn restore(layout: &Layout, set_here: bool) {
    if let (true, Some(v2)) = (set_here, layout.v2.as_deref()) {
        if let Err(e) = dynmods::set(v2, false) {
            tracing::warn!(mount = %v2.display(), error = %e, "cannot take favordynmods back");
        }
    }
}
