"""Every reference solution passes; every untouched exercise stub fails cleanly (TODO, no traceback)."""

from __future__ import annotations

import json
import re

import pytest
from conftest import ROOT, assert_clean, task_names

from course_lib import grader, progress, runtime, stubs, tasks
from course_lib.grader import TODO

TASKS = task_names()


@pytest.mark.parametrize("task", TASKS)
def test_untouched_stub_reports_todo(task):
    assert stubs.is_untouched(task, ROOT), f"exercises/{task}.py was edited: run sync-exercises --force"
    result = grader.grade_task(task, "exercises", seed=0)
    assert result.status == TODO, result.summary
    assert result.summary.startswith(stubs.NOT_IMPLEMENTED), result.summary
    assert f"exercises/{task}.py" in result.summary


def _streamed(lines: list[str]) -> list[str]:
    """The task lines of a streamed ``check`` ("[ k/N] LABEL task ..."), numbers taken off, in the order
    the tasks finished."""
    numbered = [line for line in lines if re.match(r"\[\s*\d+/\d+\] ", line)]
    assert [int(line[1:].split("/")[0]) for line in numbered] == list(range(1, len(numbered) + 1)), lines
    return [line.split("] ", 1)[1] for line in numbered]


def test_check_all_solutions_exits_zero(cli):
    run = cli("check", "--all", "--solutions")  # a fresh seed every run: the seed is printed on failure
    assert_clean(run)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.strip().splitlines()
    task_lines = _streamed(lines)
    # in CPU mode a task whose cases need a Hopper GPU (ws_matmul) is checked for structure only
    waiting = [t for t in TASKS if not tasks.get(t).runs_here(runtime.MODE)]
    assert sorted(line.split()[1] for line in task_lines) == sorted(TASKS), run.stdout
    for task in TASKS:
        label = "GPU" if task in waiting else "PASS"
        assert any(line.startswith(label) and line.split()[1] == task for line in task_lines), run.stdout
    passed = len(TASKS) - len(waiting)
    need = f"; {len(waiting)} need a Hopper GPU" if waiting else ""
    assert f"{passed} of {len(TASKS)} tasks pass{need}" in lines[-2:], run.stdout
    if runtime.is_cpu():
        assert "graded on a GPU only" in lines[-1]


def test_check_all_exercises_one_todo_line_per_task(cli, progress_file):
    run = cli("check", "--all")
    assert_clean(run)
    assert run.returncode != 0
    lines = [line for line in run.stdout.strip().splitlines() if not line.startswith("note: ")]  # a machine's note
    task_lines, summary = _streamed(lines), lines[-1]
    assert len(task_lines) == len(TASKS), run.stdout
    assert sorted(line.split()[1] for line in task_lines) == sorted(TASKS)
    assert all(line.startswith("TODO ") for line in task_lines), run.stdout
    assert summary == f"0 of {len(TASKS)} tasks pass"
    # the check was recorded in this test's progress file, not the learner's
    recorded = progress.load(progress_file)["tasks"]
    assert {t: recorded[t]["last_status"] for t in TASKS} == {t: TODO for t in TASKS}


def test_check_json_one_entry_per_task(cli):
    # the text form of check --all is the test above; the JSON form of the same report, on three tasks
    # of different chapters, in the order asked (CI's time, 2026-12-04)
    asked = ["softmax", "vector_add", "ws_matmul"]
    run = cli("check", *asked, "--json")
    assert_clean(run)
    assert run.returncode != 0
    entries = json.loads(run.stdout)
    assert [e["task"] for e in entries] == asked
    assert {e["status"] for e in entries} == {TODO}
    for e in entries:
        assert set(e) >= {"task", "status", "summary", "details", "seed", "cases_passed", "cases_total"}


def test_stub_of_a_module_level_region_reports_todo(tmp_path):
    """A solution may mark module-level code (a constant, a helper's body); its stub raises on import,
    which must read as TODO like any other stub, not as a broken file."""
    solution = (ROOT / "solutions" / "vector_copy.py").read_text()
    solution = solution.replace(
        "import triton.language as tl\n",
        "import triton.language as tl\n\n# BEGIN SOLUTION\nBLOCK_SIZE = 1024\n# END SOLUTION\n",
        1,
    )
    (tmp_path / "vector_copy.py").write_text(stubs.make_exercise(solution, "vector_copy"))
    result = grader.grade_task("vector_copy", tmp_path, seed=0)
    assert result.status == TODO, result.summary
    assert result.summary.startswith(stubs.NOT_IMPLEMENTED), result.summary
