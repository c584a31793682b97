//! Every invalid value gets one precise message naming the line, the field and the reason
//! (issue 2, "Bad input").

use rtbox_config::parse_str;

const PLATFORM: &str = "[platform]\ncpus = 2\n";

/// Parses `PLATFORM + body` and returns the error message.
fn error_of(body: &str) -> String {
    let text = format!("{PLATFORM}{body}");
    match parse_str(&text) {
        Ok(_) => panic!("accepted invalid input:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn assert_error(body: &str, expected: &str) {
    let msg = error_of(body);
    assert!(
        msg.contains(expected),
        "message {msg:?} does not contain {expected:?}"
    );
}

#[test]
fn unknown_field_names_line_and_field() {
    let msg = error_of("[[box]]\nname = \"a\"\nbudgett = \"1ms\"\ninterface.per_cpu = \"1 2\"\n");
    assert!(
        msg.starts_with("line 5: unknown field \"budgett\""),
        "{msg}"
    );
}

#[test]
fn alpha_outside_unit_interval() {
    assert_error(
        "[[box]]\nname = \"Y1\"\ninterface.bdm = { alpha = 1.2, delta = \"20ms\" }\n",
        "line 5: box \"Y1\": interface.bdm.alpha = 1.2 is not in (0, 1)",
    );
    assert_error(
        "[[box]]\nname = \"Y1\"\ninterface.bdm = { alpha = 0.0, delta = \"20ms\" }\n",
        "interface.bdm.alpha = 0 is not in (0, 1)",
    );
    assert_error(
        "[[box]]\nname = \"Y1\"\ninterface.bdm = { alpha = -0.5, delta = \"20ms\" }\n",
        "interface.bdm.alpha = -0.5 is not a non-negative number",
    );
}

#[test]
fn delta_must_be_positive() {
    assert_error(
        "[[box]]\nname = \"Y1\"\ninterface.bdm = { alpha = 0.5, delta = \"0ms\" }\n",
        "box \"Y1\": interface.bdm.delta = 0ns must be positive",
    );
    assert_error(
        "[[box]]\nname = \"Y1\"\ninterface.bdm = { alpha = 0.5, delta = \"-3ms\" }\n",
        "interface.bdm.delta = \"-3ms\": durations cannot be negative",
    );
}

#[test]
fn budget_above_period() {
    assert_error(
        "[[box]]\nname = \"a\"\ninterface.per_cpu = { budget = \"20ms\", period = \"10ms\" }\n",
        "box \"a\": interface.per_cpu.budget = 20ms is larger than the period 10ms",
    );
    assert_error(
        "[[box]]\nname = \"a\"\ninterface.servers = \"0 2000/1000\"\n",
        "interface.servers[0].budget = 2ms is larger than the period 1ms",
    );
}

#[test]
fn zero_period() {
    assert_error(
        "[[box]]\nname = \"a\"\ninterface.per_cpu = { budget = \"0ms\", period = \"0ms\" }\n",
        "interface.per_cpu.period = 0ns must be positive",
    );
    assert_error(
        "[[task]]\nname = \"t\"\nwcet = \"1ms\"\nperiod = \"0s\"\n",
        "task \"t\": period = 0ns must be positive",
    );
}

#[test]
fn unit_typos() {
    assert_error(
        "[[box]]\nname = \"a\"\ninterface.per_cpu = { budget = \"10mss\", period = \"100ms\" }\n",
        "line 5: box \"a\": interface.per_cpu.budget = \"10mss\": unknown unit \"mss\"",
    );
    assert_error(
        "[[task]]\nname = \"t\"\nwcet = 10\nperiod = \"1s\"\n",
        "task \"t\": wcet = 10 has no unit",
    );
    assert_error(
        "[[task]]\nname = \"t\"\nwcet = \"10\"\nperiod = \"1s\"\n",
        "\"10\" has no unit",
    );
}

#[test]
fn mpr_limits() {
    assert_error(
        "[[box]]\nname = \"m\"\ninterface.mpr = { theta = \"30ms\", pi = \"10ms\", m = 2 }\n",
        "box \"m\": interface.mpr.theta = 30ms is larger than m * pi = 2 * 10ms",
    );
    assert_error(
        "[[box]]\nname = \"m\"\ninterface.mpr = { theta = \"10ms\", pi = \"10ms\", m = 3 }\n",
        "interface.mpr.m = 3 is larger than the box's 2 CPUs (0-1)",
    );
}

#[test]
fn cpus_outside_the_platform() {
    assert_error(
        "[[box]]\nname = \"a\"\ncpus = \"1-2\"\ninterface.per_cpu = \"1000 2000\"\n",
        "line 5: box \"a\": cpus = \"1-2\" names CPU 2, which is not in the platform (0-1)",
    );
    assert_error(
        "[[box]]\nname = \"a\"\ninterface.servers = \"3 1000/2000\"\n",
        "interface.servers[0].cpu = 3 is not a CPU of the platform (0-1)",
    );
}

#[test]
fn duplicate_unknown_and_cyclic_boxes() {
    let b = |name: &str, parent: &str| {
        format!("[[box]]\nname = \"{name}\"\n{parent}interface.per_cpu = \"1000 10000\"\n")
    };
    assert_error(
        &format!("{}{}", b("a", ""), b("a", "")),
        "line 7: box \"a\": name is used by another box",
    );
    assert_error(
        &b("a", "parent = \"nope\"\n"),
        "line 5: box \"a\": parent = \"nope\" is not a box",
    );
    assert_error(
        &format!(
            "{}{}",
            b("a", "parent = \"b\"\n"),
            b("b", "parent = \"a\"\n")
        ),
        "parent forms a cycle among boxes a, b",
    );
    assert_error(&b("x/y", ""), "box \"x/y\": parent = \"x\" is not a box");
}

#[test]
fn malformed_server_strings() {
    for (s, expect) in [
        ("0 100000/1000000 1", "must be pairs"),
        ("zero 1/2", "\"zero\" is not a CPU number"),
        ("0 100000", "is not budget/period"),
        ("0 1.5/2", "not a whole number of microseconds"),
    ] {
        assert_error(
            &format!("[[box]]\nname = \"a\"\ninterface.servers = \"{s}\"\n"),
            expect,
        );
    }
}

#[test]
fn interface_needs_exactly_one_kind() {
    assert_error(
        "[[box]]\nname = \"a\"\ninterface.per_cpu = \"1 2\"\ninterface.shared = { weight = 1 }\n",
        "box \"a\": interface: give exactly one of servers, per_cpu, bdm, mpr, shared (found per_cpu and shared)",
    );
    assert_error(
        "[[box]]\nname = \"a\"\n",
        "box \"a\": interface is missing: give one of",
    );
}

#[test]
fn bad_enumerations() {
    assert_error(
        "[[box]]\nname = \"a\"\npolicy = \"rm\"\ninterface.per_cpu = \"1 2\"\n",
        "line 5: box \"a\": policy = \"rm\" is not one of fifo, edf, fair",
    );
}

#[test]
fn tasks_refer_to_real_boxes_and_cpus() {
    assert_error(
        "[[task]]\nname = \"t\"\nbox = \"ghost\"\nwcet = \"1ms\"\nperiod = \"10ms\"\n",
        "line 5: task \"t\": box = \"ghost\" is not a box",
    );
    assert_error(
        "[[task]]\nname = \"t\"\ncpu = 7\nwcet = \"1ms\"\nperiod = \"10ms\"\n",
        "task \"t\": cpu = 7 is not one of the CPUs it may use (0-1)",
    );
    assert_error(
        "[[task]]\nname = \"t\"\nafter = \"t\"\nwcet = \"1ms\"\nperiod = \"10ms\"\n",
        "task \"t\": after = \"t\" is not another task",
    );
}

#[test]
fn platform_is_required_and_checked() {
    let e = parse_str("[[box]]\nname = \"a\"\ninterface.per_cpu = \"1 2\"\n").unwrap_err();
    assert!(e.to_string().contains("missing [platform]"), "{e}");
    let e = parse_str("[platform]\ncpus = 2\ncap = 1.5\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 3: platform: cap = 1.5 is not in (0, 1]"
    );
    let e = parse_str("[platform]\ncpus = \"3-1\"\n").unwrap_err();
    assert!(e.to_string().contains("range \"3-1\" is backwards"), "{e}");
}

#[test]
fn syntax_errors_have_lines() {
    let e = parse_str("[platform]\ncpus = 2\n[[box]\n").unwrap_err();
    assert_eq!(e.line, Some(3), "{e}");
}
