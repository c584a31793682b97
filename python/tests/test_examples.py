"""Every script of examples/python runs to completion (each asserts its own outcome)."""

import os
import subprocess
import sys

import pytest

from conftest import EXAMPLES

SCRIPTS = sorted(p.name for p in (EXAMPLES / "python").glob("*.py"))


def test_there_is_a_script_per_use():
    assert set(SCRIPTS) >= {"size_reservation.py", "compare_throttling.py", "sweep_dask.py", "simso_example.py"}


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_runs(script, tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg")
    p = subprocess.run(
        [sys.executable, str(EXAMPLES / "python" / script), str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip()
