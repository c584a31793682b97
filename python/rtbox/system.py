"""Systems: loading configurations, building them from Python objects, and the commands that
take one (check, analyze, synthesize, simulate). Every call goes to the Rust library through
the native module; nothing here decides a schedule."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _rtbox
from .results import Admission, Analysis, Synthesis
from .sim import SimResult

#: A duration: text as in configuration files (``"20ms"``, ``"1.5s"``) or integer nanoseconds.
Duration = Union[str, int]


def _dur(d: Duration) -> str:
    if isinstance(d, bool):
        raise TypeError("a duration is text such as '10ms' or integer nanoseconds")
    return f"{d}ns" if isinstance(d, int) else str(d)


def _bpf_sensor(sensor: Optional[str]) -> bool:
    """Whether ``rtbox check --sensor SENSOR`` admits the BPF sensor's loop: ``sensor``, else
    ``RTBOX_SENSOR``, else ``"auto"``, which is BPF where the kernel has BTF (the rule of the
    daemon's ``SensorChoice::probe`` for a binary built with the BPF program, as
    ``scripts/setup.sh`` builds it)."""
    where = "sensor"
    if sensor is None:
        sensor = os.environ.get("RTBOX_SENSOR")
        where = "RTBOX_SENSOR"
    if sensor is None:
        sensor = "auto"
    if sensor == "auto":
        return os.path.exists("/sys/kernel/btf/vmlinux")
    if sensor in ("bpf", "perf"):
        return sensor == "bpf"
    raise ValueError(f"{where}: unknown sensor {sensor!r} (bpf, perf or auto)")


@dataclass(frozen=True)
class Server:
    """Interface: a hard CBS server of ``budget`` every ``period`` on each CPU of the box."""

    budget: Duration
    period: Duration

    def _toml(self) -> Dict[str, Any]:
        return {"per_cpu": {"budget": _dur(self.budget), "period": _dur(self.period)}}


@dataclass(frozen=True)
class Bdm:
    """Interface: a bounded-delay multiprocessor platform (rate ``alpha``, delay ``delta``)."""

    alpha: float
    delta: Duration

    def _toml(self) -> Dict[str, Any]:
        return {"bdm": {"alpha": self.alpha, "delta": _dur(self.delta)}}


@dataclass(frozen=True)
class Mpr:
    """Interface: a multiprocessor periodic resource (``theta`` every ``pi`` on ``m`` CPUs)."""

    theta: Duration
    pi: Duration
    m: int

    def _toml(self) -> Dict[str, Any]:
        return {"mpr": {"theta": _dur(self.theta), "pi": _dur(self.pi), "m": self.m}}


@dataclass(frozen=True)
class Shared:
    """Interface: no reservation, a weighted share of the unreserved CPU."""

    weight: int

    def _toml(self) -> Dict[str, Any]:
        return {"shared": {"weight": self.weight}}


Interface = Union[Server, Bdm, Mpr, Shared]


@dataclass(frozen=True)
class Box:
    """A box (``[[box]]`` of the configuration, docs/config.md)."""

    name: str
    interface: Interface
    policy: str = "fifo"
    placement: str = "global"
    #: CPUs (count or list such as ``"0-3"``); None: all of the platform's (or the parent's).
    cpus: Optional[Union[int, str]] = None
    parent: Optional[str] = None

    def _toml(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {
            "name": self.name,
            "policy": self.policy,
            "placement": self.placement,
            "interface": self.interface._toml(),
        }
        if self.cpus is not None:
            d["cpus"] = self.cpus
        if self.parent is not None:
            d["parent"] = self.parent
        return d


@dataclass(frozen=True)
class Task:
    """A task (``[[task]]`` of the configuration). ``box=None`` runs it outside reservations."""

    name: str
    wcet: Duration
    period: Duration
    deadline: Optional[Duration] = None
    box: Optional[str] = None
    #: Higher is more urgent (Linux RT priorities); None orders by deadline.
    priority: Optional[int] = None
    bcet: Optional[Duration] = None
    cpu: Optional[int] = None
    offset: Optional[Duration] = None
    jitter: Optional[Duration] = None
    #: ``periodic`` or ``sporadic``.
    arrival: Optional[str] = None

    def _toml(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"name": self.name}
        for k in ("box", "priority", "cpu", "arrival"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        for k in ("wcet", "period", "deadline", "bcet", "offset", "jitter"):
            v = getattr(self, k)
            if v is not None:
                d[k] = _dur(v)
        return d


class System:
    """A validated platform with boxes and tasks.

    Make one with :func:`load`, :func:`loads`, :meth:`System.build` or :func:`from_simso`.
    Pickles as its configuration text (so Dask workers can receive it).
    """

    def __init__(self, native: _rtbox.System) -> None:
        self._native = native

    @staticmethod
    def build(
        cpus: Union[int, str],
        boxes: Sequence[Box] = (),
        tasks: Sequence[Task] = (),
        cap: Optional[float] = None,
    ) -> "System":
        """A system from Python objects, validated exactly as a configuration file.

        Raises :class:`ConfigError` naming the object and field of the first bad value.
        """
        platform: Dict[str, Any] = {"cpus": cpus}
        if cap is not None:
            platform["cap"] = cap
        doc = {
            "platform": platform,
            "box": [b._toml() for b in boxes],
            "task": [t._toml() for t in tasks],
        }
        return System(_rtbox.from_json(json.dumps(doc)))

    def __reduce__(self) -> Any:
        return (loads, (self.to_toml(),))

    def __repr__(self) -> str:
        return f"System(cpus={self.cpus}, boxes={self.box_names}, tasks={len(self.task_names)})"

    def to_toml(self) -> str:
        """The configuration text (what ``rtbox`` CLI commands read)."""
        return self._native.to_toml()

    @property
    def box_names(self) -> List[str]:
        return self._native.box_names

    @property
    def task_names(self) -> List[str]:
        return self._native.task_names

    @property
    def cpus(self) -> List[int]:
        return self._native.cpus

    def check(
        self, loop_step_us: Optional[int] = None, strict: bool = False, sensor: Optional[str] = None
    ) -> Admission:
        """Admission control as ``rtbox check``: per-CPU servers, totals and refusals.

        ``loop_step_us``: CPU time of one step of the daemon's loop (None: the measured step of
        the sensor's loop, 0: the reservations alone). ``sensor``: the daemon's sensor whose
        loop is admitted, ``"bpf"``, ``"perf"`` or ``"auto"`` (None: as ``rtbox check``, the
        one ``rtbox daemon`` takes without ``--sensor``: ``RTBOX_SENSOR``, else ``"auto"``).
        ``strict=True`` raises :class:`AdmissionError` when refused.
        """
        step = None if loop_step_us is None else loop_step_us * 1000
        a = Admission._from(json.loads(self._native.check(step, _bpf_sensor(sensor))))
        if strict and not a.admitted:
            err = _rtbox.AdmissionError("refused: " + "; ".join(a.refusals))
            err.refusals = a.refusals  # type: ignore[attr-defined]
            raise err
        return a

    def analyze(self) -> Analysis:
        """Every box's schedulability verdict, per task, as ``rtbox analyze``."""
        return Analysis._from(json.loads(self._native.analyze()))

    def synthesize(
        self,
        box: str,
        interface: str = "bdm",
        delta: Optional[Duration] = None,
        period: Optional[Duration] = None,
    ) -> Synthesis:
        """The smallest interface of kind ``interface`` (``bdm``, ``mpr``, ``server``) that
        makes ``box`` schedulable, as ``rtbox analyze --synthesize``. ``bdm`` needs ``delta``;
        ``mpr`` and ``server`` need ``period``.

        Raises :class:`ConfigError` for bad arguments, :class:`SynthesisError` when none works.
        """
        d = None if delta is None else _dur(delta)
        p = None if period is None else _dur(period)
        return Synthesis._from(json.loads(self._native.synthesize(box, interface, d, p)))

    def simulate(
        self,
        duration: Duration = "10s",
        model: str = "rtbox",
        seed: int = 1,
        jobs: bool = True,
        trace: bool = True,
        window: Optional[Duration] = None,
    ) -> SimResult:
        """Simulates in virtual time, as ``rtbox sim``.

        ``model``: ``rtbox`` (boxes as hard CBS servers), ``rt-throttling`` (Linux RT group
        throttling with the boxes' budgets), ``deadline`` (one SCHED_DEADLINE reservation per
        boxed task) or ``fp`` (global fixed priority, no reservations). ``jobs`` records one
        row per job; ``trace`` records the first ``window`` (default: the duration, at most
        1 s) for :meth:`SimResult.gantt` and :meth:`SimResult.trace`. The GIL is released while
        it runs. Raises :class:`AdmissionError` when the reservations are refused.
        """
        w = None if window is None else _dur(window)
        return SimResult(self._native.simulate(_dur(duration), model, seed, jobs, trace, w))


def load(path: Union[str, os.PathLike]) -> System:
    """Reads a configuration file (TOML, docs/config.md). Raises :class:`ConfigError`."""
    return System(_rtbox.load(os.fspath(path)))


def loads(text: str) -> System:
    """Parses configuration text (TOML). Raises :class:`ConfigError` naming line and field."""
    return System(_rtbox.loads(text))


def generate(
    utilization: float,
    sets: int = 1,
    tasks: int = 10,
    method: str = "randfixedsum",
    max_task_util: float = 1.0,
    periods: str = "10ms:100ms",
    granularity: str = "1ms",
    deadlines: str = "implicit",
    seed: int = 1,
    box: Optional[str] = None,
) -> List[List[Task]]:
    """Random task sets of total ``utilization``, drawn as ``rtbox sweep`` draws them.

    ``method``: ``randfixedsum``, ``uunifast-discard`` or ``uunifast``; periods log-uniform in
    ``periods`` (``MIN:MAX``), multiples of ``granularity``; ``deadlines`` implicit or
    constrained; deadline-monotonic priorities. Set ``i`` equals the i-th set that
    ``rtbox sweep --utilizations U --sets N --seed S`` judges. Tasks go in ``box`` (default:
    the sweep's box name ``sweep``).
    """
    raw = json.loads(
        _rtbox.generate(
            utilization,
            sets=sets,
            tasks=tasks,
            method=method,
            max_task_util=max_task_util,
            periods=periods,
            granularity=granularity,
            deadlines=deadlines,
            seed=seed,
            box_name=box,
        )
    )
    return [[Task(**t) for t in s] for s in raw]
