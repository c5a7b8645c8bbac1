"""The GPU sweep: the solution and the torch baselines timed at each size through bench's own
protocol, and the figure and table of what it measured."""

from __future__ import annotations

from collections.abc import Callable

from .. import roofline, timing
from ._common import VARIANT_ORDER, _load_entry, _spec
from .model import _case, _peaks_label, _plot_rates, default_sizes, legend_beside


def sweep(
    task,
    sizes=None,
    source: str = "solutions",
    progress: Callable[[str], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> list[dict]:
    """Time the solution and the torch baselines at each size (GPU only), as benchmark records.

    Each size goes through the same protocol as ``python -m course_lib bench``: the solution is
    checked against the reference first (a size where it disagrees gets no rows), then timed
    (twice), then torch eager and torch.compile. ``log`` gets bench's line per row and per mismatch.
    """
    timing._require_gpu()
    import torch

    spec = _spec(task)
    entry = _load_entry(spec, source)
    peaks = roofline.gpu_peaks()
    rows = []
    for shape in sizes or default_sizes(spec):
        case = _case(spec, shape, "sweep")
        rows += _bench_case(spec, entry, case, peaks, log or (lambda line: None))
        torch.cuda.empty_cache()
        if progress:
            progress(str(tuple(shape)))
    return rows


def _bench_case(spec, entry, case, peaks, log) -> list[dict]:
    """bench's protocol for one case: the widgets' only call of bench's private ``_bench_case``
    (looked up when called, so a test's stand-in for it is the one that runs)."""
    from .. import bench

    return bench._bench_case(spec, entry, case, peaks, log)


def sweep_figure(rows: list[dict], peaks: roofline.Peaks, metric: str = "GB/s", title: str = ""):
    """Measured rate of each variant against size, under the measured roofline."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.2, 4.2))
    ax = fig.subplots()
    dtype = rows[0]["dtype"] if rows else "float32"
    key = _plot_rates(ax, metric, peaks, dtype, f"roofline: {_peaks_label(peaks)}")
    for variant in VARIANT_ORDER:
        points = sorted((r["bytes"], r[key]) for r in rows if r["variant"] == variant and r.get("repeat", 1) == 1)
        if points:
            ax.plot(*zip(*points), marker="o", label=variant)
    ax.set_title(title, fontsize=10)
    legend_beside(ax)
    return fig


def sweep_table(rows: list[dict], metric: str = "GB/s") -> str:
    key = "gbs" if metric == "GB/s" else "tflops"
    lines = [f"  {'variant':<15}{'shape':<16}{'median':>12}{'p20-p80 (us)':>18}{metric:>10}{'of roofline':>13}"]
    for r in rows:
        spread = f"{r['p20_ms'] * 1e3:.1f}-{r['p80_ms'] * 1e3:.1f}"
        name = r["variant"] + (f" #{r['repeat']}" if r.get("repeat", 1) > 1 else "")
        share = "part" if r["roofline_fraction"] is None else f"{r['roofline_fraction']:.0%}"  # a part of the work
        lines.append(
            f"  {name:<15}{str(tuple(r['shape'])):<16}{r['median_ms'] * 1e3:>9.1f} us{spread:>18}"
            f"{r[key]:>10,.{0 if key == 'gbs' else 2}f}{share:>13}"
        )
    return "\n".join(lines)
