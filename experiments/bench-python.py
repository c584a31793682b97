#!/usr/bin/env python3
"""Overhead of the Python package against the CLI (docs/benchmarks-python.md).

1. `System.simulate` (load, simulate, per-task DataFrame) against `rtbox sim` on the same file
   and duration (target: overhead <= 10 %).
2. A sweep on a 2-worker Dask LocalCluster against `rtbox sweep --threads 2` on the same
   settings, in sets per second (target: Dask >= 80 % of the CLI). The cluster's start is
   reported apart, not counted. The in-process variants also print CPU seconds.

Each figure is the median of several runs, as wall time and as CPU time (user + system of the
CLI process, or of this process for the in-process runs): on a shared machine wall time
includes waiting for a CPU, CPU time does not.

Needs the release CLI (built here if missing) and the installed `rtbox` package.
Usage: python3 experiments/bench-python.py [--runs N] [--sets N]
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "target", "release", "rtbox")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(n, fn):
    """Median (wall, CPU) seconds of n runs; CPU counts this process and its children."""
    walls, cpus = [], []
    for _ in range(n):
        w, c, k = time.perf_counter(), time.process_time(), children_cpu()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c + children_cpu() - k)
    return statistics.median(walls), statistics.median(cpus)


def pct(ours, theirs):
    return 100 * (ours - theirs) / theirs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sets", type=int, default=400, help="sets per utilization point")
    args = ap.parse_args()
    if not os.path.exists(CLI):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "rtbox-cli"], cwd=ROOT, check=True)

    import rtbox

    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(f"\n== simulate: Python vs CLI (median of {args.runs} runs; overhead = Python vs CLI)")
    print(f"{'scenario':22} {'duration':>8} {'CLI wall':>9} {'Py wall':>8} {'overhead':>9}"
          f" {'CLI CPU':>8} {'Py CPU':>7} {'overhead':>9}")
    for name, duration in (("bdm-validation.toml", "3600s"), ("jack-pipeline.toml", "600s")):
        path = os.path.join(ROOT, "examples", name)

        def cli():
            subprocess.run([CLI, "sim", path, "--duration", duration], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)

        def py():
            r = rtbox.load(path).simulate(duration=duration, jobs=False, trace=False)
            r.tasks  # the per-task table, as the CLI prints it

        cli()
        py()  # warm caches and imports
        (cw, cc), (pw, pc) = measure(args.runs, cli), measure(args.runs, py)
        print(f"{name:22} {duration:>8} {cw:9.3f} {pw:8.3f} {pct(pw, cw):+8.1f}%"
              f" {cc:8.3f} {pc:7.3f} {pct(pc, cc):+8.1f}%")

    runs = 3
    print(f"\n== sweep: 2-worker Dask LocalCluster vs `rtbox sweep --threads 2` (median of {runs})")
    settings = dict(cpus=4, utilizations="1:3.5:0.25", sets=args.sets, tasks=10,
                    evaluate="analysis,sim", seed=1)
    total = 11 * args.sets
    cmd = [CLI, "sweep", "--cpus", "4", "--utilizations", "1:3.5:0.25", "--sets",
           str(args.sets), "--tasks", "10", "--evaluate", "analysis,sim", "--seed", "1",
           "--threads", "2", "--quiet"]
    out = {}

    def cli_sweep():
        out["cli"] = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    cw, cc = measure(runs, cli_sweep)
    print(f"{'CLI':34} {total / cw:7.0f} sets/s wall, {total / cc:7.0f} sets per CPU second")
    local = {}
    lw, lc = measure(runs, lambda: local.__setitem__("r", rtbox.sweep(**settings, threads=2)))
    print(f"{'Python, local, 2 threads':34} {total / lw:7.0f} sets/s wall ({100 * cw / lw:.0f} % of"
          f" the CLI), {total / lc:7.0f} sets per CPU second ({100 * cc / lc:.0f} %)")
    from dask.distributed import Client, LocalCluster

    for processes in (False, True):
        t0 = time.perf_counter()
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=processes,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            start = time.perf_counter() - t0
            res = {}
            dw, dc = measure(runs, lambda: res.__setitem__("r", rtbox.sweep(**settings, client=client)))
        same = res["r"].to_csv() == out["cli"] == local["r"].to_csv()
        label = f"Dask, 2 workers ({'processes' if processes else 'threads'})"
        cpu = "" if processes else f", {total / dc:7.0f} sets per CPU second ({100 * cc / dc:.0f} %)"
        print(f"{label:34} {total / dw:7.0f} sets/s wall ({100 * cw / dw:.0f} % of the CLI){cpu};"
              f" cluster start {start:.1f} s; CSV identical to the CLI: {same}")


if __name__ == "__main__":
    sys.exit(main())
