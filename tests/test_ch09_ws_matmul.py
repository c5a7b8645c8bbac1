"""Chapter 09's Gluon task, ws_matmul: graded on a Hopper GPU, structurally checked everywhere.

In CPU mode (and on a GPU that is no Hopper) the cases cannot run: the probe compiles the learner's
launch for sm_90 and the result is ``needs_gpu`` when the structure is right, a failure when it is
not. Every structural rule has a submission or a set of facts that breaks it; the status travels
through the report, the command line's exit code, progress and a room's grades.

    python -m course_lib check ws_matmul --source tests/wrong/ch09_ws_no_region
"""

from __future__ import annotations

import functools

import pytest
from conftest import ROOT, WRONG

from course_lib import grader, lesson, progress, runtime, tasks
from course_lib.grader import FAIL, NEEDS_GPU, TODO, report, roster
from course_lib.tasks import ch09_pipelining as ch09

TASK = "ws_matmul"
SEED = 11


def full_text(result: grader.TaskResult) -> str:
    return "\n".join([result.summary, *result.details])


@functools.cache
def graded(source: str) -> grader.TaskResult:
    return grader.grade_task(TASK, source=source, seed=SEED)


def test_the_solution_needs_a_hopper_gpu_here_and_its_structure_passes():
    result = graded("solutions")
    assert result.status == NEEDS_GPU, full_text(result)
    text = full_text(result)
    assert "needs a Hopper GPU (sm_90)" in result.summary and "this is CPU mode" in result.summary
    assert "ttg.warp_specialize with 1 worker partition(s) of [1] warps, [40] registers requested" in text
    assert "wgmma.mma_async" in text and "TMA loads" in text and "setmaxnreg (" in text
    assert result.cases_total == 0 and not result.passed


def test_the_stub_is_todo():
    result = graded("exercises")
    assert result.status == TODO, full_text(result)
    assert "not implemented yet" in result.summary and "exercises/ws_matmul.py" in result.summary


def test_a_kernel_with_no_warp_specialized_region_fails_in_cpu_mode():
    result = graded(str(WRONG / "ch09_ws_no_region"))
    assert result.status == FAIL, full_text(result)
    assert result.summary == "the kernel has no warp-specialized region"
    assert "gl.warp_specialize" in full_text(result)


def test_a_stale_phase_is_only_seen_on_a_gpu():
    """The structure of a kernel that waits on the wrong parity is right: CPU mode cannot judge it
    (on an H200 it hangs: scripts/gpu_session.sh wrong grades it there, HANG)."""
    result = graded(str(WRONG / "ch09_ws_stale_phase"))
    assert result.status == NEEDS_GPU, full_text(result)


GOOD_FACTS = {
    "launches": 1, "kernel": "ws_matmul_kernel", "gluon": True, "warp_specialize": 1, "worker_warps": [1],
    "worker_regs": [40], "setmaxnreg": ["dec 40", "inc 232"], "wgmma": 4, "tma_loads": 2, "tma_stores": 1,
    "mbarrier_waits": 2, "expect_tx": 1, "mbarrier_arrives": 3, "num_warps": 12, "shared": 212992, "probe": "a product",
}  # fmt: skip


def problems(facts: dict) -> list[str]:
    return [summary for ok, summary, _ in ch09.judge_ws_matmul(facts) if not ok]


def test_good_facts_pass_the_judge():
    assert problems(GOOD_FACTS) == []


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"launches": 0}, "the launcher launched no kernel"),
        ({"gluon": False}, "the kernel is no Gluon kernel"),
        ({"warp_specialize": 0, "worker_warps": []}, "the kernel has no warp-specialized region"),
        ({"setmaxnreg": []}, "registers are not moved between the roles (no setmaxnreg in the PTX)"),
        ({"wgmma": 0}, "no wgmma in the PTX"),
        ({"tma_loads": 0}, "no TMA loads in the PTX (cp.async.bulk.tensor into shared memory)"),
        ({"mbarrier_waits": 0}, "no mbarrier waits in the PTX"),
        ({"mbarrier_waits": 1}, "only one role waits on a barrier (one mbarrier wait in the PTX, not two)"),
        (
            {"expect_tx": 0},
            "no mbarrier.expect in the PTX: the ready barriers are never told how many bytes to wait for",
        ),
    ],
)
def test_each_structural_rule_bites(change, expected):
    assert expected in problems({**GOOD_FACTS, **change})


def test_the_facts_come_from_the_compiled_kernel():
    """ws_facts on the solution's kernel compiled for sm_90 here: the counts the judge reads."""
    from course_lib import sources

    module = sources.load_file(ROOT / "solutions" / f"{TASK}.py", TASK, "ws_matmul_solution_for_tests")[0]
    facts = ch09.probe_ws_matmul(module, module.ws_matmul)
    assert facts["warp_specialize"] == 1 and facts["worker_warps"] == [1] and facts["worker_regs"] == [40]
    assert any(s.startswith("inc") for s in facts["setmaxnreg"]) and facts["wgmma"] > 0
    assert facts["tma_loads"] > 0 and facts["tma_stores"] > 0 and facts["mbarrier_waits"] > 0


class _Info:
    def __init__(self, major):
        self.capability, self.name = (major, 0), f"a GPU of sm_{major}0"


@pytest.mark.parametrize("major, runs", [(9, True), (8, False), (10, False)])
def test_the_cases_run_on_hopper_only(monkeypatch, major, runs):
    monkeypatch.setattr(runtime, "gpu_info", lambda: _Info(major))
    spec = tasks.get(TASK)
    assert spec.runs_here(runtime.GPU) is runs
    assert bool(spec.all_cases(runtime.GPU)) is runs
    assert not spec.runs_here(runtime.CPU) and spec.all_cases(runtime.CPU) == []


def test_an_unsupported_triton_is_named_before_anything_runs(monkeypatch):
    monkeypatch.setattr(runtime, "triton_version", lambda: (3, 5, 0))
    result = grader.grade_task(TASK, source="solutions", seed=SEED)
    assert result.status == FAIL
    assert "need Triton 3.6 to 3.9" in result.summary and "gl.warp_specialize" in result.summary


def test_needs_gpu_in_the_report_the_exit_code_and_progress(tmp_path, cli):
    result = graded("solutions")
    assert report.LABEL[NEEDS_GPU] == "GPU" and report.settled(result)
    assert "1 of 2 tasks pass; 1 need a Hopper GPU" in report.text([result, grader.TaskResult("x", "pass", "ok")])
    done = cli("check", TASK, "--solutions", "--seed", str(SEED))
    assert done.returncode == 0, done.stdout + done.stderr  # nothing is wrong: the cases need another machine
    assert done.stdout.startswith("GPU   ws_matmul needs a Hopper GPU")
    data = {"tasks": {TASK: {"attempts": 1, "last_status": NEEDS_GPU}}}
    assert progress.status_of(TASK, data) == "checked here, needs a Hopper GPU"


def test_a_room_scores_needs_gpu_zero_says_so_and_grades_it_again_on_resume(tmp_path, monkeypatch):
    room = tmp_path / "room"
    (room / "ada").mkdir(parents=True)
    (room / "ada" / f"{TASK}.py").write_bytes((ROOT / "solutions" / f"{TASK}.py").read_bytes())
    calls = []

    # the fake runs nothing: grade as if this machine had a sandbox
    monkeypatch.setattr(roster.sandbox, "available", lambda: roster.sandbox.Availability(True, "bubblewrap (test)", ""))

    def fake(jobs, seed=None, workers=None, timeout=None, on_result=None, hidden=None, sandboxed=None):
        calls.append([j.task for j in jobs])
        return [grader.TaskResult(j.task, NEEDS_GPU, "needs a Hopper GPU", seed=seed) for j in jobs]

    said = []
    out = tmp_path / "grades.csv"
    done = roster.grade_room(room, out, [TASK], seed=3, grade=fake, progress=False, log=said.append)
    row = done.rows[0]
    assert row["status"] == NEEDS_GPU and row["score"] == 0.0 and row["max_score"] > 0
    assert any("needs a Hopper GPU" in line and "grade these tasks again on a Hopper machine" in line for line in said)
    roster.grade_room(room, out, [TASK], seed=3, resume=True, grade=fake, progress=False, log=said.append)
    assert calls == [[TASK], [TASK]]  # same file, same seed: graded again all the same


def test_every_ws_matmul_wrong_submission_is_tested():
    assert {p.parent.name for p in WRONG.glob(f"*/{TASK}.py")} == {"ch09_ws_no_region", "ch09_ws_stale_phase"}


@pytest.mark.parametrize(
    "drop, expected",
    [
        ("mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)",
         "no mbarrier.expect in the PTX"),
        ("mbarrier.wait(empty.index(s), phase ^ 1)", "only one role waits on a barrier"),
    ],
)  # fmt: skip
def test_a_protocol_step_left_out_shows_in_the_compiled_kernel(drop, expected):
    """Two of the ring's steps leave a trace in the PTX that CPU mode can read: the expected bytes
    (mbarrier.arrive.expect_tx) and the producer's wait (a second mbarrier.try_wait)."""
    variant = lesson.write_variant(TASK, {drop: "pass"})
    result = grader.grade_task(TASK, source=variant.folder, seed=SEED)
    assert result.status == FAIL and expected in result.summary, full_text(result)


def test_a_compile_error_says_what_the_compiler_said():
    """A dropped accumulator (warpgroup_mma_wait's result not kept) fails to compile; the message keeps
    the compiler's own sentence, not only the outer call's source line."""
    old = "acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))"
    variant = lesson.write_variant(TASK, {old: "warpgroup_mma_wait(num_outstanding=1, deps=(acc,))"})
    result = grader.grade_task(TASK, source=variant.folder, seed=SEED)
    assert result.status == FAIL and result.summary == "the kernel does not compile", full_text(result)
    assert any("acc" in line and "type" in line for line in result.details), full_text(result)
