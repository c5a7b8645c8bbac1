"""GPU mode: the interpreter's bounds and data-flow check, in a worker of its own.

On a GPU a load past the end of a tensor usually returns whatever lies there, with no error, and
nothing says which kernel read which input. Triton's interpreter checks every address. So in GPU
mode a kernel task that passes is graded once more, with the CPU-mode cases, by a worker started
with ``TRITON_INTERPRET=1`` (a process that has set up CUDA cannot switch to the interpreter).
The protected process makes the inputs and judges, as for any worker.

A Gluon task has no interpreter; the course's simulator (``course_lib.gluon_cpu``) grades it there
instead (``merge_simulated``): a mistake in its barrier protocol is a race, which a GPU run may win.
"""

from __future__ import annotations

import os
from dataclasses import replace

from .. import runtime
from .isolation import Worker
from .result import FAIL, NEEDS_GPU, TaskResult

NOTE = (
    "On a GPU a load past the end of a tensor usually returns whatever lies there, with no error, so "
    "the GPU cases cannot see it. Triton's interpreter checks every address: it ran the task's "
    "CPU-mode cases (small shapes) to look for such accesses, and for kernels that do not read the "
    "inputs or write the outputs themselves."
)
# failures the interpreter finds that a GPU run cannot: they fail the task
_FOUND = ("out-of-bounds access", "no kernel read", "never read by a kernel", "not written by any kernel")


def wanted() -> bool:
    return os.environ.get("COURSE_BOUNDS_CHECK", "1") != "0"


def interpreter_worker(graded: Worker | None = None) -> Worker:
    """A worker for the interpreter's run, sandboxed as the GPU run was."""
    return Worker(
        mode=runtime.CPU,
        env={"TRITON_INTERPRET": "1", "COURSE_MODE": "cpu", "CUDA_VISIBLE_DEVICES": "", "COURSE_PERF": "0"},
        sandboxed=bool(graded and graded.sandboxed),
        hidden=graded.hidden if graded else (),
        nice=10,  # CPU work beside GPU workers that may be timed: theirs is the host's first claim
    )


CHECKS_NOTE = (
    "Some of a task's checks watch the kernel run (which program wrote which tile, which sectors a warp "
    "touched, what went through memory between launches): only the interpreter can see that, so they "
    "run there, on the CPU-mode cases, and fail the task on a GPU too."
)


VALUES_NOTE = (
    "The CPU-mode cases have other shapes than the GPU's (a tile grid with a partial last group, a "
    "tail no GPU case has): a kernel must be right on every case, and the interpreter computes what "
    "the compiled kernel would."
)


def merge(result: TaskResult, interpreted: TaskResult) -> TaskResult:
    """The GPU result, failed if the interpreter found an out-of-bounds access or a broken data flow,
    or if the task's structural checks failed there (those that watch the kernel run, CPU mode only);
    otherwise the same result with one line saying what the interpreter's run found."""
    if interpreted.status == FAIL and interpreted.failed == "checks":
        return replace(
            result,
            status=FAIL,
            summary=f"every case passed on the GPU, but {interpreted.summary.split(' are right, but ', 1)[-1]} "
            "(seen in the interpreter's run of the CPU-mode cases)",
            details=[CHECKS_NOTE, *interpreted.details],
            failed="checks",
        )
    if interpreted.status == FAIL and interpreted.failed == "values":
        return replace(
            result,
            status=FAIL,
            summary=f"every case passed on the GPU, but the interpreter's run of the CPU-mode cases failed: "
            f"{interpreted.summary}",
            details=[VALUES_NOTE, *interpreted.details],
            cases_passed=interpreted.cases_passed,
            cases_total=interpreted.cases_total,
            failed="values",
        )
    if interpreted.status == FAIL and any(found in interpreted.summary for found in _FOUND):
        return replace(
            result,
            status=FAIL,
            summary=f"every case passed on the GPU, but in the interpreter's check {interpreted.summary}",
            details=[NOTE, *interpreted.details],
            cases_passed=interpreted.cases_passed,  # the failing task claims no more than the interpreter gave
            cases_total=interpreted.cases_total,
        )
    if interpreted.passed:
        line = (
            f"bounds: no load or store outside its tensors in {interpreted.cases_total} cases run in the "
            "interpreter, and every input read and every output element written by a kernel"
        )
    elif interpreted.status == FAIL:  # e.g. a kernel using what the interpreter lacks (inline PTX)
        line = f"bounds: not checked to the end; in the interpreter, {interpreted.summary}"
    else:
        line = f"bounds: not checked; the interpreter's run did not finish ({interpreted.summary})"
    return replace(result, details=[*result.details, line], seconds=result.seconds + interpreted.seconds)


SIMULATOR_NOTE = (
    "On a GPU a mistake in the barrier protocol is a race: a slot freed while a wgmma still reads it, or a "
    "wait on a stale phase, gives wrong values on some runs and right ones on others, and the GPU's cases "
    "may all be lucky. The course's Gluon simulator ran the task's CPU-mode cases (small shapes) with the "
    "partitions in a seeded order, TMA copies landing and wgmmas finishing late, and checked every wait, "
    "arrival and release as it went."
)
# what the simulator finds that a GPU run may not: they fail the task. Anything else it raises (a Gluon
# construct it does not run, a refusal of what the compiler took) leaves the GPU's pass standing
_PROTOCOL = ("the asynchronous protocol is broken", "the kernel deadlocks")


def merge_simulated(result: TaskResult, simulated: TaskResult) -> TaskResult:
    """The GPU result of a Gluon task, failed if the simulator's run of the CPU-mode cases found a broken
    protocol, a deadlock or wrong values (a case shape the GPU's cases lack), or its checks failed there;
    otherwise the same result with one line saying what the simulator's run found."""
    if simulated.status == FAIL and (simulated.failed in ("values", "checks") or any(
        found in simulated.summary for found in _PROTOCOL
    )):  # fmt: skip
        run = "the Gluon simulator's run of the CPU-mode cases"
        if simulated.failed == "checks":
            found = simulated.summary.split(" are right, but ", 1)[-1]
            return replace(
                result,
                status=FAIL,
                summary=f"every case passed on the GPU, but {found} (seen in {run})",
                details=[SIMULATOR_NOTE, *simulated.details],
                failed="checks",
                seconds=result.seconds + simulated.seconds,
            )
        return replace(
            result,
            status=FAIL,
            summary=f"every case passed on the GPU, but {run} failed: {simulated.summary}",
            details=[SIMULATOR_NOTE, *simulated.details],
            cases_passed=simulated.cases_passed,  # the failing task claims no more than the simulator gave
            cases_total=simulated.cases_total,
            failed=simulated.failed or "values",
            seconds=result.seconds + simulated.seconds,
        )
    if simulated.passed:
        line = (
            f"protocol: {simulated.cases_total} CPU-mode cases run in the course's Gluon simulator (partitions in a "
            "seeded order, copies and wgmmas late): every wait, arrival and release in order, every value right"
        )
    elif simulated.status in (FAIL, NEEDS_GPU):  # a construct the simulator does not run, say
        line = f"protocol: not checked to the end; in the Gluon simulator, {simulated.summary}"
    else:
        line = f"protocol: not checked; the Gluon simulator's run did not finish ({simulated.summary})"
    return replace(result, details=[*result.details, line], seconds=result.seconds + simulated.seconds)
