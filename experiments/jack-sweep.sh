#!/bin/sh
# Issue 4, scenario 4: seed 004's JACK pipeline, group reservation vs per-thread deadline
# reservations. Prints both sweeps and the smallest bandwidth that meets every deadline.
# Usage: experiments/jack-sweep.sh [SECONDS]   (default 10 s simulated per point)
set -e
cd "$(dirname "$0")/.."
exec cargo run --quiet --release -p rtbox-sim --example jack_sweep -- examples/jack-pipeline.toml "${1:-10}"
