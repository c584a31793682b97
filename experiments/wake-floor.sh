#!/usr/bin/env bash
# The floor of a user-space hard CBS on this machine (issue 14): the CPU time of the wake-ups
# alone that the daemon needs per server period with the BPF sensor and quiet stops (the loop at
# each replenishment, the backstop at each exhaustion, the other CPU's watch re-armed by a
# kick), with nothing done in them (experiments/wake-floor.c), for the four boxes of
# experiments/daemon-cpu.sh. What the daemon takes above this is its own work.
# usage: experiments/wake-floor.sh [SECONDS=5]. Root (SCHED_FIFO); holds the realtime lock.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "wake-floor: needs root; skipped"; exit 0; fi
SECS=${1:-5}
BIN=$(mktemp /tmp/rtbox-wake-floor.XXXXXX)
trap 'rm -f "$BIN"' EXIT
cc -O2 -Wall -o "$BIN" experiments/wake-floor.c -lpthread
for box in "10000 2000" "100000 20000" "1000 200"; do
  flock /tmp/rtbox-realtime.lock "$BIN" $box "$SECS"
done
