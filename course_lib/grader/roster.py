"""Grade a whole room: ``python -m course_lib grade ROOM --out grades.csv``.

``ROOM/<learner>/<task>.py``: every folder of ROOM whose name does not start with a dot is a learner
(sorted by name). Each (learner, task) pair gives exactly one row, in learner then course task order.

Before anything is scheduled, each file is looked at here: a missing file, an empty one (0 bytes or
only whitespace), one over 1 MiB, one with NUL bytes, one that is not UTF-8, and a symbolic link or
anything else that is not a regular file (also every file of a learner folder that is itself a
symbolic link) are rows with a status of their own (``missing``, ``empty``, ``too_large``, ``binary``,
``not_utf8``, ``not_a_file``) and score 0; they never reach the grader. All the other pairs go to
one worker pool (``grade_jobs``, called once), so a slow learner does not hold up the room.

Scoring is all-or-nothing: ``max_score`` is the task's points (``TaskSpec.points``, 1 by default),
``score = raw_score = points`` for a pass and 0 for anything else. Partial credit by cases passed is
left out on purpose: the cases are not of equal weight (one tiny case and one misaligned case test
different things), and a kernel that fails one case is a wrong kernel.

Speed points (``speed_points=True``, GPU mode only; tasks with speed tiers, ``TaskSpec.speed_tiers``):
a passing result's tier (``grader.tiers``: decided in the grader's process by its own clock) adds
``TIER_POINTS[tier]`` (works 0, fast 0.5, expert 1); ``max_score`` grows by ``SPEED_POINTS`` for those
tasks. The tier, the time per call and its fraction of the roofline are kept in the ``speed_tier``,
``time_us`` and ``roofline_fraction`` columns, so ``resume`` can score and rank kept rows without timing
them again.

Outputs (each written atomically: a temporary file, then ``os.replace``; an error while writing one
leaves the file that was there before, and the files already written stay):
- ``out`` (CSV) and ``out`` with the suffix ``.json`` (the same rows); JSON only when ``out`` ends in
  ``.json``;
- ``<out stem>.summary.md``: per task the pass rate, mean score and most common failure; a count per
  status; on a GPU a leaderboard per task; the total time and the seed.

``resume=True`` reads the existing output and keeps the rows of pairs whose file hash and seed are
both unchanged (it compares nothing else: after changing hidden cases or the time limit, grade
without it). Without a seed, it reuses the seed the existing file records (the most common one).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import datetime
import hashlib
import io
import json
import os
import re
import stat
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from .. import runtime, sources
from .. import tasks as course_tasks
from . import CRASH, FAIL, NEEDS_GPU, PASS, TIMEOUT, TODO, Job, TaskResult, grade_jobs, sandbox, trace

__all__ = [
    "BAD_FILE_STATUSES",
    "COLUMNS",
    "FileCheck",
    "Room",
    "UsageError",
    "check_file",
    "find_learners",
    "grade_room",
    "normalize_message",
    "select_tasks",
    "speed_bonus",
]

MAX_FILE_BYTES = 1 << 20  # 1 MiB: no exercise file is anywhere near it
MISSING, EMPTY, TOO_LARGE, NOT_A_FILE = "missing", "empty", "too_large", "not_a_file"
BINARY, NOT_UTF8 = "binary", "not_utf8"
BAD_FILE_STATUSES = (MISSING, EMPTY, TOO_LARGE, BINARY, NOT_UTF8, NOT_A_FILE)
GRADED_STATUSES = (PASS, FAIL, TODO, TIMEOUT, CRASH, NEEDS_GPU)  # needs_gpu: scores 0; grade it on a GPU
# what "most common failure" looks at: wrong work, not work that was never started or handed in
FAILURE_STATUSES = (FAIL, CRASH, TIMEOUT, TOO_LARGE, BINARY, NOT_UTF8, NOT_A_FILE)

SPEED_POINTS = 1.0  # the most a task's speed can add
TIER_POINTS = {"works": 0.0, "fast": 0.5 * SPEED_POINTS, "expert": SPEED_POINTS}

# nbgrader's export columns first (student_id, assignment, timestamp, raw_score, score, max_score)
COLUMNS = [
    "student_id",
    "assignment",
    "timestamp",
    "raw_score",
    "score",
    "max_score",
    "status",
    "seconds",
    "message",
    "seed",
    "sha256",
    "cases_passed",
    "cases_total",
    "roofline_fraction",
    "speed_tier",
    "time_us",
    "sandboxed",
    # for a file byte-identical to another learner's file of the same task: that learner, whose file was
    # graded once for both (its verdict is this row's; this row's seconds are 0: nothing ran for it)
    "same_file_as",
    # the graded file's modification time (UTC): when it was handed in, where the room kept that (an
    # unpacked zip keeps it; a copy made without -p does not). ``timestamp`` is when it was graded
    "submitted",
]
_INT_COLUMNS = ("seed", "cases_passed", "cases_total")
_FLOAT_COLUMNS = ("raw_score", "score", "max_score", "seconds")


class UsageError(Exception):
    """The command was asked for something it cannot do (no such folder, no learners, no such task)."""


# --------------------------------------------------------------------------------------------------
# the room and its files


def find_learners(root: Path) -> list[str]:
    """The learner folders of ``root`` (not hidden, not __pycache__), sorted by name."""
    if not root.is_dir():
        raise UsageError(f"{root} is not a folder of submissions")
    names = sorted(
        entry.name
        for entry in os.scandir(root)
        if not entry.name.startswith(".") and entry.name != "__pycache__" and entry.is_dir()
    )
    if not names:
        raise UsageError(f"{root} holds no learner folders (expected {root}/<learner>/<task>.py)")
    return names


def select_tasks(names: Iterable[str] | str | None) -> list[str]:
    """The course's tasks, in course order; only ``names`` (repeated, or comma lists) when given."""
    every = [t.name for t in course_tasks.all_tasks()]
    if isinstance(names, str):
        names = [names]
    wanted = [n.strip() for item in (names or []) for n in item.split(",") if n.strip()]
    if not wanted:
        return every
    for name in wanted:
        try:
            course_tasks.get(name)
        except KeyError as e:
            raise UsageError(str(e.args[0])) from None
    return [n for n in every if n in wanted]


@dataclass(frozen=True)
class FileCheck:
    status: str | None  # None: the file can be graded; otherwise a BAD_FILE_STATUSES entry
    message: str
    sha256: str  # of the file's bytes; "" when there are none to hash
    modified: str = ""  # the file's modification time, UTC (ISO 8601): the hand-in's own time where kept


def _utc(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_file(path: Path, learner: str, task: str) -> FileCheck:
    """Whether ``path`` (``<learner>/<task>.py``) is a file the grader can be given."""
    where = f"{learner}/{task}.py"
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return FileCheck(MISSING, f"no {task}.py in {learner}/", "")
    except OSError as e:
        return FileCheck(NOT_A_FILE, f"{where} cannot be read: {e.strerror}", "")
    if stat.S_ISLNK(info.st_mode):
        return FileCheck(NOT_A_FILE, f"{where} is a symbolic link: hand in the file itself", "")
    if not stat.S_ISREG(info.st_mode):
        return FileCheck(NOT_A_FILE, f"{where} is not a regular file", "")
    modified = _utc(info.st_mtime)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        return FileCheck(NOT_A_FILE, f"{where} cannot be read: {e.strerror}", "")
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # replaced since the lstat
            return FileCheck(NOT_A_FILE, f"{where} is not a regular file", "")
        digest = hashlib.sha256()
        data = f.read(MAX_FILE_BYTES + 1)
        digest.update(data)
        size = len(data)
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    sha = digest.hexdigest()
    if size > MAX_FILE_BYTES:
        return FileCheck(TOO_LARGE, f"{where} is {size / 2**20:.1f} MiB; the limit is 1 MiB", sha, modified)
    if not data.strip():
        what = "is empty" if not data else "holds only whitespace"
        return FileCheck(EMPTY, f"{where} {what}", sha, modified)
    nul = data.find(b"\0")
    if nul >= 0:
        return FileCheck(BINARY, f"{where} holds NUL bytes (byte {nul}): not a Python source file", sha, modified)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return FileCheck(NOT_UTF8, f"{where} is not valid UTF-8 (byte {e.start}): save it as UTF-8", sha, modified)
    return FileCheck(None, "", sha, modified)


# --------------------------------------------------------------------------------------------------
# scores, speed and failures


def _points(task: str) -> float:
    return float(getattr(course_tasks.get(task), "points", 1.0))


def _speed_eligible(task: str) -> bool:
    return course_tasks.get(task).speed_tiers() is not None


def speed_bonus(tier: str | None) -> float:
    """Speed points for a passing kernel's tier (see the module's doc); none for no tier."""
    return TIER_POINTS.get(tier or "", 0.0)


def score(task: str, status: str, tier: str | None, speed_points: bool) -> tuple[float, float, float]:
    """(raw_score, score, max_score) of one row."""
    points = _points(task)
    extra = speed_points and _speed_eligible(task)
    raw = points if status == PASS else 0.0
    if extra and status == PASS:
        raw += speed_bonus(tier)
    top = points + (SPEED_POINTS if extra else 0.0)
    return round(raw, 4), round(raw, 4), round(top, 4)


_QUOTED = re.compile(r"(?<![A-Za-z0-9])'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`")
# a number on its own, not the digits of a word (float16, sm_90, x1 stay as they are)
_NUMBER = re.compile(r"(?<![A-Za-z_\d.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def normalize_message(message: str, learner: str = "") -> str:
    """A failure message with what varies between learners taken out (the learner's folder, quoted
    values, numbers), so that "12 of 1000 elements" and "13 of 1000 elements" count as one."""
    text = message
    if learner:
        text = re.sub(r"(?:[^\s'\"`(]*/)?" + re.escape(learner) + "/", "<learner>/", text)
    text = _QUOTED.sub("'…'", text)
    text = _NUMBER.sub("N", text)
    return re.sub(r"\s+", " ", text).strip()


def common_failures(rows: list[dict]) -> list[tuple[int, str, dict]]:
    """(count, normalized message, first row) per kind of failure, most common first."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        if row["status"] in FAILURE_STATUSES:
            groups.setdefault(normalize_message(row["message"], row["student_id"]), []).append(row)
    ranked = [(len(members), key, members[0]) for key, members in groups.items()]
    return sorted(ranked, key=lambda item: -item[0])


# --------------------------------------------------------------------------------------------------
# rows and files


def _timestamp() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def make_row(
    learner: str,
    task: str,
    status: str,
    message: str,
    *,
    timestamp: str,
    seed: int,
    sha256: str = "",
    seconds: float = 0.0,
    cases_passed: int = 0,
    cases_total: int = 0,
    fraction: float | None = None,
    tier: str = "",
    us: float | None = None,
    speed_points: bool = False,
    sandboxed: bool | None = None,
    same_file_as: str = "",
    submitted: str = "",
) -> dict:
    raw, final, top = score(task, status, tier, speed_points)
    row = {
        "student_id": learner,
        "assignment": task,
        "timestamp": timestamp,
        "raw_score": raw,
        "score": final,
        "max_score": top,
        "status": status,
        "seconds": round(float(seconds), 3),
        "message": _one_line(message),
        "seed": int(seed),
        "sha256": sha256,
        "cases_passed": int(cases_passed),
        "cases_total": int(cases_total),
        "roofline_fraction": None if fraction is None else round(float(fraction), 4),
        "speed_tier": tier or "",
        "time_us": None if us is None else round(float(us), 3),
        # whether the learner's code ran in the operating-system sandbox ("" for a file never run)
        "sandboxed": "" if sandboxed is None else ("yes" if sandboxed else "no"),
        "same_file_as": same_file_as,
        "submitted": submitted,
    }
    return row


def _rescored(row: dict, speed_points: bool) -> dict:
    raw, final, top = score(row["assignment"], row["status"], row.get("speed_tier"), speed_points)
    return {**row, "raw_score": raw, "score": final, "max_score": top}


def _typed(row: dict) -> dict:
    """A row read back from CSV (strings) or JSON, with the types this module writes."""
    out = {}
    for key in COLUMNS:
        value = row.get(key, "")
        if key in _INT_COLUMNS:
            value = int(value) if value not in ("", None) else 0
        elif key in _FLOAT_COLUMNS:
            value = float(value) if value not in ("", None) else 0.0
        elif key in ("roofline_fraction", "time_us"):
            value = float(value) if value not in ("", None) else None
        else:
            value = _unneutralised("" if value is None else str(value))
        out[key] = value
    return out


def read_rows(path: Path) -> list[dict]:
    """The rows of a gradebook this module wrote (CSV or JSON)."""
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
            raise ValueError("not a list of rows")
    else:
        with path.open(newline="", encoding="utf-8") as f:
            data = list(csv.DictReader(f))
    needed = ("student_id", "assignment", "sha256", "seed", "status")
    missing = sorted({c for row in data for c in needed if c not in row})
    if missing:
        raise ValueError(f"no column {', '.join(missing)}")
    return [_typed(row) for row in data]


# A spreadsheet reads a cell that starts with one of these as a formula (=HYPERLINK(...) in a learner's
# folder name, say): such a cell is written with a leading apostrophe, which the spreadsheet shows as text.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralised(value):
    """A text cell a spreadsheet will not run: a leading apostrophe before a formula's first character."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _unneutralised(value: str) -> str:
    return value[1:] if value.startswith("'") and value[1:].startswith(FORMULA_STARTS) else value


def _csv_text(rows: list[dict], f) -> None:
    writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row.get(k) is None else neutralised(row[k]) for k in COLUMNS})


def _json_text(rows: list[dict], f) -> None:
    json.dump(rows, f, indent=1, ensure_ascii=False)
    f.write("\n")


def write_atomic(path: Path, write: Callable) -> None:
    """Write ``path`` through ``write(file)`` into a temporary file beside it, then move it into
    place: an error on the way leaves whatever ``path`` held before, and no temporary file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode) if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def output_paths(out: Path) -> tuple[Path | None, Path, Path]:
    """(CSV or None, JSON, summary) for ``--out``."""
    if out.suffix == ".json":
        return None, out, out.with_name(out.stem + ".summary.md")
    return (
        out,
        out.with_suffix(".json") if out.suffix else out.with_name(out.name + ".json"),
        out.with_name(out.stem + ".summary.md"),
    )


# --------------------------------------------------------------------------------------------------
# the summary


def _clip(text: str, limit: int) -> str:
    text = _one_line(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _md(text: str, limit: int = 160) -> str:
    return neutralised(_clip(text, limit).replace("|", "\\|"))


def _num(x: float) -> str:
    return f"{x:g}"


@dataclass
class TaskStats:
    task: str
    learners: int
    passed: int
    mean_score: float
    max_score: float
    failures: list[tuple[int, str, dict]]
    statuses: Counter


def task_stats(rows: list[dict], task: str) -> TaskStats:
    mine = [r for r in rows if r["assignment"] == task]
    n = len(mine)
    return TaskStats(
        task=task,
        learners=n,
        passed=sum(r["status"] == PASS for r in mine),
        mean_score=sum(r["score"] for r in mine) / n if n else 0.0,
        max_score=max((r["max_score"] for r in mine), default=0.0),
        failures=common_failures(mine),
        statuses=Counter(r["status"] for r in mine),
    )


def leaderboard(rows: list[dict], task: str) -> list[tuple[str, float, str, float | None]]:
    """(learner, microseconds a call, tier, roofline fraction or None) of the passing rows that were
    timed, fastest first (the grader's clock, on the task's timed case)."""
    board = [
        (r["student_id"], float(r["time_us"]), r.get("speed_tier") or "", r["roofline_fraction"])
        for r in rows
        if r["assignment"] == task and r["status"] == PASS and r.get("time_us") is not None
    ]
    return sorted(board, key=lambda item: (item[1], item[0]))


# --------------------------------------------------------------------------------------------------
# grading a room


@dataclass
class Room:
    root: Path
    learners: list[str]
    tasks: list[str]  # the tasks graded this run
    rows: list[dict]
    seed: int
    timestamp: str
    seconds: float = 0.0
    results: dict[tuple[str, str], TaskResult] = field(default_factory=dict)  # graded this run
    kept: set = field(default_factory=set)  # (learner, task) pairs whose row came from the last run
    written: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    speed_points: bool = False
    sandboxing: str = ""  # how the learners' code ran: in the sandbox (which), or without it
    # rows of this run given the verdict of a byte-identical file of the same task graded once
    copied: set = field(default_factory=set)  # (learner, task) pairs

    @property
    def graded(self) -> int:
        return len(self.results)

    def rows_of(self, learner: str) -> list[dict]:
        return [r for r in self.rows if r["student_id"] == learner]

    def learner_lines(self) -> list[str]:
        lines = []
        for learner in self.learners:
            mine = [r for r in self.rows_of(learner) if r["assignment"] in self.tasks]
            passed = sum(r["status"] == PASS for r in mine)
            total, top = sum(r["score"] for r in mine), sum(r["max_score"] for r in mine)
            lines.append(f"{learner}: {passed}/{len(mine)} tasks pass, score {_num(total)}/{_num(top)}")
        return lines

    def short_summary(self) -> str:
        width = max(len(t) for t in self.tasks)
        lines = []
        for task in self.tasks:
            s = task_stats(self.rows, task)
            line = f"{task:<{width}}  {s.passed}/{s.learners} pass, mean {s.mean_score:.2f}/{_num(s.max_score)}"
            if s.failures:
                count, _, example = s.failures[0]
                line += f"; most common failure ({count}x): {_clip(example['message'], 100)}"
            lines.append(line)
        counts = Counter(r["status"] for r in self.rows if r["assignment"] in self.tasks)
        lines.append("statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=_status_order)))
        files = ", ".join(str(p) for p in self.written)
        kept = f", {len(self.kept)} kept from the last run" if self.kept else ""
        lines.append(
            f"wrote {len(self.rows)} rows to {files} ({len(self.learners)} learners, {self.graded} graded now"
            f"{self.copies_said()}{kept}; {self.seconds:.1f} s, seed {self.seed})"
        )
        return "\n".join(lines)

    def copies_said(self) -> str:
        """How many of the rows graded now came from a distinct file ("" when all did)."""
        if not self.copied:
            return ""
        n = len(self.copied)
        return f" from {self.graded - n} distinct files: {n} byte-identical copies took their verdict"

    def summary_markdown(self) -> str:
        rows = [r for r in self.rows if r["assignment"] in self.tasks]
        out = [
            f"# Grades: {self.root.name}",
            "",
            f"- graded {self.timestamp}, {len(self.learners)} learners x {len(self.tasks)} tasks = {len(rows)} rows "
            f"({self.graded} graded now{self.copies_said()}, {len(self.kept)} kept from the last run)",
            f"- seed {self.seed} (`--seed {self.seed}` grades with the same inputs again)",
            *([f"- {self.sandboxing}"] if self.sandboxing else []),
            f"- total time {self.seconds:.1f} s; grading time summed over the jobs "
            f"{sum(r.seconds for k, r in self.results.items() if k not in self.copied):.1f} s",
            "- scoring: all-or-nothing, the task's points for a pass"
            + (
                f"; speed points up to {_num(SPEED_POINTS)} per task by speed tier: works 0, fast "
                f"{_num(TIER_POINTS['fast'])}, expert {_num(TIER_POINTS['expert'])}"
                if self.speed_points
                else ""
            ),
            "",
            "## Tasks",
            "",
            "| task | pass | pass rate | mean score | most common failure | how many | example |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for task in self.tasks:
            s = task_stats(rows, task)
            rate = f"{s.passed / s.learners:.0%}" if s.learners else "-"
            if s.failures:
                count, key, example = s.failures[0]
                failure = f"`{_md(key, 100)}`"
                example_text = _md(f"{example['student_id']}: {example['message']}", 200)
            else:
                count, failure, example_text = 0, "-", ""
            out.append(
                f"| {task} | {s.passed}/{s.learners} | {rate} | {s.mean_score:.2f} / {_num(s.max_score)} | "
                f"{failure} | {count or ''} | {example_text} |"
            )
        statuses = sorted({r["status"] for r in rows}, key=lambda k: _status_order((k, 0)))
        out += ["", "## Statuses", "", "| task | " + " | ".join(statuses) + " |", "| --- |" + " --- |" * len(statuses)]
        for task in self.tasks:
            c = Counter(r["status"] for r in rows if r["assignment"] == task)
            out.append(f"| {task} | " + " | ".join(str(c.get(k, 0)) for k in statuses) + " |")
        total = Counter(r["status"] for r in rows)
        out.append("| **all** | " + " | ".join(f"**{total.get(k, 0)}**" for k in statuses) + " |")
        more = [(task, task_stats(rows, task).failures[1:4]) for task in self.tasks]
        more = [(task, f) for task, f in more if f]
        if more:
            out += ["", "## Other failures", ""]
            for task, failures in more:
                for count, key, example in failures:
                    out.append(f"- {task}, {count}x: `{_md(key, 100)}` (e.g. {_md(example['student_id'])})")
        boards = [(task, leaderboard(rows, task)) for task in self.tasks]
        boards = [(task, board) for task, board in boards if board]
        if boards:
            out += [
                "", "## Leaderboards", "",
                "Passing kernels on the GPU, fastest first: time per call of the task's timed case, by the "
                "grader's clock (`grader.tiers`).",
            ]  # fmt: skip
            for task, board in boards:
                out += [
                    "",
                    f"### {task}",
                    "",
                    "| # | learner | time | tier | roofline |",
                    "| --- | --- | --- | --- | --- |",
                ]
                for rank, (learner, us, tier, fraction) in enumerate(board, 1):
                    roof = f"{fraction:.0%}" if fraction is not None else "-"
                    out.append(f"| {rank} | {_md(learner)} | {us:.1f} us | {tier or '-'} | {roof} |")
        out += ["", "## Learners", "", "| learner | pass | score |", "| --- | --- | --- |"]
        for learner in self.learners:
            mine = [r for r in rows if r["student_id"] == learner]
            out.append(
                f"| {_md(learner)} | {sum(r['status'] == PASS for r in mine)}/{len(mine)} | "
                f"{_num(sum(r['score'] for r in mine))} / {_num(sum(r['max_score'] for r in mine))} |"
            )
        if self.notes:
            out += ["", "## Notes", ""] + [f"- {note}" for note in self.notes]
        return "\n".join(out) + "\n"


_ORDER = GRADED_STATUSES + BAD_FILE_STATUSES


def _status_order(item) -> tuple:
    key = item[0]
    return (_ORDER.index(key), "") if key in _ORDER else (len(_ORDER), key)


def _load_hidden(hidden) -> str | None:
    if hidden is None:
        return None
    path = Path(hidden).expanduser().resolve()
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"cannot read the hidden cases file {path}: {e.strerror}") from None
    except ValueError as e:
        raise UsageError(f"the hidden cases file {path} is not JSON: {e}") from None
    if not isinstance(table, dict):
        raise UsageError(f"the hidden cases file {path} must hold an object: {{task: [case, ...]}}")
    try:
        course_tasks.check_hidden(str(path))
    except course_tasks.HiddenCaseError as e:
        raise UsageError(f"the hidden cases file {path}: {e}") from None
    return str(path)


def _solutions_pass_hidden(path: str, names: list[str], seed: int, note) -> None:
    """The course's solutions graded on the hidden cases of the tasks to grade, before any learner (values
    only, no timing): a case that the solution itself cannot pass (a head dim its kernel does not take,
    say) would fail every learner of the room. UsageError naming it; a note where there are no solutions."""
    from . import grade_task

    with open(path) as f:
        table = json.load(f)
    wanted = [name for name in names if table.get(name)]
    if not wanted:
        return
    if not all(sources.solution_present(name) for name in wanted):
        note("the hidden cases were not tried on the course's solutions (no solutions/ here)")
        return
    for name in wanted:
        result = grade_task(name, "solutions", seed=seed, hidden=path, sandboxed=False, perf=False)
        if result.status not in (PASS, NEEDS_GPU):
            raise UsageError(
                f"the course's solution of {name} does not pass the hidden cases in {path} (seed {seed}), so "
                f"no learner could: {result.summary}"
            )
    note(f"the hidden cases of {', '.join(wanted)}: the course's solutions pass them")


def _previous(out: Path, csv_path: Path | None, json_path: Path, log) -> tuple[dict, Path | None]:
    """The last run's rows by (learner, task), and the file they came from."""
    source = csv_path if csv_path is not None and csv_path.exists() else json_path if json_path.exists() else None
    if source is None:
        log(f"resume: no {out} yet: grading every file")
        return {}, None
    try:
        rows = read_rows(source)
    except (OSError, ValueError, csv.Error) as e:
        log(f"resume: {source} cannot be read as grades ({e}): grading every file")
        return {}, None
    return {(r["student_id"], r["assignment"]): r for r in rows}, source


def grade_room(
    root,
    out="grades.csv",
    task_names: Iterable[str] | str | None = None,
    *,
    seed: int | None = None,
    timeout: float | None = None,
    workers: int | None = None,
    hidden=None,
    resume: bool = False,
    speed_points: bool = False,
    unsandboxed: bool = False,
    progress: bool | None = None,
    log: Callable[[str], None] = print,
    grade: Callable | None = None,
    copies_once: bool = True,
) -> Room:
    """Grade every learner of ``root``; write the CSV/JSON rows and the summary; return the Room.

    Each learner's code runs inside the operating-system sandbox (``sandbox``); where none can be
    made this refuses (UsageError, saying what to install) unless ``unsandboxed`` says to grade
    without it, and every row records which way it was graded.

    Byte-identical files of one task are graded once and each copy gets that verdict (``copies_once``;
    False grades every file): the verdict is a function of the file's bytes, the seed and the hidden
    cases, which the whole room shares (the worker is given a copy of the bytes, never the learner's
    folder), and untouched stubs are common. A copy whose file changed meanwhile is graded itself, and
    so is a copy of a file that timed out or crashed (the machine's load may have decided those).

    ``grade`` stands in for ``grade_jobs`` (tests). ``progress``: a tqdm bar on stderr (None: when
    stderr is a terminal). ``log`` gets the notes said on the way (resume, speed points). Raises
    UsageError for what the instructor must fix; a learner's file never makes it raise."""
    start = time.perf_counter()
    grade = grade or grade_jobs
    root = Path(root).expanduser().resolve()
    course = runtime.course_root()
    if course == root or root in course.parents:
        # the solutions set each task's time limits and speed bars: a learner's copy must not
        raise UsageError(
            f"the course folder found here, {course}, is inside the room {root} (a learner's copy of the "
            "course): its solutions/ would set the time limits and speed bars. Run grade from your own "
            "course folder, or set COURSE_ROOT to it"
        )
    learners = find_learners(root)
    names = select_tasks(task_names)
    hidden_path = _load_hidden(hidden)
    available = sandbox.available()
    if not unsandboxed and not available.ok:
        raise UsageError(
            f"cannot grade a room safely here: {available.reason}. Each learner's code must run in a "
            "sandbox, or one submission can read the solutions and the hidden cases, and change other "
            "learners' files and grades. Install bubblewrap, or pass --unsandboxed to grade anyway "
            "(only when you trust every file in the room; the gradebook will say so)"
        )
    out = Path(out).expanduser()
    csv_path, json_path, summary_path = output_paths(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot write {out}: {e.strerror}") from None
    if not os.access(out.parent, os.W_OK):
        raise UsageError(f"cannot write {out}: {out.parent} is not writable")
    for path in (csv_path, json_path, summary_path):
        if path is not None and path.is_dir():
            raise UsageError(f"cannot write {path}: it is a folder")
    notes: list[str] = []

    def note(text: str) -> None:
        notes.append(text)
        log(text)

    previous, previous_path = ({}, None)
    if resume:
        previous, previous_path = _previous(out, csv_path, json_path, note)
        if seed is None and previous:
            seeds = Counter(r["seed"] for r in previous.values() if r["status"] in GRADED_STATUSES)
            if seeds:
                seed = seeds.most_common(1)[0][0]
                note(f"resume: no --seed given: reusing seed {seed}, recorded in {previous_path}")
    if seed is None:
        import secrets

        seed = secrets.randbelow(2**31)
    if hidden_path is not None:
        _solutions_pass_hidden(hidden_path, names, seed, note)
    if unsandboxed:
        sandboxing = (
            "graded WITHOUT the sandbox (--unsandboxed): each learner's code could read and change what "
            "the grader's user can, other learners' files included; the rows say sandboxed=no"
        )
        log(sandboxing)
    else:
        sandboxing = f"graded in the sandbox: {available.tool}, one per job (own files only, no network, no peers)"
    gpu = runtime.is_gpu()
    if speed_points and not gpu:
        note("--speed-points needs a GPU (speed is not measured in the interpreter): no speed points given")
        speed_points = False
    # workers None: the pool decides (on a GPU machine ``jobs_per_gpu()`` jobs share each GPU; timing
    # windows take it alone). One job per GPU, as this once was, graded a room of 40 x 22 on the H200 at
    # about one job every 15 s: 14 in the first 222 s (2026-12-03, results/grader_h200/speed_2026-12-03_room)
    stamp = _timestamp()
    room = Room(root, learners, names, [], seed, stamp, notes=notes, speed_points=speed_points, sandboxing=sandboxing)

    # every pair is decided here: a row now (bad file, kept), or a job for the pool
    decided: dict[tuple[str, str], dict] = {}
    jobs: list[Job] = []
    hashes: dict[tuple[str, str], str] = {}
    handed_in: dict[tuple[str, str], str] = {}  # the files' modification times
    for learner in learners:
        folder = root / learner
        linked = folder.is_symlink()
        for task in names:
            key = (learner, task)
            if linked:
                check = FileCheck(NOT_A_FILE, f"{learner}/ is a symbolic link, not a folder: hand in the files", "")
            else:
                check = check_file(folder / f"{task}.py", learner, task)
            if check.status is not None:
                decided[key] = make_row(learner, task, check.status, check.message, timestamp=stamp, seed=seed,
                                        sha256=check.sha256, submitted=check.modified)  # fmt: skip
                continue
            old = previous.get(key)
            # a needs_gpu row is graded again: this run may have the GPU the last one lacked
            kept = old and old["status"] in GRADED_STATUSES and old["status"] != NEEDS_GPU
            if kept and old["sha256"] == check.sha256 and old["seed"] == seed:
                row = _rescored(old, speed_points)
                other = row.get("same_file_as") or ""
                if other and (
                    other not in learners
                    or (root / other).is_symlink()  # a linked folder is never read (NOT_A_FILE above)
                    or check_file(root / other / f"{task}.py", other, task).sha256 != check.sha256
                ):
                    row["same_file_as"] = ""  # that learner's file changed since: no longer the same file
                decided[key] = row
                room.kept.add(key)
                continue
            hashes[key] = check.sha256
            handed_in[key] = check.modified
            jobs.append(Job(learner=learner, task=task, source=folder))
    if resume and previous:
        note(f"resume: {len(room.kept)} rows kept from {previous_path} (same file and seed), {len(jobs)} to grade")

    # one job per distinct file of a task; the copies wait for its verdict
    first: dict[tuple[str, str], Job] = {}  # (task, sha256) -> the job graded
    copies: dict[Job, list[Job]] = {}  # a graded job -> its copies
    same_as: dict[tuple[str, str], str] = {}  # a copy's (learner, task) -> the learner whose file was graded
    graded_jobs: list[Job] = []
    for job in jobs:
        same = (job.task, hashes[(job.learner, job.task)])
        if copies_once and same in first:
            copies[first[same]].append(job)
        else:
            first[same] = job
            copies[job] = []
            graded_jobs.append(job)

    show = progress if progress is not None else sys.stderr.isatty()
    with tqdm(
        total=len(jobs), disable=not show, unit="job", desc="grading", file=sys.stderr, dynamic_ncols=True
    ) as bar:

        def on_result(job: Job, result: TaskResult) -> None:  # grade_jobs reports one at a time
            bar.update(1 + len(copies.get(job, ())))

        results = list(grade(
            graded_jobs, seed=seed, workers=workers, timeout=timeout, on_result=on_result, hidden=hidden_path,
            sandboxed=not unsandboxed,
        ))  # fmt: skip
        if len(results) != len(graded_jobs):
            raise RuntimeError(f"the grader gave {len(results)} results for {len(graded_jobs)} jobs")
        verdicts = {(job.learner, job.task): result for job, result in zip(graded_jobs, results)}
        regrade: list[Job] = []
        for job, result in zip(graded_jobs, results):
            for copy in copies[job]:
                key = (copy.learner, copy.task)
                now = check_file(copy.source / f"{copy.task}.py", copy.learner, copy.task)
                # the verdict is shared only for the bytes it was given on both sides, and never a timeout
                # or a crash: those may come from the machine's load or a worker's death, not the file
                shareable = result.status not in (TIMEOUT, CRASH)
                if shareable and result.file_sha256 == hashes[key] == now.sha256 and now.status is None:
                    verdicts[key] = _copied(result, job, copy)
                    room.copied.add(key)
                    same_as[key] = job.learner
                    trace.event("verdict copied", of=copy.task, status=result.status)
                else:
                    regrade.append(copy)
        if regrade:  # changed since read, or a timeout or crash: each graded itself (progress already counted)
            again = list(grade(regrade, seed=seed, workers=workers, timeout=timeout, hidden=hidden_path,
                               sandboxed=not unsandboxed))  # fmt: skip
            if len(again) != len(regrade):
                raise RuntimeError(f"the grader gave {len(again)} results for {len(regrade)} jobs")
            verdicts.update({(job.learner, job.task): result for job, result in zip(regrade, again)})
    results = [verdicts[(job.learner, job.task)] for job in jobs]

    for job, result in zip(jobs, results):
        key = (job.learner, job.task)
        timed = result.status == PASS and result.speed_us is not None
        decided[key] = make_row(
            job.learner, job.task, result.status, result.summary, timestamp=stamp, seed=seed,
            sha256=getattr(result, "file_sha256", "") or hashes[key], seconds=result.seconds,
            cases_passed=result.cases_passed, cases_total=result.cases_total,
            fraction=result.roofline_fraction if timed else None, tier=result.tier if timed else "",
            us=result.speed_us if timed else None, speed_points=speed_points,
            sandboxed=getattr(result, "sandboxed", None), same_file_as=same_as.get(key, ""),
            submitted=handed_in.get(key, ""),
        )  # fmt: skip
        room.results[key] = result

    waiting = sorted({job.task for job, result in zip(jobs, results) if result.status == NEEDS_GPU})
    if waiting:
        note(
            f"{', '.join(waiting)}: needs a Hopper GPU (sm_90) for its cases; here only its structural checks ran "
            "and the rows score 0 (status needs_gpu): grade these tasks again on a Hopper machine"
        )
    # one row per (learner, task); with resume, the last run's rows of tasks not graded now stay
    every = [t.name for t in course_tasks.all_tasks()]
    for learner in learners:
        for task in every:
            key = (learner, task)
            if key in decided:
                room.rows.append(decided[key])
            elif resume and key in previous:
                room.rows.append(_rescored(previous[key], speed_points))
    room.seconds = time.perf_counter() - start

    # the file asked for first; each one that is written stays if a later one fails
    for path, writer in ((csv_path, _csv_text), (json_path, _json_text)):
        if path is not None:
            write_atomic(path, lambda f, w=writer: w(room.rows, f))
            room.written.append(path)
    write_atomic(summary_path, lambda f: f.write(room.summary_markdown()))
    room.written.append(summary_path)
    return room


def _copied(result: TaskResult, graded: Job, copy: Job) -> TaskResult:
    """``graded``'s verdict for ``copy``, a byte-identical file of the same task: the same result, with
    the graded learner's folder replaced by the copy's wherever the report names it."""
    mine, theirs = sources.display(copy.source), sources.display(graded.source)
    # the folder as a whole path or a path's start: never inside a longer name ("room/ada" in "room/adam")
    pattern = re.compile(r"(?<![\w./-])" + re.escape(theirs) + r"(?![\w.-])")

    def moved(text: str) -> str:
        return pattern.sub(lambda _: mine, text)

    out = dataclasses.replace(result, details=[moved(line) for line in result.details])
    out.summary, out.source, out.learner = moved(result.summary), mine, copy.learner
    out.seconds = 0.0  # nothing ran for this file
    return out


def csv_text(rows: list[dict]) -> str:
    """The CSV of ``rows``, as ``grade_room`` writes it."""
    buffer = io.StringIO()
    _csv_text(rows, buffer)
    return buffer.getvalue()
