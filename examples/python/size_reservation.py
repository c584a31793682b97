"""Size a reservation: the smallest BDM interface for box Y1 of the BDM validation example, its
trade-off between delay and rate, and a check that the sized system is schedulable.

Run: python3 examples/python/size_reservation.py
"""

import os

import rtbox

HERE = os.path.dirname(os.path.abspath(__file__))
system = rtbox.load(os.path.join(HERE, "..", "bdm-validation.toml"))

s = system.synthesize("Y1", interface="bdm", delta="20ms")
print(f"Y1: alpha = {s.alpha_text} at Delta = {s.delta_ns / 1e6:g} ms")
print(f"    per vCPU: hard CBS Q = {s.server[0] / 1e6:.3f} ms, P = {s.server[1] / 1e6:.3f} ms")
print("    Delta (ms) -> minimal alpha")
for delta, alpha in s.table:
    print(f"    {delta / 1e6:8.1f}   {'infeasible' if alpha is None else f'{alpha:.4f}'}")

# The same box with per-CPU servers instead: the smallest budget for a 10 ms period.
srv = system.synthesize("Y1", interface="server", period="10ms")
print(f"Y1 as per-CPU servers: Q = {srv.budget_ns / 1e6:.3f} ms every 10 ms")

# Put the synthesized interface back and check the whole system.
sized = rtbox.loads(system.to_toml().replace("alpha = 0.72", f"alpha = {s.alpha_text}"))
report = sized.analyze()
print("sized system schedulable:", report.schedulable)
print(report.to_pandas()[["box", "task", "schedulable", "response_bound_ns"]].to_string(index=False))
assert report.box("Y1").schedulable
