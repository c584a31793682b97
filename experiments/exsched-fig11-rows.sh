#!/usr/bin/env bash
# The 20 Figure 11 runs of session 12 that missed outside every canary stall while the
# simulator met every deadline (rows of docs/figures/exsched/fig11-real-m2.csv), run again:
# each set under its plug-in RUNS times, with the daemon's SENSOR (perf, bpf). One line per row:
# `load set plug-in: misses/outside-stalls` per run (docs/exsched.md, "The misses outside
# stalls, found"). Root; takes the machine-wide real-time lock per row (`exsched_real one`).
# usage: experiments/exsched-fig11-rows.sh [SENSOR=perf] [RUNS=2] [MS=1500]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "exsched-fig11-rows: needs root; skipped"; exit 0; fi
command -v cc >/dev/null || { echo "exsched-fig11-rows: no C compiler (cc); skipped"; exit 0; }
SENSOR=${1:-perf}; RUNS=${2:-2}; MS=${3:-1500}
cargo build --release -q -p rtbox-cli -p rtbox-c
cargo build --release -q -p rtbox-harness --example exsched_real
DIR=$(mktemp -d /tmp/rtbox-fig11-rows.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
cc -O2 -Wall -pthread experiments/exsched-set.c -I crates/rtbox-c/include -L target/release -lrtbox -o "$DIR/exsched-set"
for row in "0.8 0 fp-us" "0.9 0 fp-us" "0.5 1 fp" "0.5 1 fp-us" "0.6 1 fp-ff" "0.8 1 fp" \
  "0.7 2 fp" "0.7 2 g-fp" "0.7 2 fp-us" "0.7 3 fp" "0.7 3 g-fp" "0.7 3 fp-us" "0.8 3 fp" \
  "0.7 4 fp" "0.9 4 fp" "0.8 5 fp" "0.6 6 fp" "0.8 6 fp" "0.9 7 g-fp" "0.9 7 fp-us"; do
  set -- $row
  runs=$(target/release/examples/exsched_real one "$PWD/target/release/rtbox" "$DIR/exsched-set" "$1" "$2" "$3" "$MS" "$RUNS" "$SENSOR" |
    sed -nE 's/^run [0-9]+: [0-9]+ jobs, ([0-9]+) \(([0-9]+) outside stalls\).*/\1\/\2/p' | tr '\n' ' ')
  echo "$row: $runs"
done
