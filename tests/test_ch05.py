"""Chapter 05's tasks, softmax, layernorm and online_softmax: each deliberately wrong submission in
tests/wrong/ch05_*/ is rejected with a
message that points at what is wrong (the case it fails, the cases that pass).

    python -m course_lib check softmax --source tests/wrong/ch05_no_max
"""

from __future__ import annotations

import re

import pytest
import torch
from conftest import WRONG

from course_lib import grader, runtime, tasks
from course_lib.compare import compare
from course_lib.grader import FAIL
from course_lib.tasks import ch05_fusion_reductions as ch05

SEED = 2024
TASKS = ("softmax", "layernorm", "online_softmax")

# folder under tests/wrong -> (task, pieces the grader's message must hold, cases that must pass)
WRONG_SUBMISSIONS = {
    # exp(x) overflows past 88.7: only the "large values" case (values up to about +-200) fails, with NaN
    "ch05_no_max": (
        "softmax",
        ("case 'large values'", "failed 1 of 11 cases: large values (6, 300) float32", "elements are NaN"),
        (),
    ),
    # padding loaded as 0 adds exp(-max) per lane to the sum: only rows with padding go wrong, and the
    # diagnosis names the padding
    "ch05_zero_padding": (
        "softmax",
        (
            "case 'tiny'",
            "tiny (3, 3) bfloat16",
            "tail (64, 130) float32",
            "masked-off columns were loaded as 0.0: they count in the max and the sum; "
            "load them as -inf (other=-float('inf'))",
        ),
        ("tiny (1, 1)", "(5, 4096)"),
    ),
    # each padding lane adds mean^2 to the variance
    "ch05_variance_padding": (
        "layernorm",
        (
            "case 'tiny'",
            "tiny (3, 3) bfloat16",
            "tail (64, 130) float32",
            "elements are off by more than the tolerance",
        ),
        ("tiny (1, 1)", "(5, 4096)"),
    ),
    # mean and variance over BLOCK_N: right only when n_cols is a power of two
    "ch05_block_divisor": (
        "layernorm",
        ("case 'tiny'", "failed 8 of 11 cases", "tail (37, 1000) float32", "large values (6, 300) float32"),
        ("tiny (1, 1)", "(5, 4096)"),
    ),
    # bf16 arithmetic: even a one-element float32 row (output = bias) is off, and every dtype fails
    "ch05_bf16_math": (
        "layernorm",
        ("case 'tiny'", "failed 11 of 11 cases", "first failure: tiny: shape=(1, 1) dtype=float32", "max abs error"),
        (),
    ),
    # no loop: columns past the first 1024 are never written
    "ch05_first_block_only": (
        "online_softmax",
        ("were never written", "failed 5 of 14 cases", "long rows (2, 20001) bfloat16", "the first at index (0, 1024)"),
        ("(37, 1000)", "(128, 1000)", "(6, 300)"),
    ),
    # out's rows addressed with the row length: only the view into a wider matrix goes wrong
    "ch05_row_length_as_stride": (
        "softmax",
        ("case 'strided rows'", "failed 1 of 11 cases", "between its rows", "the output's row stride"),
        ("(37, 1000)", "(128, 1000)", "(6, 300)"),
    ),
    # the running sum is not rescaled when the max grows: rows of one block are still right
    "ch05_no_rescale": (
        "online_softmax",
        ("elements are wrong", "long rows (3, 5000) float32", "long rows (2, 20001) bfloat16"),
        ("(37, 1000)", "(128, 1000)", "(6, 300)"),
    ),
}


def full_text(result: grader.TaskResult) -> str:
    return "\n".join([result.summary, *result.details])


def failed_cases(result: grader.TaskResult) -> str:
    """The grader's "failed N of M cases: ..." line."""
    return next(line for line in result.details if re.match(r"failed \d+ of \d+ cases", line))


# Every solution passing and every untouched exercise reporting TODO: tests/test_solutions_and_stubs.py


@pytest.mark.parametrize("folder", sorted(WRONG_SUBMISSIONS))
def test_wrong_submission_is_rejected(folder):
    task, pieces, passing = WRONG_SUBMISSIONS[folder]
    result = grader.grade_task(task, WRONG / folder, seed=SEED)
    text = full_text(result)
    assert result.status == FAIL, text
    for piece in pieces:
        assert piece in text, f"expected {piece!r} in the grader's message:\n{text}"
    failed = failed_cases(result)
    for shape in passing:  # the bug must not show where it cannot: those cases pass
        assert shape not in failed, f"{shape} should pass for {folder}:\n{failed}"


def test_every_ch05_wrong_submission_is_listed():
    on_disk = {p.parent.name for p in WRONG.glob("ch05_*/*.py")}
    assert on_disk == set(WRONG_SUBMISSIONS)
    for folder, (task, _, _) in WRONG_SUBMISSIONS.items():
        assert (WRONG / folder / f"{task}.py").exists(), folder


@pytest.mark.parametrize("task, block", [("softmax", None), ("online_softmax", 64), ("online_softmax", 1024)])
def test_zero_padding_is_named_and_only_there(task, block):
    """The diagnosis sees float64 inputs and the output, as in the grader: softmax with the padding
    counted as zeros (one block of next_power_of_2(n_cols), or chunks of BLOCK_N) is named; another
    mistake is not."""
    spec = tasks.get(task)
    case = next(c for c in spec.all_cases(runtime.MODE) if c.shape == (64, 130))
    x = spec.make_inputs(case, torch.Generator().manual_seed(SEED))["x"].double()
    padded = ch05._zero_padded_softmax(x, block or 256)
    assert not compare(padded, torch.softmax(x, -1), spec.tolerance[case.dtype]).ok  # the check fails it
    assert spec.diagnose({"x": x}, padded, case) == ch05.ZERO_PADDING
    assert spec.diagnose({"x": x}, torch.softmax(x, -1) * 0.9, case) is None
    if task == "softmax":  # one block per row: padding to 512 is no BLOCK_N that softmax's kernel has
        assert spec.diagnose({"x": x}, ch05._zero_padded_softmax(x, 512), case) is None
