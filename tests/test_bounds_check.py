"""GPU mode's bounds check: a GPU does not fault on a load a few elements past a tensor's end, so a
kernel task that passes its GPU cases is graded once more by a worker in Triton's interpreter (a
fresh process, spawned with TRITON_INTERPRET=1), and fails if the interpreter finds a load or store
outside the tensors, or kernels that do not read the inputs or write the outputs. These tests stand
in for the GPU worker (no GPU here) and run the interpreter's worker for real."""

from __future__ import annotations

import pytest
from conftest import WRONG, requires_interpreter

from course_lib import grader
from course_lib.grader import FAIL, PASS, TaskResult, bounds, isolation

SEED = 2024
GPU = isolation.Worker(mode="gpu")


@pytest.fixture
def gpu_worker_passes(monkeypatch):
    """A GPU worker that passes every case (as an unmasked load does on a GPU); the interpreter's
    worker is real."""
    real = grader.run_task
    seen = []

    def run_task(spec, source_dir, seed, limits, worker=None, *args, **kwargs):
        seen.append(worker.mode)
        if worker.mode == "gpu":
            return TaskResult(spec.name, PASS, "all cases passed", ["perf"], cases_total=3)
        return real(spec, source_dir, seed, limits, worker, *args, **kwargs)

    monkeypatch.setattr(grader, "run_task", run_task)
    monkeypatch.delenv("COURSE_BOUNDS_CHECK", raising=False)
    return seen


def test_unmasked_bias_load_fails_in_gpu_mode(gpu_worker_passes):
    result = grader.grade_task("fused_bias_gelu", WRONG / "ch04_no_column_mask", SEED, timeout=120, worker=GPU)
    text = result.summary + "\n" + "\n".join(result.details)
    assert result.status == FAIL, text
    assert "every case passed on the GPU, but in the interpreter's check" in result.summary
    assert "out-of-bounds access" in result.summary
    assert "Nearest tensor: `bias_ptr`" in text
    assert bounds.NOTE in result.details
    assert result.cases_passed < result.cases_total  # not "15 of 15 passed" on a failed task
    assert gpu_worker_passes == ["gpu", "cpu"]


def test_torch_copy_cheat_fails_in_gpu_mode(gpu_worker_passes, tmp_path):
    """A launcher that computes with torch (its guard switched off) and copies the result with a
    kernel passes on a GPU, where nothing sees which kernel read what; the interpreter's run does."""
    (tmp_path / "vector_add.py").write_text((WRONG / "../hostile/guard_off_copy/vector_add.py").read_text())
    result = grader.grade_task("vector_add", tmp_path, SEED, timeout=120, worker=GPU, check_source=False)
    assert result.status == FAIL, result.summary
    assert "no kernel read `x`, `y`" in result.summary


@pytest.mark.parametrize(
    "task, folder, check",
    [
        ("tiled_transpose", "ch08_naive_transpose", "sectors"),
        ("fused_linear", "ch07_two_kernels_fp32_temp", "fused"),
        # loads masked off above the diagonal read no NaN key on a GPU; the interpreter counts the products
        ("flash_attention", "ch11_causal_scratch_copy", "a causal walk computed key tiles above the diagonal"),
    ],
)
def test_checks_that_watch_the_kernel_run_fail_a_gpu_pass_too(gpu_worker_passes, task, folder, check):
    """Right values, wrong structure: these passed every case on an H200 (2026-12-01) and were graded
    PASS there, because their checks watch the kernel run in the interpreter. The interpreter's run
    makes them in GPU mode too, and its failure fails the task."""
    result = grader.grade_task(task, WRONG / folder, SEED, timeout=240, worker=GPU)
    text = result.summary + "\n" + "\n".join(result.details)
    assert result.status == FAIL, text
    assert result.summary.startswith("every case passed on the GPU, but ") and check in result.summary, text
    assert result.summary.endswith("(seen in the interpreter's run of the CPU-mode cases)")
    assert bounds.CHECKS_NOTE in result.details and result.failed == "checks"
    assert gpu_worker_passes == ["gpu", "cpu"]


def test_wrong_values_in_the_interpreter_fail_a_gpu_pass(gpu_worker_passes):
    """A grouped order that assumes a whole last group is right on the H200's cases (their tile grids
    divide evenly) and was graded PASS there (2026-12-01); the CPU-mode cases have a partial group."""
    result = grader.grade_task("grouped_matmul", WRONG / "ch06_full_last_group", SEED, timeout=240, worker=GPU)
    assert result.status == FAIL and result.failed == "values", result.summary
    assert result.summary.startswith("every case passed on the GPU, but the interpreter's run of the CPU-mode cases")
    assert "never written" in result.summary and bounds.VALUES_NOTE in result.details
    assert result.cases_passed < result.cases_total


def test_solution_keeps_its_pass_with_a_note(gpu_worker_passes):
    result = grader.grade_task("fused_bias_gelu", "solutions", SEED, timeout=120, worker=GPU)
    assert result.status == PASS, result.summary
    assert result.details[0] == "perf"
    assert result.details[-1].startswith("bounds: no load or store outside its tensors in ")


def test_bounds_check_can_be_turned_off(gpu_worker_passes, monkeypatch):
    monkeypatch.setenv("COURSE_BOUNDS_CHECK", "0")
    result = grader.grade_task("fused_bias_gelu", WRONG / "ch04_no_column_mask", SEED, timeout=120, worker=GPU)
    assert result.status == PASS and result.details == ["perf"]
    assert gpu_worker_passes == ["gpu"]


def test_tasks_without_a_kernel_are_not_bounds_checked(gpu_worker_passes):
    assert grader.grade_task("op_costs", "solutions", SEED, timeout=120, worker=GPU).status == PASS
    assert gpu_worker_passes == ["gpu"]


@requires_interpreter  # in GPU mode the default worker is the (stand-in) GPU one
def test_cpu_mode_grades_once(gpu_worker_passes):
    result = grader.grade_task("fused_bias_gelu", WRONG / "ch04_no_column_mask", SEED, timeout=120)
    assert result.status == FAIL and result.summary.startswith("case ")  # the interpreter's own verdict
    assert gpu_worker_passes == ["cpu"]


def test_other_interpreter_failures_keep_the_gpu_pass():
    """A kernel may use what the interpreter lacks (inline PTX, libdevice): not the learner's fault."""
    gpu = TaskResult("fused_bias_gelu", PASS, "all cases passed", ["perf"])
    lacking = TaskResult("fused_bias_gelu", FAIL, "case 'tiny' the kernel raised NotImplementedError")
    merged = bounds.merge(gpu, lacking)
    assert merged.status == PASS
    assert merged.details == ["perf", f"bounds: not checked to the end; in the interpreter, {lacking.summary}"]


def test_a_run_that_does_not_finish_is_said_so():
    gpu = TaskResult("fused_bias_gelu", PASS, "all cases passed", ["perf"])
    hung = TaskResult("fused_bias_gelu", "timeout", "no result after 20 s")
    merged = bounds.merge(gpu, hung)
    assert merged.status == PASS
    assert merged.details[-1] == "bounds: not checked; the interpreter's run did not finish (no result after 20 s)"
