#!/usr/bin/env bash
# The floor of a user-space hard CBS on this machine (issue 14): the CPU time of the wake-ups
# the daemon needs per server period with the BPF sensor and quiet stops (the loop at each
# replenishment, the backstop at each exhaustion, the other CPU's watch re-armed by a kick),
# for three boxes of experiments/daemon-cpu.sh (experiments/wake-floor.c):
#   wake-ups     nothing done in them, a busy thread beside them;
#   + freezing   the loop thaws and the backstop freezes a busy FIFO 50 process in its own v2
#                cgroup (`cgroup.freeze`), the least any stop by the freezer does per period;
# each with idle CPUs halting and with the CPU latency limit held at 0 us (idle CPUs poll, as
# the daemon holds it: docs/runtime.md, "Fast wake-ups from idle"). What the daemon takes above
# the last column is its own work.
# Then the sleepers' box of daemon-cpu.sh (2 ms / 10 ms on CPUs 0-1, one busy member, which
# must move between the CPUs every period), limit 0 held: the member moved by the backstop at
# the first exhaustion (a "quiet migration", nothing else woken) and by the loop after a freeze
# (what the daemon does now).
# usage: experiments/wake-floor.sh [SECONDS=5]. Root (SCHED_FIFO, cgroups); holds the realtime
# lock per run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "wake-floor: needs root; skipped"; exit 0; fi
SECS=${1:-5}
DIR=$(mktemp -d /tmp/rtbox-wake-floor.XXXXXX)
BIN=$DIR/wake-floor
if [ -e /sys/fs/cgroup/cgroup.controllers ]; then V2=/sys/fs/cgroup; else V2=/sys/fs/cgroup/unified; fi
CG=$V2/rtbox-wake-floor.$$
# Each freezing run thaws, stops and removes its own member and cgroup (its trap); this only
# takes what an interrupted run left.
cleanup() {
  [ -e "$CG/cgroup.freeze" ] && echo 0 >"$CG/cgroup.freeze" || true
  rmdir "$CG" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
cc -O2 -Wall -o "$BIN" experiments/wake-floor.c -lpthread

# run PERIOD_US BUDGET_US HOLD FREEZE: one run's CPU per second and, in brackets, per period
# (its whole output goes to stderr). FREEZE: no, yes, or a migration (quiet, loop).
run() {
  local period=$1 budget=$2 hold=$3 freeze=$4 out
  out=$(flock /tmp/rtbox-realtime.lock bash -c '
    set -euo pipefail
    BIN=$1; period=$2; budget=$3; SECS=$4; hold=$5; freeze=$6; CG=$7
    if [ "$hold" = yes ]; then exec 3>/dev/cpu_dma_latency; printf "\x00\x00\x00\x00" >&3; fi
    if [ "$freeze" != no ]; then
      mkdir -p "$CG"
      taskset -c 0 chrt -f 50 sh -c "while :; do :; done" & hog=$!
      echo $hog >"$CG/cgroup.procs"
      trap "echo 0 >\"$CG/cgroup.freeze\"; kill $hog; wait $hog 2>/dev/null; rmdir \"$CG\"" EXIT
      if [ "$freeze" = yes ]; then
        "$BIN" "$period" "$budget" "$SECS" 0 1 "$CG/cgroup.freeze"
      else
        "$BIN" "$period" "$budget" "$SECS" 0 1 "$CG/cgroup.freeze" "$hog" "$freeze"
      fi
    else
      "$BIN" "$period" "$budget" "$SECS" 0 1
    fi
  ' _ "$BIN" "$period" "$budget" "$SECS" "$hold" "$freeze" "$CG")
  echo "$out" >&2
  sed -n 's/.*total \([0-9.]*\); per period \([0-9.]*\) us.*/\1 (\2 us)/p' <<<"$out"
}

echo "| box | wake-ups, halting | wake-ups, limit 0 held | + freezing, halting | + freezing, limit 0 held |"
echo "|---|---|---|---|---|"
for box in "10000 2000" "100000 20000" "1000 200"; do
  set -- $box
  [ "$2" -ge 1000 ] && row="| $(( $2 / 1000 )) ms / $(( $1 / 1000 )) ms" || row="| $2 us / $(( $1 / 1000 )) ms"
  for freeze in no yes; do
    for hold in no yes; do
      row="$row | $(run "$1" "$2" "$hold" "$freeze")"
    done
  done
  echo "$row |"
done
echo
echo "| 2 ms / 10 ms on CPUs 0-1, one member moving every period (limit 0 held) | moved by the backstop | moved by the loop after a freeze |"
echo "|---|---|---|"
echo "| | $(run 10000 2000 yes quiet) | $(run 10000 2000 yes loop) |"
