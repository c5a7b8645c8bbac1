"""Set the course up inside a hosted notebook (Colab, Kaggle, a notebook opened on its own).

Every notebook's first cell fetches the course when ``course_lib`` cannot be imported and then runs this
file (``runpy.run_path``, before ``course_lib`` is importable), so it imports nothing of the course and
nothing that starts CUDA or Triton. It decides the mode, installs only what the runtime lacks (never a
torch over the one the runtime has: pip would fetch gigabytes, and a runtime's torch is tied to its
CUDA), and makes the running kernel, and every command it starts, find the course:

- a GPU of compute capability 8.0 or newer with Triton 3.6 to 3.9 installed (torch 2.10 or newer):
  GPU mode;
- otherwise CPU mode (``COURSE_MODE=cpu``), saying why: no GPU, a GPU Triton does not support (a T4 or
  P100 is below 8.0), or a torch older than 2.10 whose Triton is older than 3.6 (the interpreter of a
  newer Triton is installed beside it; for GPU mode, upgrade torch and restart the runtime).

``plan`` decides from facts passed in (tested without pip or a GPU); ``main`` reads the facts, installs
and configures.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

TRITON_SPEC = "triton>=3.6,<3.10"
TRITON_RANGE = ((3, 6), (3, 10))
GPU_MIN_CAPABILITY = (8, 0)  # Triton's own floor
GPU_TORCH = (2, 10)  # each CUDA torch pins one Triton: 2.10 is the first with 3.6
# what the notebooks import besides torch and triton (jupyterlab is the host's own)
RUNTIME_PACKAGES = ("numpy", "matplotlib", "tqdm", "ipywidgets")
CPU_TORCH = ["torch", "--index-url", "https://download.pytorch.org/whl/cpu"]


def _version(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    numbers = re.findall(r"\d+", text.split("+")[0])
    return tuple(int(n) for n in numbers[:3]) if numbers else None


@dataclass
class Plan:
    mode: str  # "gpu" or "cpu"
    why: str
    installs: list[list[str]] = field(default_factory=list)  # pip arguments, one install each


def plan(gpu: tuple[str, tuple[int, int]] | None, versions: dict[str, str | None]) -> Plan:
    """The mode and the installs for a runtime: ``gpu`` is (name, capability) or None, ``versions`` the
    installed version of torch, triton and each of RUNTIME_PACKAGES (None when missing)."""
    triton = _version(versions.get("triton"))
    triton_ok = triton is not None and TRITON_RANGE[0] <= triton[:2] < TRITON_RANGE[1]
    torch_version = _version(versions.get("torch"))
    torch_ok = torch_version is not None and torch_version[:2] >= GPU_TORCH  # its own Triton is 3.6 or newer
    installs: list[list[str]] = []
    if gpu is None:
        mode, why = "cpu", "no NVIDIA GPU here: kernels run in Triton's interpreter"
    elif gpu[1] < GPU_MIN_CAPABILITY:
        cap = ".".join(map(str, gpu[1]))
        mode, why = (
            "cpu",
            (
                f"the {gpu[0]} (compute capability {cap}) is below Triton's 8.0: kernels run in Triton's "
                "interpreter (for GPU mode, choose an A100, L4 or H100 runtime)"
            ),
        )
    elif not (triton_ok and torch_ok):  # (a Triton installed here earlier beside an older torch: still CPU)
        mode, why = (
            "cpu",
            (
                f"GPU mode needs torch 2.10 or newer (its Triton 3.6+); this runtime has torch "
                f"{versions.get('torch') or 'none'} and Triton {versions.get('triton') or 'none'}. CPU mode for now; "
                "for GPU mode: pip install 'torch>=2.10', restart the runtime, run this cell again"
            ),
        )
    else:
        mode, why = "gpu", f"{gpu[0]}, Triton {versions['triton']}"
    if versions.get("torch") is None:
        # no torch at all (a plain Jupyter): the CPU build, 2.5 GB smaller than PyPI's CUDA one
        installs.append(CPU_TORCH if mode == "cpu" else ["torch>=2.10"])
    if not triton_ok and mode == "cpu":
        # the interpreter of a supported Triton, beside whatever torch pinned: --no-deps, or pip would
        # "fix" the pin by replacing the runtime's torch
        installs.append(["--no-deps", TRITON_SPEC])
    missing = [p for p in RUNTIME_PACKAGES if versions.get(p) is None]
    if missing:
        installs.append(missing)
    return Plan(mode, why, installs)


def _installed(name: str) -> str | None:
    """The installed version of ``name``. Triton is also "pytorch-triton", the name PyTorch's nightly
    wheels install it under (the same ``triton`` package inside)."""
    for dist in (name, "pytorch-triton") if name == "triton" else (name,):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _gpu() -> tuple[str, tuple[int, int]] | None:
    """The first GPU's name and capability from nvidia-smi (no CUDA context in this kernel)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    line = out.strip().splitlines()[0] if out.strip() else ""
    match = re.match(r"(.+),\s*(\d+)\.(\d+)\s*$", line)
    return (match.group(1).strip(), (int(match.group(2)), int(match.group(3)))) if match else None


def main(home: Path | None = None) -> Plan:
    home = Path(home or Path(__file__).resolve().parent.parent)
    facts = {name: _installed(name) for name in ("torch", "triton", *RUNTIME_PACKAGES)}
    decided = plan(_gpu(), facts)
    for args in decided.installs:
        print("installing:", " ".join(args))
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args])
        if done.returncode != 0:
            raise RuntimeError(f"pip install {' '.join(args)} failed (is the internet on? Kaggle: Settings, Internet)")
    importlib.invalidate_caches()
    if decided.mode == "cpu":
        os.environ["COURSE_MODE"] = "cpu"
    os.environ["COURSE_ROOT"] = str(home)
    # this kernel finds course_lib in the course's folder; commands it starts (!python -m course_lib ...,
    # the grader's workers) through PYTHONPATH
    if str(home) not in sys.path:
        sys.path.insert(0, str(home))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(home) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(home), *paths])
    os.chdir(home / "notebooks")
    print(f"course: {home}  (your exercises: {home / 'exercises'})")
    print(f"mode: {decided.mode.upper()}: {decided.why}")
    return decided


if __name__ == "__main__":
    main()
