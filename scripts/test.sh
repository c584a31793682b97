#!/usr/bin/env bash
# The whole test suite: formatting, lints with warnings denied, every test of the workspace, then
# the Python package (python/, its own cargo workspace): lints, `pip install ./python`, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CARGO_TERM_COLOR=never
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo test --workspace

# The Python package. Its crate is outside the workspace (docs/python.md), so it is formatted
# and linted on its own; pip builds it with maturin (installed by setup.sh, hence no isolated
# build environment) and the tests compare it with the CLI built above.
cargo fmt --manifest-path python/Cargo.toml -- --check
cargo clippy --manifest-path python/Cargo.toml --all-targets --quiet -- -D warnings
python3 -m pip install --no-build-isolation --disable-pip-version-check --root-user-action=ignore -q ./python
RTBOX_CLI="$PWD/target/debug/rtbox" python3 -m pytest -q -p no:cacheprovider python/tests
