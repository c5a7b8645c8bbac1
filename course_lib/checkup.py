"""``python -m course_lib doctor``: is this machine ready for the course, and if not, what to do."""

from __future__ import annotations

import importlib.util
import os
import textwrap
from dataclasses import dataclass

import numpy as np
import torch
import triton
import triton.language as tl

from . import hooks, interpreter, progress, release, roofline, runtime, stubs

OK, WARN, BAD = "ok", "warn", "FAIL"


@dataclass
class Finding:
    level: str
    what: str
    detail: str = ""


@triton.jit
def _sum_loop_kernel(x_ptr, out_ptr, n):
    acc = 0.0
    for i in range(0, n):  # a runtime loop bound: what Triton 3.6's interpreter trips on with numpy >= 2.4
        acc += tl.load(x_ptr + i)
    tl.store(out_ptr, acc)


@triton.jit
def _dot_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    rows = tl.arange(0, N)
    a = tl.load(a_ptr + rows[:, None] * N + rows[None, :])
    b = tl.load(b_ptr + rows[:, None] * N + rows[None, :])
    tl.store(c_ptr + rows[:, None] * N + rows[None, :], tl.dot(a, b))


@triton.jit
def _overrun_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))  # no mask on purpose: BLOCK > length


def canary_runtime_loop() -> Finding:
    x = torch.arange(5, dtype=torch.float32, device=runtime.device())
    out = torch.zeros(1, device=runtime.device())
    affected = runtime.triton_version() < interpreter.NUMPY_INDEX_FIX_NEEDED_BELOW and np.lib.NumpyVersion(
        np.__version__
    ) >= np.lib.NumpyVersion("2.4.0")
    try:
        _sum_loop_kernel[(1,)](x, out, 5)
        ok = float(out.item()) == 10.0
        error = "" if ok else f"got {out.item()} instead of 10"
    except Exception as e:
        ok, error = False, f"{type(e).__name__}: {e}"
    what = "loop with a runtime bound"
    if ok and affected:
        return Finding(
            OK,
            what,
            f"Triton {triton.__version__} with numpy {np.__version__} has a known "
            "interpreter bug here; course_lib works around it",
        )
    if ok:
        return Finding(OK, what)
    return Finding(
        BAD,
        what,
        f"{error}. Known bug of Triton < 3.7.1 with numpy >= 2.4 in the interpreter. "
        "Fix: pip install 'triton>=3.7.1' (or pip install 'numpy<2.4').",
    )


def canary_bf16_dot() -> Finding:
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(16, 16, generator=gen).to(torch.bfloat16)
    b = torch.randn(16, 16, generator=gen).to(torch.bfloat16)
    c = torch.empty(16, 16, device=runtime.device())
    try:
        _dot_kernel[(1,)](a.to(runtime.device()), b.to(runtime.device()), c, N=16)
        err = (c.cpu() - a.float() @ b.float()).abs().max().item()
    except Exception as e:
        return Finding(BAD, "bf16 tl.dot", f"{type(e).__name__}: {e}")
    if err < 1e-2:
        note = (
            "the interpreter's bf16 dot is wrong on its own; course_lib widens bf16 first" if runtime.is_cpu() else ""
        )
        return Finding(OK, "bf16 tl.dot", note)
    return Finding(
        BAD,
        "bf16 tl.dot",
        f"max error {err:.3g}: bf16 matmul results are wrong here. Use fp16 "
        "inputs in CPU mode, or a GPU, for matmul exercises.",
    )


@triton.jit
def _axpy_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * 2.0 + y, mask=mask)


def canary_bf16_arith() -> Finding:
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(50, generator=gen).to(torch.bfloat16)
    y = torch.randn(50, generator=gen).to(torch.bfloat16)
    out = torch.empty(50, dtype=torch.bfloat16)
    try:
        _axpy_kernel[(1,)](x, y, out, 50, BLOCK=64)
    except Exception as e:
        return Finding(BAD, "bf16 arithmetic", f"{type(e).__name__}: {e}")
    err = (out.float() - (x.float() * 2 + y.float())).abs().max().item()
    if err < 0.05:
        return Finding(
            OK,
            "bf16 arithmetic",
            "the interpreter adds bf16 bits as integers on its own; course_lib computes in float32 and rounds",
        )
    return Finding(BAD, "bf16 arithmetic", f"max error {err:.3g}: use fp16 or fp32 inputs in CPU mode")


def canary_out_of_bounds() -> Finding:
    x = torch.arange(10, dtype=torch.float32)
    out = torch.zeros(10)
    try:
        _overrun_kernel[(1,)](x, out, BLOCK=16)
    except Exception as e:
        if any(isinstance(c, hooks.OutOfBoundsAccess) for c in _causes(e)):
            return Finding(OK, "out-of-bounds detection", "a deliberately unmasked load was stopped and reported")
        return Finding(BAD, "out-of-bounds detection", f"unexpected {type(e).__name__}: {e}")
    return Finding(
        BAD,
        "out-of-bounds detection",
        "an unmasked load past the end went unnoticed: the grader's "
        f"hooks do not fit Triton {triton.__version__}; report this",
    )


def _causes(e):
    while e is not None:
        yield e
        e = e.__cause__ or e.__context__


def canary_gpu_compile() -> Finding:
    out = torch.zeros(16, device="cuda")
    try:
        _overrun_kernel[(1,)](torch.arange(16, dtype=torch.float32, device="cuda"), out, BLOCK=16)
        torch.cuda.synchronize()
        ok = torch.equal(out, torch.arange(16, dtype=torch.float32, device="cuda"))
    except Exception as e:
        return Finding(BAD, "a kernel on the GPU", f"{type(e).__name__}: {e}")
    return Finding(OK if ok else BAD, "a kernel on the GPU", "" if ok else "wrong result")


def run() -> list[Finding]:
    found: list[Finding] = [Finding(OK, "mode", runtime.describe_mode())]
    v = runtime.versions()
    found.append(Finding(OK, "versions", ", ".join(f"{k} {val}" for k, val in v.items())))
    tv = runtime.triton_version()
    if not ((3, 6, 0) <= tv < (3, 10, 0)):
        found.append(Finding(WARN, "triton version", f"{triton.__version__} is outside the tested 3.6 to 3.9"))
    if runtime.parse_version(torch.__version__) < (2, 6, 0):
        found.append(Finding(WARN, "torch version", f"{torch.__version__} is older than the tested 2.6"))
    info = runtime.gpu_info()
    if info:
        found.append(
            Finding(
                OK,
                "GPU",
                f"{info.name}, compute capability {info.capability[0]}.{info.capability[1]}, "
                f"{info.sm_count} SMs, {info.memory_gib:.0f} GiB",
            )
        )
        found.append(gpu_generation(info))
        if info.capability >= (8, 0):
            found.append(canary_gpu_compile())
        found.append(
            Finding(
                OK,
                "out-of-bounds checks",
                "a task that passes on the GPU is graded again in the interpreter, which reports loads "
                "and stores outside the tensors, and a Gluon task in the course's simulator, which checks "
                "its barrier protocol (COURSE_BOUNDS_CHECK=0 skips both); for compiled code, "
                "compute-sanitizer python -m course_lib check TASK",
            )
        )
    else:
        found.append(canary_runtime_loop())
        found.append(canary_bf16_arith())
        found.append(canary_bf16_dot())
        found.append(canary_out_of_bounds())
        found.append(
            Finding(
                OK,
                "not in the interpreter",
                "Gluon kernels run in the course's simulator (for their values and barrier protocol, not their "
                "speed), timing needs a GPU; tl.range(num_stages=, warp_specialize=) are ignored here",
            )
        )
    root = runtime.course_root()
    if (root / "solutions").is_dir():
        report = stubs.sync(root, check=True)
        edited = [name for name in report.drift if not stubs.is_untouched(name[:-3], root)]
        missing = [name for name in report.drift if not (root / "exercises" / name).exists()]
        level = WARN if missing else OK
        detail = f"{len(report.unchanged)} untouched, {len(edited) - len(missing)} with your edits"
        if missing:
            detail += f", {len(missing)} missing: run python -m course_lib sync-exercises"
        found.append(Finding(level, "exercises", f"{detail} ({root / 'exercises'})"))
    elif release.is_release(root):
        untouched = sum(stubs.is_untouched(p.stem, root) for p in (root / "exercises").glob("*.py"))
        total = len(list((root / "exercises").glob("*.py")))
        found.append(
            Finding(
                OK,
                "course folder",
                f"a released copy ({root}): solutions withheld; exercises: {untouched} untouched, "
                f"{total - untouched} with your edits",
            )
        )
    else:
        found.append(Finding(WARN, "course folder", f"no solutions/ under {root}: set COURSE_ROOT to the checkout"))
    found.append(sandbox_finding())
    if info or os.environ.get(roofline.SHARED_CACHE_ENV):
        found.append(peaks_finding(info))
    found.append(memory_finding(runtime.quota().memory_bytes))
    try:
        progress.update(lambda data: None)
        found.append(Finding(OK, "progress file", str(progress.progress_path())))
    except OSError as e:
        found.append(Finding(BAD, "progress file", f"cannot write {progress.progress_path()}: {e}"))
    for module in ("ipywidgets", "jupyterlab", "matplotlib"):
        if importlib.util.find_spec(module) is None:
            found.append(Finding(WARN, f"{module} missing", "notebooks need it: pip install -e ."))
    return found


def gpu_generation(info: runtime.GpuInfo) -> Finding:
    """What this GPU's generation (compute capability) means for the course."""
    from . import tasks

    major, minor = info.capability
    cc = f"compute capability {major}.{minor}"
    hopper = [t for t in tasks.all_tasks() if t.needs == "hopper"]
    names = ", ".join(f"{t.name} (chapter {t.chapter})" for t in hopper)
    if info.capability < (8, 0):
        return Finding(
            BAD,
            "GPU generation",
            f"{info.name} is {cc}: Triton compiles for 8.0 (Ampere) and newer only, so no kernel of the "
            "course runs on it. Use CPU mode (COURSE_MODE=cpu): every chapter works there, in the interpreter, "
            "without timing. Colab's and Kaggle's free T4 (7.5) is such a GPU",
        )
    if major == 9:
        return Finding(OK, "GPU generation", f"Hopper ({cc}): every task runs here, warp specialization included")
    where = "not a Hopper GPU" if major < 9 else "newer than Hopper (no wgmma)"
    return Finding(
        WARN,
        "GPU generation",
        f"{cc}, {where}: {len(hopper)} tasks use Hopper's wgmma and TMA and are graded on an H100 or H200 only "
        f"(here their structure is checked): {names}. The others fall back to plain loads and stores below 9.0 "
        "and should run here; the course's GPU runs were all on an H200",
    )


MEMORY_NEEDED_BYTES = 2 << 30  # a grading worker: torch's import alone maps about 1.5 GiB


def memory_finding(limit_bytes: int | None) -> Finding:
    """A container's memory limit (a hub's, a Binder's): below 2 GiB a grading worker, capped at
    three quarters of it but never below 1.5 GiB (torch needs that much to import), can exhaust it."""
    if limit_bytes is None:
        return Finding(OK, "memory", "no container limit")
    gib = limit_bytes / 2**30
    if limit_bytes < MEMORY_NEEDED_BYTES:
        return Finding(
            WARN,
            "memory",
            f"this container may use {gib:.1f} GiB: checking a task starts a worker that needs about 1.5 GiB "
            "besides the notebook's own; ask for 2 GiB or more (a hub's mem_limit)",
        )
    return Finding(OK, "memory", f"{gib:.1f} GiB container limit")


def peaks_finding(info: runtime.GpuInfo | None) -> Finding:
    """Where the roofline's peaks come from for this user: an administrator's shared figures, this user's
    own measurement, or a measurement still to come (a few seconds, the first time a roofline is drawn)."""
    name = info.name if info else roofline.REFERENCE_GPU
    shared = roofline.shared_file(name)
    if shared is not None:
        try:
            exists = shared.is_file()
        except OSError as err:  # a folder this user may not enter
            return Finding(WARN, "roofline peaks", f"{shared}: {err.strerror or err}: each user measures")
        if not exists:
            return Finding(WARN, "roofline peaks", f"{shared} does not exist: an administrator runs "
                           "python -m course_lib peaks --shared on this machine's GPU")  # fmt: skip
        problem = roofline.untrusted(shared)
        if problem is not None:
            return Finding(WARN, "roofline peaks", f"{problem}: ignored (chmod go-w); each user measures")
        return Finding(OK, "roofline peaks", f"the administrator's, for every user ({shared})")
    own = roofline._cache_file(name)
    if own.is_file():
        return Finding(OK, "roofline peaks", f"measured by you ({own})")
    return Finding(OK, "roofline peaks", "measured the first time a roofline is drawn (a few seconds; users of "
                   f"one machine measure in turn; a hub sets {roofline.SHARED_CACHE_ENV}, see the README)")  # fmt: skip


def sandbox_finding() -> Finding:
    """Whether grading someone else's code (a room, another folder) runs in the sandbox here."""
    from .grader import sandbox

    available = sandbox.available()
    if available.ok:
        return Finding(OK, "grading sandbox", f"{available.tool}: a room's code runs sealed (own files only)")
    return Finding(
        WARN,
        "grading sandbox",
        f"none: {available.reason}. Checking your own exercises works as it is; grading a room needs it "
        "(or python -m course_lib grade ... --unsandboxed, for files you trust)",
    )


LINE_WIDTH = 100  # a notebook's output area shows about this many characters before it wraps
LABEL_WIDTH = 26  # the label column; a longer label gets a line of its own


def format_findings(found: list[Finding], width: int = LINE_WIDTH) -> str:
    """One finding a line: ``[  ok] label  detail``, details wrapped under their column to ``width``."""
    column = min(max(len(f.what) for f in found), LABEL_WIDTH)
    indent = " " * (len(f"[{OK:>4}] ") + column + 2)
    lines = []
    for f in found:
        head = f"[{f.level:>4}] {f.what}"
        if not f.detail:
            lines.append(head)
            continue
        if len(f.what) > column:
            lines.append(head)
            first = indent
        else:
            first = f"[{f.level:>4}] {f.what:<{column}}  "
        lines += textwrap.wrap(f.detail, width, initial_indent=first, subsequent_indent=indent, break_on_hyphens=False)
    usable = all(f.level != BAD for f in found)
    lines.append("Ready for the course." if usable else "Not ready: fix the FAIL lines above.")
    return "\n".join(lines)


def usable(found: list[Finding]) -> bool:
    return all(f.level != BAD for f in found)
