"""Where task files come from, and loading one: the grader's worker, the benchmarks, the widgets and
the scripts all load a task file through here.

'exercises' and 'solutions' name the course's folders; anything else is a folder path.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from . import runtime, tracebacks
from .stubs import NOT_IMPLEMENTED

# statuses a load can end in (the grader's own names)
TODO, FAIL = "todo", "fail"


class LoadError(Exception):
    """A task file that cannot be graded as it stands; ``status`` is 'todo' or 'fail'."""

    def __init__(self, status: str, summary: str, details: list[str] | None = None):
        super().__init__(summary)
        self.status, self.summary, self.details = status, summary, details or []


def resolve(source: str | os.PathLike) -> Path:
    """'exercises' and 'solutions' name the course's folders; anything else is a path."""
    text = str(source)
    if text in ("exercises", "solutions"):
        return runtime.course_root() / text
    return Path(text).expanduser().resolve()


def display(path: Path) -> str:
    """A path as the course shows it: relative to the course root where it lies inside it."""
    try:
        return str(Path(path).relative_to(runtime.course_root()))
    except ValueError:
        return str(path)


def task_path(task: str, source: str | os.PathLike = "exercises") -> Path:
    return resolve(source) / f"{task}.py"


def load_file(
    path: Path, entry: str, module_name: str | None = None, shown_as: str | None = None, add_folder: bool = True
):
    """Import the task file at ``path`` and return (module, entry function). Raises LoadError.

    ``shown_as``: how messages name the file (the grader imports a private copy of the learner's);
    ``add_folder``: put the file's folder on sys.path (the grader never does, so that no file beside
    a task file is ever imported)."""
    path = Path(path)
    shown = shown_as or display(path)
    if not path.exists():
        raise LoadError(TODO, f"{NOT_IMPLEMENTED}: {shown} does not exist")
    folder = str(path.parent)
    if add_folder and folder not in sys.path:
        sys.path.insert(0, folder)
    mod_spec = importlib.util.spec_from_file_location(module_name or f"course_submission_{path.stem}", path)
    module = importlib.util.module_from_spec(mod_spec)
    try:
        mod_spec.loader.exec_module(module)
    except SyntaxError as e:
        raise LoadError(FAIL, f"{shown} line {e.lineno}: {e.msg}", [f"  {(e.text or '').rstrip()}"]) from e
    except NotImplementedError as e:  # a stub at module level (e.g. an autotune wrapper to write)
        raise LoadError(TODO, str(e) or f"{NOT_IMPLEMENTED}: {shown}") from e
    except SystemExit as e:  # the submission exited, not the grader
        raise LoadError(
            FAIL,
            f"importing {shown} raised SystemExit({e.code!r}): a task file must not exit",
            tracebacks.learner_frames(e, path),
        ) from e
    except RecursionError as e:
        raise LoadError(FAIL, f"importing {shown} raised RecursionError: it nests too deeply for Python") from e
    except BaseException as e:  # learner code: anything can happen on import
        raise LoadError(
            FAIL, f"importing {shown} raised {type(e).__name__}: {e}", tracebacks.learner_frames(e, path)
        ) from e
    function = getattr(module, entry, None)
    if not callable(function):
        raise LoadError(FAIL, f"{shown} has no function `{entry}` (the grader calls it)")
    return module, function


def solution_present(task: str) -> bool:
    """Whether the course's solution of ``task`` is here: not in a released copy, which withholds them."""
    try:
        return (resolve("solutions") / f"{task}.py").is_file()
    except Exception:  # no course folder to look in
        return False


def load_module(task: str, source: str | os.PathLike = "solutions"):
    """The Python module of ``task``'s file in ``source``, for scripts and notebooks that launch a
    solution's kernel themselves (not for grading: the grader loads learner code in its worker)."""
    from . import tasks

    spec = tasks.get(task)
    return load_file(task_path(spec.name, source), spec.entry)[0]
