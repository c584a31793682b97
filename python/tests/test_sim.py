"""Simulation: the CLI's numbers, DataFrames from Arrow, Gantt, trace, GIL release."""

import json
import threading
import time

import pandas as pd
import pytest

import rtbox


@pytest.mark.parametrize("model", ["rtbox", "rt-throttling"])
def test_120s_simulation_equals_the_cli(bdm_file, cli, model):
    code, out, _ = cli("sim", bdm_file, "--duration", "120s", "--model", model, "--json")
    expected = json.loads(out)
    r = rtbox.load(bdm_file).simulate(duration="120s", model=model, seed=1)
    ours = r.to_dict()
    # The CLI records jobs and the trace only with --csv / --trace.
    assert len(ours.pop("jobs")) == len(r.jobs) > 0
    ours.pop("trace", None)
    assert ours == expected
    t = r.tasks.set_index("task")
    for task in expected["tasks"]:
        row = t.loc[task["name"]]
        assert (row["jobs"], row["misses"], row["released"]) == (task["jobs"], task["misses"], task["released"])
        assert row["response_max_ns"] == task["response"]["max"]
    s = r.servers.set_index("server")
    for srv in expected["servers"]:
        row = s.loc[srv["name"]]
        assert (row["consumed_ns"], row["throttles"], row["migrations"]) == (srv["consumed"], srv["throttles"], srv["migrations"])
    assert code == (1 if r.total_misses else 0)


def test_boxed_tasks_miss_only_under_rt_throttling(bdm_file):
    system = rtbox.load(bdm_file)
    ours = system.simulate(duration="120s", model="rtbox")
    linux = system.simulate(duration="120s", model="rt-throttling")
    assert ours.misses(boxed_only=True) == 0
    assert linux.misses(boxed_only=True) > 0
    # In Y1 the throttled tasks are the ones that suffer.
    assert linux.tasks.set_index("task").loc["tau2", "misses"] > 0


def test_tables_are_typed_frames_consistent_with_the_summary(bdm_file):
    r = rtbox.load(bdm_file).simulate(duration="20s", model="rt-throttling", seed=3)
    assert isinstance(r.jobs, pd.DataFrame) and isinstance(r.tasks, pd.DataFrame)
    assert str(r.jobs["release_ns"].dtype) == "uint64"
    assert r.jobs["missed"].dtype == bool
    misses = r.jobs.groupby("task")["missed"].sum()
    t = r.tasks.set_index("task")
    for name in t.index:
        assert misses.get(name, 0) == t.loc[name, "misses"], name
    assert (r.cpus["utilization"] > 0).all() and len(r.cpus) == 2
    assert len(r.segments) > 0 and r.segments["end_ns"].max() <= 1_000_000_000


def test_gantt_and_trace(bdm_file, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    r = rtbox.load(bdm_file).simulate(duration="2s", window="500ms")
    fig = r.gantt()
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[:2] == ["cpu 0", "cpu 1"] and "Y1@0" in labels
    fig.savefig(tmp_path / "g.png")
    assert (tmp_path / "g.png").stat().st_size > 1000
    r.trace(tmp_path / "t.json")
    trace = json.loads((tmp_path / "t.json").read_text())
    jobs = [e for e in trace["traceEvents"] if e.get("cat") == "job"]
    assert jobs and max(e["ts"] + e["dur"] for e in jobs) <= 500_000 + 1e-6


def test_simulation_releases_the_gil(bdm_file):
    system = rtbox.load(bdm_file)
    count = 0
    stop = False

    def spin():
        nonlocal count
        while not stop:
            count += 1

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.05)
    before = count
    system.simulate(duration="600s", jobs=False, trace=False)
    during = count - before
    stop = True
    t.join()
    # With the GIL held for the whole call, the spinning thread could not run at all.
    assert during > 10_000, during
