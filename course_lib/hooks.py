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

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import runtime


class OutOfBoundsAccess(Exception):
    """A kernel loaded or stored outside the memory of every tensor passed to it (interpreter only)."""


class DescriptorAlignmentError(ValueError):
    """A tensor descriptor whose base, strides or block row are no multiple of 16 bytes (TMA's rule)."""


# --------------------------------------------------------------------------------------------------
# launch watch


@dataclass
class Watch:
    launches: list[str] = field(default_factory=list)
    depth: int = 0  # > 0 while inside a kernel launch


_local = threading.local()


def current_watch() -> Watch | None:
    return getattr(_local, "watch", None)


@contextmanager
def watch_launches():
    """Count Triton launches made inside the block: ``with watch_launches() as w: ...; w.launches``."""
    previous = current_watch()
    w = Watch()
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


def running_program() -> tuple[int | None, list[int] | None]:
    """In the interpreter: the running program's number in launch order (x slowest, z fastest) and the
    grid; (None, None) where the interpreter does not say."""
    from triton.runtime import interpreter

    builder = getattr(interpreter, "interpreter_builder", None)
    index, dims = getattr(builder, "grid_idx", None), getattr(builder, "grid_dim", None)
    if index is None or dims is None:
        return None, None
    (x, y, z), (_, gy, gz) = index, dims
    return (int(x) * int(gy) + int(y)) * int(gz) + int(z), [int(d) for d in dims]


# Called with (kernel, positional arguments, keyword arguments) just before each launch of a kernel
# (the innermost one: for an autotuned kernel, the launch with the chosen config's values). A listener
# that returns SKIP stops that launch: it does not run (compilation.recorded_launches).
launch_listeners: list = []
SKIP = object()


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
        w = current_watch()
        if w is not None and w.depth == 0 and not kwargs.get("warmup", False):
            w.launches.append(_kernel_name(self))
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


@dataclass
class _Launch:
    kernel: str
    spans: list[_Span]
    starts: np.ndarray  # merged, sorted intervals for the membership test
    ends: np.ndarray


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
    return _Span(name, base + lo * itemsize, base + (hi + 1) * itemsize, base, itemsize, t.numel(), str(t.dtype))


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


def _offsets_advice(offsets: np.ndarray, span: _Span) -> str:
    """What the offending offsets say: before the start, just past the end, or far off."""
    if bool((offsets < 0).all()):
        return (
            f"Every offending offset is negative, before the start of `{span.name}`: is something subtracted "
            "from the offsets, or a pointer moved back?"
        )
    last = span.numel - 1
    if bool((offsets > last).all()):
        past = int(offsets.min()) - last
        if past <= 2:
            return (
                f"The offsets run {past} element{'s' * (past != 1)} past the last one ({last}): a mask that keeps "
                "one offset too many (< versus <=), or a pointer shifted by one under a correct mask "
                "(out_ptr + offsets + 1)?"
            )
        return (
            f"The offsets reach past the last element ({last}) by {past} or more: is the last block masked, "
            "and is the grid no larger than it needs to be?"
        )
    return "Some offsets fall before the start and some past the end: check how the offsets are built."


def _format_offsets(values: np.ndarray, limit: int = 8) -> str:
    shown = ", ".join(str(int(v)) for v in values[:limit])
    return shown + (f", ... ({len(values)} in all)" if len(values) > limit else "")


# Called with (kind, kernel name, addresses, active mask, itemsize) for every load and store the
# interpreter makes inside a launch; course_lib.traffic listens here.
access_listeners: list = []


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
    for listener in access_listeners:
        listener(kind, launch.kernel, addresses, active_mask, itemsize)
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
    pid = tuple(int(v) for v in getattr(builder, "grid_idx", (0, 0, 0)))
    lines = [
        f"kernel `{launch.kernel}`, program id {pid}: a {kind} outside the memory of every tensor passed "
        f"to the kernel ({bad.size} of {active.size} active lanes). The course stopped it before it "
        "touched memory."
    ]
    where = "Check how the offsets are built and what the mask keeps out (and the grid size)."
    if launch.spans:
        first = int(bad[0])
        nearest = min(launch.spans, key=lambda s: min(abs(first - s.lo), abs(first - (s.hi - 1))))
        offsets = (bad.astype(np.int64) - np.int64(nearest.base)) // np.int64(nearest.itemsize)
        lines.append(
            f"Nearest tensor: `{nearest.name}` ({nearest.numel} element{'s' * (nearest.numel != 1)} of "
            f"{nearest.dtype}); the offending "
            f"offsets, in elements from its start: {_format_offsets(np.unique(offsets))}."
        )
        where = _offsets_advice(offsets, nearest)
    if getattr(_unmasked, "flag", False):
        lines.append(
            f"The tl.{kind} had no mask: add one that keeps its offsets inside the tensor, e.g. "
            "mask=offsets < n_elements, or mask=cols < n_cols for a vector of columns."
        )
    else:
        lines.append(
            f"The mask let {int(active_mask.sum())} of {active_mask.size} lanes through, "
            f"{bad.size} of them outside every tensor. {where}"
        )
    raise OutOfBoundsAccess("\n".join(lines))


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
    builder_cls._course_bounds = True


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
