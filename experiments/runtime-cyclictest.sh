#!/usr/bin/env bash
# Issue 5, acceptance 7 (second half): timer wake-up latency of cyclictest inside a box compared
# with outside (same FIFO priority request, same load), on this machine. Root only.
# usage: experiments/runtime-cyclictest.sh [LOOPS]   (1 ms interval, default 5000 loops)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "runtime-cyclictest: needs root; skipped"; exit 0; fi
command -v cyclictest >/dev/null || { echo "runtime-cyclictest: cyclictest not installed (apt-get install rt-tests); skipped"; exit 0; }
LOOPS=${1:-5000}
cargo build --release -q -p rtbox-cli
R=target/release/rtbox
D=$(mktemp -d)
$R daemon --socket $D/sock --state $D/state.json 2>$D/log & DPID=$!
trap 'kill $DPID 2>/dev/null; wait $DPID 2>/dev/null; rm -rf $D' EXIT
for i in $(seq 50); do [ -S $D/sock ] && break; sleep 0.1; done
$R box create L --socket $D/sock --budget 20ms --period 100ms --cpus 0-1
CT="cyclictest -m -t1 -p 80 -i 1000 -l $LOOPS -q"
echo "| where | min us | avg us | max us |"
echo "|---|---|---|---|"
out=$($CT | grep -E "T: 0")
echo "| outside (FIFO 80) | $(echo "$out" | sed -E 's/.*Min: *([0-9]+).*Avg: *([0-9]+).*Max: *([0-9]+).*/\1 | \2 | \3/') |"
out=$($R exec L --socket $D/sock -- $CT | grep -E "T: 0")
echo "| inside box L (20/100 ms, FIFO band 40..89) | $(echo "$out" | sed -E 's/.*Min: *([0-9]+).*Avg: *([0-9]+).*Max: *([0-9]+).*/\1 | \2 | \3/') |"
