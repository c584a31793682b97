#!/usr/bin/env bash
# Issue 4 scenario 5: analysis agrees with simulation on random boxes.
# Draws BOXES random boxes (default 3000: BDM / MPR / per-CPU servers, fifo / edf, global /
# pinned, 1-4 CPUs), simulates every box `rtbox analyze` declares schedulable with synchronous
# WCET releases and with a random sporadic variant, and prints the figures. Exits 1 on any
# deadline miss or response time above an analysis bound in a schedulable box.
# PROFILE "stress" draws boxes near the analysis limit with periods of 2-50 ms.
# Usage: experiments/agreement.sh [BOXES] [SEED] [standard|stress]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
cargo run --quiet --release -p rtbox-experiment --example agreement -- "${1:-3000}" "${2:-2026}" "${3:-standard}"
