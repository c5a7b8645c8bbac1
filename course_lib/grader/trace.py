"""The grader's timeline, for an instructor asking where a room's time went.

``COURSE_TRACE=<file>`` appends one JSON line per event: the time (seconds since the epoch), the
process, the thread, the task being graded in that thread and its mode, the event and its figures
(waits for the GPU's lock and holds of it, tasks begun and ended, time limits and speed bars measured).
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
