"""Chapter 03's task, autotuned_axpy: the solution passes, each wrong submission fails with a message
that names what is wrong, and the autotuner's own work never counts against the launcher.

    python -m course_lib check autotuned_axpy --source tests/wrong/ch03_exact_key
"""

from __future__ import annotations

import pytest
import triton
from conftest import WRONG

from course_lib import grader, runtime, sources, tasks
from course_lib.grader import FAIL, PASS
from course_lib.tasks import ch03_dynamic_compilation as ch03

SEED = 2024
TASK = "autotuned_axpy"

# folder under tests/wrong -> pieces the grader's message must hold
WRONG_SUBMISSIONS = {
    "ch03_no_autotune": ("all 9 cases are right", "no @triton.autotune kernel", "triton.autotune(configs="),
    "ch03_exact_key": ("re-tuned 5 times for 5 lengths", "key=['n_elements']", "triton.next_power_of_2"),
    "ch03_one_config": ("`axpy_kernel` is autotuned over 1 config", "at least 2"),
    "ch03_constant_key": ("the key does not follow the size", "key=[]"),
}


def full_text(result: grader.TaskResult) -> str:
    return "\n".join([result.summary, *result.details])


def test_solution_passes():
    result = grader.grade_task(TASK, "solutions", seed=SEED)
    assert result.status == PASS, full_text(result)
    assert result.cases_passed == result.cases_total >= 8


@pytest.mark.parametrize("folder", sorted(WRONG_SUBMISSIONS))
def test_wrong_submission_is_rejected(folder):
    result = grader.grade_task(TASK, WRONG / folder, seed=SEED)
    text = full_text(result)
    assert result.status == FAIL, text
    for piece in WRONG_SUBMISSIONS[folder]:
        assert piece in text, f"expected {piece!r} in the grader's message:\n{text}"


def test_every_ch03_wrong_submission_is_listed():
    on_disk = {p.parent.name for p in WRONG.glob("ch03_*/*.py")}
    assert on_disk == set(WRONG_SUBMISSIONS)


def test_autotuner_work_is_not_the_launchers(monkeypatch):
    """On a GPU the autotuner times configs with do_bench, which calls torch (empty, zero_, quantile)
    inside the launcher's call. Here its timing is replaced by one that does the same torch calls."""
    import torch
    import triton.runtime.autotuner as autotuner

    def do_bench_with_torch(kernel_call, quantiles=None):
        scratch = torch.empty(256)
        scratch.zero_()
        kernel_call()
        times = torch.quantile(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.5, 0.2, 0.8])).tolist()
        return times if quantiles else times[0]

    monkeypatch.setattr(autotuner.Autotuner, "do_bench", property(lambda self: do_bench_with_torch))
    result = grader.grade_task(TASK, "solutions", seed=SEED)
    assert result.status == PASS, full_text(result)


def test_an_autotuned_launch_counts_once():
    from course_lib import hooks

    module, entry = sources.load_file(sources.task_path(TASK, "solutions"), tasks.get(TASK).entry)
    inputs = ch03._inputs_of_length(3000, seed=0)
    with hooks.watch_launches() as watch:
        entry(**inputs)  # a new size class: every config runs once, then the chosen one
    assert watch.launches == ["axpy_kernel"]


def test_check_sizes_stay_clear_of_the_graded_cases():
    """The re-tuning check relies on its lengths: five in one class, one in a class of its own."""
    classes = {triton.next_power_of_2(n) for n in ch03.SAME_CLASS_SIZES}
    assert len(classes) == 1
    other = triton.next_power_of_2(ch03.OTHER_CLASS_SIZE)
    for mode in (runtime.CPU, runtime.GPU):
        visited = {triton.next_power_of_2(c.shape[0]) for c in tasks.get(TASK).all_cases(mode)}
        assert other not in visited | classes
        assert triton.next_power_of_2(ch03.PERF_SIZE) not in visited


def test_hints_come_in_order_and_name_the_key():
    hints = tasks.get(TASK).hints
    assert len(hints) == 3
    assert "@triton.autotune" in hints[0]
    assert "meta['BLOCK_SIZE']" in hints[1]
    assert "key=['n_elements']" in hints[2] and "next_power_of_2" in hints[2]


@pytest.mark.parametrize(("first_config_us", "passes"), [(80.0, True), (100.0, False)])
def test_speed_check_against_forced_configs(monkeypatch, first_config_us, passes):
    """The speed check's logic, with a stand-in for the GPU clock: each config has a fixed time, and
    the launcher as written gets the time of the config its autotuner picks (in CPU mode the first)."""
    from course_lib import timing

    module, entry = sources.load_file(sources.task_path(TASK, "solutions"), tasks.get(TASK).entry)
    tuner = ch03.autotuners_in(module)["axpy_kernel"]
    configs = list(tuner.configs)
    times_us = {4096: first_config_us, 2048: 90.0, 1024: 85.0, 256: 120.0}
    assert configs[0].kwargs["BLOCK_SIZE"] == 4096

    def fake_bench(fn, **_):
        fn()
        us = times_us[tuner.best_config.kwargs["BLOCK_SIZE"]]
        return timing.Timing(us / 1e3, us / 1e3, us / 1e3, "stand-in")

    monkeypatch.setattr(timing, "bench", fake_bench)
    monkeypatch.setattr(ch03, "PERF_SIZE", 3000)  # the interpreter would take minutes over 16M elements
    facts = ch03._speed_rows({"axpy_kernel": tuner}, entry)  # gathered in the worker
    ok, summary, details = ch03._judge_speed(facts)  # decided in the grader's process
    assert ok is passes, summary
    assert tuner.configs == configs  # every config back in place after forcing them one by one
    assert sum("forced" in line for line in details) == 4
    if passes:
        assert "1.00x the time of its best config (axpy_kernel: BLOCK_SIZE=4096" in summary
    else:
        assert "1.18x the time of its best config (axpy_kernel: BLOCK_SIZE=1024" in summary
        assert "within 1.10x is expected" in summary


@pytest.mark.skipif(not runtime.is_gpu(), reason="the speed check times kernels: GPU only")
def test_speed_check_reports_every_config():

    module, entry = sources.load_file(sources.task_path(TASK, "solutions"), tasks.get(TASK).entry)
    ok, summary, details = ch03._judge_speed(ch03._speed_rows(ch03.autotuners_in(module), entry))
    assert ok, "\n".join([summary, *details])
    assert sum("forced" in line for line in details) == 4
