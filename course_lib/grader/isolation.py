"""The sealed boundary: grade one task with the learner's code in a process of its own.

This process (the protected one) makes every case's inputs, poisons the outputs, computes the
reference and compares; the worker process (``worker``) imports the learner's file and runs the
launcher on the tensors it is handed, in a shared-memory file. Messages both ways are plain JSON,
so nothing the worker sends is unpickled here, and nothing it patches in its own process (modules,
builtins, torch, numpy), prints, or exits with can change a verdict: a case passes only when the
shared output, read here, matches the reference computed here.

Each step has a time limit (``limits``): a worker that does not answer in time is killed and the
task reported as hung; one that dies is reported with its exit code or signal, and grading goes on.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import sys
import tempfile
import threading
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

from .. import runtime, sources, tasks
from . import cases as case_tools
from . import precheck
from . import worker as worker_module
from .limits import Limits, StepClock
from .result import CRASH, FAIL, NEEDS_GPU, PASS, TIMEOUT, TODO, TaskResult
from .shared import SharedCase, tensor_from_bytes

CPU_MEMORY_BYTES = int(float(os.environ.get("COURSE_CHILD_MEMORY_GB", "6")) * 2**30)


@dataclass
class Worker:
    """Where and how the worker runs: the mode its kernels run in, and its environment."""

    mode: str = field(default_factory=lambda: runtime.MODE)  # "cpu" (the interpreter) or "gpu"
    env: dict = field(default_factory=dict)  # variables set for the worker (e.g. CUDA_VISIBLE_DEVICES)

    @property
    def needs_spawn(self) -> bool:
        """The fork server is started in CPU mode with the interpreter loaded; anything else spawns."""
        return not (self.mode == runtime.CPU and runtime.is_cpu() and not self.env)


# --------------------------------------------------------------------------------------------------
# starting the worker

_FORKSERVER = None
_START_LOCK = threading.Lock()


def _context(worker: Worker):
    global _FORKSERVER
    if not worker.needs_spawn and "forkserver" in multiprocessing.get_all_start_methods():
        if _FORKSERVER is None:
            _FORKSERVER = multiprocessing.get_context("forkserver")
            _FORKSERVER.set_forkserver_preload(["course_lib.grader.worker"])
        return _FORKSERVER
    return multiprocessing.get_context("spawn")  # CUDA cannot be used in a forked process


@contextlib.contextmanager
def _starting(worker: Worker):
    """Hide the caller's main module and set the worker's environment while a process starts.

    multiprocessing re-imports the parent's ``__main__`` in every child (by name, or by path from
    its ``__file__``). A notebook, or a script calling check() without an ``if __name__ ==
    "__main__"`` guard, would then run again inside each worker. The worker needs nothing from it."""
    with _START_LOCK:
        real = sys.modules.get("__main__")
        stand_in = types.ModuleType("__main__")
        stand_in.__spec__ = None
        sys.modules["__main__"] = stand_in
        saved = {k: os.environ.get(k) for k in worker.env}
        os.environ.update(worker.env)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            if real is not None:
                sys.modules["__main__"] = real


class _Gone(Exception):
    """The worker ended or sent something that is not a report."""


class _Late(Exception):
    """The worker did not answer within its time limit."""


class _Session:
    """One worker process and its pipe; every receive has a deadline."""

    def __init__(self, setup: dict, worker: Worker):
        ctx = _context(worker)
        self.receive, send = ctx.Pipe(duplex=True)
        fd, self.log_path = tempfile.mkstemp(prefix="course-worker-", suffix=".log")
        os.close(fd)
        self.proc = ctx.Process(target=worker_module.main, args=(send, setup, self.log_path), daemon=True)
        with _starting(worker):
            self.proc.start()
        send.close()

    def send(self, message: dict) -> None:
        try:
            self.receive.send_bytes(json.dumps(message).encode())
        except (OSError, ValueError) as e:
            raise _Gone() from e

    def _bytes(self, limit: float) -> bytes:
        if not self.receive.poll(max(limit, 0.0)):
            if not self.proc.is_alive():
                raise _Gone()
            raise _Late()
        try:
            return self.receive.recv_bytes(1 << 31)
        except (EOFError, OSError) as e:
            raise _Gone() from e

    def ask(self, message: dict | None, limit: float, kind: str) -> tuple[dict, bytes | None]:
        """Send ``message`` (if any) and wait up to ``limit`` seconds for a reply of ``kind``."""
        if message is not None:
            self.send(message)
        deadline = time.monotonic() + limit
        try:
            reply = json.loads(self._bytes(limit).decode())
        except (ValueError, UnicodeDecodeError) as e:
            raise _Gone() from e
        accepted = (kind, "load_failed") if kind == "loaded" else (kind,)
        if not isinstance(reply, dict) or reply.get("kind") not in accepted:
            raise _Gone()
        data = None
        returned = reply.get("returned")
        if isinstance(returned, dict) and returned.get("has_bytes"):
            data = self._bytes(max(deadline - time.monotonic(), 1.0))
        return reply, data

    def close(self) -> str:
        """End the worker (politely, then by force) and return what it printed."""
        with contextlib.suppress(_Gone):
            self.send({"kind": "exit"})
        self.proc.join(timeout=2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.receive.close()
        return _read_tail(self.log_path)

    def how_it_ended(self) -> str:
        self.proc.join(timeout=2)
        code = self.proc.exitcode
        if code is None:
            return "it stopped answering"
        return f"signal {-code}" if code < 0 else f"exit code {code}"


def _read_tail(path: str, limit: int = 4000) -> str:
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return ""
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    return text if len(text) <= limit else "...\n" + text[-limit:]


# --------------------------------------------------------------------------------------------------
# grading one task


def file_sha256(path: Path) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def _short(case: tasks.Case) -> str:
    if not case.shape:  # tasks that are not kernels label their cases themselves
        return case.label
    return f"{case.label} {tuple(case.shape)} {str(case.dtype).replace('torch.', '')}"


def _dtype_list(cases: list[tasks.Case]) -> str:
    return ", ".join(dict.fromkeys(str(c.dtype).replace("torch.", "") for c in cases))


def reproduce_line(task: str, source_dir: Path, seed: int) -> str:
    if source_dir == sources.resolve("exercises"):
        flag = ""
    elif source_dir == sources.resolve("solutions"):
        flag = " --solutions"
    else:
        flag = f" --source {sources.display(source_dir)}"
    return f"python -m course_lib check {task}{flag} --seed {seed}"


class _Stop(Exception):
    """Grading this task ends here with ``result``."""

    def __init__(self, result: TaskResult):
        self.result = result


def run_task(
    spec: tasks.TaskSpec,
    source_dir: Path,
    seed: int,
    limits: Limits,
    worker: Worker | None = None,
    hidden: str | None = None,
    check_source: bool = True,
    perf: bool = False,
    clock: StepClock | None = None,
) -> TaskResult:
    """Grade ``spec`` against ``source_dir/<task>.py`` with the learner's code in a worker process."""
    worker = worker or Worker()
    path = source_dir / f"{spec.name}.py"
    start = time.perf_counter()
    result = TaskResult(spec.name, FAIL, "", source=sources.display(source_dir), seed=seed)
    result.file_sha256 = file_sha256(path)
    if not path.exists():
        result.status, result.summary = TODO, f"{sources.NOT_IMPLEMENTED}: {sources.display(path)} does not exist"
        return result
    problem = runtime.gluon_problem() if spec.needs == "hopper" else None
    if problem:
        result.summary = f"cannot grade this task here: {problem}"
        return result
    if check_source:
        findings = precheck.check_file(path)
        if findings:
            result.summary, result.details = precheck.describe(findings, path.name)
            return result
    cases = spec.all_cases(worker.mode, hidden=hidden)
    result.cases_total = len(cases)
    setup = {
        "file": str(path),
        "entry": spec.entry,
        "outputs": list(spec.outputs),
        "forbid": sorted(spec.forbid_in_launcher),
        "torch_task": spec.torch_task,
        "mode": worker.mode,
        "memory_bytes": CPU_MEMORY_BYTES if worker.mode == runtime.CPU else None,
    }
    session = _Session(setup, worker)
    phase = "loading the file"
    budget = time.monotonic() + limits.task_s
    try:

        def ask(message, limit, kind):
            began = time.perf_counter()
            wait = min(limit, max(budget - time.monotonic(), 0.5))
            try:
                answer = session.ask(message, wait, kind)
                if clock is not None:
                    clock.add(kind, time.perf_counter() - began)
                return answer
            except _Late:
                over = wait < limit  # the task's whole budget ran out first
                raise _Stop(_hung(result, phase, wait, limits, over)) from None
            except _Gone:
                raise _Stop(_ended(result, phase, session.how_it_ended())) from None

        reply, _ = ask(None, limits.load_s, "loaded")
        if reply["kind"] == "load_failed":
            result.status = str(reply.get("status", FAIL))
            result.summary = str(reply.get("summary", ""))
            result.details = [str(d) for d in reply.get("details", [])]
            raise _Stop(result)
        failures = []
        for i, case in enumerate(cases):
            phase = f"case '{case.label}' ({case.describe()})"
            outcome = _one_case(spec, case, seed + i, ask, limits.for_case(i))
            if outcome.ok:
                result.cases_passed += 1
                continue
            if outcome.status == TODO:
                if not failures:  # nothing wrong so far: the task is simply unfinished
                    result.status, result.summary = TODO, outcome.summary
                    raise _Stop(result)
                outcome = case_tools.Outcome.failed(
                    outcome.summary, [f"({outcome.summary}: the cases after this one were not run)"]
                )
                failures.append((i, case, outcome))
                break
            failures.append((i, case, outcome))
            if outcome.status == CRASH:  # a GPU whose context is broken runs nothing more
                break
        if failures:
            raise _Stop(_failed(spec, result, cases, failures, source_dir, seed))
        notes = []
        if spec.probe is not None:
            phase = "the task's checks on your kernels"
            reply, _ = ask({"kind": "probe", "probe": spec.probe}, limits.extra_s, "probe_done")
            if reply.get("error"):
                error = reply["error"]
                if error.get("status") == TODO:  # a stub compiled for the check: unfinished, not wrong
                    result.status, result.summary = TODO, str(error.get("summary", ""))
                    raise _Stop(result)
                problems = [(str(error.get("summary", "")), [str(d) for d in error.get("details", [])])]
            else:
                checks = spec.judge(reply.get("facts", {}))
                problems = [(summary, details) for ok, summary, details in checks if not ok]
                notes = [line for ok, _, details in checks if ok for line in details]
            if problems:
                head = f"all {len(cases)} cases are right, but " if cases else ""
                result.summary = head + problems[0][0]
                result.failed = "checks"
                result.details = [line for _, details in problems for line in details]
                raise _Stop(result)
        if not spec.runs_here(worker.mode):
            result.status = NEEDS_GPU
            result.summary = _needs_summary(spec, worker.mode)
            result.details = list(notes) + [
                "its cases and its speed are graded on a Hopper GPU (H100, H200): run the same check there"
            ]
            raise _Stop(result)
        result.status = PASS
        result.summary = f"{len(cases)} cases ({_dtype_list(cases)}) passed in {time.perf_counter() - start:.1f} s"
        result.details = list(notes)
        if perf and worker.mode == runtime.GPU and spec.bench_cases:
            phase = "timing your kernel"
            reply, _ = ask({"kind": "perf", "task": spec.name}, limits.extra_s, "perf_done")
            result.details += [str(line) for line in reply.get("lines", [])]
    except _Stop as stop:
        result = stop.result
    finally:
        result.output = session.close()
        result.seconds = time.perf_counter() - start
    return result


def _needs_summary(spec: tasks.TaskSpec, mode: str) -> str:
    info = runtime.gpu_info() if mode == runtime.GPU else None
    here = f"this GPU is {info.name} (sm_{info.capability[0]}{info.capability[1]})" if info else "this is CPU mode"
    return (
        f"needs a Hopper GPU (sm_90) to run, and {here}: the structural checks passed (compiled for sm_90), "
        "the cases did not run, so this is no pass yet: wrong values show only there"
    )


def _one_case(spec, case, case_seed: int, ask, limit: float) -> case_tools.Outcome:
    if spec.call_case is not None:  # a task that is no kernel: a question, answered in plain data
        function, kwargs = spec.call_case(case, case_seed)
        reply, _ = ask({"kind": "call", "function": function, "kwargs": kwargs}, limit, "call_done")
        if "todo" in reply:
            return case_tools.Outcome.failed(str(reply["todo"]), status=TODO)
        ok, summary, details = spec.judge_call(case, function, kwargs, reply)
        return case_tools.Outcome(ok, summary, details, PASS if ok else FAIL)
    prepared = case_tools.prepare(spec, case, case_seed)
    with SharedCase(prepared.tensors) as shared:
        prepared.tensors = shared.tensors
        message = {"kind": "case", "shared": shared.message, "order": prepared.order, "values": prepared.values}
        reply, data = ask(message, limit, "case_done")
        returned = None
        if data is not None:
            try:
                span = int(reply["returned"].get("span_nbytes", 0))
                if span:  # a torch task's 2-D result: its rows' span follows the values
                    data, reply["span"] = data[: len(data) - span], data[len(data) - span :]
                returned = tensor_from_bytes(reply["returned"], data)
            except (ValueError, TypeError, KeyError, AttributeError):
                return case_tools.Outcome.failed("the launcher returned a tensor the grader cannot read back")
        return case_tools.judge(spec, case, prepared, reply, returned)


def _hung(result: TaskResult, phase: str, waited: float, limits: Limits, whole_task: bool) -> TaskResult:
    result.status = TIMEOUT
    what = "the task as a whole" if whole_task else phase
    result.summary = (
        f"no result after {waited:.0f} s for {what}: the kernel or launcher seems to hang "
        "(a loop that never ends, or a grid far too large)"
    )
    result.details = [f"time limits: {limits.describe()}"]
    return result


def _ended(result: TaskResult, phase: str, how: str) -> TaskResult:
    result.status = CRASH
    result.summary = (
        f"the process running your code ended ({how}) during {phase}, before reporting: the kernel or "
        "launcher crashed Python (a raw pointer gone wrong, os._exit, or the memory limit)"
    )
    return result


def _failed(spec, result: TaskResult, cases, failures, source_dir: Path, seed: int) -> TaskResult:
    # the first failure, unless a later one names the mistake (a 1-element case rarely can)
    index, case, outcome = next((f for f in failures if f[2].diagnosed), failures[0])
    result.status = CRASH if failures[0][2].status == CRASH else FAIL
    result.failed = "raised" if outcome.raised else "values"
    result.summary = f"case '{case.label}' {outcome.summary}"
    which = "first failure" if index == failures[0][0] else "failure reported"
    result.details = [
        f"failed {len(failures)} of {len(cases)} cases: {', '.join(_short(c) for _, c, _ in failures)}",
        f"{which}: {case.describe()} (case {index + 1} of {len(cases)})",
        *outcome.details,
        f"reproduce: {reproduce_line(spec.name, source_dir, seed)}",
    ]
    return result
