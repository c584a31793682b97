#!/usr/bin/env bash
# Issue 19: why the members' band goes below threaded interrupts on PREEMPT_RT. cyclictest at
# SCHED_FIFO 50 pinned to CPU 1 stands in for an interrupt thread (PREEMPT_RT runs every handler
# as a FIFO 50 thread); a box of 50/100 ms on CPU 1 runs a busy hog. With the band 40-89 the
# hog's priority (89) is above the "interrupt", which waits for the box's budget; with
# --priorities 10-49 the "interrupt" preempts the box at once, and the box still gets its 0.5.
# Holds the machine-wide real-runtime lock. Root only.
# usage: experiments/runtime-irq-band.sh [LOOPS]   (1 ms interval, default 5000 loops)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "runtime-irq-band: needs root; skipped"; exit 0; fi
command -v cyclictest >/dev/null || { echo "runtime-irq-band: cyclictest not installed (apt-get install rt-tests); skipped"; exit 0; }
LOOPS=${1:-5000}
cargo build --release -q -p rtbox-cli
R=target/release/rtbox
run() {
  local band=$1 D
  D=$(mktemp -d)
  $R daemon --socket $D/sock --state $D/state.json --priorities "$band" 2>$D/log & local DPID=$!
  for i in $(seq 50); do [ -S $D/sock ] && break; sleep 0.1; done
  $R box create B --socket $D/sock --budget 50ms --period 100ms --cpus 1 >/dev/null
  $R exec B --socket $D/sock -- sh -c 'while :; do :; done' & local HOG=$!
  sleep 0.5
  local hogpid
  hogpid=$(pgrep -P $HOG -f 'while' || echo $HOG)
  local c0 t0 c1 t1 out
  c0=$(awk '{print $1}' /proc/$hogpid/schedstat); t0=$(date +%s%N)
  out=$(cyclictest -m -t1 -a 1 -p 50 -i 1000 -l $LOOPS -q | grep -E "T: 0")
  c1=$(awk '{print $1}' /proc/$hogpid/schedstat); t1=$(date +%s%N)
  kill $HOG 2>/dev/null || true; kill $hogpid 2>/dev/null || true
  kill $DPID; wait $DPID 2>/dev/null || true; rm -rf $D
  echo "| $band | $(echo "$out" | sed -E 's/.*Min: *([0-9]+).*Avg: *([0-9]+).*Max: *([0-9]+).*/\1 | \2 | \3/') | $(awk -v c=$((c1-c0)) -v t=$((t1-t0)) 'BEGIN{printf "%.4f", c/t}') |"
}
echo "| members' band | 'interrupt' (FIFO 50) latency min us | avg us | max us | box CPU (0.5 reserved) |"
echo "|---|---|---|---|---|"
export -f run; export R LOOPS
flock /tmp/rtbox-realtime.lock bash -c 'run 40-89; run 10-49'
