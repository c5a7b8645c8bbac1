"""What course_lib hooks into Triton's launches and, in the interpreter, into every memory access.

* Launch watch: counts Triton kernel launches while a launcher runs (the grader requires at least
  one), in both modes. The grid function and pre-run hooks count as launcher code.
* Memory-access tap (interpreter): every pointer load, store and atomic goes through
  ``InterpreterBuilder.create_masked_load`` / ``create_masked_store`` (their trailing arguments
  differ between Triton 3.6 and 3.9, so the hooks read only the leading ones). The tap checks each
  access against the memory of the tensors passed to the kernel before it touches memory
  (``OutOfBoundsAccess``), and hands it to the ``access_listeners``: the traffic counter
  (``course_lib.traffic``) and the grader's data-flow record (``FlowRecord``) listen there.
* Launch listeners (both modes): ``launch_listeners`` see each kernel launch's arguments just before
  it runs; ``course_lib.tasks.structure`` records them there to compile the kernel as it was launched.
* Tensor descriptors (both modes): a host ``TensorDescriptor`` that breaks TMA's 16-byte rule raises
  ``DescriptorAlignmentError`` with the numbers and the fix, when it is made and again before a
  launch, instead of Triton's bare assertion, a GPU fault or (some versions) silently wrong values.

The interpreter's bug work-arounds live apart, in ``course_lib.interpreter``.
"""

from __future__ import annotations

import ast
import itertools
import linecache
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import runtime


@dataclass(frozen=True)
class ReportLine:
    """One line of an out-of-bounds report: what was seen, and apart from it the generic advice on it (the
    likely causes of an offsets pattern, "add a mask"). A task that knows the cause its exercise makes
    (``TaskSpec.out_of_bounds_hint``) shows the facts without the advice, which could contradict it."""

    fact: str  # a sentence (or several) without its closing full stop
    advice: str = ""  # a whole sentence, or nothing
    joint: str = ". "  # what joins the fact to its advice

    def text(self, advice: bool = True) -> str:
        """The line as a learner reads it; with ``advice`` False, the fact alone."""
        return f"{self.fact}{self.joint}{self.advice}" if advice and self.advice else f"{self.fact}."


class OutOfBoundsAccess(Exception):
    """A kernel loaded or stored outside the memory of every tensor passed to it (interpreter only). Its
    message is the report, line by line; ``lines`` keeps each line's facts and advice apart."""

    def __init__(self, lines: tuple[ReportLine, ...] | list[ReportLine]):
        self.lines = tuple(lines)
        super().__init__("\n".join(line.text() for line in self.lines))

    def __reduce__(self):  # the exception's arguments are its lines, not its message
        return type(self), (self.lines,)


class DescriptorAlignmentError(ValueError):
    """A tensor descriptor whose base, strides or block row are no multiple of 16 bytes (TMA's rule)."""


# --------------------------------------------------------------------------------------------------
# launch watch


@dataclass
class Watch:
    launches: list[str] = field(default_factory=list)
    depth: int = 0  # > 0 while inside a kernel launch
    # only count the launches (a timed call: no argument checks, no listeners, nothing of the launcher's
    # wrapped; each costs the host microseconds that a timed call must not pay)
    count_only: bool = False


_local = threading.local()


def current_watch() -> Watch | None:
    return getattr(_local, "watch", None)


@contextmanager
def watch_launches(count_only: bool = False):
    """Count Triton launches made inside the block: ``with watch_launches() as w: ...; w.launches``."""
    previous = current_watch()
    w = Watch(count_only=count_only)
    _local.watch = w
    try:
        yield w
    finally:
        _local.watch = previous


def _kernel_name(fn_obj) -> str:
    fn = getattr(fn_obj, "fn", None)
    return getattr(fn, "__name__", None) or getattr(fn_obj, "__name__", "kernel")


def _outside_launch(fn, w: Watch):
    """``fn`` runs as launcher code (depth 0), though Triton calls it from inside the launch."""

    def call(*args, **kwargs):
        depth, w.depth = w.depth, 0
        try:
            return fn(*args, **kwargs)
        finally:
            w.depth = depth

    call._course_outside = True  # type: ignore[attr-defined]
    return call


def running_program_index() -> tuple[tuple[int, int, int] | None, list[int] | None]:
    """In the interpreter: the running program's (x, y, z) and the grid; (None, None) where the
    interpreter does not say."""
    from triton.runtime import interpreter

    builder = getattr(interpreter, "interpreter_builder", None)
    index, dims = getattr(builder, "grid_idx", None), getattr(builder, "grid_dim", None)
    if index is None or dims is None:
        return None, None
    return tuple(int(i) for i in index), [int(d) for d in dims]


def running_program() -> tuple[int | None, list[int] | None]:
    """In the interpreter: the running program's number in the interpreter's launch order (x slowest,
    z fastest) and the grid; (None, None) where the interpreter does not say."""
    index, dims = running_program_index()
    if index is None:
        return None, None
    (x, y, z), (_, gy, gz) = index, dims
    return (x * gy + y) * gz + z, dims


def gpu_start_order(index: tuple[int, int, int], dims: list[int]) -> int:
    """The program's place in the order a GPU starts a grid's programs: program_id(0) fastest, then
    program_id(1), then program_id(2) (CUDA's blockIdx.x, y, z), the other way round from the interpreter."""
    (x, y, z), (gx, gy, _) = index, dims
    return x + gx * (y + gy * z)


# Called with (kernel, positional arguments, keyword arguments) just before each launch of a kernel
# (the innermost one: for an autotuned kernel, the launch with the chosen config's values). A listener
# that returns SKIP stops that launch: it does not run (compilation.recorded_launches).
launch_listeners: list = []
SKIP = object()
# Called before each launch through a wrapped ``run`` (the grader's GPU worker: take back its share of
# the GPU if a compile that failed, and was caught, left it let go); None: nothing to call.
before_run = None


def _triton_code(fn) -> bool:
    """Whether ``fn`` is Triton's own (a default hook), not a callable the launcher handed Triton."""
    import triton

    code = getattr(fn, "__code__", None)
    return code is not None and code.co_filename.startswith(str(Path(triton.__file__).parent))


def _guard_host_callables(tuner, w: Watch) -> dict:
    """Make every callable that an autotuner or heuristics object will run on the host during this
    launch run as launcher code (depth 0, under the torch guard): heuristic values, config pre-hooks,
    pre- and post-hooks, config pruning, performance models, a benchmark function. Returns what to
    put back afterwards."""
    saved = {}

    def wrap(fn):
        return fn if fn is None or _triton_code(fn) else _outside_launch(fn, w)

    values = getattr(tuner, "values", None)
    if isinstance(values, dict):
        saved["values"] = values
        tuner.values = {k: wrap(v) for k, v in values.items()}
    for attr in ("pre_hook", "post_hook", "early_config_prune", "perf_model", "_do_bench"):
        fn = getattr(tuner, attr, None)
        if callable(fn) and not _triton_code(fn):
            saved[attr] = fn
            setattr(tuner, attr, wrap(fn))
    for config in getattr(tuner, "configs", None) or []:
        hook = getattr(config, "pre_hook", None)
        if callable(hook):
            saved.setdefault("config_hooks", []).append((config, hook))
            config.pre_hook = wrap(hook)
    return saved


def _restore_host_callables(tuner, saved: dict) -> None:
    for config, hook in saved.pop("config_hooks", []):
        config.pre_hook = hook
    for attr, value in saved.items():
        setattr(tuner, attr, value)


class LaunchArgumentError(TypeError):
    """A kernel launched with an argument Triton would run host code on, or a tensor as a constexpr."""


def _constexpr_names(fn_obj) -> set[str]:
    params = getattr(fn_obj, "params", None)
    if params:
        return {p.name for p in params if getattr(p, "is_constexpr", False)}
    import inspect

    fn = getattr(fn_obj, "fn", None)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return set()
    return {name for name, p in signature.parameters.items() if "constexpr" in str(p.annotation)}


_SCALARS = (bool, int, float, str, type(None))


def _triton_own(cls) -> bool:
    """A class that Triton's own module defines (not a subclass made elsewhere with a borrowed name)."""
    import sys

    module = sys.modules.get(getattr(cls, "__module__", "") or "")
    return module is not None and module.__name__.startswith("triton") and getattr(module, cls.__name__, None) is cls


def _descendants(base) -> list:
    found, pending = [], [base]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


_LAUNCH_TYPES: dict = {}
_TYPE_MODULES = (
    "triton.experimental.gluon.language._layouts", "triton.runtime.interpreter", "triton.tools.tensor_descriptor",
    "triton.experimental.gluon.nvidia.hopper", "triton.experimental.gluon.nvidia.blackwell",
)  # fmt: skip


def _launch_types() -> tuple[frozenset, frozenset]:
    """``_find_launch_types`` once for each set of Triton modules loaded (Gluon's may come later)."""
    import sys

    key = tuple(name in sys.modules for name in _TYPE_MODULES)
    if key not in _LAUNCH_TYPES:
        _LAUNCH_TYPES[key] = _find_launch_types()
    return _LAUNCH_TYPES[key]


def _find_launch_types() -> tuple[frozenset, frozenset]:
    """(the classes a constexpr or any argument may be, the classes a tensor-like argument may be):
    dtypes, constexprs, jit functions, Gluon layouts; tensor descriptors and wrappers. Exactly these
    classes, each defined in Triton's own modules: a subclass of one, or a class that only names a
    Triton module, is none of them."""
    import sys

    import triton
    import triton.language as tl

    values = [tl.constexpr, *_descendants(tl.dtype), *_descendants(triton.JITFunction)]
    tensors = [triton.TensorWrapper]
    interpreter = sys.modules.get("triton.runtime.interpreter")
    if interpreter is not None:
        values.append(interpreter.InterpretedFunction)
    layouts = sys.modules.get("triton.experimental.gluon.language._layouts")
    if layouts is not None:
        values += _descendants(layouts.DistributedLayout) + _descendants(layouts.SharedLayout)
    for name in ("triton.tools.tensor_descriptor", "triton.experimental.gluon.nvidia.hopper",
                 "triton.experimental.gluon.nvidia.blackwell"):  # fmt: skip
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "TensorDescriptor"):
            tensors.append(module.TensorDescriptor)
    return frozenset(c for c in values if _triton_own(c)), frozenset(c for c in tensors if _triton_own(c))


def _plain_value(value, constexpr: bool) -> bool:
    """A launch argument Triton only reads: a number, text, None, a dtype, a Triton object (a layout,
    a jit function), an exact torch.Tensor or a tensor descriptor where a tensor belongs, or a tuple of
    those. Exact classes: a subclass may run code of its own when Triton reads it."""
    import torch

    kind = type(value)
    if kind in _SCALARS or kind is torch.dtype or (kind.__module__ == "numpy" and issubclass(kind, np.generic)):
        return True
    if kind in (tuple, list):
        return all(_plain_value(v, constexpr) for v in value)
    if kind is torch.Tensor:
        return not constexpr
    values, tensors = _launch_types()
    if kind in values:
        inner = getattr(value, "value", None) if kind.__name__ == "constexpr" else None
        return inner is None or _plain_value(inner, True)
    if kind in tensors and not constexpr:
        base = getattr(value, "base", None)
        return type(base) is torch.Tensor
    return False


def check_launch_arguments(fn_obj, args, kwargs) -> None:
    """Before a launch the launcher made: every argument is data Triton only reads (``_plain_value``);
    a tl.constexpr is never a tensor. Anything else (an object whose data_ptr() or __index__ runs
    code, a tensor subclass, a tensor smuggled into the kernel body as a constexpr) is refused."""
    names = list(getattr(fn_obj, "arg_names", []))
    constexprs = _constexpr_names(fn_obj)
    named = [(names[i] if i < len(names) else f"argument {i}", v) for i, v in enumerate(args)]
    named += [(k, v) for k, v in kwargs.items() if k not in ("grid", "warmup")]
    for name, value in named:
        constexpr = name in constexprs or name not in names
        if not _plain_value(value, constexpr):
            what = type(value).__name__
            if constexpr and what == "Tensor":
                raise LaunchArgumentError(
                    f"`{name}` is a tl.constexpr and was given a tensor: a constexpr is a number, a dtype or a "
                    "string, known when the kernel is compiled; pass tensors as ordinary (pointer) arguments"
                )
            raise LaunchArgumentError(
                f"`{name}` was given a {what}: a kernel's arguments are torch.Tensor objects (exactly, not a "
                "subclass), tensor descriptors, numbers, dtypes, strings or None"
            )


def _wrap_run(cls, bounds: bool = True) -> None:
    """Count launches of ``cls`` (outermost only) and, in the interpreter, check their bounds.

    Wrapping an outer launcher (the autotuner) too makes its benchmarking part of one launch: its
    torch calls (do_bench flushes L2 with torch) are then Triton's business, not the launcher's. What
    it runs of the launcher's own (heuristics, hooks, pruning) stays launcher code."""
    if getattr(cls.run, "_course_wrapped", False):
        return
    original = cls.run

    def run(self, *args, **kwargs):
        if before_run is not None:
            before_run()
        w = current_watch()
        if w is not None and w.depth == 0 and not kwargs.get("warmup", False):
            w.launches.append(_kernel_name(self))
        if w is not None and w.count_only:
            w.depth += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                w.depth -= 1
        hooks = getattr(self, "pre_run_hooks", None)
        saved = None
        if w is not None:
            # the grid function and pre-run hooks are the learner's code, though Triton calls them
            if callable(kwargs.get("grid")):
                kwargs["grid"] = _outside_launch(kwargs["grid"], w)
            if hooks:
                self.pre_run_hooks = [_outside_launch(h, w) for h in hooks]
            if not bounds:
                saved = _guard_host_callables(self, w)
            w.depth += 1
        try:
            if bounds:  # the class that really launches (JITFunction, InterpretedFunction)
                if w is not None:
                    check_launch_arguments(self, args, kwargs)
                check_descriptor_arguments(self, args, kwargs)
                answers = [listener(self, args, kwargs) for listener in list(launch_listeners)]
                if any(answer is SKIP for answer in answers):
                    return None
            if bounds and runtime.is_cpu():
                with _bounds_for_launch(self, args, kwargs):
                    return original(self, *args, **kwargs)
            return original(self, *args, **kwargs)
        finally:
            if w is not None:
                w.depth -= 1
                if hooks:
                    self.pre_run_hooks = hooks
                if saved:
                    _restore_host_callables(self, saved)

    run._course_wrapped = True  # type: ignore[attr-defined]
    LAUNCH_CODES.add(run.__code__)
    cls.run = run


# The code of the wrapped launches: a torch call whose innermost frame of interest is one of these is
# Triton's own work inside a launch; one whose innermost is the learner's file is launcher code.
LAUNCH_CODES: set = set()
OUTSIDE_CODE = _outside_launch(lambda: None, Watch()).__code__


def called_from_launcher(frame, learner_files: frozenset[str]) -> bool:
    """Whether the code running at ``frame`` is the launcher's (the learner's file, or a callable it
    handed Triton), rather than Triton's own work inside a launch: the innermost frame that is either
    a launch or the learner's decides."""
    while frame is not None:
        code = frame.f_code
        if code in LAUNCH_CODES:
            return False
        if code is OUTSIDE_CODE or code.co_filename in learner_files:
            return True
        frame = frame.f_back
    return True


# --------------------------------------------------------------------------------------------------
# tensor descriptors: TMA's 16-byte rule, checked before the GPU (or the interpreter) sees them

TMA_ALIGN = 16  # bytes: TMA reads a tensor's base, its row strides and a block's rows in 16-byte units


def descriptor_problems(desc) -> list[str]:
    """What breaks TMA's 16-byte rule in a host tensor descriptor: [] when nothing does."""
    base = desc.base
    itemsize = base.element_size()
    problems = []
    address = base.data_ptr()
    if address % TMA_ALIGN:
        problems.append(
            f"the base address is {address % TMA_ALIGN} bytes past a multiple of 16 (a view that starts "
            f"{base.storage_offset()} element{'s' * (base.storage_offset() != 1)} into its buffer)"
        )
    strides = [int(s) for s in desc.strides]
    for dim, stride in enumerate(strides[:-1]):
        if stride * itemsize % TMA_ALIGN:
            problems.append(
                f"the stride of dimension {dim} is {stride} elements = {stride * itemsize} bytes, not a multiple "
                f"of 16 ({stride * itemsize} = 16 * {stride * itemsize // 16} + {stride * itemsize % 16})"
            )
    if strides and strides[-1] != 1:
        problems.append(f"the last dimension's stride is {strides[-1]}, not 1: its elements must be contiguous")
    row = int(desc.block_shape[-1]) * itemsize
    if row % TMA_ALIGN:
        problems.append(
            f"the block's last dimension is {desc.block_shape[-1]} elements = {row} bytes, not a multiple of 16"
        )
    return problems


def _padded_length(n: int, itemsize: int) -> int:
    step = TMA_ALIGN // itemsize if TMA_ALIGN % itemsize == 0 else TMA_ALIGN
    return -(-n // step) * step


def descriptor_message(desc, problems: list[str], name: str | None = None) -> str:
    base = desc.base
    itemsize = base.element_size()
    shape = tuple(int(s) for s in desc.shape)
    strides = tuple(int(s) for s in desc.strides)
    dtype = str(base.dtype).replace("torch.", "")
    what = f"`{name}`, a " if name else "a "
    lines = [
        f"{what}TensorDescriptor breaks TMA's 16-byte rule: tensor shape {shape}, {dtype} ({itemsize} bytes), "
        f"strides in bytes {tuple(s * itemsize for s in strides)}, block {tuple(int(b) for b in desc.block_shape)}.",
        "TMA needs the base address, every stride but the last (which is 1) and the block's last dimension "
        "in bytes to be multiples of 16. Here " + "; ".join(problems) + ".",
    ]
    if len(shape) >= 2 and any(s * itemsize % TMA_ALIGN for s in strides[:-1]):
        n = shape[-1]
        padded = _padded_length(n, itemsize)
        lines.append(
            f"Fix: pad the leading dimension. Store the rows {padded} elements apart ({padded * itemsize} bytes) "
            f"instead of {strides[-2]}: buf = torch.zeros(..., {padded}, dtype=torch.{dtype}); t = buf[..., :{n}]; "
            "then copy the data into t (the padding stays zero) and build the descriptor on t."
        )
    elif desc.base.data_ptr() % TMA_ALIGN:
        lines.append("Fix: start the tensor at a 16-byte boundary (a fresh allocation, or .clone() of the view).")
    else:
        lines.append("Fix: make the block's last dimension at least 16 bytes (e.g. 8 fp16 or 4 fp32 elements).")
    lines.append(
        "On a GPU a kernel given such a descriptor faults (illegal instruction) or, in some versions, reads "
        "wrong values without a word: the course stops it before the launch."
    )
    return "\n".join(lines)


def check_descriptor(desc, name: str | None = None) -> None:
    """Raise DescriptorAlignmentError when ``desc`` (a host TensorDescriptor) breaks TMA's 16-byte rule."""
    base = getattr(desc, "base", None)
    if not hasattr(base, "data_ptr") or type(base).__name__ in ("FakeTensor", "FunctionalTensor"):
        return
    problems = descriptor_problems(desc)
    if problems:
        raise DescriptorAlignmentError(descriptor_message(desc, problems, name))


def _is_descriptor(value) -> bool:
    return type(value).__name__ == "TensorDescriptor" and hasattr(value, "block_shape") and hasattr(value, "strides")


def check_descriptor_arguments(fn_obj, args, kwargs) -> None:
    """Before a launch: every TensorDescriptor argument keeps TMA's 16-byte rule (else raise)."""
    names = list(getattr(fn_obj, "arg_names", []))
    for i, value in enumerate(args):
        if _is_descriptor(value):
            check_descriptor(value, names[i] if i < len(names) else None)
    for key, value in kwargs.items():
        if _is_descriptor(value):
            check_descriptor(value, key)


def _checked_post_init(original):
    def __post_init__(self):
        check_descriptor(self)  # the course's message first, then Triton's own checks
        original(self)

    __post_init__._course_wrapped = True  # type: ignore[attr-defined]
    return __post_init__


def _install_descriptor_check() -> None:
    """Make TensorDescriptor's constructor check the 16-byte rule with the course's message. (Gluon's
    descriptors, imported only by Gluon code, are checked before their launch, like any other.)"""
    from triton.tools.tensor_descriptor import TensorDescriptor

    original = TensorDescriptor.__post_init__
    if not getattr(original, "_course_wrapped", False):
        TensorDescriptor.__post_init__ = _checked_post_init(original)


# --------------------------------------------------------------------------------------------------
# out-of-bounds checking in the interpreter


@dataclass(frozen=True)
class _Span:
    name: str
    lo: int  # first byte
    hi: int  # one past the last byte
    base: int  # data_ptr
    itemsize: int
    numel: int
    dtype: str
    shape: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()  # in elements


@dataclass
class _Launch:
    kernel: str
    spans: list[_Span]
    starts: np.ndarray  # merged, sorted intervals for the membership test
    ends: np.ndarray
    sites: dict = field(default_factory=dict)  # (code, line) -> _Site: each tl.load/tl.store's last run
    number: int = field(default_factory=lambda: next(_launches_made))  # this process's launches, in order


_launches_made = itertools.count()
_launch_stack: list[_Launch] = []
_unmasked = threading.local()


def _tensor_span(name: str, t) -> _Span | None:
    if not hasattr(t, "data_ptr") or not hasattr(t, "stride"):
        return None
    if t.numel() == 0:
        return None
    itemsize = t.element_size()
    lo = sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if st < 0)
    hi = sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if st > 0)
    base = t.data_ptr()
    return _Span(
        name, base + lo * itemsize, base + (hi + 1) * itemsize, base, itemsize, t.numel(), str(t.dtype),
        tuple(int(d) for d in t.shape), tuple(int(st) for st in t.stride()),
    )  # fmt: skip


def _collect_spans(name: str, value, out: list[_Span]) -> None:
    if isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _collect_spans(f"{name}[{i}]", v, out)
        return
    base = getattr(value, "base", None)  # host TensorDescriptor
    if base is not None and hasattr(value, "block_shape"):
        value = base
    inner = getattr(value, "base", None)  # triton TensorWrapper (reinterpret)
    if inner is not None and hasattr(inner, "data_ptr") and not hasattr(value, "stride"):
        value = inner
    span = _tensor_span(name, value)
    if span is not None:
        out.append(span)


@contextmanager
def _bounds_for_launch(fn_obj, args, kwargs):
    names = list(getattr(fn_obj, "arg_names", [])) or [f"arg{i}" for i in range(len(args))]
    spans: list[_Span] = []
    for i, value in enumerate(args):
        _collect_spans(names[i] if i < len(names) else f"arg{i}", value, spans)
    for key, value in kwargs.items():
        if key not in ("grid", "warmup"):
            _collect_spans(key, value, spans)
    intervals = sorted((s.lo, s.hi) for s in spans)
    merged: list[list[int]] = []
    for lo, hi in intervals:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    starts = np.array([m[0] for m in merged], dtype=np.uint64)
    ends = np.array([m[1] for m in merged], dtype=np.uint64)
    _launch_stack.append(_Launch(_kernel_name(fn_obj), spans, starts, ends))
    try:
        yield
    finally:
        _launch_stack.pop()


# What the offending offsets say. Their pattern, set against the tensor's extent and strides and the
# block's own steps, points at the likely bug: a run just past the end (a tail), offsets before the
# start, a stride pattern, or a whole block far past the end. A pure function, so that tests can feed
# it made-up offsets.

ONE_PAST, TAIL, BEFORE, STRIDE, FAR, BOTH_SIDES = (
    "one past the end", "tail", "before the start", "stride", "far past the end", "both sides",
)  # fmt: skip


@dataclass(frozen=True)
class LoopEvidence:
    """The same tl.load/tl.store ran before in this program with the same mask, its pointers moved on."""

    runs: int  # earlier runs with that mask
    step: int  # elements the pointers moved on from one run to the next


@dataclass(frozen=True)
class OffsetsPattern:
    """What a set of out-of-bounds offsets shows (``kind``, ``seen``) and its likely causes, in order."""

    kind: str
    seen: str
    causes: tuple[str, ...]

    def line(self) -> ReportLine:
        """What was seen as the fact, the likely causes as its advice."""
        if len(self.causes) == 1:
            return ReportLine(f"Seen: {self.seen}", f"Likely cause: {self.causes[0]}.")
        listed = "; ".join(f"({i}) {cause}" for i, cause in enumerate(self.causes, 1))
        return ReportLine(f"Seen: {self.seen}", f"Likely causes, most likely first: {listed}.")

    def text(self) -> str:
        return self.line().text()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def _runs(values: np.ndarray) -> list[tuple[int, int]]:
    """(first, length) of each run of consecutive integers in sorted unique ``values``."""
    breaks = np.flatnonzero(np.diff(values) != 1) + 1
    return [(int(run[0]), int(run.size)) for run in np.split(values, breaks)]


def _axis_steps(offsets: np.ndarray, active: np.ndarray) -> list[tuple[int, int, int, int]]:
    """(axis, step in elements, positions the mask kept along it, length) for each axis of the block
    longer than one. The step is the commonest one between neighbouring active lanes (a row index
    taken modulo M wraps round once in a while)."""
    found = []
    for axis, length in enumerate(offsets.shape):
        if length < 2:
            continue
        head = tuple(slice(1, None) if i == axis else slice(None) for i in range(offsets.ndim))
        tail = tuple(slice(None, -1) if i == axis else slice(None) for i in range(offsets.ndim))
        diffs = offsets[head] - offsets[tail]
        both = active[head] & active[tail]
        values, counts = np.unique(diffs[both] if both.any() else diffs, return_counts=True)
        others = tuple(i for i in range(offsets.ndim) if i != axis)
        kept = int(np.any(active, axis=others).sum()) if others else int(active.sum())
        found.append((axis, int(values[counts.argmax()]), kept, length))
    return found


def _stride_finding(offsets: np.ndarray, active: np.ndarray, shape, strides, name: str) -> tuple[str, bool] | None:
    """(what the block's steps show, whether two dimensions look swapped), when a step is no stride
    of the tensor or pairs one dimension's stride with another dimension's bound; else None."""
    dims = [(j, n, abs(st)) for j, (n, st) in enumerate(zip(shape, strides)) if n > 1]
    if not dims:
        return None
    known = {abs(st) for st in strides}
    for axis, step, kept, length in _axis_steps(offsets, active):
        if step == 0:
            continue
        if abs(step) not in known:
            return (
                f"a stride pattern: the pointers step {step} elements along axis {axis} of the block, and no "
                f"dimension of `{name}` (shape {tuple(shape)}) has that stride: its strides are {tuple(strides)}"
            ), False
        if offsets.ndim < 2 or kept == length:
            continue
        for j, n, st in dims:
            if st == abs(step) and kept > n and any(kept == m for i, m, _ in dims if i != j):
                other = next(i for i, m, _ in dims if i != j and m == kept)
                return (
                    f"a stride pattern: along axis {axis} of the block the pointers step {step} elements, the stride "
                    f"of dimension {j} of `{name}` (shape {tuple(shape)}, strides {tuple(strides)}), but the mask "
                    f"lets {kept} positions through there, the size of dimension {other}"
                ), True
    return None


def _periodic(gone: np.ndarray, strides) -> str | None:
    """Runs of equal length repeating at a period that is no stride of the tensor, else None."""
    runs = _runs(gone)
    if len(runs) < 3:
        return None
    periods = {b[0] - a[0] for a, b in zip(runs, runs[1:])}
    lengths = {length for _, length in runs}
    if len(periods) != 1 or len(lengths) != 1:
        return None
    period = periods.pop()
    if period in {abs(st) for st in strides}:
        return None  # rows past the last row: a tail in a second dimension
    return f"a stride pattern: runs of {lengths.pop()} every {period} elements, and {period} is no stride of the tensor"


_INT32_WRAP = "an int32 product that wrapped round (rows * stride past 2**31): cast the index to tl.int64"
_SWAPPED = "strides swapped: each index times the other dimension's stride (rows * stride_xn + cols * stride_xm)"
_ROW_LENGTH = (
    "a row length used as a stride (n_cols where x.stride(0) belongs: a view of wider rows has a larger one), "
    "or another tensor's stride"
)


def _loop_cause(loop: LoopEvidence | None) -> str:
    if loop is None:
        return (
            "in a loop, a mask that leaves out the loop's offset (ks < K where k0 + ks < K belongs): "
            "the pointers move on each step and the mask does not"
        )
    return (
        f"a loop's mask that leaves out the loop's offset: this access ran {_plural(loop.runs, 'time')} before "
        f"in this program with the same mask while its pointers moved on {loop.step} elements a step; the "
        "mask must move with them (k0 + ks < K, or ks < K - k0)"
    )


def offsets_pattern(
    offsets,
    shape,
    strides,
    active=None,
    bad=None,
    *,
    name: str = "the tensor",
    masked: bool = True,
    loop: LoopEvidence | None = None,
    program: tuple | None = None,
    grid: tuple | None = None,
    in_loop: bool | None = None,
) -> OffsetsPattern:
    """Classify the lanes of one access that left a tensor.

    ``offsets``: every lane's offset in elements from the tensor's first element (data_ptr), in the
    block's shape; ``active``: the lanes the mask let through; ``bad``: the active lanes outside
    (default: outside this tensor's extent, from ``shape`` and ``strides`` in elements); ``masked``:
    whether the access had a mask; ``loop``: evidence that it runs in a loop whose mask stays put;
    ``in_loop``: whether its source line sits in a loop (None: not known)."""
    loops = in_loop is not False or loop is not None
    offsets = np.asarray(offsets, dtype=np.int64)
    active = np.broadcast_to(np.ones((), bool) if active is None else np.asarray(active, bool), offsets.shape)
    first = sum((n - 1) * st for n, st in zip(shape, strides) if st < 0)
    last = sum((n - 1) * st for n, st in zip(shape, strides) if st > 0)
    if bad is None:
        bad = active & ((offsets < first) | (offsets > last))
    gone = np.unique(offsets[np.broadcast_to(np.asarray(bad, bool), offsets.shape)])
    if gone.size == 0:
        raise ValueError("no offset outside the tensor")
    count = _plural(int(gone.size), "offset")
    below = gone < first

    if below.all():
        seen = f"{count} before the start of `{name}`, the lowest {int(gone[0])}"
        causes = [
            "a subtraction in the offsets: offsets - 1, or (pid - 1) * BLOCK_SIZE, which is negative for program 0",
            "a pointer moved back under a right mask (x_ptr - 1 + offsets, or a pointer stepped back in a loop)",
        ]
        if gone[0] < -(2**30):
            causes.insert(0, _INT32_WRAP)
        return OffsetsPattern(BEFORE, seen, tuple(causes))
    if below.any():
        seen = f"{count} on both sides of `{name}`, from {int(gone[0])} to {int(gone[-1])}"
        causes = ("another tensor's or dimension's strides or sizes in the offsets (strides swapped?)", _INT32_WRAP)
        return OffsetsPattern(BOTH_SIDES, seen, causes)

    finding = _stride_finding(offsets, active, shape, strides, name)
    periodic = None if finding else _periodic(gone, strides)
    if finding or periodic:
        swapped = bool(finding and finding[1])
        causes = [_SWAPPED, _ROW_LENGTH] if swapped else [_ROW_LENGTH, _SWAPPED]
        causes.append("the wrong stride for a dimension in the launcher (x.stride(1) passed for stride_xm)")
        seen = finding[0] if finding else f"{count} past the end of `{name}`, {periodic}"
        return OffsetsPattern(STRIDE, seen, tuple(causes))

    lanes = int(np.asarray(bad).sum())
    if lanes == int(active.sum()) or int(gone[0]) - last > offsets.size:
        seen = (
            f"every lane it let through lies past the end of `{name}`: {count} from {int(gone[0])}, where its last "
            f"element is {last}"
        )
        where = f"program {program} of a grid of {grid}" if program is not None and grid is not None else "a program"
        causes = [
            f"a grid with more programs than the data needs: {where} starts past the end (a grid sized by another "
            "dimension, by elements instead of blocks, or triton.cdiv(n, BLOCK) + 1)",
            "a program's start built with the wrong multiplier or stride (pid * BLOCK_SIZE for blocks of another "
            "size, pid * another tensor's stride)",
        ]
        if loop:
            causes.insert(0, _loop_cause(loop))
        elif loops:
            causes.append("a loop that runs past the data (its offset left out of a mask, or a bound past K)")
        return OffsetsPattern(FAR, seen, tuple(causes))

    runs = _runs(gone)
    if gone.size == 1 and int(gone[0]) == last + 1:
        seen = f"one offset just past the end of `{name}`: {int(gone[0])}, where its last element is {last}"
        causes = [
            "a mask that keeps one offset too many: <= where < belongs (offsets <= n_elements)",
            "a pointer shifted by one under a right mask (x_ptr + offsets + 1)",
            "a bound one too large from the launcher (n_elements + 1)",
        ]
        if loop:
            causes.insert(0, _loop_cause(loop))
        return OffsetsPattern(ONE_PAST, seen, tuple(causes))
    if len(runs) == 1:
        seen = f"a run of {count} just past the end of `{name}`, {int(gone[0])} to {int(gone[-1])}"
    else:
        seen = f"{count} past the end of `{name}` in {len(runs)} runs: rows past its last row"
    seen += f", where its last element is {last}"
    if not masked:
        causes = ["no mask: the last block sticks out past the end, and every lane of it goes to memory"]
    else:
        causes = [
            "a mask that tests other offsets than the pointers use (tl.arange(0, BLOCK) < n where offsets < n "
            "belongs), or another dimension's bound",
        ]
        if loops:
            causes.insert(1 - bool(loop), _loop_cause(loop))
        if offsets.ndim >= 2:
            causes.append("a 2-D block masked in one dimension only, where it sticks out in both (rows < M, cols < N)")
    return OffsetsPattern(TAIL, seen, tuple(causes))


def _format_offsets(values: np.ndarray, limit: int = 8) -> str:
    shown = ", ".join(str(int(v)) for v in values[:limit])
    return shown + (f", ... ({len(values)} in all)" if len(values) > limit else "")


# --------------------------------------------------------------------------------------------------
# where in the kernel: the line of the offending tl.load/tl.store and its mask


@dataclass
class _Site:
    program: tuple
    first: int  # address of the block's first lane
    mask: np.ndarray | None
    runs: int = 0
    step: int = 0


_OWN_FILES: tuple[str, ...] = ()


def _kernel_frame():
    """The innermost frame of the kernel's own code (or a @triton.jit function it called): the line that
    made this load or store. None outside a kernel."""
    global _OWN_FILES
    if not _OWN_FILES:
        import triton

        _OWN_FILES = (str(Path(triton.__file__).parent), __file__)
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_OWN_FILES):
        frame = frame.f_back
    return frame


def _note_site(launch: _Launch, site, program: tuple, first: int, mask, itemsize: int) -> LoopEvidence | None:
    """Remember this access at its line; evidence of a loop whose mask stays while the pointers move."""
    if site is None:
        return None
    before = launch.sites.get(site)
    runs = step = 0
    if before is not None and before.program == program and mask is not None and before.mask is not None:
        moved = (first - before.first) // itemsize
        if moved and before.mask.shape == mask.shape and np.array_equal(before.mask, mask):
            runs, step = before.runs + 1, moved
    launch.sites[site] = _Site(program, first, mask, runs, step)
    return LoopEvidence(runs, step) if runs else None


_MASK_ARGUMENT = {"load": 1, "store": 2, "atomic_add": 2, "atomic_and": 2, "atomic_max": 2, "atomic_min": 2,
                  "atomic_or": 2, "atomic_xchg": 2, "atomic_xor": 2, "atomic_cas": None}  # fmt: skip


def _short(text: str, limit: int = 110) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _source_of(frame) -> tuple[str, str, str | None, bool | None] | None:
    """(file and line, the call's source, what its mask is, whether it sits in a loop) for the
    tl.load/tl.store that ``frame`` is running; None where the source cannot be read."""
    filename, lineno = frame.f_code.co_filename, frame.f_lineno
    lines = linecache.getlines(filename)
    if not lines or not 0 < lineno <= len(lines):
        return None
    place = f"{Path(filename).name} line {lineno}"
    source = "".join(lines)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return place, _short(lines[lineno - 1].split("#")[0]), None, None
    calls = [
        node for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MASK_ARGUMENT
        and node.lineno <= lineno <= (node.end_lineno or node.lineno)
    ]  # fmt: skip
    if not calls:
        return place, _short(lines[lineno - 1].split("#")[0]), None, None
    call = min(calls, key=lambda node: (node.end_lineno or node.lineno) - node.lineno)
    position = _MASK_ARGUMENT[call.func.attr]
    mask = next((k.value for k in call.keywords if k.arg == "mask"), None)
    if mask is None and position is not None and len(call.args) > position:
        mask = call.args[position]
    functions = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and f.lineno <= call.lineno <= (f.end_lineno or f.lineno)]  # fmt: skip
    scope = min(functions, key=lambda f: (f.end_lineno or f.lineno) - f.lineno) if functions else tree
    in_loop = any(
        isinstance(node, (ast.For, ast.While)) and node.lineno <= call.lineno <= (node.end_lineno or node.lineno)
        for node in ast.walk(scope)
    )
    described = None
    if isinstance(mask, ast.Name):  # the mask's last assignment above the call, in the same function
        described = f"`{mask.id}`"
        assigned = [
            node for node in ast.walk(scope)
            if isinstance(node, ast.Assign) and node.lineno < call.lineno
            and any(isinstance(t, ast.Name) and t.id == mask.id for t in node.targets)
        ]  # fmt: skip
        if assigned:
            value = max(assigned, key=lambda node: node.lineno).value
            described += f" = `{_short(ast.get_source_segment(source, value) or '')}`"
    return place, _short(ast.get_source_segment(source, call) or lines[lineno - 1]), described, in_loop


# Called with (kind, kernel name, addresses, active mask, itemsize) for every load and store the
# interpreter makes inside a launch; course_lib.traffic listens here. While a listener runs,
# ``access_program()`` names the program making the access.
access_listeners: list = []
# Called with (the shape of a, the shape of b) for every tl.dot the interpreter computes inside a launch, with
# ``access_program()`` naming the program: a probe can count the work a kernel does, not just what it reads.
dot_listeners: list = []
_access = threading.local()


def access_program() -> tuple | None:
    """(the launch's number in this process, the program id) of the access the listeners are told of."""
    return getattr(_access, "program", None)


def _check_access(kind: str, builder, ptrs, mask) -> None:
    if not _launch_stack:
        return
    launch = _launch_stack[-1]
    addresses = np.asarray(ptrs.data).astype(np.uint64)
    if mask is None:
        active_mask = np.ones(addresses.shape, dtype=bool)
    else:
        active_mask = np.broadcast_to(np.asarray(getattr(mask, "data", mask)).astype(bool), addresses.shape)
    itemsize = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
    pid = tuple(int(v) for v in getattr(builder, "grid_idx", (0, 0, 0)))
    _access.program = (launch.number, pid)
    try:
        for listener in access_listeners:
            listener(kind, launch.kernel, addresses, active_mask, itemsize)
    finally:
        _access.program = None
    frame = _kernel_frame()
    site = (frame.f_code, frame.f_lineno) if frame is not None else None
    first = int(addresses.reshape(-1)[0]) if addresses.size else 0
    loop = _note_site(launch, site, pid, first, None if mask is None else active_mask, itemsize)
    active = addresses[active_mask]
    if active.size == 0:
        return
    if launch.starts.size:
        idx = np.searchsorted(launch.starts, active, side="right").astype(np.int64) - 1
        inside = idx >= 0
        safe_idx = np.where(inside, idx, 0)
        inside &= (active + np.uint64(itemsize)) <= launch.ends[safe_idx]
    else:
        inside = np.zeros(active.shape, dtype=bool)
    if inside.all():
        return
    bad = active[~inside]
    unmasked = getattr(_unmasked, "flag", False)
    lines = [
        ReportLine(
            f"kernel `{launch.kernel}`, program id {pid}: a {kind} outside the memory of every tensor passed "
            f"to the kernel ({bad.size} of {active.size} active lanes). The course stopped it before it "
            "touched memory"
        )
    ]
    advice = "Check how the offsets are built and what the mask keeps out (and the grid size)."
    source = _source_of(frame) if frame is not None else None
    if launch.spans:
        first_bad = int(bad[0])
        nearest = min(launch.spans, key=lambda s: min(abs(first_bad - s.lo), abs(first_bad - (s.hi - 1))))
        offsets = (bad.astype(np.int64) - np.int64(nearest.base)) // np.int64(nearest.itemsize)
        lines.append(
            ReportLine(
                f"Nearest tensor: `{nearest.name}` ({_plural(nearest.numel, 'element')} of {nearest.dtype}, shape "
                f"{nearest.shape}); the offending offsets, in elements from its start: "
                f"{_format_offsets(np.unique(offsets))}"
            )
        )
        bad_lanes = np.zeros(addresses.shape, dtype=bool)
        bad_lanes[active_mask] = ~inside
        every = (addresses.astype(np.int64) - np.int64(nearest.base)) // np.int64(nearest.itemsize)
        grid = getattr(builder, "grid_dim", None)
        pattern = offsets_pattern(
            every, nearest.shape, nearest.strides, active_mask, bad_lanes, name=nearest.name, masked=not unmasked,
            loop=loop, program=pid, grid=tuple(int(d) for d in grid) if grid is not None else None,
            in_loop=source[3] if source else None,
        )  # fmt: skip
        lines.append(pattern.line())
        advice = ""
    where = f" ({source[0]}, `{source[1]}`)" if source else ""
    if unmasked:
        lines.append(
            ReportLine(
                f"The tl.{kind} had no mask{where}",
                "add one that keeps its offsets inside the tensor, e.g. mask=offsets < n_elements, or "
                "mask=cols < n_cols for a vector of columns.",
                joint=": ",
            )
        )
    else:
        used = f", with mask {source[2]}" if source and source[2] else ""
        lines.append(
            ReportLine(
                f"The mask let {int(active_mask.sum())} of {active_mask.size} lanes through, {bad.size} of them "
                f"outside every tensor{where}{used}",
                advice,
            )
        )
    raise OutOfBoundsAccess(lines)


def _install_bounds_hooks(builder_cls) -> None:
    if getattr(builder_cls, "_course_bounds", False):
        return
    masked_load = builder_cls.create_masked_load
    masked_store = builder_cls.create_masked_store
    plain_load = builder_cls.create_load
    plain_store = builder_cls.create_store
    atomic_rmw = builder_cls.create_atomic_rmw
    atomic_cas = builder_cls.create_atomic_cas

    def create_masked_load(self, ptrs, mask, *rest, **kw):
        _check_access("load", self, ptrs, mask)
        return masked_load(self, ptrs, mask, *rest, **kw)

    def create_masked_store(self, ptrs, value, mask, *rest, **kw):
        _check_access("store", self, ptrs, mask)
        return masked_store(self, ptrs, value, mask, *rest, **kw)

    def _unmasked_call(original):
        def call(self, *args, **kw):
            _unmasked.flag = True
            try:
                return original(self, *args, **kw)
            finally:
                _unmasked.flag = False

        return call

    def create_atomic_rmw(self, op, ptr, val, mask, *rest, **kw):
        _check_access("atomic", self, ptr, mask)
        return atomic_rmw(self, op, ptr, val, mask, *rest, **kw)

    def create_atomic_cas(self, ptr, cmp, val, *rest, **kw):
        _check_access("atomic", self, ptr, None)
        return atomic_cas(self, ptr, cmp, val, *rest, **kw)

    builder_cls.create_masked_load = create_masked_load
    builder_cls.create_masked_store = create_masked_store
    builder_cls.create_load = _unmasked_call(plain_load)
    builder_cls.create_store = _unmasked_call(plain_store)
    builder_cls.create_atomic_rmw = create_atomic_rmw
    builder_cls.create_atomic_cas = create_atomic_cas
    descriptor_store = getattr(builder_cls, "create_descriptor_store", None)
    if descriptor_store is not None:

        def create_descriptor_store(self, desc, value, indices, *rest, **kw):
            problem = tma_store_tail(desc, indices)
            if problem:
                raise DescriptorAlignmentError(problem)
            return descriptor_store(self, desc, value, indices, *rest, **kw)

        builder_cls.create_descriptor_store = create_descriptor_store
    builder_cls._course_bounds = True


def _first(handle) -> int:
    return int(np.asarray(getattr(handle, "data", handle)).reshape(-1)[0])


def tma_store_tail(desc, indices) -> str | None:
    """What a GPU would do that the interpreter does not: a TMA store writes whole 16-byte chunks, so a
    block that reaches past the end of a row whose length is no multiple of 16 bytes overwrites the
    elements after the row's end, up to the next 16-byte boundary (Triton issue #11583). The message
    for such a store, or None (also when the descriptor cannot be read: then nothing is claimed)."""
    try:
        itemsize = max(1, desc.base.dtype.element_ty.primitive_bitwidth // 8)
        shape = [_first(d) for d in desc.shape]
        start = [_first(i) for i in indices]
        block = [int(b) for b in desc.block_shape]
    except Exception:
        return None
    inner, first, width = shape[-1], start[-1], block[-1]
    row_bytes = inner * itemsize
    if row_bytes % 16 == 0 or not first < inner < first + width:
        return None
    if not all(lo < size and lo + b > 0 for lo, size, b in zip(start[:-1], shape[:-1], block[:-1])):
        return None  # no row of the block lies inside the tensor: nothing is written
    boundary = -(-row_bytes // 16) * 16 // itemsize
    dtype = str(desc.base.dtype.element_ty)
    return (
        f"a tensor-descriptor store reaches past the end of rows of {inner} {dtype} elements ({row_bytes} bytes, "
        f"no multiple of 16): on a GPU a TMA store writes whole 16-byte chunks, so this one would overwrite "
        f"elements {inner} to {boundary - 1} after each row's end (the padding between rows, or another tensor)\n"
        f"The interpreter clips the store at the row's end, the GPU does not (Triton issue #11583): the course "
        f"checks it here so that CPU mode gives the GPU's verdict.\n"
        f"Fix: store a row's last, partial block with a masked pointer store (tl.store(..., mask=cols < n_cols)), "
        f"or use descriptor stores only where a row's length in bytes is a multiple of 16; loads are not affected."
    )


# --------------------------------------------------------------------------------------------------
# data flow: which inputs a kernel read and which output elements a kernel wrote (interpreter)


def element_addresses(t) -> np.ndarray:
    """The byte address of every element of a (possibly strided) tensor, in row-major order."""
    addresses = np.zeros((1,), dtype=np.int64)
    for size, stride in zip(t.shape, t.stride()):
        addresses = (addresses[:, None] + np.arange(size, dtype=np.int64)[None, :] * stride).reshape(-1)
    return (addresses * t.element_size() + t.data_ptr()).astype(np.uint64)


class FlowRecord:
    """Listens to every load and store of the kernels launched while it is attached (see ``record_flow``).

    A launcher that computes the answer with torch (or numpy, or in a hook Triton calls) and then
    copies it with a kernel reads no input, or only part of one, in any kernel; one that writes part of
    an output with torch leaves elements that no kernel stored to. Both show here, whatever the
    launcher did to torch: every element of every input must be loaded by a kernel, and every output
    element stored by one."""

    def __init__(self, inputs: dict, outputs: dict):
        self.inputs = {name: _tensor_span(name, t) for name, t in inputs.items() if t.numel()}
        self.tensors = {name: t for name, t in inputs.items() if name in self.inputs}
        # per input, one flag per item-sized slot of its span: which were loaded
        self.loaded = {name: np.zeros((span.hi - span.lo) // span.itemsize, dtype=bool)
                       for name, span in self.inputs.items()}  # fmt: skip
        self.outputs = outputs
        self.stores: list[np.ndarray] = []

    def __call__(self, kind, kernel, addresses, active, itemsize) -> None:
        live = np.asarray(addresses, dtype=np.uint64)[np.asarray(active, dtype=bool)]
        if live.size == 0:
            return
        if kind == "load":
            for name, span in self.inputs.items():
                inside = live[(live >= span.lo) & (live < span.hi)]
                if inside.size:
                    flags = self.loaded[name]
                    first = ((inside - np.uint64(span.lo)) // np.uint64(span.itemsize)).astype(np.int64)
                    for extra in range(max(1, int(itemsize) // span.itemsize)):  # a wider access covers more
                        flags[np.minimum(first + extra, flags.size - 1)] = True
        else:  # store or atomic
            self.stores.append(live.reshape(-1))

    def unread_inputs(self) -> list[str]:
        """Inputs of which no element was loaded."""
        return [name for name in self.inputs if not self.loaded[name].any()]

    def unread_elements(self) -> dict[str, int]:
        """How many elements of each input no kernel loaded."""
        out = {}
        for name, span in self.inputs.items():
            slots = (element_addresses(self.tensors[name]) - np.uint64(span.lo)) // np.uint64(span.itemsize)
            out[name] = int((~self.loaded[name][slots.astype(np.int64)]).sum())
        return out

    def unwritten(self, name: str) -> int:
        """How many elements of output ``name`` no kernel stored to."""
        wanted = element_addresses(self.outputs[name])
        if not self.stores:
            return int(wanted.size)
        stored = np.unique(np.concatenate(self.stores))
        return int((~np.isin(wanted, stored, assume_unique=False)).sum())


@contextmanager
def record_flow(inputs: dict, outputs: dict):
    """``with record_flow({"x": x}, {"out": out}) as flow: launcher(...)``; CPU mode only."""
    flow = FlowRecord(inputs, outputs)
    access_listeners.append(flow)
    try:
        yield flow
    finally:
        access_listeners.remove(flow)


# --------------------------------------------------------------------------------------------------

_installed = False


def install_dot_tap() -> None:
    """In the interpreter, tell the ``dot_listeners`` of each tl.dot (idempotent). Installed after
    course_lib.interpreter's work-arounds, which replace the interpreter's dot for bfloat16 and TF32: this
    wraps theirs, so it sees every dot."""
    if not runtime.is_cpu():
        return
    import triton.runtime.interpreter as interp

    builder_cls = interp.InterpreterBuilder
    if getattr(builder_cls, "_course_dot_tap", False):
        return
    dot = builder_cls.create_dot

    def create_dot(self, a, b, *rest, **kw):
        if dot_listeners and _launch_stack:
            pid = tuple(int(v) for v in getattr(self, "grid_idx", (0, 0, 0)))
            _access.program = (_launch_stack[-1].number, pid)
            try:
                for listener in dot_listeners:
                    listener(a.data, b.data)  # the operands' values (numpy), not to be kept
            finally:
                _access.program = None
        return dot(self, a, b, *rest, **kw)

    builder_cls.create_dot = create_dot
    builder_cls._course_dot_tap = True


def install() -> None:
    """Install the launch watch (both modes) and, in the interpreter, the memory-access tap (idempotent)."""
    global _installed
    if _installed:
        return
    import triton.runtime.autotuner as autotuner
    import triton.runtime.jit as jit

    _wrap_run(jit.JITFunction)
    _wrap_run(autotuner.Autotuner, bounds=False)
    _wrap_run(autotuner.Heuristics, bounds=False)
    _install_descriptor_check()
    if runtime.is_cpu():
        import triton.runtime.interpreter as interp

        _wrap_run(interp.InterpretedFunction)
        _install_bounds_hooks(interp.InterpreterBuilder)
    _installed = True
