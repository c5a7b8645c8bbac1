"""Chapter 04's tasks, fused_bias_gelu and residual_dropout: each deliberately wrong submission
fails, on the cases it should fail, with a message that names the mistake.

    python -m course_lib check residual_dropout --source tests/wrong/ch04_local_offsets
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from conftest import WRONG, requires_interpreter

from course_lib import grader, lesson, runtime, tasks
from course_lib.grader import FAIL, PASS
from course_lib.tasks import philox

SEED = 2024  # fixed, so that a failure of this table replays exactly
GELU, DROPOUT = "fused_bias_gelu", "residual_dropout"
DROPOUT_BLOCK = 2048  # BLOCK_SIZE in tests/wrong/ch04_local_offsets/residual_dropout.py


def _numel(case: tasks.Case) -> int:
    return int(np.prod(case.shape))


def _half(case: tasks.Case) -> bool:
    return case.dtype in (torch.float16, torch.bfloat16)


def _ragged_columns(case: tasks.Case) -> bool:
    """The last column tile sticks out: n_cols is no multiple of the solution's BLOCK_N."""
    n_cols = case.shape[-1]
    return n_cols % min(triton.next_power_of_2(n_cols), 1024) != 0


def _constant_seed_fails(case: tasks.Case) -> bool | None:
    if case.options["p"] == 0:
        return False  # nothing is dropped: any mask will do
    # another seed's mask agrees with the right one by chance on a few elements, never on a thousand
    return True if _numel(case) >= 1000 else None


def _lane_counters_fail(case: tasks.Case) -> bool | None:
    if _numel(case) <= DROPOUT_BLOCK or case.options["p"] == 0:
        return False  # one block: lane and global offset are the same counter
    # past the first block the mask is another one; a handful of elements may agree by chance
    return True if _numel(case) - DROPOUT_BLOCK >= 1000 else None


# folder under tests/wrong -> (task, pieces the grader's message must hold, case -> must it fail?).
# The grader lists every failed case, so the set of failures is part of the diagnosis: a lane counter
# fails only where there is more than one block, a missing mask only where a tile sticks out. None:
# the case may fail or pass.
# fmt: off
WRONG_SUBMISSIONS = {
    "ch04_bias_per_row": (GELU, ("the output is gelu(x + bias[row])", "the bias belongs to the column"),
                          lambda c: c.shape[-1] > 1),  # one column: bias[row 0] is bias[col 0]
    "ch04_forms_swapped": (GELU, ("the output is GELU's exact (erf) form", "are the forms swapped?"),
                           lambda c: True),
    "ch04_low_precision": (GELU, ("precision too low",),
                           _half),
    "ch04_no_column_mask": (GELU, ("out-of-bounds access", "Nearest tensor: `bias_ptr`", "tl.load had no mask"),
                            _ragged_columns),
    "ch04_row_length_as_stride": (GELU, ("elements are wrong",),
                                  lambda c: c.options.get("x_row_pad", 0) > 0),  # only a view of wider rows
    "ch04_local_offsets": (DROPOUT, (f"repeat every {DROPOUT_BLOCK} elements", "counters restart in every block"),
                           _lane_counters_fail),
    "ch04_constant_seed": (DROPOUT, ("another mask than the task's", "is `seed` passed to tl.rand4x"),
                           _constant_seed_fails),
    "ch04_no_scaling": (DROPOUT, ("not scaled by 1 / (1 - p)",),
                        lambda c: c.options["p"] > 0),
    "ch04_inverted_keep": (DROPOUT, ("the mask is inverted", "kept where their number is < p"),
                           lambda c: True),  # p = 0 then keeps nothing
    "ch04_one_number_per_call": (DROPOUT, ("one Philox call per element", "j-th number of tl.rand4x(seed, k)"),
                                 _constant_seed_fails),  # element 0 agrees (word 0 is tl.rand's); 1000 never
}
# fmt: on


def full_text(result: grader.TaskResult) -> str:
    return "\n".join([result.summary, *result.details])


def failed_cases(result: grader.TaskResult) -> set[str]:
    """The failed cases as the report names them: 'tail (4097,) bfloat16', ..."""
    line = next(d for d in result.details if d.startswith("failed "))
    names = re.findall(r"([a-z][a-z ]*) (\([0-9, ]+\)) (float32|float16|bfloat16)", line.split(": ", 1)[1])
    assert names, line
    return {" ".join(name) for name in names}


def case_name(case: tasks.Case) -> str:
    return f"{case.label} {tuple(case.shape)} {str(case.dtype).replace('torch.', '')}"


# Every solution passing and every untouched exercise reporting TODO: tests/test_solutions_and_stubs.py


@pytest.mark.parametrize("folder", sorted(WRONG_SUBMISSIONS))
def test_wrong_submission_is_rejected(folder):
    task, pieces, should_fail = WRONG_SUBMISSIONS[folder]
    if folder == "ch04_no_column_mask" and not runtime.is_cpu():
        pytest.skip("in GPU mode the bounds check after the GPU cases catches it: tests/test_bounds_check.py")
    result = grader.grade_task(task, WRONG / folder, seed=SEED)
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


def test_every_ch04_wrong_submission_is_listed():
    on_disk = {p.parent.name for p in WRONG.glob("ch04_*/*.py")}
    assert on_disk == set(WRONG_SUBMISSIONS)


def test_dropout_mask_does_not_depend_on_the_block_size(tmp_path):
    """The promise of the chapter: with global offsets as counters, another BLOCK_SIZE gives the same
    mask, so the solution with a quarter of its block size still matches the reference."""
    variant = lesson.write_variant(DROPOUT, {"BLOCK_SIZE = 2048": "BLOCK_SIZE = 512"}, folder=tmp_path)
    result = grader.grade_task(DROPOUT, variant.folder, seed=SEED)
    assert result.status == PASS, full_text(result)


@triton.jit
def _rand_kernel(out_ptr, n_elements, seed, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + offsets, tl.rand(seed, offsets), mask=offsets < n_elements)


@triton.jit
def _rand4x_kernel(out_ptr, n_counters, seed, BLOCK: tl.constexpr):
    k = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    r0, r1, r2, r3 = tl.rand4x(seed, k)
    mask = k < n_counters
    tl.store(out_ptr + k * 4, r0, mask=mask)
    tl.store(out_ptr + k * 4 + 1, r1, mask=mask)
    tl.store(out_ptr + k * 4 + 2, r2, mask=mask)
    tl.store(out_ptr + k * 4 + 3, r3, mask=mask)


@requires_interpreter
@pytest.mark.parametrize("seed", [0, 2024, 2**31 - 2])
def test_philox_reference_is_tl_rand_bit_for_bit(seed):
    """The dropout reference draws its mask with course_lib.tasks.philox: it must be tl.rand exactly."""
    n = 3000
    out = torch.empty(n)
    _rand_kernel[(triton.cdiv(n, 1024),)](out, n, seed, BLOCK_SIZE=1024)
    assert np.array_equal(out.numpy(), philox.rand(seed, np.arange(n)))


@requires_interpreter
@pytest.mark.parametrize("seed", [0, 2024, 2**31 - 2])
def test_per_element_numbers_are_tl_rand4x_bit_for_bit(seed):
    """The exercise's mask: element 4k + j takes the j-th number of tl.rand4x(seed, k)."""
    n_counters = 777
    out = torch.empty(4 * n_counters)
    _rand4x_kernel[(triton.cdiv(n_counters, 256),)](out, n_counters, seed, BLOCK=256)
    assert np.array_equal(out.numpy(), philox.rand_per_element(seed, np.arange(4 * n_counters)))
    assert np.array_equal(out.numpy()[::4], philox.rand(seed, np.arange(n_counters)))  # word 0 is tl.rand's
    # any run of elements, from anywhere (the reference's one Philox call per four elements, and the
    # general per-element path the diagnosis takes, draw the same numbers)
    for first, last in ((0, 4 * n_counters - 3), (8, 1001), (3, 998), (5, 6), (0, 0)):
        got = philox.rand_per_element(seed, np.arange(first, last))
        assert np.array_equal(got, out.numpy()[first:last]), (first, last)
    scattered = np.array([12, 3, 3, 2000, 7, 0])
    assert np.array_equal(philox.rand_per_element(seed, scattered), out.numpy()[scattered])


@requires_interpreter
@pytest.mark.parametrize("seed", [0, 2024, 2**31 - 2])
def test_torch_numbers_are_tl_rand4x_bit_for_bit(seed):
    """The numbers a GPU grader's reference draws on the device (torch's integer operators, products
    split at 16 bits) are tl.rand4x's, in any chunking and for any element count."""
    n_counters = 777
    out = torch.empty(4 * n_counters)
    _rand4x_kernel[(triton.cdiv(n_counters, 256),)](out, n_counters, seed, BLOCK=256)
    for n, chunk in ((4 * n_counters, 1 << 22), (4 * n_counters - 3, 100), (5, 1), (0, 8)):
        got = philox.rand_per_element_torch(seed, n, "cpu", chunk=chunk)
        assert got.dtype == torch.float32 and got.shape == (n,)
        assert torch.equal(got, out[:n]), (n, chunk)


@pytest.mark.parametrize("seed", [1, 2**32 + 5, 2**64 - 1])
def test_torch_numbers_match_numpy_for_64_bit_seeds(seed):
    """Both halves of a 64-bit seed are keys: torch and numpy agree bit for bit, where the words'
    top bits are set (the products that would overflow a signed 64-bit multiply)."""
    n = 4099
    want = philox.rand_per_element(seed, np.arange(n))
    got = philox.rand_per_element_torch(seed, n, "cpu", chunk=333).numpy()
    assert np.array_equal(got.view(np.int32), want.view(np.int32))


@pytest.mark.skipif(not runtime.is_gpu(), reason="draws on the GPU")
@pytest.mark.parametrize("seed", [0, 2024, 2**64 - 1])
def test_gpu_numbers_are_tl_rand4x_and_numpy_bit_for_bit(seed):
    """On a GPU the reference's numbers are drawn on the device: the same bits as the compiled
    tl.rand4x (seeds Triton takes) and as numpy (every seed), for a count that is not a multiple of 4."""
    n = 4 * 3001 - 2
    got = philox.rand_per_element_torch(seed, n, "cuda", chunk=1000)
    assert got.is_cuda and got.dtype == torch.float32 and got.shape == (n,)
    want = philox.rand_per_element(seed, np.arange(n))
    assert np.array_equal(got.cpu().numpy().view(np.int32), want.view(np.int32))
    if seed < 2**31:
        out = torch.empty(4 * 3001, device="cuda")
        _rand4x_kernel[(triton.cdiv(3001, 256),)](out, 3001, seed, BLOCK=256)
        assert torch.equal(got, out[:n])
