"""A room's gradebook in the form another system imports: ``python -m course_lib export GRADES --to ...``.

``GRADES`` is what ``grade`` wrote (its CSV or its JSON: the same rows, read by ``roster.read_rows``).

- ``gradescope``: the ``results.json`` of Gradescope's autograder specification
  (https://gradescope-autograders.readthedocs.io/en/latest/specs/) for one learner: a test per task
  (its score and max_score, passed or failed, the grader's message as its output), the total score,
  the grading time, and a leaderboard entry per timed task (microseconds a call, lower is better).
  ``gradescope/run_autograder`` grades one submission that way.
- ``canvas``: a CSV for Canvas's gradebook import, one row per student. Canvas matches rows by its own
  IDs, which a room's folder names are not: the identity columns come from the course's own gradebook
  export (``--roster``), matched on one of its columns (``--match``, by default the SIS Login ID). One
  column per task, or one column with each learner's total (``--assignment NAME``).

- ``nbgrader``: nbgrader's own gradebook database, through its API (``pip install nbgrader``): an
  assignment (``--assignment``) whose one notebook (``course_lib_tasks``) has a grade cell per task,
  and a submission per learner scored cell by cell. nbgrader's formgrader and ``nbgrader export``
  then see them like any other. Exporting again updates the same entries.

A task that the grading machine could not run (``needs_gpu``: a Hopper task graded without a Hopper
GPU) is not scored 0: Canvas gets a blank cell (no grade; the total leaves it out), Gradescope a test
worth 0 of 0 that says so, nbgrader a grade cell with no score (it waits for grading). Nothing here
grades anything: it reads rows and writes files.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sysconfig
import warnings
from dataclasses import dataclass
from pathlib import Path

from .. import tasks as course_tasks
from . import NEEDS_GPU, PASS
from .roster import neutralised, read_rows, write_atomic

FORMATS = ("gradescope", "canvas", "nbgrader")
NBGRADER_NOTEBOOK = "course_lib_tasks"  # the notebook that holds one grade cell per task
CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


class ExportError(Exception):
    """What the export cannot do with what it was given, said for the person who asked."""


@dataclass
class Exported:
    written: list[Path]
    notes: list[str]


def read_gradebook(path: Path) -> list[dict]:
    if not path.is_file():
        raise ExportError(f"{path} does not exist: give the CSV or JSON that `grade` wrote")
    try:
        return read_rows(path)
    except (ValueError, OSError, UnicodeDecodeError) as e:
        raise ExportError(f"{path} is not a gradebook that `grade` wrote ({e})") from None


def _task_order(rows: list[dict]) -> list[str]:
    """The tasks of ``rows``, in course order (tasks this course no longer has last, by name)."""
    known = [t.name for t in course_tasks.all_tasks()]
    present = {r["assignment"] for r in rows}
    return [t for t in known if t in present] + sorted(present - set(known))


def _learners(rows: list[dict]) -> list[str]:
    return sorted({r["student_id"] for r in rows})


# --------------------------------------------------------------------------------------------------
# Gradescope


def _chapter(task: str) -> str:
    try:
        return course_tasks.get(task).chapter
    except Exception:
        return ""


def gradescope_results(rows: list[dict], learner: str, visibility: str = "visible") -> dict:
    """Gradescope's results.json for ``learner``'s rows."""
    mine = {r["assignment"]: r for r in rows if r["student_id"] == learner}
    if not mine:
        raise ExportError(f"the gradebook has no rows for {learner!r}")
    tests, leaderboard = [], []
    total = passed = graded = 0
    seconds = 0.0
    for number, task in enumerate(_task_order(list(mine.values())), 1):
        row = mine[task]
        seconds += float(row["seconds"] or 0.0)
        status = row["status"]
        lines = [f"{status.upper()}: {row['message']}" if row["message"] else status.upper()]
        if status == NEEDS_GPU:
            score = top = 0.0
            lines.append(
                "Not graded on this machine, so not scored: its cases run only on a Hopper GPU (H100, H200). "
                "Your instructor grades it there."
            )
        else:
            score, top = float(row["score"]), float(row["max_score"])
            graded += 1
            passed += status == PASS
        if row.get("speed_tier"):
            if row.get("time_us") is None:  # a gradebook edited by hand: the tier, without a time
                lines.append(f"speed: {row['speed_tier']}")
            else:
                lines.append(f"speed: {row['speed_tier']}, {row['time_us']:.1f} us a call")
                leaderboard.append({"name": f"{task} (us)", "value": round(float(row["time_us"]), 3), "order": "asc"})
        if row.get("same_file_as"):
            lines.append(f"(the same file as {row['same_file_as']}'s, graded once for both)")
        total += score
        chapter = _chapter(task)
        tests.append(
            {
                "name": task,
                "number": f"{chapter}.{number}" if chapter else str(number),
                "score": round(score, 4),
                "max_score": round(top, 4),
                "status": "passed" if status == PASS else "failed",
                "output": "\n".join(lines),
                "tags": [status] + ([f"chapter {chapter}"] if chapter else []),
                "visibility": visibility,
            }
        )
    waiting = len(mine) - graded
    summary = f"{passed} of {graded} tasks graded here pass"
    if waiting:
        summary += f"; {waiting} need a Hopper GPU and are not scored here"
    first = next(iter(mine.values()))
    results = {
        "score": round(total, 4),
        "execution_time": int(round(seconds)),
        "output": f"{summary}. Graded by course_lib (seed {first['seed']}); each test's output is the grader's "
        "report on that task.",
        "visibility": visibility,
        "stdout_visibility": "hidden",
        "tests": tests,
    }
    if leaderboard:
        results["leaderboard"] = leaderboard
    return results


GRADESCOPE_FILE, GRADESCOPE_FOLDER = Path("results.json"), Path("gradescope_results")  # --out's defaults


def export_gradescope(rows: list[dict], out: Path | None, learner: str | None, visibility: str) -> Exported:
    """One learner's results.json at ``out`` (a file; default results.json); with several learners and
    no ``learner``, one ``out/<learner>/results.json`` each (``out`` a folder; default gradescope_results)."""
    learners = _learners(rows)
    if learner is not None or len(learners) == 1:
        out = GRADESCOPE_FILE if out is None else out
        name = learner if learner is not None else learners[0]
        results = gradescope_results(rows, name, visibility)
        path = out / "results.json" if out.is_dir() else out
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda f: f.write(json.dumps(results, indent=1, ensure_ascii=False) + "\n"))
        return Exported([path], [])
    out = GRADESCOPE_FOLDER if out is None else out
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} is a file: with {len(learners)} learners, --out is a folder (one results.json each)")
    folders: dict[str, str] = {}
    for name in learners:
        folder = _safe_folder(name)
        if folder in folders:  # "a b" and "a_b": the second would overwrite the first
            raise ExportError(
                f"learners {folders[folder]!r} and {name!r} would both be written to {out / folder}: "
                "rename one in the gradebook, or export each with --learner and its own --out"
            )
        folders[folder] = name
    written = []
    for name in learners:
        folder = out / _safe_folder(name)
        folder.mkdir(parents=True, exist_ok=True)
        results = gradescope_results(rows, name, visibility)
        path = folder / "results.json"
        write_atomic(path, lambda f, r=results: f.write(json.dumps(r, indent=1, ensure_ascii=False) + "\n"))
        written.append(path)
    return Exported(written, [])


def _safe_folder(name: str) -> str:
    """A learner's name as one folder name (a room's folder names already are; a gradebook may be edited)."""
    cleaned = "".join(ch if ch.isalnum() or ch in "-_.@" else "_" for ch in name).lstrip(".")
    return cleaned or "_"


# --------------------------------------------------------------------------------------------------
# Canvas


def read_roster(path: Path) -> tuple[list[str], list[dict]]:
    """(identity columns present, student rows) of a Canvas gradebook export: its "Points Possible"
    row and rows without a Canvas ID are left out."""
    if not path.is_file():
        raise ExportError(f"{path} does not exist: give the CSV that Canvas's gradebook export wrote")
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            columns = [c for c in CANVAS_IDENTITY if c in (reader.fieldnames or [])]
            students = [
                {k: (v or "").strip() for k, v in row.items() if k is not None}
                for row in reader
                if (row.get("ID") or "").strip() and (row.get("Student") or "").strip() != "Points Possible"
            ]
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise ExportError(f"{path} cannot be read as CSV ({e})") from None
    if "ID" not in columns:
        raise ExportError(
            f"{path} has no ID column: give Canvas's own gradebook export (Grades, Export, Export Entire Gradebook)"
        )
    return columns, students


def canvas_csv(
    rows: list[dict], roster: Path, match: str = "SIS Login ID", assignment: str | None = None,
    skip_unmatched: bool = False,
) -> tuple[str, list[str]]:  # fmt: skip
    """(the CSV text, notes) for Canvas's gradebook import."""
    columns, students = read_roster(roster)
    if not students:
        raise ExportError(f"{roster} lists no students")
    if match not in students[0]:
        raise ExportError(f"{roster} has no column {match!r} (its columns: {', '.join(students[0])})")
    by_key: dict[str, dict] = {}
    for student in students:
        key = student[match]
        if key:
            by_key.setdefault(key, student)
    learners = _learners(rows)
    unmatched = [name for name in learners if name not in by_key]
    notes = []
    if unmatched and not skip_unmatched:
        raise ExportError(
            f"{len(unmatched)} learner folder(s) match no student's {match!r} in {roster}: "
            f"{', '.join(unmatched[:10])}{' ...' if len(unmatched) > 10 else ''}. Rename the folders, choose "
            "another column with --match, or leave them out with --skip-unmatched"
        )
    if unmatched:
        notes.append(f"left out (no student's {match} is theirs): {', '.join(unmatched)}")
    tasks = _task_order(rows)
    cell = {(r["student_id"], r["assignment"]): r for r in rows}
    header = columns + ([assignment] if assignment else tasks)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    blanks = 0
    for name in learners:
        if name in unmatched:
            continue
        student = by_key[name]
        scores = []
        for task in tasks:
            row = cell.get((name, task))
            if row is None or row["status"] == NEEDS_GPU:  # not graded here: no grade, not a zero
                scores.append(None)
                blanks += 1
            else:
                scores.append(round(float(row["score"]), 4))
        if assignment:
            graded = [s for s in scores if s is not None]
            values = [_number(sum(graded)) if graded else ""]
        else:
            values = ["" if s is None else _number(s) for s in scores]
        writer.writerow([neutralised(student.get(c, "")) for c in columns] + values)
    if blanks:
        notes.append(f"{blanks} cell(s) left blank: tasks this machine could not grade (needs_gpu)")
    return buffer.getvalue(), notes


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def export_canvas(
    rows: list[dict], out: Path, roster: Path, match: str, assignment: str | None, skip_unmatched: bool
) -> Exported:
    text, notes = canvas_csv(rows, roster, match, assignment, skip_unmatched)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, lambda f: f.write(text))
    return Exported([out], notes)


# --------------------------------------------------------------------------------------------------
# nbgrader


def export_nbgrader(rows: list[dict], db_url: str, assignment: str) -> Exported:
    """The rows into nbgrader's gradebook at ``db_url`` (``sqlite:///gradebook.db``) as ``assignment``."""
    try:
        from nbgrader.api import Grade, Gradebook, MissingEntry
        from nbgrader.utils import parse_utc
    except ImportError:
        raise ExportError("the nbgrader export needs nbgrader: pip install nbgrader") from None
    tasks = _task_order(rows)
    tops = {}
    for row in rows:
        tops[row["assignment"]] = max(tops.get(row["assignment"], 0.0), float(row["max_score"]))
    cell = {(r["student_id"], r["assignment"]): r for r in rows}
    notes = []
    blank = 0
    # a new gradebook is made by nbgrader's `alembic` command, installed beside this Python: found even
    # where the virtual environment is not activated
    path = os.environ.get("PATH", "")
    os.environ["PATH"] = sysconfig.get_path("scripts") + os.pathsep + path
    try:
        with Gradebook(db_url) as gb:
            gb.update_or_create_assignment(assignment)
            gb.update_or_create_notebook(NBGRADER_NOTEBOOK, assignment)
            for task in tasks:
                gb.update_or_create_grade_cell(
                    task, NBGRADER_NOTEBOOK, assignment, max_score=tops[task], cell_type="code"
                )
            for learner in _learners(rows):
                gb.update_or_create_student(learner)
                # the hand-in's time: the newest of the learner's files (their modification times)
                times = [r.get("submitted") or "" for r in rows if r["student_id"] == learner]
                when = {"timestamp": max(times)} if any(times) else {}
                try:
                    submission = gb.find_submission(assignment, learner)
                except MissingEntry:
                    with warnings.catch_warnings():  # nbgrader's own autoflush notices, not the learner's
                        warnings.filterwarnings("ignore", message=".*not in session.*")
                        gb.add_submission(assignment, learner, **when)
                else:
                    if when:
                        submission.timestamp = parse_utc(when["timestamp"])
                notebook = gb.find_submission_notebook(NBGRADER_NOTEBOOK, assignment, learner)
                have = {grade.cell_id for grade in notebook.grades}
                for grade_cell in notebook.notebook.grade_cells:  # a task added since the last export
                    if grade_cell.id not in have:
                        gb.db.add(Grade(cell_id=grade_cell.id, notebook=notebook))
                gb.db.commit()
                for task in tasks:
                    row = cell.get((learner, task))
                    grade = gb.find_grade(task, NBGRADER_NOTEBOOK, assignment, learner)
                    if row is None or row["status"] == NEEDS_GPU:  # not graded here: no score, not 0
                        grade.auto_score, grade.needs_manual_grade = None, True
                        blank += 1
                    else:
                        grade.auto_score, grade.needs_manual_grade = float(row["score"]), False
                gb.db.commit()
    except ExportError:
        raise
    except Exception as e:  # the database's own complaint (a locked file, another schema)
        raise ExportError(f"nbgrader's gradebook at {db_url} refused the grades ({type(e).__name__}: {e})") from None
    finally:
        os.environ["PATH"] = path
    if blank:
        notes.append(f"{blank} grade(s) left without a score: tasks this machine could not grade (needs_gpu)")
    return Exported([Path(db_url.removeprefix("sqlite:///"))] if db_url.startswith("sqlite:///") else [], notes)
