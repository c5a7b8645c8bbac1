"""Which mode the course runs in, and setting up Triton's interpreter before Triton is imported.

GPU mode: a CUDA GPU is visible; kernels are compiled and can be timed.
CPU mode: no GPU; ``TRITON_INTERPRET=1`` makes every ``@triton.jit`` kernel run in Triton's
interpreter (numpy under the hood). Correctness can be checked; speed cannot.

This module must be imported before Triton. ``import course_lib`` does that.
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

GPU = "gpu"
CPU = "cpu"


class CourseSetupError(RuntimeError):
    """The environment cannot run the course as it is; the message says what to do."""


def _want_mode() -> str:
    """Decide the mode without importing Triton (torch is safe: it does not import Triton)."""
    forced = os.environ.get("COURSE_MODE", "").strip().lower()
    if forced in (GPU, CPU):
        return forced
    if forced:
        raise CourseSetupError(f"COURSE_MODE={forced!r} is not understood: use 'gpu', 'cpu' or leave it unset.")
    if os.environ.get("TRITON_INTERPRET") == "1":
        return CPU
    import torch

    return GPU if torch.cuda.is_available() else CPU


def _set_up() -> str:
    mode = _want_mode()
    # Triton 3.9 warns once that its fp-fusion default will change; keep today's default, quietly,
    # so that 3.6 and 3.9 compile the same arithmetic.
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    if mode == GPU:
        if os.environ.get("TRITON_INTERPRET") == "1" and os.environ.get("COURSE_MODE") == GPU:
            raise CourseSetupError("COURSE_MODE=gpu but TRITON_INTERPRET=1 is set: unset one of them.")
        return mode
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        raise CourseSetupError(
            "Triton was imported before course_lib, so kernels would be compiled for a GPU this machine "
            "does not have.\n"
            "Fix: restart the Python kernel (Kernel > Restart in JupyterLab) and run `import course_lib` "
            "before `import triton`, or start Python with TRITON_INTERPRET=1 set."
        )
    os.environ["TRITON_INTERPRET"] = "1"
    return mode


MODE: str = _set_up()


def is_gpu() -> bool:
    return MODE == GPU


def is_cpu() -> bool:
    return MODE == CPU


def describe_mode() -> str:
    if is_gpu():
        text = "GPU mode: kernels are compiled for the GPU and can be timed."
    else:
        text = (
            "CPU mode: kernels run in Triton's interpreter. Correctness is checked fully; speed is not "
            "measured here (interpreter time says nothing about GPU time): the course shows the roofline "
            "model, the memory-traffic count and recorded GPU results instead."
        )
    return text + other_checkout_note()


def other_checkout_note(here: Path | None = None) -> str:
    """A warning line when the current folder is outside the course folder that course_lib grades (a
    second checkout sharing another one's environment, whose editable install points elsewhere)."""
    here = (here or Path.cwd()).resolve()
    root = course_root()
    if root == here or root in here.parents:
        return ""
    return (
        f"\nNote: course_lib here grades and loads the files of {root}, not of this folder ({here}): "
        "to work on this checkout's exercises, set COURSE_ROOT to it (or install it in its own environment)."
    )


@cache
def versions() -> dict[str, str]:
    import numpy
    import torch
    import triton

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "numpy": numpy.__version__,
    }


def triton_version() -> tuple[int, int, int]:
    import triton

    return parse_version(triton.__version__)


GLUON_TRITONS = ((3, 6), (3, 9))  # the releases whose gl.warp_specialize chapter 09 uses


def gluon_problem() -> str | None:
    """Why chapter 09's Gluon kernels cannot compile with this Triton, or None when they can.

    Triton 3.6 through 3.9 share one ``gl.warp_specialize(functions_and_args, worker_num_warps,
    worker_num_regs)``; 3.5 took (default_args, default_partition, worker_args, worker_partitions,
    ...) instead, and Gluon is an experimental API that a later release may change again."""
    (low, high), have = GLUON_TRITONS, triton_version()[:2]
    if not low <= have <= high:
        import triton

        return (
            f"the Gluon kernels of chapter 09 need Triton {low[0]}.{low[1]} to {high[0]}.{high[1]} (their "
            f"gl.warp_specialize signature); this is Triton {triton.__version__}"
        )
    try:
        from triton.experimental.gluon.language.nvidia import hopper  # noqa: F401
    except ImportError as e:
        return f"this Triton has no Gluon Hopper API ({e})"
    return None


def parse_version(text: str) -> tuple[int, int, int]:
    parts = []
    for piece in text.split("+")[0].split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts)  # type: ignore[return-value]


@dataclass(frozen=True)
class GpuInfo:
    name: str
    capability: tuple[int, int]
    sm_count: int
    memory_gib: float
    l2_mib: float


@cache
def gpu_info() -> GpuInfo | None:
    """The visible GPU, or None in CPU mode."""
    if not is_gpu():
        return None
    import torch

    props = torch.cuda.get_device_properties(0)
    return GpuInfo(
        name=props.name,
        capability=(props.major, props.minor),
        sm_count=props.multi_processor_count,
        memory_gib=props.total_memory / 2**30,
        l2_mib=getattr(props, "L2_cache_size", 0) / 2**20,
    )


def device() -> str:
    """The torch device that inputs live on: 'cuda' in GPU mode, 'cpu' in the interpreter."""
    return "cuda" if is_gpu() else "cpu"


def cache_root() -> Path:
    """Where course_lib keeps what it measured on this machine (time limits, roofline peaks):
    COURSE_CACHE, else ~/.cache/course_lib. Never a sandboxed worker's to see."""
    return Path(os.environ.get("COURSE_CACHE", Path.home() / ".cache" / "course_lib")).expanduser()


def course_root() -> Path:
    """The folder that holds notebooks/, exercises/ and solutions/.

    COURSE_ROOT wins; then the course folder the current folder is in (one with exercises/ and
    notebooks/: a learner's own copy on a hub, where one install serves everyone, or a second
    checkout); then the checkout course_lib was installed from (editable install); failing that the
    current folder.
    """
    env = os.environ.get("COURSE_ROOT")
    if env:
        return Path(env).expanduser().resolve()
    try:
        cwd = Path.cwd().resolve()
    except OSError:  # the current folder was removed
        cwd = None
    for folder in (cwd, *cwd.parents) if cwd else ():
        if (folder / "exercises").is_dir() and (folder / "notebooks").is_dir():
            return folder
    here = Path(__file__).resolve().parent.parent
    if (here / "solutions").is_dir():
        return here
    return Path.cwd().resolve()


# --------------------------------------------------------------------------------------------------
# what this process may use: a container's or a hub's quota, not the host's size


@dataclass(frozen=True)
class Quota:
    cpus: float | None  # the CPU time quota in CPUs (a container's --cpus); None: no quota
    memory_bytes: int | None  # the memory limit; None: none


def _cgroup_paths(proc_cgroup: Path) -> dict[str, str]:
    """{controller: path} from /proc/self/cgroup ("" for cgroup v2's unified hierarchy)."""
    paths = {}
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                paths[controller] = parts[2]
    return paths


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _along(base: Path, path: str) -> list[Path]:
    """``base`` and each folder from it down to ``path`` (a cgroup's own limit and its parents')."""
    folders, here = [base], base
    for part in [p for p in path.split("/") if p]:
        here = here / part
        folders.append(here)
    return folders


def quota(root: Path = Path("/sys/fs/cgroup"), proc_cgroup: Path = Path("/proc/self/cgroup")) -> Quota:
    """This process's CPU and memory limits from its cgroups (v2, or v1's cpu and memory controllers),
    the tightest along its path; None where there is none or none can be read."""
    paths = _cgroup_paths(proc_cgroup)
    cpus: list[float] = []
    memory: list[int] = []
    if "" in paths or (root / "cpu.max").exists():  # v2
        for folder in _along(root, paths.get("", "")):
            text = _read(folder / "cpu.max")
            if text and not text.startswith("max"):
                limit, _, period = text.partition(" ")
                if limit.isdigit() and period.isdigit() and int(period) > 0:
                    cpus.append(int(limit) / int(period))
            text = _read(folder / "memory.max")
            if text and text.isdigit():
                memory.append(int(text))
    for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):  # v1
        for folder in _along(root / name, paths.get("cpu", "")):
            limit, period = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
            if limit and period and limit.isdigit() and period.isdigit() and int(period) > 0:
                cpus.append(int(limit) / int(period))
    for folder in _along(root / "memory", paths.get("memory", "")):
        text = _read(folder / "memory.limit_in_bytes")
        if text and text.isdigit() and int(text) < 1 << 60:  # v1 writes a huge number for "none"
            memory.append(int(text))
    return Quota(min(cpus) if cpus else None, min(memory) if memory else None)


def usable_cpus() -> int:
    """The CPUs this process may keep busy: those it may run on, cut to its cgroup's quota (a Binder
    or hub container's 1 or 2 CPUs on a large host), at least 1."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    cpus = quota().cpus
    if cpus is not None:
        count = min(count, max(1, int(cpus)))
    return max(1, count)


def install_scratch_allocator() -> bool:
    """On a GPU, give Triton an allocator for the global scratch memory some kernels ask for at each launch:
    a tensor descriptor made in the kernel (tl.make_tensor_descriptor, as Triton's own attention tutorial
    makes them) is written there, and without an allocator the launch fails ("Kernel requires a runtime
    memory allocation, but no allocator was set"). torch's caching allocator serves it, in notebooks, the
    benchmarks and the grader's workers alike; the pre-check keeps a task file from installing its own.
    Triton keeps the allocator in a context variable, which this sets for the importing thread's context
    (the grader's worker runs a task file's launcher there). Some Jupyter kernels run each cell in a fresh
    context (ipykernel 5, as older Colab images have it, and 7.0.0), so inside IPython the allocator is
    set again before every cell as well. CPU mode's interpreter needs none. True when set."""
    if is_cpu():
        return False
    try:
        import torch
        import triton

        def scratch(size: int, alignment: int, stream):  # torch's CUDA blocks are 512-byte aligned
            return torch.empty(size, device="cuda", dtype=torch.int8)

        triton.set_allocator(scratch)
    except Exception:  # a Triton without set_allocator, or no CUDA after all: a launch says what it lacks
        return False
    keep_in_every_cell("scratch_allocator", lambda: triton.set_allocator(scratch))
    return True


def keep_in_every_cell(name: str, setter, shell=None) -> bool:
    """Inside IPython, call ``setter`` before every cell runs, in that cell's context, so that what it sets
    in a context variable outlives kernels that give each cell a context of its own. One callback per
    ``name``: importing the course again replaces it rather than adding another. False outside IPython."""
    if shell is None:
        if "IPython" not in sys.modules:  # never import IPython just to ask
            return False
        try:
            shell = sys.modules["IPython"].get_ipython()
        except Exception:
            return False
        if shell is None:
            return False

    def before_cell(*_info) -> None:
        setter()

    before_cell.course_lib_name = name
    callbacks = shell.events.callbacks.get("pre_run_cell", [])
    for old in [c for c in callbacks if getattr(c, "course_lib_name", None) == name]:
        shell.events.unregister("pre_run_cell", old)
    shell.events.register("pre_run_cell", before_cell)
    return True
