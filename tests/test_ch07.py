"""Chapter 07's task, fused_linear: the solution passes, the stub reports TODO, each deliberately wrong
submission in tests/wrong/ch07_*/ fails on the cases it should with a message that names the mistake,
and the fusion check (probe in the worker, judge in the grader) tells one fused kernel from two.

    python -m course_lib check fused_linear --source tests/wrong/ch07_two_kernels_fp32_temp
"""

from __future__ import annotations

import pytest
import torch
import triton
from conftest import GOOD, WRONG, requires_interpreter
from test_ch06 import case_name, failed_cases, full_text

from course_lib import grader, runtime, sources, stubs, tasks
from course_lib.compare import compare
from course_lib.grader import FAIL, PASS, TODO
from course_lib.tasks import ch07_fused_epilogues as ch07

SEED = 2024  # fixed, so that a failure of this table replays exactly
TASK = "fused_linear"
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16


def _big(case: tasks.Case) -> bool:
    return case.shape[0] * case.shape[1] >= 1000


# folder under tests/wrong -> (pieces the grader's message must hold, case -> must it fail?).
# None: the case may fail or pass (a 1 x 1 output cannot tell a row's bias from a column's).
# fmt: off
WRONG_SUBMISSIONS = {
    "ch07_gelu_before_bias": (("the output is gelu(x @ weight.T) + bias", "gelu(acc + bias[None, :])"),
                              lambda c: True),
    "ch07_bias_per_row": (("the output is gelu(acc + bias[row])", "bias[None, :] indexed by cols"),
                          lambda c: None if c.shape[0] == 1 else True),
    # fp32 always tells the two forms apart; fp16's limit cannot on every element of every seed
    "ch07_erf_form": (("the output is GELU's exact (erf) form", "approximate='tanh'"),
                      lambda c: True if c.dtype == F32 else (True if _big(c) else None)),
    "ch07_no_activation": (("x @ weight.T + bias with no activation",), lambda c: True),
    # M = 1 with BLOCK_M = 16: 15 rows past the end of x are loaded
    "ch07_no_m_mask": (("out-of-bounds access", "a load outside the memory", "Nearest tensor: `x_ptr`",
                        "(15 of 16 active lanes)"),
                       lambda c: True if c.shape[0] == 1 else None),
    "ch07_fp16_accumulator": (("rounded twice",),
                              lambda c: True if c.label == "long K" else (None if c.dtype == F16 else False)),
    # out as the intermediate: fp16 rounds the matmul before the bias, and cancellation shows it
    "ch07_two_kernels": (("the output is gelu(round(x @ weight.T) + bias)", "rounded twice"),
                         lambda c: (True if _big(c) else None) if c.dtype == F16 else False),
    # TF32 on float32 inputs, on a GPU and in the interpreter alike; the message says where and what to pass
    "ch07_tf32_dot": (("only float32 cases fail, and tl.dot (lines 58, 131) gives no input_precision",
                       'Pass input_precision="ieee"'),
                      lambda c: (None if c.shape[0] == 1 else True) if c.dtype == F32 else False),
    "ch07_two_kernels_fp32_temp": (("all 14 cases are right, but the launcher made 2 kernel launches",
                                    "`fused_linear_kernel`, `bias_gelu_kernel`", "the epilogue is not fused",
                                    "268 MB more, 63 us"),
                                   lambda c: False),
}
# fmt: on


def test_solution_passes():
    result = grader.grade_task(TASK, "solutions", seed=SEED)
    assert result.status == PASS, full_text(result)
    assert result.cases_passed == result.cases_total >= 14
    if runtime.is_cpu():
        assert any("fused: one launch" in line for line in result.details), full_text(result)


def test_untouched_stub_reports_todo():
    assert stubs.is_untouched(TASK), f"exercises/{TASK}.py was edited: run sync-exercises --force"
    result = grader.grade_task(TASK, "exercises", seed=SEED)
    assert result.status == TODO, full_text(result)
    assert result.summary.startswith(stubs.NOT_IMPLEMENTED), result.summary


@requires_interpreter  # out-of-bounds loads and the fusion check are seen in the interpreter
@pytest.mark.parametrize("folder", sorted(WRONG_SUBMISSIONS))
def test_wrong_submission_is_rejected(folder):
    pieces, should_fail = WRONG_SUBMISSIONS[folder]
    result = grader.grade_task(TASK, WRONG / folder, seed=SEED)
    text = full_text(result)
    assert result.status == FAIL, text
    for piece in pieces:
        assert piece in text, f"expected {piece!r} in the grader's message:\n{text}"
    cases = tasks.get(TASK).all_cases(runtime.MODE)
    failed = failed_cases(result)
    must_fail = {case_name(c) for c in cases if should_fail(c) is True}
    must_pass = {case_name(c) for c in cases if should_fail(c) is False}
    assert must_fail <= failed, f"these cases should have failed: {must_fail - failed}\n{text}"
    assert not failed & must_pass, f"these cases should have passed: {failed & must_pass}\n{text}"


@requires_interpreter  # the fusion check is seen in the interpreter
def test_an_autotuned_kernel_is_one_launch_not_its_trials():
    """Right another way (tests/good/ch07_autotuned): triton.autotune chooses the tile. Its trial runs of
    each config are the autotuner's, not launches of the learner's: the fusion judge sees one launch."""
    result = grader.grade_task(TASK, GOOD / "ch07_autotuned", seed=SEED)
    text = full_text(result)
    assert result.status == PASS, text
    assert "fused: one launch" in text, text


def test_every_ch07_wrong_submission_is_listed():
    on_disk = {p.parent.name for p in WRONG.glob("ch07_*/*.py")}
    assert on_disk == set(WRONG_SUBMISSIONS)


# --------------------------------------------------------------------------------------------------
# cases, inputs, tolerance, diagnosis, cost model


def test_cases_cover_what_the_brief_asks():
    for mode in (runtime.CPU, runtime.GPU):
        cases = tasks.get(TASK).all_cases(mode)
        labels = {c.label for c in cases}
        assert {"tiny", "tail", "decode", "long K", "strided rows", "transposed x", "misaligned", "large"} <= labels
        assert (1, 1, 1) in {c.shape for c in cases}
        assert any(all(s % 16 for s in c.shape) for c in cases)  # no multiple of any block size
        assert {1, 4, 16} <= {c.shape[0] for c in cases if c.label == "decode"}
        assert {c.dtype for c in cases} == ({F32, F16} if mode == runtime.CPU else {F32, F16, BF16})
    gpu = tasks.get(TASK).cases(runtime.GPU)
    assert {(m, 8192, 8192) for m in (1, 4, 16)} <= {c.shape for c in gpu if c.dtype == BF16}
    assert (2048, 1536, 1029) in {c.shape for c in gpu}
    assert all(c.gpu_only for c in gpu if c.dtype == BF16)
    assert not any(c.dtype == BF16 for c in tasks.get(TASK).all_cases(runtime.CPU))


def test_inputs_have_the_promised_layouts():
    spec = tasks.get(TASK)
    by_label = {c.label: c for c in spec.cases(runtime.CPU)}
    case = by_label["tail"]
    made = spec.make_inputs(case, torch.Generator().manual_seed(0))
    M, N, K = case.shape
    assert made["weight"].shape == (N, K) and made["weight"].stride() == (K, 1)  # nn.Linear's layout
    assert made["bias"].shape == (N,) and made["out"].shape == (M, N)
    case = by_label["transposed x"]
    made = spec.make_inputs(case, torch.Generator().manual_seed(0))
    assert made["x"].shape == case.shape[::2] and made["x"].stride() == (1, case.shape[0])
    made = spec.make_inputs(by_label["strided rows"], torch.Generator().manual_seed(0))
    for name in ("x", "weight", "out"):
        assert made[name].stride(0) > made[name].shape[1], name
    made = spec.make_inputs(by_label["misaligned"], torch.Generator().manual_seed(0))
    assert all(made[name].storage_offset() == 1 for name in ("x", "weight", "bias", "out"))


def test_eager_baseline_is_the_reference_in_three_steps():
    case = tasks.Case((33, 47, 65), F32, "tail")
    made = ch07.linear_inputs(case, torch.Generator().manual_seed(0))
    args = {k: made[k] for k in ("x", "weight", "bias")}
    assert torch.allclose(ch07.linear_eager(**args), ch07.linear_reference(**args), rtol=1e-5, atol=1e-6)


def test_one_fp16_rounding_passes_and_two_do_not():
    """Fused, the result is rounded once; unfused through an fp16 out, the matmul is rounded before
    the bias, and where the bias cancels most of a value that rounding fails the elementwise limit."""
    case = tasks.Case((256, 320, 192), F16, "large")
    made = ch07.linear_inputs(case, torch.Generator().manual_seed(1))
    x, w, b = (made[k].double() for k in ("x", "weight", "bias"))
    exact = ch07.linear_reference(x, w, b)
    tol = ch07.LINEAR_TOLERANCE[F16]
    assert compare(exact.to(F16), exact, tol, poisoned=False).ok
    twice = ch07._gelu((x @ w.t()).to(F16).double() + b).to(F16)  # the matmul stored in fp16, then the epilogue
    verdict = compare(twice, exact, tol, poisoned=False)
    assert not verdict.ok and "precision too low" in verdict.summary


def _outputs(case, seed=0):
    made = ch07.linear_inputs(case, torch.Generator().manual_seed(seed))
    inputs = {k: made[k].double() for k in ("x", "weight", "bias")}
    acc = inputs["x"] @ inputs["weight"].t()
    return inputs, acc


@pytest.mark.parametrize(
    ("mistake", "sentence"),
    [
        (lambda acc, b, dt: ch07._gelu(acc) + b, "gelu(x @ weight.T) + bias"),
        (lambda acc, b, dt: ch07._gelu(acc + b, "none"), "exact (erf) form"),
        (lambda acc, b, dt: acc + b, "no activation"),
        (lambda acc, b, dt: ch07._gelu(acc), "with no bias"),
        (lambda acc, b, dt: ch07._gelu(acc + b[: acc.shape[0], None]), "bias[row]"),
        (lambda acc, b, dt: ch07._gelu(acc.to(dt).double() + b), "rounded twice"),
    ],
)
def test_diagnosis_names_each_mistake(mistake, sentence):
    case = tasks.Case((40, 96, 64), F16, "tail")
    inputs, acc = _outputs(case)
    got = mistake(acc, inputs["bias"], F16).to(F16).double()
    found = ch07._linear_diagnose(inputs, got, case)
    assert found is not None and sentence in found, found


def test_diagnosis_stays_quiet_on_a_right_answer():
    for case in tasks.get(TASK).cases(runtime.CPU):
        inputs, acc = _outputs(case)
        # the exact answer: a rounded one may sit as near to the twice-rounded near miss as to it
        right = ch07.linear_reference(**inputs)
        assert ch07._linear_diagnose(inputs, right, case) is None, case


def test_bench_cases_and_cost_model():
    spec = tasks.get(TASK)
    assert spec.tensor_cores and spec.compile_modes == ("default", "max-autotune")
    shapes = [(8192, 8192, 8192), (1, 8192, 8192), (4, 8192, 8192), (16, 8192, 8192)]
    assert [c.shape for c in spec.bench_cases] == shapes
    assert all(c.dtype == BF16 for c in spec.bench_cases)
    case = tasks.Case((4, 8192, 8192), BF16, "decode")
    assert spec.bytes_moved(case) == (4 * 8192 + 8192 * 8192 + 8192 + 4 * 8192) * 2
    assert spec.flops(case) == 2 * 4 * 8192 * 8192 + 10 * 4 * 8192
    # the decode floor: weight streamed once at 4.27 TB/s is 31.4 us
    assert 8192 * 8192 * 2 / 4.27e12 * 1e6 == pytest.approx(31.4, abs=0.05)


@requires_interpreter
def test_bench_variants_on_the_cpu():
    """cuBLASLt's GELU epilogue is left out where torch computes another form (the CPU: erf); the
    course's own matmul computes x @ weight.T into an output it allocates once."""
    case = tasks.Case((33, 47, 65), F16, "tail")
    variants = ch07._bench_variants(case)
    assert set(variants) == {"cublas_matmul_only", "course_matmul_no_epilogue"}
    assert not ch07._cublaslt_agrees(torch.device("cpu"), F16)
    made = ch07.linear_inputs(case, torch.Generator().manual_seed(0))
    args = {k: made[k] for k in ("x", "weight", "bias")}
    expected = (args["x"].double() @ args["weight"].double().t()).float()
    first = variants["course_matmul_no_epilogue"](**args)
    assert torch.allclose(first.float(), expected, atol=2e-3)
    assert variants["course_matmul_no_epilogue"](**args).data_ptr() == first.data_ptr()  # allocated once
    assert torch.allclose(variants["cublas_matmul_only"](**args).float(), expected, atol=2e-3)


def test_hints_come_in_order():
    hints = tasks.get(TASK).hints
    assert len(hints) == 4
    assert "epilogue" in hints[0] and "bias[None, :]" in hints[1] and "tanh" in hints[1]
    assert "mask" in hints[2] and "programs" in hints[3] and "132 SMs" in hints[3]


def _solution():
    return sources.load_file(sources.task_path(TASK, "solutions"), tasks.get(TASK).entry)


def test_config_gives_decode_shapes_enough_programs():
    module, _ = _solution()
    for M in (1, 4, 16):
        BLOCK_M, BLOCK_N, BLOCK_K, _, num_warps, _ = module._config(M, 8192, 8192, 2)
        assert BLOCK_M == 16 and BLOCK_K >= 128 and num_warps == 4
        assert triton.cdiv(M, BLOCK_M) * triton.cdiv(8192, BLOCK_N) >= 128  # for 132 SMs
    assert module._config(8192, 8192, 8192, 2)[:3] == (256, 128, 64)  # the best pointer-load tile measured


# --------------------------------------------------------------------------------------------------
# the fusion check: the judge on facts made by hand


def _run(never=0, once=None, more=0, most=1, loaded=0, kernel="fused_linear_kernel", n=4 * 96):
    once = n - never - more if once is None else once
    return {"kernel": kernel, "never": never, "once": once, "more": more, "most": most, "loaded": loaded}


def _facts(*runs, launches=("fused_linear_kernel",)):
    return {
        "mode": runtime.CPU,
        "shapes": [{"shape": [4, 96, 80], "launches": list(launches), "runs": list(runs)}],
    }


def test_judge_accepts_a_fused_kernel():
    [(ok, summary, details)] = ch07.judge_fusion(_facts(_run()))
    assert ok and summary == "the epilogue is fused" and "one launch" in details[0]


def test_judge_accepts_an_autotuned_kernel_by_its_last_run():
    benchmarking = _run(more=4 * 96, once=0, most=3)  # the autotuner's runs of each config, on out
    [(ok, _, _)] = ch07.judge_fusion(_facts(benchmarking, _run()))
    assert ok


def test_judge_rejects_two_launches():
    facts = _facts(_run(), _run(loaded=384, kernel="bias_gelu_kernel"), launches=("matmul", "bias_gelu_kernel"))
    [(ok, summary, details)] = ch07.judge_fusion(facts)
    assert not ok and summary.startswith("the launcher made 2 kernel launches (`matmul`, `bias_gelu_kernel`)")
    text = "\n".join(details)
    assert "goes to memory and comes back" in text and "268 MB more, 63 us" in text


def test_judge_rejects_out_stored_twice():
    [(ok, summary, details)] = ch07.judge_fusion(_facts(_run(more=384, once=0, most=2, loaded=384)))
    assert not ok and "stored 384 of the 384 elements of out more than once (up to 2 times)" in summary
    assert "268 MB more" in details[0]


def test_judge_rejects_out_read_back():
    [(ok, summary, details)] = ch07.judge_fusion(_facts(_run(loaded=384)))
    assert not ok and "loaded 384 elements of out" in summary and "134 MB more, 31 us" in details[0]


def test_judge_rejects_elements_never_stored():
    [(ok, summary, _)] = ch07.judge_fusion(_facts(_run(never=10)))
    assert not ok and "10 of the 384 elements of out were never stored" in summary


def test_judge_passes_on_a_gpu_with_a_note():
    [(ok, summary, details)] = ch07.judge_fusion({"mode": runtime.GPU})
    assert ok and summary == "fusion checked in CPU mode" and "COURSE_MODE=cpu" in details[0]


# --------------------------------------------------------------------------------------------------
# the fusion check: the probe on real launches (in this process)


@requires_interpreter
def test_probe_sees_one_fused_launch_in_the_solution():
    module, entry = _solution()
    facts = ch07.probe_fusion(module, entry)
    assert [s["shape"] for s in facts["shapes"]] == [list(s) for s in ch07.PROBE_SHAPES]
    for seen in facts["shapes"]:
        M, N, _ = seen["shape"]
        assert seen["launches"] == ["fused_linear_kernel"]
        [run] = seen["runs"]
        assert run["once"] == M * N and run["never"] == run["more"] == run["loaded"] == 0
    [(ok, _, _)] = ch07.judge_fusion(facts)
    assert ok


@requires_interpreter
def test_probe_sees_out_stored_twice_and_read_back():
    module, entry = sources.load_file(WRONG / "ch07_two_kernels" / "fused_linear.py", "fused_linear")
    facts = ch07.probe_fusion(module, entry)
    seen = facts["shapes"][0]
    M, N, _ = seen["shape"]
    assert seen["launches"] == ["fused_linear_kernel", "bias_gelu_kernel"]
    first, second = seen["runs"]
    assert first["once"] == M * N and first["loaded"] == 0
    assert second["once"] == M * N and second["loaded"] == M * N  # the second kernel reads out back
    [(ok, summary, details)] = ch07.judge_fusion(facts)
    assert not ok and "2 kernel launches" in summary and "comes back" in details[0]


# --------------------------------------------------------------------------------------------------
# the split-K experiment behind section 2 (scripts/experiments_gemm.py, lin_small_m): right, and the
# loop form that decides whether Triton pipelines it


def _experiments_gemm():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "scripts" / "experiments_gemm.py"
    spec = importlib.util.spec_from_file_location("experiments_gemm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@requires_interpreter
@pytest.mark.parametrize("loop", ["steps", "bounds"])
def test_split_k_experiment_is_right(loop):
    exp = _experiments_gemm()
    gen = torch.Generator().manual_seed(SEED)
    for M, N, K in ((3, 64, 512), (1, 32, 1000)):
        # values bfloat16 holds (as the experiment's inputs): TF32, a float32 tl.dot's default, keeps them exactly
        x, w, bias = (torch.randn(*s, generator=gen).bfloat16().float() for s in ((M, K), (N, K), (N,)))
        ref = torch.nn.functional.gelu(x @ w.t() + bias, approximate="tanh")
        for split in (2, 4, 3):
            if loop == "bounds" and -(-K // split) % 64:
                continue  # that form's slices overlap where one is not a multiple of BLOCK_K (said in the script)
            ws, out = torch.zeros(M, N), torch.empty(M, N)
            exp.lin_small_m[(N // 32, split)](x, w, bias, ws, M, N, K, K, K, N, BLOCK_M=16, BLOCK_N=32, BLOCK_K=64,
                                              SPLIT_K=split, EPILOGUE=True, LOOP=loop)  # fmt: skip
            exp.lin_finish[(triton.cdiv(M * N, 1024),)](ws, bias, out, M, N, BLOCK=1024)
            assert (out - ref).abs().max().item() < 1e-4, (M, N, K, split)


def test_split_k_loop_over_offsets_is_not_pipelined():
    """What notebook 07 prints and its prose reads (lessons.ch07.split_k_loop_forms, demos.split_k_slices):
    compiled for sm_90, the loop over a slice's K offsets has no cp.async (each step's loads are waited
    for), the loop over its steps counted from zero has, with num_stages tiles in shared memory."""
    from course_lib.lessons import ch07 as lesson07

    forms = lesson07.split_k_loop_forms()
    assert forms["offsets"][0] == 0 and forms["offsets"][1] < 4 * 16 * 256 * 2
    # num_stages - 1 = 3 tiles of x and of w in flight in shared memory
    assert forms["steps"][0] > 0 and forms["steps"][1] >= 3 * (16 + 64) * 256 * 2
    assert "loop over offsets    0 cp.async" in lesson07.split_k_loop_text(forms)
