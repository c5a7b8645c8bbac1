"""The comparison chart: bars per variant (solution, torch_eager, torch_compile, cublas) from
benchmark records or from timings given by hand."""

from __future__ import annotations

from .. import timing
from ._common import VARIANT_ORDER, _heading, _image, _pre


def comparison_rows(data, n_bytes: int | None = None, n_flops: int | None = None) -> list[dict]:
    """Benchmark records (``results.records``, ``sweep``), or {variant: Timing or ms}, as chart rows."""
    rows = []
    if isinstance(data, dict):
        for variant, t in data.items():
            ms, p20, p80 = (t.median_ms, t.p20_ms, t.p80_ms) if isinstance(t, timing.Timing) else (float(t),) * 3
            seconds = ms * 1e-3
            rows.append(
                {
                    "label": variant,
                    "case": "",
                    "median_ms": ms,
                    "p20_ms": p20,
                    "p80_ms": p80,
                    "gbs": n_bytes / seconds / 1e9 if n_bytes else None,
                    "tflops": n_flops / seconds / 1e12 if n_flops else None,
                    "provenance": "",
                }
            )
        return rows
    for r in data:
        label = r["variant"] + (f" #{r['repeat']}" if r.get("repeat", 1) > 1 else "")
        rows.append(
            {
                "label": label,
                "case": f"{r.get('dtype', '')} {tuple(r['shape'])}" if "shape" in r else r.get("case", ""),
                "median_ms": r["median_ms"],
                "p20_ms": r.get("p20_ms", r["median_ms"]),
                "p80_ms": r.get("p80_ms", r["median_ms"]),
                "gbs": r.get("gbs"),
                "tflops": r.get("tflops"),
                "provenance": r.get("provenance", ""),
            }
        )
    return rows


def _pick_metric(rows: list[dict], metric: str) -> str:
    if metric != "auto":
        return metric
    if all(r["tflops"] for r in rows) and any(r["label"].startswith("cublas") for r in rows):
        return "TFLOP/s"
    return "GB/s" if all(r["gbs"] for r in rows) else "TFLOP/s" if all(r["tflops"] for r in rows) else "ms"


def comparison_figure(rows: list[dict], metric: str = "auto", title: str = ""):
    """Bars per variant (grouped by case): GB/s, TFLOP/s, or time in microseconds ("ms" metric)."""
    from matplotlib.figure import Figure

    metric = _pick_metric(rows, metric)
    cases = list(dict.fromkeys(r["case"] for r in rows))
    labels = sorted(
        dict.fromkeys(r["label"] for r in rows),
        key=lambda s: (VARIANT_ORDER.index(s.split()[0]) if s.split()[0] in VARIANT_ORDER else 99, s),
    )
    fig = Figure(figsize=(7.2, 0.9 + 0.45 * max(1, len(rows))))
    ax = fig.subplots()
    y = 0
    ticks, names = [], []
    for case in cases:
        for label in labels:
            row = next((r for r in rows if r["case"] == case and r["label"] == label), None)
            if row is None:
                continue
            if metric == "ms":
                value = row["median_ms"] * 1e3
                err = [[value - row["p20_ms"] * 1e3], [row["p80_ms"] * 1e3 - value]]
            else:
                value = row["gbs"] if metric == "GB/s" else row["tflops"]
                err = None
            colour = f"C{VARIANT_ORDER.index(label.split()[0]) if label.split()[0] in VARIANT_ORDER else 4}"
            ax.barh(y, value, xerr=err, color=colour, capsize=3)
            ax.text(value, y, f" {value:,.{0 if metric in ('GB/s', 'ms') and value >= 10 else 2}f}", va="center")
            ticks.append(y)
            names.append(f"{label}  {case}".strip())
            y += 1
        y += 0.5
    ax.set_yticks(ticks, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel({"ms": "median time (us; bars p20-p80)", "GB/s": "GB/s", "TFLOP/s": "TFLOP/s"}[metric])
    ax.margins(x=0.18)
    ax.set_title(title, fontsize=10)
    return fig


def comparison_chart(data, metric: str = "auto", n_bytes: int | None = None, n_flops: int | None = None, title=""):
    """A bar chart of variants (solution, torch_eager, torch_compile, cublas) with its numbers below.

    ``data``: benchmark records (``results.records(task)``, ``sweep(...)``) or {variant: Timing or ms}.
    Recorded figures carry their provenance into the title.
    """
    import ipywidgets as w

    rows = comparison_rows(data, n_bytes, n_flops)
    if not rows:
        return w.VBox([w.HTML(_pre("nothing to compare: no rows given (no recorded results?)"))])
    provenance = rows[0]["provenance"]
    if not title and not isinstance(data, dict):
        title = data[0]["task"] if data and "task" in data[0] else ""
    full_title = f"{title}\nrecorded on {provenance}" if provenance else title
    fig = comparison_figure(rows, metric, full_title)
    metric = _pick_metric(rows, metric)
    lines = [f"  {'variant':<17}{'case':<24}{'median':>12}{'GB/s':>9}{'TFLOP/s':>9}"]
    for r in rows:
        gbs = f"{r['gbs']:,.0f}" if r["gbs"] else "-"
        tf = f"{r['tflops']:.2f}" if r["tflops"] else "-"
        lines.append(f"  {r['label']:<17}{r['case']:<24}{r['median_ms'] * 1e3:>9.1f} us{gbs:>9}{tf:>9}")
    head = f"recorded on {provenance}" if provenance else "figures as given"
    return w.VBox([w.HTML(_heading(title or "comparison", head)), _image(fig), w.HTML(_pre("\n".join(lines)))])
