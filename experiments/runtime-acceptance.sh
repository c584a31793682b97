#!/usr/bin/env bash
# Issue 5 acceptance figures on this machine (root): items 1-4 and 7 (loop overhead) with real
# hogs for SECONDS each (default 10), then item 5 (kill -9) and item 6 (1000-request fuzz) with
# the real daemon binary. Prints markdown tables; everything touched is restored.
# usage: experiments/runtime-acceptance.sh [SECONDS] [CASE-FILTER]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "runtime-acceptance: needs root; skipped"; exit 0; fi
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
cargo build --release -q -p rtbox-harness --example acceptance
target/release/examples/acceptance "${1:-10}" "${2:-}"
if [ -z "${2:-}" ]; then
  echo
  echo "Crash safety and request fuzz (real daemon):"
  RTBOX_FUZZ_REQUESTS=1000 cargo test --release -q -p rtbox-cli --test daemon -- --nocapture --test-threads 1 2>&1 \
    | grep -E "kill -9:|fuzz:|test result"
fi
