"""Benchmark solutions against torch baselines on a GPU, and record the results.

    python -m course_lib bench vector_add --record results/h200.json

Every variant of a case is timed in the same process, on the same inputs, one after another:
the solution (twice, to show the spread of the method), torch eager (the task's reference),
torch.compile of the same reference (and any other compile mode a task asks for, such as
max-autotune), and a task's own extra baselines (``TaskSpec.bench_variants``: cuBLAS for the matmul
tasks). Before timing, the solution's output is checked against torch's on the benchmark inputs.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

# torch.compile's pool of compile workers kept the CPU busy while small kernels were timed, and
# stalled their launches (50 us instead of 7.5 for a 4096 x 512 softmax on an H200). One thread.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch  # noqa: E402

from . import results, roofline, runtime, sources, tasks, timing
from .compare import close_enough, poison


class StaleResults(Exception):
    """After timing, the launcher gave a wrong output for new values at the same addresses: the timed
    calls may have skipped the work (a result kept by address)."""


def _upcast(v):
    return v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _record(spec, case, variant, t: timing.Timing, peaks: roofline.Peaks, **extra) -> dict:
    n_bytes = spec.bytes_moved(case) if spec.bytes_moved else 0
    n_flops = spec.flops(case) if spec.flops else 0
    dtype = _dtype_name(case.dtype)
    rate_dtype = results.rate_dtype(spec.name, dtype)
    seconds = t.median_ms * 1e-3
    return {
        "task": spec.name,
        "variant": variant,
        "case": case.label + "".join(f" {k}={v}" for k, v in case.params),
        "params": dict(case.params),
        "shape": list(case.shape),
        "dtype": dtype,
        "median_ms": t.median_ms,
        "p20_ms": t.p20_ms,
        "p80_ms": t.p80_ms,
        "method": t.method,
        "bytes": n_bytes,
        "flops": n_flops,
        "gbs": n_bytes / seconds / 1e9,
        "tflops": n_flops / seconds / 1e12,
        "roofline_fraction": None  # a part of the task's work: a fraction would credit it with the rest
        if variant in spec.partial_variants
        else roofline.fraction_of_roofline(t.median_ms, n_bytes, n_flops, peaks, rate_dtype),
        **extra,
    }


def _bench_case(spec, entry, case, peaks: roofline.Peaks, log) -> list[dict]:
    """Time one case: the solution (twice), torch eager, the task's other baselines and torch.compile."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    inputs = spec.make_inputs(case, gen)
    ref_inputs = {k: v for k, v in inputs.items() if k not in spec.outputs}

    baseline = spec.baseline or spec.reference

    def solution():
        return entry(**inputs)

    def eager():
        return baseline(**ref_inputs)

    got = solution()
    got = inputs[spec.outputs[0]] if spec.outputs else got
    expected = spec.reference(**{k: _upcast(v) for k, v in ref_inputs.items()})
    tol = spec.tolerance[case.dtype]
    if not close_enough(got, expected, tol):
        log(f"{spec.name} {case.describe()}: the solution disagrees with the reference; not timed")
        return []
    del expected
    rows = [_record(spec, case, "solution", timing.bench(solution), peaks, repeat=r) for r in (1, 2)]
    _still_computes(spec, case, inputs, solution, tol)
    rows.append(_record(spec, case, "torch_eager", timing.bench(eager), peaks))
    for name, variant in (spec.bench_variants(case) if spec.bench_variants else {}).items():
        t = timing.bench(lambda v=variant: v(**ref_inputs))
        how = getattr(variant, "compile_config", None)  # a compiled variant says which way won
        pick = getattr(variant, "config", None)  # a variant that picks its fastest form says which
        extra = {**({"compile_config": how()} if how else {}), **({"config": pick()} if pick else {})}
        rows.append(_record(spec, case, name, t, peaks, **extra))
    for mode in spec.compile_modes:
        # at its best: max-autotune without the input copy of its CUDA graphs (timing.compiled_at_best)
        compiled, how, compile_s = timing.compiled_at_best(baseline, mode, ref_inputs)
        t = timing.bench(lambda c=compiled: c(**ref_inputs))
        name = "torch_compile" if mode == "default" else f"torch_compile_{mode}"
        rows.append(_record(spec, case, name, t, peaks, compile_s=round(compile_s, 2), compile_config=how))
    log(f"{spec.name}, case '{case.label}': {case.describe()}"[:300])
    for r in rows:
        log(
            f"{spec.name:<16}{r['variant']:<28}{r['dtype']:<10}{str(tuple(r['shape'])):<20}"
            f"{r['median_ms'] * 1e3:>10.1f} us {r['gbs']:>8.0f} GB/s {r['tflops']:>7.1f} TFLOP/s "
            + fraction_text(r["roofline_fraction"])
        )
    return rows


def fraction_text(fraction: float | None) -> str:
    """A row's share of the roofline as a case's table prints it, before the run's last row: a row above the
    roof measured before is not printed as more than 100% (the run raises the roof to it at the end, and the
    record holds the fraction against that roof)."""
    if fraction is None:
        return " a part"
    if fraction > 1:
        return "  above the roof measured before: the roof is raised at the end"
    return f"{fraction:>6.0%} of roofline"


def _still_computes(spec, case, inputs: dict, solution, tol) -> None:
    """New values in the same tensors (the same addresses), the output poisoned, one more call: its
    output must be right for them. A launcher that keeps results by address and returns early while
    it is timed raises StaleResults here."""
    fresh = spec.make_inputs(case, torch.Generator(device=_device(inputs)).manual_seed(1))
    for name, value in fresh.items():
        if name in inputs and isinstance(value, torch.Tensor) and name not in spec.outputs:
            inputs[name].copy_(value)
    for name in spec.outputs:
        poison(inputs[name])
    got = solution()
    got = inputs[spec.outputs[0]] if spec.outputs else got
    ref_inputs = {k: _upcast(v) for k, v in inputs.items() if k not in spec.outputs}
    if not close_enough(got, spec.reference(**ref_inputs), tol):
        raise StaleResults(
            "after the timed calls, new values in the same tensors gave a wrong output: the launcher seems "
            "to keep results by address and skip the work when it sees the same tensors again"
        )


def _device(inputs: dict) -> str:
    return next((v.device.type for v in inputs.values() if isinstance(v, torch.Tensor)), "cuda")


def _check_peaks(rows: list[dict], peaks: roofline.Peaks) -> tuple[roofline.Peaks, str | None]:
    """A row above 105% of the roofline means the peaks were measured low: have them checked once
    (``roofline.check_fraction``), and recompute every row's fraction when they changed. Returns
    the peaks to use and a line saying what happened, or None when nothing did."""
    top = max((r["roofline_fraction"] for r in rows if r["roofline_fraction"] is not None), default=0.0)
    new = roofline.check_fraction(top, peaks)
    if new == peaks:
        return peaks, None
    for r in rows:  # against the peaks measured again (run raises the roof to its rows afterwards)
        if r["roofline_fraction"] is not None:
            rate = results.rate_dtype(r["task"], r["dtype"])
            r["roofline_fraction"] = roofline.fraction_of_roofline(r["median_ms"], r["bytes"], r["flops"], new, rate)
    return new, (
        f"peaks measured again: a kernel ran at {top:.0%} of the roofline, so the peaks cached before were too low "
        f"(measured on a shared GPU?); now {new.bandwidth_gbs:.0f} GB/s, from {new.source}"
    )


def bench_task(
    spec: tasks.TaskSpec, peaks: roofline.Peaks, source: str = "solutions", log=print, dtype: str | None = None
) -> list[dict]:
    timing._require_gpu()
    _, entry = sources.load_file(sources.task_path(spec.name, source), spec.entry)
    rows = []
    for case in spec.bench_cases:
        if dtype and _dtype_name(case.dtype) != dtype:
            continue
        rows += _bench_case(spec, entry, case, peaks, log)
        torch.cuda.empty_cache()
    return rows


def run(
    names: list[str], record: str | None = None, source: str = "solutions", log=print, dtype: str | None = None
) -> dict:
    peaks = roofline.gpu_peaks()
    log(f"peaks: {peaks.bandwidth_gbs:.0f} GB/s measured, roof {peaks.tflops} TFLOP/s (the datasheet's where listed); "
        f"cuBLAS {peaks.library_tflops} TFLOP/s, the best library ({peaks.source})")  # fmt: skip
    rows = []
    for name in names:
        rows += bench_task(tasks.get(name), peaks, source, log, dtype)
    peaks, rechecked = _check_peaks(rows, peaks)
    if rechecked:
        log(rechecked)
    covered = results.hardware_fractions(rows, peaks)  # no roof below a rate a row of this run reached
    if covered != peaks:
        log(f"roof raised to the fastest rate of this run: {covered.bandwidth_gbs:.0f} GB/s, {covered.tflops} TFLOP/s")
        peaks = covered
    info = runtime.gpu_info()
    data = {
        "meta": {
            "gpu": info.name,
            "sm_count": info.sm_count,
            "versions": runtime.versions(),
            "date": time.strftime("%Y-%m-%d"),
            "peaks": peaks.to_dict(),
            **({"peaks_rechecked": rechecked} if rechecked else {}),
            "method": (
                "course_lib.timing.bench: CUDA events around each call, L2 flushed by a read before each, "
                "warm-up 25 ms, 100 ms of calls; median and p20/p80"
            ),
        },
        "records": rows,
    }
    if record:
        path = Path(record)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1))
        log(f"wrote {len(rows)} records to {path}")
    return data
