"""Reading SimSo configurations (the XML files SimSo's GUI and ``Configuration.save`` write).

SimSo gives its tasks the whole machine under one scheduler; the rtbox equivalent is one box
over every processor with a full-bandwidth server on each (platform cap 1.0), whose local
policy is the scheduler's: ``RM`` and ``DM`` (global fixed priority) and ``EDF`` (global EDF).
Times in SimSo files are milliseconds (floats), converted to integer nanoseconds here; the
simulation length is in cycles (``duration`` / ``cycles_per_ms``).
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from typing import Dict, List, Optional, Tuple, Union

from . import _rtbox
from .system import Box, Server, System, Task

#: SimSo scheduler class (last component of ``simso.schedulers.X``) -> rtbox local policy.
SCHEDULERS: Dict[str, str] = {"RM": "fifo", "DM": "fifo", "EDF": "edf", "G_EDF": "edf"}
#: The box every SimSo task goes into.
BOX = "simso"
#: Server period of the full-bandwidth servers (any period gives the whole CPU when Q = P).
SERVER_PERIOD = "10ms"


def _bad(field: str, reason: str) -> Exception:
    err = _rtbox.ConfigError(f"{field}: {reason}")
    err.field = field  # type: ignore[attr-defined]
    err.line = None  # type: ignore[attr-defined]
    return err


def _ms(task: str, el: ET.Element, attr: str, default: Optional[float] = None) -> Optional[int]:
    text = el.get(attr)
    if text is None or text == "":
        if default is None:
            return None
        return round(default * 1e6)
    try:
        v = float(text)
    except ValueError:
        raise _bad(f"task \"{task}\": {attr}", f"= \"{text}\" is not a number of ms") from None
    if v < 0:
        raise _bad(f"task \"{task}\": {attr}", f"= {v} is negative")
    return round(v * 1e6)


def read_simso(path: Union[str, os.PathLike]) -> Tuple[System, int, str]:
    """The system, the simulation length (ns) and the scheduler of a SimSo XML file."""
    try:
        root = ET.parse(os.fspath(path)).getroot()
    except (OSError, ET.ParseError) as e:
        raise _bad("file", f"cannot read {os.fspath(path)}: {e}") from None
    if root.tag != "simulation":
        raise _bad("simulation", f"root element is <{root.tag}>, not <simulation>")
    cycles_per_ms = float(root.get("cycles_per_ms", "1000000"))
    duration_ns = round(float(root.get("duration", "50000")) / cycles_per_ms * 1e6)

    sched = root.find("sched")
    if sched is None:
        raise _bad("sched", "missing <sched> element")
    clas = (sched.get("class") or sched.get("className") or "").strip()
    # "simso.schedulers.RM" (class) or "schedulers/RM.py" (className, a file).
    base = os.path.basename(clas)
    name = (base[:-3] if base.endswith(".py") else base).split(".")[-1]
    if name not in SCHEDULERS:
        raise _bad(
            "sched.class",
            f"\"{clas}\" is not one of {', '.join('simso.schedulers.' + s for s in SCHEDULERS)}",
        )

    procs = root.findall("processors/processor")
    if not procs:
        raise _bad("processors", "no <processor>")
    for p in procs:
        if float(p.get("speed", "1.0")) != 1.0:
            raise _bad(f"processor \"{p.get('name')}\": speed", "only speed 1.0 is modelled")

    tasks: List[Task] = []
    raw = root.findall("tasks/task")
    if not raw:
        raise _bad("tasks", "no <task>")
    for t in raw:
        tname = t.get("name") or f"T{t.get('id')}"
        kind = t.get("task_type", "Periodic")
        if kind not in ("Periodic", "Sporadic"):
            raise _bad(f"task \"{tname}\": task_type", f"\"{kind}\" is not Periodic or Sporadic")
        period = _ms(tname, t, "period")
        wcet = _ms(tname, t, "WCET")
        if period is None or wcet is None:
            missing = "period" if period is None else "WCET"
            raise _bad(f"task \"{tname}\": {missing}", "missing")
        tasks.append(
            Task(
                name=tname.replace(" ", "_"),
                box=BOX,
                wcet=wcet,
                period=period,
                deadline=_ms(tname, t, "deadline", period / 1e6),
                offset=_ms(tname, t, "activationDate", 0.0),
                arrival="sporadic" if kind == "Sporadic" else None,
            )
        )
    if name == "RM":
        # Rate monotonic: rtbox's one priority rule with the period as the deadline (shorter
        # period first, ties in file order).
        order = _rtbox.priority_order([(int(t.period), int(t.period)) for t in tasks])
        prio = {i: len(tasks) - rank for rank, i in enumerate(order)}
        tasks = [
            Task(**{**t.__dict__, "priority": prio[i]}) for i, t in enumerate(tasks)
        ]
    box = Box(
        name=BOX,
        interface=Server(budget=SERVER_PERIOD, period=SERVER_PERIOD),
        policy=SCHEDULERS[name],
        placement="global",
    )
    system = System.build(cpus=len(procs), boxes=[box], tasks=tasks, cap=1.0)
    return system, duration_ns, name


def from_simso(path: Union[str, os.PathLike]) -> System:
    """A SimSo XML configuration as a :class:`System` (see :func:`read_simso` for the length
    of the simulation SimSo would run). Raises :class:`ConfigError` naming the element."""
    return read_simso(path)[0]
