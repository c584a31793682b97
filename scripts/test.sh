#!/usr/bin/env bash
# The whole test suite: formatting, lints with warnings denied, and every test of the workspace;
# then the tests of the real runtime (root; they skip otherwise) a second time on a busy machine:
# one unmanaged SCHED_OTHER hog per CPU beside them (scripts/busy.sh, RTBOX_TEST_BUSY=1); then
# the Python package (python/, its own cargo workspace): lints, `pip install ./python`, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CARGO_TERM_COLOR=never
# A one-off build gains nothing from incremental caches, which were a quarter of the target
# directory (2.3 of 9 GB).
export CARGO_INCREMENTAL=0
# Where the kernel has BTF (setup.sh installed clang and bpftool), the BPF sensor must build and
# its tests must run: a program that stopped compiling only warns otherwise, and every test
# would pass on the perf fallback.
if [ -e /sys/kernel/btf/vmlinux ]; then export RTBOX_REQUIRE_BPF=1; fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo test --workspace
if [ "$(id -u)" -eq 0 ]; then
    # The first pass ran the runtime with the daemon's default sensor (auto: BPF here). The
    # runtime's acceptance cases once more with the perf sensor, the fallback where BPF does
    # not load, on the quiet machine; then the runtime's tests beside the hogs with the
    # default sensor, and the daemon's again with perf.
    echo "test.sh: the runtime's acceptance cases with the perf sensor" >&2
    RTBOX_SENSOR=perf cargo test -p rtbox-daemon --test acceptance
    echo "test.sh: busy-machine pass, default sensor (real-runtime tests beside one CPU hog per CPU)" >&2
    bash scripts/busy.sh cargo test -p rtbox-daemon
    bash scripts/busy.sh cargo test -p rtbox-cli --test daemon --test daemon_members
    echo "test.sh: busy-machine pass of the daemon's tests with the perf sensor" >&2
    RTBOX_SENSOR=perf bash scripts/busy.sh cargo test -p rtbox-daemon
else
    echo "test.sh: busy-machine pass skipped: the real-runtime tests need root" >&2
fi

# The Python package. Its crate is outside the workspace (docs/python.md), so it is formatted
# and linted on its own; pip builds it with maturin (installed by setup.sh, hence no isolated
# build environment) and the tests compare it with the CLI built above.
cargo fmt --manifest-path python/Cargo.toml -- --check
cargo clippy --manifest-path python/Cargo.toml --all-targets --quiet -- -D warnings
python3 -m pip install --no-build-isolation --disable-pip-version-check --root-user-action=ignore -q ./python
RTBOX_CLI="$PWD/target/debug/rtbox" python3 -m pytest -q -p no:cacheprovider python/tests
