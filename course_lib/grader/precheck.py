"""A static pre-check of a task file, run by the grader's process before any of the file runs.

A task file holds @triton.jit (or @gluon.jit) kernels and a launcher. The grader imports it in a
worker process, inside an operating-system sandbox when anyone but the learner grades it
(``sandbox``); that boundary keeps the room, the solutions and the hidden cases out of reach. What it
cannot keep out is a lie about the worker's own process: a submission that patches the worker, runs
torch where a kernel should run, or hands the grader a tensor that misreports its layout. This check
is the first line against that, and a teacher: it names the line and says what to write instead.

It parses the source with ``ast`` (it never runs it) and works as an allow-list, resolved against
the real objects in this process:

* imports: triton, torch, numpy, math, functools, itertools, typing, dataclasses, __future__,
  course_lib.tuned and course_lib.barriers; a relative import or a file beside the task file never;
* every name reached from an import (``tl.load``, ``torch.empty``, ``TensorDescriptor.from_tensor``)
  is looked up here and must be a function, type or constant on the allow-list (``ALLOWED``); a
  module is never a value (``f(torch)``, ``F = torch.nn.functional``); nothing that evaluates
  strings or deserializes objects is on the list (``torch.load``, ``typing.get_type_hints``,
  ``functools.singledispatch``, ``numpy.load``, ``torch.hub``);
* decorators must be known ones (``triton.jit``, ``triton.autotune``, ``gluon.jit``, ...);
* what resolves nothing statically is checked by name: private and dunder attributes, attributes
  that lead out of the program whatever their base (``.tofile``, ``.gi_frame``, ``.os``), builtins
  that run or reach code by string (``eval``, ``getattr``, ``open``), ``match`` class patterns with
  keyword attributes, string annotations, assignments into a module.

A file the checker itself cannot read (nested too deeply, say) is the file's failure, said plainly.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import io
import symtable
import sys
import textwrap
import threading
import tokenize
import types
from dataclasses import dataclass
from functools import cache
from pathlib import Path


@dataclass(frozen=True)
class Finding:
    line: int  # 1-based line in the file
    code: str  # the offending source line, stripped
    rule: str  # import, not-allowed, module-value, decorator, private-attribute, escape-attribute,
    # torch-mode, builtin, dunder-name, module-assignment, match-attribute, string-annotation, unreadable
    message: str  # one sentence for the learner: what is not allowed, why, and what to do instead


# --------------------------------------------------------------------------------------------------
# the allow-list

# The order is the one the import message lists them in.
_ALLOWED_IN_ORDER = (
    "triton",
    "torch",
    "numpy",
    "math",
    "functools",
    "itertools",
    "typing",
    "dataclasses",
    "__future__",
    "course_lib.tuned",
    "course_lib.barriers",
)
ALLOWED_IMPORTS = frozenset(_ALLOWED_IN_ORDER)
_ALLOWED_TEXT = ", ".join(_ALLOWED_IN_ORDER[:-1]) + " and " + _ALLOWED_IN_ORDER[-1]

# Private names a task file may one day need; each would be reviewed and added here by name.
ALLOWED_PRIVATE_ATTRIBUTES = frozenset()

EVERYTHING = "*"  # every public name of the module (and of its public submodules listed here)

# What a task file may reach, module by module: the names allowed in each (EVERYTHING: every public
# one). A module path not listed is not allowed at all. The torch list is what kernels' launchers
# (allocation, views, shapes) and chapter 10's torch steps (matmuls, gathers, padding) use.
ALLOWED: dict[str, frozenset[str] | str] = {
    "math": EVERYTHING,
    "itertools": EVERYTHING,
    "functools": frozenset("partial reduce lru_cache cache cached_property wraps total_ordering cmp_to_key".split()),
    "typing": frozenset(
        """Any Optional Union Tuple List Dict Set FrozenSet Sequence Mapping Iterable Iterator Callable
        Literal Final ClassVar NamedTuple TypeVar Generic Protocol TYPE_CHECKING cast overload""".split()
    ),
    "dataclasses": frozenset("dataclass field fields replace asdict astuple InitVar".split()),
    "__future__": frozenset({"annotations"}),
    "course_lib.tuned": EVERYTHING,
    "course_lib.barriers": EVERYTHING,
    "triton": frozenset(
        """jit autotune heuristics Config cdiv next_power_of_2 constexpr_function must_use_result aggregate
        reinterpret JITFunction TensorWrapper language experimental tools""".split()
    ),
    "triton.language": EVERYTHING,
    "triton.language.math": EVERYTHING,
    "triton.language.random": EVERYTHING,
    "triton.language.standard": EVERYTHING,
    "triton.language.extra": EVERYTHING,
    "triton.language.extra.libdevice": EVERYTHING,
    "triton.language.extra.cuda": EVERYTHING,
    "triton.language.extra.cuda.libdevice": EVERYTHING,
    "triton.experimental": frozenset({"gluon"}),
    "triton.experimental.gluon": frozenset("jit constexpr_function must_use_result aggregate language nvidia".split()),
    "triton.experimental.gluon.language": EVERYTHING,
    "triton.experimental.gluon.language.nvidia": EVERYTHING,
    "triton.experimental.gluon.language.nvidia.hopper": EVERYTHING,
    "triton.experimental.gluon.language.nvidia.hopper.tma": EVERYTHING,
    "triton.experimental.gluon.language.nvidia.hopper.mbarrier": EVERYTHING,
    "triton.experimental.gluon.language.nvidia.blackwell": EVERYTHING,
    "triton.experimental.gluon.language.nvidia.blackwell.tma": EVERYTHING,
    "triton.experimental.gluon.language.nvidia.ampere": EVERYTHING,
    "triton.experimental.gluon.language.nvidia.ampere.async_copy": EVERYTHING,
    "triton.experimental.gluon.language.nvidia.ampere.mbarrier": EVERYTHING,
    "triton.experimental.gluon.nvidia": frozenset({"hopper", "blackwell"}),
    "triton.experimental.gluon.nvidia.hopper": frozenset({"TensorDescriptor"}),
    "triton.experimental.gluon.nvidia.blackwell": frozenset({"TensorDescriptor"}),
    "triton.tools": frozenset({"tensor_descriptor"}),
    "triton.tools.tensor_descriptor": frozenset({"TensorDescriptor"}),
    "torch": frozenset(
        """
        Tensor Size dtype device Generator finfo iinfo layout memory_format strided contiguous_format
        channels_last no_grad inference_mode enable_grad set_grad_enabled is_grad_enabled
        is_tensor is_floating_point is_complex numel result_type promote_types can_cast broadcast_shapes
        get_default_dtype
        empty empty_like empty_strided zeros zeros_like ones ones_like full full_like arange linspace eye
        tensor as_tensor rand rand_like randn randn_like randint randperm
        reshape transpose permute t narrow select squeeze unsqueeze flatten unflatten split chunk unbind stack
        cat concat concatenate hstack vstack index_select gather scatter take_along_dim as_strided movedim
        swapaxes broadcast_to repeat_interleave tile flip roll diagonal diag tril triu masked_select
        add sub subtract mul multiply div divide true_divide floor_divide matmul mm bmm baddbmm addmm addbmm
        einsum tensordot dot outer inner exp exp2 expm1 log log2 log1p log10 sqrt rsqrt tanh sigmoid erf erfc
        abs neg maximum minimum max min amax amin aminmax sum mean var std prod cumsum cumprod softmax
        log_softmax where clamp clip relu pow square sign floor ceil round trunc fmod remainder isnan isinf
        isfinite nan_to_num allclose isclose equal eq ne lt le gt ge logical_and logical_or logical_not
        logical_xor any all argmax argmin topk sort argsort unique unique_consecutive bincount count_nonzero
        nonzero norm dist searchsorted bucketize
        lerp addcmul addcdiv sin cos reciprocal bitwise_and bitwise_or bitwise_xor bitwise_not
        float64 float32 float16 bfloat16 half float double int64 int32 int16 int8 uint8 uint16 uint32
        uint64 bool long int short float8_e4m3fn float8_e5m2 complex64 complex128 cuda nn linalg special fft
        """.split()
    ),
    "torch.nn": frozenset({"functional"}),
    "torch.nn.functional": EVERYTHING,
    "torch.linalg": EVERYTHING,
    "torch.special": EVERYTHING,
    "torch.fft": EVERYTHING,
    "torch.cuda": frozenset(
        """is_available device_count current_device get_device_properties get_device_capability
        get_device_name synchronize""".split()
    ),
    "numpy": frozenset(
        """float64 float32 float16 int64 int32 int16 int8 uint64 uint32 uint16 uint8 bool_ dtype
        pi e inf nan prod ceil floor sqrt log2 exp abs maximum minimum isclose allclose""".split()
    ),
}

# Names of modules allowed whole that are not allowed anyway: str_to_ty evaluates part of its string.
NOT_ALLOWED = frozenset({"triton.language.str_to_ty", "triton.experimental.gluon.language.str_to_ty"})

# What no allow-list entry may be, checked when the list is resolved (tests/test_precheck.py): each
# evaluates strings, unpickles objects, reads or writes files, or swaps a global hook.
NEVER = (
    "builtins.eval builtins.exec builtins.compile builtins.open builtins.__import__ pickle.loads pickle.load "
    "torch.load torch.save torch.from_file torch.compile typing.get_type_hints functools.singledispatch "
    "numpy.load numpy.save numpy.fromfile"
).split()

# Attributes of an allowed type that are not allowed anyway: they turn data into files, numpy arrays
# or mapped memory, outside the kernels' and the grader's sight.
TYPE_ATTRIBUTES_NEVER = frozenset("from_file numpy tofile dump dumps save loads share_memory_ register_hook".split())

# Attribute names that lead out of the kernel and launcher whatever they are looked up on (a local
# variable, a call's result): re-exported modules (torch.sys, numpy.ctypeslib), the operating system,
# torch's compilers and operator registry, files, pickles, and frames (gen.gi_frame.f_globals).
ESCAPE_ATTRIBUTES = frozenset(
    """
    sys os modules builtins ctypes ctypeslib subprocess signal threading multiprocessing importlib gc inspect
    system popen spawnv kill cudart cpp_extension library ops overrides compile driver knobs runtime
    tofile fromfile from_file dump dumps loads numpy pickle marshal serialization hub FileLister FileOpener
    read_text write_text read_bytes write_bytes unlink rmdir mkdir chmod symlink
    gi_frame gi_code cr_frame cr_code ag_frame ag_code tb_frame tb_next f_back f_globals f_locals f_builtins
    f_code co_code co_consts func_globals set_allocator untyped_storage storage handle
    """.split()
)

# Decorators a task file may use: each is known not to run code of the file's own at import.
ALLOWED_DECORATORS = frozenset(
    """
    triton.jit triton.autotune triton.heuristics triton.constexpr_function triton.must_use_result
    triton.aggregate triton.experimental.gluon.jit triton.experimental.gluon.constexpr_function
    triton.experimental.gluon.must_use_result triton.experimental.gluon.aggregate
    functools.lru_cache functools.cache functools.wraps functools.cached_property functools.total_ordering
    dataclasses.dataclass typing.overload
    """.split()
)
ALLOWED_BUILTIN_DECORATORS = frozenset({"staticmethod", "classmethod", "property"})
JIT_DECORATORS = frozenset({"triton.jit", "triton.experimental.gluon.jit"})
PROPERTY_PARTS = frozenset({"setter", "getter", "deleter"})

# Torch function and dispatch modes intercept every torch operation, the grader's own checks included.
_TORCH_MODE_MARKERS = ("TorchFunction", "TorchDispatch", "torch_function", "torch_dispatch", "disable_torch")

# Builtins that open escape hatches, with why. A parameter or local variable of the same name (a
# launcher's input, say) is not the builtin and passes; a module-level or class-level one does not,
# since there the builtin is still what the name reads before the assignment (open = open).
_RUNS_HIDDEN_CODE = "it runs code the pre-check cannot read"
_BY_STRING = "it reaches names and attributes by string, out of the pre-check's sight; write obj.attr instead"
_INTERACTIVE = "it talks to the terminal or stops the interpreter, and the grader runs without one"
BANNED_BUILTINS = {
    "open": "it reads and writes files, and a task file computes only from the tensors it is given",
    "exec": _RUNS_HIDDEN_CODE,
    "eval": _RUNS_HIDDEN_CODE,
    "compile": _RUNS_HIDDEN_CODE,
    "__import__": "it imports modules past the import allow-list; use an import statement",
    "getattr": _BY_STRING,
    "setattr": _BY_STRING,
    "delattr": _BY_STRING,
    "globals": _BY_STRING,
    "locals": _BY_STRING,
    "vars": _BY_STRING,
    "breakpoint": _INTERACTIVE,
    "input": _INTERACTIVE,
    "exit": _INTERACTIVE,
    "quit": _INTERACTIVE,
    "help": _INTERACTIVE,
    "memoryview": "it reaches raw memory; a launcher passes tensors to its kernels instead",
    "super": "it reaches methods past their overrides, which a kernel and launcher never need",
}

# Module attributes a task file may read (`if __name__ == "__main__":`); every other `__name`
# (__builtins__, __loader__, __spec__) is a way into the interpreter.
ALLOWED_DUNDER_NAMES = frozenset({"__name__", "__file__", "__doc__"})
# A module's export list: a plain list of strings that nothing in the grader reads.
_PLAIN_DUNDERS = frozenset({"__all__"})

_INTERNALS = "private and dunder attributes reach the interpreter's internals; use the public API of torch and triton"
_ESCAPE = (
    "it leads out of the kernel and launcher to the interpreter, the operating system, files or torch's "
    "compilers; a launcher needs only tensors, triton and its kernels"
)
_TORCH_MODE = (
    "torch function and dispatch modes change what every torch operation does, the grader's checks included; "
    "compute with your kernels instead"
)
_MODULE_VALUE = (
    "a module is never a value in a task file: use the names you need from it directly "
    "(import torch.nn.functional as F, then F.pad; or tl.load)"
)
_DECORATOR = (
    "decorators run code at import; a task file may use triton.jit, triton.autotune, triton.heuristics, "
    "gluon.jit, functools.lru_cache/cache/wraps, dataclasses.dataclass, staticmethod, classmethod and property"
)
_MATCH = (
    "a class pattern with keyword attributes reads attributes by name, out of the pre-check's sight; "
    "match on values, or read the attributes with obj.attr"
)
_UNDEFINED = (
    "a task file may use only the names it imports or defines and Python's builtins; some tools put names "
    "of their own among a module's globals (Triton's interpreter does), and those are not the file's"
)
_BUILTIN_PATTERN_CLASSES = frozenset("bool bytearray bytes dict float frozenset int list set str tuple".split())
_MATCH_POSITIONAL = (
    "a class pattern with sub-patterns reads the attributes its class names in __match_args__, out of the "
    "pre-check's sight; match on values, or read the attributes with obj.attr"
)
_CLASS_FROM_STRINGS = (
    "type() with three arguments makes a class from a name and a dict of strings, out of the pre-check's "
    "sight; write a class statement"
)
_METACLASS = "a metaclass runs code whenever a class is made or checked; a kernel and launcher never need one"
# Special methods that change how Python itself reads, checks, makes or copies an object: hooks a
# kernel and launcher never need, and ways to run code where no line of the file shows it.
HOOK_METHODS = frozenset(
    """__prepare__ __instancecheck__ __subclasscheck__ __init_subclass__ __set_name__ __class_getitem__
    __getattr__ __getattribute__ __setattr__ __delattr__ __get__ __set__ __delete__ __reduce__ __reduce_ex__
    __getstate__ __setstate__ __copy__ __deepcopy__ __del__ __new__ __array__ __array_function__ __array_ufunc__
    __dlpack__ __format__ __match_args__
    __index__ __int__ __float__ __complex__ __bool__ __trunc__ __floor__ __ceil__ __round__""".split()
)
_KERNEL_DEF_LINE = (
    "a line inside a kernel that starts with `def ` (in a string or a comment's continuation) makes Triton's "
    "interpreter read the kernel from that line on: the grader would check one body and run another. "
    "Start the line otherwise"
)
_KERNEL_GLOBAL = (
    "a kernel may read, of the file's own globals, only other kernels (@triton.jit), tl.constexpr values and "
    "names of triton and torch; Triton refuses the rest when it compiles, and its interpreter would run them "
    "as Python: pass the value as an argument, or make it a tl.constexpr"
)
# the form that makes one: the annotation alone (`X: tl.constexpr = 1.5`) leaves a float, which Triton refuses
_KERNEL_GLOBAL_FORM = "`{name} = tl.constexpr(...)` (an annotation, `{name}: tl.constexpr = ...`, is not one)"
_JIT_CALL = "write @triton.jit above the function: a kernel made by a call is not read the way Triton reads it"
_MAYBE_UNBOUND = (
    "is bound only in a branch or a function that may not run, and Triton's interpreter fills a name of "
    "its own into such a gap (inspect, np, math, ...): import it at the top of the file"
)
_STRING_ANNOTATION = (
    "a string annotation is code the pre-check cannot read, and some tools evaluate it; write the "
    "annotation without quotes (tl.constexpr), or leave it out"
)
# Scopes nested in a function whose names are not the function's own.
_NESTED_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def _is_torch_mode(name: str) -> bool:
    return any(marker in name for marker in _TORCH_MODE_MARKERS)


# Modules the checker may import in this process to resolve a name (library code, never the file's).
_IMPORTABLE = tuple(name for name in ALLOWED if not name.startswith("course_lib")) + (
    "course_lib.tuned",
    "course_lib.barriers",
)


def _module(path: str):
    """The module at ``path`` if it is on the allow-list (imported here if need be), else None."""
    if path not in ALLOWED:
        return None
    if path in sys.modules:
        return sys.modules[path]
    try:
        return importlib.import_module(path)
    except Exception:  # noqa: BLE001 (a module this install lacks, e.g. one of another Triton release)
        return None


_CONSTANT_TYPES = (int, float, complex, str, bytes, bool, type(None))


_CONSTANT_CLASSES = frozenset(
    """torch.dtype torch.layout torch.memory_format triton.language.core.dtype triton.language.core.pointer_type
    triton.language.core.constexpr numpy.dtype""".split()
)


def _is_constant(obj) -> bool:
    """Plain data: a number, text, a dtype (torch's, Triton's, numpy's) or a numpy scalar type."""
    import numpy

    if isinstance(obj, _CONSTANT_TYPES):
        return True
    if f"{type(obj).__module__}.{type(obj).__qualname__}" in _CONSTANT_CLASSES:
        return True
    return isinstance(obj, type) and issubclass(obj, numpy.generic)


class Resolved:
    """What a dotted path from an import resolves to: an allowed object, or why not."""

    def __init__(self, path: str, obj=None, problem: str | None = None, is_module: bool = False, at: int = -1):
        self.path, self.obj, self.problem, self.is_module = path, obj, problem, is_module
        self.at = at  # the index of the name in the path where the walk stopped, for a problem


@cache
def resolve(path: str) -> Resolved:
    """Walk ``path`` (``torch.nn.functional.pad``) from its module through the allow-list."""
    parts = path.split(".")
    # the longest prefix that is an allowed module
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in ALLOWED:
            module = _module(prefix)
            break
    else:
        top = parts[0]
        if top == "course_lib":
            return Resolved(path, problem=_course_lib_message(path))
        return Resolved(path, problem=_import_message(top))
    if module is None:
        return Resolved(path, problem=f"{prefix} is not available in this installation")
    obj, where = module, prefix
    if cut == len(parts):
        return Resolved(path, obj, is_module=True)
    for i in range(cut, len(parts)):
        name = parts[i]
        if isinstance(obj, types.ModuleType):
            allowed = ALLOWED.get(where)
            submodule = f"{where}.{name}"
            if allowed is None:
                return Resolved(path, at=i, problem=f"{where} is not on the task file's allow-list")
            if name.startswith("_") or (allowed != EVERYTHING and name not in allowed) or submodule in NOT_ALLOWED:
                return Resolved(path, at=i, problem=_not_allowed_message(submodule))
            if submodule in ALLOWED:
                child = _module(submodule)
                if child is not None:
                    obj, where = child, submodule
                    continue
            try:
                obj = getattr(obj, name)
            except AttributeError:  # a name of another release (behind a hasattr), or a typo the import reports
                return Resolved(path, obj=None)
            if isinstance(obj, types.ModuleType):
                if obj.__name__ not in ALLOWED and submodule not in ALLOWED:
                    return Resolved(path, at=i, problem=_not_allowed_message(submodule))
                where = submodule if submodule in ALLOWED else obj.__name__
            else:
                where = submodule
        elif isinstance(obj, type):
            if name.startswith("_") or name in TYPE_ATTRIBUTES_NEVER:
                return Resolved(path, at=i, problem=_not_allowed_message(f"{where}.{name}"))
            try:
                obj = getattr(obj, name)
            except AttributeError:  # nothing there to reach
                return Resolved(path, obj=None)
            where = f"{where}.{name}"
        elif _is_constant(obj):
            if name.startswith("_"):
                return Resolved(path, at=i, problem=_not_allowed_message(f"{where}.{name}"))
            return Resolved(path, obj=None)  # an attribute of a constant (torch.float16.itemsize): data
        else:
            return Resolved(path, at=i, problem=_not_allowed_message(f"{where}.{name}"))
    return Resolved(path, obj, is_module=isinstance(obj, types.ModuleType))


def _import_message(top: str) -> str:
    import importlib.util

    try:
        exists = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        exists = False
    if not exists:
        return f"there is no module named {top} (a typo?); a task file may import only {_ALLOWED_TEXT}"
    return (
        f"{top} is not an allowed import: a task file may import only {_ALLOWED_TEXT}; "
        "the grader runs your kernels and launcher, nothing else"
    )


def _course_lib_message(path: str) -> str:
    return (
        f"{path} is the course's own code: a task file may not import the course's grader; "
        "from course_lib it may use only course_lib.tuned and course_lib.barriers "
        "(from course_lib.tuned import row_config)"
    )


_WHY_NOT = {
    "torch.load": "it unpickles objects, which runs code",
    "torch.save": "it writes files",
    "torch.from_file": "it maps files into memory",
    "torch.from_numpy": "it turns numpy arrays, which the grader cannot watch, into tensors",
    "torch.frombuffer": "it reads raw memory into a tensor",
    "torch.compile": "it compiles torch code; kernels are Triton kernels",
    "torch.jit": "TorchScript is not graded; kernels are Triton kernels, decorated with @triton.jit",
    "torch.hub": "it downloads and imports code",
    "torch.serialization": "it unpickles objects, which runs code",
    "torch.utils": "it reaches data loaders, file readers and C++ extensions",
    "typing.get_type_hints": "it evaluates strings as code",
    "functools.singledispatch": "it evaluates string annotations as code",
    "numpy.load": "it reads files and can unpickle objects",
    "numpy.fromfile": "it reads files",
    "triton.runtime": (
        "it reaches Triton's driver and launcher internals (for the number of SMs, as Triton's tutorials "
        "read it there, use torch.cuda.get_device_properties(device).multi_processor_count)"
    ),
    "triton.knobs": "it changes how Triton compiles and launches for everyone in the process",
    "triton.testing": "it times kernels; the grader times them itself",
    "triton.set_allocator": (
        "it replaces the process's memory allocator for Triton's launches; the course installs one itself on a "
        "GPU (torch's caching allocator), so tl.make_tensor_descriptor works without it: delete the call"
    ),
}


def _why_not(path: str) -> str | None:
    return next((w for p, w in _WHY_NOT.items() if path == p or path.startswith(p + ".")), None)


def _not_allowed_message(path: str) -> str:
    why = _why_not(path)
    if why is None:
        return (
            f"{path} is not on the task file's allow-list: a task file uses triton.language (tl), gluon, "
            "torch's allocation, view and shape functions, and its maths in chapter 10's torch steps"
        )
    return f"{path} is not allowed: {why}"


def never_allowed() -> list[str]:
    """The NEVER entries that the allow-list does let through (tests: must be empty)."""
    leaks = []
    for path in NEVER:
        if path.startswith("builtins."):
            if path.split(".", 1)[1] not in BANNED_BUILTINS:
                leaks.append(path)
        elif resolve(path).problem is None:
            leaks.append(path)
    return leaks


def audit() -> list[str]:
    """The allowed functions (and the methods of allowed types) whose own source calls something that
    runs a string or unpickles (eval, exec, pickle.loads, ...). tests/test_precheck.py keeps it empty:
    a new release that adds such a function to triton.language is caught there, not in a room."""
    import inspect

    found = []
    for module_path, names in ALLOWED.items():
        module = _module(module_path)
        if module is None:
            continue
        public = [n for n in dir(module) if not n.startswith("_")] if names == EVERYTHING else sorted(names)
        for name in public:
            path = f"{module_path}.{name}"
            if path in NOT_ALLOWED or path in ALLOWED:
                continue
            obj = getattr(module, name, None)
            functions = [obj]
            if isinstance(obj, type):
                functions = list(vars(obj).values())
            for fn in functions:
                fn = getattr(fn, "__func__", fn)
                fn = getattr(fn, "fn", fn)  # a builtin of triton.language wraps its function
                if not inspect.isfunction(fn):
                    continue
                try:
                    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
                except (OSError, TypeError, SyntaxError, IndentationError):
                    continue
                for node in ast.walk(tree):
                    if isinstance(node, ast.Call) and _runs_a_string(node):
                        found.append(f"{path} calls {ast.unparse(node.func)}()")
    return sorted(set(found))


def _runs_a_string(call: ast.Call) -> bool:
    """eval/exec/compile of anything; an import or unpickling of anything but a fixed name."""
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    base = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else None
    fixed = bool(call.args) and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)
    if isinstance(func, ast.Name) and name in ("eval", "exec", "compile"):
        return True
    if name in ("__import__", "import_module", "run_path", "run_module"):
        return not fixed
    return name in ("load", "loads") and base in ("pickle", "marshal", "cloudpickle", "dill", "torch", "np", "numpy")


def _decorator_allowed(path: str | None) -> bool:
    return path in ALLOWED_DECORATORS


# --------------------------------------------------------------------------------------------------
# reading the file


def _imported_names(tree: ast.Module) -> dict[str, str]:
    """Each name the file binds by an import to a module or to something reached from one, with its
    dotted path (``import triton.language as tl``: tl -> triton.language)."""
    modules = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                modules[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                if alias.name != "*":
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return modules


def _resolve_chain(expr: ast.expr, modules: dict[str, str]) -> str | None:
    """The dotted path of a chain like tl.core.tensor rooted at an imported name, or None."""
    if isinstance(expr, ast.Name):
        return modules.get(expr.id)
    if isinstance(expr, ast.Attribute):
        base = _resolve_chain(expr.value, modules)
        return f"{base}.{expr.attr}" if base else None
    return None


def _local_names(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """The parameters and local variables of a function, less those it declares global or nonlocal."""
    names, declared = set(), set()
    pending = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        if not isinstance(node, _NESTED_SCOPES):
            pending.extend(ast.iter_child_nodes(node))
    return names - declared


def _root(expr: ast.expr) -> ast.expr:
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    return expr


class _Checker(ast.NodeVisitor):
    def __init__(self, lines: list[str], modules: dict[str, str], kernel_globals: set[str] = frozenset()):
        self.lines, self.modules = lines, modules
        self.kernel_globals = kernel_globals  # module-level names a kernel may read (see _kernel_globals)
        self.kernels: list[bool] = []  # for each function the visit is inside: is it a kernel?
        self.decorators: set[int] = set()  # ids of the expressions used as decorators
        self.methods: set[int] = set()  # ids of the defs directly in a class body (where __init__ belongs)
        self.properties: list[set[str]] = []  # per enclosing class: the names of its @property methods
        self.found: list[tuple[int, int, Finding]] = []  # (line, column, finding), to sort in reading order
        self.functions: list[set[str]] = []  # the local names of each function the visit is inside
        self.chain_bases: set[int] = set()  # ids of nodes that are the base of an attribute chain

    def report(self, line: int, column: int, rule: str, message: str) -> None:
        code = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        self.found.append((line, column, Finding(line, code, rule, message)))

    def is_builtin(self, name: str) -> bool:
        # Only a function's locals hide a builtin for sure: reading one before it is assigned raises
        # UnboundLocalError rather than falling back to the builtin, as module and class names do.
        return not any(name in local for local in self.functions)

    def imported(self, name: str) -> str | None:
        """The import a name reads here, unless a function's local of that name hides it. An import
        refused on its own line (import os) resolves nothing: its uses are judged by their names."""
        if name not in self.modules or not self.is_builtin(name):
            return None
        path = self.modules[name]
        top = path.split(".")[0]
        if top not in ALLOWED_IMPORTS and ".".join(path.split(".")[:2]) not in ALLOWED_IMPORTS:
            return None
        return path

    def chain(self, expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Name):
            return self.imported(expr.id)
        if isinstance(expr, ast.Attribute):
            base = self.chain(expr.value)
            return f"{base}.{expr.attr}" if base else None
        return None

    # functions, classes, decorators, annotations --------------------------------------------------

    def visit_function(self, node, outer: list[ast.AST | None], body: list[ast.AST], kernel: bool = False) -> None:
        """A def or lambda: outer (decorators, return annotation), defaults and annotations, then its body."""
        args = node.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]
        annotations = [param.annotation for param in params if param.annotation is not None]
        for annotation in annotations + ([node.returns] if getattr(node, "returns", None) is not None else []):
            self.check_annotation(annotation)
        # These run in the enclosing scope, where the parameters' names are not bound.
        outer = [*outer, *args.defaults, *args.kw_defaults, *annotations]
        for part in outer:
            if part is not None:
                self.visit(part)
        self.functions.append(_local_names(node))
        self.kernels.append(kernel)  # the body is the kernel's; its decorators and defaults were outside
        for param in params:
            self.check_binding(param.arg, param)
        for statement in body:
            self.visit(statement)
        self.kernels.pop()
        self.functions.pop()

    def check_annotation(self, annotation: ast.expr) -> None:
        for node in ast.walk(annotation):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                self.report(
                    node.lineno,
                    node.col_offset,
                    "string-annotation",
                    f"the string annotation {node.value[:40]!r} is not allowed: {_STRING_ANNOTATION}",
                )
                return

    def check_decorators(self, decorators: list[ast.expr]) -> None:
        for decorator in decorators:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            path = self.chain(target)
            if path is not None:
                if not _decorator_allowed(path):
                    self.report(
                        decorator.lineno,
                        decorator.col_offset,
                        "decorator",
                        f"@{ast.unparse(target)} is not allowed: {_DECORATOR}",
                    )
                continue
            if isinstance(target, ast.Name) and target.id in ALLOWED_BUILTIN_DECORATORS and self.is_builtin(target.id):
                continue
            if (
                isinstance(target, ast.Attribute)
                and target.attr in PROPERTY_PARTS
                and isinstance(target.value, ast.Name)
                and self.properties
                and target.value.id in self.properties[-1]
            ):
                continue  # @value.setter of a property the class defines
            self.report(
                decorator.lineno,
                decorator.col_offset,
                "decorator",
                f"@{ast.unparse(target)[:40]} is not a decorator the grader knows: {_DECORATOR}",
            )

    def check_binding(self, name: str, node: ast.AST) -> None:
        """A function, class or parameter the file defines: __torch_function__ is a torch mode hook; a
        dunder name belongs only to a method (def __init__ in a class body)."""
        if _is_torch_mode(name):
            self.report(node.lineno, node.col_offset, "torch-mode", f"{name} is not allowed: {_TORCH_MODE}")
        elif name.startswith("__") and id(node) not in self.methods:
            self.check_name(name, node, load=False)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.check_binding(node.name, node)
        self.generic_visit(node)

    def is_kernel(self, node) -> bool:
        return any(self.decorator_path(d).endswith(".jit") for d in node.decorator_list)

    def decorator_path(self, decorator: ast.expr) -> str:
        return self.chain(decorator.func if isinstance(decorator, ast.Call) else decorator) or ""

    def check_kernel_source(self, node) -> None:
        """Triton's interpreter reads a kernel from the last line of its source (decorators included)
        that starts with "def ": that must be the kernel's own def line, written `def name(`."""
        first = min([d.lineno for d in node.decorator_list] + [node.lineno])
        for number in range(first, (node.end_lineno or node.lineno) + 1):
            starts = self.lines[number - 1].strip().startswith("def ")
            if starts != (number == node.lineno):
                self.report(number, 0, "kernel-source", f"this line is not allowed in a kernel: {_KERNEL_DEF_LINE}")

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.check_binding(node.name, node)
        self.check_decorators(node.decorator_list)
        for decorator in node.decorator_list:
            self.decorators.add(id(decorator.func if isinstance(decorator, ast.Call) else decorator))
        kernel = self.is_kernel(node)
        if kernel:
            self.check_kernel_source(node)
        self.visit_function(node, [*node.decorator_list], node.body, kernel)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit_function(node, [], [node.body])

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.check_binding(node.name, node)
        self.check_decorators(node.decorator_list)
        if any(k.arg == "metaclass" for k in node.keywords) or any(
            isinstance(b, ast.Name) and b.id == "type" for b in node.bases
        ):
            self.report(node.lineno, node.col_offset, "metaclass", f"class {node.name} is not allowed: {_METACLASS}")
        defs = [item for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]
        self.methods.update(id(item) for item in defs)
        self.properties.append(
            {
                item.name
                for item in defs
                if any(isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list)
            }
        )
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in HOOK_METHODS:
                self.report(item.lineno, item.col_offset, "hook-method",
                            f"defining {item.name} is not allowed: it changes how Python itself reads, checks or "
                            "makes objects, a hook a kernel and launcher never need")  # fmt: skip
        self.generic_visit(node)
        self.properties.pop()

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.check_annotation(node.annotation)
        self.generic_visit(node)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        if node.kwd_attrs:
            self.report(node.lineno, node.col_offset, "match-attribute",
                        f"case {ast.unparse(node.cls)}({', '.join(a + '=...' for a in node.kwd_attrs)}) is not "
                        f"allowed: {_MATCH}")  # fmt: skip
        elif node.patterns and not (
            isinstance(node.cls, ast.Name) and node.cls.id in _BUILTIN_PATTERN_CLASSES and self.is_builtin(node.cls.id)
        ):
            self.report(node.lineno, node.col_offset, "match-attribute",
                        f"case {ast.unparse(node.cls)}(...) is not allowed: {_MATCH_POSITIONAL}")  # fmt: skip
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id == "type" and self.is_builtin("type") and len(node.args) > 1:
            self.report(
                node.lineno, node.col_offset, "class-from-strings", f"type(...) is not allowed: {_CLASS_FROM_STRINGS}"
            )
        self.generic_visit(node)

    # imports ---------------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            problem = _import_problem(alias.name)
            if problem is None and alias.asname is None and alias.name.startswith("course_lib."):
                problem = (
                    f"import {alias.name} binds the whole course_lib package, the course's grader included; "
                    "write from course_lib.tuned import row_config"
                )
            if problem:
                self.report(node.lineno, node.col_offset, "import", problem)
            if alias.asname:
                self.check_name(alias.asname, node, load=False)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.report(
                node.lineno,
                node.col_offset,
                "import",
                "relative imports are not allowed: a task file is graded alone (no file beside it is ever "
                f"imported) and may import only {_ALLOWED_TEXT}",
            )
        else:
            for alias in node.names:
                if alias.name == "*":
                    problem = _import_problem(node.module) or (
                        f"from {node.module} import * binds names the pre-check cannot see; import the names you use"
                    )
                else:
                    problem = _import_problem(f"{node.module}.{alias.name}")
                if problem:
                    self.report(node.lineno, node.col_offset, "import", problem)
                self.check_name(alias.asname or alias.name, node, load=False)
        self.generic_visit(node)

    # names and attributes --------------------------------------------------------------------------

    def visit_Attribute(self, node: ast.Attribute) -> None:
        # Reported where the attribute's name is, the end of its chain, which may span lines.
        line, column = node.end_lineno, node.end_col_offset
        base = self.chain(node.value)
        written = ast.unparse(node)
        shown = written if len(written) <= 40 else "." + node.attr
        if base is not None and isinstance(node.ctx, ast.Load):  # a store into a module: check_patch
            self.check_resolved(f"{base}.{node.attr}", node, line, column, shown)
        else:
            problem = _attribute_problem(node.attr)
            if problem:
                rule, reason = problem
                self.report(line, column, rule, f"{shown} is not allowed: {reason}")
        self.check_patch(node)
        self.generic_visit(node)

    def check_resolved(self, path: str, node: ast.expr, line: int, column: int, shown: str) -> None:
        """A chain from an import: its last name must be allowed, and a module only as a base. A chain
        that goes wrong is reported once, at the name where it does."""
        name = path.rsplit(".", 1)[-1]
        if path in JIT_DECORATORS and id(node) not in self.decorators:
            self.report(line, column, "jit-call", f"{shown} is allowed only as a decorator: {_JIT_CALL}")
            return
        if _is_torch_mode(name):
            self.report(line, column, "torch-mode", f"{shown} is not allowed: {_TORCH_MODE}")
            return
        resolved = resolve(path)
        if resolved.problem is not None:
            if resolved.at not in (-1, len(path.split(".")) - 1):
                return  # an earlier name of the chain is the problem: reported at its own attribute
            if name.startswith("_"):
                self.report(line, column, "private-attribute", f"{shown} is not allowed: {_INTERNALS}")
            elif name in ESCAPE_ATTRIBUTES:
                why = _why_not(path) or _ESCAPE
                self.report(line, column, "escape-attribute", f"{shown} is not allowed: {why}")
            else:
                self.report(line, column, "not-allowed", resolved.problem)
            return
        if resolved.is_module and id(node) not in self.chain_bases and isinstance(getattr(node, "ctx", None), ast.Load):
            self.report(line, column, "module-value", f"{shown} is a module: {_MODULE_VALUE}")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self.check_patch(node)
        self.generic_visit(node)

    def check_patch(self, target: ast.Attribute | ast.Subscript) -> None:
        """Storing into or deleting from an imported module, or anything reached from one (tl.load = f)."""
        if isinstance(target.ctx, ast.Load):
            return
        root = _root(target)
        if isinstance(root, ast.Name) and root.id in self.modules:
            verb = "deleting" if isinstance(target.ctx, ast.Del) else "assigning to"
            self.report(
                target.lineno,
                target.col_offset,
                "module-assignment",
                f"{verb} {ast.unparse(target)} is monkey-patching a module: the grader uses torch, triton and "
                "the other modules to check your result, so a task file may not change them; "
                "keep your own values in your own variables",
            )

    def visit_Name(self, node: ast.Name) -> None:
        self.check_name(node.id, node, isinstance(node.ctx, ast.Load))
        if (
            isinstance(node.ctx, ast.Load)
            and any(self.kernels)
            and self.is_builtin(node.id)
            and node.id not in self.kernel_globals
            and node.id not in self.modules
            and not hasattr(builtins, node.id)
        ):
            self.report(node.lineno, node.col_offset, "kernel-global",
                        f"`{node.id}` is not allowed in a kernel: {_KERNEL_GLOBAL}, "
                        f"{_KERNEL_GLOBAL_FORM.format(name=node.id)}")  # fmt: skip
        if isinstance(node.ctx, ast.Load) and id(node) not in self.chain_bases:
            path = self.imported(node.id)
            if path in JIT_DECORATORS and id(node) not in self.decorators:
                self.report(
                    node.lineno, node.col_offset, "jit-call", f"{node.id} is allowed only as a decorator: {_JIT_CALL}"
                )
            if path is not None:
                resolved = resolve(path)
                if resolved.problem is None and resolved.is_module:
                    self.report(
                        node.lineno, node.col_offset, "module-value", f"{node.id} is a module ({path}): {_MODULE_VALUE}"
                    )
        self.generic_visit(node)

    def check_name(self, name: str, node: ast.AST, load: bool) -> None:
        """A name read or bound as a variable (an import's alias binds one: import torch as __builtins__)."""
        line, column = node.lineno, node.col_offset
        if not load and isinstance(node, (ast.Import, ast.ImportFrom)) and name in BANNED_BUILTINS:
            self.report(line, column, "builtin",
                        f"import ... as {name} is not allowed: it takes the name of the builtin {name}, which "
                        f"the pre-check watches ({BANNED_BUILTINS[name]}); choose another name")  # fmt: skip
            return
        if _is_torch_mode(name):
            self.report(line, column, "torch-mode", f"{name} is not allowed: {_TORCH_MODE}")
        elif load and name in BANNED_BUILTINS and self.is_builtin(name):
            self.report(line, column, "builtin", f"the builtin {name} is not allowed: {BANNED_BUILTINS[name]}")
        elif name.startswith("__") and (name not in ALLOWED_DUNDER_NAMES or not load) and name not in _PLAIN_DUNDERS:
            self.report(
                line,
                column,
                "dunder-name",
                f"{name} is not allowed: names that start with two underscores reach the interpreter's internals; "
                "of them a task file may read only __name__, __file__ and __doc__, and bind none",
            )

    def visit(self, node):  # a visit that marks attribute bases before their attribute is seen
        if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Attribute, ast.Name)):
            self.chain_bases.add(id(node.value))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "hasattr"
            and self.is_builtin("hasattr")
            and node.args
        ):
            # hasattr(tma, "async_load"): asking whether a release has a name gives nothing of the module
            self.chain_bases.add(id(node.args[0]))
        return super().visit(node)


def _attribute_problem(attr: str) -> tuple[str, str] | None:
    """(rule, reason) when attribute ``attr`` of something the checker cannot resolve is an escape hatch."""
    if _is_torch_mode(attr):
        return "torch-mode", _TORCH_MODE
    if attr in ESCAPE_ATTRIBUTES:
        return "escape-attribute", _ESCAPE
    if attr.startswith("_") and attr not in ALLOWED_PRIVATE_ATTRIBUTES:
        return "private-attribute", _INTERNALS
    return None


def _import_problem(path: str) -> str | None:
    """The message when the dotted path (a module, or a name imported from one) may not be imported."""
    parts = path.split(".")
    if any(p.startswith("_") and p != "__future__" for p in parts):
        return f"{path} is not an allowed import: {_INTERNALS}"
    if parts[0] == "course_lib":
        if ".".join(parts[:2]) not in ("course_lib.tuned", "course_lib.barriers"):
            return _course_lib_message(path)
    elif parts[0] not in ALLOWED_IMPORTS:
        return _import_message(parts[0])
    return resolve(path).problem


def _decode(data: bytes) -> str:
    # UTF-8 unless the file declares otherwise, as the import will read it: a coding cookie must not
    # hide the source from the check.
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding)


def check_source(text: str, filename: str = "<task file>") -> list[Finding]:
    """Every escape hatch in a task file's source, in reading order. Raises SyntaxError if it does not parse."""
    tree = ast.parse(text, filename)
    skipped = _main_blocks(tree)
    # Split where the parser counts lines (str.splitlines also splits at form feeds and the like).
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    modules = _imported_names(tree)
    checker = _Checker(lines, modules, _kernel_globals(tree, modules))
    checker.visit(tree)
    checker.found += _undefined_names(text, filename, tree, lines)
    found = [f for f in checker.found if not any(first <= f[0] <= last for first, last in skipped)]
    # A chain such as torch._C._x is reported once per offending name; a finding repeated word for word
    # on one line (from os import path, sep) is said once.
    return list(dict.fromkeys(finding for *_, finding in sorted(found, key=lambda f: f[:2])))


def _main_blocks(tree: ast.Module) -> list[tuple[int, int]]:
    """The lines of each top-level ``if __name__ == "__main__":`` body, emptied from ``tree``: a learner's
    self-test there never runs in the grader (the file is imported under another name), so it may use
    what a launcher may not (torch.manual_seed, torch.testing). Only where nothing in the file can bind
    ``__name__``; an ``else:`` is checked as always."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            continue  # a read of __name__ (the test itself)
        for _, value in ast.iter_fields(node):
            # a def, class, except-as, import-as, argument, global or pattern named __name__, or the word
            # as a string: anything that might bind it
            values = value if isinstance(value, list) else [value]
            if any(isinstance(v, str) and "__name__" in v for v in values):
                return []
    skipped = []
    for stmt in tree.body:
        if isinstance(stmt, ast.If) and _is_main_test(stmt.test) and stmt.body:
            skipped.append((stmt.body[0].lineno, stmt.body[-1].end_lineno or stmt.body[-1].lineno))
            stmt.body = [ast.copy_location(ast.Pass(), stmt.body[0])]
    return skipped


def _is_main_test(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [side for side in sides if isinstance(side, ast.Name) and side.id == "__name__"]
    mains = [side for side in sides if isinstance(side, ast.Constant) and side.value == "__main__"]
    return len(names) == 1 and len(mains) == 1


def _kernel_globals(tree: ast.Module, modules: dict[str, str]) -> set[str]:
    """The module-level names a kernel may read: kernels (a def decorated with a jit), values made by
    a constexpr(...) call, and aliases of library names (tma_load = tma.async_load if hasattr(...) else
    ...); every binding of the name must be one of these."""

    def alias(expr) -> bool:
        if isinstance(expr, (ast.Name, ast.Attribute)):
            return _resolve_chain(expr, modules) is not None
        if isinstance(expr, ast.IfExp):
            return alias(expr.body) and alias(expr.orelse)
        return False

    def constexpr(expr) -> bool:
        return isinstance(expr, ast.Call) and (_resolve_chain(expr.func, modules) or "").endswith(".constexpr")

    good, bad = set(), set()
    for stmt in ast.walk(tree):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kernel = any(
                (_resolve_chain(d.func if isinstance(d, ast.Call) else d, modules) or "").endswith(
                    (".jit", ".constexpr_function")
                )
                for d in stmt.decorator_list
            )
            (good if kernel else bad).add(stmt.name)
        elif isinstance(stmt, ast.Assign) or (isinstance(stmt, ast.AnnAssign) and stmt.value is not None):
            # `X: tl.constexpr = tl.constexpr(...)` too: Triton judges a global by its value (every version
            # takes a constexpr one); an annotation over a plain value (`X: tl.constexpr = 42`) some refuse
            ok = constexpr(stmt.value) or alias(stmt.value)
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        (good if ok else bad).add(name.id)
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For, ast.With, ast.ClassDef, ast.NamedExpr)):
            for name in ast.walk(stmt.target if hasattr(stmt, "target") else stmt):
                if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store):
                    bad.add(name.id)
            if isinstance(stmt, ast.ClassDef):
                bad.add(stmt.name)
    return good - bad


def _unconditional(tree: ast.Module) -> set[str]:
    """Names the module's own top-level statements bind whatever happens: imports, defs, classes and
    assignments at the top level; a name bound in both branches of an if, or in a try's body and each of
    its handlers (the optional import with a fallback); never one the file deletes anywhere."""
    deleted = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Del)}
    # Python deletes an `except ... as name` name itself when its handler ends
    deleted |= {n.name for n in ast.walk(tree) if isinstance(n, ast.ExceptHandler) and n.name}
    return _bound_by(tree.body) - deleted


_EVERY_NAME = frozenset({"*"})  # what a block that always raises binds: the import fails, nothing is read


def _bound_by(body: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            if isinstance(stmt, ast.AnnAssign) and stmt.value is None:
                continue  # `x: int` binds nothing
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(stmt, ast.If):
            names |= _both(_bound_by(stmt.body), _bound_by(stmt.orelse))
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            done = _bound_by(stmt.body) | _bound_by(stmt.orelse)
            for handler in stmt.handlers:
                done = _both(done, _bound_by(handler.body))
            names |= done | _bound_by(stmt.finalbody)
        elif isinstance(stmt, ast.Raise):
            names |= _EVERY_NAME
    return names


def _both(one: set[str], other: set[str]) -> set[str]:
    """What two alternative blocks both bind (a block that always raises binds everything)."""
    if "*" in one:
        return set(other)
    if "*" in other:
        return set(one)
    return one & other


@cache
def _interpreter_names() -> frozenset[str]:
    """The names Triton's interpreter copies into a kernel's module where the module lacks them."""
    try:
        from triton.runtime import interpreter
    except Exception:  # noqa: BLE001 (no interpreter in this Triton: nothing to copy)
        return frozenset()
    return frozenset(vars(interpreter))


def _undefined_names(text: str, filename: str, tree: ast.Module, lines: list[str]) -> list[tuple[int, int, Finding]]:
    """Names the file reads as globals but never binds: neither imported, assigned nor defined at module
    level (or declared global and assigned in a function), nor one of Python's builtins."""
    try:
        top = symtable.symtable(text, filename, "exec")
    except SyntaxError:
        return []  # the import reports it, with its line
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    tables, read = [top], set()
    while tables:
        table = tables.pop()
        tables.extend(table.get_children())
        for sym in table.get_symbols():
            if table is not top and sym.is_declared_global() and sym.is_assigned():
                bound.add(sym.get_name())
            if sym.is_referenced() and sym.is_global() and not (table is top and sym.is_local()):
                read.add(sym.get_name())
    known = bound | set(dir(builtins)) | ALLOWED_DUNDER_NAMES
    missing = {name for name in read - known if not name.startswith("__")}  # dunders: their own rule
    maybe = (read & _interpreter_names()) - _unconditional(tree) - missing - set(dir(builtins)) - ALLOWED_DUNDER_NAMES
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in missing | maybe:
            code = lines[node.lineno - 1].strip() if node.lineno <= len(lines) else ""
            if node.id in missing:
                message = f"`{node.id}` is not defined in this file: {_UNDEFINED}"
            else:
                message = f"`{node.id}` {_MAYBE_UNBOUND}"
            found.append((node.lineno, node.col_offset, Finding(node.lineno, code, "undefined-name", message)))
            missing.discard(node.id)  # once, where it is first read
            maybe.discard(node.id)
    return found


TOO_DEEP = (
    "the file nests too deeply for the grader to read it ({what}): no kernel or launcher needs "
    "expressions hundreds of levels deep; write it flatter"
)


def check_bytes(data: bytes, filename: str = "<task file>") -> list[Finding]:
    """check_source of a file's bytes; [] for a file that does not parse (the import reports it, with
    its line), and a finding, never an exception, for one the checker itself cannot read."""
    try:
        text = _decode(data)
    except (SyntaxError, ValueError):  # a bad coding cookie, bytes that do not decode
        return []
    with _RECURSION:  # the limit is the process's: grading threads must not restore it under each other
        return _check_text(text, filename)


# grade_jobs checks files in threads side by side: one that put the recursion limit back while another
# compiled a deep file could make that one fail. (CI once saw the hostile deep expression end as "the
# grader failed on this task (SystemError)"; not reproduced, so both the race and the error are closed.)
_RECURSION = threading.Lock()


def _check_text(text: str, filename: str) -> list[Finding]:
    limit = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(max(limit, 3000))  # an ordinary deep file still checks
        compile(text, filename, "exec", dont_inherit=True)  # compiled, never run: a SyntaxError is the import's
        return check_source(text, filename)
    except (RecursionError, MemoryError, SystemError) as e:  # SystemError: CPython's compiler out of its depth
        return [Finding(1, "", "unreadable", TOO_DEEP.format(what=type(e).__name__))]
    except SyntaxError as e:
        if "too many nested" in str(e) or "too complex" in str(e):
            return [Finding(e.lineno or 1, (e.text or "").strip(), "unreadable", TOO_DEEP.format(what=e.msg))]
        return []
    except ValueError:  # null bytes
        return []
    finally:
        sys.setrecursionlimit(limit)


def check_file(path) -> list[Finding]:
    """check_bytes of the file at path."""
    return check_bytes(Path(path).read_bytes(), str(path))


def describe(findings: list[Finding], filename) -> tuple[str, list[str]]:
    """(summary naming the first finding, detail lines: each finding's place and code, then its message)."""
    name = Path(filename).name
    first = findings[0]
    if first.rule == "unreadable":
        return f"the grader cannot read {name}: {first.message}", [first.message]
    summary = f"the task file uses what the grader does not allow: {name} line {first.line}: {first.code}"
    details = [line for f in findings for line in (f"{name}:{f.line}: {f.code}", f"    {f.message}")]
    return summary, details


def tf32_dot_lines(data: bytes) -> list[int]:
    """The lines of the file's ``tl.dot`` calls that give no ``input_precision`` (nor the older
    ``allow_tf32``): on float32 inputs Triton multiplies those in TF32 on a GPU (and course_lib's
    interpreter as the GPU does). Only to explain a float32 case's failure; [] where it does not parse."""
    try:
        with _RECURSION:
            tree = ast.parse(_decode(data))
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # the check and the import report those
        return []
    modules = _imported_names(tree)
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _resolve_chain(node.func, modules) != "triton.language.dot":
            continue
        given = {k.arg for k in node.keywords}
        if len(node.args) < 4 and not given & {"input_precision", "allow_tf32", None}:
            lines.append(node.lineno)
    return sorted(set(lines))
