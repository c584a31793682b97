"""Read a SimSo configuration (simso-rm.xml), analyse it and simulate it for the length SimSo
would, with rtbox's simulator (one box over both processors, global rate monotonic).

Run: python3 examples/python/simso_example.py
"""

import os

import rtbox

HERE = os.path.dirname(os.path.abspath(__file__))
system, duration_ns, scheduler = rtbox.read_simso(os.path.join(HERE, "simso-rm.xml"))
print(f"{scheduler} on CPUs {system.cpus}: tasks {system.task_names}")
print(system.to_toml())

report = system.analyze()
print(report.to_pandas()[["task", "priority", "schedulable", "response_bound_ns"]].to_string(index=False))

result = system.simulate(duration=duration_ns, model="rtbox")
print(result.tasks[["task", "jobs", "misses", "response_max_ns"]].to_string(index=False))
assert result.total_misses == 0
