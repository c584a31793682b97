"""Schedulability sweeps, locally or on a Dask cluster.

A sweep is N random task sets per utilization point, each judged by the analysis and/or the
simulator (``rtbox sweep``). Sets are numbered 0..points*N; set ``i`` is drawn from the stream
``(seed, i)``, so the work splits into chunks described by the sweep's settings and an index
range. Each chunk is drawn and judged where it runs (this process, or a Dask worker): no task
set is serialised, and the verdicts, concatenated in index order, are those of a local run.
"""

from __future__ import annotations

import math
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Union

from . import _rtbox
from .system import System


def _native(args: Dict[str, Any]) -> _rtbox.Sweep:
    args = dict(args)
    base = args.pop("base")
    return _rtbox.Sweep(base=None if base is None else _rtbox.loads(base), **args)


def _run_chunk(args: Dict[str, Any], start: int, end: int) -> List[List[bool]]:
    """Draws and judges sets ``start..end`` (runs on a Dask worker, or here)."""
    return _native(args).evaluate(start, end)


@dataclass
class SweepResult:
    """Success ratios per utilization point.

    ``df`` has columns ``utilization``, ``sets`` and one ratio column per evaluator (as the CSV
    of ``rtbox sweep``); ``verdicts`` holds every set's verdicts in index order.
    """

    df: Any
    evaluators: List[str]
    verdicts: List[List[bool]]
    _sweep: Any

    def to_csv(self) -> str:
        """The CSV ``rtbox sweep`` prints (same rounding)."""
        return self._sweep.to_csv(self.verdicts)

    def to_svg(self, title: str = "") -> str:
        """The SVG plot of ``rtbox sweep --svg``."""
        return self._sweep.to_svg(self.verdicts, title)

    def plot(self, ax: Any = None, title: Optional[str] = None) -> Any:
        """A matplotlib figure: success ratio against task-set utilization, one line per
        evaluator."""
        import matplotlib.pyplot as plt

        if ax is None:
            fig, ax = plt.subplots(figsize=(7, 4))
        else:
            fig = ax.figure
        for e in self.evaluators:
            ax.plot(self.df["utilization"], self.df[e], marker="o", label=e)
        ax.set_xlabel("task-set utilization (CPUs)")
        ax.set_ylabel("success ratio")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend()
        if title:
            ax.set_title(title)
        fig.tight_layout()
        return fig


def _ranges(total: int, chunk: int) -> List[tuple[int, int]]:
    return [(a, min(a + chunk, total)) for a in range(0, total, chunk)]


def sweep(
    system: Optional[System] = None,
    box: Optional[str] = None,
    *,
    cpus: int = 4,
    policy: str = "fifo",
    placement: str = "global",
    utilizations: Union[str, List[float]] = "0.5:3.5:0.25",
    sets: int = 100,
    tasks: int = 10,
    method: str = "randfixedsum",
    max_task_util: float = 1.0,
    periods: str = "10ms:100ms",
    granularity: str = "1ms",
    deadlines: str = "implicit",
    evaluate: Union[str, List[str]] = "analysis",
    sim_duration: Optional[str] = None,
    seed: int = 1,
    threads: Optional[int] = None,
    client: Any = None,
    chunk: Optional[int] = None,
    progress: Optional[Callable[[int, int], None]] = None,
) -> SweepResult:
    """Runs a schedulability sweep; arguments and defaults are those of ``rtbox sweep``.

    ``system`` and ``box``: a configuration and the box receiving the generated tasks (its
    other tasks stay); without them, one box of ``cpus`` CPUs with a 9.5 ms / 10 ms server on
    each. ``evaluate``: ``analysis``, ``sim`` (= ``sim-rtbox``), ``sim-rt-throttling``,
    ``sim-deadline``, ``sim-fp``.

    ``client``: a ``dask.distributed.Client``; the chunks (settings + index range) then run on
    its workers, each drawing its own sets. ``chunk``: sets per chunk. ``threads``: threads per
    chunk (default: all cores locally, 1 per Dask task). ``progress(done, total)`` is called
    after each chunk. Ctrl-C stops the sweep between chunks (Dask futures are cancelled) and
    raises ``KeyboardInterrupt``. Raises :class:`ConfigError` naming a bad setting.
    """
    if (system is None) != (box is None):
        raise _rtbox.ConfigError("box: give both a system and the box to fill, or neither")
    if not isinstance(utilizations, str):
        utilizations = ",".join(repr(float(u)) for u in utilizations)
    if not isinstance(evaluate, str):
        evaluate = ",".join(evaluate)
    if threads is None:
        threads = 1 if client is not None else 0
    args: Dict[str, Any] = dict(
        base=None if system is None else system.to_toml(),
        box_name=box,
        cpus=cpus,
        policy=policy,
        placement=placement,
        utilizations=utilizations,
        sets=sets,
        tasks=tasks,
        method=method,
        max_task_util=max_task_util,
        periods=periods,
        granularity=granularity,
        deadlines=deadlines,
        evaluate=evaluate,
        sim_duration=sim_duration,
        seed=seed,
        threads=threads,
    )
    native = _native(args)  # validates every setting here, before any work is sent out
    total = native.total_sets
    if client is None:
        verdicts = _run_local(native, total, chunk, progress)
    else:
        verdicts = _run_dask(client, args, total, chunk, progress)
    import pandas as pd

    rows = native.tally(verdicts)
    evaluators = native.evaluators
    df = pd.DataFrame(
        {
            "utilization": [r[0] for r in rows],
            "sets": [r[1] for r in rows],
            **{
                e: [r[2][i] / r[1] if r[1] else 0.0 for r in rows]
                for i, e in enumerate(evaluators)
            },
        }
    )
    return SweepResult(df=df, evaluators=evaluators, verdicts=verdicts, _sweep=native)


def _run_local(
    native: _rtbox.Sweep,
    total: int,
    chunk: Optional[int],
    progress: Optional[Callable[[int, int], None]],
) -> List[List[bool]]:
    # Ctrl-C is answered when a chunk returns (Python raises KeyboardInterrupt then), so chunks
    # aim at a quarter of a second each: the size adapts to the measured time per set, growing
    # at most 4x per chunk. Each chunk ends with some threads idle while the last sets finish,
    # so chunks much shorter than that would waste cores.
    target = 0.25
    size = chunk or max(1, 16 * (os.cpu_count() or 1))
    out: List[List[bool]] = []
    start = 0
    while start < total:
        end = min(start + size, total)
        t0 = time.perf_counter()
        out.extend(native.evaluate(start, end))
        elapsed = time.perf_counter() - t0
        if progress is not None:
            progress(end, total)
        if chunk is None and elapsed > 0:
            size = max(1, min(4 * size, int(size * target / elapsed)))
        start = end
    return out


def _run_dask(
    client: Any,
    args: Dict[str, Any],
    total: int,
    chunk: Optional[int],
    progress: Optional[Callable[[int, int], None]],
) -> List[List[bool]]:
    from dask.distributed import as_completed

    if chunk is None:
        # Sets are numbered point by point and later points cost more (fuller sets simulate
        # longer), so many chunks per worker thread keep the last ones from running alone.
        workers = max(1, sum(client.nthreads().values()))
        chunk = max(8, math.ceil(total / (16 * workers)))
    ranges = _ranges(total, chunk)
    run = uuid.uuid4().hex  # a fresh key per sweep: each run computes, none reads a cached one
    futures = [client.submit(_run_chunk, args, a, b, key=f"rtbox-sweep-{run}-{a}") for a, b in ranges]
    index = {f.key: i for i, f in enumerate(futures)}
    parts: List[Optional[List[List[bool]]]] = [None] * len(futures)
    done = 0
    try:
        for f in as_completed(futures):
            i = index[f.key]
            parts[i] = f.result()
            done += ranges[i][1] - ranges[i][0]
            if progress is not None:
                progress(done, total)
    except BaseException:
        client.cancel(futures)
        raise
    return [v for p in parts if p is not None for v in p]
