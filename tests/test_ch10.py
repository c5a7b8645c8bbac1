"""Chapter 10's capstone tasks, split_user_gemm, pad_k and fused_broadcast: the solutions pass, the stubs
report TODO, each deliberately wrong submission in tests/wrong/ch10_*/ fails on the cases it should
with a message that names the mistake, and the checks behind them (the work count, the zero padding
with fresh allocations poisoned, the fusion check's probe and judge) tell right from wrong.

    python -m course_lib check fused_broadcast --source tests/wrong/ch10_broadcast_materialized

Every grading of this file runs once, in one pool (``graded``): on a 2-core CPU that keeps the file
near half a minute.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from conftest import GOOD, ROOT, WRONG, requires_interpreter
from test_ch06 import case_name, failed_cases, full_text

from course_lib import grader, hooks, runtime, sources, stubs, tasks
from course_lib.compare import compare
from course_lib.grader import FAIL, PASS, TODO
from course_lib.lessons import ch10 as lesson10
from course_lib.tasks import ch10_capstone as ch10
from course_lib.tasks import structure

SEED = 2024  # fixed, so that a failure of this table replays exactly
SPLIT, PAD, FUSED = "split_user_gemm", "pad_k", "fused_broadcast"
TASKS = (SPLIT, PAD, FUSED)
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16


def _more_candidates_than_users(case: tasks.Case) -> bool:
    return case.shape[0] > case.shape[1]


def _equal_groups_differ(case: tasks.Case) -> bool | None:
    """Does b // (B // U) give some candidate another user? None where the spread is random."""
    if not case.params:
        return None
    B, U = case.shape[:2]
    user_of = ch10.user_of_tensor(case, torch.Generator())
    return not torch.equal(torch.clamp(torch.arange(B) // (B // U), max=U - 1), user_of)


def _tile_rows_fit(case: tasks.Case) -> bool:
    """M is a multiple of the solution's BLOCK_M: no tile-row overhangs M (a missing M mask is harmless)."""
    module, _ = sources.load_file(sources.task_path(FUSED, "solutions"), FUSED)
    B, U, M, Ku, Kc, N = case.shape
    config = module.pointer_config(M, N, max(Ku, Kc), torch.empty((), dtype=case.dtype).element_size())
    return M % config["BLOCK_M"] == 0


def _not_aligned(case: tasks.Case) -> bool:
    M, _, Kc = case.shape
    itemsize = torch.empty((), dtype=case.dtype).element_size()
    return (Kc * itemsize) % 16 != 0 and M > 1 or case.label in ("tiny", "misaligned")


# folder under tests/wrong -> (task, pieces the grader's message must hold, case -> must it fail?).
# None: the case may fail or pass.
# fmt: off
WRONG_SUBMISSIONS = {
    "ch10_concat_gemm": (SPLIT, ("all 8 cases are right, but split_user_gemm does 20.6x the decomposed work",
                                 "the user GEMM runs once per candidate", "counted 673,792 units of work",
                                 "aten.bmm 540,672", "2*M*N*(U*Ku + B*Kc) = 32,768", "201 GFLOP against 464 GFLOP"),
                         lambda c: False),
    # a broadcast multiply and a sum, which a FLOP counter sees as no FLOPs, beside a dummy matmul
    "ch10_split_mul_sum": (SPLIT, ("split_user_gemm does 19.1x the decomposed work", "once per candidate",
                                   "aten.mul 262,144", "broadcast multiply and a sum"), lambda c: False),
    # equal groups are right where every user has the same number of candidates (or there is one user)
    "ch10_equal_groups": (SPLIT, ("candidates get another user's part", "b // (B // U)",
                                  "look each candidate's user up in user_of"), _equal_groups_differ),
    "ch10_pad_contiguous": (PAD, ("case 'published K' its rows are 866 elements (1732 bytes) apart, no multiple "
                                  "of 16 bytes", "872 elements here (1744 bytes)", "w_c.contiguous()"),
                            lambda c: True if _not_aligned(c) else None),
    # fresh memory may be zero by luck in a case; the probe poisons fresh allocations, so it never is there
    "ch10_pad_empty": (PAD, ("the padding is not zero", "torch.zeros"), lambda c: None),
    "ch10_user_by_candidate": (FUSED, ("out-of-bounds access", "a load outside the memory",
                                       "Nearest tensor: `user_ptr`"),
                               lambda c: True if _more_candidates_than_users(c) else None),
    "ch10_no_m_mask": (FUSED, ("out-of-bounds access", "Nearest tensor: `out_ptr`"),
                       lambda c: None if _tile_rows_fit(c) else True),
    "ch10_user_twice": (FUSED, ("the user part is added twice",), lambda c: True),
    "ch10_no_user": (FUSED, ("the candidate GEMM alone", "the user part user_out[user_of[b]] is missing"),
                     lambda c: True),
    # out read back in fp16: the candidate part is rounded before the user part is added, which the fp16
    # limit sees where the parts cancel (not in the tiniest cases); fp32 passes the values
    "ch10_broadcast_kernel": (FUSED, ("candidate part rounded to float16 before the user part was added",
                                      "rounded twice"),
                              lambda c: False if c.dtype == F32 else None),
    "ch10_broadcast_materialized": (FUSED, ("all 11 cases are right, but the kernels touched",
                                            "bytes of intermediates", "a (B, M, N) intermediate (10240 elements",
                                            "908 MB, 0.213 ms at 4.27 TB/s"),
                                    lambda c: False),
}
# fmt: on
GOOD_SUBMISSIONS = {
    "ch10_pad_16_elements": PAD,
    "ch10_split_einsum_loop": SPLIT,
    "ch10_split_runs_of_users": SPLIT,  # torch.unique_consecutive (the method form passed, the function failed)
}


@pytest.fixture(scope="module")
def graded() -> dict:
    """(task, source) -> TaskResult for every grading below, graded in one pool."""
    jobs = [grader.Job("", task, sources.resolve("solutions")) for task in TASKS]
    jobs += [grader.Job("", task, sources.resolve("exercises")) for task in TASKS]
    if runtime.is_cpu():  # out-of-bounds loads and the fusion check are seen in the interpreter
        jobs += [grader.Job("", task, WRONG / folder) for folder, (task, _, _) in WRONG_SUBMISSIONS.items()]
    jobs += [grader.Job("", task, GOOD / folder) for folder, task in GOOD_SUBMISSIONS.items()]
    results = grader.grade_jobs(jobs, seed=SEED)
    return {(job.task, Path(job.source).name): result for job, result in zip(jobs, results)}


@pytest.mark.parametrize("task", TASKS)
def test_solution_passes(graded, task):
    result = graded[(task, "solutions")]
    assert result.status == PASS, full_text(result)
    assert result.cases_passed == result.cases_total >= 8
    text = full_text(result)
    expected = {
        SPLIT: "decomposed: 35,840 units of work counted, 32,768 FLOPs decomposed",
        PAD: "zero padding, also with fresh allocations filled with NaN",
        FUSED: "fused: padded W: 3 launches (pad_rows_kernel, capstone_gemm_kernel, capstone_gemm_kernel)"
        if runtime.is_cpu()
        else "fusion checked in CPU mode",
    }[task]
    assert expected in text, text


@pytest.mark.parametrize("task", TASKS)
def test_untouched_stub_reports_todo(graded, task):
    assert stubs.is_untouched(task), f"exercises/{task}.py was edited: regenerate it from solutions/"
    result = graded[(task, "exercises")]
    assert result.status == TODO, full_text(result)
    assert result.summary.startswith(stubs.NOT_IMPLEMENTED) and f"exercises/{task}.py" in result.summary


@requires_interpreter
@pytest.mark.parametrize("folder", sorted(WRONG_SUBMISSIONS))
def test_wrong_submission_is_rejected(graded, folder):
    task, pieces, should_fail = WRONG_SUBMISSIONS[folder]
    result = graded[(task, folder)]
    text = full_text(result)
    assert result.status == FAIL, text
    for piece in pieces:
        assert piece in text, f"expected {piece!r} in the grader's message:\n{text}"
    cases = tasks.get(task).all_cases(runtime.MODE)
    failed = failed_cases(result)
    must_fail = {case_name(c) for c in cases if should_fail(c) is True}
    must_pass = {case_name(c) for c in cases if should_fail(c) is False}
    assert must_fail <= failed, f"these cases should have failed: {must_fail - failed}\n{text}"
    assert not failed & must_pass, f"these cases should have passed: {failed & must_pass}\n{text}"


def test_every_ch10_wrong_submission_is_listed():
    on_disk = {p.parent.name for p in WRONG.glob("ch10_*/*.py") if p.stem in TASKS}  # step 4's are its own
    assert on_disk == set(WRONG_SUBMISSIONS)


@pytest.mark.parametrize("folder", sorted(GOOD_SUBMISSIONS))
def test_other_right_ways_pass(graded, folder):
    """Only the bytes matter: rows padded to a multiple of 16 elements (by F.pad) are right too."""
    result = graded[(GOOD_SUBMISSIONS[folder], folder)]
    assert result.status == PASS, full_text(result)


# --------------------------------------------------------------------------------------------------
# cases, inputs, reference, tolerance


def test_cases_cover_what_the_brief_asks():
    for mode in (runtime.CPU, runtime.GPU):
        for task in (SPLIT, FUSED):
            cases = tasks.get(task).all_cases(mode)
            assert (1, 1, 1, 1, 1, 1) in {c.shape for c in cases}
            assert any(all(s % 16 for s in c.shape) for c in cases)  # no multiple of any block size
            assert any(1 in c.options.get("counts", ()) for c in cases)  # a user with one candidate
            assert any("per_user" in c.options for c in cases) and any(not c.params for c in cases)
        assert {F32, F16, BF16} == {c.dtype for c in tasks.get(SPLIT).all_cases(mode)}  # torch: bf16 anywhere
    cpu = tasks.get(FUSED).all_cases(runtime.CPU)
    assert {c.dtype for c in cpu} == {F32, F16}  # the interpreter's tl.dot is wrong on bf16
    assert {"padded W", "aligned W", "misaligned", "long K", "large"} <= {c.label for c in cpu}
    gpu = tasks.get(FUSED).all_cases(runtime.GPU)
    assert (140, 2, 433, 1178, 866, 256) in {c.shape for c in gpu if c.dtype == BF16}
    assert all(c.gpu_only for c in gpu if c.dtype == BF16)
    pad = tasks.get(PAD).all_cases(runtime.CPU)
    assert {(33, 5, 866), (64, 1178, 866), (9, 4, 24)} <= {c.shape for c in pad}
    assert {c.dtype for c in pad} == {F32, F16, BF16}


@pytest.mark.parametrize(
    ("params", "counts"),
    [
        ((("per_user", 70),), [70] * 14 + [44]),  # the published spread: 1024 = 14 * 70 + 44
        ((("counts", (1, 1, 4, 1, 2)),), [1, 1, 4, 1, 2]),
    ],
)
def test_user_of_spreads_candidates_as_asked(params, counts):
    B, U = sum(counts), len(counts)
    case = tasks.Case((B, U, 1, 1, 1, 1), F32, "spread", params=params)
    user_of = ch10.user_of_tensor(case, torch.Generator().manual_seed(0))
    assert user_of.dtype == torch.int64 and torch.equal(torch.bincount(user_of, minlength=U), torch.tensor(counts))


def test_random_spread_gives_every_user_a_candidate():
    case = tasks.Case((20, 7, 1, 1, 1, 1), F32, "random")
    for seed in range(20):
        user_of = ch10.user_of_tensor(case, torch.Generator().manual_seed(seed))
        assert bool((user_of[1:] >= user_of[:-1]).all())  # sorted
        assert torch.bincount(user_of, minlength=7).min() >= 1 and user_of.max() == 6


def test_reference_is_the_definition():
    case = tasks.Case((12, 3, 17, 20, 9, 11), F32, "tail")
    made = {k: (v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
            for k, v in ch10.split_inputs(case, torch.Generator().manual_seed(0)).items()}  # fmt: skip
    assert torch.allclose(ch10.capstone_reference(**made), ch10.naive_eager(**made), rtol=1e-12, atol=1e-12)
    assert torch.allclose(ch10.decomposed_eager(**made), ch10.naive_eager(**made), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_torch_decomposition_passes_step_1_and_one_rounding_passes_step_3(dtype):
    """Step 1 in torch rounds three times (each GEMM, then the sum): its limits allow that. Step 3 rounds
    once; rounding the candidate part first fails its limits where the parts cancel (in fp16)."""
    case = tasks.Case((64, 4, 48, 96, 40, 32), dtype, "large")
    for seed in range(3):
        made = ch10.split_inputs(case, torch.Generator().manual_seed(seed))
        exact = ch10.capstone_reference(**{k: (v.double() if isinstance(v, torch.Tensor) and
                                               v.is_floating_point() else v) for k, v in made.items()})  # fmt: skip
        assert compare(ch10.decomposed_eager(**made), exact, ch10.SPLIT_TOLERANCE[dtype], poisoned=False).ok
        assert compare(exact.to(dtype), exact, ch10.BROADCAST_TOLERANCE[dtype], poisoned=False).ok
    if dtype == F16:
        user_out, cand = ch10._parts({k: (v.double() if isinstance(v, torch.Tensor) and v.is_floating_point()
                                          else v) for k, v in made.items()})  # fmt: skip
        twice = (cand.to(dtype).double() + user_out[made["user_of"]]).to(dtype)
        assert not compare(twice, exact, ch10.BROADCAST_TOLERANCE[dtype], poisoned=False).ok


def _float64(case, seed=0):
    made = ch10.split_inputs(case, torch.Generator().manual_seed(seed))
    return {k: (v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v) for k, v in made.items()}


@pytest.mark.parametrize(
    ("mistake", "sentence"),
    [
        (lambda u, c, uo, B, U: c, "the candidate GEMM alone"),
        (lambda u, c, uo, B, U: c + 2 * u[uo], "added twice"),
        (lambda u, c, uo, B, U: u[uo], "user_out[user_of[b]] alone"),
        (lambda u, c, uo, B, U: c.half().double() + u[uo], "rounded twice"),
        (lambda u, c, uo, B, U: c + u[torch.clamp(torch.arange(B) // (B // U), max=U - 1)], "b // (B // U)"),
        (lambda u, c, uo, B, U: c + u[torch.clamp(uo + 1, max=U - 1)], "index user_out by user_of[b]"),
    ],
)
def test_diagnosis_names_each_mistake(mistake, sentence):
    case = tasks.Case((20, 4, 33, 40, 18, 17), F16, "tail", params=(("counts", (2, 9, 1, 8)),))
    inputs = _float64(case)
    user_out, cand = ch10._parts(inputs)
    got = mistake(user_out, cand, inputs["user_of"], 20, 4).to(F16).double()
    found = ch10.capstone_diagnose(inputs, got, case)
    assert found is not None and sentence in found, found


def test_diagnosis_stays_quiet_on_a_right_answer():
    for case in tasks.get(FUSED).cases(runtime.CPU):
        inputs = _float64(case)
        assert ch10.capstone_diagnose(inputs, ch10.capstone_reference(**inputs), case) is None, case


# --------------------------------------------------------------------------------------------------
# cost model and benchmarks


def test_floors_reproduce_the_recorded_figures():
    """The complete counts (every input once, both GEMMs) beside GPU_FACTS.md's figures, which count
    E_cand and out, and the candidate GEMM, only."""
    bandwidth, cublas = 4.27e12, 677e12  # copy bytes/s; cuBLAS fp16 8192^3 in the same run, FLOP/s
    spec = tasks.get(FUSED)
    published = ch10.bench_case("published")
    assert spec.bytes_moved(published) / bandwidth * 1e3 == pytest.approx(0.162, abs=5e-4)
    assert spec.flops(published) / cublas * 1e3 == pytest.approx(0.296, abs=5e-4)
    B, U, M, Ku, Kc, N = published.shape
    assert (B * Kc * N + B * M * N) * 2 / bandwidth * 1e3 == pytest.approx(0.159, abs=5e-4)  # the table's
    assert 2 * M * N * B * Kc / cublas * 1e3 == pytest.approx(0.290, abs=5e-4)
    course = ch10.bench_case("course")
    assert spec.bytes_moved(course) / bandwidth * 1e3 == pytest.approx(0.063, abs=5e-4)
    assert spec.flops(course) / cublas * 1e3 == pytest.approx(0.052, abs=5e-4)
    many = ch10.bench_case("many users")
    assert spec.bytes_moved(many) / bandwidth * 1e3 == pytest.approx(0.079, abs=5e-4)
    assert spec.flops(many) / cublas * 1e3 == pytest.approx(0.076, abs=5e-4)


def test_bench_cases_and_baselines():
    spec = tasks.get(FUSED)
    assert spec.tensor_cores and spec.compile_modes == ("default", "max-autotune")
    assert spec.baseline is ch10.naive_eager
    shapes = [(c.shape, c.dtype) for c in spec.bench_cases]
    assert shapes == [(ch10.PUBLISHED, BF16), (ch10.PUBLISHED, F16), (ch10.COURSE, BF16), (ch10.MANY_USERS, BF16)]
    assert spec.bench_cases[-1].gpu_only
    for case in spec.bench_cases:  # each spread is what its label says
        counts = ch10._counts(case, torch.Generator().manual_seed(0))
        assert len(counts) == case.shape[1] and sum(counts) == case.shape[0]


def test_bench_variants_on_the_cpu():
    case = tasks.Case((12, 3, 17, 20, 9, 11), F32, "tail")
    variants = ch10._bench_variants(case)
    assert set(variants) == {"decomposed_eager", "best_torch_eager", "decomposed_torch_compile",
                             "decomposed_torch_compile_max-autotune", "cublas_candidate_padded"}  # fmt: skip
    made = ch10.split_inputs(case, torch.Generator().manual_seed(0))
    expected = ch10.capstone_reference(**made)
    assert torch.allclose(variants["decomposed_eager"](**made), expected, atol=1e-5)
    best = variants["best_torch_eager"]
    assert best.config() is None
    assert torch.allclose(best(**made), expected, atol=1e-5)  # W_c padded and the forms timed on the first call
    assert best.config() in ch10.eager_forms(**made, w_padded=torch.zeros(17, 16)), best.config()
    assert torch.allclose(best(**made), expected, atol=1e-5)  # and the fastest form kept after it
    cand = torch.matmul(made["w"][:, made["ku"] :], made["e_cand"])
    assert torch.allclose(variants["cublas_candidate_padded"](**made), cand, atol=1e-5)


@pytest.mark.parametrize("kc", [9, 16, 3])
def test_every_plain_torch_form_computes_the_layer(kc):
    """Each form best_torch_eager may pick is right, where Kc is not a multiple of 8 (the split's thin
    second baddbmm), is one (no second), and is below 8 (all of K in the thin one)."""
    case = tasks.Case((12, 3, 17, 20, kc, 11), F32, "tail")
    made = ch10.split_inputs(case, torch.Generator().manual_seed(1))
    expected = ch10.capstone_reference(**made)
    w, ku = made["w"], made["ku"]
    padded = w.new_zeros(w.shape[0], ch10.padded_width(kc, w.element_size()))
    padded[:, :kc] = w[:, ku:]
    forms = ch10.eager_forms(**made, w_padded=padded)
    assert len(forms) == 3
    for name, form in forms.items():
        assert torch.allclose(form(), expected, atol=1e-5), name


# --------------------------------------------------------------------------------------------------
# the work check and the zero-padding check: judges on facts, probes on real functions


def test_work_judge():
    decomposed, naive = ch10.split_flops(ch10.WORK_PROBE)
    facts = {"work": decomposed, "by_op": {"aten.mm": decomposed}, "python_reads": 0}
    [(ok, _, _)] = ch10.judge_split_work(facts)
    assert ok
    [(ok, summary, details)] = ch10.judge_split_work({**facts, "work": naive, "by_op": {"aten.bmm": naive}})
    assert not ok and "once per candidate" in summary and "aten.bmm 540,672" in details[0]
    [(ok, summary, _)] = ch10.judge_split_work({**facts, "work": 5 * decomposed})
    assert not ok and "more than 4x the decomposed" in summary
    [(ok, summary, details)] = ch10.judge_split_work({**facts, "python_reads": 4096})
    assert not ok and "read 4,096 tensor values into Python" in summary and "torch.matmul" in details[-1]


def test_work_count_sees_every_way_of_writing_the_user_gemm():
    """The count is taken at the dispatcher: a matmul, a broadcast multiply and a sum, a loop of small
    products and values taken into Python are all counted, whatever the FLOP counter sees."""
    made = ch10.split_inputs(ch10.WORK_PROBE, torch.Generator().manual_seed(0))
    w_u, e_user, user_of = made["w"][:, : made["ku"]], made["e_user"], made["user_of"]
    decomposed, naive = ch10.split_flops(ch10.WORK_PROBE)
    ways = {
        "matmul per candidate": lambda: torch.matmul(w_u, e_user[user_of]),
        "multiply and sum": lambda: (w_u[None, :, :, None] * e_user[user_of][:, None]).sum(2),
        "loop of products": lambda: torch.stack([w_u @ e_user[u] for u in user_of.tolist()]),
    }
    for name, way in ways.items():
        _, by_op, _ = ch10.count_work(way)
        assert sum(by_op.values()) >= naive / 2, (name, by_op)
    _, _, reads = ch10.count_work(lambda: [sum(row) for row in e_user.reshape(-1, 4).tolist()])
    assert reads == e_user.numel()
    _, by_op, _ = ch10.count_work(lambda: torch.matmul(w_u, e_user))
    assert sum(by_op.values()) <= decomposed


def test_work_probe_counts_the_solution_and_the_concat():
    module, entry = sources.load_file(sources.task_path(SPLIT, "solutions"), SPLIT)
    assert ch10.probe_split_work(module, entry)["work"] <= ch10.WORK_FACTOR * ch10.split_flops(ch10.WORK_PROBE)[0]
    module, entry = sources.load_file(WRONG / "ch10_concat_gemm" / "split_user_gemm.py", SPLIT)
    assert ch10.probe_split_work(module, entry)["work"] >= ch10.split_flops(ch10.WORK_PROBE)[1]


def test_pad_probe_sees_garbage_padding():
    module, entry = sources.load_file(WRONG / "ch10_pad_empty" / "pad_k.py", PAD)
    facts = ch10.probe_pad_zero(module, entry)
    assert facts["nonzero"] == facts["nan"] == facts["pad_elements"] > 0  # every pad element poisoned
    [(ok, summary, details)] = ch10.judge_pad_zero(facts)
    assert not ok and "the padding is not zero" in summary and "NaN" in details[0]
    module, entry = sources.load_file(sources.task_path(PAD, "solutions"), PAD)
    [(ok, _, _)] = ch10.judge_pad_zero(ch10.probe_pad_zero(module, entry))
    assert ok


@pytest.mark.parametrize(
    ("shape", "strides", "ptr", "shares", "piece"),
    [
        ((33, 866), (866, 1), 0, False, "866 elements (1732 bytes) apart, no multiple of 16 bytes"),
        ((33, 866), (2044, 1), 4, True, "a view of the input W"),
        ((33, 866), (872, 1), 8, False, "starts 8 bytes past a 16-byte boundary"),
        ((33, 866), (1, 33), 0, False, "the columns must be next to each other"),
        ((33, 866), (936, 1), 0, False, "more than 128 bytes"),
    ],
)
def test_pad_layout_problems_are_named(shape, strides, ptr, shares, piece):
    problem = ch10._pad_layout_problem(shape, strides, ptr, 866, 2, shares)
    assert problem is not None and piece in problem[0], problem
    assert ch10._pad_layout_problem(shape, (872, 1), 0, 866, 2, False) is None
    assert ch10._pad_layout_problem(shape, (880, 1), 0, 866, 2, False) is None  # 16 elements: allowed


# --------------------------------------------------------------------------------------------------
# the fusion check: the judge on facts made by hand


def _run(kernel="capstone_gemm_kernel", n=32 * 20 * 16, never=0, once=None, more=0, most=1, loaded=0, user=0):
    once = n - never - more if once is None else once
    return {"kernel": kernel, "never": never, "once": once, "more": more, "most": most, "loaded": loaded,
            "user_loads": user}  # fmt: skip


def _facts(*runs, temp=2560, launches=("capstone_gemm_kernel", "capstone_gemm_kernel")):
    user_gemm = _run(once=0, never=32 * 20 * 16, user=2 * 13 * 16)  # touches no out
    shape = [32, 2, 20, 16, 8, 16]
    return {
        "mode": runtime.CPU,
        "shapes": [{"shape": shape, "label": "aligned W", "launches": list(launches), "runs": [user_gemm, *runs],
                    "temp": temp}],
    }  # fmt: skip


def test_fusion_judge_accepts_a_fused_kernel():
    [(ok, summary, details)] = ch10.judge_fusion(_facts(_run()))
    assert ok and summary == "the broadcast is fused" and "stored out once, read none of it back" in details[0]


def test_fusion_judge_rejects_a_second_kernel_over_out():
    facts = _facts(_run(), _run(kernel="add_user_kernel", more=0, loaded=32 * 20 * 16))
    [(ok, summary, details)] = ch10.judge_fusion(facts)
    assert not ok and "2 kernels wrote or read out (`capstone_gemm_kernel`, `add_user_kernel`)" in summary
    assert "the broadcast is not fused" in summary and "454 MB, 0.106 ms" in details[0]


def test_fusion_judge_rejects_out_stored_twice_or_read_back():
    [(ok, summary, _)] = ch10.judge_fusion(_facts(_run(more=10, most=2)))
    assert not ok and "stored 10 of the 10240 elements of out more than once" in summary
    [(ok, summary, _)] = ch10.judge_fusion(_facts(_run(loaded=5)))
    assert not ok and "loaded 5 elements of out" in summary
    [(ok, summary, _)] = ch10.judge_fusion(_facts(_run(never=7)))
    assert not ok and "7 of the 10240 elements of out were never stored" in summary


def test_fusion_judge_rejects_the_user_gemm_per_candidate():
    [(ok, summary, details)] = ch10.judge_fusion(_facts(_run(user=999)))
    assert not ok and "loaded 999 elements of E_user" in summary and "464 GFLOP" in details[0]


def test_fusion_judge_rejects_a_materialized_broadcast():
    [(ok, summary, _)] = ch10.judge_fusion(_facts(_run(), temp=2560 + 32 * 20 * 16 * 2))
    assert not ok and "a (B, M, N) intermediate" in summary


def test_fusion_judge_passes_on_a_gpu_with_a_note():
    [(ok, summary, details)] = ch10.judge_fusion({"mode": runtime.GPU})
    assert ok and summary == "fusion checked in CPU mode" and "COURSE_MODE=cpu" in details[0]


# --------------------------------------------------------------------------------------------------
# the fusion check: the probe on real launches (in this process), and the descriptor path


def _solution():
    return sources.load_file(sources.task_path(FUSED, "solutions"), FUSED)


@requires_interpreter
def test_probe_sees_one_fused_launch_in_the_solution():
    facts = ch10.probe_fusion(*_solution())
    padded, aligned = facts["shapes"]
    assert padded["launches"] == ["pad_rows_kernel", "capstone_gemm_kernel", "capstone_gemm_kernel"]
    assert aligned["launches"] == ["capstone_gemm_kernel", "capstone_gemm_kernel"]
    for seen in facts["shapes"]:
        B, U, M, Ku, Kc, N = seen["shape"]
        *before, last = seen["runs"]
        assert last["once"] == B * M * N and last["loaded"] == last["user_loads"] == 0
        assert all(r["once"] == r["loaded"] == 0 for r in before)  # the pad and the user GEMM leave out alone
        assert before[-1]["user_loads"] > 0  # the user GEMM reads E_user
        assert seen["temp"] <= ch10.intermediate_allowance(seen["shape"])
    assert aligned["temp"] == 4 * 2 * 20 * 16  # user_out alone, in float32
    [(ok, _, _)] = ch10.judge_fusion(facts)
    assert ok


@requires_interpreter
def test_probe_sees_out_read_back_by_a_second_kernel():
    module, entry = sources.load_file(WRONG / "ch10_broadcast_kernel" / "fused_broadcast.py", FUSED)
    facts = ch10.probe_fusion(module, entry)
    seen = facts["shapes"][1]
    B, U, M, Ku, Kc, N = seen["shape"]
    gemm, add = seen["runs"][-2:]
    assert gemm["once"] == B * M * N and gemm["loaded"] == 0
    assert add["kernel"] == "add_user_kernel" and add["loaded"] == add["once"] == B * M * N
    [(ok, summary, _)] = ch10.judge_fusion(facts)
    assert not ok and "the broadcast is not fused" in summary


@requires_interpreter
def test_descriptor_path_in_the_interpreter():
    """fused_broadcast_tma, the GPU's large-problem path, on a padded W in fp16: the same values."""
    module, _ = _solution()
    case = tasks.Case((6, 2, 40, 13, 70, 32), F16, "padded W", params=(("counts", (2, 4)),))
    made = ch10.broadcast_inputs(case, torch.Generator().manual_seed(0))
    w_u, w_c = module.aligned_parts(made["w"], made["ku"])
    assert module.descriptors_fit(w_u, w_c, made["e_user"], made["e_cand"], made["out"])
    module.fused_broadcast_tma(w_u, w_c, made["e_user"], made["e_cand"], made["user_of"], made["out"])
    expected = ch10.capstone_reference(**_float64(case))
    verdict = compare(made["out"], expected, ch10.BROADCAST_TOLERANCE[F16], poisoned=False)
    assert verdict.ok, verdict.details


def test_aligned_parts_pads_only_what_needs_it():
    module, _ = _solution()
    w = torch.randn(5, 1178 + 866, dtype=BF16)
    w_u, w_c = module.aligned_parts(w, 1178)
    assert w_u.stride(0) == w_c.stride(0) == 1184 + 872  # both parts on 16-byte rows, zero between
    assert w_c.data_ptr() - w_u.data_ptr() == 1184 * 2 and w_u.data_ptr() % 16 == 0
    assert torch.equal(w_u, w[:, :1178]) and torch.equal(w_c, w[:, 1178:])
    full = w_u.as_strided((5, 1184 + 872), (1184 + 872, 1))
    assert not full[:, 1178:1184].any() and not full[:, 1184 + 866 :].any()
    w = torch.randn(5, 512 + 256, dtype=BF16)  # the course's shape: aligned, no copy
    w_u, w_c = module.aligned_parts(w, 512)
    assert w_u.data_ptr() == w.data_ptr() and w_c.data_ptr() == w.data_ptr() + 1024


def test_hints_come_in_order():
    split, pad, fused = (tasks.get(t).hints for t in TASKS)
    assert len(split) == len(pad) == len(fused) == 4
    assert "w[:, :ku]" in split[0] and "user_of" in split[2] and "counts the work" in split[3]
    assert "872" in pad[0] and "torch.zeros" in pad[1] and "torch.empty" in pad[2]
    assert "user_of_ptr + batch" in fused[0] and "mask" in fused[1] and "float32" in fused[2]


@contextmanager
def _not_run():
    """Kernel launches inside are recorded by listeners and then skipped: the descriptor kernels, made
    for a GPU, need not run in the interpreter for their compiled code to be read."""

    class Skip(Exception):
        pass

    def skip(fn_obj, args, kwargs):
        raise Skip

    hooks.launch_listeners.append(skip)
    try:
        yield
    except Skip:
        pass
    finally:
        hooks.launch_listeners.remove(skip)


@requires_interpreter  # compiles for sm_90 with no GPU (Triton's compiler and ptxas, nothing launched)
def test_descriptor_kernels_compile_for_sm_90_in_shared_memory_without_spills():
    """The GPU path at the published shape and the course's (N = 128: narrower tiles), compiled as it
    would launch: wgmma and TMA copies, within an SM's 227 KB of shared memory, and no register spills
    (the float32 user tile is added in halves)."""
    from course_lib import compilation

    module, _ = _solution()
    recorded = []
    for M, Ku, Kc, N in ((433, 1178, 866, 256), (256, 512, 256, 128)):  # the published shape; the course's
        padded = torch.zeros(M, 2056 if Ku == 1178 else 768, dtype=BF16)  # aligned_parts' layout (rows 16-byte)
        w_u, w_c = padded[:, :Ku], padded[:, -(-Ku // 8) * 8 :][:, :Kc]
        e_user, e_cand = torch.zeros(2, Ku, N, dtype=BF16), torch.zeros(4, Kc, N, dtype=BF16)
        user_out, out = torch.empty(2, M, N), torch.empty(4, M, N, dtype=BF16)
        user_of = torch.tensor([0, 0, 1, 1])
        for a, e, o, add, name in (
            (w_u, e_user, user_out, False, "user_tma"),
            (w_c, e_cand, out, True, "candidate_tma"),
        ):
            with structure.recording_launches() as launches, _not_run():
                module._tma_gemm(a, e, o, user_out, user_of, add, module.CONFIGS[name])
            recorded += launches
    assert len(recorded) == 4 and [kw["BLOCK_N"] for _, _, kw in recorded] == [128, 256, 128, 128]
    for fn_obj, args, kwargs in recorded[:2] + recorded[3:]:  # the course's user GEMM has the published one's tile
        compiled, _ = structure.compile_launch(fn_obj, args, kwargs)
        what = f"ADD_USER={kwargs['ADD_USER']}, N={args[6]}, BLOCK_N={kwargs['BLOCK_N']}"
        ptx = compilation.asm(compiled, "ptx")
        assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx, what
        assert compiled.metadata.shared <= 227 * 1024, (what, compiled.metadata.shared)
        assert "STL" not in compilation.sass(compiled), f"{what}: register spills in the sm_90 SASS"


def test_experiments_script_helps_without_a_gpu(capsys, tmp_path):
    """scripts/experiments_capstone.py imports and answers --help without a GPU; in CPU mode it says that
    measuring needs one and stops."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("experiments_capstone", ROOT / "scripts" / "experiments_capstone.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    with pytest.raises(SystemExit) as stop:
        script.main(["--help"])
    assert stop.value.code == 0 and "--sweep" in capsys.readouterr().out
    if runtime.is_cpu():
        assert script.main(["--out", str(tmp_path)]) == 1
        assert "measures on a GPU" in capsys.readouterr().out and not any(tmp_path.iterdir())


def test_pad_k_returning_the_view_itself_fails_on_its_layout(tmp_path):
    """The values are right (w_c is w_c); the worker's layout facts say it shares W's memory."""
    (tmp_path / "pad_k.py").write_text("def pad_k(w_c):\n    return w_c\n")
    result = grader.grade_task("pad_k", tmp_path, seed=3)
    assert result.status == FAIL, result.summary
    assert "it returned a view of the input W" in result.summary


def test_eager_model_reads_each_user_once_and_summary_sorts_in_step_order():
    # the gathers read U users' rows (the L2 serves the repeats) and write B: (U + B) rows, not 2B
    B, U, M, Ku, Kc, N = ch10.PUBLISHED
    kernels = lesson10.eager_kernels(ch10.PUBLISHED)
    assert kernels["naive"]["E_user[user_of]: gather"] == ((U + B) * Ku * N * 2, 0)
    assert kernels["decomposed"]["user_out[user_of]: gather"] == ((U + B) * M * N * 2, 0)
    # widgets.comparison_figure orders bars by label: the labels must sort in the table's order
    names = [name for name, *_ in lesson10.SUMMARY]
    assert names == sorted(names)
    empty = {"baselines": None, "experiment": None, "gluon": None}
    source, rows = lesson10.summary_rows("published", "bfloat16", empty)
    assert source is None and rows == []
