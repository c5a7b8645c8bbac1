"""Notebook panels: a benchmark sweep, a tuner, a comparison chart and an Amdahl calculator.

    from course_lib import widgets
    widgets.amdahl_calculator()
    widgets.benchmark_panel("vector_add")

Every panel is an ipywidgets container. What they compute lives in plain functions beside them
(``amdahl``, ``model_rows``, ``count_traffic``, ``sweep``, ``run_config``, ``comparison_rows``...),
so the tests check the numbers without a browser. Text goes into HTML widgets and plots into Image
widgets (PNG), so a panel reads the same in JupyterLab, in a test and in a saved notebook.

GPU mode times with ``course_lib.timing`` only. CPU mode times nothing: interpreter wall time says
nothing about a GPU (it even runs backwards, small blocks looking slow). There the panels show the
roofline model on the reference GPU, the interpreter's memory-traffic count, and the recorded GPU
results from ``results/`` with their provenance.

ipywidgets and matplotlib are imported inside the functions: ``import course_lib`` and the command
line never need them.
"""

from __future__ import annotations

import dataclasses
import html
import io
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from . import results, roofline, runtime, timing, traffic

CPU_NO_TIME = (
    "No time is shown: in CPU mode kernels run in Triton's interpreter, whose wall time says nothing "
    "about GPU speed (small blocks even look slow there)."
)
DEFAULT_TUNER_PARAMS = {
    "BLOCK_SIZE": [128, 256, 512, 1024, 2048, 4096],
    "num_warps": [1, 2, 4, 8],
    "num_stages": [1, 2, 3, 4],
}
_PREFERRED = {"BLOCK_SIZE": 1024, "num_warps": 4, "num_stages": 3}  # the first choice when offered
VARIANT_ORDER = ("solution", "torch_eager", "torch_compile", "cublas")
TRAFFIC_ELEMENTS = 16_384  # 1-D size the interpreter counts traffic at: 16 blocks of 1024, ~0.1 s


# --------------------------------------------------------------------------------------------------
# small formatting helpers


def _si(value: float, unit: str) -> str:
    """1234567 B -> '1.23 MB' (decimal prefixes, like GB/s)."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _pre(text: str) -> str:
    return f'<pre style="margin:0; font-size:12px; line-height:1.35; white-space:pre-wrap">{html.escape(text)}</pre>'


def _heading(text: str, note: str = "") -> str:
    extra = f'<div style="color:#555; font-size:12px">{html.escape(note)}</div>' if note else ""
    return f'<div style="margin-top:8px"><b>{html.escape(text)}</b>{extra}</div>'


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def _image(fig):
    import ipywidgets as w

    return w.Image(value=_png(fig), format="png", layout=w.Layout(max_width="720px"))


def _spec(task):
    from . import tasks

    return tasks.get(task) if isinstance(task, str) else task


# --------------------------------------------------------------------------------------------------
# Amdahl


def shown_text(widget) -> str:
    """Every text a widget tree shows, tags stripped: what a learner reads (for tests and scripts)."""
    import html
    import re

    import ipywidgets

    found = []
    if isinstance(widget, (ipywidgets.HTML, ipywidgets.Label)):
        found.append(html.unescape(re.sub(r"<[^>]+>", " ", widget.value)))
    for child in getattr(widget, "children", ()):
        found.append(shown_text(child))
    return "\n".join(found)


def shown_images(widget) -> list[bytes]:
    """The PNG bytes of every image in a widget tree, in order."""
    import ipywidgets

    if isinstance(widget, ipywidgets.Image):
        return [bytes(widget.value)]
    return [img for child in getattr(widget, "children", ()) for img in shown_images(child)]


def amdahl(total_ms: float, part_ms: float, speedup: float) -> tuple[float, float]:
    """(new total in ms, overall speed-up) when ``part_ms`` of ``total_ms`` runs ``speedup`` times faster."""
    if total_ms <= 0:
        raise ValueError(f"total_ms must be positive, got {total_ms}")
    if not 0 <= part_ms <= total_ms:
        raise ValueError(f"part_ms must lie between 0 and total_ms ({total_ms}), got {part_ms}")
    if speedup <= 0:
        raise ValueError(f"speedup must be positive, got {speedup}")
    new_total = (total_ms - part_ms) + part_ms / speedup
    return new_total, total_ms / new_total


def amdahl_text(total_ms: float, part_ms: float, speedup: float) -> str:
    new_total, overall = amdahl(total_ms, part_ms, speedup)
    rest = total_ms - part_ms
    limit = "no limit: the part is the whole request" if rest == 0 else f"at most {total_ms / rest:.2f}x"
    return (
        f"The part takes {part_ms:.1f} ms of {total_ms:.1f} ms ({part_ms / total_ms:.0%}). "
        f"Made {speedup:g}x faster it takes {part_ms / speedup:.1f} ms, so the request takes "
        f"{new_total:.1f} ms instead of {total_ms:.1f} ms: {overall:.2f}x faster overall.\n"
        f"However fast the part gets, the other {rest:.1f} ms stay: {limit}."
    )


def _amdahl_bars(total_ms: float, part_ms: float, speedup: float) -> str:
    """Before/after bars in plain HTML, cheap enough to redraw on every slider move."""
    new_total, _ = amdahl(total_ms, part_ms, speedup)
    rest = total_ms - part_ms

    def bar(label, part, colour):
        scale = 420 / total_ms  # pixels per ms
        return (
            f'<div style="display:flex; align-items:center; margin:2px 0">'
            f'<span style="width:60px">{label}</span>'
            f'<span style="width:{part * scale:.1f}px; height:16px; background:{colour}" title="the part"></span>'
            f'<span style="width:{rest * scale:.1f}px; height:16px; background:#bbb" title="the rest"></span>'
            f'<span style="margin-left:6px">{rest + part:.1f} ms</span></div>'
        )

    return (
        bar("before", part_ms, "#d62728")
        + bar("after", part_ms / speedup, "#2ca02c")
        + '<div style="font-size:11px; color:#555">coloured: the part; grey: the rest of the request</div>'
    )


def amdahl_calculator(total_ms: float = 100.0, part_ms: float = 40.0, speedup: float = 4.0):
    """Sliders for a request's time, one part of it and that part's speed-up; the new total, live."""
    import ipywidgets as w

    style = {"description_width": "170px"}
    layout = w.Layout(width="520px")
    common = {"style": style, "layout": layout, "readout_format": ".1f"}
    total = w.FloatSlider(value=total_ms, min=1, max=1000, step=1, description="request time (ms)", **common)
    part = w.FloatSlider(value=part_ms, min=0, max=total_ms, step=0.5, description="the part's time (ms)", **common)
    factor = w.FloatSlider(value=speedup, min=1, max=100, step=0.5, description="the part's speed-up (x)", **common)
    answer = w.HTML()
    bars = w.HTML()

    def update(_=None):
        part.max = total.value  # the part cannot be longer than the request (this also clamps it)
        new_total, overall = amdahl(total.value, part.value, factor.value)
        answer.value = (
            f'<div style="font-size:15px; margin:4px 0">new total <b>{new_total:.1f} ms</b> '
            f"(was {total.value:.1f} ms): <b>{overall:.2f}x</b> faster overall</div>"
            + _pre(amdahl_text(total.value, part.value, factor.value))
        )
        bars.value = _amdahl_bars(total.value, part.value, factor.value)

    for slider in (total, part, factor):
        slider.observe(update, names="value")
    update()
    title = w.HTML(_heading("Amdahl's law: speeding up one part of a request"))
    return w.VBox([title, total, part, factor, answer, bars], layout=w.Layout(padding="4px"))


# --------------------------------------------------------------------------------------------------
# the roofline model of a task (no GPU needed)


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


# --------------------------------------------------------------------------------------------------
# memory traffic in the interpreter (CPU mode)


def traffic_shape(task) -> tuple[int, ...]:
    """A small shape of the task for the interpreter: 16,384 elements, or N-D dims of at most 128."""
    shape = tuple(base_case(task).shape)
    if len(shape) == 1:
        return (min(shape[0], TRAFFIC_ELEMENTS),)
    return tuple(min(d, 128) for d in shape)


def count_traffic(task, shape=None, source: str = "solutions") -> tuple[traffic.Recorder, object]:
    """Run a task's launcher once in the interpreter under ``traffic.record()``: (recorder, case)."""
    import torch

    from . import grading

    spec = _spec(task)
    case = _case(spec, shape or traffic_shape(spec), "traffic")
    _, entry, _ = grading._load_module(spec, grading.resolve_source(source))
    inputs = spec.make_inputs(case, torch.Generator().manual_seed(0))
    with traffic.record() as rec:
        entry(**inputs)
    return rec, case


def traffic_text(rec: traffic.Recorder) -> str:
    s = rec.summary()
    verdict = (
        "every warp touches only the sectors its data needs"
        if s["efficiency"] >= 0.999
        else f"warps touch {1 / s['efficiency']:.2f}x the sectors their data needs"
    )
    return f"{rec.table()}\nefficiency {s['efficiency']:.0%} (ideal sectors / sectors touched): {verdict}."


# --------------------------------------------------------------------------------------------------
# the GPU sweep


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

    from . import bench, grading

    spec = _spec(task)
    _, entry, _ = grading._load_module(spec, grading.resolve_source(source))
    peaks = roofline.gpu_peaks()
    rows = []
    for shape in sizes or default_sizes(spec):
        case = _case(spec, shape, "sweep")
        rows += bench._bench_case(spec, entry, case, peaks, log or (lambda line: None))
        torch.cuda.empty_cache()
        if progress:
            progress(str(tuple(shape)))
    return rows


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
    ax.legend(fontsize=8, loc="upper left")
    return fig


def sweep_table(rows: list[dict], metric: str = "GB/s") -> str:
    key = "gbs" if metric == "GB/s" else "tflops"
    lines = [f"  {'variant':<15}{'shape':<16}{'median':>12}{'p20-p80 (us)':>18}{metric:>10}{'of roofline':>13}"]
    for r in rows:
        spread = f"{r['p20_ms'] * 1e3:.1f}-{r['p80_ms'] * 1e3:.1f}"
        name = r["variant"] + (f" #{r['repeat']}" if r.get("repeat", 1) > 1 else "")
        lines.append(
            f"  {name:<15}{str(tuple(r['shape'])):<16}{r['median_ms'] * 1e3:>9.1f} us{spread:>18}"
            f"{r[key]:>10,.{0 if key == 'gbs' else 2}f}{r['roofline_fraction']:>13.0%}"
        )
    return "\n".join(lines)


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


def _recorded_text(task_name: str) -> str:
    if results.records(task_name):
        return results.table(task_name)
    return (
        f"No recorded GPU results for {task_name} in {results.results_dir()} yet. On a GPU, "
        f"`python -m course_lib bench {task_name} --record results/<gpu>.json` records them."
    )


def benchmark_panel(task, sizes=None, source: str = "solutions", run: bool = True):
    """A size sweep of a task's solution against torch (GPU), or the model, traffic and records (CPU)."""
    import ipywidgets as w

    spec = _spec(task)
    title = w.HTML(_heading(f"{spec.name}: {spec.title}", runtime.describe_mode()))
    try:
        sizes = [tuple(s) if isinstance(s, (tuple, list)) else (int(s),) for s in (sizes or default_sizes(spec))]
    except ValueError as e:  # a task that is no kernel (a cost-model exercise, say)
        return w.VBox([title, w.HTML(_pre(str(e)))])
    if runtime.is_cpu():
        return w.VBox([title, *_cpu_sections(spec, sizes, source)])

    status = w.HTML()
    progress_out = w.Output()
    figure_box = w.VBox()
    table = w.HTML()
    button = w.Button(description="Run the sweep again" if run else "Run the sweep", icon="play")

    def go(_=None):
        from tqdm.auto import tqdm

        button.disabled = True
        progress_out.clear_output()
        status.value = _pre(f"timing {len(sizes)} sizes: the solution, torch eager and torch.compile ...")
        try:
            with progress_out:
                bar = tqdm(total=len(sizes), desc=f"{spec.name} sweep", unit="size")
                rows = sweep(spec, sizes, source, progress=lambda _: bar.update(1))
                bar.close()
            peaks = roofline.gpu_peaks()
            last = rows[-1] if rows else {"bytes": 0, "flops": 0, "dtype": "float32"}
            metric = metric_for(last["bytes"], last["flops"], last["dtype"], peaks)
            gpu = runtime.gpu_info().name
            fig = sweep_figure(rows, peaks, metric, f"{spec.name} {last['dtype']} on {gpu}, measured now")
            figure_box.children = [_image(fig)]
            table.value = _pre(
                f"measured now on {gpu} (timing.bench: median of CUDA-event timings, L2 flushed):\n"
                + sweep_table(rows, metric)
            )
            timed = {tuple(r["shape"]) for r in rows}
            wrong = [shape for shape in sizes if shape not in timed]
            status.value = (
                _pre(
                    f"not timed at {', '.join(map(str, wrong))}: the solution disagrees with the reference there "
                    f"(python -m course_lib check {spec.name} says where)."
                )
                if wrong
                else ""
            )
        except Exception as e:  # a panel reports; it does not crash the notebook
            status.value = _pre(f"the sweep stopped: {type(e).__name__}: {e}")
        finally:
            button.disabled = False

    button.on_click(go)
    recorded = w.HTML(_heading("Recorded GPU results, for comparison") + _pre(_recorded_text(spec.name)))
    if run:
        go()
    return w.VBox([title, button, status, progress_out, figure_box, table, recorded])


def _cpu_sections(spec, sizes, source: str) -> list:
    import ipywidgets as w

    peaks = model_peaks()
    rows = model_rows(spec, sizes, peaks)
    metric = metric_for(rows[-1]["bytes"], rows[-1]["flops"], rows[-1]["dtype"], peaks) if rows else "GB/s"
    recorded = results.records(spec.name)
    fig = model_plot(spec, rows, peaks, recorded, metric)
    model = [
        w.HTML(
            _heading(
                f"(a) Roofline model on {peaks.gpu}: the best {metric} any kernel could reach",
                f"peaks: {peaks.source}. A model from counted bytes and FLOPs, not a measurement.",
            )
        ),
        _image(fig),
        w.HTML(_pre(model_table(rows, peaks))),
    ]
    try:
        rec, case = count_traffic(spec, source=source)
        counted = _pre(traffic_text(rec))
        what = f"{source}/{spec.name}.py on shape {tuple(case.shape)} {_dtype_name(case.dtype)}"
    except Exception as e:  # an unfinished exercise, say: show why and go on
        counted = _pre(f"could not count: {type(e).__name__}: {e}")
        what = f"{source}/{spec.name}.py"
    counted_note = (
        "32-byte sectors touched per warp of 32 lanes against the fewest that hold the data. "
        "Counted, not timed. " + CPU_NO_TIME
    )
    traffic_section = [w.HTML(_heading(f"(b) Memory traffic counted in the interpreter: {what}", counted_note))]
    traffic_section.append(w.HTML(counted))
    recorded_section = [
        w.HTML(_heading("(c) Recorded GPU results", "measured on a GPU by `python -m course_lib bench`")),
        w.HTML(_pre(_recorded_text(spec.name))),
    ]
    return model + traffic_section + recorded_section


# --------------------------------------------------------------------------------------------------
# tuner


@dataclass
class ConfigRun:
    """What one Run of the tuner found for one configuration."""

    meta: dict
    error: str = ""
    check: str = ""  # "", "output matches", or what went wrong
    first_call_s: float | None = None  # GPU: compile (or cache load) + one run, synchronized
    second_call_s: float | None = None
    measured: timing.Timing | None = None  # GPU: timing.bench
    gbs: float | None = None
    tflops: float | None = None
    fraction: float | None = None  # of the roofline
    traffic: dict | None = None  # CPU: traffic.Recorder.summary()
    traffic_table: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.meta.items())


def _run_check(check) -> str:
    if check is None:
        return ""
    try:
        ok = check()  # True, or None from an assert-style check such as torch.testing.assert_close
    except Exception as e:
        return f"output is WRONG: {type(e).__name__}: {str(e).strip()[:300]}"
    return "output matches" if ok is None or bool(ok) else "output is WRONG"


def run_config(
    launch: Callable[..., Callable[[], object]],
    meta: dict,
    n_bytes: int | None = None,
    n_flops: int | None = None,
    dtype: str = "float32",
    check: Callable[[], object] | None = None,
    compiled_before: bool = False,
    peaks: roofline.Peaks | None = None,
) -> ConfigRun:
    """Build the launch for ``meta`` and run it: timed on a GPU, once with a traffic count on the CPU."""
    out = ConfigRun(dict(meta))
    try:
        fn = launch(**meta)
        if runtime.is_gpu():
            out.first_call_s, out.second_call_s = timing.compile_and_run_seconds(fn)
            out.check = _run_check(check)
            out.measured = timing.bench(fn)
            if n_bytes or n_flops:
                seconds = out.measured.median_ms * 1e-3
                out.gbs = (n_bytes or 0) / seconds / 1e9
                out.tflops = (n_flops or 0) / seconds / 1e12
                peaks = peaks or roofline.gpu_peaks()
                out.fraction = roofline.fraction_of_roofline(
                    out.measured.median_ms, n_bytes or 0, n_flops or 0, peaks, dtype
                )
            if compiled_before:
                out.notes.append("this configuration ran before in this session, so the first call did not compile")
        else:
            with traffic.record() as rec:
                fn()
            out.check = _run_check(check)
            out.traffic = rec.summary()
            out.traffic_table = rec.table()
    except Exception as e:  # too many registers, too much shared memory, a bad block size...
        out.error = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"
    return out


def format_run(run: ConfigRun, n_bytes: int | None = None, peaks: roofline.Peaks | None = None) -> str:
    if run.error:
        return f"{run.label}\nthis configuration failed: {run.error}"
    lines = [run.label]
    if run.measured is not None:
        lines.append(
            f"compile: first call {run.first_call_s:.3f} s (compiles this configuration, or loads it from "
            f"Triton's cache), against {run.second_call_s * 1e3:.2f} ms for a second call"
        )
        rate = ""
        if run.gbs is not None:
            rate = f"  ->  {run.gbs:,.0f} GB/s"
            if run.tflops:
                rate += f", {run.tflops:.2f} TFLOP/s"
            if run.fraction is not None:
                rate += f", {run.fraction:.0%} of the roofline"
        lines.append(f"run:     {run.measured} ({run.measured.method}){rate}")
    else:
        lines.append("ran once in Triton's interpreter: the kernel works with this configuration.")
        lines.append(run.traffic_table)
        lines.append(CPU_NO_TIME)
        lines.append(
            "num_warps and num_stages change nothing in the interpreter; BLOCK_SIZE changes how many "
            "programs run and which addresses each warp touches."
        )
        if n_bytes and peaks is not None:
            fl = roofline.floor(n_bytes, 0, peaks)
            lines.append(
                f"roofline model: on {peaks.gpu} no configuration can beat {fl.ms * 1e3:.3g} us for these "
                f"{_si(n_bytes, 'B')} ({_peaks_label(peaks)}; a launch's few microseconds not counted)."
            )
    if run.check:
        lines.append(f"check: {run.check}")
    lines += run.notes
    return "\n".join(lines)


def _history_line(run: ConfigRun) -> str:
    if run.error:
        return f"  {run.label:<44} failed: {run.error[:60]}"
    if run.measured is not None:
        rate = f"{run.gbs:>9,.0f} GB/s" if run.gbs is not None else ""
        return (
            f"  {run.label:<44} first call {run.first_call_s:6.3f} s  run {run.measured.median_ms * 1e3:9.1f} us{rate}"
        )
    t = run.traffic or {}
    return (
        f"  {run.label:<44} {t.get('sectors', 0):>8} sectors, {t.get('efficiency', 1):.0%} efficient"
        f"{'  ' + run.check if run.check else ''}"
    )


def _default_choice(name: str, options: list):
    if _PREFERRED.get(name) in options:
        return _PREFERRED[name]
    return options[len(options) // 2]


def tuner(
    launch: Callable[..., Callable[[], object]],
    params: dict | None = None,
    n_bytes: int | None = None,
    n_flops: int | None = None,
    dtype: str = "float32",
    check: Callable[[], object] | None = None,
    defaults: dict | None = None,
    title: str = "tuner",
):
    """Sliders for meta-parameters and a Run button that recompiles and runs the kernel.

    ``launch(**meta)`` returns a zero-argument callable that launches the kernel once with those
    meta-parameters, e.g.::

        def launch(BLOCK_SIZE, num_warps, num_stages):
            grid = (triton.cdiv(n, BLOCK_SIZE),)
            return lambda: add_kernel[grid](x, y, out, n, BLOCK_SIZE=BLOCK_SIZE,
                                            num_warps=num_warps, num_stages=num_stages)

        widgets.tuner(launch, n_bytes=3 * n * 4, check=lambda: torch.allclose(out, x + y))

    GPU: the first call's time (compile, or a load from Triton's cache) and the run time
    (``timing.bench``) are shown apart, with GB/s against the roofline when ``n_bytes`` is given.
    CPU: the kernel runs once in the interpreter (does it still work?) with its traffic count.
    ``check()``, if given, runs after the launch: True or None means the output is right.
    """
    import ipywidgets as w

    params = dict(params or DEFAULT_TUNER_PARAMS)
    defaults = defaults or {}
    sliders = {
        name: w.SelectionSlider(
            options=list(options),
            value=defaults.get(name, _default_choice(name, list(options))),
            description=name,
            continuous_update=False,
            style={"description_width": "110px"},
            layout=w.Layout(width="460px"),
        )
        for name, options in params.items()
    }
    button = w.Button(description="Run", icon="play", button_style="primary")
    result = w.HTML()
    history = w.HTML()
    runs: list[ConfigRun] = []
    seen: set[tuple] = set()
    peaks = model_peaks() if runtime.is_cpu() else None

    def go(_=None):
        meta = {name: s.value for name, s in sliders.items()}
        key = tuple(sorted(meta.items()))
        button.disabled = True
        result.value = _pre(f"running {', '.join(f'{k}={v}' for k, v in meta.items())} ...")
        try:
            run = run_config(launch, meta, n_bytes, n_flops, dtype, check, compiled_before=key in seen)
        finally:
            button.disabled = False
        if not run.error:
            seen.add(key)
        runs.append(run)
        result.value = _pre(format_run(run, n_bytes, peaks))
        timed = [r for r in runs if r.measured is not None]
        fastest = min(timed, key=lambda r: r.measured.median_ms) if len(timed) > 1 else None
        lines = [_history_line(r) + ("  <- fastest" if r is fastest else "") for r in runs]
        history.value = _heading("runs so far") + _pre("\n".join(lines))

    button.on_click(go)
    note = (
        "Run recompiles the kernel with these meta-parameters and times it."
        if runtime.is_gpu()
        else "CPU mode: Run checks the kernel in the interpreter and counts its memory traffic; it times nothing."
    )
    box = w.VBox([w.HTML(_heading(title, note)), *sliders.values(), button, result, history])
    box.run = go  # so a notebook or a test can press Run without a mouse
    return box


# --------------------------------------------------------------------------------------------------
# comparison chart


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
