#!/usr/bin/env bash
# Seed 001 (ExSched) Figure 11 on the real kernel, 2 CPUs: random task sets drawn as the seed
# did (per-task utilization uniform in [10 %, 100 %], periods uniform in [1, 100] ms,
# implicit deadlines, DM priorities), each run under fp, fp-ff, fp-pm, g-fp and fp-us in one
# plug-in box of the real daemon (4.4 ms / 5 ms on CPUs 0-1, alpha 0.88: the largest box
# admitted here; see rtbox_harness::exsched), one thread per task through the C periodic-task
# API (experiments/exsched-set.c, each job burning its WCET of thread CPU time), beside a
# FIFO 99 canary per CPU; the same sets in the simulator, in the same box and on whole CPUs.
# Root only. The machine-wide real-time lock is taken by the runner itself for each chunk
# (do NOT wrap this script in flock): a chunk stops starting runs after CHUNK_S seconds, and
# rows already in OUTDIR/real.csv are skipped, so repeated calls continue the sweep.
# Usage: experiments/exsched-fig11-real.sh [OUTDIR] [FIRST_SET] [SETS] [RUN_MS] [CHUNK_S]
#        (default target/experiments/exsched-real 0 8 1500 520; a run takes ~2 s, 7 points x 5 plug-ins per set)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "exsched-fig11-real: needs root; skipped"; exit 0; fi
command -v cc >/dev/null || { echo "exsched-fig11-real: no C compiler (cc); skipped"; exit 0; }
OUT=${1:-target/experiments/exsched-real}; FIRST=${2:-0}; SETS=${3:-8}; MS=${4:-1500}; CHUNK=${5:-520}
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
cargo build --release -q -p rtbox-cli -p rtbox-c
cargo build --release -q -p rtbox-harness --example exsched_real
mkdir -p "$OUT"
cc -O2 -Wall -pthread experiments/exsched-set.c -I crates/rtbox-c/include -L target/release -lrtbox -o "$OUT/exsched-set"
target/release/examples/exsched_real run "$PWD/target/release/rtbox" "$OUT/exsched-set" "$OUT" "$FIRST" "$SETS" "$MS" "$CHUNK"
target/release/examples/exsched_real plot "$OUT"
echo "plot: $OUT/fig11-real-m2.svg, rows: $OUT/real.csv"
