"""rtbox: real-time CPU reservations for groups of tasks, from Python.

Thin bindings over the rtbox Rust crates (the same functions the ``rtbox`` CLI calls):

- :func:`load`, :func:`loads`, :meth:`System.build`, :func:`from_simso` make a :class:`System`;
- :meth:`System.check` (admission), :meth:`System.analyze` (schedulability),
  :meth:`System.synthesize` (smallest interface), :meth:`System.simulate` (virtual time, with
  pandas tables, a Gantt chart and a Perfetto trace);
- :func:`generate` (random task sets) and :func:`sweep` (schedulability experiments, locally
  or on a Dask cluster).

Errors are :class:`ConfigError` (bad input, naming line and field), :class:`AdmissionError`
(refused reservations, with ``refusals``), :class:`SynthesisError`, :class:`SimulationError`,
all subclasses of :class:`RtboxError`.
"""

from ._rtbox import (
    MODELS,
    AdmissionError,
    ConfigError,
    RtboxError,
    SimulationError,
    SynthesisError,
    duration_ns,
)
from .results import (
    Admission,
    Analysis,
    BoxVerdict,
    ChainVerdict,
    Check,
    CpuLoad,
    ServerLoad,
    SharedShare,
    Synthesis,
    TaskVerdict,
)
from .sim import SimResult
from .simso import from_simso, read_simso
from .sweep import SweepResult, sweep
from .system import Bdm, Box, Mpr, Server, Shared, System, Task, generate, load, loads

__all__ = [
    "MODELS",
    "Admission",
    "AdmissionError",
    "Analysis",
    "Bdm",
    "Box",
    "BoxVerdict",
    "ChainVerdict",
    "Check",
    "ConfigError",
    "CpuLoad",
    "Mpr",
    "RtboxError",
    "Server",
    "ServerLoad",
    "Shared",
    "SharedShare",
    "SimResult",
    "SimulationError",
    "SweepResult",
    "Synthesis",
    "SynthesisError",
    "System",
    "Task",
    "TaskVerdict",
    "duration_ns",
    "from_simso",
    "generate",
    "load",
    "loads",
    "read_simso",
    "sweep",
]
