#!/usr/bin/env bash
# Issue 19: the HCBS suite's cases as rtbox experiments, full durations (default 10 s per
# case): hog bandwidth for 1-4 hogs on 1-2 CPUs across runtime/period pairs, and a box beside
# an unmanaged SCHED_FIFO hog. Holds the machine-wide real-runtime lock. Needs root.
# Usage: bash experiments/runtime-hcbs.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
cargo build --release -q -p rtbox-harness --example hcbs
exec flock /tmp/rtbox-realtime.lock target/release/examples/hcbs "$secs"
