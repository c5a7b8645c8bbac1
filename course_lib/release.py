"""Releasing an assignment: a learner's copy of the course without the assignment's answers.

    python -m course_lib release OUT --chapters 06        # or 00-05, or 06,07

writes the folder OUT with what a learner works in up to the assignment's last chapter (README,
setup, course_lib, those chapters' notebooks and exercises, the records in results/) and nothing of
the instructor's: no solutions/, no tests/ (its correct alternatives are answers too), no scripts/
(the experiments behind the solutions), no gradescope/, no git history. Exercises are generated
afresh from solutions/ (never copied into OUT), notebooks lose their outputs, and each cell tagged
``needs-solution`` (it runs a solution, the course's test files, or what such a cell made; a
markdown cell that walks through an answer) is withheld: a code cell prints so and keeps its code
as comments, a markdown cell says so. A notebook's recorded run (results/notebook_runs_*) that
prints withheld cells is left out.

Then every released file is searched for the answers of the assignment's tasks: ``RUN`` consecutive
code lines of a ``# BEGIN SOLUTION`` region, compared without indentation, in code, in comments (a
withheld cell's code), in notebooks' cells and in the strings of JSON records. A line the course
gives before the task (its own exercise, or an exercise of an earlier chapter) is common ground and
breaks a run. A record that shows an answer is left out and named; any other find refuses the
release, naming the file and the task. Later chapters are not released: their exercises give the
answers of earlier ones (fused_linear gives grouped_matmul's tile mapping), so an assignment ends
where the next chapter would give its answers away.

Hints: ``--hints K`` keeps only the first K hints of each task of the assignment and later chapters,
cut in the copy's course_lib/tasks (some last hints give the answer); by default all are kept. Not
withheld, and said when releasing: the references of the tasks whose answer is plain PyTorch
(op_costs, split_user_gemm, pad_k), which ``check`` needs to judge a learner's file.

The copy is built beside OUT and renamed into place at the end: an interrupted release leaves no OUT.
A released copy says so (``MARKER``); its doctor and ``sync-exercises`` know it. Its learners' files
are graded from the instructor's copy, where the solutions set the time limits and the speed bars:
``python -m course_lib grade ROOM`` there, or ``check TASK --source THEIR_FOLDER``.
"""

from __future__ import annotations

import ast
import gzip
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import stubs
from .runtime import course_root

MARKER = ".course-release.json"  # at the top of a released copy
PRISTINE = ".course-release"  # the exercises as released, for sync-exercises to restore one from
INCLUDE = (
    "README.md",
    "LICENSE",
    "CITATION.cff",
    "pyproject.toml",
    "setup.sh",
    "environment.yml",
    "postBuild",
    "course_lib",
    "results",
)
WITHHELD = ("solutions", "tests", "scripts", "gradescope", ".git", ".ci")
_SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".ruff_cache", ".course"}
_SKIP_FILES = {"progress.json", "progress.json.lock"}
RUN = 3  # consecutive lines of a solution region that count as showing it
# what is released at all: files the search can read (others, e.g. a trace's .gz, stay behind)
_TEXT_SUFFIXES = {
    ".py", ".ipynb", ".md", ".txt", ".json", ".jsonl", ".log", ".sh", ".yml", ".yaml", ".toml", ".cff", ".csv",
    ".html", ".ptx", "",
}  # fmt: skip
_GZIP_SUFFIXES = {".gz"}  # searched once unpacked, then released
NOTEBOOK_RUNS = "notebook_runs_"  # results/notebook_runs_<gpu>/<notebook>.txt: a notebook's printed run

README_NOTE = (
    "> **A released copy of the course, for an assignment ({chapters}).** The solutions, the tests and the\n"
    "> experiment scripts are withheld, and so are the notebook cells that run them: the commands below\n"
    "> that run the test suite or a script are for the full course. Set up and open the course as below,\n"
    "> write your code in `exercises/`, and check it with `python -m course_lib check TASK`.\n\n"
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


def hints_withheld(task: str, root: Path | None = None) -> int:
    """How many of ``task``'s hints this released copy withholds (0 outside a release)."""
    try:
        marker = json.loads(((root or course_root()) / MARKER).read_text())
        return int(marker.get("hints_withheld", {}).get(task, 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0


def parse_chapters(text: str) -> set[str]:
    """'06' -> {'06'}; '00-05' -> {'00', ..., '05'}; '06,07' -> {'06', '07'}."""
    chapters: set[str] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        match = re.fullmatch(r"(\d{1,2})(?:-(\d{1,2}))?", part)
        if not match:
            raise ReleaseError(f"chapters: {part!r} is not a chapter (06), a range (00-05) or a list (06,07)")
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        if last < first:
            raise ReleaseError(f"chapters: {part!r} runs backwards")
        chapters.update(f"{n:02d}" for n in range(first, last + 1))
    if not chapters:
        raise ReleaseError("chapters: name at least one (e.g. --chapters 06)")
    return chapters


def _normal(line: str) -> str:
    """A line as the search compares it: no indentation, no trailing comment, no trailing spaces."""
    code = line.split("#", 1)[0] if not line.lstrip().startswith(("'", '"')) else line
    return code.strip()


def _released_forms(line: str) -> list[str]:
    """What a released line may be: its code, and, for a comment, the code it may hold (a withheld
    cell's code is kept as '# ...')."""
    forms = [_normal(line)]
    stripped = line.strip()
    if stripped.startswith("#"):
        forms.append(_normal(stripped.lstrip("#")))
    return [f for f in forms if f]


def _regions(path: Path) -> list[list[str]]:
    """The code lines (normal form) of each BEGIN/END SOLUTION region of a solution file."""
    regions, inside, code = [], False, []
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if stripped == stubs.BEGIN:
            inside, code = True, []
        elif stripped == stubs.END and inside:
            inside = False
            regions.append(code)
        elif inside and _normal(line):
            code.append(_normal(line))
    return regions


def solution_runs(solutions: Path, protected: dict[str, str], all_chapters: dict[str, str]) -> dict[tuple, str]:
    """Every ``RUN`` consecutive code lines of a protected task's regions -> that task. ``protected`` and
    ``all_chapters``: task -> chapter. A line that the course gives before the task (its own exercise,
    or any exercise of an earlier chapter: ``pid = tl.program_id(axis=0)`` is chapter 02's) breaks a run."""
    exercise_lines = {
        task: {_normal(line) for line in stubs.make_exercise((solutions / f"{task}.py").read_text(), task).splitlines()}
        for task in all_chapters
        if (solutions / f"{task}.py").is_file()
    }
    runs: dict[tuple[str, ...], str] = {}
    for task, chapter in sorted(protected.items()):
        path = solutions / f"{task}.py"
        if not path.is_file():
            continue
        given = set(exercise_lines.get(task, ()))
        for other, other_chapter in all_chapters.items():
            if other_chapter < chapter:
                given |= exercise_lines.get(other, set())
        for code in _regions(path):
            for i in range(len(code) - RUN + 1):
                run = tuple(code[i : i + RUN])
                if not given.intersection(run):
                    runs.setdefault(run, task)
    return runs


def _json_strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _json_strings(v)] + [k for k in value if isinstance(k, str)]
    if isinstance(value, list):
        return [s for v in value for s in _json_strings(v)]
    return []


def _texts(path: Path) -> list[list[str]]:
    """A file's lines as the search reads them, in one or more sequences: a notebook's cells one after
    another; a JSON file's lines and each of its strings' lines; a .gz file unpacked."""
    if path.suffix in _GZIP_SUFFIXES:
        try:
            text = gzip.decompress(path.read_bytes()).decode(errors="replace")
        except (OSError, EOFError):
            text = path.read_text(errors="replace")
    else:
        text = path.read_text(errors="replace")
    texts = [text]
    if path.suffix == ".ipynb" or path.suffix == ".json" or path.name.endswith(".json.gz"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if path.suffix == ".ipynb" and isinstance(data, dict):
            cells = [c for c in data.get("cells", []) if isinstance(c, dict)]
            texts = ["\n".join("".join(c.get("source", [])) for c in cells if not _kept_on_purpose(c))]
        elif data is not None:
            texts += _json_strings(data)
    return [[form for line in t.splitlines() for form in _released_forms(line)] for t in texts]


def shown_solutions(release: Path, runs: dict[tuple, str]) -> list[Shown]:
    """The released files that hold a run of a protected answer (at most one find per file)."""
    found = []
    for path in sorted(p for p in release.rglob("*") if p.is_file()):
        for lines in _texts(path):
            hit = next((i for i in range(len(lines) - RUN + 1) if tuple(lines[i : i + RUN]) in runs), None)
            if hit is not None:
                run = tuple(lines[hit : hit + RUN])
                found.append(Shown(str(path.relative_to(release)), runs[run], run))
                break
    return found


NEEDS_SOLUTION = "needs-solution"  # a notebook cell's tag: it runs a solution (or what such a cell made)
# a notebook cell's tag: the course teaches this on purpose though it shares lines with an answer (chapter
# 05's row-sum demonstration has softmax's tile indexing); the search passes it by and the release says so
TEACHES = "release-keep"


def _kept_on_purpose(cell: dict) -> bool:
    return TEACHES in cell.get("metadata", {}).get("tags", [])


WITHHELD_CELL = (
    "# Withheld in this released copy of the course: this cell runs the course's solutions (or its test\n"
    "# files), which an assignment does not hand out. Its code is kept below, commented out.\n"
    'print("(withheld in this released copy: this cell runs the course\'s solutions)")\n'
)
WITHHELD_MARKDOWN = (
    "*(Withheld in this released copy of the course: this part walks through the answer of an exercise "
    "of the assignment. Your instructor hands it out after the assignment.)*"
)


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [line + "\n" for line in parts[:-1]] + [parts[-1]]


def release_notebook(data: dict) -> tuple[dict, int]:
    """A notebook as a released copy has it: no outputs, and each cell tagged NEEDS_SOLUTION withheld
    (code: a line that says so, its code kept as comments; markdown: a line that says so). Returns the
    notebook and how many cells were withheld."""
    withheld = 0
    for cell in data.get("cells", []):
        kind = cell.get("cell_type")
        if kind == "code":
            cell["outputs"], cell["execution_count"] = [], None
        if NEEDS_SOLUTION not in cell.get("metadata", {}).get("tags", []):
            continue
        withheld += 1
        if kind == "code":
            source = "".join(cell.get("source", []))
            commented = "\n".join(f"# {line}" if line else "#" for line in source.splitlines())
            cell["source"] = _lines(WITHHELD_CELL + commented)
        else:
            cell["source"] = _lines(WITHHELD_MARKDOWN)
    return data, withheld


def _copy(source: Path, target: Path) -> None:
    if source.is_dir():
        target.mkdir(parents=True, exist_ok=True)
        for child in sorted(source.iterdir()):
            if child.name in _SKIP_DIRS or child.name in _SKIP_FILES or ".bak-" in child.name or child.is_symlink():
                continue
            _copy(child, target / child.name)
    elif source.is_file() and (source.suffix in _TEXT_SUFFIXES or source.suffix in _GZIP_SUFFIXES):
        shutil.copy2(source, target)


def _commit(root: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0 or not head.stdout.strip():
        return None
    return head.stdout.strip() + (" with uncommitted changes" if out.stdout.strip() else "")


def _hint_lists(tree: ast.Module) -> dict[str, ast.List]:
    """task name -> the list literal of its hints, in a task module: a call with ``name="x", hints=[...]``
    (``TaskSpec`` or a helper that passes them on), or ``hints=NAME`` with ``NAME = [...]`` at the top."""
    top = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    found = {}
    for node in ast.walk(tree):  # TaskSpec(...) or a helper that passes its keywords on (ch06's _spec)
        if not isinstance(node, ast.Call):
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        name, hints = keywords.get("name"), keywords.get("hints")
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            if isinstance(hints, ast.Name):
                hints = top.get(hints.id)
            if isinstance(hints, ast.List):
                found[name.value] = hints
    return found


def keep_hints(source: str, tasks: set[str], keep: int) -> tuple[str, dict[str, int]]:
    """A task module's text with each of ``tasks``' hint lists cut to its first ``keep`` hints; and how
    many each task lost."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(lineno: int, col: int) -> int:  # ast's columns count UTF-8 bytes
        return starts[lineno - 1] + len(lines[lineno - 1].encode()[:col].decode())

    cuts, cut = [], {}
    for task, hints in _hint_lists(tree).items():
        if task in tasks and len(hints.elts) > keep:
            kept = [ast.get_source_segment(source, element) for element in hints.elts[:keep]]
            text = "[" + ", ".join(kept) + ("," if kept else "") + "]" if kept else "[]"
            begin = offset(hints.lineno, hints.col_offset)
            end = offset(hints.end_lineno, hints.end_col_offset)
            cuts.append((begin, end, text))
            cut[task] = len(hints.elts) - keep
    for begin, end, text in sorted(cuts, reverse=True):
        source = source[:begin] + text + source[end:]
    ast.parse(source)  # still Python
    return source, cut


def _chapter_of_notebook(path: Path) -> str | None:
    match = re.match(r"(\d\d)_", path.name)
    return match.group(1) if match else None


def release(out: Path, chapters: set[str], root: Path | None = None, hints: int | None = None) -> list[str]:
    """Write the learner's copy of the course at ``root`` (the instructor's, with solutions/) for an
    assignment of ``chapters`` into ``out``, which must not exist yet. ``hints``: keep only each task's
    first so many hints, for the tasks of the assignment and later ones (None: all). Returns the lines to
    print; raises ReleaseError."""
    from . import tasks

    root = (root or course_root()).resolve()
    out = Path(os.path.abspath(out))
    solutions = root / "solutions"
    if not solutions.is_dir():
        raise ReleaseError(f"no solutions/ under {root}: release from the instructor's copy of the course")
    if out.exists() or out.is_symlink():
        raise ReleaseError(f"{out} exists: name a new folder (nothing there is replaced)")
    if out.resolve() == root or root in out.resolve().parents:
        raise ReleaseError(f"{out} is inside the course folder {root}: name a folder outside it")
    task_chapters = {}
    for path in sorted(solutions.glob("*.py")):
        try:
            task_chapters[path.stem] = tasks.get(path.stem).chapter
        except KeyError:
            raise ReleaseError(f"solutions/{path.name} is no task of the course") from None
    known = set(task_chapters.values()) | {
        c for p in (root / "notebooks").glob("*.ipynb") if (c := _chapter_of_notebook(p))
    }
    unknown = sorted(chapters - known)
    if unknown:
        raise ReleaseError(f"chapters: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not in the course")
    last = max(chapters)
    # the assignment's answers, and those of every later chapter (later assignments): a record or a
    # hint must show none of them; earlier chapters' answers are the ground the assignment stands on
    first = min(chapters)
    assignment = {task: chapter for task, chapter in task_chapters.items() if chapter in chapters}
    protected = {task: chapter for task, chapter in task_chapters.items() if chapter >= first}
    released_tasks = {task: chapter for task, chapter in task_chapters.items() if chapter <= last}
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.releasing-", dir=out.parent))
    try:
        for name in INCLUDE:
            if (root / name).exists():
                _copy(root / name, staging / name)
        hints_cut: dict[str, int] = {}
        if hints is not None:
            if hints < 0:
                raise ReleaseError("--hints: a count of hints to keep, 0 or more")
            for module in sorted((staging / "course_lib" / "tasks").glob("*.py")):
                text, cut = keep_hints(module.read_text(), set(protected), hints)
                if cut:
                    module.write_text(text)
                    hints_cut.update(cut)
            missed = sorted(t for t in protected if len(tasks.get(t).hints) > hints and t not in hints_cut)
            if missed:  # a hint list written some other way: say so rather than release it whole
                raise ReleaseError(f"--hints: the hints of {', '.join(missed)} were not found in course_lib/tasks")
        withheld, notebooks, kept = 0, [], []
        (staging / "notebooks").mkdir()
        for path in sorted((root / "notebooks").iterdir()):
            chapter = _chapter_of_notebook(path)
            if path.suffix == ".ipynb":
                if chapter is None or chapter > last:
                    continue
                try:
                    data, n = release_notebook(json.loads(path.read_text()))
                except (ValueError, AttributeError, TypeError) as e:
                    raise ReleaseError(f"notebooks/{path.name} is not a notebook ({e})") from None
                withheld += n
                notebooks.append(path.stem)
                kept += [f"notebooks/{path.name} cell {i}" for i, c in enumerate(data["cells"]) if _kept_on_purpose(c)]
                if n:  # its recorded run prints the withheld cells and their output
                    for record in (staging / "results").glob(f"{NOTEBOOK_RUNS}*/{path.stem}.txt"):
                        record.unlink()
                (staging / "notebooks" / path.name).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
            elif path.is_file() and not path.name.startswith(".") and (chapter is None or chapter <= last):
                shutil.copy2(path, staging / "notebooks" / path.name)  # GLOSSARY.md, pictures
        for folder in ("exercises", f"{PRISTINE}/exercises"):
            (staging / folder).mkdir(parents=True)
        generated = {}
        for task in sorted(released_tasks):
            text = stubs.make_exercise((solutions / f"{task}.py").read_text(), task)
            generated[f"{task}.py"] = stubs.digest(text)
            for folder in ("exercises", f"{PRISTINE}/exercises"):
                (staging / folder / f"{task}.py").write_text(text)
        (staging / "exercises" / stubs.MANIFEST).write_text(json.dumps(generated, indent=1, sort_keys=True) + "\n")
        runs = solution_runs(solutions, protected, task_chapters)
        # a record of a run on the solutions (a notebook's printed output, a grader's log) may print an
        # answer: such a record is left out; the notebooks that read records say when one is missing
        left_out = [s.path for s in shown_solutions(staging, runs) if s.path.startswith("results/")]
        for path in left_out:
            (staging / path).unlink()
        shown = shown_solutions(staging, runs)
        if shown:
            raise ReleaseError(
                f"the release of chapters {', '.join(sorted(chapters))} would show answers of chapter {first} or "
                "later, so it was not made:\n"
                + "\n".join(f"  {s}" for s in shown)
                + "\n(a later chapter's exercise gives an earlier task's answer: release up to the chapter "
                "before it, or tag the cell needs-solution)"
            )
        label = f"chapter{'s' * (len(chapters) > 1)} {', '.join(sorted(chapters))}"
        marker = {
            "released": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "from_commit": _commit(root),
            "chapters": sorted(chapters),
            "tasks": sorted(assignment),
            "answers_searched_for": sorted(protected),
            "exercises": sorted(released_tasks),
            "notebooks": notebooks,
            "withheld": [name for name in WITHHELD if (root / name).exists()],
            "cells_withheld": withheld,
            "records_left_out": left_out,
            "kept_on_purpose": kept,
            "hints_withheld": hints_cut,
        }
        (staging / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
        readme = staging / "README.md"
        if readme.exists():
            readme.write_text(README_NOTE.format(chapters=label) + readme.read_text())
        os.rename(staging, out)  # all at once: an interrupted release leaves no OUT
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [
        f"released {out}: the assignment of {label} ({len(assignment)} tasks: {', '.join(sorted(assignment))}); "
        f"{len(released_tasks)} exercises and {len(notebooks)} notebooks up to chapter {last}, "
        f"{withheld} cells withheld",
        f"withheld: {', '.join(marker['withheld'])}; no released file shows {RUN} lines of an answer of chapter "
        f"{first} or later",
        *(f"left out: {path} (a run's record that prints an answer)" for path in left_out),
        *(f"kept on purpose: {cell} (tagged {TEACHES}: it teaches lines an answer shares)" for cell in kept),
        (
            f"hints: the first {hints} of each task of chapter {first} or later kept, "
            f"{sum(hints_cut.values())} withheld ({len(hints_cut)} tasks)"
            if hints is not None
            else "not withheld: each task's hints (--hints K keeps the first K)"
        ),
        "not withheld: the references of op_costs, split_user_gemm and pad_k, which check needs",
        f"grade its learners' files from the instructor's copy ({root}): python -m course_lib grade ROOM "
        "(or check TASK --source THEIR_FOLDER)",
    ]


def sync_release(root: Path, force: bool = False) -> list[str]:
    """sync-exercises in a released copy: restore a missing exercise from the copy as released; an
    edited one is kept (``force`` replaces it, keeping a backup)."""
    pristine = root / PRISTINE / "exercises"
    lines, kept = [], 0
    for path in sorted(pristine.glob("*.py")):
        target = root / "exercises" / path.name
        if not target.exists():
            shutil.copy2(path, target)
            lines.append(f"restored  exercises/{path.name}, as released")
        elif target.read_text() != path.read_text():
            if force:
                backup = target.with_name(f"{target.name}.bak-{time.strftime('%Y%m%d-%H%M%S')}")
                shutil.copy2(target, backup)
                shutil.copy2(path, target)
                lines.append(f"backed up {backup.name}; exercises/{path.name} as released")
            else:
                kept += 1
    lines.append(
        f"a released copy: exercises/ as released, {kept} with your edits kept"
        + (" (--force puts one back as released, keeping a backup)" if kept else "")
    )
    return lines
