"""The reader of experiments/loop-cost.sh, run at SCHED_FIFO 99 so that full CPUs cannot delay
its clock readings: the daemon's real-time threads and the members, from /proc schedstat, over
SECONDS of CLOCK_MONOTONIC. Prints one markdown row.

usage: loop-cost.py DAEMON_PID SECONDS CPU:STEPS,... "CASE SENSOR" PID:BOX:RESERVED ...
(STEPS: the loop steps per second admission models on that CPU, from `rtbox check`.)
"""

import os
import sys
import time


def rt_threads(pid):
    """The daemon's threads with a real-time policy: tid -> name."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = open(f"/proc/{pid}/task/{tid}/stat").read()
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
        except OSError:
            continue
        policy = int(stat.rsplit(")", 1)[1].split()[38])
        if policy in (1, 2):
            out[int(tid)] = name
    return out


def runtime(path):
    try:
        return int(open(path).read().split()[0])
    except OSError:
        return 0


def main():
    daemon, secs = int(sys.argv[1]), float(sys.argv[2])
    steps = {int(c): float(n) for c, n in (x.split(":") for x in sys.argv[3].split(","))}
    case, sensor = sys.argv[4].split()
    members = [m.split(":", 2) for m in sys.argv[5:]]
    threads = rt_threads(daemon)

    def read():
        d = {t: runtime(f"/proc/{daemon}/task/{t}/schedstat") for t in threads}
        m = [runtime(f"/proc/{pid}/schedstat") for pid, _, _ in members]
        return d, m, time.monotonic_ns()

    d0, m0, t0 = read()
    time.sleep(secs)
    d1, m1, t1 = read()
    span = t1 - t0
    got = " ".join(
        f"{box} {(b - a) / span:.4f} ({float(res):.3f})"
        for (_, box, res), a, b in zip(members, m0, m1)
    )
    per_thread = {threads[t]: (d1[t] - d0[t]) / span for t in threads}
    total = sum(per_thread.values())
    loop = sum(v for k, v in per_thread.items() if not k.startswith("rtbox-backstop"))
    per_cpu = [
        (cpu, per_thread.get(f"rtbox-backstop{cpu}", 0.0) + loop / len(steps), n)
        for cpu, n in sorted(steps.items())
    ]
    threads_txt = ", ".join(f"{k} {v:.4f}" for k, v in sorted(per_thread.items()) if v > 0)
    cpus_txt = ", ".join(f"{c}: {s:.4f}" for c, s, _ in per_cpu)
    steps_txt = ", ".join(f"{st:.0f}" for _, _, st in per_cpu)
    us_txt = ", ".join(f"{s / st * 1e6:.1f}" for _, s, st in per_cpu)
    print(f"| {case} | {sensor} | {got} | {threads_txt} (total {total:.4f}) | {cpus_txt} | {steps_txt} | {us_txt} |")


if __name__ == "__main__":
    main()
