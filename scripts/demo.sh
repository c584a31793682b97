#!/usr/bin/env bash
# The main job: set up, build rtbox, and walk through the seed 002 example: admission, analysis,
# interface synthesis, and simulation against Linux's own RT throttling.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release --quiet -p rtbox-cli
rtbox=target/release/rtbox
ex=examples/bdm-validation.toml

step() { printf '\n== %s\n' "$*"; }

step "rtbox check $ex --loop-step-us 0   (seed 002 virtual platforms Y1, Y2 on two CPUs)"
"$rtbox" check "$ex" --loop-step-us 0

step "rtbox check $ex   (with the daemon's own enforcement loop: seed 002's 0.94 per CPU leaves it no room)"
"$rtbox" check "$ex" || true

step "rtbox check examples/oversubscribed.toml   (must be refused)"
if "$rtbox" check examples/oversubscribed.toml; then
    echo "demo: oversubscribed.toml was admitted, which is wrong" >&2
    exit 1
fi

step "rtbox analyze $ex"
"$rtbox" analyze "$ex"

step "rtbox analyze $ex --box Y1 --synthesize bdm --delta 20ms"
"$rtbox" analyze "$ex" --box Y1 --synthesize bdm --delta 20ms

step "rtbox sim $ex --duration 120s   (rtbox boxes: no application task misses)"
"$rtbox" sim "$ex" --duration 120s || true

step "rtbox sim $ex --duration 120s --model rt-throttling   (Linux RT throttling, same budgets)"
"$rtbox" sim "$ex" --duration 120s --model rt-throttling || true
