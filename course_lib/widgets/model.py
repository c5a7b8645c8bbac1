"""The roofline model of a task (no GPU needed): the reference GPU's peaks, the sizes a sweep
scales, each size's floor time and best rate, and the figures CPU mode draws from them."""

from __future__ import annotations

import dataclasses
import math

from .. import results, roofline, runtime
from ._common import VARIANT_ORDER, _dtype_name, _si, _spec


def model_peaks() -> roofline.Peaks:
    """Peaks of the reference GPU: the highest bandwidth measured in any benchmark record (runs on
    one day differ by about 1%, and the roof must not sit under a recorded kernel), else the datasheet;
    the compute roof is the GPU's datasheet peak either way (``roofline.hardware``)."""
    measured = []
    for data in results.load_bench_files():
        found = data["meta"].get("peaks")
        if found:
            try:
                measured.append(roofline.from_record(found))
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


def _case(spec, shape, label: str, dtype=None):
    """The base case at another shape (same task options; same dtype unless given, as a name or a torch dtype)."""
    case = dataclasses.replace(base_case(spec), shape=tuple(shape), label=label, misaligned=False)
    if dtype is not None and _dtype_name(dtype) != _dtype_name(case.dtype):
        import torch

        case = dataclasses.replace(case, dtype=getattr(torch, _dtype_name(dtype)))
    return case


def metric_for(n_bytes: int, n_flops: int, dtype: str = "float32", peaks: roofline.Peaks | None = None) -> str:
    """'GB/s' for a memory-bound kernel, 'TFLOP/s' for a compute-bound one, by the roofline model."""
    if not n_bytes:
        return "TFLOP/s"
    peaks = peaks or model_peaks()
    return "TFLOP/s" if roofline.floor(n_bytes, n_flops, peaks, dtype).bound == "compute" else "GB/s"


def model_rows(task, sizes=None, peaks: roofline.Peaks | None = None, dtype=None) -> list[dict]:
    """The roofline floor of each size: bytes, FLOPs, floor time and the best rate any kernel could reach
    (in the base case's dtype, or ``dtype``)."""
    spec = _spec(task)
    peaks = peaks or model_peaks()
    rows = []
    for shape in sizes or default_sizes(spec):
        case = _case(spec, shape, "model", dtype)
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


def legend_beside(target, handles=None, **kw) -> None:
    """A legend to the right of the plot, off the data (target: an Axes or a Figure)."""
    if handles is not None:
        kw["handles"] = handles
    target.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0, **kw)


VARIANT_COLORS = {variant: f"C{i}" for i, variant in enumerate(VARIANT_ORDER)}
_MARKERS = "os^Dvp"
DODGE = 1.05  # points of one size sit this factor apart along the (log) size axis


def _shape_label(shape) -> str:
    return " x ".join(str(d) for d in shape)


def _kind(record: dict) -> str:
    """What tells a record's case apart beyond shape and dtype: its task options ("approximate=tanh")."""
    return ", ".join(f"{k}={v}" for k, v in sorted((record.get("params") or {}).items()))


def _roof_label(peaks: roofline.Peaks, metric: str, dtype: str) -> str:
    rate = f"{peaks.bandwidth_gbs:,.0f} GB/s" if metric == "GB/s" else f"{peaks.flops_rate(dtype):g} TFLOP/s"
    return f"roofline model, {rate}"


def _draw_model(ax, rows: list[dict], peaks: roofline.Peaks, recorded: list[dict], metric: str, markers: dict):
    """One dtype on one chart: the model's best rate at each size, each recorded point in its variant's
    colour and its case's marker, the shapes named along the top. Points of one size are set a few
    percent apart (variant by variant) so that none hides another."""
    dtype = rows[0]["dtype"] if rows else recorded[0]["dtype"]
    key = _plot_rates(ax, metric, peaks, dtype, _roof_label(peaks, metric, dtype))
    best = "best_gbs" if key == "gbs" else "best_tflops"
    ax.plot([r["bytes"] for r in rows], [r[best] for r in rows], color="#888", lw=3, alpha=0.5, label="model floor")
    slots = [(v, kind) for v in VARIANT_ORDER for kind in markers]
    for i, (variant, kind) in enumerate(slots):
        points = [(r["bytes"], r[key]) for r in recorded if r["variant"] == variant and _kind(r) == kind]
        if points:
            dodge = DODGE ** (i - (len(slots) - 1) / 2)
            xs, ys = zip(*points)
            ax.scatter([x * dodge for x in xs], ys, s=45, zorder=3, color=VARIANT_COLORS[variant], marker=markers[kind])
    shapes = {r["bytes"]: r["shape"] for r in rows}
    shapes.update({r["bytes"]: r["shape"] for r in recorded})
    top = ax.secondary_xaxis("top")
    top.set_xticks(sorted(shapes), labels=[_shape_label(shapes[b]) for b in sorted(shapes)], fontsize=7)
    top.tick_params(axis="x", which="minor", top=False, labeltop=False)
    top.set_xlabel("shape", fontsize=8)


def _model_legend(peaks: roofline.Peaks, recorded: list[dict], markers: dict, metric: str, dtype: str) -> list:
    """One entry per variant and per case option (not per point), then the roof and the model floor."""
    from matplotlib.lines import Line2D

    def dot(label, color, marker="o"):
        return Line2D([], [], ls="", marker=marker, color=color, markersize=7, label=label)

    handles = [
        dot(f"{v}, recorded", VARIANT_COLORS[v]) for v in VARIANT_ORDER if any(r["variant"] == v for r in recorded)
    ]
    if len(markers) > 1:
        handles += [dot(kind or "default", "#555", marker) for kind, marker in markers.items()]
    handles.append(Line2D([], [], color="black", lw=1.2, ls="--", label=_roof_label(peaks, metric, dtype)))
    handles.append(Line2D([], [], color="#888", lw=3, alpha=0.5, label="model floor"))
    return handles


def _charted(recorded: list[dict]) -> list[dict]:
    return [r for r in recorded if r.get("repeat", 1) == 1]  # the solution's second timing is for the table


def model_figure(rows: list[dict], peaks: roofline.Peaks, recorded: list[dict], metric: str = "GB/s", title=""):
    """The best rate the roofline model allows at each size, with the recorded GPU figures on top
    (one dtype: the records of other dtypes are left out)."""
    from matplotlib.figure import Figure

    dtype = rows[0]["dtype"] if rows else "float32"
    recorded = [r for r in _charted(recorded) if r["dtype"] == dtype]
    markers = {kind: _MARKERS[i % len(_MARKERS)] for i, kind in enumerate(dict.fromkeys(map(_kind, recorded)))}
    fig = Figure(figsize=(7.2, 4.2))
    ax = fig.subplots()
    _draw_model(ax, rows, peaks, recorded, metric, markers or {"": "o"})
    if recorded:
        title = f"{title}\nrecorded on {recorded[0]['provenance']}"
    ax.set_title(title, fontsize=10)
    legend_beside(ax, _model_legend(peaks, recorded, markers, metric, dtype))
    return fig


def model_plot(spec, rows: list[dict], peaks: roofline.Peaks, recorded: list[dict], metric: str = "GB/s"):
    """CPU mode's figure: one chart per dtype, the model's best rate at each size (the roofline of
    that size) under the recorded GPU figures, and one legend beside the charts.

    Rate against size rather than the intensity roofline: a task's sizes all have one arithmetic
    intensity (softmax: 5 FLOPs per 4 bytes in bf16, at any width), so on the roofline every record
    of a dtype would stack on one vertical line. Each point is labelled by its case: its dtype in
    the chart's title, its shape along the top, its task options (GELU's form) by its marker; each
    variant has one colour and one legend entry."""
    from matplotlib.figure import Figure

    recorded = _charted(recorded)
    base = rows[-1]["dtype"] if rows else "float32"
    dtypes = list(dict.fromkeys([base] + [r["dtype"] for r in recorded]))
    markers = {kind: _MARKERS[i % len(_MARKERS)] for i, kind in enumerate(dict.fromkeys(map(_kind, recorded)))}
    sizes = [r["shape"] for r in rows] or None
    fig = Figure(figsize=(7.2, 3.6 * len(dtypes)), layout="constrained")
    for ax, dtype in zip(fig.subplots(len(dtypes), 1, squeeze=False)[:, 0], dtypes):
        mine = [r for r in recorded if r["dtype"] == dtype]
        these = rows if dtype == base else model_rows(spec, sizes, peaks, dtype)
        big = these[-1] if these else {"bytes": 0, "flops": 0}
        shown = metric if dtype == base else metric_for(big["bytes"], big["flops"], dtype, peaks)
        _draw_model(ax, these, peaks, mine, shown, markers or {"": "o"})
        title = f"{spec.name} {dtype}: roofline model on {peaks.gpu}"
        if mine:
            title += f"\nrecorded on {mine[0]['provenance']}"
        ax.set_title(title, fontsize=10)
    legend_beside(fig, _model_legend(peaks, recorded, markers, metric, base))
    return fig
