#!/usr/bin/env bash
# Issue 17: global EDF on MPR boxes, the limited carry-in test (Shin, Easwaran & Lee 2008)
# beside rtbox's BCL-interference test. Draws SETS random implicit-deadline sets on MPR(Pi,
# Theta, m = 2..4) boxes (default 1500), prints how many each test and their union accept, and
# simulates every accepted set on fully loaded CPUs where an adversary box forces the PRM's
# worst blackout on every vCPU at once (synchronous, at-the-blackout and sporadic releases).
# Exits 1 on any deadline miss of an accepted set.
# Tasks per set: 2m..5m (default) or m+1..3m+2 with "few".
# Usage: experiments/carry-in.sh [SETS] [SEED] [MAX_SIMULATED_MS_PER_RUN] [few]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
cargo run --quiet --release -p rtbox-experiment --example carry_in -- "${1:-1500}" "${2:-2026}" "${3:-4000}" "${4:-many}"
