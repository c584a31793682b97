#!/usr/bin/env bash
# Seed 001 (ExSched) Figure 11 in the simulator: the fraction of random task sets (the seed's
# generator: per-task utilization uniform in [Umin, Umax], period uniform in [1, 100] ms,
# implicit deadlines, DM priorities, tasks added until the total reaches W) that meet every
# deadline under the plug-ins fp, fp-ff, fp-pm, g-fp and fp-us, on 2, 4 and 8 CPUs.
# Usage: experiments/exsched-fig11.sh [OUTDIR] [SETS_PER_POINT] [SIMULATED_MS_PER_SET]
# Writes OUTDIR/fig11-m<CPUs>-u<Umin>-<Umax>.{csv,svg} (default target/experiments/exsched).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
out="${1:-target/experiments/exsched}"
sets="${2:-100}"
sim_ms="${3:-1000}"
cargo run --quiet --release -p rtbox-experiment --example exsched_fig11 -- "$out" "$sets" "$sim_ms"
echo "plots: $out/fig11-*.svg"
