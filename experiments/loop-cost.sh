#!/usr/bin/env bash
# What the daemon's real-time threads (the loop, the backstops) take when the reservations fill
# the CPUs: the case admission is about (issue 14). A CPU with room to spare does not need the
# loop counted; a CPU whose boxes reserve up to the cap loses to the loop what the loop takes
# there. Each case fills CPUs with boxes of busy members and runs SECONDS (default 10).
#
# Measured by a SCHED_FIFO 99 reader (experiments/loop-cost.py): with the CPUs full of
# real-time work a normal shell gets only the kernel's fair server (50 ms per second) and reads
# its clocks up to a second late, which made members look as if they got 0.2247 of a 0.2 box
# (a first version of this script; from FIFO 99 the same case reads 0.1994).
#
# Prints per case: the CPUs filled, what each member got against its reservation, the
# daemon's real-time CPU (per thread and per CPU that has servers: the backstops are pinned,
# the loop follows the exhaustions and is split evenly), the steps admission models per CPU
# (asked of `rtbox check`: 2 per server period plus one per poll interval) and the CPU per
# modelled step. Compare the
# last column with `LoopCost` (crates/rtbox-model/src/admission.rs): admission holds on full
# CPUs while the measured figure stays at or below the admitted step.
# The daemon runs with `--loop-step-us 0`: these fills are what admission with the loop counted
# may refuse, and what is measured is what the loop would need.
# usage: [RTBOX_BIN=PATH] experiments/loop-cost.sh [SECONDS=10] [SENSORS="bpf perf"] [CASES="pinned-10 both-10 both-5 global-bdm"] [RUNS=1]
# Root (SCHED_FIFO); holds the machine-wide realtime lock per run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "loop-cost: needs root; skipped"; exit 0; fi
SECS=${1:-10}
SENSORS=${2:-bpf perf}
CASES=${3:-pinned-10 both-10 both-5 global-bdm}
RUNS=${4:-1}
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
if [ -n "${RTBOX_BIN:-}" ]; then RTBOX=$RTBOX_BIN; else
  cargo build --release -q -p rtbox-cli
  RTBOX=$PWD/target/release/rtbox
fi
DIR=$(mktemp -d /tmp/rtbox-loop-cost.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$DIR"' EXIT

# The boxes of a case, one per line: "NAME MEMBERS SERVERS [BOX-CREATE-ARGS...]", SERVERS as
# CPU:Q/P,... in us.
case_boxes() {
  case $1 in
    # CPU 0 full: 0.2 + 0.7 of 10 ms periods.
    pinned-10) echo "A 1 0:2000/10000"; echo "B 1 0:7000/10000" ;;
    # Both CPUs full, 10 ms periods.
    both-10) echo "A 1 0:2000/10000"; echo "B 1 0:7000/10000"
             echo "C 1 1:2000/10000"; echo "D 1 1:7000/10000" ;;
    # Both CPUs full, 5 ms periods.
    both-5) echo "A 1 0:1000/5000"; echo "B 1 0:3500/5000"
            echo "C 1 1:1000/5000"; echo "D 1 1:3500/5000" ;;
    # Seed 002's two virtual platforms (examples/bdm-validation.toml's servers), global
    # placement, two busy members each.
    global-bdm) echo "Y1 2 0:25714/35714,1:25714/35714 --placement global"
                echo "Y2 2 0:2821/12821,1:2821/12821 --placement global" ;;
    *) echo "loop-cost: unknown case $1" >&2; exit 2 ;;
  esac
}

# run SENSOR CASE: prints one table row.
run() {
  local sensor=$1 case=$2
  flock -o /tmp/rtbox-realtime.lock bash -c '
    set -euo pipefail
    RTBOX=$1; DIR=$2; sensor=$3; SECS=$4; BOXES=$5; CASE=$6
    SOCK=$DIR/rtbox.sock
    rm -f "$SOCK"
    "$RTBOX" daemon --sensor "$sensor" --loop-step-us 0 --socket "$SOCK" --state "$DIR/state.json" --log-level warn 2>"$DIR/daemon.log" &
    d=$!
    for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
    pids=()
    cleanup() { kill "${pids[@]}" 2>/dev/null || true; kill -TERM $d 2>/dev/null || true; wait $d 2>/dev/null || true; }
    trap cleanup EXIT
    members=""
    while read -r name n servers args; do
      "$RTBOX" box create "$name" $args --servers "$(echo "$servers" | tr , " " | tr : " ")" --socket "$SOCK" >/dev/null \
        || { echo "loop-cost: box $name refused: $(tail -3 "$DIR/daemon.log")" >&2; exit 1; }
      reserved=$(echo "$servers" | tr , "\n" | awk -F"[:/]" "{s += \$2 / \$3} END {print s / NR}")
      for _ in $(seq "$n"); do
        sh -c "while :; do :; done" & pids+=($!)
        "$RTBOX" attach "$name" --pid $! --socket "$SOCK" >/dev/null
        members="$members $!:$name:$reserved"
      done
    done <<<"$BOXES"
    # The steps admission models per CPU, from admission itself: with a step of 1 ms the
    # loop share `rtbox check` counts on a CPU is its modelled steps per second / 1000.
    echo "[platform]" >"$DIR/case.toml"; echo "cpus = 2" >>"$DIR/case.toml"
    while read -r name n servers args; do
      printf "[[box]]\nname = \"%s\"\ninterface.servers = \"%s\"\n" "$name" "$(echo "$servers" | tr , " " | tr : " ")" >>"$DIR/case.toml"
      case "$args" in *"--placement global"*) echo "placement = \"global\"" >>"$DIR/case.toml" ;; esac
    done <<<"$BOXES"
    # (exit 1: refused with a step that dear; the JSON still counts the loop)
    steps=$({ "$RTBOX" check --json --sensor "$sensor" --loop-step-us 1000 "$DIR/case.toml" || true; } \
      | python3 -c "import json, sys; print(\",\".join(\"%d:%.0f\" % (c[\"cpu\"], c[\"loop\"] * 1000) for c in json.load(sys.stdin)[\"cpus\"] if c[\"servers\"]))")
    sleep 1
    chrt -f 99 python3 experiments/loop-cost.py "$d" "$SECS" "$steps" "$CASE $sensor" $members
    [ -z "${KEEP:-}" ] || "$RTBOX" status --json --socket "$SOCK" >"$DIR/status.json"
  ' _ "$RTBOX" "$DIR" "$sensor" "$SECS" "$(case_boxes "$case")" "$case"
}

echo "Loop cost on full CPUs, $SECS s per run, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| case | sensor | members got (reserved) | daemon RT CPU per thread | per CPU with servers | modelled steps/s per CPU | us per modelled step |"
echo "|---|---|---|---|---|---|---|"
for _ in $(seq "$RUNS"); do
  for c in $CASES; do
    for s in $SENSORS; do
      run "$s" "$c" || echo "| $c | $s | run failed | | | | |"
    done
  done
done
