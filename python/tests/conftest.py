"""Shared fixtures: the repository's paths and the `rtbox` CLI the results are compared with."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _cli() -> str:
    """The CLI binary: $RTBOX_CLI, else the workspace's build (built here if missing)."""
    env = os.environ.get("RTBOX_CLI")
    if env:
        return env
    for profile in ("debug", "release"):
        p = ROOT / "target" / profile / "rtbox"
        if p.exists():
            return str(p)
    if shutil.which("cargo") is None:
        pytest.fail("no rtbox CLI: set RTBOX_CLI or install cargo")
    subprocess.run(["cargo", "build", "-q", "-p", "rtbox-cli"], cwd=ROOT, check=True)
    return str(ROOT / "target" / "debug" / "rtbox")


@pytest.fixture(scope="session")
def cli():
    """Runs the CLI; returns (exit code, stdout, stderr)."""
    binary = _cli()

    def run(*args: str):
        p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=600)
        return p.returncode, p.stdout, p.stderr

    return run


@pytest.fixture(scope="session")
def cli_json(cli):
    def run(*args: str):
        _code, out, err = cli(*args, "--json")
        assert out, err
        return json.loads(out)

    return run


@pytest.fixture(scope="session")
def bdm_file():
    return str(EXAMPLES / "bdm-validation.toml")
