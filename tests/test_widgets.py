"""The widgets' arithmetic, and each widget built and pressed in CPU mode (no browser, no GPU).

GPU-mode paths run here too, with ``timing`` replaced by fixed figures: they check what is shown and
how it is labelled, not speed. tests/test_browser.py drives a widget in a real JupyterLab.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from course_lib import bench, lesson, results, roofline, runtime, sources, tasks, timing, traffic
from course_lib import widgets as W

ipywidgets = pytest.importorskip("ipywidgets")

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_RESULTS = ROOT / "tests" / "fixtures" / "results"
FIXTURE_PROVENANCE = "NVIDIA H200 (test fixture), torch 2.11.0, triton 3.6.0, 2026-01-02"
cpu_only = pytest.mark.skipif(runtime.is_gpu(), reason="checks what CPU mode shows")


texts = W.shown_text  # what a learner reads
images = W.shown_images


def find(widget, kind, description=None):
    if isinstance(widget, kind) and (description is None or widget.description == description):
        return widget
    for child in getattr(widget, "children", ()):
        hit = find(child, kind, description)
        if hit is not None:
            return hit
    return None


@pytest.fixture
def no_results(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "results_dir", lambda: tmp_path)


@pytest.fixture
def fixture_results(monkeypatch):
    monkeypatch.setattr(results, "results_dir", lambda: FIXTURE_RESULTS)


@pytest.fixture
def no_timing(monkeypatch):
    """Any timing in CPU mode fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("a CPU-mode widget called a timing function")

    for name in ("bench", "compile_and_run_seconds"):
        monkeypatch.setattr(timing, name, refuse)
    monkeypatch.setattr(W, "sweep", refuse)
    monkeypatch.setattr(W.gpu_sweep, "sweep", refuse)
    monkeypatch.setattr(lesson, "interpreter_seconds", refuse)


@pytest.fixture
def fake_gpu(monkeypatch):
    """GPU mode with fixed timings: only what the widgets show is under test."""
    monkeypatch.setattr(runtime, "is_gpu", lambda: True)
    monkeypatch.setattr(runtime, "is_cpu", lambda: False)
    monkeypatch.setattr(runtime, "gpu_info", lambda: runtime.GpuInfo("NVIDIA H200 (fake)", (9, 0), 132, 141.0, 60.0))
    monkeypatch.setattr(roofline, "gpu_peaks", lambda remeasure=False: roofline.datasheet_peaks("H200"))
    monkeypatch.setattr(timing, "compile_and_run_seconds", lambda fn: (0.5, 0.0002))
    monkeypatch.setattr(timing, "bench", lambda fn, **kw: timing.Timing(0.1, 0.099, 0.101, "do_bench, L2 flushed"))


# --------------------------------------------------------------------------------------------------
# Amdahl


def test_amdahl_gives_the_chapter_example():
    assert W.amdahl(100, 40, 4) == (70.0, pytest.approx(100 / 70))


@pytest.mark.parametrize(
    "total, part, speedup, new_total",
    [(100, 40, 1, 100.0), (100, 0, 8, 100.0), (100, 100, 4, 25.0), (10, 9, 1e9, 1.0), (50, 20, 0.5, 70.0)],
)
def test_amdahl_cases(total, part, speedup, new_total):
    got, overall = W.amdahl(total, part, speedup)
    assert got == pytest.approx(new_total)
    assert overall == pytest.approx(total / new_total)


@pytest.mark.parametrize("args", [(0, 0, 2), (100, 101, 2), (100, -1, 2), (100, 40, 0)])
def test_amdahl_rejects_impossible_inputs(args):
    with pytest.raises(ValueError):
        W.amdahl(*args)


def test_amdahl_text_names_the_limit():
    text = W.amdahl_text(100, 40, 4)
    assert "70.0 ms instead of 100.0 ms" in text and "1.43x faster overall" in text
    assert "at most 1.67x" in text
    assert "no limit" in W.amdahl_text(100, 100, 4)


def test_amdahl_calculator_updates_live():
    box = W.amdahl_calculator()
    assert "the request takes 70.0 ms" in texts(box)
    speedup = find(box, ipywidgets.FloatSlider, "the part's speed-up (x)")
    total = find(box, ipywidgets.FloatSlider, "request time (ms)")
    part = find(box, ipywidgets.FloatSlider, "the part's time (ms)")
    speedup.value = 8
    assert "the request takes 65.0 ms" in texts(box)
    total.value = 30  # shorter than the part: the part is clamped to the whole request
    assert part.max == 30 and part.value == 30
    assert "no limit" in texts(box)


# --------------------------------------------------------------------------------------------------
# roofline model, sizes, traffic


def test_default_sizes_end_at_the_benchmark_shape():
    spec = tasks.get("vector_add")
    sizes = W.default_sizes(spec)
    assert sizes[-1] == tuple(spec.bench_cases[0].shape)
    assert all(b[0] == 4 * a[0] for a, b in zip(sizes, sizes[1:]))
    assert sizes[0][0] == 4096


def test_default_sizes_of_row_tasks_are_their_benchmark_rows():
    spec = tasks.get("softmax")
    shapes = [tuple(c.shape) for c in spec.bench_cases if c.dtype == spec.bench_cases[0].dtype]
    assert W.default_sizes(spec) == shapes


def test_a_task_without_a_kernel_says_so():
    with pytest.raises(ValueError, match="no kernel to benchmark"):
        W.default_sizes("op_costs")
    assert "op_costs has no kernel to benchmark" in texts(W.benchmark_panel("op_costs"))


def test_model_rows_use_datasheet_without_records(no_results):
    peaks = W.model_peaks()
    assert peaks.source == "datasheet" and "H200" in peaks.gpu
    rows = W.model_rows("vector_add", [(1000,), (2**28,)])
    n = 2**28
    assert rows[1]["bytes"] == 3 * 4 * n and rows[1]["flops"] == n
    assert rows[1]["floor_ms"] == pytest.approx(3 * 4 * n / (peaks.bandwidth_gbs * 1e9) * 1e3)
    assert rows[1]["best_gbs"] == pytest.approx(peaks.bandwidth_gbs)
    assert rows[1]["bound"] == "memory"


def test_model_peaks_prefer_recorded_measurement(fixture_results):
    peaks = W.model_peaks()
    assert peaks.bandwidth_gbs == 4500.0 and peaks.source.startswith("measured on NVIDIA H200 (test fixture)")


def test_metric_for():
    peaks = roofline.datasheet_peaks("H200")
    assert W.metric_for(3 * 4 * 2**20, 2**20, "float32", peaks) == "GB/s"
    m = 4096  # a bf16 square matmul: 2 m^3 FLOPs over 3 m^2 * 2 bytes
    assert W.metric_for(3 * m * m * 2, 2 * m**3, "bfloat16", peaks) == "TFLOP/s"


@cpu_only
def test_count_traffic_of_the_solution():
    rec, case = W.count_traffic("vector_add")
    n = case.shape[0]
    assert n == W.TRAFFIC_ELEMENTS
    s = rec.summary()
    assert s["sectors"] == s["ideal_sectors"] == 3 * n * 4 // 32  # x, y and out; 8 fp32 per 32-byte sector
    assert "efficiency 100%" in W.traffic_text(rec)


def test_traffic_text_reports_waste():
    rec = traffic.Recorder()
    lanes = torch.arange(64).numpy()
    rec("load", "fake", lanes * 8, lanes >= 0, 4)  # every second fp32: twice the sectors
    assert "2.00x the sectors" in W.traffic_text(rec)


def test_traffic_efficiency_is_what_its_label_says():
    """One fp32 element per warp (BLOCK_SIZE 1): the ideal number of sectors, 4 useful bytes of 32.
    The percentage shown is useful bytes / bytes fetched, and says so, in the table and below it."""
    rec = traffic.Recorder()
    for i in range(4096):
        rec("load", "one", np.array([4 * i]), np.array([True]), 4)
    s = rec.summary()
    assert s["sectors"] == s["ideal_sectors"] == 4096
    assert s["efficiency"] == pytest.approx(s["useful_bytes"] / (32 * s["sectors"])) == pytest.approx(1 / 8)
    text = W.traffic_text(rec)
    assert "efficiency 12% (useful bytes / bytes fetched)" in text
    assert "efficiency: useful bytes / bytes fetched" in rec.table()
    assert "ideal sectors / sectors touched" not in text
    assert "fetch 8.00x the bytes they use" in text and "fewest sectors" in text


# --------------------------------------------------------------------------------------------------
# benchmark panel


@cpu_only
def test_benchmark_panel_cpu_without_records(no_results, no_timing):
    panel = W.benchmark_panel("vector_add")
    text = texts(panel)
    for heading in ("(a) Roofline model on NVIDIA H200", "(b) Memory traffic counted", "(c) Recorded GPU results"):
        assert heading in text
    assert "peaks: datasheet" in text
    assert "No recorded GPU results for vector_add" in text
    assert W.CPU_NO_TIME in text
    assert "efficiency 100%" in text
    # nothing is labelled as a measured speed
    for word in ("median", "measured now", "p20", "run time"):
        assert word not in text
    # the traffic section carries no rates or times at all
    traffic_part = text.split("(b) Memory traffic")[1].split("(c) Recorded")[0]
    assert "GB/s" not in traffic_part and not re.search(r"\d us\b", traffic_part)
    assert all(img.startswith(b"\x89PNG") for img in images(panel)) and images(panel)


@cpu_only
@pytest.mark.parametrize("task", ["softmax", "fused_bias_gelu"])
def test_benchmark_panel_cpu_on_2d_tasks(task, no_results, no_timing):
    text = texts(W.benchmark_panel(task))
    assert "(128, 128)" in text  # the traffic count runs at a small shape of the task
    assert "could not count" not in text, text
    assert "efficiency" in text and "(c) Recorded GPU results" in text


@cpu_only
def test_benchmark_panel_cpu_shows_recorded_results_with_provenance(fixture_results, no_timing):
    text = texts(W.benchmark_panel("vector_add"))
    assert f"recorded on {FIXTURE_PROVENANCE}" in text
    assert "torch_compile" in text
    assert "4,500 GB/s" in text  # the model uses the recorded measurement of the peaks


@cpu_only
def test_benchmark_panel_cpu_reports_an_unfinished_exercise(tmp_path, no_results, no_timing):
    (tmp_path / "vector_add.py").write_text("def vector_add(x, y, out):\n    raise NotImplementedError('todo')\n")
    text = texts(W.benchmark_panel("vector_add", source=str(tmp_path)))
    assert "could not count: NotImplementedError: todo" in text
    assert "(c) Recorded GPU results" in text


def _legend_texts(fig) -> list[str]:
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    return [t.get_text() for legend in legends for t in legend.get_texts()]


@pytest.mark.parametrize("task, most", [("softmax", 5), ("fused_bias_gelu", 7)])
def test_model_plot_charts_one_dtype_each_with_a_legend_per_variant(task, most):
    """The recorded H200 results (both dtypes): each chart's title names the dtype of every point on
    it, each point is a record of that dtype, and the legend has one entry per variant (and per GELU
    form), beside the charts and not over them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    spec = tasks.get(task)
    recorded = results.records(task)
    assert {r["dtype"] for r in recorded} == {"bfloat16", "float32"}
    peaks = W.model_peaks()
    fig = W.model_plot(spec, W.model_rows(spec, None, peaks), peaks, recorded)
    entries = _legend_texts(fig)
    assert len(entries) <= most <= 8, entries
    assert len(set(entries)) == len(entries) and sum("solution" in e for e in entries) == 1, entries
    charts = [ax for ax in fig.axes if ax.collections]  # the shape axes along the top hold no points
    assert len(charts) == 2
    for ax in charts:
        named = set(re.findall(r"\b(?:bfloat16|float16|float32)\b", ax.get_title()))
        assert len(named) == 1, ax.get_title()
        mine = [r for r in recorded if r["dtype"] in named and r.get("repeat", 1) == 1]
        points = [tuple(p) for c in ax.collections for p in c.get_offsets()]
        assert len(points) == len(mine)
        for x, y in points:  # each point is a record of the title's dtype (set a few percent apart by size)
            assert any(y == pytest.approx(r["gbs"]) and x / r["bytes"] == pytest.approx(1, rel=0.2) for r in mine), (
                named,
                x,
                y,
            )
    FigureCanvasAgg(fig).draw()
    box = fig.legends[0].get_window_extent()
    assert not any(box.overlaps(ax.get_window_extent()) for ax in charts)


def _fake_bench_case(spec, entry, case, peaks, log):
    ms = case.shape[0] * 12 / 4e12 * 1e3 + 0.003  # 4 TB/s plus a 3 us launch
    t = timing.Timing(ms, ms * 0.98, ms * 1.02, "do_bench, L2 flushed")
    return [
        bench._record(spec, case, "solution", t, peaks, repeat=1),
        bench._record(spec, case, "torch_eager", timing.Timing(ms * 1.2, ms, ms * 1.3, t.method), peaks),
    ]


def test_benchmark_panel_gpu_sweeps_and_plots(fake_gpu, monkeypatch, no_results):
    monkeypatch.setattr(bench, "_bench_case", _fake_bench_case)
    sizes = [(2**12,), (2**20,), (2**26,)]
    panel = W.benchmark_panel("vector_add", sizes=sizes)
    text = texts(panel)
    assert "measured now on NVIDIA H200 (fake)" in text
    assert "the sweep stopped" not in text, text
    assert text.count("solution") >= len(sizes) and "torch_eager" in text
    assert "(67108864,)" in text
    assert "No recorded GPU results" in text  # the recorded section is still there, labelled
    assert images(panel)
    rows = W.sweep("vector_add", sizes)
    big = [r for r in rows if r["variant"] == "solution" and r["shape"] == [2**26]][0]
    assert big["gbs"] == pytest.approx(3 * 4 * 2**26 / (big["median_ms"] * 1e-3) / 1e9)


def test_benchmark_panel_gpu_names_sizes_it_could_not_time(fake_gpu, monkeypatch, no_results):
    def disagrees_at_4096(spec, entry, case, peaks, log):
        return [] if case.shape == (4096,) else _fake_bench_case(spec, entry, case, peaks, log)

    monkeypatch.setattr(bench, "_bench_case", disagrees_at_4096)
    text = texts(W.benchmark_panel("vector_add", sizes=[4096, 2**20]))
    assert "not timed at (4096,): the solution disagrees with the reference" in text
    assert "(1048576,)" in text


def test_sweep_refuses_in_cpu_mode(monkeypatch):
    monkeypatch.setattr(runtime, "is_gpu", lambda: False)
    with pytest.raises(timing.TimingUnavailable):
        W.sweep("vector_add", [(1024,)])


# --------------------------------------------------------------------------------------------------
# tuner


def _add_launcher(n=5000):
    import triton  # after course_lib, which sets up the interpreter in CPU mode

    module = sources.load_module("vector_add", "solutions")
    x, y = torch.randn(n), torch.randn(n)
    out = torch.empty(n)

    def launch(BLOCK_SIZE, num_warps=4, num_stages=3):
        grid = (triton.cdiv(n, BLOCK_SIZE),)
        return lambda: module.add_kernel[grid](
            x, y, out, n, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps, num_stages=num_stages
        )

    return launch, (lambda: torch.allclose(out, x + y)), 3 * 4 * n


@cpu_only
def test_tuner_cpu_runs_once_and_counts_traffic(no_timing):
    launch, check, n_bytes = _add_launcher()
    box = W.tuner(launch, n_bytes=n_bytes, check=check)
    assert find(box, ipywidgets.SelectionSlider, "BLOCK_SIZE").value == 1024
    find(box, ipywidgets.SelectionSlider, "BLOCK_SIZE").value = 256
    find(box, ipywidgets.Button).click()
    text = texts(box)
    assert "BLOCK_SIZE=256, num_warps=4, num_stages=3" in text
    assert "ran once in Triton's interpreter" in text
    assert W.CPU_NO_TIME in text
    assert "check: output matches" in text
    assert "efficiency" in text and "sectors" in text
    assert "first call" not in text and "run:" not in text
    for line in text.splitlines():
        if "GB/s" in line or re.search(r"\d us\b", line):
            assert "roofline model" in line, line  # the only rate shown is the model's


@cpu_only
def test_tuner_cpu_reports_failures_and_wrong_output(no_timing):
    launch, _, n_bytes = _add_launcher()
    box = W.tuner(launch, params={"BLOCK_SIZE": [1000, 1024]}, n_bytes=n_bytes, check=lambda: False)
    box.run()  # BLOCK_SIZE 1024 first: runs, but the check says no
    assert "check: output is WRONG" in texts(box)
    find(box, ipywidgets.SelectionSlider, "BLOCK_SIZE").value = 1000
    box.run()
    text = texts(box)
    assert "this configuration failed" in text  # tl.arange needs a power of two
    assert "runs so far" in text and "failed:" in text


def test_tuner_gpu_shows_compile_and_run_apart(fake_gpu):
    launch, _, n_bytes = _add_launcher()
    box = W.tuner(launch, n_bytes=n_bytes)
    box.run()
    text = texts(box)
    assert "first call 0.500 s" in text  # compile (or cache load) + one run
    assert "run:     100.0 us" in text and "do_bench, L2 flushed" in text
    assert f"{n_bytes / 0.1e-3 / 1e9:,.0f} GB/s" in text and "of the roofline" in text
    assert "interpreter" not in text
    box.run()
    text = texts(box)
    assert "ran before in this session" in text
    assert text.count("<- fastest") == 1


# --------------------------------------------------------------------------------------------------
# comparison chart


def test_comparison_chart_from_records_has_provenance(fixture_results):
    recorded = results.records("vector_add")
    box = W.comparison_chart(recorded)
    text = texts(box)
    assert f"recorded on {FIXTURE_PROVENANCE}" in text
    for variant in ("solution", "solution #2", "torch_eager", "torch_compile"):
        assert variant in text
    rows = W.comparison_rows(recorded)
    fig = W.comparison_figure(rows, title="t")
    assert fig.axes[0].get_xlabel() == "GB/s"
    assert [t.get_text().split()[0] for t in fig.axes[0].get_yticklabels()][:2] == ["solution", "solution"]


def test_comparison_chart_from_timings():
    n_bytes = 12_000_000
    data = {"solution": timing.Timing(0.003, 0.0029, 0.0031, "x"), "torch_eager": 0.004}
    rows = W.comparison_rows(data, n_bytes=n_bytes)
    assert rows[0]["gbs"] == pytest.approx(n_bytes / 3e-6 / 1e9)
    assert rows[1]["median_ms"] == 0.004 and rows[1]["provenance"] == ""
    text = texts(W.comparison_chart(data, n_bytes=n_bytes, title="add"))
    assert "recorded on" not in text and "figures as given" in text
    assert W.comparison_figure(W.comparison_rows(data), metric="auto").axes[0].get_xlabel().startswith("median time")


def test_comparison_chart_with_nothing():
    assert "nothing to compare" in texts(W.comparison_chart([]))


# --------------------------------------------------------------------------------------------------


def test_course_lib_does_not_need_notebook_packages():
    code = (
        "import sys, course_lib, course_lib.widgets, course_lib.cli\n"
        "bad = [m for m in ('ipywidgets', 'matplotlib', 'tqdm', 'IPython') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, COURSE_MODE="cpu")
    )
    assert run.returncode == 0, run.stderr


@cpu_only
def test_in_a_released_copy_the_panel_counts_the_learners_own_kernel(no_results, no_timing, monkeypatch):
    """A released assignment withholds the solutions: the panel and count_traffic fall back to the
    learner's exercises/ (an unfinished one says so), never to a missing solutions/ file."""
    from course_lib import sources

    monkeypatch.setattr(sources, "solution_present", lambda task: False)
    text = texts(W.benchmark_panel("vector_add"))
    assert "exercises/vector_add.py" in text and "solutions/" not in text
    assert "could not count" in text and "not implemented yet" in text  # the untouched exercise
