"""Chapter 09's Gluon task, ws_matmul: graded on a Hopper GPU, and in CPU mode on course_lib's Gluon
simulator.

In CPU mode the cases run in course_lib.gluon_cpu (small shapes that wrap the ring, carry phases across
tiles and have tails), under seeded orders of the partitions and the asynchronous events: values and
the barrier protocol are checked there, then the probe compiles the learner's launch for sm_90 for the
structural checks. ``needs_gpu`` is left for a GPU that is no Hopper and for a construct the simulator
does not run. Every structural rule has a submission or a set of facts that breaks it; every protocol
mistake a wrong submission; the status travels through the report, the command line's exit code,
progress and a room's grades.

    python -m course_lib check ws_matmul --source tests/wrong/ch09_ws_stale_phase
"""

from __future__ import annotations

import functools

import pytest
from conftest import GOOD, ROOT, TESTS, WRONG

from course_lib import grader, lesson, progress, runtime, tasks
from course_lib.grader import FAIL, NEEDS_GPU, PASS, TODO, report, roster
from course_lib.tasks import ch09_pipelining as ch09

TASK = "ws_matmul"
SEED = 11


def full_text(result: grader.TaskResult) -> str:
    return "\n".join([result.summary, *result.details])


@functools.cache
def graded(source: str) -> grader.TaskResult:
    return grader.grade_task(TASK, source=source, seed=SEED)


@pytest.mark.parametrize(
    "source", ["solutions", str(GOOD / "ch09_wait_for_zero"), str(TESTS / "slow" / "ch09_one_slot")]
)
def test_right_kernels_pass_in_cpu_mode_on_the_simulator(source):
    """The solution and two right alternatives (one that waits for every wgmma, one with a single ring
    slot): their cases run in the simulator, well under the issue's 60 s, and the structure is checked."""
    result = graded(source)
    text = full_text(result)
    assert result.status == PASS, text
    assert "the cases ran in course_lib's Gluon simulator (CPU mode)" in text
    assert "ttg.warp_specialize with 1 worker partition(s) of [1] warps, [40] registers requested" in text
    assert "wgmma.mma_async" in text and "TMA loads" in text and "setmaxnreg (" in text
    assert result.cases_passed == result.cases_total >= 6 and result.passed
    assert result.seconds < 60


def test_the_cpu_cases_exercise_the_ring():
    """Shapes where the ring of 3 slots wraps within a tile, the phases carry across tiles (fewer
    programs than tiles), K has a tail and tiles stick out of the output."""
    cases = tasks.get(TASK).all_cases(runtime.CPU)
    tiles = {c.label: (-(-c.shape[0] // 128)) * (-(-c.shape[1] // 256)) for c in cases}
    steps = {c.label: -(-c.shape[2] // 64) for c in cases}
    programs = {c.label: c.options["programs"] for c in cases}
    assert any(steps[k] > 3 and tiles[k] > programs[k] for k in tiles)  # wrap-around, and phases across tiles
    assert any(c.shape[2] % 64 for c in cases) and any(c.shape[0] % 128 and c.shape[1] % 256 for c in cases)
    assert not any(c.gpu_only for c in cases)
    assert all(c.gpu_only for c in tasks.get(TASK).cases(runtime.GPU))  # the GPU keeps its own shapes


def test_the_stub_is_todo():
    result = graded("exercises")
    assert result.status == TODO, full_text(result)
    assert "not implemented yet" in result.summary and "exercises/ws_matmul.py" in result.summary


def test_a_kernel_with_no_warp_specialized_region_fails_in_cpu_mode():
    result = graded(str(WRONG / "ch09_ws_no_region"))
    assert result.status == FAIL, full_text(result)
    # every case's own run shows it (the structural probe, at its public shape, would too)
    assert result.summary.startswith("case 'tiny' the kernel has no warp-specialized region: in this case")
    assert "gl.warp_specialize" in full_text(result)


@pytest.mark.parametrize(
    "folder, said",
    [
        # on an H200 it hangs (scripts/gpu_session.sh wrong grades it there, HANG); here the producer's
        # wait on the wrong parity lets it overwrite a slot under a running wgmma
        # (the consumer's wait passes at once on an old phase: it reads a slot whose copy is in flight)
        (
            "ch09_ws_stale_phase",
            (
                "the asynchronous protocol is broken",
                "a wgmma in _consumer (default partition) read a_bufs[",
                "for phase 1 of ready[0]) was still in flight",
            ),
        ),
        # the Hopper release bug: a race a GPU mostly hides
        ("ch09_ws_release_early", ("the asynchronous protocol is broken", "the wgmma reading a_bufs[")),
    ],
)
def test_protocol_mistakes_fail_in_cpu_mode_with_the_checkers_words(folder, said):
    result = graded(str(WRONG / folder))
    text = full_text(result)
    assert result.status == FAIL, text
    for piece in said:
        assert piece in text, (piece, text)


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
def test_the_gpu_cases_run_on_hopper_only_and_the_cpu_ones_everywhere(monkeypatch, major, runs):
    monkeypatch.setattr(runtime, "gpu_info", lambda: _Info(major))
    spec = tasks.get(TASK)
    assert spec.runs_here(runtime.GPU) is runs
    assert bool(spec.all_cases(runtime.GPU)) is runs
    assert spec.runs_here(runtime.CPU) and spec.all_cases(runtime.CPU)


def test_an_unsupported_triton_is_named_before_anything_runs(monkeypatch):
    monkeypatch.setattr(runtime, "triton_version", lambda: (3, 5, 0))
    result = grader.grade_task(TASK, source="solutions", seed=SEED)
    assert result.status == FAIL
    assert "need Triton 3.6 to 3.9" in result.summary and "gl.warp_specialize" in result.summary


# a value-neutral construct no simulator can run: inline PTX
_INLINE_ASM = (
    "        acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=layout)\n",
    "        acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=layout)\n"
    '        acc = gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [acc], dtype=gl.float32, is_pure=True, '
    "pack=1)\n",
)


def test_what_the_simulator_cannot_run_needs_a_gpu_in_the_report_the_exit_code_and_progress(tmp_path, cli):
    source = (ROOT / "solutions" / f"{TASK}.py").read_text()
    assert _INLINE_ASM[0] in source
    (tmp_path / f"{TASK}.py").write_text(source.replace(*_INLINE_ASM, 1))
    result = grader.grade_task(TASK, source=tmp_path, seed=SEED)
    assert result.status == NEEDS_GPU, full_text(result)
    assert "CPU mode cannot run this kernel: gl.inline_asm_elementwise is not simulated" in result.summary
    assert "grade this file on a Hopper GPU" in full_text(result)
    assert report.LABEL[NEEDS_GPU] == "GPU" and report.settled(result)
    assert "1 of 2 tasks pass; 1 need a Hopper GPU" in report.text([result, grader.TaskResult("x", "pass", "ok")])
    done = cli("check", TASK, "--source", str(tmp_path), "--seed", str(SEED))
    assert done.returncode == 0, done.stdout + done.stderr  # nothing is wrong: the cases need another machine
    assert done.stdout.startswith("GPU   ws_matmul CPU mode cannot run this kernel")
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
    assert {p.parent.name for p in WRONG.glob(f"*/{TASK}.py")} == {
        "ch09_ws_no_region",
        "ch09_ws_stale_phase",
        "ch09_ws_release_early",
    }


def test_each_protocol_mistake_fails_the_grader_in_cpu_mode(tmp_path):
    """Every mistake of tests/test_gluon_cpu.py, made in a copy of the solution and graded as a learner's
    file: each FAILs with the checker's words (each case runs its own seed and order of events)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gluon_cpu_tests", ROOT / "tests" / "test_gluon_cpu.py")
    mistakes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mistakes)
    for name, (*edit, said) in mistakes.MISTAKES.items():
        source = (ROOT / "solutions" / f"{TASK}.py").read_text()
        for old, new in edit[0] if len(edit) == 1 else [edit]:
            source = source.replace(old, new, 1)
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"{TASK}.py").write_text(source)
        result = grader.grade_task(TASK, source=folder, seed=SEED)
        text = full_text(result)
        said = said if isinstance(said, tuple) else (said,)
        assert result.status == FAIL, (name, text)
        assert any(piece in text for piece in said), (name, text)


@pytest.mark.parametrize(
    "drop, expected",
    [
        ("mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)",
         "no mbarrier.expect announced the bytes of this round"),
        # the producer runs a round ahead: its next expect comes before this round's phase completed
        ("mbarrier.wait(empty.index(s), phase ^ 1)", "is a wait missing"),
    ],
)  # fmt: skip
def test_a_protocol_step_left_out_is_named_by_the_simulator(drop, expected):
    """The ring's steps left out, as notebook 09's variants leave them out: the simulator runs the cases
    first and names the broken step (before 2026-12-05 CPU mode saw only their trace in the PTX, which
    judge_ws_matmul still reads: test_each_structural_rule_bites)."""
    variant = lesson.write_variant(TASK, {drop: "pass"})
    result = grader.grade_task(TASK, source=variant.folder, seed=SEED)
    assert result.status == FAIL and expected in result.summary, full_text(result)


def test_a_compile_error_says_what_the_compiler_said():
    """A dropped accumulator (warpgroup_mma_wait's result not kept) fails to compile; the message keeps
    the compiler's own sentence, not only the outer call's source line."""
    old = "acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))"
    variant = lesson.write_variant(TASK, {old: "warpgroup_mma_wait(num_outstanding=1, deps=(acc,))"})
    result = grader.grade_task(TASK, source=variant.folder, seed=SEED)
    assert result.status == FAIL and result.summary.endswith("the kernel does not compile"), full_text(result)
    assert any("acc" in line and "type" in line for line in result.details), full_text(result)


def test_a_kernel_body_that_computes_with_torch_on_the_host_fails(tmp_path):
    """In CPU mode the simulator runs a kernel's body as Python in threads of its own, where the
    launcher's torch guard does not reach: a launcher that hands a "kernel" the host tensors (and
    launches the honest kernel only at the structural probe's public shape) must still fail."""
    source = (
        (ROOT / "solutions" / f"{TASK}.py")
        .read_text()
        .replace("def ws_matmul(a, b, out, sms=None):", "def honest_ws_matmul(a, b, out, sms=None):")
    )
    source += (
        "\n\n@gluon.jit\ndef cheat_kernel(tensors, N_TILES: gl.constexpr):\n"
        "    tensors[2].copy_(tensors[0] @ tensors[1])\n\n\n"
        "def ws_matmul(a, b, out, sms=None):\n"
        "    if a.shape[0] != 1024:  # not the probe's shape\n"
        "        cheat_kernel[(1,)]((a, b, out), N_TILES=1)\n"
        "        return out\n"
        "    return honest_ws_matmul(a, b, out, sms)\n"
    )
    (tmp_path / f"{TASK}.py").write_text(source)
    result = grader.grade_task(TASK, source=tmp_path, seed=SEED)
    assert result.status == FAIL, full_text(result)
    said = "case 'tiny' torch compute in the kernel body: the kernel body called torch `matmul`"
    assert result.summary.startswith(said), full_text(result)


def test_what_the_simulator_cannot_run_still_has_its_structure_checked(tmp_path):
    """A construct the simulator lacks stops the cases, not the structural checks: a kernel with no
    warp-specialized region fails, inline PTX or not (GPU would exit 0 and read as settled)."""
    source = (WRONG / "ch09_ws_no_region" / f"{TASK}.py").read_text()
    assert _INLINE_ASM[0] in source
    (tmp_path / f"{TASK}.py").write_text(source.replace(*_INLINE_ASM))  # in every tile loop it has
    result = grader.grade_task(TASK, source=tmp_path, seed=SEED)
    assert result.status == FAIL and "the kernel has no warp-specialized region" in result.summary, full_text(result)


def test_a_misused_barrier_is_a_failure_not_a_gap_of_the_simulator(tmp_path):
    """A wait on the barrier array itself (.index(s) forgotten) would not compile for a GPU: FAIL, with
    the fix, not "needs a GPU"."""
    wait = "            mbarrier.wait(ready.index(s), (count // NUM_BUFFERS) & 1)"
    source = (ROOT / "solutions" / f"{TASK}.py").read_text()
    assert wait in source
    (tmp_path / f"{TASK}.py").write_text(source.replace(wait, wait.replace("ready.index(s)", "ready"), 1))
    result = grader.grade_task(TASK, source=tmp_path, seed=SEED)
    assert result.status == FAIL, full_text(result)
    assert "the kernel does what compiled Gluon refuses" in result.summary
    assert "index the barrier array first (.index(s))" in result.summary


def test_the_warp_specialized_kernel_cannot_be_kept_for_the_probe_alone(tmp_path):
    """The structural checks compile one launch at a public shape (WS_PROBE); a launcher that launches
    its Gluon kernel only there and a plain Triton kernel for the cases fails on the cases' own runs."""
    source = (
        (ROOT / "solutions" / f"{TASK}.py")
        .read_text()
        .replace("def ws_matmul(a, b, out, sms=None):", "def honest_ws_matmul(a, b, out, sms=None):")
    )
    source = (
        "import triton.language as tl\n"
        + source
        + """

@triton.jit
def plain_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :], mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc = tl.dot(a, b, acc)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


def ws_matmul(a, b, out, sms=None):
    M, K = a.shape
    N = b.shape[1]
    if M != 1024:  # not the probe's shape: a plain kernel does the work
        plain_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, b, out, M, N, K, BM=32, BN=32, BK=32)
        return out
    return honest_ws_matmul(a, b, out, sms)
"""
    )
    (tmp_path / f"{TASK}.py").write_text(source)
    result = grader.grade_task(TASK, source=tmp_path, seed=SEED)
    assert result.status == FAIL, full_text(result)
    assert "the kernel has no warp-specialized region: in this case no Gluon kernel ran" in result.summary, full_text(
        result
    )
