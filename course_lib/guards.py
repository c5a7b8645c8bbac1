"""Everything course_lib hooks into Triton and torch, in one place.

* Launch watch: counts Triton kernel launches while a learner's launcher runs (the grader requires
  at least one), in both modes.
* Launcher torch guard: while the launcher runs (outside kernel launches), torch may allocate, make
  views and answer shape questions, nothing else; fresh ``torch.empty`` outputs are poisoned with NaN
  so an element the kernel never writes cannot pass by luck.
* Out-of-bounds check (interpreter): every pointer load and store is checked against the memory of
  the tensors passed to the kernel before it touches memory. Triton's interpreter funnels them
  through ``InterpreterBuilder.create_masked_load`` / ``create_masked_store`` (and the atomics),
  whose trailing arguments differ between 3.6 and 3.9, so the hooks only read the leading ones.
* Interpreter bug work-arounds: Triton < 3.7.1 with numpy >= 2.4 (loops with a runtime bound) and
  bf16 ``tl.dot`` (raw bits multiplied as integers). The doctor runs a canary for each.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from . import runtime

# --------------------------------------------------------------------------------------------------
# errors the grader recognises


class OutOfBoundsAccess(Exception):
    """A kernel loaded or stored outside the memory of every tensor passed to it (interpreter only)."""


class TorchComputeInLauncher(Exception):
    """The launcher computed with torch instead of (or besides) launching a kernel."""


# --------------------------------------------------------------------------------------------------
# launch watch


@dataclass
class Watch:
    launches: list[str] = field(default_factory=list)
    depth: int = 0  # > 0 while inside a kernel launch


_local = threading.local()


def _current_watch() -> Watch | None:
    return getattr(_local, "watch", None)


@contextmanager
def watch_launches():
    """Count Triton launches made inside the block: ``with watch_launches() as w: ...; w.launches``."""
    previous = _current_watch()
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

    return call


def _wrap_run(cls, bounds: bool = True) -> None:
    """Count launches of ``cls`` (outermost only) and, in the interpreter, check their bounds.

    Wrapping an outer launcher (the autotuner) too makes its benchmarking part of one launch: its
    torch calls (do_bench flushes L2 with torch) are then Triton's business, not the launcher's."""
    if getattr(cls.run, "_course_wrapped", False):
        return
    original = cls.run

    def run(self, *args, **kwargs):
        w = _current_watch()
        if w is not None and w.depth == 0 and not kwargs.get("warmup", False):
            w.launches.append(_kernel_name(self))
        hooks = getattr(self, "pre_run_hooks", None)
        if w is not None:
            # the grid function and pre-run hooks are the learner's code, though Triton calls them
            if callable(kwargs.get("grid")):
                kwargs["grid"] = _outside_launch(kwargs["grid"], w)
            if hooks:
                self.pre_run_hooks = [_outside_launch(h, w) for h in hooks]
            w.depth += 1
        try:
            if bounds and runtime.is_cpu():
                with _bounds_for_launch(self, args, kwargs):
                    return original(self, *args, **kwargs)
            return original(self, *args, **kwargs)
        finally:
            if w is not None:
                w.depth -= 1
                if hooks:
                    self.pre_run_hooks = hooks

    run._course_wrapped = True  # type: ignore[attr-defined]
    cls.run = run


# --------------------------------------------------------------------------------------------------
# torch guard for launchers

# Allocation, views and layout, shape and metadata queries: what a launcher may ask torch for.
ALLOWED_IN_LAUNCHER = frozenset(
    """
    empty empty_like empty_strided zeros zeros_like ones ones_like full full_like
    new_empty new_zeros new_ones new_full new_empty_strided
    view view_as reshape reshape_as flatten unflatten squeeze unsqueeze permute transpose t T mT
    expand expand_as as_strided narrow select __getitem__ unbind split chunk contiguous detach
    size stride numel nelement dim ndim shape dtype device is_contiguous data_ptr element_size
    itemsize nbytes storage_offset is_cuda is_cpu layout untyped_storage requires_grad is_leaf
    is_floating_point is_complex __len__ __hash__ __format__ __repr__ __str__ _version grad_fn
    names __dlpack__ __dlpack_device__
    """.split()
)
_POISONED_ALLOCATIONS = frozenset("empty empty_like empty_strided new_empty new_empty_strided".split())


def _short_name(func) -> str:
    from torch.overrides import resolve_name

    name = resolve_name(func) or getattr(func, "__name__", repr(func))
    if name.endswith(".__get__"):
        name = name[: -len(".__get__")]
    return name.rsplit(".", 1)[-1]


# The poison is a NaN with a payload of its own, so "never written" (these bits still there) and
# "computed as NaN" (a GPU or numpy makes a canonical NaN, other bits) can be told apart.
_POISON_BITS = {"float32": (0x7FB0DEAD, "int32"), "float16": (0x7DAD, "int16"), "bfloat16": (0x7FAD, "int16")}


def poison(t) -> None:
    """Fill a fresh output with a value no correct kernel leaves there (a marked NaN for floats)."""
    import torch

    with torch.no_grad():
        name = str(t.dtype).replace("torch.", "")
        if name in _POISON_BITS:
            bits, int_type = _POISON_BITS[name]
            # a same-size dtype view works for strided views too (rows of a wider matrix)
            t.view(getattr(torch, int_type)).fill_(bits - (1 << 32 if bits >= 1 << 31 else 0))
        elif t.dtype.is_floating_point or t.dtype.is_complex:
            t.fill_(float("nan"))
        elif t.dtype == torch.bool:
            return
        else:
            t.fill_(torch.iinfo(t.dtype).min)


def still_poisoned(t):
    """Boolean tensor: which elements of ``t`` still hold the poison (were never written)."""
    import torch

    name = str(t.dtype).replace("torch.", "")
    if name in _POISON_BITS:
        bits, int_type = _POISON_BITS[name]
        int_dtype = getattr(torch, int_type)
        value = bits - (1 << 32 if bits >= 1 << 31 else 0)
        return t.contiguous().view(int_dtype) == value
    if t.dtype.is_floating_point:
        return torch.isnan(t)
    if t.dtype == torch.bool:
        return torch.zeros_like(t)
    return t == torch.iinfo(t.dtype).min


def _where_in(paths: tuple[str, ...]) -> str:
    """file:line of the innermost frame that belongs to one of ``paths`` (the learner's file)."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if any(os.path.samefile(filename, p) for p in paths if os.path.exists(filename)):
            import linecache

            line = linecache.getline(filename, frame.f_lineno).strip()
            return f"{os.path.basename(filename)}:{frame.f_lineno}: {line}"
        frame = frame.f_back
    return "the launcher"


def launcher_torch_guard(allowed: frozenset[str] = ALLOWED_IN_LAUNCHER, learner_files: tuple[str, ...] = ()):
    """A torch function mode that raises TorchComputeInLauncher on any torch call outside ``allowed``.

    Calls made inside a Triton launch (Triton's own bookkeeping) pass through.
    """
    from torch.overrides import TorchFunctionMode

    class _Guard(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            w = _current_watch()
            if w is not None and w.depth > 0:
                return func(*args, **kwargs)
            name = _short_name(func)
            if name not in allowed:
                raise TorchComputeInLauncher(
                    f"the launcher called torch `{name}` ({_where_in(learner_files)}). A launcher may "
                    "allocate outputs, make views and read shapes; the computing belongs in the kernel."
                )
            out = func(*args, **kwargs)
            if name in _POISONED_ALLOCATIONS and hasattr(out, "fill_"):
                poison(out)
            return out

    return _Guard()


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
    if launch.spans:
        first = int(bad[0])
        nearest = min(launch.spans, key=lambda s: min(abs(first - s.lo), abs(first - (s.hi - 1))))
        offsets = (bad.astype(np.int64) - np.int64(nearest.base)) // np.int64(nearest.itemsize)
        lines.append(
            f"Nearest tensor: `{nearest.name}` ({nearest.numel} element{'s' * (nearest.numel != 1)} of "
            f"{nearest.dtype}); the offending "
            f"offsets, in elements from its start: {_format_offsets(np.unique(offsets))}."
        )
    if getattr(_unmasked, "flag", False):
        lines.append(
            f"The tl.{kind} had no mask: add one that keeps its offsets inside the tensor, e.g. "
            "mask=offsets < n_elements, or mask=cols < n_cols for a vector of columns."
        )
    else:
        lines.append(
            f"The mask let {int(active_mask.sum())} of {active_mask.size} lanes through; it must exclude "
            "every lane whose offset is past the end (check for < versus <=, and the grid size)."
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
# interpreter bug work-arounds

NUMPY_INDEX_FIX_NEEDED_BELOW = (3, 7, 1)


def _install_numpy_index_fix(interp) -> bool:
    """Triton < 3.7.1 converts 1-element arrays with int(), which numpy >= 2.4 refuses."""
    if runtime.triton_version() >= NUMPY_INDEX_FIX_NEEDED_BELOW or not hasattr(interp, "_patch_lang_tensor"):
        return False
    original = interp._patch_lang_tensor
    if getattr(original, "_course_fixed", False):
        return True

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    patch_lang_tensor._course_fixed = True  # type: ignore[attr-defined]
    interp._patch_lang_tensor = patch_lang_tensor
    return True


def bf16_bits_to_f32(bits) -> np.ndarray:
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16_bits(values) -> np.ndarray:
    """Round float32 to bf16 (nearest, ties to even) as raw bits, the interpreter's bf16 storage."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    bits = values.view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    return np.where(np.isnan(values), np.uint16(0x7FC0), rounded)


def _handle_type():
    from triton.runtime.interpreter import TensorHandle

    return TensorHandle


_COMPARISONS = {np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal}


def _install_bf16_arith_fix(builder_cls) -> None:
    """The interpreter stores bf16 as raw uint16 bits and adds, multiplies and compares those bits as
    integers (x + y gives garbage). Do the arithmetic in float32 and round back to bf16, as a GPU does."""
    if getattr(builder_cls, "_course_bf16_arith", False):
        return
    import triton.language as tl

    binary, unary, ternary, fma = (
        builder_cls.binary_op,
        builder_cls.unary_op,
        builder_cls.ternary_op,
        builder_cls.create_fma,
    )

    def is_bf16(h) -> bool:
        return getattr(h, "dtype", None) is not None and h.dtype.scalar == tl.bfloat16

    def widen(h):
        return type(h)(bf16_bits_to_f32(h.data), tl.float32) if is_bf16(h) else h

    def narrow(h, op=None):
        if op in _COMPARISONS:
            return type(h)(np.asarray(h.data), tl.bfloat16)
        return type(h)(f32_to_bf16_bits(h.data), tl.bfloat16)

    def binary_op(self, lhs, rhs, op):
        if not (is_bf16(lhs) or is_bf16(rhs)):
            return binary(self, lhs, rhs, op)
        return narrow(binary(self, widen(lhs), widen(rhs), op), op)

    def unary_op(self, arg, op):
        if not is_bf16(arg):
            return unary(self, arg, op)
        return narrow(unary(self, widen(arg), op))

    def ternary_op(self, lhs, rhs, other, op):
        if not (is_bf16(rhs) and is_bf16(other)) or op is np.where:
            return ternary(self, lhs, rhs, other, op)
        return narrow(ternary(self, widen(lhs), widen(rhs), widen(other), op))

    def create_fma(self, x, y, z):
        if not is_bf16(z):
            return fma(self, x, y, z)
        return narrow(fma(self, widen(x), widen(y), widen(z)))

    cast = builder_cls.cast_impl

    def cast_impl(self, src, dst_type):
        # float32 -> bf16: the interpreter truncates the mantissa; a GPU rounds to nearest even
        if dst_type.scalar == tl.bfloat16 and src.dtype.scalar in (tl.float16, tl.float32, tl.float64):
            return type(src)(f32_to_bf16_bits(np.asarray(src.data, dtype=np.float32)), tl.bfloat16)
        return cast(self, src, dst_type)

    builder_cls.cast_impl = cast_impl
    if not hasattr(builder_cls, "get_bf16"):  # Triton < 3.9 cannot make a bf16 constant (x * 2.0)

        def get_bf16(self, value):
            return _handle_type()(f32_to_bf16_bits(np.array([value], dtype=np.float32)), tl.bfloat16)

        builder_cls.get_bf16 = get_bf16
    builder_cls.binary_op = binary_op
    builder_cls.unary_op = unary_op
    builder_cls.ternary_op = ternary_op
    builder_cls.create_fma = create_fma
    builder_cls._course_bf16_arith = True


def _install_bf16_dot_fix(builder_cls) -> None:
    """The interpreter holds bf16 as raw uint16 bits and multiplies those; widen them first."""
    if getattr(builder_cls, "_course_bf16_dot", False):
        return
    import triton.language as tl

    original = builder_cls.create_dot

    def widen(handle):
        data = np.asarray(handle.data)
        if handle.dtype == tl.bfloat16:
            return bf16_bits_to_f32(data)
        return None

    def create_dot(self, a, b, d, *rest, **kw):
        wa, wb = widen(a), widen(b)
        if wa is None and wb is None:
            return original(self, a, b, d, *rest, **kw)
        wa = wa if wa is not None else np.asarray(a.data, dtype=np.float32)
        wb = wb if wb is not None else np.asarray(b.data, dtype=np.float32)
        acc = np.matmul(wa, wb, dtype=np.float32).astype(d.data.dtype) + d.data
        return type(d)(acc, d.dtype.scalar)

    builder_cls.create_dot = create_dot
    builder_cls._course_bf16_dot = True


def _install_clean_globals(interp) -> None:
    """Stop Triton's interpreter from planting its own ``__file__`` (and other dunder names) in the
    namespace of the module that defines a kernel.

    ``FunctionRewriter._compile_and_exec`` (3.6 to 3.9) copies every global of interpreter.py that
    the kernel's module lacks into that module. A notebook's ``__main__`` has no ``__file__``, so
    after its first kernel ran it claimed to be interpreter.py. The rewritten kernel needs none of
    the dunder names, so they are removed again."""
    rewriter = getattr(interp, "FunctionRewriter", None)
    original = getattr(rewriter, "_compile_and_exec", None)
    if original is None or getattr(original, "_course_clean", False):
        return

    def compile_and_exec(self, transformed_ast):
        namespace = self.fn.__globals__
        before = set(namespace)
        try:
            return original(self, transformed_ast)
        finally:
            for name in set(namespace) - before:
                if name.startswith("__") and name.endswith("__"):
                    del namespace[name]

    compile_and_exec._course_clean = True  # type: ignore[attr-defined]
    rewriter._compile_and_exec = compile_and_exec


def _install_device_call_restore(interp) -> None:
    """A call from one kernel to another @triton.jit function patches triton.language for the
    interpreter and never undoes it (3.6 to 3.9: ``InterpretedFunction.__call__``), so a later
    compile for a GPU target in the same process (notebook 03 does that) sees interpreter objects.
    Undo those patches when the call returns."""
    if getattr(interp.InterpretedFunction.__call__, "_course_restores", False):
        return
    original_patch, original_call = interp._patch_lang, interp.InterpretedFunction.__call__
    opened: list = []  # scopes opened by device calls in progress (launches restore their own)
    calls = [0]

    def patch_lang(fn):
        scope = original_patch(fn)
        if calls[0]:
            opened.append(scope)
        return scope

    def call(self, *args, **kwargs):
        mark = len(opened)
        calls[0] += 1
        try:
            return original_call(self, *args, **kwargs)
        finally:
            calls[0] -= 1
            while len(opened) > mark:
                scope = opened.pop()
                if scope is not None and hasattr(scope, "restore"):
                    scope.restore()

    call._course_restores = True  # type: ignore[attr-defined]
    interp._patch_lang = patch_lang
    interp.InterpretedFunction.__call__ = call


def _install_interpreter_autotune() -> None:
    """In the interpreter there is nothing to time: ``triton.autotune`` would call do_bench, which
    needs a GPU. Run each config once instead (so every config is checked for correctness, bounds
    included) and report equal times, so the first config is kept."""
    import triton.runtime.autotuner as autotuner

    if getattr(autotuner.Autotuner, "_course_interpreted", False):
        return

    def run_once(kernel_call, quantiles=None):
        kernel_call()
        return [0.0] * len(quantiles) if quantiles else 0.0

    autotuner.Autotuner.do_bench = property(lambda self: run_once)
    autotuner.Autotuner._course_interpreted = True


# --------------------------------------------------------------------------------------------------

_installed = False


def install() -> None:
    """Install every hook for the current mode (idempotent). course_lib calls this on import."""
    global _installed
    if _installed:
        return
    import triton.runtime.autotuner as autotuner
    import triton.runtime.jit as jit

    _wrap_run(jit.JITFunction)
    _wrap_run(autotuner.Autotuner, bounds=False)
    _wrap_run(autotuner.Heuristics, bounds=False)
    if runtime.is_cpu():
        import triton.runtime.interpreter as interp

        _wrap_run(interp.InterpretedFunction)
        _install_bounds_hooks(interp.InterpreterBuilder)
        _install_numpy_index_fix(interp)
        _install_bf16_dot_fix(interp.InterpreterBuilder)
        _install_bf16_arith_fix(interp.InterpreterBuilder)
        _install_interpreter_autotune()
        _install_clean_globals(interp)
        _install_device_call_restore(interp)
    _installed = True
