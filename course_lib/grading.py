"""Grade a task against a folder of task modules (exercises/, solutions/ or a learner's submission).

Each task is graded in its own process (started from a fork server that has torch and Triton
loaded, so a start costs milliseconds) with a timeout: a kernel that hangs or crashes the process is
reported as such and the other tasks go on. Inside that process, each case gets fresh random
inputs, NaN-poisoned outputs with guard elements around them, a float64 reference, and the checks
in ``guards`` (a kernel must be launched, no torch compute in the launcher, no out-of-bounds access
in the interpreter). In GPU mode a kernel task that passes is graded once more in the interpreter,
in a fresh process, for the out-of-bounds loads a GPU does not report (``bounds_check``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing
import os
import re
import secrets
import sys
import tempfile
import threading
import time
import traceback
import types
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from . import guards, runtime, tasks
from .compare import compare
from .exercises import NOT_IMPLEMENTED

PASS, FAIL, TODO, TIMEOUT, CRASH = "pass", "fail", "todo", "timeout", "crash"
GUARD_ELEMENTS = 64  # poisoned elements after each output, to catch writes past its end on a GPU


@dataclass
class TaskResult:
    task: str
    status: str  # pass, fail, todo, timeout, crash
    summary: str  # one line
    details: list[str] = field(default_factory=list)
    source: str = ""
    seed: int = 0
    cases_passed: int = 0
    cases_total: int = 0
    seconds: float = 0.0
    output: str = ""  # what the learner's code printed (device_print, print)

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def to_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------------------------------
# where task modules come from


def resolve_source(source: str | os.PathLike) -> Path:
    """'exercises' and 'solutions' name the course's folders; anything else is a path."""
    text = str(source)
    if text in ("exercises", "solutions"):
        return runtime.course_root() / text
    return Path(text).expanduser().resolve()


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(runtime.course_root()))
    except ValueError:
        return str(path)


class _NotGradable(Exception):
    def __init__(self, status: str, summary: str, details: list[str] | None = None):
        super().__init__(summary)
        self.status, self.summary, self.details = status, summary, details or []


def load_module(task: str, source: str | os.PathLike = "solutions"):
    """The Python module of ``task``'s file in ``source`` ('solutions', 'exercises' or a folder), as
    the grader loads it: for scripts and notebooks that launch a solution's kernel themselves."""
    return _load_module(tasks.get(task), resolve_source(source))[0]


def _load_module(spec: tasks.TaskSpec, source_dir: Path):
    path = source_dir / f"{spec.name}.py"
    if not path.exists():
        raise _NotGradable(TODO, f"{NOT_IMPLEMENTED}: {_display(path)} does not exist")
    if str(source_dir) not in sys.path:
        sys.path.insert(0, str(source_dir))
    mod_spec = importlib.util.spec_from_file_location(f"course_submission_{spec.name}", path)
    module = importlib.util.module_from_spec(mod_spec)
    try:
        mod_spec.loader.exec_module(module)
    except SyntaxError as e:
        raise _NotGradable(FAIL, f"{_display(path)} line {e.lineno}: {e.msg}", [f"  {(e.text or '').rstrip()}"]) from e
    except NotImplementedError as e:  # a stub at module level (e.g. an autotune wrapper to write)
        raise _NotGradable(TODO, str(e) or f"{NOT_IMPLEMENTED}: {_display(path)}") from e
    except Exception as e:  # learner code: anything can happen on import
        raise _NotGradable(
            FAIL, f"importing {_display(path)} raised {type(e).__name__}: {e}", _learner_frames(e, path)
        ) from e
    entry = getattr(module, spec.entry, None)
    if not callable(entry):
        raise _NotGradable(FAIL, f"{_display(path)} has no function `{spec.entry}` (the grader calls it)")
    return module, entry, path


# --------------------------------------------------------------------------------------------------
# explaining exceptions


def _chain(e: BaseException):
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def _learner_frames(e: BaseException, path: Path) -> list[str]:
    lines = []
    for exc in _chain(e):
        for fs in traceback.extract_tb(exc.__traceback__):
            try:
                same = os.path.exists(fs.filename) and os.path.samefile(fs.filename, path)
            except OSError:
                same = False
            if same:
                row = f"  {path.name}:{fs.lineno}: {(fs.line or '').strip()}"
                if row not in lines:
                    lines.append(row)
    return lines[-3:]


def _explain(e: BaseException, path: Path) -> tuple[str, str, list[str]]:
    """(status, summary, details) for an exception raised by the learner's launcher or kernel."""
    chain = list(_chain(e))
    where = _learner_frames(e, path)
    for exc in chain:
        if isinstance(exc, NotImplementedError) or NOT_IMPLEMENTED in str(exc):
            found = re.search(NOT_IMPLEMENTED + r"[^'\"\n]*", str(exc))
            return TODO, found.group(0) if found else NOT_IMPLEMENTED, []
    for exc in chain:
        if isinstance(exc, guards.OutOfBoundsAccess):
            first = str(exc).splitlines()
            return FAIL, "out-of-bounds access: " + first[0], first[1:] + where
    for exc in chain:
        if isinstance(exc, guards.TorchComputeInLauncher):
            return FAIL, "torch compute in the launcher: " + str(exc), []
    for exc in chain:
        if type(exc).__name__ in ("CompilationError", "CompileTimeAssertionFailure"):
            return FAIL, "the kernel does not compile", str(exc).strip().splitlines()[-12:]
    text = str(e)
    if "CUDA error" in text or "illegal memory access" in text or "misaligned address" in text:
        return (
            CRASH,
            "the kernel crashed on the GPU: " + text.strip().splitlines()[0],
            [
                "A GPU kernel that reads or writes past a tensor usually ends this way. Run the check with",
                "  compute-sanitizer python -m course_lib check <task>",
                "to see the offending access, or run it in CPU mode (COURSE_MODE=cpu) where the course",
                "reports out-of-bounds accesses with the program id and offsets.",
            ],
        )
    root = chain[-1]
    if type(e).__name__ == "InterpreterError" and root is not e:
        return FAIL, f"the kernel raised {type(root).__name__} in the interpreter: {root}", where
    return FAIL, f"the launcher raised {type(e).__name__}: {e}", where


# --------------------------------------------------------------------------------------------------
# one case


def _to_device(t, dev: str):
    """Move a tensor with its storage offset and strides (so a misaligned view stays misaligned)."""
    if not isinstance(t, torch.Tensor) or t.device.type == dev:
        return t
    flat = torch.as_strided(t, (t.untyped_storage().nbytes() // t.element_size(),), (1,), 0)
    return flat.to(dev).as_strided(t.size(), t.stride(), t.storage_offset())


def _guarded_output(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A poisoned buffer with the output as a view inside it, and guard elements after it."""
    offset = t.storage_offset()
    span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    buf = torch.empty(offset + span + GUARD_ELEMENTS, dtype=t.dtype, device=t.device)
    guards.poison(buf)
    return buf.as_strided(t.size(), t.stride(), offset), buf


def _inside(view: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
    """Boolean over ``buf``: which of its elements belong to ``view``."""
    inside = torch.zeros(buf.numel(), dtype=torch.bool, device=buf.device)
    inside.as_strided(view.size(), view.stride(), view.storage_offset()).fill_(True)
    return inside


def _guard_intact(view: torch.Tensor, buf: torch.Tensor) -> int:
    """How many elements outside ``view`` but inside ``buf`` were changed."""
    return int((~guards.still_poisoned(buf[~_inside(view, buf)])).sum())


def _between_rows(view: torch.Tensor, buf: torch.Tensor) -> int:
    """How many changed elements of ``buf`` lie in the gaps between the rows of a 2-D ``view`` whose
    rows are further apart than their length (0 for any other view)."""
    if view.dim() != 2 or view.shape[0] < 2 or view.stride(1) != 1 or view.stride(0) <= view.shape[1]:
        return 0
    gaps = torch.zeros(buf.numel(), dtype=torch.bool, device=buf.device)
    start = view.storage_offset()
    gaps[start : start + (view.shape[0] - 1) * view.stride(0) + view.shape[1]] = True
    gaps &= ~_inside(view, buf)
    return int((gaps & ~guards.still_poisoned(buf)).sum())


def _run_case(spec, module, entry, path: Path, case: tasks.Case, seed: int) -> tuple[bool, str, list[str], str, bool]:
    """(ok, summary, details, status, diagnosed) for one case; diagnosed: the summary names a known mistake."""
    if spec.run_case is not None:  # tasks that are not a kernel and a launcher (e.g. cost models)
        try:
            return (*spec.run_case(module, case, torch.Generator().manual_seed(seed)), False)
        except Exception as e:
            status, summary, details = _explain(e, path)
            return False, summary, details, status, False
    dev = runtime.device()
    gen = torch.Generator().manual_seed(seed)
    cpu_inputs = spec.make_inputs(case, gen)
    pristine = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in cpu_inputs.items()}
    inputs = {k: _to_device(v, dev) for k, v in cpu_inputs.items()}
    buffers = {}
    for name in spec.outputs:
        inputs[name], buffers[name] = _guarded_output(inputs[name])
    before = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor) and k not in spec.outputs}

    allowed = guards.ALLOWED_IN_LAUNCHER - spec.forbid_in_launcher
    try:
        with guards.watch_launches() as watch, guards.launcher_torch_guard(allowed, (str(path),)):
            result = entry(**inputs)
        if runtime.is_gpu():
            torch.cuda.synchronize()
    except Exception as e:
        status, summary, details = _explain(e, path)
        return False, summary, details, status, False
    if not watch.launches:
        return (
            False,
            "no Triton kernel was launched: the launcher must launch at least one @triton.jit kernel",
            [],
            FAIL,
            False,
        )

    for name, t in before.items():
        if not torch.equal(inputs[name], t):
            return (
                False,
                (
                    f"the kernel changed the input `{name}`: inputs are read-only (if nothing stores to it on "
                    "purpose, a store ran past the end of another tensor into it: check the masks)"
                ),
                [],
                FAIL,
                False,
            )
    if spec.outputs:
        got = inputs[spec.outputs[0]]
        changed = _guard_intact(got, buffers[spec.outputs[0]])
        if changed:
            between = _between_rows(got, buffers[spec.outputs[0]])
            name = spec.outputs[0]
            summary = (
                f"wrote outside the output: {changed} elements outside `{name}` were changed, {between} of them "
                f"between its rows: `{name}`'s rows are {got.stride(0)} elements apart, more than a row's "
                f"{got.shape[-1]}; address rows with the output's row stride, not the row length"
                if between
                else f"wrote outside the output: {changed} elements just before or after `{name}` were changed "
                "(a mask or the grid lets programs write past the end)"
            )
            return (
                False,
                summary,
                [],
                FAIL,
                False,
            )
    else:
        got = result
        if not isinstance(got, torch.Tensor):
            return False, f"the launcher returned {type(got).__name__}, not a tensor", [], FAIL, False

    reference_inputs = {
        k: (v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
        for k, v in pristine.items()
        if k not in spec.outputs
    }
    expected = spec.reference(**reference_inputs)
    if tuple(got.shape) != tuple(expected.shape):
        return False, f"wrong shape: got {tuple(got.shape)}, expected {tuple(expected.shape)}", [], FAIL, False
    if got.dtype != case.dtype:
        return False, f"wrong dtype: got {got.dtype}, expected {case.dtype}", [], FAIL, False
    verdict = compare(got, expected, spec.tolerance[case.dtype], poisoned=True)
    if verdict.ok:
        return True, verdict.summary, verdict.details, PASS, False
    found = _diagnosis(spec, reference_inputs, got, case)
    summary = f"{found} ({verdict.summary})" if found else verdict.summary
    return False, summary, verdict.details, FAIL, found is not None


def _diagnosis(spec, inputs: dict, got: torch.Tensor, case: tasks.Case) -> str | None:
    """The task's guess at a known mistake behind a wrong output; never fails the grading itself."""
    if spec.diagnose is None or torch.isnan(got).any():
        return None
    try:
        return spec.diagnose(inputs, got.detach().to("cpu", torch.float64), case)
    except Exception:
        return None


def _short(case: tasks.Case) -> str:
    if not case.shape:  # tasks that are not kernels label their cases themselves
        return case.label
    return f"{case.label} {tuple(case.shape)} {str(case.dtype).replace('torch.', '')}"


def _dtype_list(cases: list[tasks.Case]) -> str:
    names = []
    for c in cases:
        n = str(c.dtype).replace("torch.", "")
        if n not in names:
            names.append(n)
    return ", ".join(names)


def _source_flag(source_dir: Path) -> str:
    if source_dir == resolve_source("exercises"):
        return ""
    if source_dir == resolve_source("solutions"):
        return " --solutions"
    return f" --source {_display(source_dir)}"


def grade_in_process(task: str, source: str | os.PathLike = "exercises", seed: int | None = None) -> TaskResult:
    """Grade one task in this process (the isolated worker calls this)."""
    spec = tasks.get(task)
    seed = secrets.randbelow(2**31) if seed is None else seed
    source_dir = resolve_source(source)
    start = time.perf_counter()
    result = TaskResult(task, FAIL, "", source=_display(source_dir), seed=seed)
    try:
        module, entry, path = _load_module(spec, source_dir)
    except _NotGradable as e:
        result.status, result.summary, result.details = e.status, e.summary, e.details
        return result
    cases = spec.all_cases(runtime.MODE)
    result.cases_total = len(cases)
    failures, notes = [], []
    for i, case in enumerate(cases):
        case_seed = seed + i
        ok, summary, details, status, diagnosed = _run_case(spec, module, entry, path, case, case_seed)
        if ok:
            result.cases_passed += 1
            continue
        if status == TODO:
            if not failures:  # nothing wrong so far: the task is simply unfinished
                result.status, result.summary = TODO, summary
                result.seconds = time.perf_counter() - start
                return result
            details = [f"({summary}: the cases after this one were not run)"]
            failures.append((case, case_seed, summary, details, FAIL, False))
            break
        failures.append((case, case_seed, summary, details, status, diagnosed))
    if not failures and spec.extra_checks is not None:
        try:
            checks = list(spec.extra_checks(module, entry))
            problems = [(summary, details) for ok, summary, details in checks if not ok]
            notes = [line for ok, _, details in checks if ok for line in details]
        except Exception as e:
            status, summary, details = _explain(e, path)
            problems, notes = [(summary, details)], []
        if problems:
            result.seconds = time.perf_counter() - start
            result.summary = f"all {len(cases)} cases are right, but {problems[0][0]}"
            result.details = [line for _, details in problems for line in details]
            return result
    result.seconds = time.perf_counter() - start
    if not failures:
        result.status = PASS
        result.summary = f"{len(cases)} cases ({_dtype_list(cases)}) passed in {result.seconds:.1f} s"
        result.details = list(notes)
        if runtime.is_gpu() and os.environ.get("COURSE_PERF", "1") != "0":
            from .bench import performance_note

            result.details += performance_note(spec, entry)
        return result
    # the first failure, unless a later one names the mistake (a 1-element case rarely can)
    reported = next((f for f in failures if f[5]), failures[0])
    case, case_seed, summary, details, status, _ = reported
    result.status = CRASH if failures[0][4] == CRASH else FAIL
    result.summary = f"case '{case.label}' {summary}"
    failed_labels = ", ".join(_short(c) for c, *_ in failures)
    which = "first failure" if reported is failures[0] else "failure reported"
    result.details = [
        f"failed {len(failures)} of {len(cases)} cases: {failed_labels}",
        f"{which}: {case.describe()}, seed {case_seed}",
        *details,
        f"reproduce: python -m course_lib check {task}{_source_flag(source_dir)} --seed {seed}",
    ]
    return result


# --------------------------------------------------------------------------------------------------
# isolation: one process per task, from a fork server with torch and Triton already imported

_CONTEXT = None


def _context():
    """A fork server with torch and Triton preloaded in CPU mode (fast starts). In GPU mode, spawn:
    a process forked after CUDA was touched cannot use CUDA."""
    global _CONTEXT
    if _CONTEXT is None:
        methods = multiprocessing.get_all_start_methods()
        if "forkserver" in methods and runtime.is_cpu():
            _CONTEXT = multiprocessing.get_context("forkserver")
            _CONTEXT.set_forkserver_preload(["course_lib.grading"])
        else:
            _CONTEXT = multiprocessing.get_context("spawn")
    return _CONTEXT


_START_LOCK = threading.Lock()


@contextlib.contextmanager
def _no_main_module():
    """Start the worker without the caller's main module.

    multiprocessing re-imports the parent's ``__main__`` in every child (by name, or by path from
    its ``__file__``). A notebook, or a script calling check() without an ``if __name__ ==
    "__main__"`` guard, would then run again inside each grading process. The worker needs nothing
    from it, so the caller's main module is hidden while the process starts."""
    real = sys.modules.get("__main__")
    stand_in = types.ModuleType("__main__")
    stand_in.__spec__ = None
    sys.modules["__main__"] = stand_in
    try:
        yield
    finally:
        if real is not None:
            sys.modules["__main__"] = real


def _course_environment() -> dict:
    """The COURSE_* settings of the caller, now: the fork server keeps the environment it started
    with, and an instructor may set COURSE_HIDDEN_CASES after the first check."""
    return {k: v for k, v in os.environ.items() if k.startswith("COURSE_")}


def _child(conn, task: str, source: str, seed: int, log_path: str, environment: dict | None = None) -> None:
    for key in [k for k in os.environ if k.startswith("COURSE_")]:
        if key not in (environment or {}):
            del os.environ[key]
    os.environ.update(environment or {})
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log, 1)
    os.dup2(log, 2)
    # numpy's overflow and divide warnings from inside the interpreter (exp(-z) reaching inf on
    # purpose, say) are not something the learner printed: keep them out of "your code printed"
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter")
    try:
        result = grade_in_process(task, source, seed)
    except BaseException as e:  # the grader's own failure: report it, never hang the parent
        result = TaskResult(
            task, FAIL, f"the grader failed: {type(e).__name__}: {e}", traceback.format_exc().splitlines()
        )
    sys.stdout.flush()
    sys.stderr.flush()
    conn.send(result.to_dict())
    conn.close()


def _read_tail(path: str, limit: int = 4000) -> str:
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return ""
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return text if len(text) <= limit else "...\n" + text[-limit:]


def grade_isolated(task: str, source: str | os.PathLike, seed: int, timeout: float) -> TaskResult:
    """Grade one task in its own process. In GPU mode a kernel task that passes is run once more,
    in Triton's interpreter, for the bounds check a GPU cannot make (see ``bounds_check``)."""
    result = _grade_child(task, source, seed, timeout)
    if result.passed and runtime.is_gpu() and tasks.get(task).run_case is None and bounds_check_wanted():
        result = with_bounds_check(result, bounds_check(task, source, seed, timeout))
    return result


# --------------------------------------------------------------------------------------------------
# GPU mode: the interpreter's bounds check, in a second process

BOUNDS_NOTE = (
    "On a GPU a load past the end of a tensor usually returns whatever lies there, with no error, so "
    "the GPU cases cannot see it. Triton's interpreter checks every address: it ran the task's "
    "CPU-mode cases (small shapes) to look for such accesses."
)


def bounds_check_wanted() -> bool:
    return os.environ.get("COURSE_BOUNDS_CHECK", "1") != "0"


def bounds_check(task: str, source: str | os.PathLike, seed: int, timeout: float) -> TaskResult:
    """Grade ``task`` in CPU mode, in a fresh Python started with TRITON_INTERPRET=1 (a process that
    has set up CUDA cannot switch to the interpreter): the interpreter reports every load and store
    outside the tensors a kernel was given. Never raises: a failure to run it is a TaskResult too."""
    import json
    import subprocess

    root = str(Path(__file__).resolve().parent.parent)
    env = {k: v for k, v in os.environ.items() if k != "COURSE_MODE"}
    env.update(
        TRITON_INTERPRET="1", COURSE_PERF="0", COURSE_BOUNDS_CHECK="0", CUDA_VISIBLE_DEVICES="",
        PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p),
    )  # fmt: skip
    command = [
        sys.executable, "-m", "course_lib", "check", task, "--source", str(resolve_source(source)),
        "--seed", str(seed), "--timeout", str(timeout), "--json",
    ]  # fmt: skip
    done = None
    try:
        done = subprocess.run(command, env=env, cwd=root, capture_output=True, text=True, timeout=timeout + 120)
        # the report is the JSON list that ends stdout; anything printed before it is skipped
        starts = [m.start() for m in re.finditer(r"^\[", done.stdout, re.MULTILINE)]
        return TaskResult(**json.loads(done.stdout[starts[-1] :])[0])
    except subprocess.TimeoutExpired:
        return TaskResult(task, TIMEOUT, f"no result from the interpreter after {timeout + 120:.0f} s")
    except (ValueError, IndexError, KeyError, TypeError, OSError) as e:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:] if done is not None else []
        return TaskResult(task, CRASH, f"the interpreter's run gave no report ({type(e).__name__})", tail)


def with_bounds_check(result: TaskResult, interpreted: TaskResult) -> TaskResult:
    """The GPU result, failed if the interpreter found an out-of-bounds access; otherwise the same
    result with one line saying what the interpreter's run found."""
    if interpreted.status == FAIL and "out-of-bounds access" in interpreted.summary:
        return replace(
            result,
            status=FAIL,
            summary=f"every case passed on the GPU, but in the interpreter's bounds check {interpreted.summary}",
            details=[BOUNDS_NOTE, *interpreted.details],
        )
    if interpreted.passed:
        line = f"bounds: no load or store outside its tensors in {interpreted.cases_total} cases run in the interpreter"
    elif interpreted.status == FAIL:  # e.g. a kernel using what the interpreter lacks (inline PTX)
        line = f"bounds: not checked to the end; in the interpreter, {interpreted.summary}"
    else:
        line = f"bounds: not checked; the interpreter's run did not finish ({interpreted.summary})"
    return replace(result, details=[*result.details, line], seconds=result.seconds + interpreted.seconds)


def _grade_child(task: str, source: str | os.PathLike, seed: int, timeout: float) -> TaskResult:
    ctx = _context()
    receive, send = ctx.Pipe(duplex=False)
    fd, log_path = tempfile.mkstemp(prefix=f"course-{task}-", suffix=".log")
    os.close(fd)
    start = time.perf_counter()
    proc = ctx.Process(
        target=_child, args=(send, task, str(source), seed, log_path, _course_environment()), daemon=True
    )
    with _START_LOCK, _no_main_module():
        proc.start()
    send.close()
    payload = None
    timed_out = not receive.poll(timeout)
    if not timed_out:
        try:
            payload = receive.recv()
        except (EOFError, OSError):
            payload = None
    proc.join(timeout=5 if payload is not None else 0.5)
    if proc.is_alive():
        proc.kill()
        proc.join()
    output = _read_tail(log_path)
    source_name = _display(resolve_source(source))
    if payload is not None:
        result = TaskResult(**payload)
        result.output = output
        return result
    elapsed = time.perf_counter() - start
    if timed_out:
        return TaskResult(
            task,
            TIMEOUT,
            f"no result after {timeout:.0f} s: the kernel or launcher seems to hang "
            "(a loop that never ends, or a grid far too large)",
            [],
            source_name,
            seed,
            seconds=elapsed,
            output=output,
        )
    code = proc.exitcode
    how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    return TaskResult(
        task,
        CRASH,
        f"the process grading it crashed ({how}) before reporting: the kernel or launcher "
        "crashed Python (a raw pointer gone wrong, or os._exit)",
        [],
        source_name,
        seed,
        seconds=elapsed,
        output=output,
    )


def grade(
    task_names: list[str],
    source: str | os.PathLike = "exercises",
    seed: int | None = None,
    timeout: float | None = None,
    jobs: int | None = None,
) -> list[TaskResult]:
    """Grade tasks, each in its own process, ``jobs`` at a time. Never raises for a learner's bug."""
    seed = secrets.randbelow(2**31) if seed is None else seed
    specs = [tasks.get(name) for name in task_names]
    if runtime.is_gpu():
        # one task at a time: passing kernels are timed, and timings must not share the GPU; the
        # roofline's peaks are measured (once per GPU, then cached) before any child needs them
        jobs = 1
        if any(s.bench_cases for s in specs) and os.environ.get("COURSE_PERF", "1") != "0":
            from .roofline import gpu_peaks

            gpu_peaks()
    jobs = jobs or min(4, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(grade_isolated, s.name, source, seed, timeout or s.timeout_s) for s in specs]
        return [f.result() for f in futures]
