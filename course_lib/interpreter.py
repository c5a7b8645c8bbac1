"""Work-arounds for known bugs of Triton's interpreter (3.6 through 3.9), apart from the grader's hooks.

* Triton < 3.7.1 with numpy >= 2.4: loops with a runtime bound fail (``only 0-dimensional arrays can
  be converted to Python scalars``).
* bf16: the interpreter holds bf16 as raw uint16 bits and adds, multiplies, compares and ``tl.dot``s
  those bits as integers; casts to bf16 truncate instead of rounding.
* A kernel's module gets the interpreter's own dunder globals (``__file__``) planted in it.
* A call between @triton.jit functions leaves triton.language patched for the interpreter.
* ``triton.autotune`` would call do_bench, which needs a GPU.

The doctor runs a canary for each (``course_lib.doctor``); tests/test_triton_versions.py runs them
on every supported Triton.
"""

from __future__ import annotations

import contextlib
import sys

import numpy as np

from . import runtime

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


def tf32_rounded(values) -> np.ndarray:
    """float32 values rounded to TF32 (10 bits of mantissa, to nearest, ties to even), as a tensor core
    reads them; inf and NaN kept."""
    x = np.ascontiguousarray(values, dtype=np.float32)
    bits = x.view(np.uint32)
    rounded = ((bits + np.uint32(0xFFF) + ((bits >> np.uint32(13)) & np.uint32(1))) & np.uint32(0xFFFFE000)).view(
        np.float32
    )
    return np.where(np.isfinite(x), rounded, x)


def _is_tf32(precision) -> bool:
    """Triton's ``ir.INPUT_PRECISION.TF32`` (its default for float32 on a GPU), not TF32x3 nor IEEE."""
    name = getattr(precision, "name", None) or str(precision)
    return name.rsplit(".", 1)[-1].upper() == "TF32"


def _install_bf16_dot_fix(builder_cls) -> None:
    """The interpreter holds bf16 as raw uint16 bits and multiplies those; widen them first.

    And a float32 tl.dot in TF32 (Triton's default: ``input_precision`` not given) is multiplied as a
    GPU's tensor cores do it, each input rounded to 10 bits of mantissa, not exactly as numpy would:
    otherwise a kernel passes in CPU mode and fails the same float32 case on the GPU."""
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
        precision = rest[0] if rest else kw.get("input_precision")
        if a.dtype == tl.float32 and b.dtype == tl.float32 and _is_tf32(precision):
            acc = np.matmul(tf32_rounded(a.data), tf32_rounded(b.data), dtype=np.float32).astype(d.data.dtype)
            return type(d)(acc + d.data, d.dtype.scalar)
        wa, wb = widen(a), widen(b)
        if wa is None and wb is None:
            return original(self, a, b, d, *rest, **kw)
        wa = wa if wa is not None else np.asarray(a.data, dtype=np.float32)
        wb = wb if wb is not None else np.asarray(b.data, dtype=np.float32)
        acc = np.matmul(wa, wb, dtype=np.float32).astype(d.data.dtype) + d.data
        return type(d)(acc, d.dtype.scalar)

    builder_cls.create_dot = create_dot
    builder_cls._course_bf16_dot = True


def _install_tree_reduce(interp) -> None:
    """tl.reduce with a combine function of the learner's own: Triton's interpreter (3.6 to 3.9) calls
    it once per element, with scalars (a Welford layernorm's cases took some 137 s, past every time
    limit). Compiled Triton reduces as a tree within and across threads; this combines whole halves of
    the reduced axis at once, log2(n) calls on arrays, the same function on the same values in another
    associative order (a combine function must be associative for a GPU's reduction too)."""
    cls = getattr(interp, "ReduceOps", None)
    original = getattr(cls, "generic_reduce", None)
    if original is None or getattr(original, "_course_tree", False):
        return
    import triton.language as tl

    def generic_reduce(self, input):
        try:
            return _tree_reduce(self, input, tl)
        except Exception:  # a combine function that is not elementwise: Triton's own element-by-element loop
            return original(self, input)

    generic_reduce._course_tree = True
    cls.generic_reduce = generic_reduce


def _tree_reduce(ops, input, tl):
    original_axis = ops.axis
    input, axis = ops.unravel(input, ops.axis)
    dtypes = [arg.dtype for arg in input]
    arrays = [np.moveaxis(np.asarray(arg.handle.data), axis, 0) for arg in input]
    shape = arrays[0].shape
    if shape[0] == 0:
        raise ValueError("nothing to reduce")
    while arrays[0].shape[0] > 1:
        n = arrays[0].shape[0]
        half = n // 2
        lo = [ops.to_tensor(np.ascontiguousarray(a[:half]), dt) for a, dt in zip(arrays, dtypes)]
        hi = [ops.to_tensor(np.ascontiguousarray(a[half : 2 * half]), dt) for a, dt in zip(arrays, dtypes)]
        got = ops.combine_fn.fn(*lo, *hi)
        got = got if isinstance(got, tuple) else (got,)
        if len(got) != len(arrays):
            raise ValueError("a combine function returning another number of values")
        merged = []
        for value, a in zip(got, arrays):
            data = value.handle.data if isinstance(value, tl.core.tensor) else value
            data = np.broadcast_to(np.asarray(data), a[:half].shape).astype(a.dtype)
            merged.append(np.concatenate([data, a[2 * half :]]) if n % 2 else data)
        arrays = merged
    out = []
    for j, a in enumerate(arrays):
        data = np.asarray(a[0])  # a 0-d array where the output is one number, as Triton's loop makes it
        if ops.keep_dims:
            if original_axis is not None:
                data = np.expand_dims(data, axis)
            else:
                for _ in range(len(shape)):
                    data = np.expand_dims(data, 0)
        elif original_axis is None:
            data = data.item()
        out.append(ops.to_tensor(data, dtypes[j]))
    return out


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


# libdevice's math in the interpreter: triton.language.extra.libdevice holds stubs that the compiler binds to
# the GPU's libdevice, so in the interpreter libdevice.tanh(x) returned None ("unsupported operand type(s) for
# +: 'float' and 'NoneType"), failing a right kernel in CPU mode (notebook 04 shows libdevice's tanh and erf
# as GELU forms). Each launch's patch of triton.language now patches these too, computed in float64, and
# its restore puts the stubs back (a compile for a GPU in the same process sees Triton's own module).
def _erf(x):
    import math

    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _erfc(x):
    import math

    return np.vectorize(math.erfc, otypes=[np.float64])(x)


def _round_half_away(x):  # CUDA's round: halves away from zero (rint rounds them to even)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


# numpy, not torch: the launcher's torch guard watches torch calls, and these run inside the kernel
_LIBDEVICE_UNARY = {
    "tanh": np.tanh, "erf": _erf, "erfc": _erfc, "exp": np.exp, "exp2": np.exp2,
    "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
    "fabs": np.abs, "abs": np.abs, "rint": np.rint, "round": _round_half_away, "fast_expf": np.exp, "fast_logf": np.log,
    "fast_tanhf": np.tanh, "fast_sinf": np.sin, "fast_cosf": np.cos, "fast_log2f": np.log2,
    "fast_exp10f": lambda x: np.power(10.0, x), "exp10": lambda x: np.power(10.0, x), "cbrt": np.cbrt,
    "rcp_rn": lambda x: 1.0 / x,
}  # fmt: skip
_LIBDEVICE_BINARY = {
    "pow": np.power, "atan2": np.arctan2, "fmax": np.fmax, "fmin": np.fmin, "fmod": np.fmod, "hypot": np.hypot,
}  # fmt: skip


class LibdeviceTypeError(TypeError):
    """A libdevice function called on a type compiled Triton has no libdevice entry for."""


def _libdevice_function(name: str, compute, arity: int):
    def call(*args, **_):
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        tensors = [a for a in args[:arity] if isinstance(a, tl.core.tensor)]
        if not tensors:  # libdevice.exp(2.0): a float32 scalar, as compiled
            with np.errstate(all="ignore"):
                value = np.float32(compute(*(np.float64(a) for a in args[:arity])))
            return tl.core.tensor(TensorHandle(np.array([value], dtype=np.float32), tl.float32), tl.float32)
        first = tensors[0]
        scalar = first.handle.dtype.scalar
        if scalar.is_fp16() or scalar.is_bf16():
            raise LibdeviceTypeError(
                f"libdevice.{name} takes float32 or float64, not {scalar}: compiled Triton has no {scalar} entry "
                f"for it and does not compile the kernel; convert first, e.g. libdevice.{name}(x.to(tl.float32))"
            )
        kind = np.float64 if scalar.is_floating() else np.int64  # integers stay exact (abs of an int64)
        data = [np.asarray(a.handle.data if isinstance(a, tl.core.tensor) else a, dtype=kind) for a in args[:arity]]
        with np.errstate(all="ignore"):  # inf and nan as the GPU gives them, not warnings
            out = np.asarray(compute(*data)).astype(first.handle.data.dtype)
        return tl.core.tensor(TensorHandle(out, scalar), first.type)

    call.__name__ = name
    return call


def _install_libdevice(interp) -> None:
    if getattr(interp._patch_lang, "_course_libdevice", False):
        return
    import triton.language.extra.libdevice as libdevice

    original = interp._patch_lang
    table = {name: _libdevice_function(name, fn, 1) for name, fn in _LIBDEVICE_UNARY.items()}
    table.update({name: _libdevice_function(name, fn, 2) for name, fn in _LIBDEVICE_BINARY.items()})
    table = {name: fn for name, fn in table.items() if hasattr(libdevice, name)}

    modules = [libdevice]
    try:
        import triton.language.extra.cuda.libdevice as cuda_libdevice

        modules.append(cuda_libdevice)
    except ImportError:
        pass
    stubs = {id(getattr(m, name)): name for m in modules for name in table if hasattr(m, name)}

    def patch_lang(fn):
        scope = original(fn)
        for module in modules:
            for name, impl in table.items():
                if hasattr(module, name):
                    scope.set_attr(module, name, impl)
        home = sys.modules.get(getattr(fn, "__module__", ""), None)
        if home is not None and getattr(home, "__dict__", None) is fn.__globals__:
            for global_name, value in list(fn.__globals__.items()):  # from ...libdevice import tanh
                if id(value) in stubs and callable(value):
                    scope.set_attr(home, global_name, table[stubs[id(value)]])
        return scope

    patch_lang._course_libdevice = True  # type: ignore[attr-defined]
    interp._patch_lang = patch_lang


# Kernel scalars as the compiled kernel has them. In the interpreter (3.6 to 3.9):
# * a float argument stayed a Python float, so alpha.to(tl.float32) raised "'float' object has no attribute
#   'to'"; compiled, it is an fp32 scalar (ints were converted already);
# * a `for i in range(...)` (or tl.range) counter was a Python int, so i.to(tl.int64), the usual guard
#   against 32-bit offsets overflowing, raised the same; compiled, it is an i32 scalar;
# * tl.constexpr(c) * tensor gave a constexpr wrapping a tensor, which tl.sigmoid and friends refuse;
#   compiled, the tensor wins.
# All three failed right kernels in CPU mode only. The loops are rewritten in the interpreter's own copy of
# the kernel (its FunctionRewriter), never in the module's Python code.
_LOOP_RANGE = "_course_kernel_range"
_CONSTEXPR_OPS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift", "rshift")
_SCALAR_FIRST = ("mod", "lshift", "rshift")
_CONSTEXPR_COMPARISONS = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _install_kernel_scalars(interp) -> None:
    import ast
    import copy

    import triton.language as tl

    if getattr(interp._implicit_cvt, "_course_scalars", False):
        return
    original_cvt = interp._implicit_cvt

    def implicit_cvt(arg):
        if isinstance(arg, float):
            handle = interp.TensorHandle(np.array([arg], dtype=np.float32), tl.float32)
            return tl.tensor(handle, tl.float32)
        return original_cvt(arg)

    implicit_cvt._course_scalars = True  # type: ignore[attr-defined]
    interp._implicit_cvt = implicit_cvt

    def kernel_counters(counters, *bounds):
        """The loop's counters as the compiled kernel has them: i64 where a bound is an i64 scalar (the
        promoted type of the bounds), else i32."""
        wide = any(isinstance(b, tl.tensor) and b.dtype in (tl.int64, tl.uint64) for b in bounds)
        for i in counters:
            if type(i) is not int:
                yield i
            elif wide:
                yield tl.tensor(interp.TensorHandle(np.array([i], dtype=np.int64), tl.int64), tl.int64)
            else:
                yield original_cvt(i)

    class Loops(ast.NodeTransformer):
        """`for i in range(...)` and `for i in tl.range(...)` (not tl.static_range, whose counter is a
        constant) loop over the kernel's scalars: the iterator is wrapped, its arguments untouched."""

        def visit_For(self, node):
            self.generic_visit(node)
            call = node.iter
            if isinstance(call, ast.Call) and (
                (isinstance(call.func, ast.Name) and call.func.id == "range")
                or (isinstance(call.func, ast.Attribute) and call.func.attr == "range")
            ):
                wrapper = ast.Name(id=_LOOP_RANGE, ctx=ast.Load())
                bounds = [copy.deepcopy(a) for a in call.args if not isinstance(a, ast.Starred)]
                node.iter = ast.copy_location(ast.Call(func=wrapper, args=[call, *bounds], keywords=[]), call)
            return node

    rewriter = getattr(interp, "FunctionRewriter", None)
    transform = getattr(rewriter, "_transform_ast", None)
    if transform is not None and not getattr(transform, "_course_loops", False):

        def transform_ast(self, src):
            tree = transform(self, src)
            tree = Loops().visit(tree)
            ast.fix_missing_locations(tree)
            self.fn.__globals__.setdefault(_LOOP_RANGE, kernel_counters)
            return tree

        transform_ast._course_loops = True  # type: ignore[attr-defined]
        rewriter._transform_ast = transform_ast

    original_patch = interp._patch_lang

    def forward(name: str, original):
        def op(self, other):  # constexpr OP tensor: the tensor's reflected op, as compiled code does
            if isinstance(other, tl.tensor) and hasattr(tl.tensor, f"__r{name}__"):
                return getattr(other, f"__r{name}__")(self.value)
            if isinstance(other, tl.tensor) and name in _SCALAR_FIRST:  # no reflected op: the scalar made a tensor
                return getattr(tl.full((), self.value, other.dtype), f"__{name}__")(other)
            return original(self, other)

        return op

    def backward(name: str, original):
        def op(self, other):  # tensor OP constexpr, reached only where the tensor's own op declined
            if isinstance(other, tl.tensor) and hasattr(tl.tensor, f"__{name}__"):
                return getattr(other, f"__{name}__")(self.value)
            return original(self, other)

        return op

    patched = {}  # made from Triton's own constexpr operators, once
    for name in _CONSTEXPR_OPS:
        forward_name, backward_name = f"__{name}__", f"__r{name}__"
        if hasattr(tl.constexpr, forward_name):
            patched[forward_name] = forward(name, getattr(tl.constexpr, forward_name))
        if hasattr(tl.constexpr, backward_name):
            patched[backward_name] = backward(name, getattr(tl.constexpr, backward_name))

    def compared(name: str, mirrored: str, original):
        def op(self, other):  # constexpr < tensor is tensor > constexpr
            if isinstance(other, tl.tensor):
                return getattr(other, f"__{mirrored}__")(self.value)
            return original(self, other)

        return op

    for name, mirrored in _CONSTEXPR_COMPARISONS.items():
        if hasattr(tl.constexpr, f"__{name}__"):
            patched[f"__{name}__"] = compared(name, mirrored, getattr(tl.constexpr, f"__{name}__"))

    def patch_lang(fn):
        scope = original_patch(fn)
        for name, op in patched.items():
            scope.set_attr(tl.constexpr, name, op)
        return scope

    interp._patch_lang = patch_lang


_trials_skipped = 0


@contextlib.contextmanager
def autotune_trials_skipped():
    """While this block runs, an autotuner meeting a new shape keeps its first config without running
    any config as a trial (the interpreter has nothing to time, so the first is kept anyway). For the
    grader's probes (``grader.worker.run_probe``), which watch what one call does."""
    global _trials_skipped
    _trials_skipped += 1
    try:
        yield
    finally:
        _trials_skipped -= 1


def _install_interpreter_autotune() -> None:
    """In the interpreter there is nothing to time: ``triton.autotune`` would call do_bench, which
    needs a GPU. Run each config once instead (so every config is checked for correctness, bounds
    included) and report equal times, so the first config is kept."""
    import triton.runtime.autotuner as autotuner

    if getattr(autotuner.Autotuner, "_course_interpreted", False):
        return

    def run_once(kernel_call, quantiles=None):
        if not _trials_skipped:
            kernel_call()
        return [0.0] * len(quantiles) if quantiles else 0.0

    autotuner.Autotuner.do_bench = property(lambda self: run_once)
    autotuner.Autotuner._course_interpreted = True


_installed = False


def install() -> None:
    """Install every work-around (CPU mode only; idempotent)."""
    global _installed
    if _installed or not runtime.is_cpu():
        return
    import triton.runtime.interpreter as interp

    _install_numpy_index_fix(interp)
    _install_bf16_dot_fix(interp.InterpreterBuilder)
    _install_bf16_arith_fix(interp.InterpreterBuilder)
    _install_interpreter_autotune()
    _install_clean_globals(interp)
    _install_tree_reduce(interp)
    _install_libdevice(interp)
    _install_kernel_scalars(interp)
    _install_device_call_restore(interp)
    _installed = True
