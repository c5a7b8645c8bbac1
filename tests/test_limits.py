"""Time limits from the reference solution's time on this machine: FACTOR times each step plus a floor,
timed once and cached by the solution's hash."""

from __future__ import annotations

from conftest import ROOT

from course_lib import grader, tasks
from course_lib.grader import isolation, limits


def test_limits_scale_the_solutions_steps_with_a_floor():
    got = limits.Timed(load_s=1.0, case_s=0.5, extra_s=0.0, task_s=6.0).limits()
    assert got.load_s == limits.FACTOR * 1.0 + limits.FLOOR_S
    assert got.case_s == limits.FACTOR * 0.5 + limits.FLOOR_S
    assert got.extra_s == limits.FLOOR_S  # nothing to time: the floor alone
    assert got.task_s == limits.FACTOR * 6.0 + limits.FLOOR_S
    assert "reference solution" in got.origin


def test_each_case_has_the_limit_of_its_own_solution_time():
    """A hang in a tiny first case is caught after about the floor, not after the slowest case's limit."""
    got = limits.Timed(load_s=0.5, case_s=3.0, extra_s=0.0, task_s=5.0, cases_s=(0.01, 3.0)).limits()
    assert got.for_case(0) == limits.FACTOR * 0.01 + limits.FLOOR_S
    assert got.for_case(1) == limits.FACTOR * 3.0 + limits.FLOOR_S
    assert got.for_case(5) == got.case_s  # a hidden case beyond the timed ones: the slowest case's limit


def test_cached_times_are_used_and_a_changed_solution_is_timed_again(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path))
    sha = isolation.file_sha256(ROOT / "solutions" / "vector_add.py")
    timed = limits.Timed(0.2, 0.1, 0.0, 1.0, (0.05, 0.1))
    limits.write("cpu", "vector_add", sha, timed)
    assert limits.read("cpu", "vector_add", sha) == timed
    assert limits.read("cpu", "vector_add", "another solution") is None  # edited: timed afresh
    got = grader.limits_for(tasks.get("vector_add"), isolation.Worker())
    assert got.case_s == limits.FACTOR * 0.1 + limits.FLOOR_S


def test_an_explicit_timeout_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path))
    got = grader.limits_for(tasks.get("vector_add"), isolation.Worker(), timeout=7)
    assert (got.load_s, got.case_s) == (7, 7)
    assert not list(tmp_path.iterdir())  # nothing was timed


def test_the_solution_is_timed_once_then_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path))
    calls = []
    real = grader.run_task

    def counting(*args, **kwargs):
        calls.append(kwargs.get("clock") is not None)
        return real(*args, **kwargs)

    monkeypatch.setattr(grader, "run_task", counting)
    first = grader.limits_for(tasks.get("vector_copy"), isolation.Worker())
    second = grader.limits_for(tasks.get("vector_copy"), isolation.Worker())
    assert calls == [True]  # one timing run of the solution, then the cache
    assert first == second and first.case_s >= limits.FLOOR_S
