"""Simulation results: pandas DataFrames built from Arrow buffers, a matplotlib Gantt chart and
the Perfetto/Chrome trace of ``rtbox sim --trace``."""

from __future__ import annotations

import json
import os
from functools import cached_property
from typing import Any, Optional, Union

from . import _rtbox


def _frame(batch: _rtbox.ArrowBatch) -> Any:
    import pyarrow as pa

    # The Arrow PyCapsule interface: pyarrow adopts the Rust buffers, no per-row Python work.
    return pa.record_batch(batch).to_pandas()


class SimResult:
    """What ``System.simulate`` returns.

    ``tasks``, ``jobs``, ``servers``, ``cpus``, ``segments`` and ``throttles`` are pandas
    DataFrames (times in integer nanoseconds, columns ending in ``_ns``).
    """

    def __init__(self, native: _rtbox.SimReport) -> None:
        self._native = native

    def __repr__(self) -> str:
        return (
            f"SimResult(model={self.model!r}, duration_ns={self.duration_ns}, "
            f"misses={self.total_misses})"
        )

    @property
    def model(self) -> str:
        return self._native.model

    @property
    def duration_ns(self) -> int:
        return self._native.duration_ns

    @property
    def seed(self) -> int:
        return self._native.seed

    @property
    def total_misses(self) -> int:
        """Deadline misses of all tasks (boxed and background)."""
        return self._native.total_misses()

    def misses(self, boxed_only: bool = False) -> int:
        """Deadline misses; with ``boxed_only`` only those of tasks inside boxes."""
        t = self.tasks
        if boxed_only:
            t = t[t["box"].notna()]
        return int(t["misses"].sum())

    @cached_property
    def tasks(self) -> Any:
        """One row per task: released, jobs, misses, response-time summary, executed time."""
        return _frame(self._native.tasks())

    @cached_property
    def jobs(self) -> Any:
        """One row per job (empty when simulated with ``jobs=False``)."""
        return _frame(self._native.jobs())

    @cached_property
    def servers(self) -> Any:
        """One row per server: budget, period, consumed time, throttles, members moved onto it."""
        return _frame(self._native.servers())

    @cached_property
    def cpus(self) -> Any:
        """One row per CPU: busy time, utilization, preemptions, migrations."""
        return _frame(self._native.cpus())

    @cached_property
    def segments(self) -> Any:
        """Execution segments of the traced window: cpu, start_ns, end_ns, task, server."""
        return _frame(self._native.segments())

    @cached_property
    def throttles(self) -> Any:
        """Throttled intervals of servers in the traced window."""
        return _frame(self._native.throttles())

    def to_dict(self) -> Any:
        """The report as ``rtbox sim --json`` prints it, parsed."""
        return json.loads(self._native.to_json())

    def summary(self) -> str:
        """The text table ``rtbox sim`` prints."""
        return self._native.summary()

    def trace(self, path: Union[str, os.PathLike]) -> None:
        """Writes the Chrome trace-event JSON (opens in Perfetto, chrome://tracing), as
        ``rtbox sim --trace``."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self._native.chrome_trace())

    def gantt_svg(self, path: Union[str, os.PathLike]) -> None:
        """Writes the SVG Gantt chart of ``rtbox sim --gantt``."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self._native.gantt_svg())

    def gantt(self, until: Optional[float] = None, ax: Any = None) -> Any:
        """A matplotlib figure: one row per CPU (jobs coloured by task), one row per server
        (its execution, throttled intervals in red), deadline misses as red marks.
        ``until`` limits the x axis (seconds). Needs a simulation with ``trace=True``."""
        import matplotlib.pyplot as plt

        seg, thr = self.segments, self.throttles
        servers = sorted(set(self.servers["server"]))
        cpus = sorted(set(self.cpus["cpu"]))
        rows = [f"cpu {c}" for c in cpus] + servers
        if ax is None:
            fig, ax = plt.subplots(figsize=(12, 0.5 * len(rows) + 1.5))
        else:
            fig = ax.figure
        cmap = plt.get_cmap("tab20")
        names = sorted(set(seg["task"])) if len(seg) else []
        color = {n: cmap(i % 20) for i, n in enumerate(names)}
        y = {r: i for i, r in enumerate(rows)}
        for (cpu, task), g in seg.groupby(["cpu", "task"]) if len(seg) else []:
            spans = list(zip(g["start_ns"] / 1e9, (g["end_ns"] - g["start_ns"]) / 1e9))
            ax.broken_barh(spans, (y[f"cpu {cpu}"] - 0.4, 0.8), color=color[task], label=task)
        srv = seg[seg["server"].notna()] if len(seg) else seg
        for (name, task), g in srv.groupby(["server", "task"]) if len(srv) else []:
            if name in y:
                spans = list(zip(g["start_ns"] / 1e9, (g["end_ns"] - g["start_ns"]) / 1e9))
                ax.broken_barh(spans, (y[name] - 0.3, 0.6), color=color[task])
        for name, g in thr.groupby("server") if len(thr) else []:
            if name in y:
                spans = list(zip(g["start_ns"] / 1e9, (g["end_ns"] - g["start_ns"]) / 1e9))
                ax.broken_barh(spans, (y[name] - 0.4, 0.8), color="none", edgecolor="red",
                               hatch="///", linewidth=0.5)
        for _task, at in self._native.trace_misses():
            ax.axvline(at / 1e9, color="red", linewidth=0.8, alpha=0.7)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(rows)
        ax.invert_yaxis()
        end = self._native.trace_until_ns
        ax.set_xlim(0, until if until is not None else (end or self.duration_ns) / 1e9)
        ax.set_xlabel("time (s)")
        ax.set_title(f"{self.model} (seed {self.seed})")
        handles, labels = ax.get_legend_handles_labels()
        uniq = dict(zip(labels, handles))
        if uniq:
            ax.legend(uniq.values(), uniq.keys(), loc="upper left", bbox_to_anchor=(1.0, 1.0),
                      fontsize="small")
        fig.tight_layout()
        return fig
