"""GPU mode's bounds check: a GPU does not fault on a load a few elements past a tensor's end, so a
kernel task that passes its GPU cases is graded once more in Triton's interpreter, in a fresh
process, and fails if the interpreter finds a load or store outside the tensors. These tests stand
in for the GPU child (no GPU here) and run the interpreter's process for real."""

from __future__ import annotations

import sys

import pytest
from conftest import WRONG

from course_lib import grading
from course_lib.grading import CRASH, FAIL, PASS, TaskResult

SEED = 2024


@pytest.fixture
def gpu_child_passes(monkeypatch):
    """GPU mode, with a GPU child that passed every case (as an unmasked load does on a GPU)."""
    monkeypatch.setattr(grading.runtime, "is_gpu", lambda: True)
    passed = lambda task, source, seed, timeout: TaskResult(task, PASS, "all cases passed", ["perf"])  # noqa: E731
    monkeypatch.setattr(grading, "_grade_child", passed)
    monkeypatch.delenv("COURSE_BOUNDS_CHECK", raising=False)


def test_unmasked_bias_load_fails_in_gpu_mode(gpu_child_passes):
    result = grading.grade_isolated("fused_bias_gelu", WRONG / "ch04_no_column_mask", SEED, 120)
    text = result.summary + "\n" + "\n".join(result.details)
    assert result.status == FAIL, text
    assert "every case passed on the GPU, but in the interpreter's bounds check" in result.summary
    assert "out-of-bounds access" in result.summary
    assert "Nearest tensor: `bias_ptr`" in text
    assert grading.BOUNDS_NOTE in result.details


def test_solution_keeps_its_pass_with_a_note(gpu_child_passes):
    result = grading.grade_isolated("fused_bias_gelu", "solutions", SEED, 120)
    assert result.status == PASS, result.summary
    assert result.details[0] == "perf"
    assert result.details[-1].startswith("bounds: no load or store outside its tensors in ")


def test_bounds_check_can_be_turned_off(gpu_child_passes, monkeypatch):
    monkeypatch.setenv("COURSE_BOUNDS_CHECK", "0")
    monkeypatch.setattr(grading, "bounds_check", lambda *a: pytest.fail("the bounds check ran"))
    result = grading.grade_isolated("fused_bias_gelu", WRONG / "ch04_no_column_mask", SEED, 120)
    assert result.status == PASS and result.details == ["perf"]


def test_tasks_without_a_kernel_are_not_bounds_checked(gpu_child_passes, monkeypatch):
    monkeypatch.setattr(grading, "bounds_check", lambda *a: pytest.fail("the bounds check ran"))
    assert grading.grade_isolated("op_costs", "solutions", SEED, 120).status == PASS


def test_cpu_mode_grades_once(monkeypatch):
    monkeypatch.setattr(grading.runtime, "is_gpu", lambda: False)
    monkeypatch.setattr(grading, "bounds_check", lambda *a: pytest.fail("the bounds check ran"))
    result = grading.grade_isolated("fused_bias_gelu", WRONG / "ch04_no_column_mask", SEED, 120)
    assert result.status == FAIL and result.summary.startswith("case ")  # the interpreter's own verdict


def test_other_interpreter_failures_keep_the_gpu_pass():
    """A kernel may use what the interpreter lacks (inline PTX, libdevice): not the learner's fault."""
    gpu = TaskResult("fused_bias_gelu", PASS, "all cases passed", ["perf"])
    lacking = TaskResult("fused_bias_gelu", FAIL, "case 'tiny' the kernel raised NotImplementedError")
    merged = grading.with_bounds_check(gpu, lacking)
    assert merged.status == PASS
    assert merged.details == ["perf", f"bounds: not checked to the end; in the interpreter, {lacking.summary}"]


def test_a_run_that_gives_no_report_is_said_so(gpu_child_passes, monkeypatch):
    monkeypatch.setattr(sys, "executable", "/bin/false")
    result = grading.grade_isolated("fused_bias_gelu", "solutions", SEED, 120)
    assert result.status == PASS
    assert result.details[-1].startswith("bounds: not checked; the interpreter's run did not finish")
    assert grading.bounds_check("fused_bias_gelu", "solutions", SEED, 120).status == CRASH


def test_report_is_read_from_the_end_of_stdout(monkeypatch):
    """Lines printed before the JSON report, brackets and all, do not confuse the reader."""
    import json
    import subprocess

    report = json.dumps([TaskResult("fused_bias_gelu", PASS, "all cases passed", cases_total=3).to_dict()], indent=1)
    printed = subprocess.CompletedProcess([], 0, stdout=f"[note] a line first\n[1, 2]\n{report}\n", stderr="")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: printed)
    result = grading.bounds_check("fused_bias_gelu", "solutions", SEED, 120)
    assert result.status == PASS and result.cases_total == 3
