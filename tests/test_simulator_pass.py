"""GPU mode's protocol check of the Gluon tasks: a mistake in a warp-specialized kernel's barrier
protocol (a slot freed while a wgmma still reads it, a stale phase) is a race, and a GPU run may win it
on every case (chapter 09's release bug gave 758 wrong elements of a million on the H200, on one case of
several). So a Gluon task that passes its GPU cases is graded once more in the course's Gluon simulator,
on the CPU-mode cases, where the partitions run in a seeded order and every wait and release is checked.
These tests stand in for the GPU worker (no GPU here, and the races are the GPU's to win or lose) and run
the simulator's worker for real."""

from __future__ import annotations

import pytest
from conftest import GOOD, WRONG

from course_lib import grader
from course_lib.grader import FAIL, NEEDS_GPU, PASS, TIMEOUT, TaskResult, bounds, isolation

SEED = 2026
GPU = isolation.Worker(mode="gpu")


@pytest.fixture
def gpu_worker_passes(monkeypatch):
    """A GPU worker that passes every case (as a race won on the GPU does); the simulator's worker is real."""
    real = grader.run_task
    seen = []

    def run_task(spec, source_dir, seed, limits, worker=None, *args, **kwargs):
        seen.append(worker.mode)
        if worker.mode == "gpu":
            return TaskResult(spec.name, PASS, "all cases passed", ["perf"], cases_total=5, cases_passed=5)
        return real(spec, source_dir, seed, limits, worker, *args, **kwargs)

    monkeypatch.setattr(grader, "run_task", run_task)
    monkeypatch.delenv("COURSE_BOUNDS_CHECK", raising=False)
    return seen


@pytest.mark.parametrize(
    "task, folder, found",
    [
        ("ws_attention", "ch11_ws_free_before_wait", "overwrites v_bufs"),  # a slot freed under p @ v
        ("ws_attention", "ch11_ws_p_not_kept", "whose A operand comes from registers"),
        ("ws_attention", "ch11_ws_rescale_before_wait", "before waiting for it"),
        ("ws_matmul", "ch09_ws_release_early", "overwrites a_bufs"),  # the release bug of chapter 09
    ],
)
def test_a_race_the_gpu_won_fails_in_the_simulator(gpu_worker_passes, task, folder, found):
    result = grader.grade_task(task, WRONG / folder, SEED, timeout=120, worker=GPU)
    text = result.summary + "\n" + "\n".join(result.details)
    assert result.status == FAIL, text
    assert result.summary.startswith(
        "every case passed on the GPU, but the Gluon simulator's run of the CPU-mode cases failed: case "
    ), text
    assert "the asynchronous protocol is broken" in result.summary and found in result.summary, text
    assert result.details[0] == bounds.SIMULATOR_NOTE
    assert result.cases_passed < result.cases_total  # not "5 of 5 passed" on a failed task
    assert gpu_worker_passes == ["gpu", "cpu"]


def test_a_stale_turn_is_named_a_deadlock(gpu_worker_passes):
    """On a GPU a stale turn hangs (the grader's time limit ends it); should a run get past it, the
    simulator names who waits on what: in a case, or (where the seed's order of events gets every case
    through, as 2026's does since the keys and values have rings of their own) in the probe's longer launch."""
    result = grader.grade_task("ws_attention", WRONG / "ch11_ws_stale_turn", SEED, timeout=120, worker=GPU)
    text = "\n".join([result.summary, *result.details])
    assert result.status == FAIL, text
    if "the kernel deadlocks" in result.summary:
        assert any(line.startswith("Who waits on what: ") for line in result.details), text
    else:
        assert "fails in the Gluon simulator" in result.summary and "Deadlock: " in text, text
    assert "waits on turn[" in text, text


def test_wrong_values_in_the_simulator_fail_a_gpu_pass(gpu_worker_passes):
    result = grader.grade_task("ws_attention", WRONG / "ch11_ws_no_acc_rescale", SEED, timeout=120, worker=GPU)
    assert result.status == FAIL and result.failed == "values", result.summary
    assert "accumulator was not" in result.summary


@pytest.mark.parametrize(
    "task, source",
    [
        ("ws_matmul", "solutions"),
        ("ws_compression", "solutions"),
        ("ws_attention", "solutions"),
        ("ws_attention", GOOD / "ch11_ws_hand_over_late"),  # right, written otherwise: the check does not bite it
        ("ws_attention", GOOD / "ch11_ws_rescale_before_pv"),
        ("ws_compression", GOOD / "ch10_ws_tile_serpentine"),
    ],
)
def test_right_kernels_keep_their_pass_with_a_line(gpu_worker_passes, task, source):
    result = grader.grade_task(task, source, SEED, timeout=120, worker=GPU)
    assert result.status == PASS, result.summary + "\n" + "\n".join(result.details)
    assert result.details[0] == "perf"
    line = result.details[-1]
    assert line.startswith("protocol: ") and "CPU-mode cases run in the course's Gluon" in line
    assert gpu_worker_passes == ["gpu", "cpu"]


def test_the_check_can_be_turned_off(gpu_worker_passes, monkeypatch):
    monkeypatch.setenv("COURSE_BOUNDS_CHECK", "0")
    result = grader.grade_task("ws_attention", WRONG / "ch11_ws_free_before_wait", SEED, timeout=120, worker=GPU)
    assert result.status == PASS and result.details == ["perf"]
    assert gpu_worker_passes == ["gpu"]


GPU_PASS = TaskResult("ws_attention", PASS, "all cases passed", ["perf"], cases_total=5, cases_passed=5)


@pytest.mark.parametrize(
    "simulated, said",
    [
        # a Gluon construct the simulator does not run: not the learner's fault
        (TaskResult("ws_attention", NEEDS_GPU, "CPU mode cannot run this kernel: gl.foo"), "not checked to the end"),
        # what the compiler took and the simulator refuses: the GPU's word stands
        (
            TaskResult(
                "ws_attention", FAIL, "case 'tiny' the kernel does what compiled Gluon refuses: x", failed="raised"
            ),
            "not checked to the end",
        ),
        (TaskResult("ws_attention", TIMEOUT, "no result after 20 s"), "not checked; the Gluon simulator's run"),
    ],
)
def test_what_the_simulator_cannot_judge_keeps_the_gpu_pass(simulated, said):
    merged = bounds.merge_simulated(GPU_PASS, simulated)
    assert merged.status == PASS and merged.details[0] == "perf"
    assert merged.details[-1].startswith(f"protocol: {said}") and simulated.summary in merged.details[-1]


def test_a_check_failed_in_the_simulator_fails_the_gpu_pass():
    checks = TaskResult(
        "ws_attention", FAIL, "all 7 cases are right, but the softmax runs inside the warpgroup's turn", ["why"],
        failed="checks",
    )  # fmt: skip
    merged = bounds.merge_simulated(GPU_PASS, checks)
    assert merged.status == FAIL and merged.failed == "checks"
    assert merged.summary == (
        "every case passed on the GPU, but the softmax runs inside the warpgroup's turn (seen in the Gluon "
        "simulator's run of the CPU-mode cases)"
    )
    assert merged.details == [bounds.SIMULATOR_NOTE, "why"]
