"""The ring-of-buffers model of chapter 09 (course_lib.pipeline_sim) and its timeline panel.

The model's invariants: one buffer overlaps nothing, enough buffers hide a latency, more buffers
never slow it down, ping-pong hides epilogues, the fractions of the tensor cores' time add up.
"""

from __future__ import annotations

import ast
import itertools
import time
from pathlib import Path

import pytest

from course_lib import pipeline_sim as ps

ROOT = Path(__file__).resolve().parent.parent
PRODUCER_CONSUMER = ("cooperative", "pingpong")


def overlap(a, b) -> bool:
    return a.start < b.end and b.start < a.end


# --------------------------------------------------------------------------------------------------
# the model


@pytest.mark.parametrize("mode", ps.MODES)
@pytest.mark.parametrize("n_tiles, output_tiles", [(1, 1), (7, 1), (5, 3)])
@pytest.mark.parametrize("latency, compute", [(1.0, 0.7), (0.3, 2.0)])
def test_one_buffer_overlaps_nothing(mode, n_tiles, output_tiles, latency, compute):
    tl = ps.simulate(
        n_tiles=n_tiles, output_tiles=output_tiles, buffers=1, load_latency=latency, compute_time=compute, mode=mode
    )
    n = n_tiles * output_tiles
    assert tl.total == pytest.approx(n * (latency + compute))
    loads = [i for i in tl.intervals if i.kind == "load"]
    computes = [i for i in tl.intervals if i.kind == "compute"]
    assert len(loads) == n
    assert not any(overlap(a, b) for a in loads for b in computes)


@pytest.mark.parametrize("mode", ps.MODES)
@pytest.mark.parametrize("latency, compute", [(0.5, 0.7), (0.69, 0.7), (2.0, 0.7), (5.0, 1.0)])
def test_enough_buffers_hide_the_latency_after_the_first_tile(mode, latency, compute):
    need = ps.buffers_to_hide_latency(latency, compute)
    assert need == 2 if latency <= compute else need > 2
    kw = dict(n_tiles=40, load_latency=latency, compute_time=compute, mode=mode, consumers=1)
    tl = ps.simulate(buffers=need, **kw)
    assert tl.idle_data == pytest.approx(latency)  # the first tile's load, nothing after
    first_ready = min(i.end for i in tl.intervals if i.kind == "load")
    assert all(i.end <= first_ready for i in tl.intervals if i.kind == "wait_ready")
    assert tl.total == pytest.approx(latency + 40 * compute)
    fewer = ps.simulate(buffers=need - 1, **kw)  # the bound is tight
    assert fewer.idle_data > latency + 1e-9


@pytest.mark.parametrize("mode", ps.MODES)
def test_fractions_lie_in_0_1_and_add_up(mode):
    grid = itertools.product([1, 2, 5], [0.0, 1.0, 3.0], [0.0, 0.7], [0.0, 1.5], [0.0, 2.0], [0.0, 0.3], [1, 2])
    for buffers, latency, compute, transfer, epilogue, issue, people in grid:
        tl = ps.simulate(
            n_tiles=6,
            output_tiles=3,
            buffers=buffers,
            load_latency=latency,
            compute_time=compute,
            transfer_time=transfer,
            epilogue_time=epilogue,
            issue_time=issue,
            producers=people,
            consumers=people,
            mode=mode,
        )
        for f in (tl.utilization, tl.consumer_stall, tl.epilogue_fraction, tl.issue_fraction, tl.producer_stall):
            assert 0.0 <= f <= 1.0
        if tl.total > 0:
            total = tl.utilization + tl.consumer_stall + tl.epilogue_fraction + tl.issue_fraction
            assert total == pytest.approx(1.0)
        assert all(i.kind in ps.KINDS and i.end > i.start for i in tl.intervals)
        assert max((i.end for i in tl.intervals), default=0.0) == pytest.approx(tl.total)


@pytest.mark.parametrize("mode", ps.MODES)
def test_more_buffers_never_slower(mode):
    grid = itertools.product([0.5, 2.0, 6.0], [0.3, 1.0], [0.0, 0.8], [0.0, 3.0], [0.0, 0.2], [1, 3])
    for latency, compute, transfer, epilogue, issue, people in grid:
        kw = dict(
            n_tiles=9,
            output_tiles=2,
            load_latency=latency,
            compute_time=compute,
            transfer_time=transfer,
            epilogue_time=epilogue,
            issue_time=issue,
            producers=people,
            consumers=people,
            mode=mode,
        )
        totals = [ps.simulate(buffers=b, **kw).total for b in range(1, 9)]
        assert all(later <= earlier + 1e-9 for earlier, later in itertools.pairwise(totals)), (kw, totals)


def test_pingpong_hides_the_epilogue():
    kw = dict(n_tiles=8, output_tiles=6, buffers=4, load_latency=1.0, compute_time=0.7, epilogue_time=3.0)
    ping = ps.simulate(mode="pingpong", consumers=2, **kw)
    coop = ps.simulate(mode="cooperative", consumers=2, **kw)
    # only the last epilogue shows: 8 * 0.7 of main loop covers the other's 3.0 of epilogue
    assert ping.idle_epilogue == pytest.approx(3.0)
    assert ping.total == pytest.approx(1.0 + 48 * 0.7 + 3.0)
    assert coop.idle_epilogue == pytest.approx(6 * 3.0)
    assert ping.utilization > coop.utilization
    # one consumer cannot ping-pong with anyone: the same as cooperative
    assert ps.simulate(mode="pingpong", consumers=1, **kw).total == pytest.approx(coop.total)


def test_pingpong_cannot_hide_an_epilogue_longer_than_a_main_loop():
    kw = dict(n_tiles=4, output_tiles=6, buffers=4, load_latency=0.5, compute_time=0.5, epilogue_time=5.0)
    ping = ps.simulate(mode="pingpong", consumers=2, **kw)
    assert ping.idle_epilogue > 5.0
    assert ps.simulate(mode="pingpong", consumers=3, **kw).total < ping.total


def test_bandwidth_bound_runs_at_the_load_spacing_whatever_the_buffers():
    for buffers in (2, 4, 8):
        tl = ps.simulate(n_tiles=200, buffers=buffers, load_latency=1.0, compute_time=0.5, transfer_time=1.5)
        assert tl.total == pytest.approx(1.0 + 199 * 1.5 + 0.5)
        assert "bandwidth bound" in tl.summary()


def test_the_producer_waits_for_free_buffers_when_compute_is_the_limit():
    tl = ps.simulate(n_tiles=50, buffers=3, load_latency=0.5, compute_time=1.0)
    assert tl.producer_stall > 0.9
    assert tl.time_in("producer 0", "wait_empty") == pytest.approx(tl.producer_stall * tl.total)
    assert ps.simulate(n_tiles=50, buffers=1, load_latency=2.0, compute_time=0.1, mode="stages").producer_stall == 0


def test_stall_fraction_falls_from_one_to_three_stages():
    costs = ps.matmul_costs()
    # the numbers the module's docstring assumes
    assert costs["n_tiles"] == 128
    assert costs["load_bytes_per_step"] == 49152
    assert costs["compute_us"] == pytest.approx(0.692, abs=1e-3)
    assert costs["transfer_us"] == pytest.approx(1.509, abs=1e-3)
    assert costs["epilogue_us"] == pytest.approx(2.012, abs=1e-3)
    dram = ps.predict_matmul_stages()
    assert [r.stages for r in dram] == [1, 2, 3, 4]
    assert dram[0].stall > dram[1].stall >= dram[2].stall >= dram[3].stall
    assert dram[2].utilization == pytest.approx(costs["compute_us"] / costs["transfer_us"], rel=0.03)
    l2 = ps.predict_matmul_stages(bandwidth_tbs=12.0)
    assert l2[0].stall > l2[1].stall > l2[2].stall
    assert l2[2].stall < 0.02 and l2[2].tflops < 800
    assert "num_stages" in ps.prediction_table(l2)


@pytest.mark.parametrize(
    "bad",
    [
        {"mode": "round_robin"},
        {"buffers": 0},
        {"n_tiles": 2.5},
        {"load_latency": -1.0},
        {"epilogue_time": -0.1},
    ],
)
def test_bad_parameters_are_refused(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        ps.simulate(**bad)


def test_fast_and_pure_python():
    start = time.perf_counter()
    for mode in ps.MODES:
        ps.simulate(n_tiles=64, output_tiles=4, buffers=4, epilogue_time=2.0, mode=mode)
    assert time.perf_counter() - start < 0.5  # a few milliseconds each when the machine is idle
    tree = ast.parse((ROOT / "course_lib" / "pipeline_sim.py").read_text())
    imported = {
        (n.module if isinstance(n, ast.ImportFrom) else a.name).split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    assert imported <= {"__future__", "bisect", "dataclasses"}


def test_summary_says_what_limits_the_run():
    text = ps.simulate(n_tiles=8, buffers=2, load_latency=3.0, compute_time=0.5).summary()
    assert "tensor cores busy" in text and "waiting for data" in text
    assert "takes 7 buffers: 2 is too few" in text
    assert "num_stages = 3" in ps.simulate(mode="stages", buffers=3).summary()


# --------------------------------------------------------------------------------------------------
# the panel


def test_figure_and_text_without_widgets():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from course_lib.widgets import _common, timeline_figure, timeline_text

    tl = ps.simulate(n_tiles=6, output_tiles=2, buffers=2, consumers=2, epilogue_time=1.0, mode="pingpong")
    fig = timeline_figure(tl)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[:3] == ["producer 0", "consumer 0", "consumer 1"] and labels[3].startswith("loads in flight")
    assert _common._png(fig).startswith(b"\x89PNG")
    text = timeline_text(tl)
    assert tl.summary() in text and "consumer 1" in text


def test_panel_builds_and_its_sliders_recompute():
    pytest.importorskip("ipywidgets")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import ipywidgets

    from course_lib import widgets as W

    box = W.pipeline_timeline(buffers=1, epilogue_time=0.0)
    sliders = {s.description: s for s in box.children if isinstance(s, (ipywidgets.IntSlider, ipywidgets.FloatSlider))}
    assert {"buffers", "producers", "consumers", "load_latency (us)", "compute_time (us)", "epilogue_time (us)"} <= set(
        sliders
    )
    one = W.shown_text(box)
    assert "3 output tile(s) x 8 K steps" in one and "1 buffers" in one
    assert "total time 40.8" in one  # 24 tiles, nothing overlapped: 24 * (1.0 + 0.7)
    picture = W.shown_images(box)
    assert len(picture) == 1 and picture[0].startswith(b"\x89PNG")

    sliders["buffers"].value = 4
    four = W.shown_text(box)
    assert "4 buffers" in four and "total time 40.8" not in four
    assert W.shown_images(box) != picture

    mode = next(c for c in box.children if isinstance(c, ipywidgets.ToggleButtons))
    mode.value = "stages"
    assert "num_stages = 4" in W.shown_text(box)
    with pytest.raises(ValueError):
        W.pipeline_timeline(mode="nonsense")
