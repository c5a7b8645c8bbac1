"""The grader against deliberately wrong submissions: each must be rejected with a message that says
what is wrong. Each folder under tests/wrong/ is a submission the command line grades too:

    python -m course_lib check vector_add --source tests/wrong/no_mask
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal

import pytest
from conftest import GOOD, ROOT, WRONG, assert_clean, requires_interpreter, run_course

from course_lib import grader
from course_lib.grader import CRASH, FAIL, PASS, TIMEOUT, report

SEED = 2024  # fixed, so that a failure of this table can be replayed exactly
HANG_TIMEOUT = 15.0  # seconds; a solution of OTHERS is graded in about one, with room for a loaded CI machine
OTHERS = ["vector_copy", "scaled_add"]  # graded beside a submission that hangs or crashes


def row(case, task, status, *expected, marks=()):
    return pytest.param(case, task, status, expected, id=f"{case}/{task}", marks=marks)


SYNTAX_ERROR_LINE = 1 + next(  # where the stray `return` sits in tests/wrong/syntax_error/vector_add.py
    i
    for i, line in enumerate((WRONG / "syntax_error" / "vector_add.py").read_text().splitlines())
    if line.startswith("return")
)
OOB = requires_interpreter  # in-process out-of-bounds checks are the interpreter's (GPU mode: test_bounds_check.py)

# fmt: off
# Graded in this process: none of them can hang or kill it.
IN_PROCESS = [
    row("no_mask", "vector_add", FAIL,
        "out-of-bounds access", "program id (", "offending offsets", "tl.load had no mask", marks=OOB),
    row("off_by_one", "vector_add", FAIL, "out-of-bounds access", "program id (", "The mask let",
        "one offset just past the end of `x_ptr`", "(1) a mask that keeps one offset too many: <= where < belongs",
        "vector_add.py line 12", "with mask `mask` = `offsets <= n_elements`", marks=OOB),
    # each pattern of offending offsets gets its own advice (tests/test_bounds_advice.py)
    row("k_mask_without_k0", "tiled_matmul", FAIL, "out-of-bounds access", "a run of 31 offsets just past the end of "
        "`a_ptr`", "(1) a loop's mask that leaves out the loop's offset: this access ran 2 times before",
        "tiled_matmul.py line 38, `tl.load(a_ptrs, mask=ks[None, :] < K, other=0.0)`", marks=OOB),
    row("swapped_strides", "tiled_transpose", FAIL, "out-of-bounds access", "Seen: a stride pattern",
        "(1) strides swapped", marks=OOB),
    row("reads_before_start", "vector_add", FAIL, "out-of-bounds access", "offsets before the start of `x_ptr`",
        "(1) a subtraction in the offsets: offsets - 1, or (pid - 1) * BLOCK_SIZE", marks=OOB),
    row("grid_over_columns", "softmax", FAIL, "out-of-bounds access", "every lane it let through lies past the end",
        "(1) a grid with more programs than the data needs: program (37, 0, 0) of a grid of (1000, 1, 1)", marks=OOB),
    row("no_store_mask", "vector_copy", FAIL, "out-of-bounds access", "tl.store had no mask", marks=OOB),
    row("grid_too_small", "vector_add", FAIL, "still NaN"),
    row("unwritten_output", "vector_add", FAIL, "were never written"),
    row("temp_unwritten", "vector_add", FAIL, "were never written"),
    row("returns_cached", "vector_add", FAIL, "still NaN"),
    row("torch_cheat", "vector_add", FAIL, "torch compute in the launcher", "torch `add`", "out.copy_(x + y)"),
    row("torch_add", "vector_add", FAIL,
        "torch compute in the launcher", "torch `add`", "torch.add(x, y, out=out)"),
    row("torch_cheat_after_launch", "vector_add", FAIL, "torch compute in the launcher", "torch `add_`", "out += y"),
    row("torch_cheat_in_grid", "vector_add", FAIL, "torch compute in the launcher"),
    row("torch_cheat_in_hook", "vector_add", FAIL, "torch compute in the launcher"),
    row("no_launch", "vector_add", FAIL, "no Triton kernel was launched"),
    row("low_precision", "scaled_add", FAIL, "precision too low"),
    row("wrong_formula", "vector_add", FAIL, "wrong (max abs error"),
    row("divides_by_zero", "vector_add", FAIL, "wrong", "inf where the reference is finite"),
    row("syntax_error", "vector_add", FAIL, f"vector_add.py line {SYNTAX_ERROR_LINE}", "'return' outside function"),
    row("missing_entry", "vector_add", FAIL, "has no function `vector_add`"),
    row("import_error", "vector_add", FAIL, "vector_add.py line 4", "no module named triton_language_typo"),
    row("kernel_error", "vector_add", FAIL, "the kernel raised", "power of 2"),
    row("writes_input", "vector_add", FAIL, "changed the input `x`"),
    row("writes_past_end", "vector_add", FAIL, "wrote outside the output"),
    row("cached_result", "vector_add", FAIL, "wrong (max abs error"),
    row("cached_result", "scaled_add", FAIL, "case 'misaligned'", "wrong (max abs error"),
    row("returns_none", "returning_add", FAIL, "returned NoneType, not a tensor"),
    row("wrong_shape", "returning_add", FAIL, "wrong shape: got (1, 5), expected (5,)"),
    row("wrong_dtype", "returning_add", FAIL, "wrong dtype: got torch.float32, expected torch.float16"),
    row("cached_tensor", "returning_add", FAIL, "case 'repeat'", "elements are wrong"),
]

# Graded in their own processes, beside solutions of other tasks, which must still pass.
ISOLATED = [
    row("hang", "vector_add", TIMEOUT, "seems to hang", f"no result after {HANG_TIMEOUT:.0f} s"),
    row("crash", "vector_add", CRASH, "ended (exit code 1)", "crashed Python"),
    row("segfault", "vector_add", CRASH, f"ended (signal {int(signal.SIGSEGV)})", "crashed Python"),
]
# fmt: on

# Wrong on purpose, but only for some random inputs: used to check seeds.
SEED_DEPENDENT = WRONG / "seed_dependent"


def full_text(result: grader.TaskResult) -> str:
    return "\n".join([result.summary, *result.details])


def assert_rejected(result: grader.TaskResult, status: str, expected: tuple[str, ...]) -> None:
    text = full_text(result)
    assert result.status == status, text
    for piece in expected:
        assert piece in text, f"expected {piece!r} in the grader's message:\n{text}"


@pytest.mark.parametrize(("case", "task", "status", "expected"), IN_PROCESS)
def test_wrong_submission_is_rejected(case, task, status, expected, returning_task):
    result = grader.grade_task(task, WRONG / case, seed=SEED)
    assert_rejected(result, status, expected)


@pytest.mark.parametrize(("case", "task", "status", "expected"), ISOLATED)
def test_hang_or_crash_loses_no_other_result(case, task, status, expected, isolated_grader, tmp_path):
    source = tmp_path / "submission"
    source.mkdir()
    for other in OTHERS:
        shutil.copy(ROOT / "solutions" / f"{other}.py", source)
    shutil.copy(WRONG / case / f"{task}.py", source)

    names = [OTHERS[0], task, OTHERS[1]]  # the bad one in the middle: results before and after it
    # the static pre-check would reject os._exit and os.kill before they run: this is about what
    # happens when such code runs anyway (tests/test_hostile.py has both sides)
    jobs = [grader.Job("", name, source) for name in names]
    results = grader.grade_jobs(jobs, seed=SEED, timeout=HANG_TIMEOUT, check_source=False)

    assert [r.task for r in results] == names
    by_task = {r.task: r for r in results}
    assert_rejected(by_task[task], status, expected)
    for other in OTHERS:
        assert by_task[other].status == PASS, full_text(by_task[other])
    label = report.LABEL[status]
    assert f"{label:<5} {task}" in report.text(results)


def test_every_wrong_submission_has_an_expectation():
    listed = {(p.values[0], p.values[1]) for p in IN_PROCESS + ISOLATED}
    listed.add((SEED_DEPENDENT.name, "vector_add"))
    on_disk = {  # chapter folders (tests/wrong/chNN_*) belong to the chapters' own tests
        (path.parent.name, path.stem) for path in WRONG.glob("*/*.py") if not re.match(r"ch\d\d_", path.parent.name)
    }
    assert on_disk == listed


# correct kernels written differently from the solutions: each must pass (chapter 10's, the hostile
# suite's controls and many_launches are graded in their own tests)
RIGHT = [
    ("allowed_torch", "vector_add"),
    ("returning", "returning_add"),
    ("sparse_dropout_loads", "residual_dropout"),
    ("self_test_block", "vector_add"),  # a self-test under the main guard, an optional import with a fallback
]


@pytest.mark.parametrize(("folder", "task"), RIGHT)
def test_right_submission_passes(folder, task, returning_task):
    result = grader.grade_task(task, GOOD / folder, seed=SEED)
    assert result.status == PASS, full_text(result)
    assert result.cases_passed == result.cases_total > 0


@pytest.mark.parametrize("seed", [2, 3])  # seeds where the tiny case drops its only element: x is never read
def test_a_kernel_that_loads_only_kept_elements_passes_even_when_none_is_kept(seed):
    result = grader.grade_task("residual_dropout", GOOD / "sparse_dropout_loads", seed=seed)
    assert result.status == PASS, full_text(result)


# --------------------------------------------------------------------------------------------------
# seeds: printed on failure, and the same seed gives the same failure


def test_same_seed_same_failure_other_seed_other_inputs():
    first = grader.grade_task("vector_add", SEED_DEPENDENT, seed=SEED)
    again = grader.grade_task("vector_add", SEED_DEPENDENT, seed=SEED)
    other = grader.grade_task("vector_add", SEED_DEPENDENT, seed=SEED + 100)
    assert first.status == again.status == other.status == FAIL
    assert full_text(first) == full_text(again)
    assert full_text(first) != full_text(other)


@pytest.fixture(scope="module")
def seed_dependent_check(tmp_path_factory):
    """One `check` of the seed-dependent submission with a seed the grader picks itself."""
    progress = tmp_path_factory.mktemp("progress") / "progress.json"
    proc = run_course("check", "vector_add", "--source", str(SEED_DEPENDENT), progress=progress)
    return proc, progress


def test_failing_seed_is_printed_and_reproduces(seed_dependent_check):
    first, progress = seed_dependent_check
    assert first.returncode == 1, first.stdout + first.stderr
    assert_clean(first)
    found = re.search(r"reproduce: python -m course_lib check vector_add .*--seed (\d+)$", first.stdout, re.M)
    assert found, first.stdout
    first_failure = re.search(r"first failure: .* \(case \d+ of \d+\)$", first.stdout, re.M)
    assert first_failure, first.stdout

    again = run_course(
        "check", "vector_add", "--source", str(SEED_DEPENDENT), "--seed", found.group(1), progress=progress
    )
    assert again.returncode == 1
    assert first_failure.group(0) in again.stdout
    assert again.stdout == first.stdout


def test_reproduce_line_runs_as_printed(seed_dependent_check):
    """Copied from the report and run as it stands, the line must grade the same submission."""
    first, progress = seed_dependent_check
    line = re.search(r"reproduce: (.*)$", first.stdout, re.M).group(1)
    argv = shlex.split(line)
    assert argv[:3] == ["python", "-m", "course_lib"], line
    again = run_course(*argv[3:], progress=progress)
    assert again.stdout == first.stdout, f"`{line}` graded something else:\n{again.stdout}"


def _counted_diagnoses(monkeypatch, task: str, names_nothing: bool) -> list:
    """The task's diagnosis wrapped to record each case it is asked about (and, with ``names_nothing``, to
    name no mistake)."""
    from course_lib import tasks

    spec = tasks.get(task)
    asked, diagnose = [], spec.diagnose

    def counted(inputs, got, case):
        asked.append(case.label)
        return None if names_nothing else diagnose(inputs, got, case)

    monkeypatch.setattr(spec, "diagnose", counted)
    return asked


def test_a_grading_stops_diagnosing_once_a_mistake_is_named(monkeypatch):
    """Every diagnosis is a float64 computation of the case's size, under the GPU's hold in GPU mode: the
    verdict reports the first failure that names a mistake, so the cases after it are not diagnosed."""
    asked = _counted_diagnoses(monkeypatch, "residual_dropout", names_nothing=False)
    result = grader.grade_task("residual_dropout", WRONG / "ch04_no_scaling", seed=SEED)
    assert result.status == FAIL and "not scaled by 1 / (1 - p)" in result.summary, result.summary
    failed = int(re.match(r"failed (\d+) of", result.details[0]).group(1))
    # the reported failure is the last asked about, and the first named (a 1-element case names nothing)
    assert failed >= 4 and len(asked) <= 2 and f"case '{asked[-1]}'" in result.summary, (asked, result.details[0])


def test_a_mistake_no_diagnosis_names_is_diagnosed_three_times_at_most(monkeypatch):
    """A kernel wrong in every case, whose mistake no diagnosis names, pays for three guesses, not one a case
    (on chapter 11's GPU cases that was a float64 attention on the CPU for each of 16)."""
    asked = _counted_diagnoses(monkeypatch, "residual_dropout", names_nothing=True)
    result = grader.grade_task("residual_dropout", WRONG / "ch04_no_scaling", seed=SEED)
    assert result.status == FAIL and "case 'tiny" in result.summary, result.summary
    failed = int(re.match(r"failed (\d+) of", result.details[0]).group(1))
    assert failed >= 4 and len(asked) == grader.isolation.DIAGNOSED_CASES == 3, (asked, result.details[0])
