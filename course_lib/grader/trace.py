"""The grader's timeline, for an instructor asking where a room's time went.

``COURSE_TRACE=<file>`` appends one JSON line per event: the time (seconds since the epoch), the
process, the thread, the task being graded in that thread and its mode, the event and its figures
(waits for the GPU's lock and holds of it, tasks begun and ended, time limits and speed bars measured),
and, while a pool grades, the machine's CPU use every few seconds (``cpu_sampled``): whether more jobs
at once would fit.
Off when the variable is unset. Written by the grader only, never by a learner's process (the worker's
environment does not carry the variable: ``sandbox.worker_environment``)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time

_local = threading.local()
_lock = threading.Lock()


def on() -> bool:
    return bool(os.environ.get("COURSE_TRACE"))


@contextlib.contextmanager
def task(name: str, mode: str):
    """Events in this thread belong to ``name`` graded in ``mode``, until the block ends."""
    before = getattr(_local, "task", None)
    _local.task = f"{name}/{mode}"
    try:
        yield
    finally:
        _local.task = before


def event(name: str, **figures) -> None:
    path = os.environ.get("COURSE_TRACE")
    if not path:
        return
    line = {"t": round(time.time(), 4), "pid": os.getpid(), "thread": threading.current_thread().name,
            "task": getattr(_local, "task", None), "event": name, **figures}  # fmt: skip
    try:
        with _lock, open(path, "a") as out:
            out.write(json.dumps(line, default=str) + "\n")
    except OSError:
        pass  # a trace is a diagnostic: it never fails a grade


@contextlib.contextmanager
def span(name: str, **figures):
    """``name`` begun and ended, the end with its seconds."""
    began = time.perf_counter()
    event(name + " begun", **figures)
    try:
        yield
    finally:
        event(name + " ended", seconds=round(time.perf_counter() - began, 4), **figures)


def _cpu_times() -> tuple[float, float] | None:
    """(busy, total) jiffies of all cores since boot, from /proc/stat (None where there is none)."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle and iowait
    return sum(fields) - idle, sum(fields)


@contextlib.contextmanager
def cpu_sampled(every_s: float = 5.0):
    """While the block runs, a ``cpu`` event every ``every_s`` seconds: the fraction of all cores busy
    since the last one, and the load average. Nothing when the trace is off."""
    if not on() or _cpu_times() is None:
        yield
        return
    stop = threading.Event()

    def sample() -> None:
        before = _cpu_times()
        while not stop.wait(every_s):
            now = _cpu_times()
            if before and now and now[1] > before[1]:
                busy = (now[0] - before[0]) / (now[1] - before[1])
                event("cpu", busy=round(busy, 3), cores=os.cpu_count(), load1=round(os.getloadavg()[0], 2))
            before = now

    thread = threading.Thread(target=sample, name="trace-cpu", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=1.0)
