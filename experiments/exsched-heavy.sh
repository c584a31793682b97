#!/usr/bin/env bash
# Seed 001's heavy case on the real kernel (issue 16): three tasks of 5.5 ms every 10 ms (C
# programs through the task API, examples/c/periodic.c; each job WORK_US of CPU, declared
# WCET 5.5 ms) in one plug-in box on CPUs 0-1, under `fp-pm` and `fp-ff`. They fit two CPUs only
# if one migrates: FP-PM splits the third, FP-FF leaves it in the background.
#
# The split needs alpha 0.945 per CPU at 5 ms server periods (docs/exsched.md), and the kernel
# lets real-time threads use 95 % of a CPU by default, which leaves no room for the daemon's
# loop (0.041 with the BPF sensor here). So this experiment lifts the kernel's RT limit
# (kernel.sched_rt_runtime_us = -1, as dedicated real-time hosts commonly run: the boxes'
# hard reservations, not the global throttle, then keep real-time work bounded) and admits the
# box with cap 1.0: 4.75 ms every 5 ms + the loop 0.041 = 0.991 per CPU. The limit is put back
# when the script ends (also on Ctrl-C); a kill -9 of the script would leave it lifted: check
# /proc/sys/kernel/sched_rt_runtime_us.
#
# Per run: jobs, deadline misses and worst response of each task from `rtbox status --json`,
# and the worst wake-up latency of a FIFO 99 canary (cyclictest) per CPU, so misses during host
# stalls can be told apart.
# usage: experiments/exsched-heavy.sh [RUNS=1] [JOBS=300] [WORK_US=5200]. Root; BPF sensor.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "exsched-heavy: needs root; skipped"; exit 0; fi
# The whole experiment holds the machine-wide real-time lock.
if [ -z "${RTBOX_HEAVY_LOCKED:-}" ]; then
  RTBOX_HEAVY_LOCKED=1 exec flock /tmp/rtbox-realtime.lock "$0" "$@"
fi
RUNS=${1:-1}
JOBS=${2:-300}
WORK=${3:-5200}
cargo build --release -q -p rtbox-cli -p rtbox-c
RTBOX=$PWD/target/release/rtbox
DIR=$(mktemp -d /tmp/rtbox-exsched-heavy.XXXXXX)
cc -O2 -o "$DIR/periodic" examples/c/periodic.c -I crates/rtbox-c/include -L target/release -lrtbox
OLD=$(cat /proc/sys/kernel/sched_rt_runtime_us)
restore() { echo "$OLD" >/proc/sys/kernel/sched_rt_runtime_us; rm -rf "$DIR"; }
trap restore EXIT

run() {
  local plugin=$1 d=$DIR/$1
  rm -rf "$d"; mkdir -p "$d"
  printf '[platform]\ncpus = 2\ncap = 1.0\n\n[[box]]\nname = "exsched"\ncpus = "0-1"\nplugin = "%s"\ninterface.per_cpu = { budget = "4.75ms", period = "5ms" }\n' "$plugin" >"$d/rtbox.toml"
  echo -1 >/proc/sys/kernel/sched_rt_runtime_us
  "$RTBOX" check "$d/rtbox.toml" --sensor bpf >/dev/null
  "$RTBOX" daemon --config "$d/rtbox.toml" --sensor bpf --socket "$d/s" --state "$d/state.json" --log-level warn 2>"$d/daemon.log" &
  local daemon=$!
  for _ in $(seq 100); do [ -S "$d/s" ] && break; sleep 0.05; done
  cyclictest -q -m -p 99 -t 2 -a 0,1 -i 1000 -D $((JOBS / 100 + 2)) >"$d/canary.txt" 2>&1 &
  local canary=$! pids=()
  # Entered in order a, b, c (the DM tie-break follows the thread ids).
  for _ in 1 2 3; do
    RTBOX_BOX=exsched RTBOX_SOCKET=$d/s LD_LIBRARY_PATH=$PWD/target/release "$DIR/periodic" "$JOBS" "$WORK" 5500 10000 >/dev/null 2>&1 &
    pids+=($!)
    sleep 0.05
  done
  for p in "${pids[@]}"; do wait "$p" || true; done
  "$RTBOX" status --socket "$d/s" --json >"$d/end.json"
  kill -TERM "$daemon"; wait "$daemon" || true
  wait "$canary" || true
  echo "$OLD" >/proc/sys/kernel/sched_rt_runtime_us
  python3 - "$d/end.json" "${pids[@]}" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
pids = [int(p) for p in sys.argv[2:]]
found = {}
def walk(o):
    if isinstance(o, dict):
        if "misses" in o and "completed" in o and o.get("pid") in pids:
            found[o["pid"]] = o
        for k in o.values():
            walk(k)
    elif isinstance(o, list):
        for k in o:
            walk(k)
walk(v)
cells = []
for name, p in zip("abc", pids):
    t = found.get(p, {})
    cells.append("%s %s/%s (%.1f ms)" % (name, t.get("misses", "-"), t.get("completed", "-"), t.get("max_response_ns", 0) / 1e6))
print(" | ".join(cells), end="")
PY
  printf ' | %s |\n' "$(awk '/Max:/ {for (i = 1; i <= NF; i++) if ($i == "Max:") printf "%s ", $(i + 1)}' "$d/canary.txt")"
}

echo "Three tasks of 5.5 ms (work ${WORK} us) every 10 ms, box 4.75 ms / 5 ms on CPUs 0-1, kernel RT limit lifted, BPF sensor, ${JOBS} jobs"
echo
echo "| plug-in | misses/jobs (worst response) of a, b, c | canary worst, us (CPU 0 1) |"
echo "|---|---|---|"
for _ in $(seq "$RUNS"); do
  for plugin in fp-pm fp-ff; do
    printf '| %s | ' "$plugin"
    run "$plugin"
  done
done
