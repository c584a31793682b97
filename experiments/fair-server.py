#!/usr/bin/env python3
"""What the kernel's fair server gives normal threads on a CPU full of real-time work, with
and without short real-time wake-ups on that CPU. No rtbox code runs here: this measures the
kernel alone (experiments/fair-server.sh explains why).

On CPU 1 (the "box CPU"):
- an unmanaged SCHED_OTHER busy loop: what the fair server lends it is what is measured;
- a SCHED_FIFO 10 busy loop: keeps the CPU full of real-time work;
- a SCHED_FIFO 89 periodic thread that runs 50 ms of every 100 ms and sleeps the rest
  (a box member's pattern, without any freezing);
- with --wakers, two SCHED_FIFO 96 threads that wake at the start and at the middle of each
  100 ms and go back to sleep at once (what an enforcement loop and a per-CPU stop thread do).
CPU 0 runs a SCHED_OTHER busy loop too (a busy machine).

Prints the normal thread's share of CPU 1 in each window, and how many windows are above
what the fair server should allow (50 ms per second, plus 0.01 for the reading's error).
"""
import argparse
import os
import subprocess
import sys
import threading
import time

PERIOD = 0.1
BUSY = 0.05
ALLOWED = 0.05 + 0.01


def fifo(prio, cpu):
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))


def hog(cpu, fifo_prio=None):
    cmd = ["taskset", "-c", str(cpu)]
    if fifo_prio is not None:
        cmd += ["chrt", "-f", str(fifo_prio)]
    return subprocess.Popen(cmd + ["sh", "-c", "while :; do :; done"])


def runtime_ns(pid):
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=int, default=10)
    ap.add_argument("--window-s", type=float, default=3.0)
    ap.add_argument("--wakers", action="store_true")
    a = ap.parse_args()
    stop = threading.Event()
    t0 = time.monotonic() + 0.2

    def periodic():
        fifo(89, 1)
        k = 0
        while not stop.is_set():
            d = t0 + k * PERIOD - time.monotonic()
            if d > 0:
                time.sleep(d)
            end = t0 + k * PERIOD + BUSY
            while time.monotonic() < end:
                pass
            k += 1

    def waker(offset):
        fifo(96, 1)
        k = 0
        while not stop.is_set():
            d = t0 + k * PERIOD + offset - time.monotonic()
            if d > 0:
                time.sleep(d)
            k += 1

    procs = [hog(1), hog(0), hog(1, 10)]
    other = procs[0].pid
    threads = [threading.Thread(target=periodic)]
    if a.wakers:
        threads += [threading.Thread(target=waker, args=(o + 1e-4,)) for o in (0.0, BUSY)]
    try:
        for t in threads:
            t.start()
        time.sleep(0.7)
        shares = []
        for _ in range(a.windows):
            r0, w0 = runtime_ns(other), time.monotonic_ns()
            time.sleep(a.window_s)
            r1, w1 = runtime_ns(other), time.monotonic_ns()
            shares.append((r1 - r0) / (w1 - w0))
    finally:
        stop.set()
        for t in threads:
            t.join()
        for p in procs:
            p.kill()
            p.wait()
    over = [s for s in shares if s > ALLOWED]
    label = "with real-time wake-ups" if a.wakers else "without wake-ups"
    print(
        f"{label}: normal thread's share of CPU 1 per {a.window_s:g} s window: "
        + " ".join(f"{s:.3f}" for s in shares)
    )
    print(
        f"  windows above {ALLOWED:.2f}: {len(over)} of {len(shares)}"
        + (f" (largest {max(over):.3f})" if over else "")
    )


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("fair-server: needs root (SCHED_FIFO); skipped")
        sys.exit(0)
    main()
