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
    method: str  # how it was timed, e.g. "CUDA events, L2 flushed by a read, 1400 calls"

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


def bench(
    fn: Callable[[], object],
    *,
    warmup_ms: float = 25,
    rep_ms: float = 100,
    flush: str | None = "read",
    cuda_graph: bool = False,
    hide_host: bool = True,
) -> Timing:
    """Median and 20th/80th percentiles of ``fn()`` in milliseconds, each call timed by CUDA events.

    ``fn`` is called once and synchronized first, so compilation and autotuning stay out of the
    numbers; then ``warmup_ms`` of untimed calls, then ``rep_ms`` of timed ones.

    ``flush`` empties the L2 before every timed call so inputs come from memory, as they do in a
    model: ``"read"`` reads a buffer several times the L2's size (the default), ``"write"`` zeroes
    one, as ``triton.testing.do_bench`` does, and None keeps the L2 warm. A write flush leaves the L2
    full of dirty lines, which drain to memory while the timed kernel runs and slow it down: on an
    H200 a 4096 x 8192 bf16 softmax measured 38.4 us after a write flush and 34.0 us after a read
    flush, where a copy of the same size takes 34.1 (results/timing_methods_h200.json).

    The host needs time to launch ``fn`` (15-40 us for a Triton or torch.compile call on an H200's
    host). CUDA events count GPU time between them, idle time included: a GPU that finished the flush
    and waits for the host's launch adds that wait to the number. A warm-L2 4 MB copy so read 497 GB/s
    (17 us, results/notebook_runs_h200/01_measure_first.txt) where it takes about 5 us with the launch
    hidden (a reader's recheck on an H200: 4.8-5.6 us). ``hide_host`` keeps the GPU busy before each call for
    at least 3x the slowest launch seen: the flush where it is long enough, else a spin kernel makes
    up the rest (``_spin_seconds`` says why this rule and not a closer one).

    ``cuda_graph=True`` captures ``fn`` once as a CUDA graph and replays it, as a model captured in a
    graph would run it.
    """
    _require_gpu()
    import torch

    _raise_clocks()
    fn()
    torch.cuda.synchronize()
    call = fn
    if cuda_graph:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()  # a warm-up on the capture stream, as torch.cuda.graphs asks
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        call = graph.replay
    clear = _flusher(flush)
    spin_cycles = _spin_cycles(call, clear, flushes=flush is not None) if hide_host else 0

    def busy() -> None:
        if spin_cycles:
            torch.cuda._sleep(spin_cycles)
        clear()

    def timed(n: int) -> list[float]:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for start, end in zip(starts, ends):
            busy()
            start.record()
            call()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) for start, end in zip(starts, ends)]

    begin = torch.cuda.Event(enable_timing=True)
    finish = torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(5):
        busy()
        call()
    finish.record()
    torch.cuda.synchronize()
    per_call = max(begin.elapsed_time(finish) / 5, 1e-3)  # ms, flush included
    timed(max(1, int(warmup_ms / per_call)))
    samples = sorted(timed(min(max(10, int(rep_ms / per_call)), 20000)))
    how = {"read": "L2 flushed by a read", "write": "L2 flushed by a write", None: "L2 warm"}[flush]
    spin = f", launch hidden behind a {spin_cycles / CLOCK_BOUND_HZ * 1e6:.0f} us spin" if spin_cycles else ""
    method = f"{'CUDA graph replay' if cuda_graph else 'CUDA events'}, {how}{spin}, {len(samples)} calls"
    return Timing(_quantile(samples, 0.5), _quantile(samples, 0.2), _quantile(samples, 0.8), method)


HOST_MARGIN = 3.0  # the GPU's work queued before each call lasts at least 3x the slowest launch seen
SPIN_CAP_S = 2e-3  # past this (a launch of 0.66 ms) it is a pause of the host, not a launcher
CLOCK_BOUND_HZ = 2.0e9  # above any GPU's clock (an H200 boosts to 1.98 GHz): a spin lasts at least its cycles / this


def _spin_cycles(call: Callable[[], object], clear: Callable[[], object], flushes: bool) -> int:
    """GPU clock cycles to spin before each flush so that the host's launch of ``call`` is hidden."""
    slowest = _slowest_launch_s(call)
    flush_s = _gpu_seconds(clear) if flushes else 0.0
    return int(_spin_seconds(slowest, flush_s) * CLOCK_BOUND_HZ)


def _spin_seconds(slowest_launch_s: float, flush_s: float) -> float:
    """How long to spin so that the GPU has ``HOST_MARGIN`` x the slowest launch (plus 10 us for the
    flush's and the events' own launches) queued before each call: the part the flush leaves over.

    Why this rule. The rule before compared the median host time of 5 calls with 0.7x the flush's
    time and spun only above it. Both sides are noise near the threshold, and with no flush the
    "flush time" was the host's own time between two events, so a pause of the host dropped the
    spin at random: a warm-L2 copy was recorded at its host launch time.

    Here the spin is never left out for want of evidence. The launch time is the slowest of several
    calls, so noise only lengthens the spin; a flush hides the launch alone only when it lasts 3x
    that; with no flush (``flush=None``) there is nothing else, so the spin always runs. And the
    spin shrinks to nothing as the flush nears 3x the launch: there is no jump at the threshold, so
    two runs either side of it queue the same work before the call, within a few microseconds.

    Why not always spin. A spin that is not needed costs something: in results/timing_methods_h200.json
    the runs that could spin alternate between two medians from one run to the next (a bf16 4096 x 512
    softmax: 7.5, 6.7, 7.5, 6.7 us) where those timed with no spin hold within 0.4 us. So where the
    flush covers 3x the launch, no spin is queued: a read flush of 480 MiB, about 115 us on an H200
    at 4.4 TB/s, covers a Triton launch of up to about 35 us (the record's were 15-21 us; a
    torch.compile call's 36 us gets a short spin).
    """
    need = HOST_MARGIN * slowest_launch_s + 10e-6
    if flush_s >= need:
        return 0.0
    return min(need - flush_s, SPIN_CAP_S)


def _slowest_launch_s(call: Callable[[], object], n: int = 10) -> float:
    """The slowest of ``n`` host times of ``call()``, each from an idle GPU (nothing queued ahead)."""
    import torch

    slowest = 0.0
    for _ in range(n):
        start = time.perf_counter()
        call()
        slowest = max(slowest, time.perf_counter() - start)
        torch.cuda.synchronize()
    return slowest


def _gpu_seconds(work: Callable[[], object], n: int = 5) -> float:
    """GPU seconds of one ``work()``, from CUDA events around ``n`` of them queued back to back."""
    import torch

    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(n):
        work()
    end.record()
    torch.cuda.synchronize()
    return begin.elapsed_time(end) / n * 1e-3


def _quantile(sorted_samples: list[float], q: float) -> float:
    """Linear interpolation between closest ranks, as torch.quantile (and do_bench) compute it."""
    pos = q * (len(sorted_samples) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_samples) - 1)
    return sorted_samples[lo] + (sorted_samples[hi] - sorted_samples[lo]) * (pos - lo)


_flush_buffers: dict = {}


def _flusher(flush: str | None) -> Callable[[], object]:
    if flush is None:
        return lambda: None
    if flush not in ("read", "write"):
        raise ValueError(f"flush must be 'read', 'write' or None, not {flush!r}")
    import torch

    if "buf" not in _flush_buffers:
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        n = max(256 * 2**20, 8 * l2) // 4  # int32 elements: at least 256 MiB, 8 L2s
        _flush_buffers["buf"] = torch.ones(n, dtype=torch.int32, device="cuda")
        _flush_buffers["sink"] = torch.empty((), dtype=torch.int64, device="cuda")
    buf, sink = _flush_buffers["buf"], _flush_buffers["sink"]
    if flush == "write":
        return buf.zero_
    return lambda: torch.sum(buf, dim=0, out=sink)


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


# torch.compile's max-autotune turns on CUDA graphs (cudagraph trees), which copy every input that is
# not marked static into the graph's own buffers on each call: a copy that a user who keeps weights and
# features in the same tensors never pays (on the H200 it was 0.19 ms of the capstone's 0.91). A
# knowledgeable user either marks the inputs static or turns the graphs off; the baseline is the
# faster of the two, and says which.
MAX_AUTOTUNE_WAYS = (
    ("max-autotune-no-cudagraphs", "max-autotune-no-cudagraphs", False),
    ("max-autotune, inputs marked static", "max-autotune", True),
)


def compiled_at_best(
    fn: Callable, mode: str, inputs: dict, timer: Callable | None = None
) -> tuple[Callable, str, float]:
    """``torch.compile(fn)`` in ``mode`` as a knowledgeable user would run it on ``inputs`` (keywords):
    for "max-autotune", each of ``MAX_AUTOTUNE_WAYS`` is compiled and timed (``timer``: a callable's
    Timing, ``bench`` by default) and the faster kept. Returns (the compiled callable, taking the same
    keywords; which way it is; seconds spent compiling all the ways). Where the static way wins, the
    tensors of ``inputs`` stay marked static (``torch._dynamo.mark_static_address``): it needs them so."""
    import torch

    timer = timer or bench
    ways = MAX_AUTOTUNE_WAYS if mode == "max-autotune" else ((mode, mode, False),)
    best = None
    compile_s = 0.0
    for how, compile_mode, static in ways:
        torch._dynamo.reset()  # dynamo caches by code object: each way compiles afresh
        if static:
            for value in inputs.values():
                if isinstance(value, torch.Tensor):
                    torch._dynamo.mark_static_address(value)
        compiled = torch.compile(fn, **({} if compile_mode == "default" else {"mode": compile_mode}))
        start = time.perf_counter()
        compiled(**inputs)
        if runtime.is_gpu():
            torch.cuda.synchronize()
        compile_s += time.perf_counter() - start
        if len(ways) == 1:
            return compiled, how, compile_s
        t = timer(lambda c=compiled: c(**inputs))
        if best is None or t.median_ms < best[2]:
            best = (how, compile_mode, t.median_ms)
    how, compile_mode, _ = best
    if how != ways[-1][0]:  # a reset dropped the faster way's compiled code: compile it once more
        for value in inputs.values():  # on the inputs as they were: the static marking taken off again
            if isinstance(value, torch.Tensor) and hasattr(value, "_dynamo_static_input_type"):
                del value._dynamo_static_input_type
        torch._dynamo.reset()
        compiled = torch.compile(fn, mode=compile_mode)
        compiled(**inputs)
    return compiled, how, compile_s
