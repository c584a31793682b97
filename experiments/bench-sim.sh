#!/bin/sh
# Issue 4 benchmark: the standard scenario (8 CPUs, 8 BDM boxes with global placement, 100
# periodic tasks, log-uniform periods in [1 ms, 100 ms], about 75 % utilization). Prints events per
# CPU second, simulated seconds per CPU second and peak memory for a tenth of the duration and for
# the full duration (memory must not grow).
# Usage: experiments/bench-sim.sh [SECONDS] [MODEL]   (default 3600 s, rtbox; takes minutes)
set -e
cd "$(dirname "$0")/.."
exec cargo run --quiet --release -p rtbox-sim --example bench_sim -- "${1:-3600}" "${2:-rtbox}"
