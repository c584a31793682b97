"""Typed results of admission, analysis and synthesis.

Built from the JSON the native module returns (the shape of the CLI's ``--json`` output);
times are integer nanoseconds, bandwidths floats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple


@dataclass(frozen=True)
class ServerLoad:
    """One server admitted on a CPU: a box's budget ``budget_ns`` every ``period_ns``."""

    box: str
    cpu: int
    budget_ns: int
    period_ns: int
    bandwidth: float
    #: ``whole`` or ``remainder`` (what a parent keeps after its children's servers).
    role: str


@dataclass(frozen=True)
class CpuLoad:
    """The servers of one CPU, their total bandwidth, the daemon loop's share and the cap."""

    cpu: int
    total: float
    #: The daemon's enforcement loop's share of the CPU (0 when checked without it).
    loop: float
    cap: float
    servers: List[ServerLoad]


@dataclass(frozen=True)
class SharedShare:
    """A shared box's expected share of the unreserved CPU."""

    box: str
    cpu: int
    weight: int
    share: float


@dataclass(frozen=True)
class Admission:
    """Root admission control, as ``rtbox check``: ``refusals`` carry the numbers."""

    admitted: bool
    cpus: List[CpuLoad]
    shared: List[SharedShare]
    refusals: List[str]

    @staticmethod
    def _from(d: dict[str, Any]) -> "Admission":
        return Admission(
            admitted=d["admitted"],
            cpus=[
                CpuLoad(
                    cpu=c["cpu"],
                    total=c["total"],
                    loop=c["loop"],
                    cap=c["cap"],
                    servers=[ServerLoad(**s) for s in c["servers"]],
                )
                for c in d["cpus"]
            ],
            shared=[SharedShare(**s) for s in d["shared"]],
            refusals=list(d["refusals"]),
        )


@dataclass(frozen=True)
class Check:
    """The inequality a task's verdict rests on: demand against supply over a window."""

    window_ns: int
    demand_ns: int
    supply_ns: int
    #: The parallelism k of Y_k for multi-supply tests.
    k: Optional[int]
    holds: bool


@dataclass(frozen=True)
class TaskVerdict:
    """One task's verdict within its box."""

    task: str
    wcet_ns: int
    deadline_ns: int
    period_ns: int
    #: None when the analysis orders by deadline (DM).
    priority: Optional[int]
    schedulable: bool
    response_bound_ns: Optional[int]
    response_exceeds_ns: Optional[int]
    vcpu: Optional[int]
    #: The CPU of its vCPU, when the test places tasks on vCPUs.
    cpu: Optional[int]
    check: Optional[Check]
    #: The inequality the verdict rests on, with its numbers (the CLI's ``condition`` column).
    condition: str


@dataclass(frozen=True)
class ChainVerdict:
    """One chain of tasks (``after`` in the config) within its box: its end-to-end bound."""

    #: The chain's tasks, head first.
    stages: List[str]
    end_to_end_bound_ns: Optional[int]
    deadline_ns: int
    schedulable: bool
    #: How the bound was found (the CLI's wording).
    method: str


@dataclass(frozen=True)
class BoxVerdict:
    """One box: its supply, the test matching its policy and placement, its tasks and chains."""

    box: str
    #: The reserved supply in words ("no reserved supply (shared)" for a shared box).
    supply: str
    test: str
    heuristic: Optional[str]
    schedulable: bool
    vcpu_cpus: List[int]
    tasks: List[TaskVerdict]
    chains: List[ChainVerdict] = field(default_factory=list)


@dataclass(frozen=True)
class Analysis:
    """``rtbox analyze``: admission plus the verdict of every box that has tasks."""

    schedulable: bool
    admission: Admission
    boxes: List[BoxVerdict]
    #: Tasks in no box (not analysed).
    background: List[str]
    #: No box shown has a task: ``schedulable`` is then False (a verdict would be vacuous).
    nothing_to_analyse: bool = False

    def box(self, name: str) -> BoxVerdict:
        """The verdict of box ``name``."""
        for b in self.boxes:
            if b.box == name:
                return b
        raise KeyError(name)

    def to_pandas(self) -> Any:
        """One row per analysed task (box, task, verdict, bound)."""
        import pandas as pd

        rows = [
            {
                "box": b.box,
                "task": t.task,
                "wcet_ns": t.wcet_ns,
                "deadline_ns": t.deadline_ns,
                "period_ns": t.period_ns,
                "priority": t.priority,
                "schedulable": t.schedulable,
                "response_bound_ns": t.response_bound_ns,
            }
            for b in self.boxes
            for t in b.tasks
        ]
        return pd.DataFrame(rows)

    @staticmethod
    def _from(d: dict[str, Any]) -> "Analysis":
        boxes = []
        for b in d["boxes"]:
            tasks = []
            for t in b["tasks"]:
                c = t.pop("check")
                tasks.append(TaskVerdict(check=Check(**c) if c else None, **t))
            chains = [ChainVerdict(**c) for c in b.get("chains", [])]
            boxes.append(BoxVerdict(**{**b, "tasks": tasks, "chains": chains}))
        return Analysis(
            schedulable=d["schedulable"],
            nothing_to_analyse=d.get("nothing_to_analyse", False),
            # The CLI's JSON carries the admission's fields at its top level.
            admission=Admission._from(d),
            boxes=boxes,
            background=list(d["background"]),
        )


@dataclass(frozen=True)
class Synthesis:
    """The smallest interface of a kind for a box (``rtbox analyze --synthesize``).

    For ``bdm``: ``alpha`` at ``delta_ns``, the per-vCPU hard CBS ``server`` (budget, period)
    and the (Delta, alpha) trade-off ``table``. For ``mpr``: ``theta_ns``, ``pi_ns``, ``m``.
    For ``server``: ``budget_ns`` at ``period_ns``. ``toml`` is a ready-to-paste ``[[box]]``.
    """

    box: str
    kind: str
    toml: str
    alpha: Optional[float] = None
    alpha_text: Optional[str] = None
    delta_ns: Optional[int] = None
    server: Optional[Tuple[int, int]] = None
    table: List[Tuple[int, Optional[float]]] = field(default_factory=list)
    theta_ns: Optional[int] = None
    pi_ns: Optional[int] = None
    m: Optional[int] = None
    budget_ns: Optional[int] = None
    period_ns: Optional[int] = None

    @staticmethod
    def _from(d: dict[str, Any]) -> "Synthesis":
        # The CLI's shape: {box, interface: {kind, ...}, toml}; BDM alphas as exact decimal text.
        i = dict(d["interface"])
        s = i.pop("server", None)
        table = [(r["delta_ns"], None if r["alpha"] is None else float(r["alpha"])) for r in i.pop("table", [])]
        alpha = i.pop("alpha", None)
        return Synthesis(
            box=d["box"],
            toml=d["toml"],
            alpha=None if alpha is None else float(alpha),
            alpha_text=alpha,
            server=(s["budget_ns"], s["period_ns"]) if s else None,
            table=table,
            **i,
        )
