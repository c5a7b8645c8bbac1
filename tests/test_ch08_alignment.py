"""Chapter 08's alignment tasks, scale_rows and padded_bmm: the solutions pass, the stubs report TODO,
each deliberately wrong submission in tests/wrong/ch08_* (of these two tasks) fails with a message
that names the mistake, the PTX reader attributes each access to its tensor, and a tensor
descriptor that breaks TMA's 16-byte rule is refused with the numbers and the fix.

    python -m course_lib check scale_rows --source tests/wrong/ch08_false_hint
"""

from __future__ import annotations

import re

import pytest
import torch
import triton
import triton.language as tl
from conftest import GOOD, WRONG, requires_interpreter

from course_lib import grader, hooks, runtime, stubs, tasks
from course_lib.grader import FAIL, PASS, TODO
from course_lib.tasks import structure

SEED = 2024
SCALE, BMM = "scale_rows", "padded_bmm"


def full_text(result: grader.TaskResult) -> str:
    return "\n".join([result.summary, *result.details])


# folder under tests/wrong -> (task, pieces the grader's message must hold)
WRONG_SUBMISSIONS = {
    "ch08_no_hint": (SCALE, ("all 12 cases are right", "x is read 2 bytes at a time, not 16", "ld.global.b16",
                             "1016 = 16 * 63 + 8", "multiple of 16 elements", "tl.multiple_of(row * stride_x, VEC)")),
    "ch08_false_hint": (SCALE, ("all 12 cases are right", "promises 16-byte alignment where there is none",
                                "rows 1004 elements (2008 bytes) apart", "ld.global.v4.b32", "misaligned address")),
    "ch08_bmm_no_hint": (BMM, ("all 10 cases are right", "a is read 2 bytes at a time, not 16, on the padded layout",
                               "72 = 16 * 4 + 8", "tensor descriptor (TMA)")),
    "ch08_bmm_false_hint": (BMM, ("all 10 cases are right", "promises 16-byte rows of a where there are none",
                                  "132 bytes", "misaligned address")),
    "ch08_descriptor_866": (BMM, ("TensorDescriptor breaks TMA's 16-byte rule", "strides in bytes",
                                  "not a multiple of 16", "pad the leading dimension", "unpadded (3, 33, 40, 66)")),
    # each narrow access with its own reason: a hint the compiler drops, a mask that splits the vectors
    "ch08_hint_on_argument": (SCALE, ("x is read 2 bytes at a time, not 16", "tl.multiple_of(stride_x, ...) hints a "
                                      "bare argument", "on an argument it is dropped", "hint the product")),
    "ch08_mask_partial_vectors": (SCALE, ("x is read 2 bytes at a time, not 16", "the row starts are hinted",
                                          "the mask is", "mask = cols < n_whole")),
    # a GPU's TMA store writes whole 16-byte chunks: past a ragged row's end it overwrites the padding (seen on
    # the H200); the interpreter clips, so the course's check stands in for the GPU
    "ch08_tma_store_ragged_rows": (SCALE, ("case 'ragged'", "a tensor-descriptor store reaches past the end of rows "
                                           "of 1001 fp16 elements", "overwrite elements 1001 to 1007",
                                           "Triton issue #11583", "masked pointer store")),
    "ch08_few_per_thread": (SCALE, ("x is read 8 bytes at a time, not 16", "the compiler proved the addresses "
                                    "8-byte aligned", "BLOCK / (32 * num_warps) >= 8")),
}  # fmt: skip
NOT_THEIRS = {  # the reason each must not be given
    "ch08_no_hint": "the row starts are hinted",
    "ch08_hint_on_argument": "Triton marks an integer argument 'divisible by 16' only when",
    "ch08_mask_partial_vectors": "Triton marks an integer argument 'divisible by 16' only when",
    "ch08_few_per_thread": "Triton marks an integer argument 'divisible by 16' only when",
}


@pytest.mark.parametrize("task", [SCALE, BMM])
def test_solution_passes_with_its_structure(task):
    result = grader.grade_task(task, "solutions", seed=SEED)
    assert result.status == PASS, full_text(result)
    text = full_text(result)
    assert "16-byte" in text and "no 16-byte access" in text or "unpadded K: a read by" in text, text


@pytest.mark.parametrize("task", [SCALE, BMM])
def test_untouched_stub_reports_todo(task):
    assert stubs.is_untouched(task), f"exercises/{task}.py was edited: run sync-exercises --force"
    result = grader.grade_task(task, "exercises", seed=SEED)
    assert result.status == TODO, full_text(result)


@requires_interpreter
@pytest.mark.parametrize("folder", sorted(WRONG_SUBMISSIONS))
def test_wrong_submission_is_rejected(folder):
    task, pieces = WRONG_SUBMISSIONS[folder]
    result = grader.grade_task(task, WRONG / folder, seed=SEED)
    text = full_text(result)
    assert result.status == FAIL, text
    for piece in pieces:
        assert piece in text, f"expected {piece!r} in the grader's message:\n{text}"
    if folder in NOT_THEIRS:
        assert NOT_THEIRS[folder] not in text, text
    if folder == "ch08_descriptor_866":  # the padded layouts pass: only the 16-byte rule fails
        failed_line = text.split("failed ", 1)[1].split("\n")[0]
        assert not re.search(r"(?<!un)padded \(3, 33, 40, 66\)", failed_line), failed_line


@requires_interpreter
def test_tensor_descriptors_count_as_wide_access():
    """TMA block copies (cp.async.bulk.tensor) where the rows allow them, pointers elsewhere: right, and as
    wide as access gets. The judge that counted only ld/st.global failed it. (Its first version also
    stored through descriptors on ragged rows, which the H200 showed to be wrong:
    tests/wrong/ch08_tma_store_ragged_rows.)"""
    result = grader.grade_task(SCALE, GOOD / "ch08_scale_rows_tma", seed=SEED)
    text = full_text(result)
    assert result.status == PASS, text
    assert "x 1 TMA block copies loads, out 1 TMA block copies stores" in text, text


def test_a_tma_store_within_whole_chunks_is_not_flagged():
    """The 16-byte chunk rule bites only where a block reaches past a row whose length is no multiple of 16
    bytes: rows of 1008 fp16 elements, a block inside the row, or a block wholly past the rows are fine."""

    class H:
        def __init__(self, v):
            self.data = [v]

    class Desc:
        def __init__(self, rows, cols, block):
            self.base = type("B", (), {"dtype": tl.pointer_type(tl.float16)})()
            self.shape, self.block_shape = [H(rows), H(cols)], block

    assert hooks.tma_store_tail(Desc(7, 1008, [1, 256]), [H(0), H(768)]) is None  # 2016 bytes: whole chunks
    assert hooks.tma_store_tail(Desc(7, 1001, [1, 256]), [H(0), H(512)]) is None  # inside the row
    assert hooks.tma_store_tail(Desc(7, 1001, [1, 256]), [H(7), H(768)]) is None  # no row of the block is inside
    assert "elements 1001 to 1007" in hooks.tma_store_tail(Desc(7, 1001, [1, 256]), [H(6), H(768)])


def test_every_alignment_wrong_submission_is_listed():
    ours = {p.parent.name for p in WRONG.glob("ch08_*/*.py") if p.name in (f"{SCALE}.py", f"{BMM}.py")}
    assert ours == set(WRONG_SUBMISSIONS)


# --------------------------------------------------------------------------------------------------
# cases and layouts


def test_cases_hold_padded_unaligned_and_misaligned_layouts():
    spec = tasks.get(SCALE)
    for mode in (runtime.CPU, runtime.GPU):
        cases = spec.all_cases(mode)
        strides = [(c.dtype, c.options["x_stride"]) for c in cases]
        itemsize = {torch.float32: 4, torch.float16: 2, torch.bfloat16: 2}
        # padded: 16-byte rows that Triton cannot see (no multiple of 16 elements)
        assert any(s * itemsize[d] % 16 == 0 and s % 16 for d, s in strides)
        assert any(s * itemsize[d] % 16 for d, s in strides)  # rows no multiple of 16 bytes apart
        assert any(c.misaligned for c in cases) and any(c.shape[1] % 8 for c in cases)  # ragged rows
    made = spec.make_inputs(next(c for c in spec.cases(runtime.CPU) if c.label == "misaligned"), torch.Generator())
    assert made["x"].data_ptr() % 16 and made["x"].stride() == (1016, 1)


def test_bmm_layouts_and_bench_cases():
    spec = tasks.get(BMM)
    by = {(c.label, c.dtype): c for c in spec.cases(runtime.CPU)}
    made = spec.make_inputs(by[("padded", torch.float16)], torch.Generator().manual_seed(0))
    assert made["a"].shape == (33, 66) and made["a"].stride() == (72, 1)
    assert made["e"].shape == (3, 66, 40) and made["e"].stride() == (72 * 40, 40, 1)
    assert made["a"].as_strided((33, 72), (72, 1))[:, 66:].abs().sum() == 0  # the padding is zero
    assert spec.tensor_cores and [c.options["k_stride"] for c in spec.bench_cases] == [866, 872]
    assert {c.shape for c in spec.bench_cases} == {(1024, 433, 256, 866)}
    assert set(spec.bench_variants(spec.bench_cases[0])) == {"cublas"}
    assert all(c.gpu_only for c in spec.cases(runtime.GPU) if c.dtype == torch.bfloat16)
    case = spec.bench_cases[0]
    assert spec.flops(case) == 2 * 1024 * 433 * 256 * 866


# --------------------------------------------------------------------------------------------------
# the PTX reader


@triton.jit
def _copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


@pytest.mark.parametrize(("n", "width"), [(4096, 16), (4097, 4)])
def test_accesses_are_traced_to_their_tensors(n, width):
    """fp32 copy: n a multiple of 16 keeps the mask in whole vectors (16-byte accesses), n = 4097 does not."""
    x, out = torch.zeros(n), torch.zeros(n)
    with structure.recording_launches() as launches:
        _copy_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    assert len(launches) == 1
    facts = structure.launch_facts(*launches[0], roles={"x": x, "out": out})
    assert set(structure.widths(facts, "x", ("load",))) == {width}
    assert set(structure.widths(facts, "out", ("store",))) == {width}
    assert not structure.widths(facts, "x", ("store",)) and not facts["tma"]


def test_reader_counts_widths_whatever_the_spelling():
    ptx = """.entry k(.param .u64 .ptr .global .align 1 k_param_0, .param .u64 .ptr .global .align 1 k_param_1)
{
\tld.param.b64 \t%rd1, [k_param_0];
\tld.param.b64 \t%rd2, [k_param_1];
\tadd.s64 \t%rd3, %rd1, 64;
$L__BB0_1:
\t@%p1 ld.global.L1::evict_last.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd3 + 0 ];
\tld.global.nc.v2.b16 { %rs1, %rs2 }, [ %rd1 + 0 ];
\tcp.async.cg.shared.global [ %r9 + 0 ], [ %rd3 + 0 ], 0x10, %r8;
\tst.global.b32 [ %rd2 + 0 ], { %r1 };
}
"""
    spec = [structure.compilation.ArgSpec("x_ptr", "*fp16"), structure.compilation.ArgSpec("out_ptr", "*fp16")]
    found = [(a["op"], a["bytes"], a["argument"]) for a in structure.accesses(ptx, spec)]
    assert found == [("load", 16, "x_ptr"), ("load", 4, "x_ptr"), ("cp.async", 16, "x_ptr"), ("store", 4, "out_ptr")]


# --------------------------------------------------------------------------------------------------
# TMA's 16-byte rule


def test_descriptor_on_866_is_refused_with_the_fix():
    from triton.tools.tensor_descriptor import TensorDescriptor

    a = torch.zeros(433, 866, dtype=torch.float16)
    with pytest.raises(hooks.DescriptorAlignmentError) as info:
        TensorDescriptor.from_tensor(a, [64, 64])
    text = str(info.value)
    assert "shape (433, 866)" in text and "strides in bytes (1732, 2)" in text
    assert "1732 = 16 * 108 + 4" in text and "872 elements apart (1744 bytes)" in text
    TensorDescriptor.from_tensor(torch.zeros(433, 872, dtype=torch.float16)[:, :866], [64, 64])  # padded: fine


def test_descriptor_problems_name_base_and_block():
    from triton.tools.tensor_descriptor import TensorDescriptor

    good = TensorDescriptor.from_tensor(torch.zeros(64, 64), [16, 16])
    assert hooks.descriptor_problems(good) == []
    good.base = torch.zeros(64 * 64 + 1)[1:].view(64, 64)  # changed after it was made: seen before a launch
    assert "base address is 4 bytes past" in hooks.descriptor_problems(good)[0]
    good.base, good.block_shape = torch.zeros(64, 64), [16, 2]
    assert "8 bytes, not a multiple of 16" in hooks.descriptor_problems(good)[0]
    with pytest.raises(hooks.DescriptorAlignmentError, match="`d`"):
        hooks.check_descriptor_arguments(type("K", (), {"arg_names": ["d"]})(), (good,), {})
