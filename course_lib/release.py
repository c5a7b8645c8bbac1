"""Releasing an assignment: a learner's copy of the course without its solutions.

    python -m course_lib release OUT

writes the folder OUT with what a learner works in (README, setup, course_lib, the notebooks, the
records in results/, and exercises/ generated afresh from solutions/) and nothing that reveals the
solutions: no solutions/, no tests/ (its correct alternatives are answers too), no scripts/ (the
experiments behind the solutions), no gradescope/, no git history; notebooks lose any outputs. Then
every released text file is searched for the solutions' own code: ``RUN`` consecutive lines of a
``# BEGIN SOLUTION`` region (compared without indentation, blank lines and comments). A find refuses
the release and removes the folder, naming the file and the solution it shows.

A released copy says so (``MARKER``): its notebooks show what needs a solution as withheld, and its
doctor does not ask for solutions/. Its learners' files are graded from the instructor's copy, where
the solutions set the time limits and the speed bars: ``python -m course_lib grade ROOM`` there, or
``check TASK --source THEIR_FOLDER``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from . import stubs
from .runtime import course_root

MARKER = ".course-release.json"  # at the top of a released copy
INCLUDE = (
    "README.md",
    "LICENSE",
    "CITATION.cff",
    "pyproject.toml",
    "setup.sh",
    "environment.yml",
    "postBuild",
    "course_lib",
    "notebooks",
    "results",
)
WITHHELD = ("solutions", "tests", "scripts", "gradescope", ".git", ".ci")
_SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".ruff_cache", ".course"}
_SKIP_FILES = {"progress.json", "progress.json.lock"}
RUN = 3  # consecutive lines of a solution region that count as showing it
_TEXT_SUFFIXES = {".py", ".ipynb", ".md", ".txt", ".json", ".sh", ".yml", ".yaml", ".toml", ".cff", ".csv", ""}


README_NOTE = (
    "> **A released copy of the course, for an assignment.** The solutions, the tests and the experiment\n"
    "> scripts are withheld: the commands below that run the test suite or a script are for the full course.\n"
    "> Set up and open the course as below, write your code in `exercises/`, and check it with\n"
    "> `python -m course_lib check TASK`. Cells that show a solution say that it is withheld.\n\n"
)


class ReleaseError(RuntimeError):
    pass


@dataclass(frozen=True)
class Shown:
    """A released file that holds ``RUN`` lines of a solution's region."""

    path: str  # relative to the release
    task: str
    lines: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.path} shows solutions/{self.task}.py: " + " / ".join(self.lines)


def is_release(root: Path | None = None) -> bool:
    return ((root or course_root()) / MARKER).is_file()


def _normal(line: str) -> str:
    """A line as the search compares it: no indentation, no comment, no trailing spaces."""
    code = line.split("#", 1)[0] if not line.lstrip().startswith(("'", '"')) else line
    return code.strip()


def solution_runs(solutions: Path) -> dict[tuple[str, ...], str]:
    """Every ``RUN`` consecutive code lines inside the solutions' regions -> the task they come from.
    A line that some exercise gives (``pid = tl.program_id(axis=0)``: chapter 02's, in every later file)
    is the course's common ground, not an answer: it breaks a run. TODO comments are comments."""
    given = set()
    for path in solutions.glob("*.py"):
        given.update(_normal(line) for line in stubs.make_exercise(path.read_text(), path.stem).splitlines())
    runs: dict[tuple[str, ...], str] = {}
    for path in sorted(solutions.glob("*.py")):
        inside, code = False, []
        for line in path.read_text().splitlines() + [stubs.END]:
            stripped = line.strip()
            if stripped == stubs.BEGIN:
                inside, code = True, []
            elif stripped == stubs.END and inside:
                inside = False
                for i in range(len(code) - RUN + 1):
                    run = tuple(code[i : i + RUN])
                    if not given.intersection(run):
                        runs.setdefault(run, path.stem)
            elif inside and _normal(line):
                code.append(_normal(line))
    return runs


def _texts(path: Path) -> list[str]:
    """A file's lines as the search reads them; a notebook's are its cells' sources, one after another."""
    text = path.read_text(errors="replace")
    if path.suffix == ".ipynb":
        try:
            cells = json.loads(text).get("cells", [])
            text = "\n".join("".join(c.get("source", [])) for c in cells)
        except (ValueError, AttributeError):
            pass
    return [n for n in (_normal(line) for line in text.splitlines()) if n]


def shown_solutions(release: Path, solutions: Path) -> list[Shown]:
    """The released text files that hold a run of a solution's code (at most one find per file)."""
    runs = solution_runs(solutions)
    found = []
    for path in sorted(p for p in release.rglob("*") if p.is_file()):
        if path.suffix not in _TEXT_SUFFIXES or path.stat().st_size > 20_000_000:
            continue
        lines = _texts(path)
        for i in range(len(lines) - RUN + 1):
            task = runs.get(tuple(lines[i : i + RUN]))
            if task is not None:
                found.append(Shown(str(path.relative_to(release)), task, tuple(lines[i : i + RUN])))
                break
    return found


NEEDS_SOLUTION = "needs-solution"  # a notebook cell's tag: it runs a solution (or what such a cell made)
WITHHELD_CELL = (
    "# Withheld in this released copy of the course: this cell runs the course's solutions, which an\n"
    "# assignment does not hand out. Its code is kept below, commented out.\n"
    'print("(withheld in this released copy: this cell runs the course\'s solutions)")\n'
)


def release_notebook(data: dict) -> dict:
    """A notebook as a released copy has it: no outputs, and each cell tagged NEEDS_SOLUTION replaced by
    a line that says it is withheld, its code kept as comments."""
    for cell in data.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        cell["outputs"], cell["execution_count"] = [], None
        if NEEDS_SOLUTION in cell.get("metadata", {}).get("tags", []):
            source = "".join(cell.get("source", []))
            commented = "\n".join(f"# {line}" if line else "#" for line in source.splitlines())
            text = WITHHELD_CELL + commented
            cell["source"] = [line + "\n" for line in text.split("\n")[:-1]] + [text.split("\n")[-1]]
    return data


def _release_notebook_file(path: Path) -> None:
    path.write_text(json.dumps(release_notebook(json.loads(path.read_text())), indent=1, ensure_ascii=False) + "\n")


def _copy(source: Path, target: Path) -> None:
    if source.is_dir():
        target.mkdir(parents=True, exist_ok=True)
        for child in sorted(source.iterdir()):
            if child.name in _SKIP_DIRS or child.name in _SKIP_FILES or ".bak-" in child.name or child.is_symlink():
                continue
            _copy(child, target / child.name)
    elif source.is_file():
        shutil.copy2(source, target)
        if target.suffix == ".ipynb":
            _release_notebook_file(target)


def _commit(root: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def release(out: Path, root: Path | None = None) -> list[str]:
    """Write the learner's copy of the course at ``root`` (the instructor's, with solutions/) into
    ``out``, which must not exist yet. Returns the lines to print; raises ReleaseError."""
    root = (root or course_root()).resolve()
    out = Path(out).resolve()
    solutions = root / "solutions"
    if not solutions.is_dir():
        raise ReleaseError(f"no solutions/ under {root}: release from the instructor's copy of the course")
    if out.exists():
        raise ReleaseError(f"{out} exists: name a new folder (nothing there is replaced)")
    if out == root or root in out.parents:
        raise ReleaseError(f"{out} is inside the course folder {root}: name a folder outside it")
    out.mkdir(parents=True)
    try:
        for name in INCLUDE:
            if (root / name).exists():
                _copy(root / name, out / name)
        exercises = out / "exercises"
        exercises.mkdir()
        (out / "solutions").mkdir()  # stubs.sync reads solutions/ under its root: a scratch copy, removed below
        for path in solutions.glob("*.py"):
            shutil.copy2(path, out / "solutions" / path.name)
        report = stubs.sync(out)
        shutil.rmtree(out / "solutions")
        # a record of a run on the solutions (a notebook's printed output, a grader's log) may print their
        # code: such a record is left out; the notebooks that read records say when one is missing
        left_out = [s.path for s in shown_solutions(out, solutions) if s.path.startswith("results/")]
        for path in left_out:
            (out / path).unlink()
        shown = shown_solutions(out, solutions)
        if shown:
            raise ReleaseError(
                "the release would show the solutions, so it was not made:\n" + "\n".join(f"  {s}" for s in shown)
            )
        marker = {
            "released": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "from_commit": _commit(root),
            "withheld": [name for name in WITHHELD if (root / name).exists()],
            "exercises": len(report.written),
            "records_left_out": left_out,
        }
        (out / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
        readme = out / "README.md"
        if readme.exists():
            readme.write_text(README_NOTE + readme.read_text())
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return [
        f"released {out}: {len(report.written)} exercises, the notebooks, course_lib and results/",
        f"withheld: {', '.join(marker['withheld'])}; no released file shows {RUN} lines of a solution",
        *(f"left out: {path} (a run's record that prints a solution's code)" for path in left_out),
        f"grade its learners' files from the instructor's copy ({root}): python -m course_lib grade ROOM "
        "(or check TASK --source THEIR_FOLDER)",
    ]
