#!/usr/bin/env bash
# Issue 19: the HCBS suite's cases as rtbox experiments, full durations (default 10 s per
# case): hog bandwidth for 1-4 hogs on 1-2 CPUs across runtime/period pairs, a box beside
# an unmanaged SCHED_FIFO hog, and MPR-sized random task sets at 0.9 of the platform (3 seeds)
# with their per-period budget overruns. Holds the machine-wide real-runtime lock (once per
# binary, so others can take their turn in between). Needs root.
# Usage: bash experiments/runtime-hcbs.sh [SECONDS] [mpr]   (mpr: only the MPR case)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
cargo build --release -q -p rtbox-harness --example hcbs --example hcbs_mpr
if [ "${2:-}" != mpr ]; then
    flock /tmp/rtbox-realtime.lock target/release/examples/hcbs "$secs"
    echo
fi
flock /tmp/rtbox-realtime.lock target/release/examples/hcbs_mpr "$secs" 3
