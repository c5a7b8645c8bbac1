"""Small helpers the lesson notebooks share: show a task's file, write a deliberately wrong copy of
one for the grader to catch, and read the interpreter's wall clock (to show that it is no GPU clock).

Nothing heavy is imported at module level: IPython, difflib and time load inside the functions.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from . import runtime, sources


def task_file(task: str, source: str = "exercises") -> Path:
    """The file a task is graded from: ``exercises/<task>.py``, ``solutions/<task>.py`` or a folder's."""
    path = sources.task_path(task, source)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist (python -m course_lib sync-exercises writes exercises/)")
    return path


class _Plain:
    """Source text shown as it is, where IPython is not installed."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def show_file(task: str, source: str = "exercises"):
    """A task's file with syntax highlighting in a notebook (plain text elsewhere)."""
    path = task_file(task, source)
    try:
        from IPython.display import Code
    except ImportError:
        return _Plain(path.read_text())
    return Code(filename=str(path), language="python")


def source_of(function) -> _Plain:
    """A function's source as a reader should see it: a solution's ``# BEGIN SOLUTION`` / ``# END
    SOLUTION`` markers and the exercise's ``# TODO`` lines left out (kernels: pass the @jit object)."""
    import inspect

    from .stubs import BEGIN, END

    fn = getattr(function, "fn", function)
    lines = inspect.getsource(fn).splitlines()
    kept = [line for line in lines if line.strip() not in (BEGIN, END) and not line.strip().startswith("# TODO")]
    return _Plain("\n".join(kept))


@dataclass
class Variant:
    """A changed copy of a task file, in a folder of its own that ``check(task, source=folder)`` grades."""

    task: str
    folder: Path
    origin: str  # the file it was copied from, as the course names it
    changes: list[tuple[int, str, str]] = field(default_factory=list)  # (line, before, after)
    _removal: object = field(default=None, repr=False, compare=False)  # a weakref.finalize for a temporary folder
    shown: list[str] = field(default_factory=list, repr=False, compare=False)  # the changes with a line around each

    def __repr__(self) -> str:
        head = f"{self.task}.py: a copy of {self.origin} in {self.folder}, with these changes"
        if self.shown:
            return "\n".join([head + " (- the original's line, + the copy's, a line of each side around them):",
                              *self.shown])  # fmt: skip
        lines = [head + ":"]
        for number, before, after in self.changes:
            lines.append(f"  line {number:>3}  - {before}")
            lines.append(f"            + {after}")
        return "\n".join(lines)


def write_variant(task: str, replace: dict[str, str], source: str = "solutions", folder=None) -> Variant:
    """Copy ``source/<task>.py`` into a fresh folder with each key of ``replace`` swapped for its value.

    Each text to replace must occur exactly once, so a lesson fails loudly (instead of grading an
    unchanged copy) when the file it edits has moved on. Without ``folder`` the copy goes to a
    temporary folder that is removed once the returned Variant is gone, or when Python exits (also
    by SIGTERM, as a Jupyter kernel is ended), or, after a crash, by the next variant written.
    """
    import difflib

    path = task_file(task, source)
    original = path.read_text()
    text = original
    for before, after in replace.items():
        found = text.count(before)
        if found != 1:
            raise ValueError(f"{path.name}: {before!r} occurs {found} times; expected exactly once")
        text = text.replace(before, after)
    target = Path(folder) if folder else _temporary_folder(task)
    target.mkdir(parents=True, exist_ok=True)
    (target / path.name).write_text(text)

    old_lines, new_lines = original.splitlines(), text.splitlines()
    changes = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            before = old_lines[i1 + k].strip() if i1 + k < i2 else ""
            after = new_lines[j1 + k].strip() if j1 + k < j2 else ""
            changes.append((j1 + k + 1, before, after))
    origin = f"{source}/{path.name}" if source in ("exercises", "solutions") else str(path)
    variant = Variant(task, target, origin, changes, shown=_shown_changes(old_lines, new_lines, matcher))
    if not folder:
        variant._removal = weakref.finalize(variant, _remove, str(target), os.getpid())
        _removals[:] = [r for r in _removals if r.alive] + [variant._removal]
    return variant


def _shown_changes(old_lines: list[str], new_lines: list[str], matcher) -> list[str]:
    """Each change as the learner reads a diff: the lines removed (-, numbered in the original) and added
    (+, numbered in the copy), with the unchanged line before and after (numbered in the copy), a gap
    between changes far apart."""
    shown: list[str] = []
    last = 0  # the copy's last line shown

    def line(mark: str, number: int, text: str) -> None:
        shown.append(f"  {mark} {number:>4} | {text}")

    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if j1 >= 1 and j1 > last:
            if shown and j1 > last + 1:
                shown.append("    ...")
            line(" ", j1, new_lines[j1 - 1])
        for i in range(i1, i2):
            line("-", i + 1, old_lines[i])
        for j in range(j1, j2):
            line("+", j + 1, new_lines[j])
        if j2 < len(new_lines):
            line(" ", j2 + 1, new_lines[j2])
        last = j2 + 1
    return shown


# --------------------------------------------------------------------------------------------------
# temporary folders of variants: removed with their Variant, at exit, on SIGTERM, or after a crash
#
# weakref.finalize removes a folder when its Variant is collected and, at the latest, when Python
# exits normally. A Jupyter kernel often does not: after a check, ipykernel's shutdown waits for
# the grader's multiprocessing helpers (the resource tracker ignores SIGTERM), and the server then
# ends the kernel with SIGTERM, which skips atexit. So a SIGTERM handler removes the folders first,
# then dies of the signal as before; a folder whose process was killed outright (SIGKILL, a crash)
# is removed by the next process that writes a variant.

_removals: list[weakref.finalize] = []
_OWNER = ".course-owner"  # in each folder: "host pid" of the process that made it


def _temporary_folder(task: str) -> Path:
    _remove_orphans()
    _remove_on_sigterm()
    target = Path(tempfile.mkdtemp(prefix=f"course-{task}-variant-"))
    (target / _OWNER).write_text(f"{socket.gethostname()} {os.getpid()}")
    return target


def _remove(folder: str, owner_pid: int) -> None:
    if os.getpid() == owner_pid:  # a forked child that exits leaves its parent's folders alone
        shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def _remove_orphans() -> None:
    """Remove the variant folders of processes on this host that are gone."""
    host = socket.gethostname()
    for owner in Path(tempfile.gettempdir()).glob(f"course-*-variant-*/{_OWNER}"):
        try:
            where, pid = owner.read_text().split()
            if where == host and int(pid) != os.getpid() and not _alive(int(pid)):
                shutil.rmtree(owner.parent, ignore_errors=True)
        except (OSError, ValueError):
            continue


_previous_sigterm = None


def _on_sigterm(signum, frame) -> None:
    for removal in list(_removals):
        removal()
    signal.signal(signal.SIGTERM, _previous_sigterm)
    if callable(_previous_sigterm):
        _previous_sigterm(signum, frame)
    else:
        os.kill(os.getpid(), signal.SIGTERM)  # the default action: die of the signal, as without us


def _remove_on_sigterm() -> None:
    """Install ``_on_sigterm`` once, where a handler can go (the main thread) and SIGTERM is not ignored."""
    global _previous_sigterm
    current = signal.getsignal(signal.SIGTERM)
    if current is _on_sigterm or current in (signal.SIG_IGN, None):
        return
    if threading.current_thread() is not threading.main_thread():
        return
    _previous_sigterm = current
    signal.signal(signal.SIGTERM, _on_sigterm)


def interpreter_seconds(launch, repeat: int = 3) -> float:
    """The best of ``repeat`` wall-clock times of ``launch()`` in Triton's interpreter, in seconds.

    This exists to show that interpreter time is not GPU time (it is Python and numpy running one
    program after another). It refuses to run in GPU mode: GPU kernels are timed by the timing
    chapter's tools, with warm-up, medians and a flushed L2.
    """
    import time

    if runtime.is_gpu():
        raise RuntimeError("interpreter_seconds measures the CPU interpreter; in GPU mode use the timing tools")
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        launch()
        best = min(best, time.perf_counter() - start)
    return best
