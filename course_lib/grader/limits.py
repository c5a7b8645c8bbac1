"""Time limits proportionate to the work: derived from the reference solution's time on this machine.

The first time a task is graded on a machine (per mode and Triton version), its reference solution is
graded once with generous limits and each step timed: loading the file, the slowest case, the
task's extra checks, the whole task. A learner's worker then gets ``FACTOR`` times each of those,
plus ``FLOOR_S`` seconds, before it counts as hung. The figures are cached in COURSE_CACHE
(``~/.cache/course_lib``), keyed by the solution file's hash, so a changed solution is timed again.

A hang is caught in the case where it happens: a submission that hangs at its first case is
reported after about FLOOR_S seconds, not after the whole task's budget.
"""

from __future__ import annotations

import json
import os
import platform
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import filelock, runtime

FACTOR = 10.0
FLOOR_S = 15.0
GENEROUS_S = 300.0  # per step while the solution itself is timed
MAX_STEP_S = 3600.0  # a cached step time beyond this (or below 0) is not believed: the step is timed again


@dataclass(frozen=True)
class Limits:
    load_s: float  # importing the task file (Triton decorators, module-level code)
    case_s: float  # one case (the slowest): the launch (compilation included) and its report
    extra_s: float  # the task's checks after the cases (autotuning checks, timing on a GPU)
    task_s: float  # everything together
    origin: str = "given"
    cases_s: tuple = ()  # each case's own limit, in the order the cases run (hidden cases: case_s)

    def for_case(self, index: int) -> float:
        return self.cases_s[index] if index < len(self.cases_s) else self.case_s

    def describe(self) -> str:
        return f"{self.load_s:.0f} s to load, {self.case_s:.0f} s a case, {self.task_s:.0f} s in all ({self.origin})"


def given(seconds: float, n_cases: int = 20) -> Limits:
    """Limits from an explicit ``--timeout``: that many seconds for each step."""
    return Limits(seconds, seconds, seconds, seconds * (n_cases + 2), f"--timeout {seconds:g}")


GENEROUS = Limits(GENEROUS_S, GENEROUS_S, GENEROUS_S, 4 * GENEROUS_S, "generous, for timing the solution")


@dataclass(frozen=True)
class Timed:
    """How long the reference solution took for each step, in seconds."""

    load_s: float
    case_s: float  # the slowest case
    extra_s: float
    task_s: float
    cases_s: tuple = ()  # each case, in order: a hang in a tiny first case is caught in seconds

    def limits(self) -> Limits:
        scale = lambda s: FACTOR * s + FLOOR_S
        return Limits(
            scale(self.load_s),
            scale(self.case_s),
            scale(self.extra_s),
            scale(self.task_s),
            f"{FACTOR:g}x the reference solution's time on this machine + {FLOOR_S:g} s",
            tuple(scale(s) for s in self.cases_s),
        )


def _cache_file(mode: str) -> Path:
    import triton

    root = runtime.cache_root()
    host = "".join(ch if ch.isalnum() else "_" for ch in platform.node() or "machine")
    return root / f"limits-{mode}-triton{triton.__version__}-{host}.json"


def read(mode: str, task: str, solution_sha: str) -> Timed | None:
    path = _cache_file(mode)
    try:
        entry = json.loads(path.read_text()).get(task)
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("solution_sha256") != solution_sha:
        return None
    try:
        steps = [float(entry[k]) for k in ("load_s", "case_s", "extra_s", "task_s")]
        cases = [float(s) for s in entry.get("cases_s", [])]
    except (KeyError, TypeError, ValueError):
        return None
    if not all(0.0 <= s <= MAX_STEP_S for s in steps + cases):  # NaN too: a damaged file is timed again
        return None
    return Timed(*steps, tuple(cases))


def write(mode: str, task: str, solution_sha: str, timed: Timed) -> None:
    path = _cache_file(mode)
    with filelock.held(path.with_suffix(".lock")):
        try:
            table = json.loads(path.read_text())
            if not isinstance(table, dict):
                table = {}
        except (OSError, ValueError):
            table = {}
        table[task] = {"solution_sha256": solution_sha, "measured": time.strftime("%Y-%m-%d %H:%M"), **asdict(timed)}
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(json.dumps(table, indent=1, sort_keys=True))
        os.replace(tmp, path)


class StepClock:
    """Collects the time of each step while the solution is graded (see ``isolation.run_task``)."""

    def __init__(self):
        self.load_s = self.extra_s = 0.0
        self.cases: list[float] = []
        self.start = time.perf_counter()

    def add(self, kind: str, seconds: float) -> None:
        if kind == "loaded":
            self.load_s += seconds
        elif kind in ("case_done", "call_done"):
            self.cases.append(seconds)
        else:
            self.extra_s += seconds

    def timed(self) -> Timed:
        slowest = max(self.cases, default=0.0)
        return Timed(self.load_s, slowest, self.extra_s, time.perf_counter() - self.start, tuple(self.cases))
