#!/usr/bin/env bash
# Issue 16: overhead of the periodic-task API (librtbox) on this machine. Prints the cost of
# every call (wall time; the socket calls include the daemon's answer, which waits for its
# loop), the CPU cost of rt_wait_for_period against a bare clock_gettime + clock_nanosleep,
# and the release latency (jitter) of rt_wait_for_period against a plain clock_nanosleep
# loop, both in the same box, and of the plain loop outside any box at FIFO 50.
# Root only; real-time: run it as `flock /tmp/rtbox-realtime.lock experiments/api-overhead.sh`.
# usage: experiments/api-overhead.sh [CYCLES] [PERIODS] [PERIOD_US]   (default 200 5000 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "api-overhead: needs root; skipped"; exit 0; fi
command -v cc >/dev/null || { echo "api-overhead: no C compiler (cc); skipped"; exit 0; }
CYCLES=${1:-200}; N=${2:-5000}; T=${3:-1000}
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
cargo build --release -q -p rtbox-cli -p rtbox-c
R=target/release/rtbox
D=$(mktemp -d)
cc -O2 -Wall experiments/api-overhead.c -I crates/rtbox-c/include -L target/release -lrtbox -o $D/ovh
$R daemon --socket $D/sock --state $D/state.json 2>$D/log & DPID=$!
trap 'kill $DPID 2>/dev/null; wait $DPID 2>/dev/null; rm -rf $D' EXIT
for i in $(seq 50); do [ -S $D/sock ] && break; sleep 0.1; done
# Half of CPU 1 every 2 ms: the 100 us jobs and the loop's steps fit with room.
$R box create B --socket $D/sock --budget 1ms --period 2ms --cpus 1 --policy fifo
export RTBOX_SOCKET=$D/sock RTBOX_BOX=B LD_LIBRARY_PATH=$PWD/target/release
echo "kernel $(uname -r), $(nproc) CPUs; box B 1 ms / 2 ms on CPU 1"
echo
echo "| call | n | p50 us | p99 us | max us |"
echo "|---|---|---|---|---|"
$D/ovh calls "$CYCLES"
$D/ovh wait 20000
echo
echo "Release latency (start of the job - its nominal release), $N periods of $T us, 100 us work:"
echo
echo "| loop | n | p50 us | p99 us | max us |"
echo "|---|---|---|---|---|"
chrt -f 50 taskset -c 1 $D/ovh plain "$N" "$T" | sed 's/^| plain clock_nanosleep loop: /| no box, FIFO 50 on CPU 1: plain clock_nanosleep loop: /' > $D/outside
$R exec B --socket $D/sock -- $D/ovh plain "$N" "$T" | sed 's/^| plain/| in box B: plain/' > $D/plain
$D/ovh api "$N" "$T" | sed 's/^| rt_wait/| in box B: rt_wait/' > $D/api
grep -h "release latency" $D/outside $D/plain
$R status --json --socket $D/sock | python3 -c '
import json, sys
t = [t for t in json.load(sys.stdin)["tasks"] if t["period_ns"] != 1000][-1]
us = lambda v: "%.2f" % (v / 1e3)
print("| rt_wait_for_period in box B (daemon figures: %d released, %d completed, %d misses, %d unsampled) | %d | %s | %s | %s |" % (
    t["released"], t["completed"], t["misses"], t["unsampled"], t["samples"],
    us(t["latency_p50_ns"]), us(t["latency_p99_ns"]), us(t["latency_max_ns"])))'
echo
echo "CPU time of the periodic step itself (thread CPU clock around the wait, sleep included):"
echo
echo "| loop | n | p50 us | p99 us | max us |"
echo "|---|---|---|---|---|"
grep -h "CPU time per period step" $D/outside $D/plain $D/api
echo
echo "The machine itself (cyclictest, FIFO 99, 1 ms, both CPUs, 10 s, while idle):"
if command -v cyclictest >/dev/null; then
  cyclictest -m -t2 -a 0,1 -p 99 -i 1000 -D 10 -q 2>&1 | grep -E "^T:" | sed -E 's/.*(T: [0-9]).*Min: *([0-9]+).*Avg: *([0-9]+).*Max: *([0-9]+).*/\1 min \2 avg \3 max \4 us/'
else
  echo "cyclictest not installed (rt-tests)"
fi
