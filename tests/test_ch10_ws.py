"""Chapter 10's step 4, ws_compression: the capstone's kernel in Gluon, graded on a Hopper GPU, and in
CPU mode on course_lib's Gluon simulator (values and the barrier protocol), then checked for structure
(warp specialization as chapter 09's, two launches, the user tile read in the candidate kernel's
epilogue). Each mistake has a wrong submission that fails in CPU mode, with the simulator's words where
the protocol breaks and the values' where the arithmetic is wrong.

    python -m course_lib check ws_compression --source tests/wrong/ch10_ws_broadcast_kernel
"""

from __future__ import annotations

import functools

import pytest
import torch
from conftest import GOOD, WRONG

from course_lib import grader
from course_lib.grader import FAIL, PASS, TODO
from course_lib.tasks import ch10_warp_specialized as ch10ws

TASK = "ws_compression"
SEED = 5


def full_text(result: grader.TaskResult) -> str:
    return "\n".join([result.summary, *result.details])


@functools.cache
def graded(source: str) -> grader.TaskResult:
    return grader.grade_task(TASK, source=source, seed=SEED)


def test_the_solution_passes_in_cpu_mode_and_its_structure_too():
    result = graded("solutions")
    assert result.status == PASS, full_text(result)
    text = full_text(result)
    assert "the cases ran in course_lib's Gluon simulator (CPU mode)" in text and result.seconds < 60
    assert "`capstone_pingpong_kernel` compiled for sm_90" in text and "(its last launch)" in text
    assert "ttg.warp_specialize with 2 worker partition(s)" in text  # a consumer warpgroup and the producer


def test_the_stub_is_todo():
    result = graded("exercises")
    assert result.status == TODO and "not implemented yet" in result.summary, full_text(result)


@pytest.mark.parametrize(
    "folder, status, summary",
    [
        # wrong values, seen now that the cases run (until 2026-12-05 only the structure was judged here)
        ("ch10_ws_no_user", FAIL, "the output is the candidate GEMM alone"),
        ("ch10_ws_broadcast_kernel", FAIL, "the launcher makes 3 launches, not 2"),
        ("ch10_ws_user_by_candidate", FAIL, "candidates get another user's part"),  # right structure, wrong values
        ("ch10_ws_tile_n_fastest", FAIL, "_tile does not put the M tiles of one (batch, N tile) next to each other"),
        # the solution as it is now (the user tile copied by TMA), with one change in _copy_user_tile each
        ("ch10_ws_copy_by_candidate", FAIL, "elements are wrong"),  # user_out[b]: past U, zeros
        ("ch10_ws_copy_first_user", FAIL, "candidates get another user's part"),  # FAILs on the H200 too
        # HANGs on the H200 (results/): here the simulator names who waits on what
        ("ch10_ws_copy_bytes_twice", FAIL, "the kernel deadlocks"),
        ("ch10_ws_copy_no_expect", FAIL, "no mbarrier.expect announced the bytes of this round on it"),
        # right, another way (tests/good): M tiles walked down and back up
        ("ch10_ws_tile_serpentine", PASS, "cases (bfloat16, float16) passed"),
    ],
)
def test_wrong_submissions(folder, status, summary):
    result = graded(str((GOOD if folder in GOOD_FOLDERS else WRONG) / folder))
    assert result.status == status, full_text(result)
    assert summary in result.summary, full_text(result)


def test_the_padded_inputs_keep_the_values_and_align_the_rows():
    inputs = ch10ws.ws_inputs(ch10ws.WS_PROBE, torch.Generator().manual_seed(1))
    for name in ("w_u", "w_c"):
        w = inputs[name]
        assert (w.stride(0) * w.element_size()) % 16 == 0 and w.data_ptr() % 16 == 0
        assert w.stride(0) >= w.shape[1]
    B, U, M, Ku, Kc, N = ch10ws.WS_PROBE.shape
    assert inputs["w_u"].shape == (M, Ku) and inputs["w_c"].shape == (M, Kc)
    x = {k: (v.double() if v.is_floating_point() else v) for k, v in inputs.items() if k != "out"}
    expected = ch10ws.ws_reference(**x)  # (B, M, N), float64
    w = torch.cat([x["w_u"], x["w_c"]], dim=1)  # the padded views hold W's values: the definition again
    naive = torch.matmul(w, torch.cat([x["e_user"][x["user_of"]], x["e_cand"]], dim=1))
    assert expected.shape == (B, M, N) and torch.allclose(expected, naive, atol=1e-10)


GOOD_FOLDERS = {"ch10_ws_tile_serpentine"}


def test_the_tile_order_check_names_each_mistake():
    def right(t, m, n):
        return t // (m * n), (t % (m * n)) % m, (t % (m * n)) // m

    def serpentine(t, m, n):  # pid_m down, then back up: an E tile's readers still side by side
        rest = t % (m * n)
        i, pid_n = rest % m, rest // m
        return t // (m * n), i + (pid_n % 2) * (m - 1 - 2 * i), pid_n

    assert ch10ws.judge_tile_order(ch10ws.tile_order(right)) is None
    assert ch10ws.judge_tile_order(ch10ws.tile_order(serpentine)) is None
    n_fastest = ch10ws.judge_tile_order(ch10ws.tile_order(lambda t, m, n: (t // (m * n), (t % (m * n)) // n, t % n)))
    assert "num_pid_m=40, num_pid_n=8" in n_fastest[1], n_fastest  # where the order changes what is shared
    assert "312 apart, more than a wave of 132" in n_fastest[2][0] and "the same tile of E" in n_fastest[2][1]
    assert ch10ws.judge_tile_order(None) is None  # a _tile that cannot run as plain Python: judged on a GPU only
    cases = {
        "does not number every": lambda t, m, n: (0, 0, 0),  # every tile the same
        "next to each other": lambda t, m, n: (t // (m * n), (t % (m * n)) // n, (t % (m * n)) % n),  # N fastest
        "must return (batch, pid_m, pid_n)": lambda t, m, n: (t, 0),
        "raised": lambda t, m, n: 1 // 0,
    }
    for words, tile_fn in cases.items():
        verdict = ch10ws.judge_tile_order(ch10ws.tile_order(tile_fn))
        assert verdict is not None and not verdict[0] and words in verdict[1], (words, verdict)


def _variants():
    """scripts/capstone_variants.py: step 4's variants, timed on the H200 and kept out of the solution."""
    from conftest import ROOT

    from course_lib import sources

    return sources.load_file(ROOT / "scripts" / "capstone_variants.py", "ws_compression", "capstone_variants")[0]


def test_the_one_launch_kernel_has_its_flags_and_passes_the_structure_checks():
    """The one-launch variant (scripts/capstone_variants.py: the user GEMM's tiles, then the candidates',
    in one kernel): one launch, warp-specialized like the rest, a release by each thread of a user tile's
    flag and an acquire before a candidate reads the tile."""
    import re

    from course_lib import compilation

    ws = _variants()
    inputs = ch10ws.ws_inputs(ch10ws.WS_PROBE, torch.Generator().manual_seed(0))
    launches = compilation.recorded_launches(lambda **kw: ws.ws_compression(**kw, one=True), **inputs, sms=132)
    assert [launch[0].__name__ for launch in launches] == ["capstone_one_launch_kernel"]
    ptx = compilation.compile_launch(launches[0]).asm["ptx"]
    assert re.search(r"\b(atom|red)\.global\.gpu\.release\.add", ptx), "no release of a user tile's flag"
    assert re.search(r"\bld\.global\.gpu\.acquire|\batom\.global\.gpu\.acquire", ptx), "no acquire of a flag"
    facts = ch10ws.probe_ws_compression(ws, lambda **kw: ws.ws_compression(**kw, one=True))
    assert facts["launches"] == 1
    failed = [summary for ok, summary, _ in ch10ws.judge_ws_compression(facts) if not ok]
    assert not failed, failed


def test_the_stationary_experiment_compiles_and_keeps_each_program_on_one_m_tile():
    """scripts/ws_stationary.py (an experiment: W_c's tile resident, the ring carrying E only) compiles for
    sm_90, warp-specialized, with no spills; its grid is a multiple of the M tiles, so that every tile of
    a program has the same pid_m; and it refuses a shape whose resident tile does not fit."""
    import importlib.util

    from conftest import ROOT

    from course_lib import compilation

    spec = importlib.util.spec_from_file_location("ws_stationary", ROOT / "scripts" / "ws_stationary.py")
    st = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(st)
    bf16 = torch.bfloat16
    for M, batches, grid in ((256, 4, 8), (256, 200, 132), (640, 200, 130)):
        a, e = torch.zeros(M, 256, dtype=bf16), torch.zeros(batches, 256, 128, dtype=bf16)
        c, user = torch.zeros(batches, M, 128, dtype=bf16), torch.zeros(3, M, 128)
        user_of = torch.zeros(batches, dtype=torch.int64)
        launches = compilation.recorded_launches(st.gemm, a, e, c, user, user_of, sms=132)
        assert launches[-1][2]["grid"] == (grid,), (M, batches, launches[-1][2]["grid"])
    compiled = compilation.compile_launch(launches[-1])
    assert "ttg.warp_specialize" in compiled.asm["ttgir"] and compiled.metadata.shared <= 227 * 1024
    assert "STL" not in compilation.sass(compiled)
    wide = st.fits(torch.zeros(433, 872, dtype=bf16), torch.zeros(1, 872, 256, dtype=bf16))
    assert wide and "shared memory" in wide
    with pytest.raises(ValueError, match="cannot take this shape"):
        st.gemm(torch.zeros(433, 872, dtype=bf16), torch.zeros(1, 872, 256, dtype=bf16), torch.zeros(1, 433, 256),
                torch.zeros(1, 433, 256), torch.zeros(1, dtype=torch.int64))  # fmt: skip


def _two_roundings(case: ch10ws.Case, seed: int, shift_user: bool = False) -> tuple:
    """What step 4 computes, in torch on the CPU, and the float64 reference: the user's part rounded to
    the output's dtype (user_out), added in float32 to the candidate's part, the sum rounded on its store."""
    x = ch10ws.ws_inputs(case, torch.Generator().manual_seed(seed))
    exact = {k: (v.double() if v.is_floating_point() else v) for k, v in x.items() if k != "out"}
    user_of = x["user_of"]
    if shift_user:  # the wrong user: the next one (a GPU-only mistake in the kernel)
        user_of = (user_of + 1) % exact["e_user"].shape[0]
    user_out = torch.matmul(exact["w_u"], exact["e_user"]).to(case.dtype)
    got = (torch.matmul(exact["w_c"], exact["e_cand"]).float() + user_out.float()[user_of]).to(case.dtype)
    return got, ch10ws.ws_reference(**exact)


SMALL_WS_CASES = [c for c in ch10ws.WS_CASES if c[0][0] * c[0][2] * c[0][5] < 2_000_000]


@pytest.mark.parametrize("shape, dtype, label, params", SMALL_WS_CASES, ids=[c[2] for c in SMALL_WS_CASES])
def test_two_roundings_pass_the_tolerance_and_a_wrong_user_does_not(shape, dtype, label, params):
    """Step 4's tolerance admits a right kernel that rounds user_out to 16 bits before the add (the
    solution's), at every small case and seed; the same with each candidate given the next user fails."""
    from course_lib.compare import compare
    from course_lib.tasks import Case

    case = Case(shape, dtype, label, params=params)
    tol = ch10ws.TWO_ROUNDINGS_TOLERANCE[dtype]
    assert ch10ws.TWO_ROUNDINGS_TOLERANCE is grader_tolerance()  # the one the grader uses
    for seed in range(5):
        got, expected = _two_roundings(case, seed)
        verdict = compare(got, expected, tol, poisoned=False)
        assert verdict.ok, f"{label} seed {seed}: {verdict.summary}"
    if shape[1] > 1:  # more than one user: a wrong one changes the values
        got, expected = _two_roundings(case, 0, shift_user=True)
        assert not compare(got, expected, tol, poisoned=False).ok


def grader_tolerance():
    from course_lib import tasks

    return tasks.get(TASK).tolerance
