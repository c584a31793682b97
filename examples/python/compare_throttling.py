"""Compare rtbox's hard CBS servers with Linux RT group throttling on the same boxes: 120 s of
the BDM validation example under both models, deadline misses per task, and Gantt charts.

Run: python3 examples/python/compare_throttling.py [OUTPUT_DIR]
"""

import os
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

import rtbox  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="rtbox-")
system = rtbox.load(os.path.join(HERE, "..", "bdm-validation.toml"))

results = {m: system.simulate(duration="120s", model=m, seed=1) for m in ("rtbox", "rt-throttling")}
table = pd.DataFrame(
    {m: r.tasks.set_index("task")["misses"] for m, r in results.items()}
).assign(box=results["rtbox"].tasks.set_index("task")["box"])
print(table.to_string())
for m, r in results.items():
    print(f"{m}: {r.misses(boxed_only=True)} misses of boxed tasks, "
          f"worst tau2 response {r.tasks.set_index('task').loc['tau2', 'response_max_ns'] / 1e6:.1f} ms")
    r.gantt(until=0.5).savefig(os.path.join(out, f"gantt-{m}.png"))
    r.trace(os.path.join(out, f"trace-{m}.json"))
print("Gantt charts and Perfetto traces in", out)
assert results["rtbox"].misses(boxed_only=True) == 0
assert results["rt-throttling"].misses(boxed_only=True) > 0
