#!/usr/bin/env bash
# Seed 002's runtime validation (its section 4.1) on this kernel (issue 14): the applications
# of its Table 2 in the virtual platforms of Table 1 (examples/bdm-validation.toml), without
# and with the background load of Table 3, run by Debian's rt-app for SECS (default 60) per
# run, on two sides:
#   rtbox       the daemon with default admission (`--config examples/bdm-validation.toml`,
#               sensor SENSOR, default auto); Y1's and Y2's rt-app started by `rtbox exec`;
#   throttling  Linux RT group throttling with the same budget per CPU: a v1 `cpu` cgroup per
#               platform with cpu.rt_period_us = its server period and cpu.rt_runtime_us = its
#               server budget (`rtbox check` prints both), the platform's rt-app inside it.
# The background (Table 3, FIFO 16-18) runs as plain SCHED_FIFO rt-app outside every box or
# group. Misses are counted from rt-app's logs (a job missed when its slack is negative: the
# seed's deadlines equal the periods). Prints per task jobs and misses beside the seed's
# Table 4 (its means over 20 runs of 120 s). Root; each run holds the machine-wide lock.
# WORKLOAD=load runs the boxed tasks with `rtbox load` instead (every job exactly its WCET of
# thread CPU time; rt-app 1.0's calibrated loops ran 15-47 % longer than asked here, so its
# tau2 (140 ms of 270 ms, 21 ms of margin by the analysis) missed on both sides with or without
# background); the background stays rt-app.
# usage: [SENSOR=auto] [WORKLOAD=rtapp|load] [RTBOX_BIN=PATH] [DAEMON_ARGS="--loop-step-us 0"] experiments/seed002.sh [SECS=60] [SIDES="throttling rtbox"] [BACKGROUND="no with"]
# With default admission the daemon refuses the configuration while the loop is counted at
# 100 us per step (docs/benchmarks-runtime.md); DAEMON_ARGS="--loop-step-us 0" runs it anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "seed002: needs root; skipped"; exit 0; fi
command -v rt-app >/dev/null || { echo "seed002: rt-app not installed (scripts/setup.sh); skipped"; exit 0; }
CPU_CG=/sys/fs/cgroup/cpu
[ -e "$CPU_CG/cpu.rt_runtime_us" ] || { echo "seed002: no v1 cpu cgroup with RT group scheduling at $CPU_CG; skipped"; exit 0; }
SECS=${1:-60}
SIDES=${2:-throttling rtbox}
BACKGROUND=${3:-no with}
SENSOR=${SENSOR:-auto}
WORKLOAD=${WORKLOAD:-rtapp}
CONFIG=examples/bdm-validation.toml
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
# RTBOX_BIN: another build of rtbox to run (an A/B against an older commit).
if [ -n "${RTBOX_BIN:-}" ]; then RTBOX=$RTBOX_BIN; else
  cargo build --release -q -p rtbox-cli
  RTBOX=$PWD/target/release/rtbox
fi
DIR=$(mktemp -d /tmp/rtbox-seed002.XXXXXX)
trap 'rm -rf "$DIR"' EXIT

# rt-app's ns per loop, calibrated once at FIFO 90 (the smallest of three), so that no run
# spends its first second calibrating.
calibrate() {
  local best=""
  printf '{"tasks":{"c":{"loop":1,"run":1000}},"global":{"duration":1,"calibration":"CPU0","logdir":"%s","log_basename":"cal"}}' "$DIR" >"$DIR/cal.json"
  for _ in 1 2 3; do
    local v
    # Under the machine-wide lock: a FIFO 90 burner outside it took a root test's box's CPU.
    v=$(flock /tmp/rtbox-realtime.lock chrt -f 90 rt-app "$DIR/cal.json" 2>&1 | sed -n 's/.*pLoad = \([0-9]*\)ns.*/\1/p' | head -1)
    if [ -n "$v" ] && { [ -z "$best" ] || [ "$v" -lt "$best" ]; }; then best=$v; fi
  done
  echo "${best:-CPU0}"
}

# workload NAME BOXARG LOGDIR: rt-app JSON of the config's tasks of box BOXARG ("" = the tasks
# in no box), fixed calibration, SECS long, logs in LOGDIR.
workload() {
  local name=$1 box=$2 logdir=$3
  mkdir -p "$logdir"
  "$RTBOX" rt-app "$CONFIG" --duration "${SECS}s" --logdir "$logdir" -o "$DIR/all.json"
  python3 - "$DIR/all.json" "$box" "$CAL" >"$DIR/$name.json" <<'EOF'
import json, sys
path, box, cal = sys.argv[1], sys.argv[2], sys.argv[3]
w = json.load(open(path))
meta = w.get("rtbox", {}).get("tasks", {})
keep = {n: t for n, t in w["tasks"].items() if (meta.get(n, {}).get("box") or "") == box}
w["tasks"] = keep
w["global"]["calibration"] = int(cal) if cal.isdigit() else cal
w.pop("rtbox", None)
json.dump(w, sys.stdout, indent=1)
EOF
}

# The servers of each platform as `rtbox check` flattens them: "BOX budget_us period_us".
servers() {
  "$RTBOX" check "$CONFIG" --loop-step-us 0 | awk '$1 ~ /@0$/ {
    split($1, a, "@"); q = $3; qu = $4; p = $5; pu = $6
    f = (qu == "ms") ? 1000 : (qu == "us" ? 1 : 1e6); g = (pu == "ms") ? 1000 : (pu == "us" ? 1 : 1e6)
    printf "%s %d %d\n", a[1], q * f, p * g }'
}

# misses LOGDIR: "task jobs misses" per rt-app log in LOGDIR.
misses() {
  python3 - "$1" <<'EOF'
import glob, os, re, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "rt-app-*.log"))):
    task = re.sub(r"^rt-app-(.*)-\d+\.log$", r"\1", os.path.basename(f))
    cols, jobs, miss = None, 0, 0
    for line in open(f):
        parts = line.split()
        if not parts:
            continue
        if parts[0].startswith("#"):
            if "slack" in line:
                cols = [p.lstrip("#") for p in parts]
            continue
        if cols is None:
            cols = ["idx", "perf", "run", "period", "start", "end", "rel_st", "slack"]
        jobs += 1
        if int(parts[cols.index("slack")]) < 0:
            miss += 1
    print(task, jobs, miss)
EOF
}

# misses_load LOGDIR: "task jobs misses" per `rtbox load` log (a job missed when it ended
# after its release plus the deadline its log's header names).
misses_load() {
  python3 - "$1" <<'EOF'
import glob, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "tau*.log"))):
    head = open(f).readline().split()
    deadline = int(head[head.index("deadline") + 1])
    jobs = miss = 0
    for line in open(f):
        if line.startswith("#") or not line.strip():
            continue
        release, _start, end, _cpu = map(int, line.split())
        jobs += 1
        miss += end > release + deadline
    print(os.path.basename(f)[:-4], jobs, miss)
EOF
}

# boxed BOX LOGDIR: the command that runs BOX's tasks for SECS (rt-app or `rtbox load`).
boxed() {
  if [ "$WORKLOAD" = load ]; then
    echo "$RTBOX load $CONFIG --box $1 --duration ${SECS}s --logdir $2"
  else
    echo "rt-app $DIR/$(echo "$1" | tr A-Z a-z).json"
  fi
}

# run SIDE BG OUT: one run of SECS; per-task "task jobs misses" into OUT.
run() {
  local side=$1 bg=$2 out=$3 logs="$DIR/logs-$1-$2"
  rm -rf "$logs"; mkdir -p "$logs"
  workload y1 Y1 "$logs"; workload y2 Y2 "$logs"; workload bg "" "$logs"
  if flock /tmp/rtbox-realtime.lock bash -s "$side" "$bg" "$logs" "$RTBOX" "$DIR" "$CONFIG" "$CPU_CG" "$SENSOR" "$(boxed Y1 "$logs")" "$(boxed Y2 "$logs")" <<'EOF'
set -euo pipefail
side=$1 bg=$2 logs=$3 RTBOX=$4 DIR=$5 CONFIG=$6 CPU_CG=$7 SENSOR=$8 RUN_Y1=$9 RUN_Y2=${10}
pids=()
groups=()
d=
cleanup() {
  # An empty list would make `wait` wait for every child, the daemon included.
  if [ ${#pids[@]} -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
  if [ -n "$d" ]; then kill -TERM "$d" 2>/dev/null || true; wait "$d" 2>/dev/null || true; fi
  for g in "${groups[@]}"; do rmdir "$g" 2>/dev/null || true; done
}
trap cleanup EXIT
if [ "$side" = rtbox ]; then
  "$RTBOX" daemon --config "$CONFIG" --sensor "$SENSOR" ${DAEMON_ARGS:-} --socket "$DIR/s" --state "$DIR/state.json" --log-level warn 2>"$logs/daemon.log" &
  d=$!
  for _ in $(seq 100); do [ -S "$DIR/s" ] && break; sleep 0.05; done
  [ -S "$DIR/s" ] || { echo "daemon did not start: $(cat "$logs/daemon.log")" >&2; exit 1; }
  "$RTBOX" status --socket "$DIR/s" | grep -E '^(sensor|loop)' >&2 || true
  "$RTBOX" exec Y1 --socket "$DIR/s" -- $RUN_Y1 >/dev/null 2>&1 & pids+=($!)
  "$RTBOX" exec Y2 --socket "$DIR/s" -- $RUN_Y2 >/dev/null 2>&1 & pids+=($!)
else
  while read -r name q p; do
    g="$CPU_CG/rtbox-seed002-$name"
    mkdir -p "$g"; groups+=("$g")
    echo "$p" >"$g/cpu.rt_period_us"
    if ! echo "$q" 2>/dev/null >"$g/cpu.rt_runtime_us"; then
      held=$(for h in "$CPU_CG"/*/; do r=$(cat "$h/cpu.rt_runtime_us"); [ "$r" != 0 ] && [ "$h" != "$g/" ] && printf '%s=%s/%s ' "$(basename "$h")" "$r" "$(cat "$h/cpu.rt_period_us")"; done; true)
      echo "throttling: the kernel refused ${q} us per ${p} us for $name (RT runtime already held by other groups: ${held:-none}); side skipped" >&2
      exit 1
    fi
    run=$RUN_Y1; [ "$name" = Y2 ] && run=$RUN_Y2
    sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' _ "$g" $run >/dev/null 2>&1 & pids+=($!)
  done <"$DIR/servers"
fi
if [ "$bg" = with ]; then rt-app "$DIR/bg.json" >/dev/null 2>&1 & pids+=($!); fi
# A FIFO 99 canary on each CPU over the run: its worst wake-up latency tells host stalls (this
# VM stops for tens of ms without reporting steal) from misses of the reservations.
if command -v cyclictest >/dev/null; then
  cyclictest -q -m -p 99 -t 2 -a 0,1 -i 1000 -D "$(cat "$DIR/secs")" >"$logs/canary.txt" 2>&1 &
  canary=$!
fi
d0=0
[ -n "$d" ] && d0=$(cat /proc/"$d"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}')
# Per daemon thread: name and CPU ns at the start (printed per thread at the end).
threads0=""
[ -n "$d" ] && threads0=$(for t in /proc/"$d"/task/*; do echo "$(cat "$t/comm") $(cut -d' ' -f1 "$t/schedstat")"; done 2>/dev/null)
t0=$(date +%s%N)
for p in "${pids[@]}"; do wait "$p" || true; done
pids=()
if [ -n "$d" ]; then
  d1=$(cat /proc/"$d"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}')
  t1=$(date +%s%N)
  echo "rtbox $bg background: daemon CPU $(awk -v c=$((d1 - d0)) -v t=$((t1 - t0)) 'BEGIN {printf "%.4f", c / t}'); $("$RTBOX" status --socket "$DIR/s" | grep -E '^loop' || true)" >&2
  threads1=$(for t in /proc/"$d"/task/*; do echo "$(cat "$t/comm") $(cut -d' ' -f1 "$t/schedstat")"; done 2>/dev/null)
  echo "rtbox $bg background: per thread, CPU: $(awk -v t=$((t1 - t0)) 'NR == FNR {a[$1] = $2; next} {printf "%s %.4f  ", $1, ($2 - a[$1]) / t}' <(echo "$threads0") <(echo "$threads1"))" >&2
fi
if [ -n "${canary:-}" ]; then
  wait "$canary" || true
  echo "$side $bg background: canary (FIFO 99, 1 ms) worst latency per CPU, us: $(awk '/Max:/ {for (i = 1; i <= NF; i++) if ($i == "Max:") printf "%s ", $(i + 1)}' "$logs/canary.txt")" >&2
fi
EOF
  then
    misses "$logs" >"$out"
    if [ "$WORKLOAD" = load ]; then misses_load "$logs" >>"$out"; fi
  else : >"$out"; fi
}

CAL=$(calibrate)
echo "$SECS" >"$DIR/secs"
servers >"$DIR/servers"
echo "Seed 002 validation, ${SECS} s per run, boxed tasks by $WORKLOAD, rt-app calibration ${CAL} ns per loop, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "Throttling groups (budget period, us): $(tr '\n' ';' <"$DIR/servers")"
for bg in $BACKGROUND; do
  for side in $SIDES; do
    run "$side" "$bg" "$DIR/res-$side-$bg"
  done
done
# Seed 002, Table 4: mean misses under throttling over 120 s (no background, with background).
declare -A SEED_NO=([tau1]="6 ± 1" [tau2]="0 ± 0" [tau3]="0 ± 0" [tau4]="0 ± 0" [tau5]="0 ± 0")
declare -A SEED_WITH=([tau1]="210 ± 9" [tau2]="222 ± 6" [tau3]="5 ± 1" [tau4]="0 ± 0" [tau5]="0 ± 0")
echo
printf '| task | background |'
for side in $SIDES; do printf ' %s jobs | %s misses |' "$side" "$side"; done
printf ' seed 002 Table 4, throttling misses (120 s) |\n|---|---|'
for _ in $SIDES; do printf -- '---|---|'; done
printf -- '---|\n'
for bg in $BACKGROUND; do
  for t in tau1 tau2 tau3 tau4 tau5 bg6 bg7 bg8; do
    [ "$bg" = no ] && [[ $t == bg* ]] && continue
    printf '| %s | %s |' "$t" "$bg"
    for side in $SIDES; do
      read -r _ jobs miss < <(grep "^$t " "$DIR/res-$side-$bg" || echo "$t - -")
      printf ' %s | %s |' "$jobs" "$miss"
    done
    if [ "$bg" = no ]; then s=${SEED_NO[$t]:-}; else s=${SEED_WITH[$t]:-}; fi
    printf ' %s |\n' "${s:--}"
  done
done
