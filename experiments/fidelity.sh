#!/usr/bin/env bash
# Fidelity of analysis-sized boxes on the real kernel (issue 20): random periodic task sets,
# in turn in a global FIFO box, two pinned FIFO boxes (one per CPU, first-fit partition) and a
# global EDF box, each box sized by rtbox's BDM synthesis for WCETs MARGIN % larger
# than the workload runs, admitted by the daemon, run with `rtbox load` (every job exactly its
# WCET of thread CPU time; WORKLOAD=rt-app: rt-app's calibrated loops) beside one unmanaged hog per CPU
# (scripts/busy.sh), a SCHED_FIFO 99 canary per CPU and /proc/stat steal; each miss is
# classified as during a machine stall or rtbox's; `rtbox sim` of the same set beside it.
# Sets run in chunks of CHUNK; each chunk takes the machine-wide real-runtime lock once.
# WORK (rt-app only): rt-app's jobs run WORK % of each nominal WCET (its calibrated loops ran
# 1.6-2.0 times slower beside load, which a box sized for the nominal WCET cannot absorb).
# usage: experiments/fidelity.sh [SETS=120] [SECS=3] [MARGIN=10] [SEED=2026] [CHUNK=20] [WORK=100] [WORKLOAD=load|rt-app]
set -euo pipefail
cd "$(dirname "$0")/.."
sets=${1:-120} secs=${2:-3} margin=${3:-10} seed=${4:-2026} chunk=${5:-20} work=${6:-100} workload=${7:-load}
if [[ $(id -u) != 0 ]]; then echo "fidelity: needs root; skipped" >&2; exit 0; fi
if [[ $workload == rt-app ]] && ! command -v rt-app >/dev/null; then
    echo "fidelity: rt-app not installed; skipped" >&2
    exit 0
fi
cargo build --release -q -p rtbox-cli
cargo build --release -q -p rtbox-harness --example fidelity
echo "| set | boxes | tasks | U (nominal) | BDM alpha per box (Delta 5 ms, synthesized for WCET x (1 + margin)) | jobs | misses | outside stalls | canary worst ms | canary stalls > 2 ms | steal ms | CPU / WCET (largest job) | sim jobs | sim misses | misses outside stalls (task@start+lateness) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for ((first = 0; first < sets; first += chunk)); do
    n=$((sets - first < chunk ? sets - first : chunk))
    scripts/busy.sh target/release/examples/fidelity target/release/rtbox \
        "$first" "$n" "$secs" "$margin" "$seed" "$work" "$workload" 2>/dev/null
done
