"""The roofline model of a task (no GPU needed): the reference GPU's peaks, the sizes a sweep
scales, each size's floor time and best rate, and the figures CPU mode draws from them."""

from __future__ import annotations

import dataclasses
import math

from .. import results, roofline, runtime
from ._common import VARIANT_ORDER, _dtype_name, _si, _spec


def model_peaks() -> roofline.Peaks:
    """Peaks of the reference GPU: the highest bandwidth measured in any benchmark record (runs on
    one day differ by about 1%, and the roof must not sit under a recorded kernel), else the datasheet."""
    measured = []
    for data in results.load_bench_files():
        found = data["meta"].get("peaks")
        if found:
            try:
                measured.append(roofline.Peaks(**found))
            except TypeError:
                continue
    if measured:
        return max(measured, key=lambda p: p.bandwidth_gbs)
    return roofline.datasheet_peaks(roofline.REFERENCE_GPU)


def _peaks_label(peaks: roofline.Peaks) -> str:
    where = peaks.source.split(":")[0] if peaks.source != "datasheet" else f"{peaks.gpu} datasheet"
    return f"{peaks.bandwidth_gbs:,.0f} GB/s, {where}"


def base_case(task):
    """The case a sweep scales: the task's first benchmark case, else its largest CPU test case."""
    spec = _spec(task)
    if spec.bench_cases:
        return spec.bench_cases[0]
    cases = [c for c in spec.cases(runtime.CPU) if c.shape and not c.misaligned]
    if not cases or spec.bytes_moved is None:
        raise ValueError(f"{spec.name} has no kernel to benchmark (no benchmark shape and no bytes model)")
    return max(cases, key=lambda c: math.prod(c.shape))


def default_sizes(task) -> list[tuple[int, ...]]:
    """Shapes for a sweep, ending at the benchmark shape.

    The task's own benchmark shapes when it lists several of one dtype (softmax: rows of 512 to 8192);
    otherwise 1-D lengths 4x apart from 4096 up, or N-D shapes halved three times.
    """
    spec = _spec(task)
    base = base_case(spec)
    same = list(dict.fromkeys(tuple(c.shape) for c in spec.bench_cases if c.dtype == base.dtype))
    if len(same) >= 3:
        return same
    shape = tuple(base.shape)
    if len(shape) == 1:
        return [(shape[0] >> k,) for k in range(16, -1, -2) if shape[0] >> k >= 1]
    return [tuple(max(16, d >> k) for d in shape) for k in (3, 2, 1, 0)]


def _case(spec, shape, label: str):
    """The base case at another shape (same dtype and task options)."""
    return dataclasses.replace(base_case(spec), shape=tuple(shape), label=label, misaligned=False)


def metric_for(n_bytes: int, n_flops: int, dtype: str = "float32", peaks: roofline.Peaks | None = None) -> str:
    """'GB/s' for a memory-bound kernel, 'TFLOP/s' for a compute-bound one, by the roofline model."""
    if not n_bytes:
        return "TFLOP/s"
    peaks = peaks or model_peaks()
    return "TFLOP/s" if roofline.floor(n_bytes, n_flops, peaks, dtype).bound == "compute" else "GB/s"


def model_rows(task, sizes=None, peaks: roofline.Peaks | None = None) -> list[dict]:
    """The roofline floor of each size: bytes, FLOPs, floor time and the best rate any kernel could reach."""
    spec = _spec(task)
    peaks = peaks or model_peaks()
    rows = []
    for shape in sizes or default_sizes(spec):
        case = _case(spec, shape, "model")
        n_bytes = spec.bytes_moved(case) if spec.bytes_moved else 0
        n_flops = spec.flops(case) if spec.flops else 0
        fl = roofline.floor(n_bytes, n_flops, peaks, _dtype_name(case.dtype))
        seconds = fl.ms * 1e-3
        rows.append(
            {
                "shape": tuple(shape),
                "dtype": _dtype_name(case.dtype),
                "bytes": n_bytes,
                "flops": n_flops,
                "floor_ms": fl.ms,
                "bound": fl.bound,
                "best_gbs": n_bytes / seconds / 1e9 if seconds else 0.0,
                "best_tflops": n_flops / seconds / 1e12 if seconds else 0.0,
            }
        )
    return rows


def model_table(rows: list[dict], peaks: roofline.Peaks) -> str:
    lines = [
        f"the best any kernel could do on {peaks.gpu} ({_peaks_label(peaks)}; "
        f"{peaks.flops_rate(rows[0]['dtype'] if rows else 'float32'):g} TFLOP/s {rows[0]['dtype'] if rows else ''}):",
        f"  {'shape':<16}{'bytes moved':>13}{'FLOPs':>11}{'floor':>12}{'best GB/s':>11}{'best TFLOP/s':>14}  bound",
    ]
    for r in rows:
        lines.append(
            f"  {str(r['shape']):<16}{_si(r['bytes'], 'B'):>13}{_si(r['flops'], ''):>11}"
            f"{r['floor_ms'] * 1e3:>9.2f} us{r['best_gbs']:>11,.0f}{r['best_tflops']:>14.2f}  {r['bound']}"
        )
    lines.append("floor = max(bytes / bandwidth, FLOPs / FLOP rate), leaving out the few microseconds a launch costs")
    lines.append("(they dominate below about a megabyte).")
    return "\n".join(lines)


def _plot_rates(ax, metric: str, peaks: roofline.Peaks, dtype: str, roof_label: str) -> str:
    key = "gbs" if metric == "GB/s" else "tflops"
    roof = peaks.bandwidth_gbs if metric == "GB/s" else peaks.flops_rate(dtype)
    ax.axhline(roof, color="black", lw=1.2, ls="--", label=roof_label)
    ax.set_xscale("log")
    ax.set_xlabel("bytes moved per call")
    ax.set_ylabel(metric)
    ax.set_ylim(0, roof * 1.15)
    ax.grid(True, alpha=0.3)
    return key


def model_figure(rows: list[dict], peaks: roofline.Peaks, recorded: list[dict], metric: str = "GB/s", title=""):
    """The best rate the roofline model allows at each size, with the recorded GPU figures on top."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.2, 4.2))
    ax = fig.subplots()
    dtype = rows[0]["dtype"] if rows else "float32"
    key = _plot_rates(ax, metric, peaks, dtype, f"roofline model: {_peaks_label(peaks)}")
    best = "best_gbs" if key == "gbs" else "best_tflops"
    ax.plot([r["bytes"] for r in rows], [r[best] for r in rows], color="#888", lw=3, alpha=0.5, label="model floor")
    for variant in VARIANT_ORDER:
        points = [(r["bytes"], r[key]) for r in recorded if r["variant"] == variant and r.get("repeat", 1) == 1]
        if points:
            ax.scatter(*zip(*points), s=50, zorder=3, label=f"{variant}, recorded")
    if recorded:
        title = f"{title}\nrecorded on {recorded[0]['provenance']}"
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def model_plot(spec, rows: list[dict], peaks: roofline.Peaks, recorded: list[dict], metric: str = "GB/s"):
    """CPU mode's figure: the task on the roofline (intensity against GFLOP/s) with any recorded
    GPU figures; a task with no FLOPs (a copy) has no place there and gets rate against size."""
    from matplotlib.figure import Figure

    dtype = rows[-1]["dtype"] if rows else "float32"
    title = f"{spec.name} {dtype}: roofline model on {peaks.gpu}"
    if not rows or not rows[-1]["flops"]:
        return model_figure(rows, peaks, recorded, metric, title)
    big = rows[-1]
    points = [{"label": f"{spec.name} {big['shape']}", "bytes": big["bytes"], "flops": big["flops"], "ms": None}]
    for r in recorded:
        if r.get("repeat", 1) == 1 and r["flops"]:
            points.append(
                {"label": f"{r['variant']} (recorded)", **{k: r[k] for k in ("bytes", "flops")}, "ms": r["median_ms"]}
            )
    if recorded:
        title += f"\nrecorded on {recorded[0]['provenance']}"
    fig = Figure(figsize=(7.2, 4.4))
    ax = roofline.plot(points, peaks, dtype, ax=fig.subplots(), title=title)
    ax.title.set_fontsize(10)
    ax.legend(fontsize=8, loc="upper left")  # above the roof is empty; the points sit low on the left
    return fig
