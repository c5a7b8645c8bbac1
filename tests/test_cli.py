"""The command line, a contract that instructors and CI rely on: list, hint, doctor, grade, and clear
messages (never a traceback) for a task name that does not exist."""

from __future__ import annotations

import csv
import json
import shutil

import pytest
from conftest import ROOT, WRONG, assert_clean, requires_sandbox, task_names

from course_lib import progress, tasks
from course_lib.cli import main as cli_main

TASKS = task_names()


def test_list_shows_every_task_by_chapter(cli):
    run = cli("list")
    assert_clean(run)
    assert run.returncode == 0
    lines = run.stdout.splitlines()
    for spec in tasks.all_tasks():
        row = next(line for line in lines if line.split() and line.split()[0] == spec.name)
        assert "not started" in row and spec.title in row
        chapter_line = max(i for i, line in enumerate(lines[: lines.index(row)]) if line.startswith("chapter"))
        assert lines[chapter_line] == f"chapter {spec.chapter}"


def test_list_keeps_its_columns_whatever_the_status(cli, progress_file):
    """The longest status ("checked here, needs a Hopper GPU") must not push its title out of line."""
    progress_file.write_text(json.dumps({"tasks": {"ws_matmul": {"last_status": "needs_gpu"}}}))
    run = cli("list")
    assert run.returncode == 0
    rows = [line for line in run.stdout.splitlines() if line.startswith("  ")]
    starts = {line.index(spec.title) for spec in tasks.all_tasks() for line in rows if spec.title in line}
    assert len(starts) == 1, run.stdout
    assert "checked here, needs a Hopper GPU" in run.stdout


def test_readme_chapters_table_lists_tasks_in_the_order_list_shows():
    """README's chapters table and ``list`` name each chapter's tasks in one order (the notebook's)."""
    import re

    table = (ROOT / "README.md").read_text().split("## Chapters", 1)[1].split("\n## ", 1)[0]
    order = [t.name for t in tasks.all_tasks()]
    rows = [line for line in table.splitlines() if re.match(r"\| `\d\d_", line)]
    assert rows
    for row in rows:
        chapter = re.match(r"\| `(\d\d)_", row).group(1)
        named = re.findall(r"`([a-z_0-9]+)`", row.rsplit("|", 2)[1])
        assert named == [t.name for t in tasks.all_tasks() if t.chapter == chapter], (row, order)


def main(*args: str) -> tuple[int, str]:
    """``python -m course_lib ARGS`` in this process: (exit code, message of a SystemExit). Any other
    exception escapes, as it would reach the learner as a traceback."""
    try:
        return cli_main(list(args)), ""
    except SystemExit as e:
        return (1, e.code) if isinstance(e.code, str) else (e.code or 0, "")


def test_hints_come_in_order_and_are_recorded(progress_file, capsys):
    hints = tasks.get("vector_add").hints
    assert len(hints) >= 2

    assert main("hint", "vector_add") == (0, "")
    first = capsys.readouterr().out
    assert f"hint 1 of {len(hints)} for vector_add" in first and hints[0] in first
    assert progress.load(progress_file)["tasks"]["vector_add"]["hints_seen"] == 1

    assert main("hint", "vector_add") == (0, "")
    second = capsys.readouterr().out
    assert f"hint 2 of {len(hints)} for vector_add" in second and hints[1] in second
    assert hints[0] not in second
    assert progress.load(progress_file)["tasks"]["vector_add"]["hints_seen"] == 2


def test_hint_past_the_last_points_to_the_solution(progress_file, capsys):
    assert main("hint", "vector_add", "99") == (0, "")
    out = capsys.readouterr().out
    assert "you have seen them all" in out and "solutions/vector_add.py" in out
    assert not progress_file.exists() or "vector_add" not in progress.load(progress_file)["tasks"]


def test_doctor_says_ready_in_cpu_mode(cli):
    run = cli("doctor")
    assert_clean(run)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "CPU mode" in run.stdout
    assert "[FAIL]" not in run.stdout
    assert run.stdout.strip().endswith("Ready for the course.")


def test_unknown_task_gives_a_clear_message(cli):
    run = cli("check", "no_such_task")
    assert_clean(run)
    assert run.returncode != 0
    assert "no task named 'no_such_task'" in run.stderr
    assert "vector_add" in run.stderr  # the message lists the tasks there are


@pytest.mark.parametrize(
    "args",
    [("hint", "no_such_task"), ("grade", str(WRONG), "--task", "no_such_task", "--out", "never-written.csv")],
    ids=["hint", "grade"],
)
def test_unknown_task_gives_a_clear_message_in_every_command(args, progress_file, capsys):
    code, message = main(*args)
    message += capsys.readouterr().err
    assert code != 0
    assert "no task named 'no_such_task'" in message and "vector_add" in message
    assert not (ROOT / "never-written.csv").exists()


SOLVED = ["vector_copy", "vector_add"]  # what alice hands in


@pytest.fixture
def submissions(tmp_path):
    """Two learners: alice solved two tasks, bob handed in a vector_add without a mask."""
    root = tmp_path / "submissions"
    (root / "alice").mkdir(parents=True)
    for task in SOLVED:
        shutil.copy(ROOT / "solutions" / f"{task}.py", root / "alice")
    (root / "bob").mkdir()
    shutil.copy(WRONG / "no_mask" / "vector_add.py", root / "bob")
    (root / ".hidden").mkdir()  # not a learner
    return root


def check_grades(rows: list[dict]) -> None:
    """nbgrader's columns: student_id, assignment (the task), score, max_score; a file not handed in
    is a row of its own ('missing'), never graded."""
    pairs = [(r["student_id"], r["assignment"]) for r in rows]
    assert pairs == [(who, t) for who in ("alice", "bob") for t in TASKS]
    status = {(r["student_id"], r["assignment"]): r["status"] for r in rows}
    assert {t: status["alice", t] for t in TASKS} == {t: "pass" if t in SOLVED else "missing" for t in TASKS}
    assert {t: status["bob", t] for t in TASKS} == {t: "fail" if t == "vector_add" else "missing" for t in TASKS}
    bob_add = next(r for r in rows if r["student_id"] == "bob" and r["assignment"] == "vector_add")
    assert "out-of-bounds access" in bob_add["message"]
    assert float(bob_add["score"]) == 0
    assert {str(r["seed"]) for r in rows} == {"7"}
    alice_add = next(r for r in rows if r["student_id"] == "alice" and r["assignment"] == "vector_add")
    assert int(alice_add["cases_passed"]) == int(alice_add["cases_total"]) > 0
    assert float(alice_add["score"]) == float(alice_add["max_score"]) > 0


@requires_sandbox
def test_grade_a_room_to_csv(cli, submissions, tmp_path):
    out = tmp_path / "grades.csv"
    run = cli("grade", str(submissions), "--out", str(out), "--seed", "7")
    assert_clean(run)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"alice: {len(SOLVED)}/{len(TASKS)} tasks pass" in run.stdout
    assert f"bob: 0/{len(TASKS)} tasks pass" in run.stdout
    assert f"wrote {2 * len(TASKS)} rows to " in run.stdout
    with out.open(newline="") as f:
        check_grades(list(csv.DictReader(f)))


@requires_sandbox
def test_grade_a_room_to_json(submissions, tmp_path, isolated_grader, capsys):
    out = tmp_path / "grades.json"
    assert main("grade", str(submissions), "--out", str(out), "--seed", "7") == (0, "")
    assert f"wrote {2 * len(TASKS)} rows" in capsys.readouterr().out
    check_grades(json.loads(out.read_text()))


def test_check_of_several_tasks_prints_each_line_as_it_is_graded(cli):
    """``check`` of more than one task streams: a line per task as soon as it is graded, numbered, then
    the count; on the CPU it says where speed is graded."""
    run = cli("check", "vector_copy", "vector_add", "--solutions")
    assert_clean(run)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("grading 2 tasks of solutions")
    numbered = [line for line in lines if line.startswith("[")]
    assert [line[:5] for line in numbered] == ["[1/2]", "[2/2]"]
    assert all(" PASS " in line for line in numbered)
    assert "2 of 2 tasks pass" in lines
    assert any("graded on a GPU only" in line for line in lines)


def test_a_machine_wide_note_is_said_once(tmp_path, monkeypatch):
    """`check`'s note that the machine has no sandbox (which one's own work does not need) is said the first
    time only: a marker in the course's cache; where none can be written it is said every time, never lost."""
    from course_lib import cli

    monkeypatch.setenv("COURSE_CACHE", str(tmp_path / "cache"))
    assert cli._first_time("no-sandbox") is True
    assert cli._first_time("no-sandbox") is False
    assert cli._first_time("another") is True
    monkeypatch.setenv("COURSE_CACHE", "/proc/no-such-place")
    assert cli._first_time("no-sandbox") is True and cli._first_time("no-sandbox") is True
