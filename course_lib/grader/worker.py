"""The submission's process: it imports the learner's task file and runs the launcher on the inputs it
is handed, and nothing that decides a verdict.

It never sees the seed, the hidden cases or the reference. For each case it maps the shared file
(``shared.MappedCase``), calls the launcher under the launch watch, the torch guard and, in the
interpreter, the bounds check and the data-flow record, and reports what it saw as plain JSON:
which kernels were launched, which inputs no kernel read, how many output elements no kernel wrote,
or the exception the learner's code raised, explained. The protected process (``isolation``) makes
the inputs, computes the reference and compares; what this process says can only fail a case.
"""

from __future__ import annotations

import contextlib
import json
import numbers
import os
import re
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path


def _send(conn, message: dict, data: bytes | None = None) -> None:
    conn.send_bytes(json.dumps(message).encode())
    if data is not None:
        conn.send_bytes(data)


def _receive(conn) -> dict:
    return json.loads(conn.recv_bytes().decode())


def _limit_memory(nbytes: int | None) -> None:
    if not nbytes:
        return
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))
    except (ImportError, ValueError, OSError):  # not on this platform, or a lower hard limit
        pass


def _limit_files(nbytes: int) -> None:
    """No file the worker writes (its printed output included) grows past ``nbytes``."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    except (ImportError, ValueError, OSError):
        pass


def _returned(t, inputs: dict, meta: dict) -> bytes:
    """A returned tensor, described for the grader: its dtype, size and strides (into ``meta``) and
    the bytes of its storage from its first element to its last (returned). The grader rebuilds the
    tensor from those bytes, so its values and layout are what the memory holds. For a 2-D tensor with
    unit column stride the bytes run to the end of its last row, the padding after it included; also
    its alignment and whether it shares an input's memory (``check_layout`` of chapter 10's pad_k)."""
    import torch

    meta["stride"] = [int(s) for s in t.stride()]
    meta["ptr_mod_16"] = int(t.data_ptr() % 16)
    storage = t.untyped_storage()
    meta["shares_input"] = any(
        type(x) is torch.Tensor and x.untyped_storage().data_ptr() == storage.data_ptr() for x in inputs.values()
    )
    if t.numel() == 0:
        meta["span_nbytes"] = 0
        return b""
    itemsize = t.element_size()
    room = storage.nbytes() // itemsize - t.storage_offset()  # elements from t's first to the storage's end
    span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    if t.dim() == 2 and t.stride(1) == 1:
        span = max(span, min(t.shape[0] * t.stride(0), room))
    raw = t.as_strided((span,), (1,)).detach().to("cpu").contiguous().view(torch.uint8)
    data = raw.numpy().tobytes()
    meta["span_nbytes"] = len(data)
    return data


def _unspecialized(runs: list, launches: list[str]) -> dict | None:
    """A Gluon task's case in CPU mode: some launch of it must be a Gluon kernel that split its warps with
    gl.warp_specialize as it ran. The structural checks read one launch, at a public shape; this is every
    case's own run, so a launcher cannot keep its warp-specialized kernel for the probe alone. None when
    it is so."""
    if any(p.warp_specialized for _, programs in runs for p in programs):
        return None
    if runs:
        said = f"in this case {', '.join(f'`{name}`' for name, _ in runs)} ran without gl.warp_specialize"
    else:
        said = "in this case no Gluon kernel ran (a @triton.jit kernel, or torch, did the work)"
    return {
        "status": "fail",
        "summary": f"the kernel has no warp-specialized region: {said}, so every warp loads and multiplies in turn",
        "details": [
            f"launches, in order: {', '.join(launches[:12]) or 'none'}",
            "Split the roles with gl.warp_specialize: the default partition computes, a worker issues the TMA "
            "loads (chapter 09).",
        ],
    }


def _simulated(simulation: dict | None, path, runs: list | None = None):
    """Gluon launches run in course_lib.gluon_cpu with the grader's seed and order of events, or nothing.
    Each partition's thread runs under the kernel-body torch guard: the launcher's guard is the main
    thread's, and a kernel body reaching a host tensor must not compute with it there."""
    if not simulation:
        return contextlib.nullcontext()
    from .. import gluon_cpu
    from .guards import kernel_body_guard

    return gluon_cpu.launches_simulated(
        seed=int(simulation["seed"]),
        event_weight=float(simulation["event_weight"]),
        record=runs,
        thread_guard=lambda: kernel_body_guard((str(path),)),
    )


def _launch_summary(launches: list[str]) -> tuple[list[str], int]:
    """Each kernel launched, named once in launch order (at most 100), and how many launches in all."""
    return list(dict.fromkeys(launches))[:100], len(launches)


def _explain(e: BaseException, path: Path) -> dict:
    """{status, summary, details} for an exception raised by the learner's launcher or kernel; an
    out-of-bounds access adds facts: its details without their generic advice, for a task whose own hint
    replaces that advice (``TaskSpec.out_of_bounds_hint``)."""
    from ..hooks import DescriptorAlignmentError, OutOfBoundsAccess
    from ..stubs import NOT_IMPLEMENTED
    from ..tracebacks import chain, learner_frames, raised_in
    from .guards import TorchComputeInLauncher

    def said(status, summary, details=()):
        return {"status": status, "summary": summary, "details": list(details)}

    links = list(chain(e))
    where = learner_frames(e, path)
    for exc in links:
        # a stub's (the course's words, or raised in the learner's own file): unfinished, not wrong.
        # Triton's own NotImplementedError (a feature this release lacks) is a failure, with its words.
        if NOT_IMPLEMENTED in str(exc) or (isinstance(exc, NotImplementedError) and raised_in(exc, path)):
            found = re.search(NOT_IMPLEMENTED + r"[^'\"\n]*", str(exc))
            return said("todo", found.group(0) if found else NOT_IMPLEMENTED)
    for exc in links:
        if isinstance(exc, OutOfBoundsAccess):
            first, *rest = exc.lines
            report = said("fail", "out-of-bounds access: " + first.text(), [line.text() for line in rest] + where)
            report["facts"] = [line.text(advice=False) for line in rest] + where
            return report
    for exc in links:
        if isinstance(exc, DescriptorAlignmentError):
            first = str(exc).splitlines()
            return said("fail", first[0], first[1:] + where)
    for exc in links:
        if isinstance(exc, TorchComputeInLauncher):
            where_ = "the kernel body" if str(exc).startswith("the kernel body") else "the launcher"
            return said("fail", f"torch compute in {where_}: " + str(exc))
    for exc in links:  # course_lib.gluon_cpu, CPU mode's run of a Gluon kernel
        said_by_simulator = _simulator_says(exc, said, where)
        if said_by_simulator is not None:
            return said_by_simulator
    compile_errors = [exc for exc in links if type(exc).__name__ in ("CompilationError", "CompileTimeAssertionFailure")]
    if compile_errors:
        # the innermost one points at the learner's line (a jit function calling another wraps its error)
        inner = compile_errors[-1]
        details = str(inner).strip().splitlines()[-12:]
        root = links[-1]
        if root is not inner and str(root).strip():  # what the compiler itself said, under the source lines
            details.append(f"{type(root).__name__}: {str(root).strip().splitlines()[0][:300]}")
        return said("fail", "the kernel does not compile", details)
    if isinstance(e, SystemExit):
        return said("fail", f"the launcher raised SystemExit({e.code!r}): a launcher must not exit", where)
    text = str(e)
    if "CUDA error" in text or "illegal memory access" in text or "misaligned address" in text:
        return said(
            "crash",
            "the kernel crashed on the GPU: " + text.strip().splitlines()[0],
            [
                "A GPU kernel that reads or writes past a tensor usually ends this way. Run the check with",
                "  compute-sanitizer python -m course_lib check <task>",
                "to see the offending access, or run it in CPU mode (COURSE_MODE=cpu) where the course",
                "reports out-of-bounds accesses with the program id and offsets.",
            ],
        )
    root = links[-1]
    if type(e).__name__ == "InterpreterError" and root is not e:
        return said("fail", f"the kernel raised {type(root).__name__} in the interpreter: {root}", where)
    return said("fail", f"the launcher raised {type(e).__name__}: {e}", where)


def _simulator_says(exc: BaseException, said, where: list[str]) -> dict | None:
    """What course_lib.gluon_cpu found, as the grader says it; None for any other exception."""
    from .. import gluon_cpu

    if isinstance(exc, gluon_cpu.Deadlock):
        return said(
            "fail",
            "the kernel deadlocks: every partition waits on a barrier phase that nothing will complete",
            [
                f"Who waits on what: {exc}",
                "On a GPU this kernel hangs. CPU mode ran it in course_lib's Gluon simulator, the partitions "
                "taking turns in a seeded order: check each wait's phase parity (it flips every time the ring "
                "wraps round) and that every barrier waited on is arrived at, or its bytes expected and brought.",
                *where,
            ],
        )
    if isinstance(exc, gluon_cpu.ProtocolError):
        return said(
            "fail",
            f"the asynchronous protocol is broken: {str(exc).splitlines()[0]}",
            [
                *str(exc).splitlines()[1:],
                "CPU mode ran the kernel in course_lib's Gluon simulator, where TMA copies land and wgmmas finish "
                "late, in a seeded order: on a GPU the same mistake gives wrong values now and then, or a hang.",
                *where,
            ],
        )
    if isinstance(exc, gluon_cpu.KernelError):
        return said(
            "fail",
            f"the kernel does what compiled Gluon refuses: {str(exc).splitlines()[0]}",
            ["CPU mode ran the kernel in course_lib's Gluon simulator; for a GPU it would not compile.", *where],
        )
    if isinstance(exc, gluon_cpu.NotSimulated):
        return said(
            "needs_gpu",
            f"CPU mode cannot run this kernel: {str(exc).splitlines()[0]}",
            [
                "course_lib's Gluon simulator runs the Gluon API chapters 09 and 10 use, not all of it: grade this "
                "file on a Hopper GPU (H100, H200).",
                *where,
            ],
        )
    return None


def plain(value, depth: int = 0):
    """A learner's return value as plain JSON data: numbers, strings, lists; anything else is named
    by its type. (An object whose ``__eq__`` always says yes never reaches the judge.)"""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if value is None:
        return None
    if type(value) in (list, tuple) and depth < 3 and len(value) <= 64:  # exactly: no subclass with its own __eq__
        return [plain(v, depth + 1) for v in value]
    return {"not_plain": type(value).__name__}


class _GpuHold:
    """The worker's side of the step's shared hold on the GPU (``tiers.SharedHold``): each step begins
    with the GPU held for it. Triton's compile hook lets it go (once the kernels launched so far have
    finished) and its post-compile hook takes it back before the kernel launches, so another job's
    timing window waits for this job's launches, not for its compiles (seconds each, CPU only).

    Only the thread that runs the step asks: the socket is that thread's. Everything here is a courtesy
    to the other jobs of a room, like the lock itself: it decides no verdict."""

    def __init__(self, conn):
        self.conn = conn
        self.held = False  # loading the file: the grader takes the GPU only when asked
        self.owner = threading.get_ident()

    def install(self) -> bool:
        try:
            import triton

            runtime_knobs = triton.knobs.runtime
            if not (hasattr(runtime_knobs, "jit_cache_hook") and hasattr(runtime_knobs, "jit_post_compile_hook")):
                return False
            runtime_knobs.jit_cache_hook = self.off
            runtime_knobs.jit_post_compile_hook = self.on
        except Exception:  # a Triton without these hooks: every step keeps the GPU while it compiles
            return False
        from .. import hooks

        # a compile that raised calls no post-compile hook (an autotuner catches it and goes on to the
        # next config): the next launch takes the GPU back first
        hooks.before_run = self.on
        return True

    def begin_step(self) -> None:
        self.held = True  # the grader holds the GPU for each step it sends

    def off(self, *args, **kwargs) -> bool:
        if threading.get_ident() == self.owner and self.held:
            import torch

            if torch.cuda.is_initialized():
                torch.cuda.synchronize()  # nothing of this job runs on the GPU once it is let go
            _send(self.conn, {"kind": "gpu_off"})
            self.held = False
        return False  # Triton's jit_cache_hook: False means "compile it"

    def on(self, *args, **kwargs) -> None:
        if threading.get_ident() == self.owner and not self.held:
            _send(self.conn, {"kind": "gpu_on"})
            reply = _receive(self.conn)
            if reply.get("kind") != "gpu_granted":
                raise RuntimeError(f"the grader answered {reply.get('kind')!r} to a request for the GPU")
            self.held = True


def _start_cuda() -> None:
    """Make this process's CUDA context now, while loading (no kernel runs): a second or so of the
    driver's work that the first case would otherwise do while it holds the GPU."""
    try:
        import torch

        torch.empty(1, device="cuda")
    except Exception:  # the first case meets the same trouble and reports it
        pass


class _Worker:
    def __init__(self, conn, setup: dict):
        self.conn = conn
        self.setup = setup
        self.path = Path(setup["file"])
        self.module = self.entry = None
        self.gpu = setup["mode"] == "gpu"
        self.hold = _GpuHold(conn)
        if self.gpu:
            self.hold.install()

    def load(self) -> None:
        from .. import sources

        try:
            # imported by path, its folder left off sys.path: a file beside it is never imported
            self.module, self.entry = sources.load_file(
                self.path, self.setup["entry"], shown_as=self.setup.get("display"), add_folder=False
            )
        except sources.LoadError as e:
            _send(self.conn, {"kind": "load_failed", "status": e.status, "summary": e.summary, "details": e.details})
            return
        if self.gpu:
            _start_cuda()
        _send(self.conn, {"kind": "loaded"})

    def serve(self) -> None:
        handlers = {
            "case": self.case, "call": self.call, "probe": self.probe,
            "speed": self.speed, "speed_go": self.speed_go, "speed_end": self.speed_end,
        }  # fmt: skip
        while True:
            message = _receive(self.conn)
            kind = message.get("kind")
            if kind == "exit":
                return
            self.hold.begin_step()
            handlers[kind](message)

    # one case of a kernel task -------------------------------------------------------------------

    def case(self, message: dict) -> None:
        from multiprocessing import reduction

        import torch

        from .. import hooks
        from .guards import ALLOWED_IN_LAUNCHER, launcher_torch_guard
        from .shared import MappedCase, dtype_name

        start = time.perf_counter()
        fd = reduction.recv_handle(self.conn)  # the case's file: it has no name to open
        mapped = MappedCase(message["shared"], fd, "cuda" if self.gpu else "cpu")
        outputs = set(self.setup["outputs"])
        kwargs = {}
        for name in message["order"]:
            kwargs[name] = mapped.tensors[name] if name in mapped.tensors else message["values"][name]
        inputs = {k: v for k, v in mapped.tensors.items() if k in kwargs and k not in outputs}
        out_views = {k: v for k, v in mapped.tensors.items() if k in outputs}
        allowed = ALLOWED_IN_LAUNCHER - frozenset(self.setup["forbid"])
        torch_task = bool(self.setup.get("torch_task"))
        # a Gluon task in CPU mode: its kernels run in course_lib.gluon_cpu under the order the grader
        # names (its reads are no interpreter's: the data-flow rule does not see them)
        simulation = message.get("simulation") if self.setup.get("simulated") else None
        flow = hooks.record_flow(inputs, out_views) if not (self.gpu or torch_task or simulation) else None
        guard = contextlib.nullcontext() if torch_task else launcher_torch_guard(allowed, (str(self.path),))
        reply: dict = {"kind": "case_done", "error": None, "launches": [], "flow": None, "returned": None}
        returned = None
        threads = set(threading.enumerate())
        try:
            simulated_runs: list = []  # (kernel name, its programs' schedulers) of each simulated launch
            with hooks.watch_launches() as watch, guard, _simulated(simulation, self.path, simulated_runs):
                if flow is not None:
                    with flow as record:
                        returned = self.entry(**kwargs)
                else:
                    record = None
                    returned = self.entry(**kwargs)
            _raise_caught_refusal(guard)
            if self.gpu:
                torch.cuda.synchronize()
            reply["launches"], reply["launch_count"] = _launch_summary(watch.launches)
            if simulation:
                reply["error"] = _unspecialized(simulated_runs, watch.launches)
            left = [t.name for t in threading.enumerate() if t not in threads and t.is_alive()]
            if left and reply["error"] is None:
                reply["error"] = {
                    "status": "fail",
                    "summary": f"the launcher left {len(left)} thread{'s' * (len(left) != 1)} running "
                    f"({', '.join(left)}): what a thread "
                    "writes after the launcher returns is not the launcher's work",
                    "details": [],
                }
        except BaseException as e:  # learner code: anything can happen, SystemExit included
            reply["error"] = _explain(e, self.path)
            reply["launches"], reply["launch_count"] = _launch_summary(watch.launches if "watch" in locals() else [])
        self.hold.on()  # a compile that failed let the GPU go: the copies back are GPU work
        data = None
        if reply["error"] is None:
            if not outputs:  # the launcher returns its output
                if type(returned) is torch.Tensor:  # exactly: a subclass may say anything of itself
                    t = returned.detach()
                    reply["returned"] = {"dtype": dtype_name(t.dtype), "size": list(t.shape)}
                    if record is not None:
                        record.outputs = {"returned": t}
                        reply["returned"]["unwritten_by_kernel"] = record.unwritten("returned")
                    data = _returned(t, inputs, reply["returned"])
                else:
                    reply["returned"] = {
                        "not_a_tensor": type(returned).__name__,
                        "tensor_subclass": isinstance(returned, torch.Tensor),
                    }
            if record is not None:
                reply["flow"] = {
                    "unread_inputs": record.unread_inputs(),
                    "unread_elements": record.unread_elements(),
                    "unwritten_by_kernel": {name: record.unwritten(name) for name in out_views},
                }
        try:
            mapped.copy_back()
        except BaseException as e:  # a GPU whose context a crashed kernel broke
            if reply["error"] is None:
                reply["error"] = _explain(e, self.path)
        reply["seconds"] = time.perf_counter() - start
        if data is not None and reply["returned"] is not None and "dtype" in reply["returned"]:
            reply["returned"]["has_bytes"] = True
            _send(self.conn, reply, data)
        else:
            _send(self.conn, reply)

    # one question to a task that is no kernel (op_costs) ------------------------------------------

    def call(self, message: dict) -> None:
        from ..stubs import NOT_IMPLEMENTED
        from ..tracebacks import learner_frames

        fn = getattr(self.module, message["function"], None)
        if not callable(fn):
            _send(self.conn, {"kind": "call_done", "missing": True})
            return
        try:
            value = fn(**message["kwargs"])
        except NotImplementedError as e:
            _send(self.conn, {"kind": "call_done", "todo": str(e) or NOT_IMPLEMENTED})
            return
        except BaseException as e:  # learner code
            frames = learner_frames(e, self.path, limit=2)
            _send(self.conn, {"kind": "call_done", "raised": f"{type(e).__name__}: {e}", "frames": frames})
            return
        _send(self.conn, {"kind": "call_done", "value": plain(value)})

    # facts about the module for a task's structural checks (judged by the protected process) ----

    def probe(self, message: dict) -> None:
        import importlib

        module_name, function = message["probe"].split(":")
        probe = getattr(importlib.import_module(module_name), function)
        try:
            facts = run_probe(probe, self.module, self.entry, message.get("seed"))
            _send(self.conn, {"kind": "probe_done", "facts": json.loads(json.dumps(facts))})
        except BaseException as e:  # learner code runs inside the probe
            _send(self.conn, {"kind": "probe_done", "error": _explain(e, self.path)})

    # timed calls (GPU): the grader's clock times them, and judges the output they leave -------------

    def speed(self, message: dict) -> None:
        """Map the timed case's inputs onto the GPU and make one call (compiling what it needs); the
        grader then sends ``speed_go`` windows and times each from outside, and ``speed_end``."""
        from multiprocessing import reduction

        from .. import tasks
        from .guards import ALLOWED_IN_LAUNCHER, launcher_torch_guard
        from .shared import MappedCase

        fd = reduction.recv_handle(self.conn)
        mapped = MappedCase(message["shared"], fd, "cuda" if self.gpu else "cpu")
        outputs = set(self.setup["outputs"])
        kwargs = {name: mapped.tensors.get(name, message["values"].get(name)) for name in message["order"]}
        if message.get("what") == "baseline":  # the grader's own worker only: the torch baseline
            spec = tasks.get(message["task"])
            baseline = spec.baseline or spec.reference
            inputs = {k: v for k, v in kwargs.items() if k not in outputs}
            self.timed = {"mapped": mapped, "call": lambda: baseline(**inputs), "guard": None}
        else:
            allowed = ALLOWED_IN_LAUNCHER - frozenset(self.setup["forbid"])
            torch_task = bool(self.setup.get("torch_task"))
            guard = None if torch_task else (lambda: launcher_torch_guard(allowed, (str(self.path),), False))
            self.timed = {"mapped": mapped, "call": lambda: self.entry(**kwargs), "guard": guard}
        reply = self._timed_calls(1)
        reply["kind"] = "speed_ready"
        _send(self.conn, reply)

    def _timed_calls(self, reps: int) -> dict:
        """``reps`` calls as a user would make them: launches counted, nothing else in their way (the
        launcher torch guard costs the host 50 to 1000 us a call, more than many kernels take). One
        call of the ``reps``, at a place drawn at random, runs under the guard: a launcher that computes
        with torch when it is timed is caught there, even when it catches the guard's error."""
        import secrets

        import torch

        from .. import hooks

        timed = self.timed
        reply: dict = {"error": None, "launch_count": 0}
        guarded_at = secrets.randbelow(reps) if timed["guard"] is not None else -1
        counted = 0
        try:
            with hooks.watch_launches(count_only=True) as watch:
                for i in range(reps):
                    if i != guarded_at:
                        timed["call"]()
                        continue
                    guard = timed["guard"]()
                    with hooks.watch_launches() as full, guard:
                        timed["call"]()
                    counted += len(full.launches)
                    _raise_caught_refusal(guard)
            if self.gpu:
                torch.cuda.synchronize()
            reply["launch_count"] = len(watch.launches) + counted
        except BaseException as e:  # learner code
            reply["error"] = _explain(e, self.path)
        return reply

    def speed_go(self, message: dict) -> None:
        reply = self._timed_calls(int(message["reps"]))
        reply["kind"] = "speed_went"
        _send(self.conn, reply)

    def speed_end(self, message: dict) -> None:
        """The timed calls are over: their tensors are let go (the grader judges one more call, a case)."""
        self.timed = None
        _send(self.conn, {"kind": "speed_done", "error": None, "launch_count": 0})


def _raise_caught_refusal(guard) -> None:
    """The launcher torch guard refused a call that the launcher caught and went past: fail as if it had
    not been caught."""
    from .guards import TorchComputeInLauncher

    violation = getattr(guard, "violation", None)
    if violation is not None:
        raise TorchComputeInLauncher(f"{violation} (The launcher caught this error and went on: it still counts.)")


def run_probe(probe, module, entry, seed: int | None = None):
    """A task's probe of the learner's module (plain facts for its judge). A probe watches what calls do
    (which program stores which tile, how many launches a call makes): in the interpreter, an autotuner
    meeting a new shape keeps its first config there instead of running every config as a trial first,
    work the probe would throw away (grouped_matmul's probe ran four configs on a 1280 x 2432 output
    before its one call) and launches that are not the learner's. The cases still run every config."""
    import inspect

    from .. import interpreter

    takes_seed = "seed" in inspect.signature(probe).parameters
    with interpreter.autotune_trials_skipped():
        return probe(module, entry, seed=seed) if takes_seed and seed is not None else probe(module, entry)


def _set_threads(threads) -> None:
    """torch's thread count, from the grader (its share of the cores): a worker forked from the fork
    server has that server's environment, where OMP_NUM_THREADS may be unset."""
    if threads is None:
        return
    try:
        n = int(threads)
    except (TypeError, ValueError):
        return
    if n > 0:
        os.environ["OMP_NUM_THREADS"] = str(n)
        import torch

        torch.set_num_threads(n)


LOG_LIMIT_BYTES = 256 << 20  # what the worker may print or write to any one file


def main(conn, setup: dict, log_path: str | None) -> None:
    """The worker process's body (started by ``isolation``): unsandboxed, ``log_path`` is where its
    output goes; in the sandbox (``boot``) its output is that file already."""
    for key in [k for k in os.environ if k.startswith("COURSE_HIDDEN") or k == "COURSE_TRACE"]:
        del os.environ[key]  # the hidden cases and the grader's trace are the protected process's business
    if setup.get("nice"):
        try:
            os.nice(int(setup["nice"]))
        except (OSError, ValueError, TypeError):
            pass  # a priority is a courtesy to other jobs, never a reason to fail one
    _set_threads(setup.get("threads"))
    if log_path is not None:
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
    os.chdir(tempfile.gettempdir())
    # numpy's overflow and divide warnings from inside the interpreter (exp(-z) reaching inf on
    # purpose, say) are not something the learner printed: keep them out of "your code printed"
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter")
    _limit_memory(setup.get("memory_bytes"))
    _limit_files(LOG_LIMIT_BYTES)
    # course_lib (imported with this module) installed its hooks before any of the learner's Triton code
    worker = _Worker(conn, setup)
    try:
        worker.load()
        worker.serve()
    except (EOFError, OSError, BrokenPipeError):  # the protected process went away: nothing to report to
        pass
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def boot(fd: int) -> None:
    """The sandboxed worker's entry (``isolation._boot_argv``): its socket is ``fd``, and its first
    message is the setup."""
    from multiprocessing.connection import Connection

    conn = Connection(fd)
    try:
        setup = json.loads(conn.recv_bytes(1 << 20).decode())
    except (EOFError, OSError, ValueError):
        return
    main(conn, setup, None)
