"""One spec per exercise: the reference, the inputs, the shapes, the tolerance and the cost model.

A task's solution file (``solutions/<name>.py``) holds only kernels and a launcher; everything the
grader, the benchmarks and the notebooks need to know about the task lives here, once.

Instructors add hidden cases without touching the repository: point ``COURSE_HIDDEN_CASES`` (or
``grade --hidden``) at a JSON file such as ``{"vector_add": [{"shape": [77777], "dtype": "float16"}, ...]}``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from .. import runtime
from ..compare import Tolerance

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


# Errors against a float64 reference. fp32 rounding is 6e-8 relative, fp16 4.9e-4, bf16 3.9e-3:
# the limits allow a few roundings, and nothing like a wrong formula or a lower-precision path.
DEFAULT_TOLERANCE = {
    torch.float32: Tolerance(rtol=1e-5, atol=1e-6, norm=1e-5),
    torch.float16: Tolerance(rtol=2e-3, atol=1e-5, norm=1e-3),
    torch.bfloat16: Tolerance(rtol=1.6e-2, atol=1e-4, norm=8e-3),
}


@dataclass(frozen=True)
class Case:
    shape: tuple[int, ...]
    dtype: torch.dtype
    label: str  # "tiny", "tail", "large", "misaligned", "hidden", ...
    misaligned: bool = False  # tensors are views that start one element into their buffer
    gpu_only: bool = False
    params: tuple = ()  # extra (name, value) pairs a task's input maker reads, e.g. (("approximate", "tanh"),)

    @property
    def options(self) -> dict:
        return dict(self.params)

    def describe(self) -> str:
        where = ", misaligned base pointers" if self.misaligned else ""
        extra = "".join(f", {k}={v!r}" for k, v in self.params)
        if not self.shape:  # not a tensor case (e.g. a cost-model question)
            return f"{self.label}{extra}"
        return f"{self.label}: shape={tuple(self.shape)} dtype={str(self.dtype).replace('torch.', '')}{where}{extra}"


@dataclass(frozen=True)
class Tier:
    """One speed tier's bar: at least ``fraction`` of the speed of ``against`` on the task's timed case.

    ``against``: "eager" (the task's torch baseline as a PyTorch user writes it: cuBLAS for a matmul),
    "solution" (the course's reference kernel) or "roofline" (the time the bytes/FLOPs model allows at
    this GPU's measured peaks). A kernel within the measured noise of the bar meets it."""

    against: str
    fraction: float

    def describe(self) -> str:
        what = {"eager": "torch eager", "solution": "the course's solution", "roofline": "the roofline"}[self.against]
        if self.against == "roofline":
            return f"{self.fraction:.0%} of {what}"
        return f"as fast as {what}" if self.fraction == 1.0 else f"{self.fraction:.0%} of the speed of {what}"


@dataclass(frozen=True)
class SpeedTiers:
    """How a correct kernel's speed is graded on a GPU (``grader.tiers``): "works" (every case right),
    "fast" (meets ``fast``), "expert" (meets ``fast`` and ``expert``). ``case`` is the timed case (the
    first benchmark case when None); ``why`` says in a line where the bars come from (measured on the
    H200, results/)."""

    # A timed case keeps the GPU busy for about 150 us a call or more on an H200: a launcher's host cost
    # (20 to 80 us for a Triton launch in a sandboxed worker, measured there on 2026-12-03) is then
    # hidden behind the kernel before it, and the tier grades the kernel, not the host. The elementwise
    # and row tasks state a case of their own for that (64M fp32 elements, 65536 rows of 4096 bf16).
    fast: Tier = Tier("eager", 1.0)
    expert: Tier = Tier("solution", 0.8)
    case: Case | None = None
    why: str = ""


@dataclass
class TaskSpec:
    name: str  # also the file name: solutions/<name>.py, exercises/<name>.py
    chapter: str  # "02"
    title: str
    entry: str  # the launcher the grader calls
    # keyword arguments of entry, made on the generator's device (CPU for grading, so a seed gives
    # the same inputs everywhere; the GPU for benchmarks)
    make_inputs: Callable[[Case, torch.Generator], dict]
    # same keywords, outputs left out: the grader calls it on float64 copies, benchmarks on the real
    # inputs as the torch eager baseline (and compile it for the torch.compile baseline)
    reference: Callable[..., torch.Tensor]
    cases: Callable[[str], list[Case]]  # mode -> cases
    # what a PyTorch user would write, for the eager and torch.compile baselines; default: reference
    baseline: Callable[..., torch.Tensor] | None = None
    outputs: tuple[str, ...] = ("out",)  # preallocated outputs among the inputs; () = entry returns it
    tolerance: dict = field(default_factory=lambda: dict(DEFAULT_TOLERANCE))
    bytes_moved: Callable[[Case], int] | None = None  # the fewest bytes a kernel must move
    flops: Callable[[Case], int] | None = None
    bench_cases: list[Case] = field(default_factory=list)
    # more baselines for the benchmarks, timed beside the solution: case -> {variant name: callable
    # taking the reference's keywords}, e.g. {"cublas": lambda a, b: torch.matmul(a, b)}
    bench_variants: Callable[[Case], dict] | None = None
    # bench variants that do only part of the task's work (cuBLAS's candidate GEMM alone, a bar for one
    # GEMM of the layer): recorded with no fraction of the roofline, which would credit them with work
    # they do not do
    partial_variants: tuple[str, ...] = ()
    # torch.compile modes timed as baselines: "default" is recorded as torch_compile, any other mode
    # as torch_compile_<mode> (e.g. "max-autotune" -> torch_compile_max-autotune)
    compile_modes: tuple[str, ...] = ("default",)
    hints: list[str] = field(default_factory=list)
    forbid_in_launcher: frozenset[str] = frozenset()  # torch calls this task forbids beyond the default
    # Inputs a correct kernel may read only in part (dropout's x: a dropped element need not be loaded).
    # The data-flow rule asks every element of every other input to be read by a kernel; of these, some.
    partly_read: frozenset[str] = frozenset()
    tensor_cores: bool = False  # the FLOPs run on tensor cores (matmul): roofline at the dtype's matmul rate
    timeout_s: float = 120.0  # per step, where the reference solution cannot be timed (grader.limits)
    points: float = 1.0  # what a pass is worth in a room's grades
    # Tasks that are no kernel (a cost model): (case, seed) -> (function name, keyword arguments) in
    # plain data, asked of the learner's module in its worker; judge_call(case, function, kwargs,
    # reply) -> (ok, summary, details) judges the worker's plain reply in the protected process.
    call_case: Callable | None = None
    judge_call: Callable | None = None
    # Structural checks after every case passes: ``probe`` names "module:function" run in the worker
    # as function(module, entry) -> facts (plain JSON data); ``judge(facts)`` -> [(ok, summary,
    # details)] decides in the protected process.
    probe: str | None = None
    judge: Callable | None = None
    # The entry is plain PyTorch, no kernel (chapter 10's first steps): no launch is required, and the
    # launcher torch guard and the interpreter's data-flow rule are off. The worker reports the returned
    # tensor's layout (strides, alignment, whether it shares an input's memory) and, for a 2-D result,
    # the bytes of its rows' whole span (padding included); ``check_layout(case, meta, span)`` ->
    # (ok, summary, details) judges them here after the values pass (span: a 1-D uint8 tensor or None).
    torch_task: bool = False
    check_layout: Callable | None = None
    # Hardware the cases need beyond GPU mode: "hopper" (compute capability 9.x: wgmma, TMA, setmaxnreg;
    # Gluon kernels have no interpreter). On another GPU only the probe runs (it compiles for sm_90) and
    # a task whose probe passes is graded NEEDS_GPU, not PASS; in CPU mode too unless ``simulated``.
    needs: str | None = None
    # Gluon kernels, which Triton's interpreter does not run: in CPU mode their cases run on the CPU in
    # course_lib.gluon_cpu instead (the worker wraps each call in gluon_cpu.launches_simulated, which
    # checks the barrier protocol as the kernel runs); ``cases(mode)`` gives shapes small enough there.
    # Both such tasks are warp-specialized GEMMs: a case in which no Gluon launch called gl.warp_specialize
    # fails (worker._unspecialized); a simulated task of another kind would need that rule made its own
    simulated: bool = False
    # When a case's output is wrong: (float64 inputs, output, case) -> a sentence naming a known
    # mistake the output matches (bias per row, the other GELU form, ...), or None.
    diagnose: Callable | None = None
    # Speed tiers on a GPU (``SpeedTiers``); kernel tasks with benchmark cases get the default bars
    # (fast: torch eager's speed; expert: 80% of the solution's) unless they state their own.
    speed: SpeedTiers | None = None
    # A sentence added to an out-of-bounds access's report, where the task's inputs make one likely for a
    # reason the addresses cannot show (paged_decode: a block table's entries past a sequence's last page)
    out_of_bounds_hint: str = ""

    def speed_tiers(self) -> SpeedTiers | None:
        """The bars this task's speed is graded against, or None for a task that has no speed grade
        (no kernel, or no benchmark case)."""
        if self.speed is not None:
            return self.speed
        if self.bench_cases and not self.torch_task and self.call_case is None:
            return SpeedTiers()
        return None

    def timed_case(self) -> Case | None:
        tiers = self.speed_tiers()
        if tiers is None:
            return None
        return tiers.case or self.bench_cases[0]

    def runs_here(self, mode: str) -> bool:
        """Whether this machine can run the task's cases (see ``needs``)."""
        if self.needs is None:
            return True
        if mode == runtime.CPU:
            return self.simulated
        info = runtime.gpu_info()
        return info is not None and self.needs == "hopper" and info.capability[0] == 9

    def all_cases(self, mode: str, hidden: str | None = None) -> list[Case]:
        if not self.runs_here(mode):
            return []
        cases = [c for c in self.cases(mode) if not (c.gpu_only and mode == runtime.CPU)]
        # the first case once more, with inputs of its own: a launcher that caches results by shape
        # and dtype, or keeps state between calls, fails here
        again = replace(cases[0], label=f"{cases[0].label} again") if cases else None
        return cases + ([again] if again else []) + hidden_cases(self.name, hidden)


_REGISTRY: dict[str, TaskSpec] = {}


def register(spec: TaskSpec) -> TaskSpec:
    if spec.name in _REGISTRY:
        raise ValueError(f"task {spec.name!r} is registered twice")
    _REGISTRY[spec.name] = spec
    return spec


def _load_all() -> None:
    """Import every chapter module (tasks/chNN_*.py); each registers its tasks."""
    import importlib
    import pkgutil

    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("ch"):
            importlib.import_module(f"{__name__}.{info.name}")


def all_tasks() -> list[TaskSpec]:
    _load_all()
    return sorted(_REGISTRY.values(), key=lambda t: (t.chapter, _order(t)))


def _order(spec: TaskSpec) -> int:
    return list(_REGISTRY).index(spec.name)


def get(name: str) -> TaskSpec:
    _load_all()
    if name not in _REGISTRY:
        known = ", ".join(sorted(_REGISTRY))
        raise KeyError(f"no task named {name!r}. Tasks: {known}")
    return _REGISTRY[name]


class HiddenCaseError(ValueError):
    """A hidden case the task cannot grade: named, with what the task takes instead."""


_HIDDEN_KEYS = {"shape", "dtype", "label", "misaligned"}


def hidden_cases(name: str, path: str | None = None) -> list[Case]:
    """Extra cases for ``name`` from the file ``path`` (or COURSE_HIDDEN_CASES), read only by the
    protected process: the worker that runs the learner's code never sees them. A case is
    {"shape": [...], "dtype": "float16", "label": "...", "misaligned": false} plus any of the options the
    task's own cases take (chapter 11: "causal", "kv_heads", "page", "contexts", ...); a list becomes a
    tuple. ``HiddenCaseError`` for a case the task cannot grade (``check_hidden`` says so up front)."""
    path = path or os.environ.get("COURSE_HIDDEN_CASES")
    if not path:
        return []
    with open(path) as f:
        table = json.load(f)
    spec = get(name)
    own = [c for mode in ("cpu", "gpu") for c in spec.cases(mode)]
    options = sorted({key for c in own for key in c.options})
    ranks = {len(c.shape) for c in own}
    kernel = spec.call_case is None  # a question's hidden case gives its arguments as the shape (ch01, ch09)
    graded = [d for d in DTYPES.values() if d in spec.tolerance] if kernel else []
    cases = []
    for i, item in enumerate(table.get(name, []), 1):
        where = f"hidden case {i} of {name}"
        if not isinstance(item, dict) or "shape" not in item:
            raise HiddenCaseError(f'{where}: each case is an object with a "shape" (and a "dtype"): {item!r}')
        unknown = sorted(set(item) - _HIDDEN_KEYS - set(options))
        if unknown:
            takes = ", ".join(f'"{k}"' for k in sorted(_HIDDEN_KEYS | set(options)))
            raise HiddenCaseError(f"{where}: {', '.join(unknown)} is no option of this task's cases (it takes {takes})")
        dtype_name = item.get("dtype", "float32")
        if dtype_name not in DTYPES:
            raise HiddenCaseError(f"{where}: dtype {dtype_name!r} is none of {', '.join(DTYPES)}")
        dtype = DTYPES[dtype_name]
        if graded and dtype not in graded:
            default = " (the default when none is given)" if "dtype" not in item else ""
            names = ", ".join(k for k, d in DTYPES.items() if d in graded)
            raise HiddenCaseError(f"{where}: dtype {dtype_name}{default} is not one this task grades: {names}")
        shape = item["shape"]
        if not isinstance(shape, list):
            raise HiddenCaseError(f"{where}: the shape must be a list, not {shape!r}")
        if kernel and not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape):
            raise HiddenCaseError(f"{where}: the shape must be a list of positive integers, not {shape!r}")
        if kernel and ranks and len(shape) not in ranks:
            have = " or ".join(str(r) for r in sorted(ranks))
            raise HiddenCaseError(
                f"{where}: a shape of {len(shape)} dimensions; this task's cases have {have}, e.g. {list(own[0].shape)}"
            )
        params = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in item.items() if k in options)
        cases.append(
            Case(
                shape=tuple(shape),
                dtype=dtype,
                label=item.get("label", "hidden"),
                misaligned=bool(item.get("misaligned", False)),
                params=params,
            )
        )
    return cases


def check_hidden(path: str) -> None:
    """Every task's hidden cases in the file, read as the grader will read them: ``HiddenCaseError`` for
    the first it cannot grade, or for a task it does not know."""
    with open(path) as f:
        table = json.load(f)
    _load_all()
    for name in table:
        if name not in _REGISTRY:
            raise HiddenCaseError(f"the hidden cases name a task {name!r} that the course does not have")
        hidden_cases(name, path)


# --------------------------------------------------------------------------------------------------
# helpers shared by the task specs


def _padded(shape: tuple[int, ...], row_pad: int) -> tuple[tuple[int, ...], int]:
    """The buffer shape for a view of ``shape`` whose rows are ``row_pad`` elements longer, and its size."""
    full = shape[:-1] + (shape[-1] + row_pad,) if row_pad else shape
    n = 1
    for s in full:
        n *= s
    return full, n


def random_tensor(case: Case, gen: torch.Generator, shape=None, scale: float = 1.0, row_pad: int = 0) -> torch.Tensor:
    """Normal random values of the case's dtype; a view one element into its buffer if misaligned;
    with ``row_pad``, a view of the first columns of a wider matrix (rows further apart than their
    length: a kernel must use the row stride, not the row length)."""
    shape = tuple(case.shape if shape is None else shape)
    full, n = _padded(shape, row_pad)
    pad = 1 if case.misaligned else 0
    flat = torch.randn(n + pad, generator=gen, dtype=torch.float32, device=gen.device) * scale
    return flat.to(case.dtype)[pad:].view(full)[..., : shape[-1]]


def output_like(case: Case, gen: torch.Generator, shape=None, row_pad: int = 0) -> torch.Tensor:
    """An output buffer on the generator's device (the grader poisons it before each launch);
    misaligned like the inputs, rows ``row_pad`` elements further apart than their length."""
    shape = tuple(case.shape if shape is None else shape)
    full, n = _padded(shape, row_pad)
    pad = 1 if case.misaligned else 0
    return torch.empty(n + pad, dtype=case.dtype, device=gen.device)[pad:].view(full)[..., : shape[-1]]


def elementwise_cases(mode: str, dtypes=(torch.float32, torch.float16, torch.bfloat16)) -> list[Case]:
    """Tiny, tails that are no multiple of any block size, a misaligned view, and a large size."""
    large = 100_003 if mode == runtime.CPU else 4_000_037
    cases = [Case((1,), torch.float32, "tiny"), Case((3,), dtypes[-1], "tiny")]
    for dt in dtypes:
        cases.append(Case((1000,), dt, "tail"))
    cases.append(Case((4097,), torch.float32, "tail"))
    cases.append(Case((1537,), dtypes[1 % len(dtypes)], "misaligned", misaligned=True))
    cases.append(Case((large,), torch.float32, "large"))
    return cases


def nbytes(case: Case, n_tensors: int) -> int:
    numel = 1
    for s in case.shape:
        numel *= s
    return numel * torch.empty((), dtype=case.dtype).element_size() * n_tensors
