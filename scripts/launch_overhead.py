"""What the grader's watch costs a timed call: each solution's launcher timed on its task's timed case
(GPU), bare and under each layer the grader's worker adds, in one process.

    PYTHONPATH=. python scripts/launch_overhead.py [--tasks a,b] [--out results/.../overhead.json]

Layers: ``plain`` (Triton's own launch, the course's hooks taken off), ``hooks`` (the course's launch
wrapper installed, no watch), ``watch`` (launches counted), ``guard`` (the launcher torch guard on,
allocations not poisoned), ``guard+poison`` (what a graded case runs). Two figures per layer: the
host's time per call (R calls queued, no synchronize: the CPU's cost) and the time per call of a
synchronized window of R calls (what the grader's clock sees). Where the host's time per call exceeds
the GPU's, the window measures the host, not the kernel.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import triton.runtime.autotuner as autotuner
import triton.runtime.jit as jit

ORIGINAL_RUNS = {cls: cls.run for cls in (jit.JITFunction, autotuner.Autotuner, autotuner.Heuristics)}

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from course_lib import hooks, sources, tasks  # noqa: E402  (installs the course's hooks)
from course_lib.grader import guards  # noqa: E402


def window(call, reps: int) -> tuple[float, float]:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        call()
    queued = time.perf_counter() - start
    torch.cuda.synchronize()
    return queued / reps, (time.perf_counter() - start) / reps


def best(call, reps: int, tries: int = 7) -> dict:
    window(call, 3)
    runs = [window(call, reps) for _ in range(tries)]
    return {"host_us": round(min(r[0] for r in runs) * 1e6, 2), "call_us": round(min(r[1] for r in runs) * 1e6, 2)}


def measure(name: str) -> dict:
    spec = tasks.get(name)
    case = spec.timed_case()
    if case is None:
        return {}
    _, entry = sources.load_file(ROOT / "solutions" / f"{name}.py", spec.entry, add_folder=False)
    made = spec.make_inputs(case, torch.Generator().manual_seed(0))
    kwargs = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in made.items()}
    files = (str(ROOT / "solutions" / f"{name}.py"),)
    allowed = guards.ALLOWED_IN_LAUNCHER - spec.forbid_in_launcher

    def call():
        entry(**kwargs)

    entry(**kwargs)  # compile
    torch.cuda.synchronize()
    first = window(call, 1)[1]
    reps = max(3, min(500, int(0.05 / max(first, 1e-6))))
    out: dict = {"case": repr(case), "reps": reps}
    wrapped = {cls: cls.run for cls in ORIGINAL_RUNS}
    for cls, run in ORIGINAL_RUNS.items():
        cls.run = run
    try:
        out["plain"] = best(call, reps)
    finally:
        for cls, run in wrapped.items():
            cls.run = run
    out["hooks"] = best(call, reps)
    with hooks.watch_launches():
        out["watch"] = best(call, reps)
    saved = guards._POISONED_ALLOCATIONS
    guards._POISONED_ALLOCATIONS = frozenset()
    try:
        with hooks.watch_launches(), guards.launcher_torch_guard(allowed, files):
            out["guard"] = best(call, reps)
    finally:
        guards._POISONED_ALLOCATIONS = saved
    with hooks.watch_launches(), guards.launcher_torch_guard(allowed, files):
        out["guard+poison"] = best(call, reps)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", default="")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    names = [n for n in args.tasks.split(",") if n] or [
        s.name for s in tasks.all_tasks() if s.timed_case() is not None and s.runs_here("gpu")
    ]
    table = {}
    for name in names:
        try:
            table[name] = measure(name)
        except Exception as e:  # a task this script cannot drive: say so, go on
            table[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
        row = table[name]
        cells = "  ".join(f"{k} {v['host_us']}/{v['call_us']}" for k, v in row.items() if isinstance(v, dict))
        print(f"{name:18s} {cells or row}", flush=True)
    if args.out:
        meta = {
            "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__,
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
        Path(args.out).write_text(json.dumps({"meta": meta, "host_us/call_us per layer": table}, indent=1))


if __name__ == "__main__":
    main()
