"""GPU mode: the interpreter's bounds and data-flow check, in a worker of its own.

On a GPU a load past the end of a tensor usually returns whatever lies there, with no error, and
nothing says which kernel read which input. Triton's interpreter checks every address. So in GPU
mode a kernel task that passes is graded once more, with the CPU-mode cases, by a worker started
with ``TRITON_INTERPRET=1`` (a process that has set up CUDA cannot switch to the interpreter).
The protected process makes the inputs and judges, as for any worker.
"""

from __future__ import annotations

import os
from dataclasses import replace

from .. import runtime
from .isolation import Worker
from .result import FAIL, TaskResult

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
