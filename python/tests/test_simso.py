"""SimSo XML configurations."""

import pytest

import rtbox
from conftest import EXAMPLES

XML = EXAMPLES / "python" / "simso-rm.xml"


def test_simso_rm_converts_and_simulates():
    system, duration_ns, scheduler = rtbox.read_simso(XML)
    assert scheduler == "RM" and duration_ns == 1_000_000_000
    assert system.cpus == [0, 1]
    assert system.task_names == ["TASK_T1", "TASK_T2", "TASK_T3"]
    r = system.simulate(duration=duration_ns)
    t = r.tasks.set_index("task")
    assert list(t["jobs"]) == [100, 50, 25]
    assert t["misses"].sum() == 0
    assert list(t["priority"]) == [3, 2, 1]  # rate monotonic, set explicitly by the import
    assert list(t["level"]) == sorted(t["level"], reverse=True)  # the rank each ran at
    assert r.tasks["executed_ns"].sum() == 100 * 3_000_000 + 50 * 8_000_000 + 25 * 12_000_000
    assert system.analyze().schedulable


def test_simso_edf_and_errors(tmp_path):
    text = XML.read_text()
    edf = tmp_path / "edf.xml"
    edf.write_text(text.replace("simso.schedulers.RM", "simso.schedulers.EDF"))
    system = rtbox.from_simso(edf)
    assert 'policy = "edf"' in system.to_toml()
    bad = tmp_path / "bad.xml"
    bad.write_text(text.replace('WCET="8"', 'WCET="eight"'))
    with pytest.raises(rtbox.ConfigError) as e:
        rtbox.from_simso(bad)
    assert e.value.field == 'task "TASK T2": WCET'
    llf = tmp_path / "llf.xml"
    llf.write_text(text.replace("simso.schedulers.RM", "simso.schedulers.LLF"))
    with pytest.raises(rtbox.ConfigError) as e:
        rtbox.from_simso(llf)
    assert e.value.field == "sched.class"


def test_priority_order_is_the_models_one_rule():
    # (relative deadline, period): shorter deadline, then shorter period, then position.
    keys = [(10, 10), (5, 20), (5, 10), (10, 10)]
    assert rtbox._rtbox.priority_order(keys) == [2, 1, 0, 3]
