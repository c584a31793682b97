"""Admission, analysis and synthesis: the values of the CLI's --json, and errors naming fields."""

import json
import pickle

import pytest

import rtbox


def test_synthesize_y1_bdm_delta_20ms_gives_alpha_068(bdm_file, cli_json):
    s = rtbox.load(bdm_file).synthesize("Y1", interface="bdm", delta="20ms")
    assert s.kind == "bdm" and s.box == "Y1"
    assert s.alpha_text == "0.68"
    assert s.alpha == pytest.approx(0.68)
    assert s.delta_ns == 20_000_000
    cli = cli_json("analyze", bdm_file, "--box", "Y1", "--synthesize", "bdm", "--delta", "20ms")
    iface = cli["boxes"][0]["interface"]
    assert iface["alpha"] == s.alpha_text
    assert (iface["server"]["budget_ns"], iface["server"]["period_ns"]) == s.server
    assert [r["delta_ns"] for r in iface["table"]] == [d for d, _ in s.table]
    assert "alpha = 0.68" in s.toml


def test_server_and_mpr_synthesis_match_the_cli(bdm_file, cli_json):
    system = rtbox.load(bdm_file)
    s = system.synthesize("Y2", interface="server", period="10ms")
    cli = cli_json("analyze", bdm_file, "--box", "Y2", "--synthesize", "server", "--period", "10ms")
    assert s.budget_ns == cli["boxes"][0]["interface"]["budget_ns"] > 0
    m = system.synthesize("Y1", interface="mpr", period="20ms")
    cli = cli_json("analyze", bdm_file, "--box", "Y1", "--synthesize", "mpr", "--period", "20ms")
    assert (m.theta_ns, m.m) == (cli["boxes"][0]["interface"]["theta_ns"], cli["boxes"][0]["interface"]["m"])


def test_analyze_matches_the_cli_task_by_task(bdm_file, cli_json):
    report = rtbox.load(bdm_file).analyze()
    cli = cli_json("analyze", bdm_file)
    assert report.schedulable == cli["schedulable"] is True
    assert report.background == cli["background"] == ["bg6", "bg7", "bg8"]
    ours = {(b.box, t.task): (t.schedulable, t.response_bound_ns) for b in report.boxes for t in b.tasks}
    theirs = {
        (b["box"], t["task"]): (t["schedulable"], t["response_bound_ns"])
        for b in cli["boxes"]
        for t in b["tasks"]
    }
    assert ours == theirs and len(ours) == 5
    df = report.to_pandas()
    assert list(df["task"]) == ["tau1", "tau2", "tau3", "tau4", "tau5"]


def test_check_refuses_with_the_numbers(cli_json):
    path = str(rtbox_examples() / "oversubscribed.toml")
    a = rtbox.load(path).check()
    cli = cli_json("check", path)
    assert a.admitted is cli["admitted"] is False
    assert a.refusals == cli["refusals"] and a.refusals
    assert any(">" in r and "cap" in r for r in a.refusals), a.refusals
    assert [c.total for c in a.cpus] == [c["total"] for c in cli["cpus"]]
    with pytest.raises(rtbox.AdmissionError) as e:
        rtbox.load(path).check(strict=True)
    assert e.value.refusals == a.refusals
    with pytest.raises(rtbox.AdmissionError) as e:
        rtbox.load(path).simulate("1s")
    assert e.value.refusals and "cap" in str(e.value)


def test_check_without_the_daemon_loop_admits_the_bdm_example(bdm_file, cli_json):
    a = rtbox.load(bdm_file).check(loop_step_us=0)
    cli = cli_json("check", bdm_file, "--loop-step-us", "0")
    assert a.admitted is cli["admitted"] is True
    assert [c.loop for c in a.cpus] == [c["loop"] for c in cli["cpus"]] == [0.0, 0.0]
    servers = [(s.box, s.cpu, s.budget_ns, s.period_ns) for c in a.cpus for s in c.servers]
    assert servers == [
        (s["box"], s["cpu"], s["budget_ns"], s["period_ns"]) for c in cli["cpus"] for s in c["servers"]
    ]


def test_check_admits_the_loop_of_the_sensor_named_as_the_cli_does(bdm_file, cli_json):
    system = rtbox.load(bdm_file)
    loops = {}
    for sensor in ("perf", "bpf", "auto"):
        a = system.check(sensor=sensor)
        cli = cli_json("check", bdm_file, "--sensor", sensor)
        assert [c.loop for c in a.cpus] == [c["loop"] for c in cli["cpus"]], sensor
        assert a.refusals == cli["refusals"], sensor
        loops[sensor] = a.cpus[0].loop
    # Different loops: the perf loop polls every 1-4 ms, the BPF loop not at all.
    assert loops["perf"] > loops["bpf"] > 0, loops
    assert loops["auto"] in (loops["perf"], loops["bpf"])
    assert system.check(sensor=None).cpus[0].loop == (
        loops["bpf"] if rtbox.system._bpf_sensor(None) else loops["perf"]
    )
    with pytest.raises(ValueError, match="sensor: unknown sensor 'ebpf'"):
        system.check(sensor="ebpf")


def rtbox_examples():
    from conftest import EXAMPLES

    return EXAMPLES


def test_bad_input_raises_config_error_naming_the_field():
    with pytest.raises(rtbox.ConfigError) as e:
        rtbox.loads("[platform]\ncpus = 2\n\n[[box]]\nname = 'a'\ninterface.bdm = { alpha = 1.7, delta = '20ms' }\n")
    assert e.value.line == 6
    assert e.value.field == "interface.bdm.alpha"
    assert "interface.bdm.alpha" in str(e.value) and "1.7" in str(e.value)
    with pytest.raises(rtbox.ConfigError) as e:
        rtbox.System.build(cpus=2, tasks=[rtbox.Task("t", wcet="-3ms", period="10ms")])
    assert e.value.field == "wcet", str(e.value)
    with pytest.raises(rtbox.ConfigError) as e:
        rtbox.load("/nonexistent/x.toml")
    assert "cannot read" in str(e.value)
    system = rtbox.loads("[platform]\ncpus = 1\n")
    with pytest.raises(rtbox.ConfigError) as e:
        system.simulate("1s", model="cfs")
    assert e.value.field == "model" and "rt-throttling" in str(e.value)
    with pytest.raises(rtbox.ConfigError) as e:
        system.simulate("0s")
    assert e.value.field == "duration"
    with pytest.raises(rtbox.ConfigError) as e:
        rtbox.load(rtbox_examples() / "bdm-validation.toml").synthesize("Y9", delta="20ms")
    assert e.value.field == "box"
    with pytest.raises(rtbox.ConfigError) as e:
        rtbox.load(rtbox_examples() / "bdm-validation.toml").synthesize("Y1", "bdm")
    assert e.value.field == "delta"


def test_built_system_equals_the_loaded_file(bdm_file):
    boxes = [
        rtbox.Box("Y1", rtbox.Bdm(0.72, "20ms")),
        rtbox.Box("Y2", rtbox.Bdm(0.22, "20ms")),
    ]
    ms = 1_000_000
    tasks = [
        rtbox.Task("tau1", 10 * ms, 60 * ms, box="Y1", priority=13),
        rtbox.Task("tau2", "140ms", "270ms", box="Y1", priority=12),
        rtbox.Task("tau3", "90ms", "520ms", box="Y1", priority=11),
        rtbox.Task("tau4", "40ms", "270ms", box="Y2", priority=15),
        rtbox.Task("tau5", "40ms", "520ms", box="Y2", priority=14),
        rtbox.Task("bg6", "25ms", "100ms", priority=18),
        rtbox.Task("bg7", "50ms", "200ms", priority=17),
        rtbox.Task("bg8", "100ms", "400ms", priority=16),
    ]
    built = rtbox.System.build(cpus=2, cap=0.95, boxes=boxes, tasks=tasks)
    loaded = rtbox.load(bdm_file)
    assert built.box_names == loaded.box_names and built.task_names == loaded.task_names
    a = built.simulate("10s", jobs=False, trace=False).to_dict()
    b = loaded.simulate("10s", jobs=False, trace=False).to_dict()
    assert a == b
    copy = pickle.loads(pickle.dumps(built))
    assert copy.to_toml() == built.to_toml()
    assert copy.synthesize("Y1", delta="20ms").alpha_text == "0.68"


def test_native_json_is_the_clis_json(bdm_file, cli_json):
    """One shape: the binding's JSON equals the CLI's --json, field for field."""
    system = rtbox.load(bdm_file)
    bpf = rtbox.system._bpf_sensor(None)
    assert json.loads(system._native.check(None, bpf)) == cli_json("check", bdm_file)
    assert json.loads(system._native.analyze()) == cli_json("analyze", bdm_file)
    native = json.loads(system._native.synthesize("Y1", "bdm", "20ms", None))
    cli = cli_json("analyze", bdm_file, "--box", "Y1", "--synthesize", "bdm", "--delta", "20ms")
    assert cli["found"] is True and cli["boxes"] == [native]


def test_analysis_carries_the_clis_loop_supply_cpu_and_condition(bdm_file, cli_json):
    a = rtbox.load(bdm_file).check()
    cli = cli_json("check", bdm_file)
    assert [c.loop for c in a.cpus] == [c["loop"] for c in cli["cpus"]]
    assert all(c.loop > 0 for c in a.cpus), a.cpus
    report = rtbox.load(bdm_file).analyze()
    cli = cli_json("analyze", bdm_file)
    assert [b.supply for b in report.boxes] == [b["supply"] for b in cli["boxes"]]
    ours = [(t.cpu, t.condition) for b in report.boxes for t in b.tasks]
    assert ours == [(t["cpu"], t["condition"]) for b in cli["boxes"] for t in b["tasks"]]
    assert all(c for _, c in ours), ours
    assert report.admission.cpus and report.admission.admitted is cli["admitted"]


def test_chains_carry_the_clis_end_to_end_bounds(cli_json):
    path = str(rtbox_examples() / "jack-pipeline.toml")
    report = rtbox.load(path).analyze()
    cli = cli_json("analyze", path)
    ours = {
        (b.box, tuple(c.stages)): (c.end_to_end_bound_ns, c.deadline_ns, c.schedulable, c.method)
        for b in report.boxes
        for c in b.chains
    }
    theirs = {
        (b["box"], tuple(c["stages"])): (
            c["end_to_end_bound_ns"], c["deadline_ns"], c["schedulable"], c["method"]
        )
        for b in cli["boxes"]
        for c in b["chains"]
    }
    assert ours == theirs and ours, ours
    assert report.nothing_to_analyse is cli["nothing_to_analyse"] is False
