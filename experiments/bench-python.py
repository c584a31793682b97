#!/usr/bin/env python3
"""Overhead of the Python package against the CLI (docs/benchmarks-python.md).

1. `System.simulate` (load, simulate, per-task DataFrame) against `rtbox sim` on the same file
   and duration: median wall time of N runs each, and the overhead in percent (target <= 10 %).
2. A sweep on a 2-worker Dask LocalCluster against `rtbox sweep --threads 2` on the same
   settings: sets per second each (target: Dask >= 80 % of the CLI). The cluster's start is
   reported apart, not counted.

Needs the release CLI (built here if missing) and the installed `rtbox` package.
Usage: python3 experiments/bench-python.py [--runs N] [--sets N]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "target", "release", "rtbox")


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def median_of(n, fn):
    return statistics.median(timed(fn) for _ in range(n))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sets", type=int, default=100, help="sets per utilization point")
    args = ap.parse_args()
    if not os.path.exists(CLI):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "rtbox-cli"], cwd=ROOT, check=True)

    import rtbox

    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print("\n== simulate: Python vs CLI (median of %d runs)" % args.runs)
    print(f"{'scenario':32} {'duration':>8} {'CLI s':>8} {'Python s':>9} {'overhead':>9}")
    for name, duration in (("bdm-validation.toml", "3600s"), ("jack-pipeline.toml", "600s")):
        path = os.path.join(ROOT, "examples", name)

        def cli():
            subprocess.run([CLI, "sim", path, "--duration", duration], stdout=subprocess.DEVNULL,
                           check=False)

        def py():
            r = rtbox.load(path).simulate(duration=duration, jobs=False, trace=False)
            r.tasks  # the per-task table, as the CLI prints it

        cli()
        py()  # warm caches and imports
        c, p = median_of(args.runs, cli), median_of(args.runs, py)
        print(f"{name:32} {duration:>8} {c:8.3f} {p:9.3f} {100 * (p - c) / c:+8.1f}%")

    print("\n== sweep: Dask LocalCluster (2 workers) vs `rtbox sweep --threads 2`")
    settings = dict(cpus=4, utilizations="1:3.5:0.25", sets=args.sets, tasks=10,
                    evaluate="analysis,sim", seed=1)
    total = 11 * args.sets
    cmd = [CLI, "sweep", "--cpus", "4", "--utilizations", "1:3.5:0.25", "--sets",
           str(args.sets), "--tasks", "10", "--evaluate", "analysis,sim", "--seed", "1",
           "--threads", "2", "--quiet"]
    out = {}

    def cli_sweep():
        out["cli"] = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    c = timed(cli_sweep)
    print(f"CLI:                      {total} sets in {c:6.2f} s = {total / c:7.1f} sets/s")
    local = {}
    lt = timed(lambda: local.setdefault("r", rtbox.sweep(**settings, threads=2)))
    print(f"Python, local (2 threads): {total} sets in {lt:6.2f} s = {total / lt:7.1f} sets/s"
          f" ({100 * c / lt:.0f} % of the CLI)")
    from dask.distributed import Client, LocalCluster

    for processes in (False, True):
        t0 = time.perf_counter()
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=processes,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            start = time.perf_counter() - t0
            res = {}
            d = timed(lambda: res.setdefault("r", rtbox.sweep(**settings, client=client)))
        kind = "processes" if processes else "threads"
        same = res["r"].to_csv() == out["cli"] == local["r"].to_csv()
        print(f"Dask, 2 workers ({kind:9}): {total} sets in {d:6.2f} s = {total / d:7.1f} sets/s"
              f" ({100 * c / d:.0f} % of the CLI; cluster start {start:.1f} s; "
              f"CSV identical to the CLI: {same})")


if __name__ == "__main__":
    sys.exit(main())
