#!/usr/bin/env bash
# Installs what rtbox needs to build, test and run its experiments on a fresh Debian machine.
# Idempotent: installs only what is missing. Debian packages come from the machine's own release.
set -euo pipefail

# Debian packages used by the runtime experiments and tests (rt-app workloads, cyclictest,
# stress-ng load; gcc: the C examples of the periodic-task API, docs/api.md; Podman with runc and
# a static busybox for the container tests, whose image is built locally with `podman import`;
# docker.io: the Docker container test starts its own dockerd on a private socket),
# and to build the daemon's BPF sensor (crates/rtbox-bpf: clang compiles the program, bpftool
# dumps the kernel's BTF as vmlinux.h, libbpf-sys builds libbpf against libelf and zlib with make
# and pkg-config). Keep this list in sync with docs/runtime.md.
APT_PACKAGES=(rt-app rt-tests stress-ng gcc podman runc docker.io busybox-static clang bpftool libelf-dev zlib1g-dev pkg-config make)

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    if [ "$(id -u)" -eq 0 ]; then
        echo "setup: installing ${missing[*]}" >&2
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "setup: not root, cannot install ${missing[*]}; runtime experiments that need them will say so" >&2
    fi
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo not found; install Rust (stable) first" >&2
    exit 1
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true

# Python packages for the rtbox Python package (python/, docs/python.md) and its tests, into the
# machine's python3. Major versions pinned; pip leaves satisfied requirements alone.
PIP_PACKAGES=(
    "maturin>=1.5,<2"
    "pytest>=8,<10"
    "pandas>=2,<3"
    "pyarrow>=14,<27"
    "matplotlib>=3,<4"
    "dask[distributed]>=2024.1,<2027"
)
if ! command -v python3 >/dev/null 2>&1; then
    echo "setup: python3 not found; install Python 3.9 or later for the Python package" >&2
    exit 1
fi
python3 -m pip install --disable-pip-version-check --root-user-action=ignore -q "${PIP_PACKAGES[@]}"
