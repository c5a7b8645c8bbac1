"""The advice an out-of-bounds report gives, read from the pattern of the offending offsets
(``course_lib.hooks.offsets_pattern``). Made-up blocks of offsets here, each shaped like the bug it
stands for; tests/test_wrong_submissions.py grades the same bugs as kernels (tests/wrong/
k_mask_without_k0, swapped_strides, reads_before_start, grid_over_columns, off_by_one)."""

from __future__ import annotations

import numpy as np
import pytest

from course_lib import hooks

ROWS, COLS = 33, 65  # a of the tiled matmul's first K-tail case: 2145 elements
LANES = np.arange(1024)


def k_mask_without_k0_block():
    """a (33, 65) read as the tiled matmul's last K step with BLOCK_K 32 at k0 = 64: rows wrap round
    modulo M, the mask `ks < K` lets every lane through."""
    rows = np.arange(128) % ROWS
    ks = 64 + np.arange(32)
    return rows[:, None] * COLS + ks[None, :]  # (128, 32)


def swapped_strides_block():
    """x of shape (2, 5) read by a 64 x 64 tile whose rows step by stride_xn (1) and columns by
    stride_xm (5), masked by rows < 2 and cols < 5."""
    rows, cols = np.arange(64), np.arange(64)
    offsets = rows[:, None] * 1 + cols[None, :] * 5
    active = (rows < 2)[:, None] & (cols < 5)[None, :]
    return offsets, active


# (name, arguments) -> the kind each must get
PATTERNS = {
    "one past": (LANES, (1000,), (1,), {"active": LANES <= 1000}),
    "unmasked tail": (LANES, (1000,), (1,), {"masked": False}),
    "k mask": (k_mask_without_k0_block(), (ROWS, COLS), (COLS, 1), {"loop": hooks.LoopEvidence(2, 32)}),
    "before": (LANES - 1024, (1,), (1,), {}),
    "swapped": (*swapped_strides_block()[:1], (2, 5), (5, 1), {"active": swapped_strides_block()[1]}),
    "grid": (37 * 1000 + LANES, (37, 1000), (1000, 1), {"active": LANES < 1000, "program": (37, 0, 0),
                                                        "grid": (1000, 1, 1), "in_loop": False}),
}  # fmt: skip
KINDS = {
    "one past": hooks.ONE_PAST,
    "unmasked tail": hooks.TAIL,
    "k mask": hooks.TAIL,
    "before": hooks.BEFORE,
    "swapped": hooks.STRIDE,
    "grid": hooks.FAR,
}


def pattern(name: str) -> hooks.OffsetsPattern:
    offsets, shape, strides, kwargs = PATTERNS[name]
    return hooks.offsets_pattern(offsets, shape, strides, **kwargs)


@pytest.mark.parametrize("name", PATTERNS)
def test_each_pattern_is_classified(name):
    assert pattern(name).kind == KINDS[name], pattern(name)


def test_each_pattern_has_its_own_first_cause():
    firsts = {name: pattern(name).causes[0] for name in PATTERNS}
    assert len(set(firsts.values())) == len(firsts), firsts


def test_one_past_the_end_is_a_mask_with_less_or_equal():
    found = pattern("one past")
    assert found.seen == "one offset just past the end of `the tensor`: 1000, where its last element is 999"
    assert found.causes[0].startswith("a mask that keeps one offset too many: <= where < belongs")
    assert "x_ptr + offsets + 1" in found.causes[1]


def test_unmasked_tail_says_no_mask():
    found = pattern("unmasked tail")
    assert found.seen.startswith("a run of 24 offsets just past the end")
    assert found.causes == ("no mask: the last block sticks out past the end, and every lane of it goes to memory",)


def test_k_mask_without_k0_is_a_loop_mask_not_less_or_equal():
    """The report of issue 22: offsets 2145, 2146, ... just past a's end were put down to < versus <=.
    The run is 31 long, and the same load ran twice before with the same mask, its pointers 32
    elements on each time: the mask leaves out the loop's offset."""
    offsets = k_mask_without_k0_block()
    bad = offsets > ROWS * COLS - 1
    assert np.unique(offsets[bad]).tolist() == list(range(2145, 2176))
    found = pattern("k mask")
    assert "a run of 31 offsets just past the end of `the tensor`, 2145 to 2175" in found.seen
    assert found.causes[0].startswith("a loop's mask that leaves out the loop's offset: this access ran 2 times")
    assert "moved on 32 elements a step" in found.causes[0] and "k0 + ks < K" in found.causes[0]
    assert not any("<=" in cause for cause in found.causes)


def test_a_masked_tail_without_loop_evidence_puts_the_mask_first():
    offsets, shape, strides, _ = PATTERNS["k mask"]
    found = hooks.offsets_pattern(offsets, shape, strides)
    assert found.kind == hooks.TAIL
    assert found.causes[0].startswith("a mask that tests other offsets than the pointers use")
    assert found.causes[1].startswith("in a loop, a mask that leaves out the loop's offset")
    outside_loops = hooks.offsets_pattern(offsets, shape, strides, in_loop=False)
    assert not any("loop" in cause for cause in outside_loops.causes)


def test_before_the_start_is_a_subtraction():
    found = pattern("before")
    assert found.seen == "1024 offsets before the start of `the tensor`, the lowest -1024"
    assert "(pid - 1) * BLOCK_SIZE" in found.causes[0]


def test_far_below_the_start_is_an_int32_product_that_wrapped():
    found = hooks.offsets_pattern(LANES - 2**31, (4096, 4096), (4096, 1))
    assert found.kind == hooks.BEFORE
    assert found.causes[0].startswith("an int32 product that wrapped round")


def test_swapped_strides_are_a_stride_pattern():
    """The issue's offsets 10, 11, 15, 16, 20, 21: runs of 2 every 5, read by a tile whose column
    index runs over 5 columns with the row stride of a 2-row tensor."""
    offsets, active = swapped_strides_block()
    bad = active & (offsets > 9)
    assert np.unique(offsets[bad]).tolist() == [10, 11, 15, 16, 20, 21]
    found = pattern("swapped")
    assert "the pointers step 5 elements, the stride of dimension 0" in found.seen
    assert "lets 5 positions through there, the size of dimension 1" in found.seen
    assert found.causes[0].startswith("strides swapped")


def test_a_step_that_is_no_stride_is_a_row_length_used_as_a_stride():
    rows, cols = np.arange(8), np.arange(8)
    offsets = rows[:, None] * 9 + cols[None, :]  # rows 9 apart: another tensor's row length
    active = (rows < 6)[:, None] & (cols < 8)[None, :]
    found = hooks.offsets_pattern(offsets, (6, 8), (8, 1), active)
    assert found.kind == hooks.STRIDE
    assert "step 9 elements along axis 0 of the block, and no dimension" in found.seen
    assert found.causes[0].startswith("a row length used as a stride")


def test_runs_at_a_period_that_is_no_stride_are_a_stride_pattern():
    offsets = np.concatenate([np.arange(3) + 100 + 7 * i for i in range(4)])  # 1-D: runs of 3 every 7
    found = hooks.offsets_pattern(offsets, (100,), (1,), active=offsets >= 100)
    assert found.kind == hooks.STRIDE and "runs of 3 every 7 elements" in found.seen


def test_rows_past_the_last_row_are_a_tail_not_a_stride():
    """A 2-D tile without a row mask, over the first 16 of 100 columns: runs of 16 every 100, the
    tensor's own row stride. The tile sticks out past the last row."""
    rows, cols = 96 + np.arange(8), np.arange(16)
    offsets = rows[:, None] * 100 + cols[None, :]
    active = np.ones(offsets.shape, bool) & (cols < 100)[None, :]
    found = hooks.offsets_pattern(offsets, (100, 100), (100, 1), active)
    assert found.kind == hooks.TAIL
    assert "in 4 runs: rows past its last row" in found.seen


def test_a_whole_block_past_the_end_is_the_grid():
    found = pattern("grid")
    assert found.seen.startswith("every lane it let through lies past the end of `the tensor`: 1000 offsets from 37000")
    assert "program (37, 0, 0) of a grid of (1000, 1, 1) starts past the end" in found.causes[0]
    assert not any("loop" in cause for cause in found.causes)  # the load sits in no loop


def test_a_whole_block_past_the_end_in_a_loop_whose_mask_stays_is_the_loop():
    offsets, shape, strides, kwargs = PATTERNS["grid"]
    kwargs = {**kwargs, "in_loop": True, "loop": hooks.LoopEvidence(3, 1000)}
    found = hooks.offsets_pattern(offsets, shape, strides, **kwargs)
    assert found.kind == hooks.FAR
    assert found.causes[0].startswith("a loop's mask that leaves out the loop's offset: this access ran 3 times")


def test_the_text_lists_the_causes_in_order():
    text = pattern("one past").text()
    assert text.startswith("Seen: one offset just past the end")
    assert "Likely causes, most likely first: (1) a mask that keeps one offset too many" in text
    assert "; (2) a pointer shifted by one" in text
    assert pattern("unmasked tail").text().endswith("Likely cause: no mask: the last block sticks out past the end, "
                                                    "and every lane of it goes to memory.")  # fmt: skip
