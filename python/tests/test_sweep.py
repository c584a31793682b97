"""Task-set generation and sweeps: the CLI's sets and ratios, Dask equal to local, Ctrl-C."""

import _thread
import io
import signal
import threading

import pandas as pd
import pytest

import rtbox

SETTINGS = dict(cpus=2, utilizations="0.5:1.75:0.25", sets=12, tasks=6, seed=5)


def test_sweep_equals_the_cli_csv(cli):
    r = rtbox.sweep(**SETTINGS, evaluate=["analysis", "sim"])
    code, out, err = cli(
        "sweep", "--cpus", "2", "--utilizations", "0.5:1.75:0.25", "--sets", "12",
        "--tasks", "6", "--seed", "5", "--evaluate", "analysis,sim", "--quiet",
    )
    assert code == 0, err
    assert r.to_csv() == out
    cli_df = pd.read_csv(io.StringIO(out))
    assert list(cli_df.columns) == list(r.df.columns)
    assert (cli_df["sets"] == r.df["sets"]).all()
    assert (abs(cli_df["analysis"] - r.df["analysis"]) < 1e-4).all()
    assert r.df["analysis"].iloc[0] == 1.0 and r.df["analysis"].iloc[-1] < 1.0


def test_generated_sets_are_the_sweeps_sets():
    u, n = 1.5, 12
    sets = rtbox.generate(u, sets=n, tasks=6, seed=5)
    assert len(sets) == n and all(len(s) == 6 for s in sets)
    total = sum(t.wcet / t.period for t in sets[0])
    assert total == pytest.approx(u, abs=0.01)
    box = rtbox.Box("sweep", rtbox.Server("9.5ms", "10ms"))
    ok = sum(
        rtbox.System.build(cpus=2, boxes=[box], tasks=s).analyze().box("sweep").schedulable
        for s in sets
    )
    r = rtbox.sweep(cpus=2, utilizations=[u], sets=n, tasks=6, seed=5)
    assert r.df["analysis"].iloc[0] == pytest.approx(ok / n)
    assert rtbox.generate(u, sets=2, tasks=6, seed=6)[0] != sets[0]


def test_dask_sweep_equals_the_local_sweep_row_for_row():
    distributed = pytest.importorskip("dask.distributed")
    local = rtbox.sweep(**SETTINGS, evaluate="analysis,sim-rt-throttling")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        seen = []
        remote = rtbox.sweep(
            **SETTINGS, evaluate="analysis,sim-rt-throttling", client=client, chunk=7,
            progress=lambda d, t: seen.append((d, t)),
        )
    pd.testing.assert_frame_equal(local.df, remote.df)
    assert local.verdicts == remote.verdicts
    assert seen[-1] == (72, 72) and len(seen) == 11


def test_sweep_settings_errors_name_the_setting():
    with pytest.raises(rtbox.ConfigError) as e:
        rtbox.sweep(method="magic")
    assert e.value.field == "method" and "randfixedsum" in str(e.value)
    with pytest.raises(rtbox.ConfigError) as e:
        rtbox.sweep(evaluate="analysis,simulate")
    assert e.value.field == "evaluate"
    with pytest.raises(rtbox.ConfigError) as e:
        rtbox.sweep(rtbox.loads("[platform]\ncpus = 1\n"), "nope")
    assert e.value.field == "box"


def test_keyboard_interrupt_stops_a_long_sweep_between_chunks():
    # A process started in the background by a non-interactive shell ignores SIGINT, and then
    # Python installs no handler and `interrupt_main` does nothing: Python's own handler is put
    # in place for the test (a clean-clone CI run started with `&` failed on that).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    done = []
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            rtbox.sweep(cpus=4, utilizations="0.5:3.5:0.05", sets=400, evaluate="sim", chunk=4,
                        progress=lambda d, t: done.append(d))
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert done and done[-1] < 61 * 400, "the sweep ran to its end"
    # The package is usable afterwards.
    assert rtbox.sweep(**SETTINGS).df["sets"].sum() == 72
