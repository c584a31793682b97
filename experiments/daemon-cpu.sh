#!/usr/bin/env bash
# The daemon's own CPU use with each sensor (issue 14): one busy-loop member per box, the
# daemon's CPU from its own /proc/PID/task/*/schedstat over SECONDS (default 10), the members'
# CPU and the daemon's threads' wake-ups a second beside it. Then the same 2 ms / 10 ms box on CPUs 0-1 with one busy member and N sleeping
# member processes. Prints markdown tables. Root; holds the machine-wide realtime lock per run.
# Last, K boxes of 500 us / 50 ms on CPUs 0-1 with one sleeping member each, one busy member in
# the first.
# usage: [RTBOX_BIN=PATH] experiments/daemon-cpu.sh [SECONDS] [SENSORS (default "bpf perf")] [SLEEPERS (default "0 50 200 500 1000")] [BOXES (default "1 10 50")]
#        ROWS="3 4" runs only those rows of the first table (1-4; default all); "-" skips a table.
#        DAEMON_ARGS="--cpu-latency-us off" passes more options to the daemon (an A/B of one).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "daemon-cpu: needs root; skipped"; exit 0; fi
SECS=${1:-10}
SENSORS=${2:-bpf perf}
SLEEPERS=${3:-0 50 200 500 1000}
BOXES=${4:-1 10 50}
[ "$SLEEPERS" = - ] && SLEEPERS=""
[ "$BOXES" = - ] && BOXES=""
[ "${ROWS:-}" = - ] && ROWS=0
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
# RTBOX_BIN: another build of rtbox to measure (an A/B against an older commit); default the
# release build of this tree.
if [ -n "${RTBOX_BIN:-}" ]; then RTBOX=$RTBOX_BIN; else
  cargo build --release -q -p rtbox-cli
  RTBOX=$PWD/target/release/rtbox
fi
DIR=$(mktemp -d /tmp/rtbox-daemon-cpu.XXXXXX)
SOCK=$DIR/rtbox.sock
trap 'rm -rf "$DIR"' EXIT

# Sum of the first schedstat field (ns on CPU) of every thread of process $1.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}'; }

# run SENSOR BOXARGS MEMBERS SLEEPERS [BOXES]: prints "daemon_cpu members_cpu sensor_in_use".
# With BOXES > 1 there are boxes B, B2..BBOXES (same arguments), one sleeping member each in
# B2..BBOXES beside B's members.
# Called as `out=$(run ...)`, not through `< <(run ...)`: a command substitution returns only
# once every writer of its output is gone (the daemon, started here, inherits it), so the
# daemon has stopped before the next run or the script's exit removes $DIR (read from a
# process substitution, the last daemon was still stopping, and its directory was left
# behind, when the script returned).
run() {
  local sensor=$1 boxargs=$2 members=$3 sleepers=$4 nboxes=${5:-1}
  flock -o /tmp/rtbox-realtime.lock bash -c '
    set -euo pipefail
    RTBOX=$1; SOCK=$2; DIR=$3; sensor=$4; boxargs=$5; members=$6; sleepers=$7; SECS=$8; nboxes=$9
    cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk "{s += \$1} END {printf \"%.0f\", s}"; }
    # Times the threads of the daemon were switched in (schedstat field 3): its wake-ups, a
    # count that does not move with the speed of this VM as the CPU figures do.
    wakes() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk "{s += \$3} END {printf \"%.0f\", s}"; }
    "$RTBOX" daemon --sensor "$sensor" --socket "$SOCK" --state "$DIR/state.json" --log-level warn ${DAEMON_ARGS:-} 2>"$DIR/daemon.log" &
    d=$!
    for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
    pids=()
    cleanup() { kill "${pids[@]}" 2>/dev/null || true; kill -TERM $d 2>/dev/null || true; wait $d 2>/dev/null || true; }
    trap cleanup EXIT
    for _ in $(seq 50); do $RTBOX box create B $boxargs --socket "$SOCK" >/dev/null 2>&1 && break; sleep 0.1; done
    for _ in $(seq "$members"); do
      sh -c "while :; do :; done" & pids+=($!)
      $RTBOX attach B --pid $! --socket "$SOCK" >/dev/null
    done
    for _ in $(seq "$sleepers"); do
      sleep 100000 & pids+=($!)
      $RTBOX attach B --pid $! --socket "$SOCK" >/dev/null
    done
    for k in $(seq 2 "$nboxes"); do
      $RTBOX box create B$k $boxargs --socket "$SOCK" >/dev/null
      sleep 100000 & pids+=($!)
      $RTBOX attach B$k --pid $! --socket "$SOCK" >/dev/null
    done
    sleep 2
    d0=$(cpu_ns $d); w0=$(wakes $d); m0=0; for p in "${pids[@]:0:$members}"; do m0=$((m0 + $(cpu_ns $p))); done
    sleep "$SECS"
    d1=$(cpu_ns $d); w1=$(wakes $d); m1=0; for p in "${pids[@]:0:$members}"; do m1=$((m1 + $(cpu_ns $p))); done
    used=$($RTBOX status --json --socket "$SOCK" | python3 -c "import json,sys; print(json.load(sys.stdin).get(\"sensor\",\"?\"))")
    awk -v d=$((d1 - d0)) -v m=$((m1 - m0)) -v w=$((w1 - w0)) -v s="$SECS" -v u="$used" "BEGIN {printf \"%.4f %.4f %s %.0f\n\", d / s / 1e9, m / s / 1e9, u, w / s}"
  ' _ "$RTBOX" "$SOCK" "$DIR" "$sensor" "$boxargs" "$members" "$sleepers" "$SECS" "$nboxes"
}

# One table cell from run's output: daemon CPU (members' CPU; the daemon's wake-ups a second).
cell() {
  local dcpu mcpu used wakes
  read -r dcpu mcpu used wakes <<<"$2"
  printf ' %s (%s; %s/s)%s |' "$dcpu" "$mcpu" "$wakes" "$([ "$used" = "$1" ] || echo " [ran $used]")"
}

CASES=(
  "2 ms / 10 ms on CPU 0, 1 member|--budget 2ms --period 10ms --cpus 0|1|0.004"
  "20 ms / 100 ms on CPU 0, 1 member|--budget 20ms --period 100ms --cpus 0|1|0.001"
  "1 ms / 10 ms on CPUs 0-1, 2 members|--budget 1ms --period 10ms --cpus 0-1|2|0.008"
  "200 us / 1 ms on CPU 0, 1 member|--budget 200us --period 1ms --cpus 0|1|0.03"
)
echo "Daemon CPU, ${SECS} s per run (in brackets the members' CPU, whose reservation is budget/period per member's CPU, and the daemon's threads' wake-ups a second)"
echo
printf '| box |'; for s in $SENSORS; do printf ' %s daemon CPU (members; wake-ups) |' "$s"; done; printf ' target (bpf) |\n'
printf '|---|'; for _ in $SENSORS; do printf -- '---|'; done; printf -- '---|\n'
row=0
for c in "${CASES[@]}"; do
  row=$((row + 1))
  if [ -n "${ROWS:-}" ] && ! grep -qw "$row" <<<"$ROWS"; then continue; fi
  IFS='|' read -r name args members target <<<"$c"
  printf '| %s |' "$name"
  for s in $SENSORS; do
    out=$(run "$s" "$args" "$members" 0)
    cell "$s" "$out"
  done
  printf ' <= %s |\n' "$target"
done
echo
echo "Sleeping members: 2 ms / 10 ms box on CPUs 0-1, one busy member plus N sleeping member processes"
echo
printf '| N |'; for s in $SENSORS; do printf ' %s daemon CPU (busy member; wake-ups) |' "$s"; done; printf '\n'
printf '|---|'; for _ in $SENSORS; do printf -- '---|'; done; printf '\n'
for n in $SLEEPERS; do
  printf '| %s |' "$n"
  for s in $SENSORS; do
    out=$(run "$s" "--budget 2ms --period 10ms --cpus 0-1" 1 "$n")
    cell "$s" "$out"
  done
  printf '\n'
done
[ -z "$BOXES" ] && exit 0
echo
echo "Boxes: K boxes of 500 us / 50 ms on CPUs 0-1, one sleeping member each, one busy member in the first"
echo
printf '| K |'; for s in $SENSORS; do printf ' %s daemon CPU (busy member; wake-ups) |' "$s"; done; printf '\n'
printf '|---|'; for _ in $SENSORS; do printf -- '---|'; done; printf '\n'
for k in $BOXES; do
  printf '| %s |' "$k"
  for s in $SENSORS; do
    out=$(run "$s" "--budget 500us --period 50ms --cpus 0-1" 1 1 "$k")
    cell "$s" "$out"
  done
  printf '\n'
done
