"""Chapter 06's tasks, tiled_matmul and grouped_matmul: the solutions pass, the stubs report TODO, each
deliberately wrong submission in tests/wrong/ch06_*/ fails on the cases it should with a message that
names the mistake, and the ordering check (probe in the worker, judge in the grader) reads the order
of the programs right.

    python -m course_lib check grouped_matmul --source tests/wrong/ch06_row_major_order
"""

from __future__ import annotations

import re

import pytest
import torch
import triton
from conftest import GOOD, WRONG, requires_interpreter

from course_lib import grader, runtime, sources, stubs, tasks
from course_lib.compare import compare
from course_lib.grader import FAIL, PASS, TODO
from course_lib.tasks import ch06_matmul as ch06

SEED = 2024  # fixed, so that a failure of this table replays exactly
TILED, GROUPED = "tiled_matmul", "grouped_matmul"
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16


def full_text(result: grader.TaskResult) -> str:
    return "\n".join([result.summary, *result.details])


def failed_cases(result: grader.TaskResult) -> set[str]:
    """The failed cases as the report names them: 'long K (32, 48, 8191) float16', ..."""
    line = next((d for d in result.details if d.startswith("failed ")), None)
    if line is None:
        return set()
    names = re.findall(r"([A-Za-z][A-Za-z ]*) (\([0-9, ]+\)) (float32|float16|bfloat16)", line.split(": ", 1)[1])
    assert names, line
    return {" ".join(name) for name in names}


def case_name(case: tasks.Case) -> str:
    return f"{case.label} {tuple(case.shape)} {str(case.dtype).replace('torch.', '')}"


def _k_tail(case: tasks.Case) -> bool:
    """The last K step sticks out past K (the solution's BLOCK_K: 64 for fp16, 32 for fp32)."""
    return case.shape[2] % (64 if case.dtype == F16 else 32) != 0


# folder under tests/wrong -> (task, pieces the grader's message must hold, case -> must it fail?).
# None: the case may fail or pass. The row-major order gets every value right: no case fails.
# fmt: off
WRONG_SUBMISSIONS = {
    "ch06_no_k_mask": (TILED, ("out-of-bounds access", "a load outside the memory", "Nearest tensor: `a_ptr`",
                               "tl.load had no mask"),
                       lambda c: True if c.shape == (1, 1, 1) else (None if _k_tail(c) else False)),
    "ch06_fp16_accumulator": (TILED, ("precision too low",),
                              lambda c: True if c.label == "long K" else (None if c.dtype == F16 else False)),
    "ch06_b_assumed_contiguous": (TILED, ("the output is a @ b with b read as if contiguous", "b.stride() = (1, 96)",
                                          "x.stride(0) and x.stride(1)"),
                                  lambda c: c.label in ("transposed b", "transposed a and b", "strided rows")),
    "ch06_no_store_mask": (TILED, ("out-of-bounds access", "a store outside the memory", "Nearest tensor: `out_ptr`",
                                   "tl.store had no mask"),
                           lambda c: True if c.shape == (1, 1, 1) else None),
    "ch06_row_major_order": (GROUPED, ("all 13 cases are right", "programs are numbered row by row: consecutive "
                                       "programs sweep a whole row of B's tiles", "(0, 0), (0, 1), (0, 2)",
                                       "10 x 19 tiles of 128 x 128", "groups of GROUP_M tile-rows",
                                       "programs that run at the same time should share their tile-rows of a"),
                             lambda c: False),
    # blocks of 5 tile-rows x 2 tile-columns down 2-column strips (found by a review): local on the probe, but
    # at 8192^2 a wave reads 64 tile-rows of a, as column by column does; an order it does not recognize is
    # judged by the probe's strips, where this reads 88% of row order's (at most 86%)
    "ch06_blocks_down_columns": (GROUPED, ("all 13 cases are right", "the tiles that run together do not share "
                                           "their rows of a and columns of b", "(at most 86% needed)"),
                                 lambda c: False),
    # a 2-D grid (tile-rows, tile-columns) taken straight from the ids: a GPU starts program_id(0) fastest,
    # so column by column; the advice is the grid's, not GROUP_M's
    "ch06_grid_2d_plain": (GROUPED, ("all 13 cases are right", "programs are numbered column by column",
                                     "judged in the order a GPU starts them, tl.program_id(0) fastest",
                                     "pid = tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)"),
                           lambda c: False),
    # 128-row tiles in groups of 8: only the 3 tile-rows of the large cases make a group shorter than 8
    "ch06_full_last_group": (GROUPED, ("were never written",),
                             lambda c: c.label == "large"),
}
# fmt: on


@pytest.mark.parametrize("task", [TILED, GROUPED])
def test_solution_passes(task):
    result = grader.grade_task(task, "solutions", seed=SEED)
    assert result.status == PASS, full_text(result)
    assert result.cases_passed == result.cases_total >= 12
    if task == GROUPED and runtime.is_cpu():
        assert any("grouped order: groups of 8 tile-rows" in line for line in result.details), full_text(result)


# Other right orders (tests/good): what the rule protects is that tiles running together share strips
# of a and b, not one formula. Each failed the judge that matched the solution's order only.
GOOD_SUBMISSIONS = {
    "ch06_column_groups": "grouped order: groups of 8 tile-columns",
    "ch06_persistent_groups": "16 persistent programs running side by side",
    "ch06_groups_of_4": "grouped order: groups of 4 tile-rows",
    # groups of 8 walked down and back up: the same tiles in every wave, give or take one
    "ch06_serpentine": "grouped order: groups of 8 tile-rows, walked as a serpentine",
    # groups of 16 tile-rows: column by column on the probe's 10 tile-rows, groups on a taller output
    "ch06_group_16": "grouped order: groups of 16 tile-rows, as tall as the probe or taller",
    # a 2-D grid whose kernel numbers its programs as a GPU starts them, then groups: refused until 2026-12-05
    "ch06_grid_2d": "judged in the order a GPU starts them",
    # super-tiles of 8 x 8, block by block: the probe's waves are inside one block, so judged at scale
    "ch06_super_tiles": "super-tiles of 8 x 8 tiles, taken row by row",
}


@requires_interpreter  # the order is seen in the interpreter
@pytest.mark.parametrize("folder", sorted(GOOD_SUBMISSIONS))
def test_other_right_orders_pass(folder):
    result = grader.grade_task(GROUPED, GOOD / folder, seed=SEED)
    text = full_text(result)
    assert result.status == PASS, text
    assert GOOD_SUBMISSIONS[folder] in text, text


@requires_interpreter
def test_the_order_probe_runs_one_call_not_the_autotuners_trials():
    """The solution autotunes over several configs; the probe looks at the order of one call, so the
    autotuner keeps its first config there without trying each (grouped_matmul's CPU grading took 14 s
    with the trials, 7 without). The cases still run every config."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("grouped_probe", sources.resolve("solutions") / f"{GROUPED}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert len(module.grouped_matmul_kernel.configs) > 1, "the solution autotunes: the test means something"
    from course_lib import interpreter
    from course_lib.grader.worker import run_probe

    facts = run_probe(ch06.probe_order, module, module.grouped_matmul)
    assert facts["launches"] == 1 and facts["right"], facts
    assert not interpreter._trials_skipped  # only inside the probe


@pytest.mark.parametrize("task", [TILED, GROUPED])
def test_untouched_stub_reports_todo(task):
    assert stubs.is_untouched(task), f"exercises/{task}.py was edited: run sync-exercises --force"
    result = grader.grade_task(task, "exercises", seed=SEED)
    assert result.status == TODO, full_text(result)
    assert result.summary.startswith(stubs.NOT_IMPLEMENTED), result.summary


@requires_interpreter  # out-of-bounds accesses and the order of stores are seen in the interpreter
@pytest.mark.parametrize("folder", sorted(WRONG_SUBMISSIONS))
def test_wrong_submission_is_rejected(folder):
    task, pieces, should_fail = WRONG_SUBMISSIONS[folder]
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


def test_every_ch06_wrong_submission_is_listed():
    on_disk = {p.parent.name for p in WRONG.glob("ch06_*/*.py")}
    assert on_disk == set(WRONG_SUBMISSIONS)


# --------------------------------------------------------------------------------------------------
# cases, tolerances and the cost model


def test_cases_cover_what_the_design_asks():
    for mode in (runtime.CPU, runtime.GPU):
        cases = tasks.get(TILED).all_cases(mode)
        labels = {c.label for c in cases}
        assert {"tiny", "tail", "K tail", "long K", "transposed b", "misaligned", "large"} <= labels
        assert any(c.shape[0] * c.shape[1] <= 4 for c in cases)
        assert any(all(s % 16 for s in c.shape) for c in cases)  # no multiple of any block size
        large = max(cases, key=lambda c: c.shape[0] * c.shape[1])
        assert triton.cdiv(large.shape[0], 128) * triton.cdiv(large.shape[1], 128) >= 9  # many programs
        dtypes = {c.dtype for c in cases}
        assert dtypes == ({F32, F16} if mode == runtime.CPU else {F32, F16, BF16})
    assert {c.dtype for c in ch06._matmul_cases(runtime.CPU) if c.gpu_only} == set()
    assert all(c.gpu_only for c in ch06._matmul_cases(runtime.GPU) if c.dtype == BF16)


def test_inputs_have_the_promised_layouts():
    spec = tasks.get(TILED)
    by_label = {c.label: c for c in spec.cases(runtime.CPU)}
    made = spec.make_inputs(by_label["transposed b"], torch.Generator().manual_seed(0))
    M, N, K = by_label["transposed b"].shape
    assert made["b"].shape == (K, N) and made["b"].stride() == (1, K)
    made = spec.make_inputs(by_label["misaligned"], torch.Generator().manual_seed(0))
    assert all(made[name].storage_offset() == 1 for name in ("a", "b", "out"))
    made = spec.make_inputs(by_label["strided rows"], torch.Generator().manual_seed(0))
    assert made["out"].stride(0) > made["out"].shape[1] and made["a"].stride(0) > made["a"].shape[1]


def test_bench_cases_and_cost_model():
    spec = tasks.get(GROUPED)
    assert spec.tensor_cores and [c.shape for c in spec.bench_cases] == [
        (8192, 8192, 8192),
        (4096, 4096, 4096),
        (8192, 8192, 512),
    ]
    case = tasks.Case((8192, 8192, 512), BF16, "bench")
    assert spec.flops(case) == 2 * 8192 * 8192 * 512
    assert spec.bytes_moved(case) == (8192 * 512 * 2 + 8192 * 8192) * 2


def _tf32(t: torch.Tensor) -> torch.Tensor:
    """float32 rounded to TF32's 10 mantissa bits (nearest), as a GPU's default fp32 tl.dot reads it."""
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32).view(t.shape)


def test_tf32_products_fail_the_float32_tolerance():
    """The solutions pass input_precision="ieee": TF32 would be 50x off the float32 limit."""
    case = tasks.Case((100, 37, 129), F32, "tail")
    made = ch06.matmul_inputs(case, torch.Generator().manual_seed(1))
    a, b = made["a"], made["b"]
    exact = a.double() @ b.double()
    tf32 = (_tf32(a).double() @ _tf32(b).double()).float()
    verdict = compare(tf32, exact, ch06.MATMUL_TOLERANCE[F32], poisoned=False)
    assert not verdict.ok and "precision too low" in verdict.summary


def test_one_fp16_rounding_passes_with_room():
    """A float32 accumulator leaves one rounding of the result: about 2.1e-4 against the 5e-4 limit."""
    for case in tasks.get(TILED).cases(runtime.CPU):
        if case.dtype != F16:
            continue
        made = ch06.matmul_inputs(case, torch.Generator().manual_seed(3))
        exact = made["a"].double() @ made["b"].double()
        once = exact.to(F16)
        tol = ch06.MATMUL_TOLERANCE[F16]
        assert compare(once, exact, tol, poisoned=False).ok, case
        if once.numel() >= 1000:
            assert ((once.double() - exact).norm() / exact.norm()).item() < tol.norm / 2, case


def test_diagnosis_stays_quiet_on_a_right_answer():
    for case in tasks.get(TILED).cases(runtime.CPU):
        made = ch06.matmul_inputs(case, torch.Generator().manual_seed(0))
        inputs = {"a": made["a"].double(), "b": made["b"].double()}
        assert ch06._matmul_diagnose(inputs, inputs["a"] @ inputs["b"], case) is None, case


def test_hints_come_in_order():
    tiled, grouped = tasks.get(TILED).hints, tasks.get(GROUPED).hints
    assert len(tiled) == len(grouped) == 4
    assert "pid // n_col_tiles" in tiled[0] and "stride" in tiled[1] and "mask" in tiled[2]
    assert "float32" in tiled[3] and 'input_precision="ieee"' in tiled[3]
    assert "L2" in grouped[0] and "tl.minimum" in grouped[2] and "triton.autotune" in grouped[3]


# --------------------------------------------------------------------------------------------------
# the ordering check: the judge on facts made by hand


def _facts(order, block=(128, 128), grid=None, shape=(2432, 640)):
    stores = [[r * block[0], c * block[1]] for r, c in order]
    return {"mode": runtime.CPU, "shape": list(shape), "grid": grid or [len(order), 1, 1], "stores": stores}


def _tutorial_order(n_rows: int, n_cols: int, group_m: int) -> list[tuple[int, int]]:
    """Triton's matmul tutorial, program by program."""
    order = []
    for pid in range(n_rows * n_cols):
        per_group = group_m * n_cols
        first = pid // per_group * group_m
        height = min(n_rows - first, group_m)
        order.append((first + (pid % per_group) % height, (pid % per_group) // height))
    return order


@pytest.mark.parametrize(("n_rows", "n_cols", "group_m"), [(19, 5, 8), (16, 4, 8), (7, 3, 2), (5, 5, 1), (4, 6, 4)])
def test_grouped_order_is_the_tutorials(n_rows, n_cols, group_m):
    assert ch06.grouped_order(n_rows, n_cols, group_m) == _tutorial_order(n_rows, n_cols, group_m)


@pytest.mark.parametrize(("n_rows", "n_cols", "group_m"), [(19, 5, 8), (19, 5, 4), (38, 10, 8), (19, 5, 2)])
def test_judge_accepts_groups(n_rows, n_cols, group_m):
    facts = _facts(ch06.grouped_order(n_rows, n_cols, group_m), block=(2432 // n_rows, 640 // n_cols))
    [(ok, summary, details)] = ch06.judge_order(facts)
    assert ok, (summary, details)
    assert f"groups of {group_m} tile-rows" in details[0]


def test_judge_rejects_row_by_row():
    [(ok, summary, details)] = ch06.judge_order(_facts(ch06.grouped_order(19, 5, 1)))
    assert not ok
    assert summary.startswith("programs are numbered row by row: consecutive programs sweep a whole row of B's tiles")
    assert "(0, 0), (0, 1), (0, 2)" in details[0] and "19 x 5 tiles of 128 x 128" in details[0]


def test_judge_rejects_column_by_column():
    [(ok, summary, _)] = ch06.judge_order(_facts(ch06.grouped_order(19, 5, 19)))
    assert not ok and "column by column" in summary


@pytest.mark.parametrize(("n_rows", "n_cols", "group_n"), [(10, 19, 8), (10, 10, 8), (19, 5, 2)])
def test_judge_accepts_groups_of_tile_columns(n_rows, n_cols, group_n):
    facts = _facts(ch06.column_grouped_order(n_rows, n_cols, group_n))
    [(ok, summary, details)] = ch06.judge_order(facts)
    assert ok and summary == f"programs run in groups of {group_n} tile-columns", (summary, details)
    assert "a wave of 132 programs reads about" in details[1]


def test_judge_accepts_persistent_programs_by_the_order_they_run():
    """16 programs, each storing the tiles 16 apart: program 0 stores tiles 0, 16, 32, ..., before
    program 1 runs in the interpreter, but on a GPU the programs run side by side."""
    grouped = ch06.grouped_order(10, 19, 8)
    stores = [(t, p) for p in range(16) for t in range(p, len(grouped), 16)]
    facts = _facts([grouped[t] for t, _ in stores], grid=[16, 1, 1])
    facts["programs"] = [p for _, p in stores]
    [(ok, summary, details)] = ch06.judge_order(facts)
    assert ok and summary == "programs run in groups of 8 tile-rows", (summary, details)
    assert "16 persistent programs running side by side" in details[0]
    facts["programs"] = [0] * len(stores)  # one program storing them all in this order: not grouped
    [(ok, _, _)] = ch06.judge_order(facts)
    assert not ok


def test_judge_accepts_an_order_that_keeps_the_strips_shared():
    order = ch06.grouped_order(10, 19, 4)  # the probe's tiles of 128 x 128
    order[3], order[4] = order[4], order[3]  # no formula of ours, but the tiles running together still share
    [(ok, summary, details)] = ch06.judge_order(_facts(order))
    # (groups of 4 tile-rows are also blocks of 4 x 2 tiles, in any order within each: the super-tile judge)
    assert ok and summary in (
        "programs that run together share strips of a and b",
        "programs run in super-tiles of 4 x 2 tiles, taken row by row",
    ), (summary, details)


def test_judge_rejects_an_order_that_scatters_the_tiles():
    order = ch06.grouped_order(10, 19, 4)
    shuffled = [order[i] for i in torch.randperm(len(order), generator=torch.Generator().manual_seed(0))]
    [(ok, summary, details)] = ch06.judge_order(_facts(shuffled))
    assert not ok and summary == "the tiles that run together do not share their rows of a and columns of b"
    assert any("(at most 86% needed)" in line for line in details), details


def test_judge_rejects_column_groups_as_wide_as_the_output():
    """Groups of tile-columns as wide as the output are the row-by-row order."""
    [(ok, summary, _)] = ch06.judge_order(_facts(ch06.column_grouped_order(19, 5, 8)))
    assert not ok and summary.startswith("programs are numbered row by row")


def test_judge_takes_a_two_dimensional_grid_in_the_gpus_start_order():
    """The programs' numbers are their places in a GPU's start order (program_id(0) fastest); the stores
    come in the interpreter's order. A grouped order passes whatever the grid's shape, row order fails."""
    order = ch06.grouped_order(19, 5, 8)
    gx, gy = 5, 19  # the interpreter runs x slowest: program (x, y) is its x * gy + y'th
    run = sorted(range(len(order)), key=lambda n: (n % gx) * gy + n // gx)  # GPU numbers in interpreter order
    facts = _facts([order[n] for n in run], grid=[gx, gy, 1])
    facts["programs"] = run
    [(ok, summary, details)] = ch06.judge_order(facts)
    assert ok and "groups of 8 tile-rows" in summary and "tl.program_id(0) fastest" in details[-1], (summary, details)
    facts = _facts(ch06.grouped_order(19, 5, 1), grid=[5, 19, 1])
    facts["programs"] = list(range(len(facts["stores"])))
    [(ok, summary, details)] = ch06.judge_order(facts)
    assert not ok and "row by row" in summary and "tl.num_programs(0)" in details[-1]


def test_judge_rejects_tiles_stored_twice_or_never():
    order = ch06.grouped_order(19, 5, 8)
    [(ok, summary, _)] = ch06.judge_order(_facts(order + order[:1]))
    assert not ok and "did not store each" in summary
    [(ok, summary, _)] = ch06.judge_order(_facts([]))
    assert not ok and "no program stored" in summary


def test_judge_cannot_see_an_order_in_one_column_of_tiles():
    [(ok, summary, _)] = ch06.judge_order(_facts(ch06.grouped_order(19, 1, 8), block=(128, 640)))
    assert not ok and "cannot be seen" in summary


def test_judge_passes_on_a_gpu_with_a_note():
    [(ok, summary, details)] = ch06.judge_order({"mode": runtime.GPU})
    assert ok and summary == "ordering checked in CPU mode"
    assert "COURSE_MODE=cpu" in details[0]


# --------------------------------------------------------------------------------------------------
# the ordering check: the probe on real launches (in this process)


def _entry(task: str):
    return sources.load_file(sources.task_path(task, "solutions"), tasks.get(task).entry)


@requires_interpreter
def test_probe_sees_the_autotuned_launches_and_judges_the_last():
    module, entry = _entry(GROUPED)
    facts = ch06.probe_order(module, entry)
    assert facts["launches"] == 4  # each of the 3 configs once, then the one the autotuner kept
    first = module.grouped_matmul_kernel.configs[0].kwargs  # the config CPU mode keeps
    M, N, _ = ch06.PROBE_SHAPE
    assert facts["grid"] == [triton.cdiv(M, first["BLOCK_M"]) * triton.cdiv(N, first["BLOCK_N"]), 1, 1]  # 10 x 10
    [(ok, _, details)] = ch06.judge_order(facts)
    assert ok, details


@requires_interpreter
@pytest.mark.parametrize("program_numbers", [True, False])
def test_probe_sees_row_by_row_in_tiled_matmul(monkeypatch, program_numbers):
    """tiled_matmul numbers its programs row by row; without the interpreter's program numbers the
    probe splits launches at tile (0, 0) instead."""
    if not program_numbers:
        monkeypatch.setattr(ch06, "_program", lambda: (None, None, None))
    module, entry = _entry(TILED)
    facts = ch06.probe_order(module, entry)
    assert facts["launches"] == 1 and len(facts["stores"]) == 10 * 10  # 128 x 256 tiles (fp16)
    [(ok, summary, _)] = ch06.judge_order(facts)
    assert not ok and summary.startswith("programs are numbered row by row")


def test_super_tiles_are_judged_at_scale_by_the_blocks_they_use():
    """Blocks of R x C tiles, block by block: right where a wave at 8192^2 reads fewer strips than the
    plain orders (8 x 8 row by row, 8 x 2), wrong where the blocks' own order sweeps the width (4 x 4 row
    by row: as many tile-columns a wave as row order)."""
    verdicts = {}
    for rows, cols in ((8, 8), (8, 2), (4, 4)):
        [(ok, summary, _)] = ch06.judge_order(_facts(ch06.blocked_order(10, 10, rows, cols), block=(128, 256)))
        verdicts[(rows, cols)] = ok, summary
    assert verdicts[(8, 8)] == (True, "programs run in super-tiles of 8 x 8 tiles, taken row by row")
    assert verdicts[(8, 2)][0] and not verdicts[(4, 4)][0], verdicts
