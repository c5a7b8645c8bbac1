"""Gluon kernels run on the CPU, their asynchronous protocol checked as they run (issue 25).

Triton's interpreter does not take ``@gluon.jit`` kernels. This runs one: the kernel's own Python
function, its globals rebound so that ``gl``, ``mbarrier``, ``tma``, ``warpgroup_mma`` and the rest
are this package's (``language``), its ``@gluon.jit`` helpers rebound the same way, each program of the
grid in turn, the partitions of ``gl.warp_specialize`` as threads that take turns under a seeded
scheduler (``scheduler``). TMA copies, TMA stores and wgmmas stay asynchronous: they happen when the
scheduler fires them, so a wait that is missing or on the wrong phase shows, and is named
(``ProtocolError``, ``Deadlock``).

    with gluon_cpu.launches_simulated(seed=0):
        ws_matmul(a, b, out, sms=2)        # CPU tensors; the launch runs here, on the CPU

Besides the protocol's own rules it checks that two partitions write one slot of shared memory only in
an order a barrier gives them (vector clocks carried by the arrives and the waits). The grader runs the
Gluon tasks' cases here in CPU mode (``TaskSpec.simulated``); each program's scheduler keeps a trace
that ``course_lib.widgets.gluon_trace`` draws. Integer ``//`` and ``%`` of the kernel's values round toward
zero, as the GPU's divsi and remsi do (Python's floor would pass a phase or an index that is wrong there); a
kernel's shared memory has no limit here (the grader reads the compiled size). What is not simulated (the
elementwise and reduction ops beyond what chapters 09 and 10's kernels need, inline PTX) raises
``NotSimulated``, naming the call.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import types

from . import language as L
from .language import KernelError, NotSimulated, ProtocolError
from .scheduler import Deadlock, Scheduler

__all__ = ["Deadlock", "KernelError", "NotSimulated", "ProtocolError", "launches_simulated", "simulate"]


# ------------------------------------------------------------------------------------ gl, as the CPU runs it


def _real_gl():
    from triton.experimental.gluon import language as gl

    return gl


def _cdiv(a, b):
    return L.Scalar(-(-int(a) // int(b)))


def _minimum(a, b, *_, **__):
    if isinstance(a, L.Value) or isinstance(b, L.Value):
        import torch

        return L.Value(torch.minimum(_as_tensor(a), _as_tensor(b)))
    return min(a, b)


def _maximum(a, b, *_, **__):
    if isinstance(a, L.Value) or isinstance(b, L.Value):
        import torch

        return L.Value(torch.maximum(_as_tensor(a), _as_tensor(b)))
    return max(a, b)


def _as_tensor(x):
    import torch

    if isinstance(x, (L.Value, L.PendingMma)):
        return L._value(x).data  # an accumulator not yet waited on: the protocol error, named
    return torch.tensor(x)


def _zeros(shape, dtype, layout=None):
    import torch

    return L.Value(torch.zeros([int(s) for s in shape], dtype=L.torch_dtype(dtype)), layout)


def _full(shape, value, dtype, layout=None):
    import torch

    return L.Value(torch.full([int(s) for s in shape], value, dtype=L.torch_dtype(dtype)), layout)


def _arange(start, end, layout=None):
    import torch

    return L.Value(torch.arange(int(start), int(end), dtype=torch.int32), layout)


def _convert_layout(value, layout, *_, **__):
    """Layouts are carried, not simulated: the values stay, the layout is the new one's."""
    return L.Value(_as_tensor(value), layout)


def _elementwise(torch_fn, keeps_integers: bool = False, softmax: bool = False):
    """A math function as Gluon has it: floats keep their dtype; integers stay integers where the function
    keeps them (abs), and are computed in float32 elsewhere (exp, sqrt, ...). ``softmax``: counted for
    ``language.exp_beside_mma`` (exp and exp2)."""

    def apply(x, *_, **__):
        data = _as_tensor(x)
        if softmax:
            L.exp_beside_mma(max(1, data.numel()))
        if data.is_floating_point() or keeps_integers:
            return L.Value(torch_fn(data).to(data.dtype), getattr(x, "layout", None))
        return L.Value(torch_fn(data.float()), getattr(x, "layout", None))

    return apply


def _where(condition, x, y, *_, **__):
    import torch

    a, b = _as_tensor(x), _as_tensor(y)
    dtype = a.dtype if isinstance(x, L.Value) else b.dtype
    return L.Value(torch.where(_as_tensor(condition).bool(), a.to(dtype), b.to(dtype)), getattr(x, "layout", None))


def _expand_dims(x, axis, *_, **__):
    return L.Value(_as_tensor(x).unsqueeze(int(axis)))


def _reduction(torch_fn):
    """gl.sum, gl.max: over one axis (keep_dims as Gluon's), or over everything."""

    def reduce(x, axis=None, keep_dims=False, *_, **__):
        data = _as_tensor(x)
        if axis is None:
            return L.Value(torch_fn(data))
        return L.Value(torch_fn(data, int(axis), keepdim=bool(keep_dims)))

    return reduce


def _program_id(axis):
    return L.Scalar(L.Program.now().pid[int(axis)])


def _num_programs(axis):
    return L.Scalar(L.Program.now().grid[int(axis)])


def _range(*args, **_):
    """range() in a kernel: its counter is a scalar of the kernel (it has .to), as in Gluon."""
    return (L.Scalar(i) for i in range(*(int(a) for a in args)))


def _warp_specialize(functions_and_args, worker_num_warps, worker_num_regs=None):
    """The default partition runs in this thread; each worker partition is a thread of its own (warps and
    registers are the GPU's business). Returns when every partition has ended, with what the default
    partition returned."""
    program = L.Program.now()
    program.scheduler.warp_specialized = True  # read by the grader: the case's kernel split its warps
    (default_fn, default_args), *workers = functions_and_args
    spawned = []
    here = program.scheduler.current()
    for i, (fn, args) in enumerate(workers):
        name = f"{getattr(fn, '__name__', 'worker')} (worker partition {i + 1})"
        spawned.append(program.scheduler.spawn(name, _in_program(program, fn, args)))
        L.started(program, here, spawned[-1])
    if here is not None:
        here.name = f"{getattr(default_fn, '__name__', 'default')} (default partition)"
    result = default_fn(*default_args)
    program.scheduler.point(
        lambda: all(p.finished for p in spawned), "the worker partitions to end (gl.warp_specialize)"
    )
    L.joined(program, here, spawned)
    return result


def _in_program(program, fn, args):
    def body():
        L._bind_program(program)
        return fn(*args)

    return body


def _static_range(*args):
    return _range(*args)


class StaticAssertionFailed(AssertionError):
    """gl.static_assert(False, ...): compiled Triton refuses the kernel with the same words."""


def _static_assert(condition, message="", *_, **__):
    if not bool(getattr(condition, "value", condition)):
        raise StaticAssertionFailed(f"static_assert failed: {getattr(message, 'value', message)}")


def _static_print(*args, **__):
    print(*(getattr(a, "value", a) for a in args))


class _Namespace(types.SimpleNamespace):
    """A module as the kernel sees it: this package's functions, else the real module's classes, dtypes
    and layouts; a function not simulated raises NotSimulated when called, naming it."""

    def __init__(self, real_module, label: str, **functions):
        super().__init__(**functions)
        object.__setattr__(self, "_real", real_module)
        object.__setattr__(self, "_label", label)

    def __getattr__(self, name):
        real = getattr(object.__getattribute__(self, "_real"), name)
        if isinstance(real, type) or type(real).__name__ in ("dtype", "constexpr") or name.endswith("Layout"):
            return real
        return _missing(f"{object.__getattribute__(self, '_label')}.{name}")


def _missing(name: str):
    def call(*_, **__):
        raise NotSimulated(f"{name} is not simulated on the CPU yet")

    return call


_FUNCTIONS = {
    # gl
    "program_id": _program_id, "num_programs": _num_programs, "cdiv": _cdiv, "minimum": _minimum,
    "maximum": _maximum, "zeros": _zeros, "full": _full, "static_range": _static_range,
    "static_assert": _static_assert, "static_print": _static_print, "convert_layout": _convert_layout,
    "where": _where, "expand_dims": _expand_dims,  # and the math and reductions, _torch_functions() below
    "allocate_shared_memory": L.allocate_shared_memory, "warp_specialize": _warp_specialize,
    "load": L.load, "store": L.store, "arange": _arange,
    # hopper
    "warpgroup_mma": L.warpgroup_mma, "warpgroup_mma_wait": L.warpgroup_mma_wait,
    "fence_async_shared": L.fence_async_shared,
    # tma (both names: 3.6 and 3.7 say async_copy_*, 3.8 on async_load / async_store)
    "async_copy_global_to_shared": L.tma_load, "async_load": L.tma_load,
    "async_copy_shared_to_global": L.tma_store, "async_store": L.tma_store, "store_wait": L.tma_store_wait,
    # mbarrier
    "init": L.mbarrier_init, "wait": L.mbarrier_wait, "arrive": L.mbarrier_arrive, "expect": L.mbarrier_expect,
    "invalidate": L.mbarrier_invalidate,
}  # fmt: skip


def _torch_functions() -> None:
    import torch

    for name, fn in (("exp", torch.exp), ("exp2", torch.exp2), ("log", torch.log), ("sqrt", torch.sqrt)):
        _FUNCTIONS[name] = _elementwise(fn, softmax=name.startswith("exp"))
    _FUNCTIONS["abs"] = _elementwise(torch.abs, keeps_integers=True)
    _FUNCTIONS["sum"], _FUNCTIONS["max"] = _reduction(torch.sum), _reduction(torch.amax)


_torch_functions()


def _namespaces() -> dict:
    gl = _real_gl()
    from triton.experimental.gluon.language.nvidia import hopper
    from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

    def pick(*names):
        return {n: _FUNCTIONS[n] for n in names}

    shims = {
        id(gl): _Namespace(gl, "gl", constexpr=lambda x: x, **pick(
            "program_id", "num_programs", "cdiv", "minimum", "maximum", "zeros", "full", "static_range",
            "static_assert", "static_print", "allocate_shared_memory", "warp_specialize", "load", "store",
            "arange", "convert_layout", "where", "expand_dims", "sum", "max", "exp", "exp2", "log", "sqrt",
            "abs")),
        id(mbarrier): _Namespace(mbarrier, "mbarrier", **pick("init", "wait", "arrive", "expect", "invalidate")),
        id(tma): _Namespace(tma, "tma", **pick(
            "async_copy_global_to_shared", "async_load", "async_copy_shared_to_global", "async_store",
            "store_wait")),
    }  # fmt: skip
    shims[id(hopper)] = _Namespace(
        hopper, "hopper", mbarrier=shims[id(mbarrier)], tma=shims[id(tma)],
        **pick("warpgroup_mma", "warpgroup_mma_wait", "fence_async_shared"),
    )  # fmt: skip
    return shims


# ----------------------------------------------------------------------------------- rebinding a kernel


def _names(code) -> set:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _is_kernel(value) -> bool:
    return type(value).__name__ in ("GluonJITFunction", "JITFunction", "InterpretedFunction") and hasattr(value, "fn")


def rebound(fn, shims: dict, cache: dict):
    """``fn`` with the Gluon names it uses bound to the CPU's, its kernel helpers rebound likewise."""
    if _is_kernel(fn):
        fn = fn.fn
    if fn in cache:
        return cache[fn]
    namespace = dict(fn.__globals__)
    closure = None
    if fn.__closure__:  # a kernel defined inside a function: its free names are cells, rebound the same way
        closure = tuple(
            types.CellType(_replacement(cell.cell_contents, shims, cache)) if _filled(cell) else cell
            for cell in fn.__closure__
        )
    copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, closure)
    copy.__kwdefaults__, copy.__qualname__ = fn.__kwdefaults__, fn.__qualname__
    cache[fn] = copy
    for name in _names(fn.__code__):
        if name in namespace:
            namespace[name] = _replacement(namespace[name], shims, cache)
    namespace["range"] = _range  # a kernel's loop counters are its scalars
    return copy


def _filled(cell) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:
        return False
    return True


def _replacement(value, shims: dict, cache: dict):
    if id(value) in shims:
        return shims[id(value)]
    if _is_kernel(value):
        return rebound(value, shims, cache)
    module = getattr(value, "__module__", "") or ""
    if callable(value) and module.startswith("triton.") and not isinstance(value, type):
        name = getattr(value, "__name__", "")
        if name in _FUNCTIONS:
            return _FUNCTIONS[name]
        return _missing(f"{module}.{name}")
    return value


# ---------------------------------------------------------------------------------------------- a launch


def _device_argument(value):
    if type(value).__name__ == "TensorDescriptor" and hasattr(value, "block_shape") and hasattr(value, "base"):
        return L.Descriptor(value)
    if type(value).__name__ == "Tensor":
        return L.Pointer(value)
    return value


def simulate(
    kernel, args: tuple, kwargs: dict, seed: int = 0, event_weight: float = 1.0, thread_guard=None
) -> list[Scheduler]:
    """Run one launch of a Gluon ``kernel`` on the CPU, every program of its grid; returns each
    program's scheduler (its log of what happened in which order)."""
    fn = kernel.fn
    grid = kwargs.get("grid")
    params = inspect.signature(fn).parameters
    call = {k: v for k, v in kwargs.items() if k in params}
    bound = inspect.signature(fn).bind(*args, **call)
    arguments = {k: _device_argument(v) for k, v in bound.arguments.items()}
    body = rebound(fn, _namespaces(), {})
    if callable(grid):
        grid = grid(dict(arguments))
    grid = tuple(int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,)))
    grid = grid + (1,) * (3 - len(grid))
    schedulers = []
    for n, pid in enumerate(itertools.product(range(grid[0]), range(grid[1]), range(grid[2]))):
        pid = (pid[0], pid[1], pid[2])
        scheduler = Scheduler(seed=seed * 1_000_003 + n, event_weight=event_weight, thread_guard=thread_guard)
        program = L.Program(pid, grid, scheduler)
        scheduler.run(f"program {pid[0]}", _in_program(program, lambda: body(**arguments), ()))
        L._bind_program(program)
        try:
            scheduler.flush()  # what is still in flight when the program ends lands now
        finally:
            L._bind_program(None)
        scheduler.exp_calls, scheduler.timeline = program.exp_calls, program.timeline
        scheduler.mma_partitions, scheduler.mma_flops = program.mma_partitions, program.mma_flops
        schedulers.append(scheduler)
    return schedulers


@contextlib.contextmanager
def launches_simulated(seed: int = 0, event_weight: float = 1.0, record: list | None = None, thread_guard=None):
    """While this block runs, every launch of a Gluon kernel runs on the CPU (``simulate``) instead of
    compiling for a GPU. Other kernels launch as usual. ``record``: a list that gets, for each launch,
    (the kernel's name, its programs' schedulers), whose ``trace`` notebook 09 draws. ``thread_guard``:
    makes the context each partition's thread runs its body in (the grader's torch guard)."""
    from .. import hooks

    hooks.install()

    def listener(kernel, args, kwargs):
        if type(kernel).__name__ != "GluonJITFunction":
            return None
        programs = simulate(kernel, args, kwargs, seed=seed, event_weight=event_weight, thread_guard=thread_guard)
        if record is not None:
            record.append((getattr(kernel.fn, "__name__", "kernel"), programs))
        return hooks.SKIP

    hooks.launch_listeners.append(listener)
    try:
        yield
    finally:
        hooks.launch_listeners.remove(listener)
