"""Timing on a GPU, done properly: warm-up first, median and spread, L2 flushed, same-run baselines.

In CPU mode ``bench`` refuses: the interpreter's time says nothing about a GPU's (it even runs
backwards, small blocks looking slow), so the course never shows it as kernel speed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from . import runtime


class TimingUnavailable(RuntimeError):
    pass


CPU_REFUSAL = (
    "Timing needs a GPU. In CPU mode kernels run in Triton's interpreter, whose time says nothing "
    "about GPU speed, so the course does not time them. Use the roofline model, the memory-traffic "
    "count (course_lib.traffic) or the recorded GPU results (course_lib.results) instead."
)


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    method: str  # "do_bench, L2 flushed" or "CUDA graph replay"

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.median_ms * 1e3:.1f} us (p20 {self.p20_ms * 1e3:.1f}, p80 {self.p80_ms * 1e3:.1f})"


def _require_gpu() -> None:
    if not runtime.is_gpu():
        raise TimingUnavailable(CPU_REFUSAL)


_clocks_up = False


def _raise_clocks() -> None:
    """An idle GPU runs at a low clock and takes a moment to speed up; a fresh process's first small
    kernel timed from idle read 14 us where it takes 7 on an H200. Keep the GPU busy ~0.3 s, once."""
    global _clocks_up
    if _clocks_up:
        return
    import torch

    a = torch.randn(4096, 4096, device="cuda")
    start = time.perf_counter()
    while time.perf_counter() - start < 0.3:
        a @ a
        torch.cuda.synchronize()
    _clocks_up = True


def bench(fn: Callable[[], object], *, warmup_ms: float = 25, rep_ms: float = 100, cuda_graph: bool = False) -> Timing:
    """Median and 20th/80th percentiles of ``fn()`` in milliseconds.

    ``fn`` is called once and synchronized first, so compilation and autotuning stay out of the
    numbers. ``triton.testing.do_bench`` then flushes L2 before every timed call (inputs come from
    memory, not from the cache). ``cuda_graph=True`` replays a captured graph instead, which hides the
    launch overhead of small kernels (and does not flush L2).
    """
    _require_gpu()
    import torch
    import triton.testing

    _raise_clocks()
    fn()
    torch.cuda.synchronize()
    quantiles = [0.5, 0.2, 0.8]
    if cuda_graph:
        with torch.cuda.stream(torch.cuda.Stream()):
            med, p20, p80 = triton.testing.do_bench_cudagraph(fn, rep=rep_ms, quantiles=quantiles)
        return Timing(med, p20, p80, "CUDA graph replay")
    med, p20, p80 = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=quantiles)
    return Timing(med, p20, p80, "do_bench, L2 flushed")


def compile_and_run_seconds(fn: Callable[[], object]) -> tuple[float, float]:
    """(seconds of the first call, which compiles; seconds of a second call), both synchronized."""
    _require_gpu()
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    first = time.perf_counter() - start
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return first, time.perf_counter() - start
