"""Chapter 01's task, op_costs: plain Python cost models, graded by TaskSpec.run_case.

The solution passes with any seed, the untouched exercise is TODO (also when only some functions
are written), and every deliberately wrong submission in tests/wrong/ch01_*/ is rejected with a
message that names the function, its arguments and what is wrong.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import ROOT, WRONG, assert_clean

from course_lib import grader, roofline, stubs, tasks
from course_lib.grader import FAIL, PASS, TODO

TASK = "op_costs"
SEED = 2024
SOLUTION = ROOT / "solutions" / f"{TASK}.py"
FUNCTIONS = ["vector_add_cost", "matmul_cost", "row_softmax_cost", "bias_gelu_cost", "bound", "floor_ms"]


def full_text(result: grader.TaskResult) -> str:
    return "\n".join([result.summary, *result.details])


@pytest.mark.parametrize("seed", [0, 1, 2, SEED, 2**31 - 1])
def test_solution_passes(seed):
    result = grader.grade_task(TASK, "solutions", seed=seed)
    assert result.status == PASS, full_text(result)
    assert result.cases_passed == result.cases_total == len(tasks.get(TASK).all_cases("cpu"))


def test_every_function_is_graded():
    graded = {c.options["function"] for c in tasks.get(TASK).all_cases("cpu")}
    assert graded == set(FUNCTIONS)
    assert tasks.get(TASK).bytes_moved is None and tasks.get(TASK).flops is None  # nothing to benchmark


def test_cases_draw_fresh_arguments_per_seed():
    spec = tasks.get(TASK)
    case = next(c for c in spec.all_cases("cpu") if c.options["function"] == "matmul_cost")
    draw = lambda seed: spec.make_inputs(case, tasks.torch.Generator().manual_seed(seed))  # noqa: E731
    assert draw(5) == draw(5)
    assert len({json.dumps(draw(s)) for s in range(10)}) == 10
    args = draw(5)
    assert len({args["M"], args["N"], args["K"]}) == 3, "M, N and K must differ so that a mix-up fails"


def test_reference_figures():
    """The figures the notebook's predict-then-compute prompt rests on."""
    ref = tasks.get(TASK).reference
    assert ref("matmul_cost", M=4096, N=4096, K=4096, dtype_bytes=2) == (3 * 4096**2 * 2, 2 * 4096**3)
    assert ref("vector_add_cost", n=10, dtype_bytes=4) == (120, 10)
    assert ref("bias_gelu_cost", rows=3, cols=5, dtype_bytes=2) == ((2 * 15 + 5) * 2, 150)
    assert ref("row_softmax_cost", rows=3, cols=5, dtype_bytes=2) == (60, 75)
    h200 = roofline.datasheet_peaks("H200")
    big = ref("matmul_cost", M=4096, N=4096, K=4096, dtype_bytes=2)
    assert ref("bound", *big, h200.bandwidth_gbs, h200.flops_rate("float16")) == "compute"
    assert ref("bound", 10**9, 0, 4800, 989) == "memory"
    assert ref("bound", 4800 * 10**6, 989 * 10**9, 4800, 989) == "memory"  # a tie: 1 ms each
    assert ref("floor_ms", 4800 * 10**6, 10, 4800, 989) == pytest.approx(1.0)


# --------------------------------------------------------------------------------------------------
# stubs: the whole exercise, and one function at a time


def test_untouched_exercise_is_todo_naming_the_first_function():
    assert stubs.is_untouched(TASK, ROOT), f"exercises/{TASK}.py was edited: run sync-exercises --force"
    result = grader.grade_task(TASK, "exercises", seed=SEED)
    assert result.status == TODO, full_text(result)
    assert result.summary == (
        f"not implemented yet: vector_add_cost in exercises/{TASK}.py "
        "(still to write as well: matmul_cost, row_softmax_cost, bias_gelu_cost, bound, floor_ms)"
    )  # the first stub that ran, and the file's others


def _solution_with_one_stub(function: str) -> str:
    """The solution with only ``function``'s region turned into its stub."""
    kept, inside_target, current = [], False, None
    for line in SOLUTION.read_text().splitlines():
        if line.startswith("def "):
            current = re.match(r"def (\w+)", line).group(1)
        if line.strip() in (stubs.BEGIN, stubs.END) and current != function:
            continue
        kept.append(line)
        inside_target = inside_target or current == function
    assert inside_target, function
    return stubs.make_exercise("\n".join(kept) + "\n", TASK)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_one_unwritten_function_is_todo(function, tmp_path):
    (tmp_path / f"{TASK}.py").write_text(_solution_with_one_stub(function))
    result = grader.grade_task(TASK, tmp_path, seed=SEED)
    assert result.status == TODO, full_text(result)
    assert result.summary == f"not implemented yet: {function} in exercises/{TASK}.py"


def test_missing_function_is_named(tmp_path):
    text = SOLUTION.read_text().replace("def row_softmax_cost(", "def softmax_cost(")
    (tmp_path / f"{TASK}.py").write_text(text)
    result = grader.grade_task(TASK, tmp_path, seed=SEED)
    assert result.status == FAIL
    assert "op_costs.py has no function `row_softmax_cost`" in result.summary


# --------------------------------------------------------------------------------------------------
# deliberately wrong submissions


def row(case, *expected):
    return pytest.param(case, expected, id=case)


WRONG_SUBMISSIONS = [
    row("ch01_matmul_mnk", "case 'matmul'", "matmul_cost(M=", "returned flops=", "yours is 0.5x the expected",
        "a multiply-add counts 2 FLOPs"),
    row("ch01_output_twice", "case 'vector add'", "vector_add_cost(n=", "returned bytes=",
        "yours is 1.33x the expected", "each output written once"),
    row("ch01_bias_per_row", "case 'bias + GELU'", "bias_gelu_cost(rows=", "returned bytes=",
        "bias has cols elements"),
    row("ch01_bound_inverted", "case 'bound, memory side'", "bound(n_bytes=", "returned 'compute', expected 'memory'",
        "failed 3 of", "the longer of the two bounds the time"),
    row("ch01_bound_divides_by_flops", "case 'bound, no FLOPs (a copy)'", "n_flops=0",
        "raised ZeroDivisionError", "op_costs.py:", "n_bytes / n_flops"),
    row("ch01_floor_sum", "floor_ms(n_bytes=", "you added the two times"),
    row("ch01_floor_gib", "case 'floor_ms, memory side'", "yours is 0.931x the expected",
        "GB/s means 10^9 bytes per second"),
    row("ch01_returns_bytes_only", "vector_add_cost(n=", "it must return two numbers: (bytes, flops)"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "expected"), WRONG_SUBMISSIONS)
def test_wrong_submission_is_rejected(case, expected):
    result = grader.grade_task(TASK, WRONG / case, seed=SEED)
    text = full_text(result)
    assert result.status == FAIL, text
    assert "Traceback" not in text
    for piece in expected:
        assert piece in text, f"expected {piece!r} in the grader's message:\n{text}"


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_wrong_submissions_fail_with_any_seed(seed):
    for param in WRONG_SUBMISSIONS:
        result = grader.grade_task(TASK, WRONG / param.values[0], seed=seed)
        assert result.status == FAIL, f"{param.values[0]} passed with seed {seed}"


def test_every_ch01_wrong_submission_has_an_expectation():
    on_disk = {path.parent.name for path in WRONG.glob("ch01_*/*.py")}
    assert on_disk == {p.values[0] for p in WRONG_SUBMISSIONS}
    assert {path.name for path in WRONG.glob("ch01_*/*.py")} == {f"{TASK}.py"}


def test_command_line_report_is_clean(cli):
    run = cli("check", TASK, "--source", str(WRONG / "ch01_bound_divides_by_flops"), "--seed", str(SEED))
    assert_clean(run)
    assert run.returncode == 1
    assert run.stdout.startswith(f"FAIL  {TASK} case 'bound, no FLOPs (a copy)'"), run.stdout
    assert re.search(rf"reproduce: python -m course_lib check {TASK} .*--seed {SEED}$", run.stdout, re.M), run.stdout


# --------------------------------------------------------------------------------------------------
# instructors' hidden cases: the function as the label, its arguments as the shape


def test_hidden_cases_with_fixed_arguments(tmp_path, monkeypatch):
    hidden = {
        TASK: [
            {"label": "matmul_cost", "shape": [4096, 4096, 4096], "dtype": "float16"},
            {"label": "bound", "shape": [10**9, 0, 4800, 989]},
        ]
    }
    path = tmp_path / "hidden.json"
    path.write_text(json.dumps(hidden))
    monkeypatch.setenv("COURSE_HIDDEN_CASES", str(path))
    result = grader.grade_task(TASK, "solutions", seed=SEED)
    assert result.status == PASS, full_text(result)
    assert result.cases_total == len(tasks.get(TASK).cases("cpu")) + 1 + 2  # the first case again, 2 hidden
    wrong = grader.grade_task(TASK, WRONG / "ch01_matmul_mnk", seed=SEED)
    assert "matmul_cost (4096, 4096, 4096) float16" in full_text(wrong)
