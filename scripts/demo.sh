#!/usr/bin/env bash
# The main job: set up, build rtbox, and show what it does on the seed examples.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release --quiet -p rtbox-cli
rtbox=target/release/rtbox

echo "== rtbox check examples/bdm-validation.toml (seed 002 virtual platforms Y1, Y2)"
"$rtbox" check examples/bdm-validation.toml

echo
echo "== rtbox check examples/oversubscribed.toml (must be refused)"
if "$rtbox" check examples/oversubscribed.toml; then
    echo "demo: oversubscribed.toml was admitted, which is wrong" >&2
    exit 1
fi
echo "(refused as expected)"
