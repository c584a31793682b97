"""A schedulability sweep on a Dask cluster: random task sets in a 4-CPU box judged by the
analysis and the simulator, run in chunks on a local 2-worker cluster, then plotted.

For a remote cluster, replace LocalCluster by Client("tcp://scheduler:8786") (docs/python.md).
Run: python3 examples/python/sweep_dask.py [OUTPUT_DIR]
"""

import os
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")

from dask.distributed import Client, LocalCluster  # noqa: E402

import rtbox  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="rtbox-")

if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster, Client(
        cluster
    ) as client:
        result = rtbox.sweep(
            cpus=4,
            utilizations="1:3.5:0.5",
            sets=40,
            tasks=8,
            evaluate=["analysis", "sim"],
            seed=7,
            client=client,
        )
    print(result.df.to_string(index=False))
    fig = result.plot(title="4 CPUs, 8 tasks, 40 sets per point")
    path = os.path.join(out, "sweep.png")
    fig.savefig(path)
    print("plot:", path)
    # The analysis is safe: no set it accepts misses a deadline in simulation.
    assert (result.df["analysis"] <= result.df["sim-rtbox"] + 1e-9).all()
