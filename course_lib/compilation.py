"""What Triton does when a kernel is first called, made visible: specialization, compilation for a GPU
target, the compile cache, the generated code, autotuners, and what torch.compile writes.

Compiling needs no GPU. In CPU mode ``@triton.jit`` returns an interpreted function, but Triton's
compiler is still there: ``compile_for`` builds a real ``JITFunction`` from the same Python function
and compiles it for a GPU target (by default an H100/H200, sm_90), down to PTX and a cubin, with the
same on-disk cache a GPU run uses. Compile times measured here are real compile times; nothing is
launched, so they say nothing about kernel speed.

    spec = specialization(add_kernel, x, y, out, n, BLOCK_SIZE=1024)    # what the JIT keys on
    k = compile_for_args(add_kernel, x, y, out, n, BLOCK_SIZE=1024)     # compile as a launch would
    load_widths(asm(k, "ptx"))                                          # {16: 2}: two 16-byte loads

The signature, constexpr and attribute formats of ``triton.compiler.ASTSource`` are the same from
Triton 3.6 to 3.9 (attributes keyed by argument path, e.g. ``{(0,): [["tt.divisibility", 16]]}``);
``specialization`` uses Triton's own ``native_specialize_impl``, present in all four.
"""

from __future__ import annotations

import inspect
import os
import re
import tempfile
import time
import types
from collections import Counter
from collections.abc import Iterable
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from . import runtime

DEFAULT_TARGET = ("cuda", 90, 32)  # backend, compute capability (sm_90: H100, H200), threads per warp
IR_KINDS = ("ttir", "ttgir", "llir", "ptx", "cubin")  # in the order the compiler produces them


# --------------------------------------------------------------------------------------------------
# from a kernel (interpreted or not) to a JITFunction the compiler accepts


def python_function(kernel):
    """The plain Python function under a kernel: ``@triton.jit`` (compiled or interpreted),
    ``@triton.autotune`` and ``@triton.heuristics`` each keep it in ``.fn``."""
    fn = kernel
    while not isinstance(fn, types.FunctionType):
        inner = getattr(fn, "fn", None)
        if inner is None:
            raise TypeError(f"{kernel!r} is not a Triton kernel or a Python function")
        fn = inner
    return fn


def _jit_options(kernel) -> dict:
    """do_not_specialize and do_not_specialize_on_alignment as given to @triton.jit."""
    while kernel is not None and not isinstance(kernel, types.FunctionType):
        kwargs = getattr(kernel, "kwargs", None)  # InterpretedFunction keeps @triton.jit's arguments
        if isinstance(kwargs, dict):
            return {k: list(kwargs.get(k) or []) for k in ("do_not_specialize", "do_not_specialize_on_alignment")}
        if hasattr(kernel, "do_not_specialize") and hasattr(kernel, "params"):  # a JITFunction
            return {
                "do_not_specialize": list(kernel.do_not_specialize or []),
                "do_not_specialize_on_alignment": list(kernel.do_not_specialize_on_alignment or []),
            }
        kernel = getattr(kernel, "fn", None)
    return {"do_not_specialize": [], "do_not_specialize_on_alignment": []}


def _with_compilable_globals(fn: types.FunctionType, seen: dict) -> types.FunctionType:
    """``fn`` itself, or a copy whose @triton.jit helpers (interpreted in CPU mode) are JITFunctions."""
    from triton.runtime.jit import JITFunction

    swaps = {}
    for name in fn.__code__.co_names:
        value = fn.__globals__.get(name)
        if value is None or isinstance(value, (JITFunction, types.ModuleType, type)):
            continue
        if type(value).__name__ == "InterpretedFunction":
            swaps[name] = _jit_function(value, seen)
    if not swaps:
        return fn
    namespace = dict(fn.__globals__, **swaps)
    copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__, copy.__qualname__, copy.__module__ = fn.__kwdefaults__, fn.__qualname__, fn.__module__
    copy.__annotations__ = fn.__annotations__
    return copy


def _jit_function(kernel, seen: dict | None = None):
    """A compiler-ready JITFunction for ``kernel``, whatever mode the course runs in."""
    from triton.runtime.jit import JITFunction

    if isinstance(kernel, JITFunction):
        return kernel
    seen = {} if seen is None else seen
    fn = python_function(kernel)
    if fn in seen:
        return seen[fn]
    jf = JITFunction(_with_compilable_globals(fn, seen), **_jit_options(kernel))
    seen[fn] = jf
    return jf


def _target(target):
    from triton.backends.compiler import GPUTarget

    return target if isinstance(target, GPUTarget) else GPUTarget(*target)


def _backend(target):
    from triton.compiler.compiler import make_backend

    return make_backend(_target(target))


# --------------------------------------------------------------------------------------------------
# specialization: what a launch derives from its arguments


@dataclass(frozen=True)
class ArgSpec:
    """One kernel argument as the JIT sees it at a launch."""

    name: str
    type: str  # "*fp32" (pointer to fp32), "i32", "fp32", or "constexpr"
    value: object = None  # the value, for constexprs (a tl.constexpr or an int equal to 1)
    divisible_by_16: bool = False  # pointers: address % 16 == 0; integers: value % 16 == 0

    def describe(self) -> str:
        if self.type == "constexpr":
            return f"{self.name} = {self.value!r} (constexpr: compiled into the kernel)"
        if self.divisible_by_16:
            return f"{self.name}: {self.type}, divisible by 16"
        return f"{self.name}: {self.type}"


def specialization(kernel, *args, **kwargs) -> list[ArgSpec]:
    """What Triton's JIT would key its cache on for this launch, worked out without launching.

    Integers equal to 1 become constexprs; pointers and integers divisible by 16 are marked so
    (unless the kernel says ``do_not_specialize`` / ``do_not_specialize_on_alignment``); constexpr
    arguments contribute their value. Two launches with equal lists share one compiled kernel.
    """
    from triton.backends.compiler import BaseBackend
    from triton.runtime.jit import KernelParam, native_specialize_impl

    fn = python_function(kernel)
    opts = _jit_options(kernel)
    signature = inspect.signature(fn)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    result = []
    for i, (name, param) in enumerate(signature.parameters.items()):
        value = bound.arguments[name]
        kp = KernelParam(
            i,
            param,
            i in opts["do_not_specialize"] or name in opts["do_not_specialize"],
            i in opts["do_not_specialize_on_alignment"] or name in opts["do_not_specialize_on_alignment"],
        )
        if kp.is_constexpr:
            result.append(ArgSpec(name, "constexpr", value))
            continue
        if isinstance(value, (tuple, list)):
            raise TypeError(f"argument {name!r} is a tuple: specialization() handles flat arguments only")
        ty, attr = native_specialize_impl(BaseBackend, value, kp.is_const, not kp.do_not_specialize,
                                          not kp.do_not_specialize_on_alignment)[:2]  # fmt: skip
        if kp.annotation_type:  # an annotated argument (x: tl.int64) keeps its annotated type
            floating = kp.annotation_type == "u1" or kp.annotation_type[:2] in ("fp", "bf")
            ty, attr = kp.annotation_type, (None if floating or kp.do_not_specialize else attr)
        if ty == "constexpr":
            result.append(ArgSpec(name, "constexpr", attr))
        else:
            result.append(ArgSpec(name, ty, None, isinstance(attr, str) and "D" in attr))
    return result


# --------------------------------------------------------------------------------------------------
# compiling for a GPU target


def compile_for(
    kernel,
    signature: dict[str, str],
    constexprs: dict | None = None,
    aligned: bool | Iterable[str] = True,
    target=DEFAULT_TARGET,
    **options,
):
    """Compile ``kernel`` for ``target`` (no GPU needed) and return Triton's CompiledKernel.

    ``signature`` gives the type of each runtime argument ("*fp32", "i32", ...); ``constexprs`` the
    value of each constexpr. ``aligned`` says which arguments carry the divisibility-by-16 promise
    the JIT gives to aligned pointers and to integers that are multiples of 16: True for all
    pointers and integers, False for none, or a list of names. ``options``: num_warps, num_stages.
    """
    import triton
    from triton.compiler import ASTSource

    jf = _jit_function(kernel)
    constexprs = dict(constexprs or {})
    names = list(jf.arg_names)
    unknown = [n for n in list(signature) + list(constexprs) if n not in names]
    if unknown:
        raise ValueError(f"{jf.__name__} has no argument {', '.join(unknown)}; its arguments: {', '.join(names)}")
    missing = [n for n in names if n not in signature and n not in constexprs]
    if missing:
        raise ValueError(f"give a type in signature or a value in constexprs for: {', '.join(missing)}")
    full_signature = {n: ("constexpr" if n in constexprs else signature[n]) for n in names}
    if aligned is True:
        hinted = [n for n in names if n in signature and _can_divide(signature[n])]
    elif aligned is False:
        hinted = []
    else:
        hinted = list(aligned)
        wrong = [n for n in hinted if n not in signature or not _can_divide(signature[n])]
        if wrong:
            raise ValueError(f"only pointer and integer arguments can be aligned, not: {', '.join(wrong)}")
    attrs = {(names.index(n),): _backend(target).parse_attr("D") for n in hinted}
    source = _gluon_source() if type(jf).__name__ == "GluonJITFunction" else ASTSource
    src = source(fn=jf, signature=full_signature, constexprs=constexprs, attrs=attrs)
    with _compilable_language():
        return triton.compile(src, target=_target(target), options=options or None)


def _gluon_source():
    """Gluon kernels (@gluon.jit, chapter 09) go through Gluon's own front end."""
    from triton.experimental.gluon._runtime import GluonASTSource

    return GluonASTSource


@contextmanager
def _compilable_language():
    """In CPU mode Triton's own @jit helpers (tl.max, tl.sum, tl.softmax, ...) are interpreted
    functions too, and the compiler cannot call those: swap in JITFunctions while compiling."""
    import triton.language as tl
    import triton.language.standard as standard

    swapped = []
    seen: dict = {}
    for module in (tl, standard):
        for name, value in list(vars(module).items()):
            if type(value).__name__ == "InterpretedFunction":
                swapped.append((module, name, value))
                setattr(module, name, _jit_function(value, seen))
    try:
        yield
    finally:
        for module, name, value in swapped:
            setattr(module, name, value)


def _can_divide(ty: str) -> bool:
    return ty.startswith("*") or ty[:1] in ("i", "u") and ty != "u1"


def compile_for_args(kernel, *args, target=DEFAULT_TARGET, num_warps=None, num_stages=None, **kwargs):
    """Compile ``kernel`` for ``target`` exactly as a launch with these arguments would specialize it
    (see ``specialization``). The tensors can live on the CPU: only their dtype and address count."""
    options = {k: v for k, v in (("num_warps", num_warps), ("num_stages", num_stages)) if v is not None}
    params = _jit_function(kernel).arg_names
    # a kernel may take num_warps as a constexpr of its own (Gluon kernels do): the launch option too
    spec = specialization(kernel, *args, **kwargs, **{k: v for k, v in options.items() if k in params})
    return compile_for(
        kernel,
        {a.name: a.type for a in spec if a.type != "constexpr"},
        {a.name: a.value for a in spec if a.type == "constexpr"},
        aligned=[a.name for a in spec if a.divisible_by_16],
        target=target,
        **options,
    )


def recorded_launches(launcher, *args, **kwargs) -> list:
    """(kernel, args, kwargs) of every launch ``launcher(*args, **kwargs)`` makes, none of them run: the
    tensors can live on the CPU, in either mode, for any kernel (Gluon's too). What the launcher does
    with the outputs in between is its own business: nothing is computed."""
    from . import hooks

    hooks.install()
    launches: list = []

    def skip(fn_obj, launch_args, launch_kwargs):
        launches.append((fn_obj, tuple(launch_args), dict(launch_kwargs)))
        return hooks.SKIP

    hooks.launch_listeners.append(skip)
    try:
        launcher(*args, **kwargs)
    finally:
        hooks.launch_listeners.remove(skip)
    return launches


def compile_launch(launch, target=DEFAULT_TARGET):
    """Compile one recorded launch, (kernel, args, kwargs), for ``target`` as it was specialized."""
    fn_obj, launch_args, launch_kwargs = launch
    launch_kwargs = dict(launch_kwargs)
    options = {k: launch_kwargs.pop(k) for k in ("num_warps", "num_stages") if k in launch_kwargs}
    params = _jit_function(fn_obj).arg_names
    kernel_kwargs = {k: v for k, v in launch_kwargs.items() if k in params}
    return compile_for_args(fn_obj, *launch_args, target=target, **kernel_kwargs, **options)


def compile_first_launch(launcher, *args, target=DEFAULT_TARGET, **kwargs):
    """Compile for ``target`` (sm_90 by default) the first kernel ``launcher(*args, **kwargs)`` launches,
    exactly as that launch specialized it, without running anything (no GPU needed). Returns (kernel,
    compiled), or None when the launcher launched nothing."""
    launches = recorded_launches(launcher, *args, **kwargs)
    if not launches:
        return None
    return launches[0][0], compile_launch(launches[0], target)


def asm(compiled, kind: str = "ptx"):
    """One level of a compiled kernel's code: "ttir", "ttgir", "llir", "ptx" (text) or "cubin" (bytes)."""
    code = getattr(compiled, "asm", None)
    if code is None:
        raise TypeError(f"{compiled!r} is no compiled kernel: use compile_for, or a GPU launch's return value")
    if kind not in code:
        raise KeyError(f"no {kind!r} in this compiled kernel; it has: {', '.join(code.keys())}")
    return code[kind]


def sass(compiled) -> str:
    """The SASS of a compiled kernel: the GPU's own machine code, which ptxas makes from the PTX and
    which the GPU runs. One PTX instruction can become many (``div.full.f32`` becomes a reciprocal
    with range checks around it), so counting instructions means counting these. Disassembled by the
    ``cuobjdump`` that ships inside Triton's NVIDIA backend; no GPU is needed."""
    import subprocess

    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not tool.exists():
        raise FileNotFoundError(f"no cuobjdump at {tool}: this Triton has no NVIDIA backend tools")
    with tempfile.TemporaryDirectory() as folder:
        cubin = Path(folder) / "kernel.cubin"
        cubin.write_bytes(asm(compiled, "cubin"))
        done = subprocess.run([str(tool), "-sass", str(cubin)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"cuobjdump failed: {done.stderr.strip()[:300]}")
    return done.stdout


_SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)")


def sass_opcodes(sass_text: str) -> Counter:
    """How many times each opcode appears in SASS text, by its name before the first dot
    (``MUFU.RSQ`` and ``MUFU.EX2`` both count as ``MUFU``), predicated ones included. Instructions
    are counted as written, once each: a loop's body counts once, however often it runs."""
    found = Counter()
    for line in sass_text.splitlines():
        m = _SASS_LINE.match(line)
        if m:
            found[m.group(1)] += 1
    return found


def lines_with(text: str, pattern: str, limit: int | None = None) -> list[str]:
    """The lines of ``text`` that match the regular expression ``pattern``, stripped."""
    found = [line.strip() for line in text.splitlines() if re.search(pattern, line)]
    return found if limit is None else found[:limit]


_LOCATION = re.compile(r"\s*\bloc\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)")


def strip_locations(ir: str) -> str:
    """MLIR text (TTIR, TTGIR) without its source locations: ``loc(#loc3)``, ``loc("x_ptr"(#loc))``
    and the ``#locN = ...`` lines that define them."""
    kept = [line for line in ir.splitlines() if not re.match(r"\s*#loc\d* = ", line)]
    return "\n".join(_LOCATION.sub("", line) for line in kept)


# ld.global.v4.b32, ld.global.nc.L1::evict_last.v2.b16, st.global.b32, ... : vector count and bits
_ACCESS = re.compile(r"\b(ld|st)\.global((?:\.[\w:]+)*)")


def access_bytes(parts) -> int:
    """Bytes one thread moves with a load or store whose opcode is split at its dots: ld.global.v4.b32
    -> ["ld", "global", "v4", "b32"] -> 4 lanes of 32 bits = 16."""
    lanes = next((int(p[1:]) for p in parts if re.fullmatch(r"v\d", p)), 1)
    bits = next((int(p[1:]) for p in parts if re.fullmatch(r"[bfsu]\d+", p)), 0)
    return lanes * bits // 8


def _access_widths(ptx: str, op: str) -> dict[int, int]:
    widths: Counter[int] = Counter()
    for match in _ACCESS.finditer(ptx):
        if match.group(1) == op:
            widths[access_bytes(match.group(2).split("."))] += 1
    return dict(sorted(widths.items()))


def load_widths(ptx: str) -> dict[int, int]:
    """{bytes one thread loads per instruction: how many such global loads} in PTX text.

    16 is the widest (ld.global.v4.b32: four 32-bit words); 4 is one fp32 (ld.global.b32)."""
    return _access_widths(ptx, "ld")


def store_widths(ptx: str) -> dict[int, int]:
    """As ``load_widths``, for global stores (st.global...)."""
    return _access_widths(ptx, "st")


# --------------------------------------------------------------------------------------------------
# the compile cache


def cache_dir() -> Path:
    """The on-disk compile cache Triton uses now: $TRITON_CACHE_DIR, or ~/.triton/cache."""
    import triton

    return Path(triton.knobs.cache.dir)


@contextmanager
def using_cache_dir(path: str | os.PathLike | None = None):
    """Compile into another cache folder (a fresh temporary one when ``path`` is None) inside the block."""
    import triton

    with ExitStack() as stack:
        if path is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="triton-cache-")))
        else:
            folder = Path(path)
        with triton.knobs.cache.scope():
            triton.knobs.cache.dir = str(folder)
            yield folder


def cache_listing(folder: str | os.PathLike) -> list[tuple[str, int]]:
    """(path relative to ``folder``, size in bytes) of every file in a compile cache folder."""
    folder = Path(folder)
    return [(str(p.relative_to(folder)), p.stat().st_size) for p in sorted(folder.rglob("*")) if p.is_file()]


@dataclass(frozen=True)
class CompileTiming:
    cold_s: float  # nothing in the cache: the whole pipeline ran
    warm_s: float  # the same compile again, read back from the on-disk cache: the best of WARM_TRIES
    files: list  # what the cold compile left in the cache folder: (path, bytes)
    rewritten: list = field(default_factory=list)  # files a warm compile wrote again: none on a cache hit

    def __str__(self) -> str:
        return (
            f"cold compile {self.cold_s * 1e3:.0f} ms, warm (on-disk cache hit) {self.warm_s * 1e3:.1f} ms: "
            f"{self.cold_s / self.warm_s:.0f}x"
        )


WARM_TRIES = 3  # a warm compile takes milliseconds: one busy moment of the machine would be all of it


def _stamps(folder: Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def time_compile(compile_once) -> CompileTiming:
    """Time ``compile_once()`` (e.g. ``lambda: compile_for_args(...)``) into a fresh, empty cache
    folder, then again from that folder's cache (the best of WARM_TRIES). Compile time, on this
    machine's CPU: no kernel runs. ``rewritten`` names any file a warm compile wrote again."""
    with using_cache_dir() as folder:
        start = time.perf_counter()
        compile_once()
        cold = time.perf_counter() - start
        files = cache_listing(folder)
        stamps = _stamps(folder)
        warm = []
        for _ in range(WARM_TRIES):
            start = time.perf_counter()
            compile_once()
            warm.append(time.perf_counter() - start)
        after = _stamps(folder)
        rewritten = sorted(str(p.relative_to(folder)) for p, t in after.items() if stamps.get(p) != t)
    return CompileTiming(cold, min(warm), files, rewritten)


def jit_cache_keys(kernel) -> list:
    """The keys of a launched kernel's in-memory cache, one per compiled specialization (GPU mode:
    the interpreter compiles nothing and keeps no such cache)."""
    if not runtime.is_gpu():
        raise RuntimeError("in CPU mode kernels are interpreted, not compiled: there is no JIT cache to show")
    jf = _jit_function(kernel)
    keys = []
    for caches in jf.device_caches.values():
        keys.extend(caches[0].keys())
    return keys


# --------------------------------------------------------------------------------------------------
# autotuners


def describe_config(config) -> str:
    """A triton.Config as one short line: its meta-parameters, then num_warps and num_stages."""
    kwargs = ", ".join(f"{k}={v}" for k, v in config.kwargs.items())
    return f"{kwargs}, num_warps={config.num_warps}, num_stages={config.num_stages}"


def autotuners_in(namespace) -> dict[str, object]:
    """{name: Autotuner} for every ``@triton.autotune`` kernel among a module's (or dict's) globals,
    also under a ``@triton.heuristics``."""
    from triton.runtime.autotuner import Autotuner

    items = namespace.items() if isinstance(namespace, dict) else vars(namespace).items()
    found = {}
    for name, value in items:
        obj, depth = value, 0
        while obj is not None and depth < 8:
            if isinstance(obj, Autotuner):
                found[name] = obj
                break
            obj, depth = getattr(obj, "fn", None), depth + 1
    return found


# --------------------------------------------------------------------------------------------------
# what torch.compile generates

INDUCTOR_RECORD = "torch_compile_bias_gelu_h200.json"


def bias_gelu(x, bias):
    """y = GELU(x + bias), tanh form: the small function whose torch.compile output the course shows."""
    import torch

    return torch.nn.functional.gelu(x + bias, approximate="tanh")  # read x and bias, write y


_INDUCTOR_KERNEL = re.compile(r"async_compile\.triton\(\s*['\"](\w+)['\"]\s*,\s*'''(.*?)'''", re.S)


def triton_kernels_in(inductor_code: str) -> dict[str, str]:
    """{kernel name: Triton source} of the kernels in a module Inductor generated."""
    return {name: source.strip("\n") for name, source in _INDUCTOR_KERNEL.findall(inductor_code)}


def capture_inductor_code(path: str | os.PathLike | None = None, shape=(4096, 4096), dtype: str = "float16") -> dict:
    """Compile ``bias_gelu`` with torch.compile on the GPU and capture the code Inductor writes.

    Returns {"meta", "function", "shape", "dtype", "compile_s", "code", "kernels"}; with ``path``,
    also writes it there as JSON (``results/torch_compile_bias_gelu_h200.json`` is what the course
    shows in CPU mode). The compile runs with an empty Inductor cache, so compile_s is a cold start.
    """
    import datetime
    import json

    import torch
    from torch._inductor import utils as inductor_utils

    if not runtime.is_gpu():
        raise RuntimeError("capture_inductor_code needs a GPU: Inductor writes Triton kernels for CUDA devices")
    fresh = getattr(inductor_utils, "fresh_cache", None) or inductor_utils.fresh_inductor_cache
    x = torch.randn(shape, device="cuda", dtype=getattr(torch, dtype))  # (M, N)
    bias = torch.randn(shape[-1], device="cuda", dtype=getattr(torch, dtype))  # (N,)
    compiled = torch.compile(bias_gelu)
    with fresh():
        torch.cuda.synchronize()
        start = time.perf_counter()
        y, codes = inductor_utils.run_and_get_code(compiled, x, bias)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - start
    torch.testing.assert_close(y, bias_gelu(x, bias), rtol=2e-3, atol=2e-3)
    code = "\n\n".join(codes)
    info = runtime.gpu_info()
    record = {
        "meta": {
            "gpu": info.name if info else "?",
            "versions": runtime.versions(),
            "date": datetime.date.today().isoformat(),
            "how": "course_lib.compilation.capture_inductor_code (torch._inductor.utils.run_and_get_code)",
        },
        "function": inspect.getsource(bias_gelu),
        "shape": list(shape),
        "dtype": dtype,
        "compile_s": round(compile_s, 2),
        "code": code,
        "kernels": triton_kernels_in(code),
    }
    if path is not None:
        Path(path).write_text(json.dumps(record, indent=1) + "\n")
    return record


def recorded_inductor_capture(name: str = INDUCTOR_RECORD) -> dict | None:
    """The recorded capture from results/, or None when there is none yet."""
    import json

    from .results import results_dir

    path = results_dir() / name
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    record["path"] = str(path.relative_to(runtime.course_root()))
    return record
