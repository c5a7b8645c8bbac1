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
* ``tiers``     GPU mode: speed tiers, timed by the grader's clock; the GPU's lock; what is measured once
* ``bounds``    GPU mode: the interpreter's bounds and data-flow check, in a worker of its own
* ``report``    results as text and as a notebook table
* ``roster``    a room of learners into a gradebook
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .. import runtime, sources, tasks
from . import bounds, limits, sandbox, tiers, trace
from .isolation import Worker, file_sha256, remove_stale_jobs, run_task, time_reference
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
    # the trial sandbox (sandbox.available) costs a torch import: made only where one is wanted
    if sandboxed is None:
        setting = os.environ.get("COURSE_SANDBOX", "auto").strip().lower()
        wanted = setting == "on" or (setting != "off" and not own_work(source_dir))
        sandboxed = wanted and sandbox.available().ok
    elif sandboxed and not sandbox.available().ok:
        raise SandboxUnavailable(sandbox.available().reason)
    return Worker(env=dict(env or {}), sandboxed=sandboxed, hidden=_hidden_paths(source_dir, hidden))


@dataclass(frozen=True)
class Job:
    learner: str  # "" for a learner's own check
    task: str
    source: Path  # the folder holding <task>.py


def perf_wanted() -> bool:
    return os.environ.get("COURSE_PERF", "1") != "0"


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
    timed = limits.read(mode, spec.name, sha)
    if timed is not None:
        return timed.limits()
    # measured once per machine: a second grader (another process too) waits here and reads the figures
    with tiers.cache_lock(f"limits-{mode}-{spec.name}"):
        timed = limits.read(mode, spec.name, sha)
        if timed is None:
            clock = limits.StepClock()
            # timed as it is graded, the GPU's timing step too
            with trace.span("time limits measured", mode=mode):
                result = run_task(spec, solution_dir, 0, limits.GENEROUS, worker, clock=clock, perf=timing)
            if not result.passed:
                return fallback
            timed = clock.timed()
            limits.write(mode, spec.name, sha, timed)
    return timed.limits()


def speed_bars(spec: tasks.TaskSpec, worker: Worker) -> tiers.Bars:
    """What ``spec``'s speed tiers are measured against on this GPU: the course's solution and the torch
    baseline, timed by the grader's clock in a worker of the grader's own (the course's code, no
    learner's; sandboxed where the learner's is), once per machine and set of versions (cached; a
    changed solution is timed again)."""
    solution_dir = sources.resolve("solutions")
    case = spec.timed_case()
    gpu = runtime.gpu_info()
    sha = file_sha256(solution_dir / f"{spec.name}.py")
    # timed in a worker like the learner's (sandboxed where theirs is): a sandboxed process pays more
    # for each launch on the host, and a bar must be timed as the kernel it is compared with
    where = "sandboxed" if worker.sandboxed else "plain"
    key = f"{tiers.PROTOCOL}|{sha}|{case.describe()}|{gpu.name if gpu else '?'}|{where}"
    entry = f"{spec.name} ({where})"  # the cache keeps one entry of each kind
    bars = tiers.read_bars(entry, key)
    if bars is not None:
        return bars
    with tiers.cache_lock(f"bars-{spec.name}"):
        bars = tiers.read_bars(entry, key)
        if bars is None:
            own = Worker(mode=worker.mode, env=dict(worker.env), sandboxed=worker.sandboxed, hidden=worker.hidden)
            with trace.span("speed bars measured"):
                timed = time_reference(spec, solution_dir, own, limits.GENEROUS)
            bars = tiers.Bars(
                timed["eager"], timed["solution"], tiers.roofline_seconds(spec, case),
                gpu.name if gpu else "this GPU", time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            )  # fmt: skip
            tiers.write_bars(entry, key, bars)
    return bars


def grade_task(
    task: str,
    source: str | os.PathLike = "exercises",
    seed: int | None = None,
    timeout: float | None = None,
    hidden: str | None = None,
    worker: Worker | None = None,
    check_source: bool = True,
    sandboxed: bool | None = None,
    perf: bool | None = None,
) -> TaskResult:
    """Grade one task; the learner's code runs in a worker process. Never raises for a learner's bug
    (SandboxUnavailable when ``sandboxed=True`` and this machine cannot make one). ``perf``: time it on a
    GPU (default: unless COURSE_PERF=0).

    In GPU mode a kernel task that passes is graded once more in Triton's interpreter, in a worker of
    its own, for the out-of-bounds accesses and the data flow a GPU does not report; a Gluon task in the
    course's simulator, for its barrier protocol (``bounds``)."""
    spec = tasks.get(task)
    seed = secrets.randbelow(2**31) if seed is None else seed
    source_dir = sources.resolve(source)
    worker = worker or make_worker(source_dir, sandboxed, hidden=hidden)
    # speed is graded against the course's solution: a released copy (no solutions/) leaves it to the
    # instructor's copy, and says so (report.footer)
    wanted = perf_wanted() if perf is None else perf
    timing = worker.mode == runtime.GPU and wanted and sources.solution_present(spec.name)
    result = run_task(
        spec,
        source_dir,
        seed,
        limits_for(spec, worker, timeout),
        worker,
        hidden=hidden,
        check_source=check_source,
        perf=timing,
        bars=(lambda: speed_bars(spec, worker)) if timing else None,
    )
    # Gluon kernels (spec.needs) have no interpreter: those the course's simulator runs are graded there
    # again instead, for the barrier protocol, whose mistakes are races that a GPU run may hide
    interpretable = spec.call_case is None and spec.needs is None and not spec.torch_task
    simulated = spec.call_case is None and spec.simulated
    if result.passed and worker.mode == runtime.GPU and (interpretable or simulated) and bounds.wanted():
        interpreter = bounds.interpreter_worker(worker)
        checked = run_task(
            spec, source_dir, seed, limits_for(spec, interpreter, timeout), interpreter, hidden, check_source
        )
        result = bounds.merge_simulated(result, checked) if simulated else bounds.merge(result, checked)
    return result


def _gpu_count() -> int:
    if not runtime.is_gpu():
        return 0
    import torch

    return max(1, torch.cuda.device_count())


def jobs_per_gpu() -> int:
    """Correctness jobs side by side on one GPU (COURSE_GPU_JOBS, or from the CPU cores: each job may
    start an interpreter worker of its own for the bounds check). Timing takes the GPU alone anyway."""
    setting = os.environ.get("COURSE_GPU_JOBS", "").strip()
    if setting.isdigit() and int(setting) > 0:
        return int(setting)
    return max(1, min(8, runtime.usable_cpus() // (2 * max(1, _gpu_count()))))


def _expected_s(job: Job) -> float:
    """How long ``job`` should take: its reference solution's time on this machine, if measured."""
    try:
        spec = tasks.get(job.task)
        mode = runtime.MODE + ("-timed" if runtime.is_gpu() and perf_wanted() else "")
        sha = file_sha256(sources.resolve("solutions") / f"{spec.name}.py")
        timed = limits.read(mode, spec.name, sha) if sha else None
        return timed.task_s if timed is not None else 0.0
    except Exception:  # no figure: the job keeps its place
        return 0.0


def _out_of_gpu_memory(result: TaskResult) -> bool:
    text = " ".join([result.summary, *result.details]).lower()
    return result.status in (FAIL, CRASH) and ("out of memory" in text or "cudaerrormemoryallocation" in text)


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

    On a GPU machine ``jobs_per_gpu()`` jobs share each visible GPU (``workers`` in all when given),
    each job's worker pinned to one GPU; every grading step holds its GPU shared and only a timing
    window holds it alone (``tiers.gpu_use``). A job that failed for want of GPU memory while others
    ran beside it is graded again at the end, alone. In CPU mode up to four jobs, or the number of
    cores. A job whose worker looks hung (silent for ``isolation.SLOW_FRACTION`` of a step's limit)
    lets one more job start while it waits out its limit (at most twice ``workers``, and two a core,
    at once), so a room of hangs is not graded one limit at a time. ``sandboxed``: as for ``make_worker`` (a room
    passes True, or False when the instructor said --unsandboxed). ``on_result(job, result)`` is called
    as each job ends, one call at a time."""
    seed = secrets.randbelow(2**31) if seed is None else seed
    if sandboxed and not sandbox.available().ok:
        raise SandboxUnavailable(sandbox.available().reason)
    remove_stale_jobs()
    gpus = _gpu_count()
    if gpus:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = visible.split(",")[:gpus] if visible else [str(i) for i in range(gpus)]
        workers = workers or gpus * jobs_per_gpu()
        free = [ids[i % len(ids)] for i in range(workers)]  # a GPU id per slot, round robin
    else:
        workers = workers or min(4, runtime.usable_cpus())
        free = []
    workers = max(1, workers)
    # each worker's torch takes a share of the cores, not all of them (torch's default): on the H200's
    # 16 cores, steps of eight jobs side by side ran 10x slower than alone (2026-12-03); this is one
    # likely cause, not isolated by a measurement
    threads = {} if workers == 1 or "OMP_NUM_THREADS" in os.environ else {
        "OMP_NUM_THREADS": str(max(1, runtime.usable_cpus() // workers))}  # fmt: skip
    free_lock = threading.Lock()
    slots = threading.BoundedSemaphore(workers)
    # jobs started beside ones that look hung (silent for half a step's limit): at most as many again,
    # and never more than two a core in all (a room already run at two a core gets none: an honest job
    # beside hung ones keeps its share of the CPU, since its limits are wall-clock time)
    room = max(0, min(workers, 2 * runtime.usable_cpus() - workers))
    extra = threading.BoundedSemaphore(room) if room else None

    def graded(job: Job, on_slow=None, alone: bool = False) -> TaskResult:
        gpu = None
        if free:
            with free_lock:
                gpu = free.pop(0)
        try:
            env = {"CUDA_VISIBLE_DEVICES": gpu} if gpu is not None and gpus > 1 else {}
            env.update(threads)
            worker = make_worker(job.source, sandboxed, env=env, hidden=hidden)
            worker.on_slow = on_slow
            return grade_task(job.task, job.source, seed, timeout, hidden, worker, check_source)
        except Exception as e:  # the grader's own failure: one row, never a lost room
            import traceback

            traceback.print_exc()  # for the instructor, on the grader's terminal: never in a learner's row
            return TaskResult(
                job.task, CRASH, f"the grader failed on this task ({type(e).__name__}): its terminal shows why"
            )
        finally:
            if gpu is not None:
                with free_lock:
                    free.append(gpu)

    reporting = threading.Lock()

    def one(job: Job) -> TaskResult:
        slots.acquire()
        held = ["slot"]
        held_lock = threading.Lock()

        def looks_hung() -> None:
            with held_lock:
                if held[0] == "slot" and extra is not None and extra.acquire(blocking=False):
                    held[0] = "extra"
                    slots.release()

        try:
            result = graded(job, on_slow=looks_hung)
        finally:
            with held_lock:
                (slots if held[0] == "slot" else extra).release()
        result.learner = job.learner
        if gpus and workers > 1 and _out_of_gpu_memory(result):
            return result  # graded again, alone, after the others (below); reported then
        if on_result is not None:
            with reporting:  # one result at a time: callers print and count without locks of their own
                on_result(job, result)
        return result

    # the longest jobs first (by the solution's time on this machine, when known), so that a long task
    # does not start last and leave the other slots idle while it runs
    order = sorted(range(len(jobs)), key=lambda i: -_expected_s(jobs[i]))
    results: list = [None] * len(jobs)
    with trace.cpu_sampled(), ThreadPoolExecutor(max_workers=2 * workers) as pool:
        for i, result in zip(order, pool.map(one, [jobs[i] for i in order])):
            results[i] = result
    for i, (job, result) in enumerate(zip(jobs, results)):
        if gpus and workers > 1 and _out_of_gpu_memory(result):
            again = graded(job)
            again.learner = job.learner
            again.details.append("(graded again alone: it ran out of GPU memory beside other jobs)")
            results[i] = again
            if on_result is not None:
                on_result(job, again)
    return results


def grade(
    task_names: list[str],
    source: str | os.PathLike = "exercises",
    seed: int | None = None,
    timeout: float | None = None,
    jobs: int | None = None,
    hidden: str | None = None,
    sandboxed: bool | None = None,
    on_result: Callable[[TaskResult], None] | None = None,
) -> list[TaskResult]:
    """Grade tasks of one folder, ``jobs`` at a time. Never raises for a learner's bug. ``on_result``
    gets each result as soon as it is graded (in the order they finish)."""
    source_dir = sources.resolve(source)
    batch = [Job("", tasks.get(name).name, source_dir) for name in task_names]
    each = (lambda job, result: on_result(result)) if on_result is not None else None
    return grade_jobs(
        batch, seed=seed, workers=jobs, timeout=timeout, hidden=hidden, sandboxed=sandboxed, on_result=each
    )
