#!/usr/bin/env bash
# A schedulability sweep: 4 CPUs with a 9.5 ms / 10 ms server each (one global fifo box),
# 10 tasks per set (RandFixedSum, log-uniform periods 10-100 ms), 200 sets per point; the
# analysis verdict against simulation of rtbox and of plain global FP.
# Writes sweep.csv and sweep.svg into OUTDIR (default target/experiments).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
out="${1:-target/experiments}"
mkdir -p "$out"
cargo build --quiet --release -p rtbox-cli
start=$(date +%s.%N)
./target/release/rtbox sweep --cpus 4 --utilizations 0.5:3.75:0.25 --sets 200 --tasks 10 \
    --evaluate analysis,sim,sim-fp --csv "$out/sweep.csv" --svg "$out/sweep.svg"
end=$(date +%s.%N)
cat "$out/sweep.csv"
echo "wall time: $(echo "$end - $start" | bc) s for $((14 * 200)) task sets x 3 judges"
echo "plot: $out/sweep.svg"
