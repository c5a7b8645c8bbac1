"""Chapter 08, memory access: the access map (course_lib.widgets.access_map) and the tiled_transpose
task. The map's ownership, mask shading and sector counts are checked on tiny launches; the task's
solution passes, its stub reports TODO, and each deliberately wrong submission in
tests/wrong/ch08_*transpose*/ fails with a message that names the mistake.

    python -m course_lib check tiled_transpose --source tests/wrong/ch08_naive_transpose
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from conftest import WRONG, requires_interpreter

from course_lib import demos, grader, runtime, sources, stubs, tasks
from course_lib.grader import FAIL, PASS, TODO
from course_lib.tasks import ch08_memory_access as ch08
from course_lib.widgets import access_map as am

SEED = 2024
TASK = "tiled_transpose"
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, limit, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # (BLOCK,)
    mask = offsets < limit
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def _strided_copy_kernel(x_ptr, out_ptr, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # (BLOCK,)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets * STRIDE, mask=mask), mask=mask)


@triton.jit
def _swapped_pointer_transpose_kernel(x_ptr, out_ptr, M, N, BLOCK: tl.constexpr):
    """A tile stored without tl.trans, through swapped pointers: the store's block runs down out's
    columns in row-major order, along its rows in column-major order."""
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tile = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask)
    tl.store(out_ptr + cols[None, :] * M + rows[:, None], tile, mask=mask)


def _add_map(n=70, limit=None, dtype=F32, block=32):
    x, y = torch.randn(n).to(dtype), torch.randn(n).to(dtype)  # (n,)
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, block),)
    limit = n if limit is None else limit
    amap = am.access_map(lambda: _add_kernel[grid](x, y, out, n, limit, BLOCK=block), x=x, out=out)
    return amap, x, y, out


# --------------------------------------------------------------------------------------------------
# the access map


@requires_interpreter
def test_map_colours_elements_by_program_and_lists_masked_lanes_outside():
    amap, x, y, out = _add_map(70)
    assert torch.allclose(out, x + y)
    loads, stores = amap.access("load", "x"), amap.access("store", "out")
    expected = np.array([0] * 32 + [1] * 32 + [2] * 6)  # BLOCK 32: 70 = 32 + 32 + 6
    assert (loads.owner == expected).all() and (stores.owner == expected).all()
    # the last block's 26 masked-off lanes point past x (into y's memory, perhaps): never into x
    assert loads.masked_outside == stores.masked_outside == 3 * 32 - 70
    assert not loads.masked.any()
    assert amap.access("load", "y") is None  # y was not named
    assert amap.grid == [3, 1, 1] and amap.programs == 3
    text = amap.text()
    assert "loads of x: 70 of 70 elements by 3 programs; 26 masked-off lanes pointed outside x" in text
    # one warp: lanes 0-31 of program 0, one element each
    assert np.flatnonzero(loads.warp).tolist() == list(range(32))


@requires_interpreter
def test_map_shades_elements_only_masked_lanes_pointed_at():
    amap, *_ = _add_map(70, limit=60)
    loads = amap.access("load", "x")
    assert loads.masked[60:].all() and not loads.masked[:60].any()
    assert (loads.owner[60:] == -1).all() and (loads.owner[:60] >= 0).all()
    assert "10 reached only by masked-off lanes" in amap.text()


@requires_interpreter
@pytest.mark.parametrize(("dtype", "per_warp"), [(F32, 4), (F16, 2)])
def test_sectors_follow_the_element_size(dtype, per_warp):
    """32 lanes of 4 bytes fill 4 sectors of 32 bytes; of 2 bytes, 2."""
    amap, x, *_ = _add_map(64, dtype=dtype)
    [site] = [s for s in amap.sites if s.kind == "load" and s.tensor == "x"]
    assert site.requests == 2 and site.sectors == site.ideal == 2 * per_warp
    sector_ids = amap.tensors["x"][3]
    assert len(set(sector_ids.tolist())) == 64 * x.element_size() // 32
    edges = am._sector_edges(sector_ids.reshape(2, 32))
    # vertical edges inside each drawn row: one between each pair of sectors; 1 between the rows; 4 around
    assert len(edges) == 2 * (32 // (32 // x.element_size()) - 1) + 32 + 4


@requires_interpreter
def test_strided_access_touches_more_sectors():
    x = torch.randn(128)  # (128,)
    out = torch.empty(64)  # (64,)
    amap = am.access_map(lambda: _strided_copy_kernel[(2,)](x, out, 64, STRIDE=2, BLOCK=32), x=x, out=out)
    load = next(s for s in amap.sites if s.kind == "load")
    store = next(s for s in amap.sites if s.kind == "store")
    assert load.per_request == 8 and store.per_request == 4  # every second element: twice the sectors
    loads = amap.access("load", "x")
    assert (loads.owner[1::2] == -1).all() and (loads.owner[0::2] >= 0).all()


@requires_interpreter
def test_figure_renders_loads_and_stores_in_separate_panels():
    import matplotlib

    matplotlib.use("Agg")
    amap, *_ = _add_map(70, limit=60)
    fig = amap.figure()
    assert len(fig.axes) == 2
    assert fig.axes[0].get_title(loc="left").startswith("loads of x")
    assert fig.axes[1].get_title(loc="left").startswith("stores of out")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"
    pytest.importorskip("ipywidgets")
    from course_lib.widgets import shown_images, shown_text

    box = amap.panel()
    assert len(shown_images(box)) == 1 and "32-byte sector edges" in shown_text(box)


def test_map_needs_cpu_mode(monkeypatch):
    monkeypatch.setattr(runtime, "is_cpu", lambda: False)
    with pytest.raises(RuntimeError, match="COURSE_MODE=cpu"):
        am.access_map(lambda: None, x=torch.zeros(4))


def test_map_refuses_big_tensors():
    with pytest.raises(ValueError, match="1 to 8192 elements"):
        am.access_map(lambda: None, x=torch.zeros(100, 100))


# --------------------------------------------------------------------------------------------------
# the task: solution, stub, wrong submissions


def full_text(result: grader.TaskResult) -> str:
    return "\n".join([result.summary, *result.details])


# folder -> (pieces the message must hold, labels of cases that must fail, or None: none may)
WRONG_SUBMISSIONS = {
    "ch08_naive_transpose": (
        (
            "all 13 cases are right, but the stores to out are not coalesced: 32 sectors per warp",
            "8.0x the 4 their data fits in",
            "A warp's 32 stores land in 32 different rows",
            "tl.trans",
        ),
        None,
    ),
    "ch08_transpose_no_mask": (
        ("out-of-bounds access", "a load outside the memory", "Nearest tensor: `x_ptr`", "tl.load had no mask"),
        {"tiny", "tail", "misaligned", "one row", "one column"},
    ),
    "ch08_transpose_assumes_contiguous": (
        ("the output is x.T with x read as if contiguous", "x.stride() = (1, 65)", "use all four"),
        {"transposed view", "strided rows"},
    ),
}


def test_solution_passes_and_is_coalesced():
    result = grader.grade_task(TASK, "solutions", seed=SEED)
    assert result.status == PASS, full_text(result)
    assert result.cases_passed == result.cases_total >= 12
    if runtime.is_cpu():
        assert any("loads of x" in line and "1.00x" in line for line in result.details), full_text(result)


def test_untouched_stub_reports_todo():
    assert stubs.is_untouched(TASK), f"exercises/{TASK}.py was edited: run sync-exercises --force"
    result = grader.grade_task(TASK, "exercises", seed=SEED)
    assert result.status == TODO, full_text(result)
    assert result.summary.startswith(stubs.NOT_IMPLEMENTED), result.summary


@requires_interpreter  # out-of-bounds accesses and sector counts are seen in the interpreter
@pytest.mark.parametrize("folder", sorted(WRONG_SUBMISSIONS))
def test_wrong_submission_is_rejected(folder):
    pieces, must_fail = WRONG_SUBMISSIONS[folder]
    result = grader.grade_task(TASK, WRONG / folder, seed=SEED)
    text = full_text(result)
    assert result.status == FAIL, text
    for piece in pieces:
        assert piece in text, f"expected {piece!r} in the grader's message:\n{text}"
    failed_line = next((d for d in result.details if d.startswith("failed ")), "")
    if must_fail is None:
        assert not failed_line, text
    else:
        for label in must_fail:
            assert f"{label} (" in failed_line, f"case {label!r} should have failed:\n{text}"
        assert "large (" not in failed_line or folder == "ch08_transpose_no_mask", text


def test_every_ch08_transpose_wrong_submission_is_listed():
    on_disk = {p.parent.name for p in WRONG.glob("ch08_*/tiled_transpose.py")}
    assert on_disk == set(WRONG_SUBMISSIONS)


# --------------------------------------------------------------------------------------------------
# the coalescing check: probe on real launches, judge on facts


def _probe(launcher):
    return ch08.probe_sectors(None, launcher)


@requires_interpreter
def test_probe_measures_the_documented_ratios():
    """The numbers MAX_SECTOR_RATIO's comment quotes: the solution 1.00x / 1.00x, the naive kernel
    1.00x for its loads and 8.00x for its stores."""
    _, solution = sources.load_file(sources.task_path(TASK, "solutions"), "tiled_transpose")
    ratios = {}
    for name, launcher in (("solution", solution), ("naive", demos.naive_transpose)):
        facts = _probe(launcher)
        ratios[name] = [round(facts[k][1] / facts[k][2], 2) for k in ("loads", "stores")]
        assert facts["loads"][0] == facts["stores"][0] == 256 * 192 // 32, facts
    assert ratios == {"solution": [1.0, 1.0], "naive": [1.0, 8.0]}
    [(ok, summary, _)] = ch08.judge_sectors(_probe(demos.naive_transpose))
    assert not ok and "stores to out are not coalesced" in summary


@requires_interpreter
def test_probe_accepts_a_tile_stored_through_swapped_pointers():
    """The compiler lays a 2-D store out along its contiguous axis: no tl.trans needed for that."""

    def launcher(x, out):
        M, N = x.shape
        _swapped_pointer_transpose_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](x, out, M, N, BLOCK=32)
        return out

    facts = _probe(launcher)
    [(ok, summary, _)] = ch08.judge_sectors(facts)
    assert ok, summary


def test_judge_rejects_uncoalesced_loads():
    facts = {"mode": runtime.CPU, "shape": [256, 192], "loads": [1536, 49152, 6144], "stores": [1536, 6144, 6144]}
    [(ok, summary, details)] = ch08.judge_sectors(facts)
    assert not ok and summary.startswith("the loads of x are not coalesced: 32 sectors per warp")
    assert any("a column of x, 192 elements (768 bytes) apart" in line for line in details), details


def test_judge_allows_a_misaligned_tile_and_rejects_a_missing_store():
    # one element off a sector boundary: 5 sectors for 4
    facts = {"mode": runtime.CPU, "shape": [256, 192], "loads": [10, 50, 40], "stores": [10, 40, 40]}
    [(ok, _, _)] = ch08.judge_sectors(facts)
    assert ok
    facts["stores"] = [0, 0, 0]
    [(ok, summary, _)] = ch08.judge_sectors(facts)
    assert not ok and "no stores to out were seen" in summary


def test_judge_passes_on_a_gpu_with_a_note():
    [(ok, summary, details)] = ch08.judge_sectors({"mode": runtime.GPU})
    assert ok and summary == "coalescing checked in CPU mode" and "COURSE_MODE=cpu" in details[0]


# --------------------------------------------------------------------------------------------------
# cases, inputs, cost model, hints


def test_cases_cover_what_the_design_asks():
    for mode in (runtime.CPU, runtime.GPU):
        cases = tasks.get(TASK).all_cases(mode)
        labels = {c.label for c in cases}
        assert {"tiny", "tail", "transposed view", "strided rows", "misaligned", "large"} <= labels
        assert any(c.shape[0] * c.shape[1] <= 4 for c in cases)
        assert any(all(s % 16 for s in c.shape) for c in cases)  # no multiple of any block size
        assert {c.dtype for c in cases} == {F32, F16, BF16}
        large = max(cases, key=lambda c: c.shape[0] * c.shape[1])
        assert triton.cdiv(large.shape[0], 64) * triton.cdiv(large.shape[1], 64) >= 9


def test_inputs_have_the_promised_layouts():
    spec = tasks.get(TASK)
    by_label = {c.label: c for c in spec.cases(runtime.CPU)}
    made = spec.make_inputs(by_label["transposed view"], torch.Generator().manual_seed(0))
    assert made["x"].shape == (65, 70) and made["x"].stride() == (1, 65) and made["out"].shape == (70, 65)
    made = spec.make_inputs(by_label["strided rows"], torch.Generator().manual_seed(0))
    assert made["x"].stride(0) == 50 + 5 and made["out"].stride(0) == 40 + 3
    made = spec.make_inputs(by_label["misaligned"], torch.Generator().manual_seed(0))
    assert made["x"].storage_offset() == made["out"].storage_offset() == 1


def test_bench_cases_variants_and_bytes():
    spec = tasks.get(TASK)
    assert [(c.shape, c.dtype) for c in spec.bench_cases] == [((16384, 16384), F32), ((8192, 8192), F32)]
    assert spec.bytes_moved(tasks.Case((8192, 8192), F32, "bench")) == 2 * 8192 * 8192 * 4
    variants = spec.bench_variants(spec.bench_cases[0])
    assert set(variants) == {"copy", "naive"}
    x = torch.randn(5, 7)  # (5, 7)
    copied = variants["copy"](x)
    assert copied.shape == (35,) and torch.equal(copied, x.reshape(-1))
    if runtime.is_cpu():
        assert torch.equal(variants["naive"](x), x.t())


def test_diagnosis_stays_quiet_on_a_right_answer():
    for case in tasks.get(TASK).cases(runtime.CPU):
        made = ch08.transpose_inputs(case, torch.Generator().manual_seed(0))
        x = made["x"].double()
        assert ch08._transpose_diagnose({"x": x}, x.t().contiguous(), case) is None, case


def test_hints_come_in_order():
    hints = tasks.get(TASK).hints
    assert len(hints) == 4
    assert "tl.program_id(0)" in hints[0] and "tl.trans" in hints[1] and "mask" in hints[2] and "stride" in hints[3]
