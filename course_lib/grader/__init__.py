"""The grader: a task's cases against a folder of task files (exercises/, solutions/ or a learner's).

    from course_lib import grader
    grader.grade(["vector_add"], source="exercises")      # -> [TaskResult]
    grader.grade_jobs([grader.Job("ada", "vector_add", Path("room/ada"))])   # a room, one pool

Modules:

* ``precheck``  the task file's source, read before any of it runs: an allow-list, with the line
* ``isolation`` the sealed boundary: the learner's code runs in a worker process; this one decides
* ``sandbox``   the operating-system boundary (bubblewrap) around a worker that grades someone else
* ``claims``    every field the worker reports, type- and range-checked before it is read
* ``worker``    the worker's side: load the file, run the launcher, report in plain data
* ``cases``     the protected side of a case: inputs, poisoned outputs, the judge
* ``shared``    tensors in a shared-memory file, so nothing is pickled either way
* ``guards``    the launcher torch guard (in the worker)
* ``limits``    time limits from the reference solution's time on this machine
* ``bounds``    GPU mode: the interpreter's bounds and data-flow check, in a worker of its own
* ``report``    results as text and as a notebook table
* ``roster``    a room of learners into a gradebook
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .. import runtime, sources, tasks
from . import bounds, limits, sandbox
from .isolation import Worker, file_sha256, remove_stale_jobs, run_task
from .result import CRASH, FAIL, NEEDS_GPU, PASS, STATUSES, TIMEOUT, TODO, TaskResult

__all__ = [
    "CRASH", "FAIL", "NEEDS_GPU", "PASS", "STATUSES", "TIMEOUT", "TODO",
    "Job", "SandboxUnavailable", "TaskResult", "Worker", "grade", "grade_jobs", "grade_task", "limits_for",
    "make_worker", "own_work",
]  # fmt: skip


class SandboxUnavailable(RuntimeError):
    """A sandbox was asked for (a room) and this machine cannot make one; the message says why."""


def own_work(source_dir: Path) -> bool:
    """The course's own exercises/ (the learner's own work) or solutions/ (the course's code)."""
    source_dir = Path(source_dir).resolve()
    return source_dir in (sources.resolve("exercises"), sources.resolve("solutions"))


def _hidden_paths(source_dir: Path, hidden: str | None) -> tuple:
    """What a sandboxed worker must not see even inside a folder its Python needs."""
    paths = [runtime.cache_root(), Path(source_dir).resolve().parent]
    for value in (hidden, os.environ.get("COURSE_HIDDEN_CASES"), os.environ.get("COURSE_PROGRESS")):
        if value:
            paths.append(Path(value).expanduser().resolve())
    return tuple(paths)


def make_worker(
    source_dir: Path, sandboxed: bool | None = None, env: dict | None = None, hidden: str | None = None
) -> Worker:
    """The worker for grading ``source_dir``. ``sandboxed``: True requires the sandbox (a room; raises
    SandboxUnavailable where there is none), False runs without it, None decides: sandboxed where the
    source is not the course's own exercises/ or solutions/ and a sandbox can be made here
    (COURSE_SANDBOX=on sandboxes one's own work too, =off nothing that is not asked for)."""
    available = sandbox.available()
    if sandboxed is None:
        setting = os.environ.get("COURSE_SANDBOX", "auto").strip().lower()
        wanted = setting == "on" or (setting != "off" and not own_work(source_dir))
        sandboxed = wanted and available.ok
    elif sandboxed and not available.ok:
        raise SandboxUnavailable(available.reason)
    return Worker(env=dict(env or {}), sandboxed=sandboxed, hidden=_hidden_paths(source_dir, hidden))


@dataclass(frozen=True)
class Job:
    learner: str  # "" for a learner's own check
    task: str
    source: Path  # the folder holding <task>.py


def perf_wanted() -> bool:
    return os.environ.get("COURSE_PERF", "1") != "0"


_CALIBRATING: dict[str, threading.Lock] = {}
_CALIBRATING_LOCK = threading.Lock()


def limits_for(spec: tasks.TaskSpec, worker: Worker, timeout: float | None = None) -> limits.Limits:
    """The time limits for ``spec``: ``timeout`` seconds a step when given; otherwise from the
    reference solution's time on this machine (timed once, then cached)."""
    if timeout:
        return limits.given(timeout, len(spec.all_cases(worker.mode)))
    solution_dir = sources.resolve("solutions")
    sha = file_sha256(solution_dir / f"{spec.name}.py")
    fallback = limits.Limits(spec.timeout_s, spec.timeout_s, spec.timeout_s, 4 * spec.timeout_s, "the task's default")
    if not spec.runs_here(worker.mode):
        # no cases here: the file loads (30 s allowed) and one launch is compiled for sm_90 (a few
        # seconds; 20 allowed), so a launcher that hangs is reported in 20 s, not the task's default
        return limits.Limits(30.0, 30.0, 20.0, 60.0, "structure only: one launch compiled for sm_90")
    if not sha:
        return fallback
    timing = worker.mode == runtime.GPU and perf_wanted()
    mode = f"{worker.mode}-timed" if timing else worker.mode  # a GPU's timing step is a step of its own
    with _CALIBRATING_LOCK:
        lock = _CALIBRATING.setdefault(f"{mode}:{spec.name}", threading.Lock())
    with lock:
        timed = limits.read(mode, spec.name, sha)
        if timed is None:
            clock = limits.StepClock()
            # timed as it is graded, the GPU's timing step too
            result = run_task(spec, solution_dir, 0, limits.GENEROUS, worker, clock=clock, perf=timing)
            if not result.passed:
                return fallback
            timed = clock.timed()
            limits.write(mode, spec.name, sha, timed)
    return timed.limits()


def grade_task(
    task: str,
    source: str | os.PathLike = "exercises",
    seed: int | None = None,
    timeout: float | None = None,
    hidden: str | None = None,
    worker: Worker | None = None,
    check_source: bool = True,
    sandboxed: bool | None = None,
) -> TaskResult:
    """Grade one task; the learner's code runs in a worker process. Never raises for a learner's bug
    (SandboxUnavailable when ``sandboxed=True`` and this machine cannot make one).

    In GPU mode a kernel task that passes is graded once more in Triton's interpreter, in a worker of
    its own, for the out-of-bounds accesses and the data flow a GPU does not report (``bounds``)."""
    spec = tasks.get(task)
    seed = secrets.randbelow(2**31) if seed is None else seed
    source_dir = sources.resolve(source)
    worker = worker or make_worker(source_dir, sandboxed, hidden=hidden)
    result = run_task(
        spec,
        source_dir,
        seed,
        limits_for(spec, worker, timeout),
        worker,
        hidden=hidden,
        check_source=check_source,
        perf=perf_wanted(),
    )
    # (Gluon kernels, spec.needs, have no interpreter to check their bounds in)
    interpretable = spec.call_case is None and spec.needs is None and not spec.torch_task
    if result.passed and worker.mode == runtime.GPU and interpretable and bounds.wanted():
        interpreter = bounds.interpreter_worker(worker)
        checked = run_task(
            spec, source_dir, seed, limits_for(spec, interpreter, timeout), interpreter, hidden, check_source
        )
        result = bounds.merge(result, checked)
    return result


def _gpu_count() -> int:
    if not runtime.is_gpu():
        return 0
    import torch

    return max(1, torch.cuda.device_count())


def grade_jobs(
    jobs: list[Job],
    seed: int | None = None,
    workers: int | None = None,
    timeout: float | None = None,
    on_result: Callable[[Job, TaskResult], None] | None = None,
    hidden: str | None = None,
    check_source: bool = True,
    sandboxed: bool | None = None,
) -> list[TaskResult]:
    """Grade every job in one pool, ``workers`` at a time; results in the order of ``jobs``.

    On a GPU machine there is one worker per visible GPU, each job's worker pinned to a GPU of its own
    (timings must not share one); in CPU mode up to four, or the number of cores. ``sandboxed``: as
    for ``make_worker`` (a room passes True, or False when the instructor said --unsandboxed)."""
    seed = secrets.randbelow(2**31) if seed is None else seed
    if sandboxed and not sandbox.available().ok:
        raise SandboxUnavailable(sandbox.available().reason)
    remove_stale_jobs()
    gpus = _gpu_count()
    if gpus:
        workers = min(workers or gpus, gpus)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = visible.split(",") if visible else [str(i) for i in range(gpus)]
        free = list(ids[:gpus])
        if any(tasks.get(j.task).bench_cases for j in jobs) and perf_wanted():
            from ..roofline import gpu_peaks

            gpu_peaks()  # measured once (under a lock), before any worker needs them
    else:
        workers = workers or min(4, os.cpu_count() or 1)
        free = []
    free_lock = threading.Lock()

    def one(job: Job) -> TaskResult:
        gpu = None
        if free:
            with free_lock:
                gpu = free.pop()
        try:
            env = {"CUDA_VISIBLE_DEVICES": gpu} if gpu is not None and gpus > 1 else {}
            worker = make_worker(job.source, sandboxed, env=env, hidden=hidden)
            result = grade_task(job.task, job.source, seed, timeout, hidden, worker, check_source)
        except Exception as e:  # the grader's own failure: one row, never a lost room
            import traceback

            traceback.print_exc()  # for the instructor, on the grader's terminal: never in a learner's row
            result = TaskResult(
                job.task, CRASH, f"the grader failed on this task ({type(e).__name__}): its terminal shows why"
            )
        finally:
            if gpu is not None:
                with free_lock:
                    free.append(gpu)
        result.learner = job.learner
        if on_result is not None:
            on_result(job, result)
        return result

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(one, jobs))


def grade(
    task_names: list[str],
    source: str | os.PathLike = "exercises",
    seed: int | None = None,
    timeout: float | None = None,
    jobs: int | None = None,
    hidden: str | None = None,
    sandboxed: bool | None = None,
) -> list[TaskResult]:
    """Grade tasks of one folder, ``jobs`` at a time. Never raises for a learner's bug."""
    source_dir = sources.resolve(source)
    batch = [Job("", tasks.get(name).name, source_dir) for name in task_names]
    return grade_jobs(batch, seed=seed, workers=jobs, timeout=timeout, hidden=hidden, sandboxed=sandboxed)
