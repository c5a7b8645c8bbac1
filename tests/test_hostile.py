"""Submissions written to fool the grader (tests/hostile/<kind>/<task>.py): none may score.

Each kind is graded twice, both times in the operating-system sandbox, as a room is graded: as the
grader runs (the static pre-check first), and with the pre-check off, as if the trick had slipped
past it. The second run is the real test of the boundary: the learner's code runs in a sandboxed
worker process, and the verdict comes from the protected process's own inputs, reference and
comparison and from checks of every claim the worker makes, whatever it patched, printed or said.
Honest controls that are slow, noisy or print a lot keep full marks.

The kinds, by the classes of the grader's threat model (README, "How grading works"):
* code past the pre-check: typing_eval (the ten-line file that loads the reference solution),
  singledispatch_eval, pickle_door, match_globals, helper_module; past it, the sandbox has no
  solutions/ to load and no helper beside the private copy;
* compute outside the kernels: heuristic_compute, config_prehook_compute, prune_compute,
  kernel_body_torch (host code Triton runs in a launch is launcher code), constexpr_tensor,
  numpy_dlpack, guard_off_one_element (every element of every input must be read by a kernel);
* claims: tensor_subclass (layout read from the bytes), probe_mode_lie (the report's mode against
  the grader's), forged_reply, huge_reply, garbled_reply (every field checked);
* crashes: truncate_case_file (read back into private memory), deep_expression, kill_parent;
* objects whose methods torch runs inside its own call, where the guard is off: index_hook, sequence_index;
* a main-guard block made to run: main_block_rebind; a launcher that knows a structural probe's shape:
  probe_shape_split, probe_shape_fusion, probe_shape_sectors (the probe's own result must be right);
  an except-as name left unbound: except_as_unbind.
Harm to peers and leaks of hidden cases are in tests/test_sandbox.py, with rooms of their own.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from conftest import GOOD, TESTS, requires_interpreter, requires_sandbox

from course_lib import grader, runtime, tasks
from course_lib.grader import CRASH, FAIL, PASS, STATUSES, TIMEOUT, isolation

requires_gpu = pytest.mark.skipif(not runtime.is_gpu(), reason="only a GPU's timing shows it")

HOSTILE = TESTS / "hostile"
SEED = 7
LIMIT = 10.0  # seconds a step for the kinds that hang or exit (a sandbox starts in 2-3 s)
ROOMY = 120.0  # seconds a step for the others: none of them may time out, whatever the machine's load
PRECHECK = "the task file uses what the grader does not allow"


def kind(name, task, on, off, marks=()):
    """``on``: (status, pieces) with the pre-check; ``off``: the same without it."""
    return pytest.param(name, task, on, off, id=name, marks=marks)


def rejected(line: str):
    return (FAIL, (PRECHECK, line))


NOTHING_WRITTEN = (FAIL, ("no element of the output was written",))
# Code past the pre-check lies about its own process: the pre-check is what holds these, and the run
# without it is not asserted (it may score; the threat model in the README says why).
PRECHECK_HOLDS = None
# fmt: off
KINDS = [
    kind("patch_compare", "vector_add", rejected("import course_lib.compare"), NOTHING_WRITTEN),
    kind("sys_modules_surgery", "vector_add", rejected("import sys"), NOTHING_WRITTEN),
    kind("patch_torch", "vector_add", rejected("torch.equal = lambda"), NOTHING_WRITTEN),
    # isinstance always true breaks the worker's own Python: it dies before it can report
    kind("patch_builtins", "vector_add", rejected("import builtins"), (CRASH, ("before reporting",))),
    kind("writes_files", "vector_add", rejected("open(name, \"w\")"), NOTHING_WRITTEN),
    kind("guard_off_copy", "vector_add", rejected("torch._C.DisableTorchFunction()"),
         (FAIL, ("no kernel read `x`, `y`", "compute the answer with torch and copy it with a kernel"))),
    kind("dispatch_off_copy", "vector_add", rejected("torch.ops.aten.add.Tensor(x, y)"), (FAIL, ("torch",))),
    kind("ctypes_write", "vector_add", rejected("import ctypes"), (FAIL, ("torch `tolist`",))),
    kind("thread_left_running", "vector_add", rejected("import threading"),
         (FAIL, ("left 1 thread running",))),
    kind("hard_exit", "vector_add", rejected("import os"), (CRASH, ("ended (exit code 0)", "before reporting"))),
    kind("hard_exit_via_torch", "vector_add", rejected("torch.os._exit(0)"), (CRASH, ("ended (exit code 0)",))),
    kind("signal_handler", "vector_add", rejected("import signal"), (TIMEOUT, ("seems to hang",))),
    kind("exit_at_import", "vector_add", (FAIL, ("raised SystemExit(0)", "must not exit")),
         (FAIL, ("raised SystemExit(0)",))),
    kind("hang_everywhere", "vector_add", (TIMEOUT, ("case 'tiny'", "seems to hang")), (TIMEOUT, ("seems to hang",))),
    kind("empty_kernel", "vector_add", NOTHING_WRITTEN, NOTHING_WRITTEN),
    # the CPU-mode worker's memory limit (COURSE_CHILD_MEMORY_GB): the allocation fails, plainly
    kind("memory_bomb", "vector_add", (FAIL, ("the launcher raised RuntimeError",)),
         (FAIL, ("the launcher raised RuntimeError",)), marks=requires_interpreter),
    kind("cached_outputs", "vector_add", (FAIL, ("case 'tiny again'", "never written")), (FAIL, ("tiny again",))),
    kind("input_mutation", "vector_add", (FAIL, ("changed the input `x`",)), (FAIL, ("changed the input `x`",))),
    kind("nan_injection", "vector_add", (FAIL, ("NaN computed by the kernel",)), (FAIL, ("NaN computed",))),
    kind("torch_compute", "vector_add", (FAIL, ("torch compute in the launcher", "torch `add`")),
         (FAIL, ("torch compute in the launcher",))),
    kind("try_torch_first", "vector_add", (FAIL, ("torch `add`", "caught this error")),
         (FAIL, ("torch `add`", "caught this error"))),
    kind("unmasked_loads", "vector_add", (FAIL, ("out-of-bounds access", "tl.load had no mask")),
         (FAIL, ("out-of-bounds access",))),
    # on a GPU the stores past the end change the guard elements, or fault: FAIL or CRASH
    kind("no_masks", "vector_add", (FAIL, ("out-of-bounds access", "had no mask")), (FAIL, ("out-of-bounds",))),
    kind("fake_pass", "vector_add", (FAIL, ("wrong (max abs error",)), (FAIL, ("wrong (max abs error",))),
    kind("eq_always_true", "op_costs", (FAIL, ("returned a Anything", "plain numbers")),
         (FAIL, ("returned a Anything",))),
    # code past the pre-check; past it, the sandbox shows no solutions/ and no file beside the task file
    kind("typing_eval", "vector_add", rejected("door.__annotations__"),
         (FAIL, ("raised FileNotFoundError", "solutions/vector_add.py"))),
    kind("singledispatch_eval", "vector_add", rejected("@functools.singledispatch"),
         (FAIL, ("raised FileNotFoundError", "solutions/vector_add.py"))),
    kind("pickle_door", "vector_add", rejected("torch.serialization.pickle.loads"),
         (FAIL, ("raised FileNotFoundError", "solutions/vector_add.py"))),
    kind("match_globals", "vector_add", rejected("case object(__globals__="),
         (FAIL, ("raised FileNotFoundError", "solutions/vector_add.py"))),
    kind("helper_module", "vector_add", rejected("from helper_solution import vector_add"),
         (FAIL, ("raised ModuleNotFoundError", "helper_solution"))),
    # host code Triton runs during a launch, and the interpreter's kernel body, are launcher code
    kind("heuristic_compute", "vector_add", (FAIL, ("torch compute in the launcher", "torch `add`")),
         (FAIL, ("torch compute in the launcher",))),
    kind("config_prehook_compute", "vector_add", (FAIL, ("torch compute in the launcher", "torch `add`")),
         (FAIL, ("torch compute in the launcher",))),
    kind("prune_compute", "vector_add", (FAIL, ("torch compute in the launcher", "torch `add`")),
         (FAIL, ("torch compute in the launcher",))),
    kind("kernel_body_torch", "vector_add", rejected("STASH"), (FAIL, ("torch compute in the launcher",))),
    kind("constexpr_tensor", "vector_add", (FAIL, ("`X` is a tl.constexpr and was given a tensor",)),
         (FAIL, ("is a tl.constexpr and was given a tensor",))),
    kind("numpy_dlpack", "vector_add", rejected("np.from_dlpack(x)"), (FAIL, ("torch `__dlpack__`",))),
    kind("guard_off_one_element", "vector_add", rejected("torch._C.DisableTorchFunction()"),
         (FAIL, ("of the input `x` were never read by a kernel",))),
    # claims: checked, or measured by the grader itself
    kind("tensor_subclass", "pad_k", (FAIL, ("returned a Padded, a subclass of torch.Tensor",)),
         (FAIL, ("a subclass of torch.Tensor",))),
    kind("probe_mode_lie", "tiled_transpose", rejected("import course_lib.tasks.ch08_memory_access"),
         (FAIL, ("report says it ran in 'gpu' mode, and the grader runs in cpu mode",))),
    kind("forged_reply", "vector_add", rejected("import json"), (FAIL, ("a report the grader cannot read",
                                                                        "launches"))),
    kind("huge_reply", "vector_add", rejected("import json"), (FAIL, ("more data than any report holds",))),
    kind("garbled_reply", "vector_add", rejected("import course_lib.grader.worker"),
         (FAIL, ("a report that is no JSON object",))),
    # the grader's own death or confusion
    kind("truncate_case_file", "vector_add", rejected("import os"), (FAIL, ("shared file came back damaged",))),
    # past the pre-check, Python 3.11 cannot compile it (RecursionError); 3.12 can, and no kernel runs
    kind("deep_expression", "vector_add", (FAIL, ("cannot read vector_add.py", "nests too deeply")), (FAIL, ())),
    kind("kill_parent", "vector_add", rejected("import os"), (FAIL, ("no element of the output was written",))),
    # found by a red-team review of this grader
    kind("alias_builtin", "vector_add", rejected("from math import pi as exec"),
         (FAIL, ("raised FileNotFoundError", "solutions/vector_add.py"))),
    kind("interpreter_globals", "vector_add", rejected('found = dict(inspect.getmembers(inspect))["builtins"]'),
         PRECHECK_HOLDS),
    kind("str_to_ty_eval", "vector_add", rejected("tl.str_to_ty("),
         (FAIL, ("raised FileNotFoundError", "solutions/vector_add.py"))),
    kind("storage_python_compute", "vector_add", rejected("x.untyped_storage()"),
         (FAIL, ("torch compute in the launcher", "torch `untyped_storage`"))),
    kind("partial_message_hang", "vector_add", rejected("import os"), (TIMEOUT, ("seems to hang",))),
    kind("spoofed_grader_failure", "vector_add", rejected("import gc"),
         (FAIL, ("a report the grader cannot read", "'crash' is not how a load ends"))),
    # found by a second red-team review
    # its timed calls launch nothing (found first since the timing counts launches), or, launching, would
    # give stale results (found by the call after timing with new values in the same tensors)
    kind("cached_by_address", "vector_add", (FAIL, ("A launcher must compute on every call",)),
         (FAIL, ("A launcher must compute on every call",)), marks=requires_gpu),
    kind("class_pattern_globals", "vector_add", rejected('Yes = type("Yes", (type,)'), PRECHECK_HOLDS),
    kind("dataclass_field_injection", "vector_add", rejected("type("), PRECHECK_HOLDS),
    kind("kernel_docstring_def", "vector_add", rejected("def add_kernel(x_ptr, y_ptr"), PRECHECK_HOLDS),
    kind("fake_triton_argument", "vector_add", rejected("fake = type("), NOTHING_WRITTEN),
    kind("tensor_wrapper_argument", "vector_add", NOTHING_WRITTEN, NOTHING_WRITTEN),
    kind("contiguous_does_the_work", "tiled_transpose", (FAIL, ("torch `contiguous`", "a copy, not a view")),
         (FAIL, ("torch `contiguous`",))),
    # found by a third red-team review
    kind("numpy_via_handle", "vector_add", rejected("v.handle.data"), PRECHECK_HOLDS),
    kind("indexing_copy", "tiled_transpose", (FAIL, ("torch indexing", "a copy, not a view")),
         (FAIL, ("torch indexing",))),
    kind("jit_by_call", "vector_add", rejected("add_kernel = triton.jit(add_kernel)"), PRECHECK_HOLDS),
    kind("tab_after_def", "vector_add", rejected("def add_kernel("), PRECHECK_HOLDS),
    kind("interpreter_global_gap", "vector_add", rejected("inspect.getmembers"), PRECHECK_HOLDS),
    kind("escape_codes", "vector_add", (FAIL, ("raised RuntimeError: \\x1b[1A\\x1b[2K\\x0dPASS",)),
         (FAIL, ("\\x1b]52;c;",))),
    # found by a fourth red-team review: torch calls an index's methods with the guard's mode off
    kind("index_hook", "vector_add", rejected("def __index__(self):"),
         (FAIL, ("torch compute in the launcher", "a `Door` object"))),
    kind("sequence_index", "vector_add", (FAIL, ("torch compute in the launcher", "a `Door` object")),
         (FAIL, ("torch compute in the launcher", "a `Door` object"))),
    # found by a fifth: a def binds __name__ so that a main-guard block runs (past the pre-check it may pass)
    kind("main_block_rebind", "vector_add", rejected("@p.setter"), PRECHECK_HOLDS),
    # ... and a launcher that knows a structural probe's shape and does something else there
    kind("probe_shape_split", "split_user_gemm", (FAIL, ("wrong result on the grader's structural probe",)),
         (FAIL, ("wrong result on the grader's structural probe",))),
    kind("probe_shape_fusion", "fused_linear", (FAIL, ("wrong result on the grader's structural probe",)),
         (FAIL, ("wrong result on the grader's structural probe",))),
    kind("probe_shape_sectors", "tiled_transpose", (FAIL, ("wrong result on the grader's structural probe",)),
         (FAIL, ("wrong result on the grader's structural probe",))),
    # found by a sixth: an except-as name is unbound when its handler ends (the interpreter fills the gap)
    kind("except_as_unbind", "vector_add", rejected("inspect.getmembers"), PRECHECK_HOLDS),
]
# fmt: on
SLOW = {
    "hang_everywhere",
    "signal_handler",
    "hard_exit",
    "hard_exit_via_torch",
    "thread_left_running",
    "partial_message_hang",
}
# what a GPU reports where it differs from the interpreter (the flow rule and the kernel body as Python
# are the interpreter's: on a GPU the interpreter's second run reports them, or the kernel fails to compile)


def text(result: grader.TaskResult) -> str:
    return "\n".join([result.summary, *result.details])


GPU_ONLY_SAYS = {  # what a GPU reports where it differs from the interpreter
    "no_masks": ((FAIL, CRASH), ()),
    "kernel_body_torch": ((FAIL,), ()),  # a kernel body is no Python there: Triton refuses torch.add in it
    "truncate_case_file": ((FAIL, CRASH), ()),  # the worker's own copy back to the file may fault first
    # loading also makes the worker's CUDA context: with many jobs at once and --timeout 10 that step,
    # not the first case, may be the one that runs out (the hang is in the launcher either way)
    "hang_everywhere": ((TIMEOUT,), ("seems to hang",)),
}


def check(result: grader.TaskResult, expected, name: str = "") -> None:
    if expected is PRECHECK_HOLDS:
        assert result.status in STATUSES  # a verdict, and the grader still standing
        return
    status, pieces = expected
    assert "\x1b" not in text(result) + result.output  # a learner's control characters are written out
    if runtime.is_gpu() and name in GPU_ONLY_SAYS:
        statuses, pieces = GPU_ONLY_SAYS[name]
        assert result.status in statuses, text(result)
    else:
        assert result.status == status, text(result)
    for piece in pieces:
        assert piece in text(result), f"expected {piece!r} in:\n{text(result)}"
    assert result.status != PASS  # a room scores all or nothing
    if result.failed != "checks":  # a structural check may fail a kernel whose every case is right
        assert result.cases_passed < max(result.cases_total, 1)


def _skipped(param) -> bool:
    return any(m.name == "skipif" and m.args and m.args[0] for m in param.marks)


@pytest.fixture(scope="module")
def graded(request) -> dict:
    """(kind, pre-check on) -> TaskResult for every kind the session's tests ask about, graded in pools
    of four sandboxed workers (a hang waits while others run; CPU mode; on a GPU, one GPU, one worker)."""
    wanted = {
        item.callspec.params["name"]
        for item in request.session.items
        if item.originalname
        in ("test_hostile_kind_scores_nothing", "test_hostile_kind_scores_nothing_past_the_precheck")
    }
    params = {p.values[0]: p for p in KINDS if p.values[0] in wanted and not _skipped(p)}
    results = {}
    for check_source in (True, False):
        for slow in (False, True):
            jobs = [
                grader.Job(name, p.values[1], HOSTILE / name) for name, p in params.items() if (name in SLOW) == slow
            ]
            if not jobs:
                continue
            # the kinds that hang get a short limit; the others, whose verdict is never a timeout, a
            # generous one: four workers on a CI machine's 2 cores can take a calibrated limit's worth
            # (probe_shape_fusion, a fused_linear in the interpreter, timed out there at 27 s in all)
            got = grader.grade_jobs(jobs, seed=SEED, workers=4, timeout=LIMIT if slow else ROOMY,
                                    check_source=check_source, sandboxed=True)  # fmt: skip
            results.update({(job.learner, check_source): result for job, result in zip(jobs, got)})
    return results


@requires_sandbox
@pytest.mark.parametrize(("name", "task", "on", "off"), KINDS)
def test_hostile_kind_scores_nothing(graded, name, task, on, off):
    result = graded[name, True]
    assert result.sandboxed
    check(result, on, name)


@requires_sandbox
@pytest.mark.parametrize(("name", "task", "on", "off"), KINDS)
def test_hostile_kind_scores_nothing_past_the_precheck(graded, name, task, on, off):
    result = graded[name, False]
    assert result.sandboxed
    check(result, off, name)


@pytest.mark.parametrize(
    ("task", "facts"),
    [
        ("split_user_gemm", {"work": 35840, "by_op": {"aten.mm": 35840}, "python_reads": 0}),
        ("pad_k", {"checked": False}),
        ("tiled_transpose", {"mode": "cpu", "shape": [256, 192], "loads": [1536, 6144, 6144],
                             "stores": [1536, 6144, 6144], "other": []}),
    ],
)  # fmt: skip
def test_a_structural_probe_is_judged_on_a_run_that_was_right(task, facts):
    """A probe that says whether its own run computed the answer is judged on it: a launcher that knows
    the probe's fixed shape and does something else there fails, whatever the structural judge said."""
    spec = tasks.get(task)
    assert all(ok for ok, *_ in isolation._judged(spec, {**facts, "right": True}, runtime.CPU))
    [(ok, summary, _)] = isolation._judged(spec, {**facts, "right": False}, runtime.CPU)
    assert not ok and "wrong result on the grader's structural probe" in summary


def test_a_broken_structural_rule_is_said_before_a_wrong_probe_run():
    naive = {"work": 10**9, "by_op": {"aten.bmm": 10**9}, "python_reads": 0, "right": False}
    verdicts = isolation._judged(tasks.get("split_user_gemm"), naive, runtime.CPU)
    assert not verdicts[0][0] and "once per candidate" in verdicts[0][1]


def test_every_hostile_kind_is_listed():
    on_disk = {path.parent.name for path in HOSTILE.glob("*/*.py")}
    assert on_disk == {p.values[0] for p in KINDS}
    assert len(on_disk) >= 40


def test_patching_in_the_worker_leaves_the_protected_process_alone(tmp_path):
    """The worker imported and patched course_lib.compare; this process's compare is untouched."""
    from course_lib import compare

    before = compare.compare
    grader.grade_task("vector_add", HOSTILE / "patch_compare", SEED, check_source=False)
    assert compare.compare is before
    assert not (Path.cwd() / "grades.csv").exists()


@requires_sandbox
@pytest.mark.parametrize(("task", "folder"), [("vector_add", "controls"), ("vector_copy", "controls"),
                                              ("vector_add", "many_launches")])  # fmt: skip
def test_honest_controls_keep_full_marks(task, folder):
    result = grader.grade_task(task, GOOD / folder, SEED, sandboxed=True)
    assert result.status == PASS, text(result)
    assert result.cases_passed == result.cases_total > 0


def _hang_everywhere(folder: Path) -> None:
    """A task file for every task whose functions loop forever."""
    for spec in tasks.all_tasks():
        names = {spec.entry} | ({"vector_add_cost", "matmul_cost", "row_softmax_cost", "bias_gelu_cost",
                                 "bound", "floor_ms"} if spec.call_case else set())  # fmt: skip
        body = "".join(f"def {n}(*args, **kwargs):\n    while True:\n        pass\n\n\n" for n in sorted(names))
        (folder / f"{spec.name}.py").write_text(f'"""Hangs in every function."""\n\n\n{body}')


@requires_interpreter  # on a GPU the jobs share the GPU, and the timing of a room is recorded in results/
def test_check_all_on_a_submission_that_hangs_everywhere_is_quick(tmp_path):
    """A learner whose every task hangs is reported quickly on 2 cores (CI's machine). Each task's first
    step hangs until its limit (15 s plus ten times the solution's time); two jobs at a time, and a job
    silent for half its limit lets one more start beside it (at most four at once), so the hangs
    overlap: all 22 tasks took 129-152 s on a 2-core machine (232 s when each hang held its slot to the
    end). Every third task of the course is graded here (9 of 25; the suite's time on CI is kept under 25
    minutes, and every other task, 13 by then, took 95 s of a 100 s bound on 2026-12-06). The time must stay
    under 65% of the sum of the first cases' limits, one job at a time: on 2026-12-06 it was 70 s against a sum
    of 144 s (the two jobs' share; the extra slot beside a silent job gained nothing measurable there). The
    solutions are timed once per machine, the first time a task is graded there; that one-time cost is taken
    first and printed apart."""
    _hang_everywhere(tmp_path)
    chosen = tasks.all_tasks()[::3]
    start = time.perf_counter()
    one_at_a_time = sum(grader.limits_for(spec, grader.Worker()).for_case(0) for spec in chosen)
    print(f"timing the reference solutions (once per machine, cached): {time.perf_counter() - start:.0f} s")
    start = time.perf_counter()
    results = grader.grade([spec.name for spec in chosen], source=tmp_path, seed=SEED, jobs=2)
    seconds = time.perf_counter() - start
    print(f"check of {len(chosen)} tasks on a submission that hangs in every task: {seconds:.0f} s "
          f"(one job at a time, each hang to its limit: about {one_at_a_time:.0f} s)")  # fmt: skip
    assert all(r.status == TIMEOUT for r in results), [(r.task, r.status, r.summary) for r in results]
    assert seconds < 0.65 * one_at_a_time, f"{seconds:.0f} s, {len(results)} tasks, {one_at_a_time:.0f} s one by one"


def test_the_timing_check_sees_a_launcher_that_keeps_results_by_address():
    """bench._still_computes, which runs after the timed calls on a GPU, on the CPU: new values in the
    same tensors must give a right output; a launcher that returns early for tensors it has seen fails."""
    from course_lib import bench

    spec = tasks.get("vector_add")
    case = tasks.Case((4096,), torch.float32, "bench")
    inputs = spec.make_inputs(case, torch.Generator().manual_seed(0))
    seen = set()

    def honest():
        torch.add(inputs["x"], inputs["y"], out=inputs["out"])
        return inputs["out"]

    def keeps_by_address():
        key = inputs["x"].data_ptr()
        if key not in seen:
            seen.add(key)
            honest()
        return inputs["out"]

    bench._still_computes(spec, case, inputs, honest, spec.tolerance[case.dtype])
    keeps_by_address()  # as timing would: the first call computes, later ones return early
    with pytest.raises(bench.StaleResults, match="keep results by address"):
        bench._still_computes(spec, case, inputs, keeps_by_address, spec.tolerance[case.dtype])
