"""compare(): tolerances per dtype, NaN never passes, inf, and the relative-norm rule."""

from __future__ import annotations

import math
import re

import pytest
import torch

from course_lib.compare import Tolerance, compare, poison
from course_lib.tasks import DEFAULT_TOLERANCE

DTYPES = list(DEFAULT_TOLERANCE)


def reference(n: int = 1000, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=gen, dtype=torch.float64) + 3.0  # away from 0: |x| in about [0, 7]


@pytest.mark.parametrize("dtype", DTYPES)
def test_exact_output_passes(dtype):
    expected = reference().to(dtype).double()  # what a perfect kernel of this dtype can produce
    verdict = compare(expected.to(dtype), expected, DEFAULT_TOLERANCE[dtype])
    assert verdict.ok, verdict.summary


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("where", ["inside", "outside"])
def test_one_element_just_inside_or_outside_the_elementwise_limit(dtype, where):
    tol = DEFAULT_TOLERANCE[dtype]
    got = torch.ones(1000, dtype=dtype)  # 1.0 is exact in every dtype
    expected = got.double().clone()
    # |got - e| <= atol + rtol * |e| with got = 1, e = 1 + d  <=>  d <= (atol + rtol) / (1 - rtol)
    limit = (tol.atol + tol.rtol) / (1 - tol.rtol)
    expected[123] += 0.95 * limit if where == "inside" else 1.05 * limit
    verdict = compare(got, expected, tol)
    assert verdict.ok == (where == "inside"), verdict.summary
    if where == "outside":
        assert verdict.summary.startswith("1 of 1000 elements"), verdict.summary
        assert any("(123,)" in line for line in verdict.details), verdict.details


@pytest.mark.parametrize("dtype", DTYPES)
def test_relative_norm_limit_bites_when_every_element_is_close(dtype):
    tol = DEFAULT_TOLERANCE[dtype]
    expected = torch.full((1000,), tol.atol / 10, dtype=torch.float64)
    got = expected + 0.9 * tol.atol  # inside atol everywhere, yet 9x the reference's norm off
    verdict = compare(got, expected, tol)
    assert not verdict.ok
    assert "relative-norm error" in verdict.summary and "precision too low" in verdict.summary, verdict.summary


@pytest.mark.parametrize("dtype", DTYPES)
def test_unwritten_elements_never_pass(dtype):
    expected = reference()
    got = expected.to(dtype)
    poison(got[7:9])  # what the grader put there before the launch, never overwritten
    verdict = compare(got, expected, DEFAULT_TOLERANCE[dtype])
    assert not verdict.ok
    assert verdict.summary == "2 of 1000 output elements were never written (still NaN)"
    assert any("never written" in line and "the first at index (7,)" in line for line in verdict.details)


@pytest.mark.parametrize("dtype", DTYPES)
def test_computed_nan_never_passes(dtype):
    expected = reference()
    got = expected.to(dtype)
    got[7] = float("nan")  # a NaN the kernel made (0/0, inf - inf): not the grader's marked one
    verdict = compare(got, expected, DEFAULT_TOLERANCE[dtype])
    assert not verdict.ok
    assert verdict.summary.startswith("1 of 1000 elements are NaN computed by the kernel"), verdict.summary
    assert not any("never written" in line for line in verdict.details), verdict.details


def test_nan_fails_even_where_the_reference_is_nan():
    expected = torch.tensor([1.0, float("nan")], dtype=torch.float64)
    verdict = compare(expected.float(), expected, DEFAULT_TOLERANCE[torch.float32])
    assert not verdict.ok


def test_all_unwritten_says_nothing_was_written():
    got = torch.empty(3, 4)
    poison(got)
    verdict = compare(got, torch.zeros(3, 4, dtype=torch.float64), DEFAULT_TOLERANCE[torch.float32])
    assert not verdict.ok
    assert verdict.summary == "no element of the output was written (all still NaN)"


def test_without_poisoning_no_nan_is_called_unwritten():
    got = torch.ones(2)
    poison(got[1:])
    verdict = compare(got, torch.ones(2, dtype=torch.float64), DEFAULT_TOLERANCE[torch.float32], poisoned=False)
    assert not verdict.ok
    assert "never written" not in "\n".join([verdict.summary, *verdict.details])


@pytest.mark.parametrize("value", [float("inf"), float("-inf")])
def test_inf_where_the_reference_is_finite_fails(value):
    expected = reference()
    got = expected.float()
    got[5] = value
    verdict = compare(got, expected, DEFAULT_TOLERANCE[torch.float32])
    assert not verdict.ok
    assert any("1 element is inf where the reference is finite" in line for line in verdict.details)


def test_all_inf_output_fails_with_a_message():
    """E.g. a softmax that divides by zero everywhere: a verdict, not an exception in the grader."""
    verdict = compare(
        torch.full((4,), float("inf")), torch.ones(4, dtype=torch.float64), DEFAULT_TOLERANCE[torch.float32]
    )
    assert not verdict.ok
    assert verdict.summary.startswith("4 of 4 elements"), verdict.summary
    assert "every one of them infinite" in verdict.summary and "max abs error" not in verdict.summary
    assert any("4 elements are inf where the reference is finite" in line for line in verdict.details)


def test_infinite_and_finite_mistakes_are_counted_apart():
    expected = torch.ones(4, dtype=torch.float64)
    got = torch.tensor([1.0, float("inf"), 3.0, 1.0])
    verdict = compare(got, expected, DEFAULT_TOLERANCE[torch.float32])
    assert verdict.summary == "2 of 4 elements are wrong, 1 of them infinite (max abs error of the finite ones 2)"


def test_matching_infinities_pass():
    expected = torch.tensor([1.0, float("inf"), float("-inf"), 2.0], dtype=torch.float64)
    verdict = compare(expected.half(), expected, DEFAULT_TOLERANCE[torch.float16])
    assert verdict.ok, verdict.summary


def test_infinity_of_the_wrong_sign_is_wrong_not_imprecise():
    expected = torch.tensor([1.0, float("inf"), 2.0], dtype=torch.float64)
    got = torch.tensor([1.0, float("-inf"), 2.0])
    verdict = compare(got, expected, DEFAULT_TOLERANCE[torch.float32])
    assert not verdict.ok
    assert "precision" not in verdict.summary, verdict.summary
    assert verdict.summary.startswith("1 of 3 elements"), verdict.summary


def test_empty_output_matches_empty_reference():
    verdict = compare(torch.empty(0), torch.empty(0, dtype=torch.float64), DEFAULT_TOLERANCE[torch.float32])
    assert verdict.ok, verdict.summary


def test_wrong_values_are_reported_with_indices_and_values():
    expected = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    got = expected.float().clone()
    got[2, 1] = 100.0
    verdict = compare(got, expected, DEFAULT_TOLERANCE[torch.float32])
    assert not verdict.ok
    assert verdict.summary.startswith("1 of 12 elements are wrong"), verdict.summary
    row = next(line for line in verdict.details if line.strip().startswith("(2, 1)"))
    assert row.split()[-3:] == ["100", "9", "91"]


def _unwritten_summary(got: torch.Tensor) -> str:
    return compare(got, torch.zeros(got.shape, dtype=torch.float64), DEFAULT_TOLERANCE[torch.float32]).summary


def test_a_written_prefix_is_named():
    got = torch.zeros(1000)
    poison(got[512:])
    assert _unwritten_summary(got).endswith(
        "only elements 0 to 511 were written: the grid, a mask or the offsets stop there, or every program "
        "writes that same range (is the program id part of the offsets?)"
    )


def test_missing_columns_of_every_row_are_named():
    got = torch.zeros(5, 300)
    poison(got[:, 128:])
    summary = _unwritten_summary(got)
    assert "in every row, columns 128 to 299 were never written" in summary
    assert "tl.program_id(1) is always 0" in summary


def test_missing_bottom_rows_are_named():
    got = torch.zeros(6, 50)
    poison(got[4:])
    assert "rows 4 to 5 were never written at all" in _unwritten_summary(got)


def test_scattered_unwritten_elements_get_no_pattern():
    got = torch.zeros(6, 50)
    poison(got[1, 3])
    poison(got[4, 7])
    assert _unwritten_summary(got) == "2 of 300 output elements were never written (still NaN)"


def test_counts_agree_with_their_nouns():
    """No '1 elements': a one-element output, and one element infinite with the other sign."""
    tol = Tolerance(rtol=1e-5, atol=1e-5, norm=1e-5)
    one = compare(torch.tensor([1.0]), torch.tensor([2.0], dtype=torch.float64), tol, poisoned=False)
    assert one.summary == "1 of 1 element is wrong (max abs error 1)"
    assert one.details[0] == "1 of 1 element differs from the reference (100%)."
    signs = compare(torch.tensor([-math.inf, 1.0]), torch.tensor([math.inf, 1.0], dtype=torch.float64), tol, False)
    assert "1 element is infinite with the other sign than the reference." in signs.details
    assert signs.details[0] == "1 of 2 elements differ from the reference (50%)."
    text = " ".join([one.summary, *one.details, signs.summary, *signs.details])
    assert not re.search(r"\b1 elements\b", text), text


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_output_of_values_near_zero_is_judged_on_the_scale_atol_calls_zero(dtype):
    """A correct float32 GELU on a (1, 1) case far in its tail: 7.9e-16 expected, 4.5e-17 off (6% of the
    reference; CI's check --solutions failed fused_bias_gelu on such a seed). The norm's limit is relative
    to at least atol on every element; a wrong value there still fails elementwise."""
    tol = DEFAULT_TOLERANCE[dtype]
    expected = torch.tensor([[7.9e-16]], dtype=torch.float64)
    assert compare(expected + 4.5e-17, expected, tol).ok
    assert not compare(expected + 10 * tol.atol, expected, tol).ok
