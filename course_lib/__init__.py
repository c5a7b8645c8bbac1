"""course_lib: the library behind the course's notebooks, grader and benchmarks.

Import it before Triton: in CPU mode it sets TRITON_INTERPRET=1 first (see ``runtime``).

In a notebook::

    import course_lib
    course_lib.check("vector_add")   # grade exercises/vector_add.py, shown as a report
"""

from __future__ import annotations

# runtime must come first: it sets up the interpreter before anything imports Triton
from . import (
    hooks,
    interpreter,
    runtime,  # noqa: I001
)

hooks.install()
interpreter.install()
hooks.install_dot_tap()  # after the interpreter's own dot: it wraps it
runtime.install_scratch_allocator()  # GPU mode: for tensor descriptors made inside a kernel

MODE = runtime.MODE


def check(task: str, source: str = "exercises", seed: int | None = None, timeout: float | None = None):
    """Grade one task (or "all") and return a report that a notebook shows as a table."""
    from . import grader, progress, tasks
    from .grader.report import Report

    names = [t.name for t in tasks.all_tasks()] if task == "all" else [tasks.get(task).name]
    results = grader.grade(names, source=source, seed=seed, timeout=timeout)
    if source == "exercises":
        progress.record_results(results)
    return Report(results)


def hint(task: str, number: int | None = None) -> None:
    """Print the next hint for a task (hints come in order, before any solution)."""
    from .cli import main

    main(["hint", task] + ([str(number)] if number else []))


def doctor() -> bool:
    """Print the doctor's findings; True when the machine is ready."""
    from . import checkup as _doctor

    found = _doctor.run()
    print(_doctor.format_findings(found))
    return _doctor.usable(found)


_SUBMODULES = {
    "bench",
    "compilation",
    "grader",
    "lesson",
    "pipeline_sim",
    "progress",
    "results",
    "roofline",
    "sources",
    "tasks",
    "timing",
    "traffic",
    "widgets",
}


def __getattr__(name: str):
    """``course_lib.widgets`` and the other modules load on first use (widgets need ipywidgets)."""
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'course_lib' has no attribute {name!r}")


__all__ = ["MODE", "check", "doctor", "hint", "runtime"]
