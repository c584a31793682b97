#!/usr/bin/env bash
# Runs a command on a busy machine: one unmanaged CPU hog per CPU (a plain SCHED_OTHER shell busy
# loop, pinned to its CPU), started before the command and killed after it, whatever happens.
# The command sees RTBOX_TEST_BUSY=1 and the hogs' pids in RTBOX_TEST_BUSY_PIDS (space-separated):
# the root tests measure what the hogs took over the same window (rtbox-harness).
# usage: scripts/busy.sh COMMAND [ARGS...]
set -euo pipefail
hogs=()
stop() {
    ((${#hogs[@]})) && kill "${hogs[@]}" 2>/dev/null || true
    ((${#hogs[@]})) && wait "${hogs[@]}" 2>/dev/null || true
}
trap stop EXIT
trap 'exit 130' INT TERM
for ((cpu = 0; cpu < $(nproc); cpu++)); do
    taskset -c "$cpu" bash -c 'while :; do :; done' &
    hogs+=($!)
done
echo "busy: ${#hogs[@]} unmanaged hogs (pids ${hogs[*]}), one per CPU" >&2
RTBOX_TEST_BUSY=1 RTBOX_TEST_BUSY_PIDS="${hogs[*]}" "$@"
