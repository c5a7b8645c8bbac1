"""Timing refuses without a GPU and hides the launch on a simulated one; the roofline model; the traffic
model against the H200 record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import course_lib  # noqa: F401  (CPU mode first)
from course_lib import roofline, runtime, timing, traffic, validate_traffic

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "results" / "traffic_validation_h200.json"


def test_bench_refuses_in_cpu_mode():
    assert runtime.is_cpu()
    with pytest.raises(timing.TimingUnavailable, match="Timing needs a GPU"):
        timing.bench(lambda: None)
    with pytest.raises(timing.TimingUnavailable):
        timing.compile_and_run_seconds(lambda: None)


@pytest.mark.parametrize("q", [0.2, 0.5, 0.8])
@pytest.mark.parametrize("n", [1, 2, 7, 1000])
def test_quantiles_interpolate_as_torch_does(q, n):
    import torch

    samples = sorted(np.random.default_rng(n).exponential(size=n).tolist())
    expected = torch.quantile(torch.tensor(samples, dtype=torch.float64), q).item()
    assert timing._quantile(samples, q) == pytest.approx(expected, rel=1e-12)


def test_recorded_timings_repeat_within_2_percent():
    """Issue 3's bar, on the records: every solution timed twice in one run agrees within 2%; 3% for the tensor-
    core tasks, but where the record names the pair as unsteady and says why (ws_attention's causal case on the
    H200, 2026-12-06: 7.4% apart, quoted as a range). Those run large matmuls near the GPU's power limit, where
    its clock moves a few percent from one call to the next: in bench_tiled_matmul_h200.json the same cuBLAS
    call, timed twice in one run (torch_eager is a @ b, cublas is torch.matmul), reads 1.383 and 1.423 ms
    (2.9%)."""
    from course_lib import tasks

    checked = 0
    for path in sorted((ROOT / "results").glob("bench_*_h200.json")):
        data = json.loads(path.read_text())
        assert "read" in data["meta"]["method"], f"{path.name} was not timed with the read flush"
        runs: dict = {}
        for r in data["records"]:
            if r["variant"] == "solution":
                runs.setdefault((r["task"], r["case"], r["dtype"], tuple(r["shape"])), []).append(r["median_ms"])
        # a pair past the bar that the record names in meta["unsteady"], with why, is kept and quoted as a range;
        # an unnamed one fails, and so does a name whose pair is within the bar (a stale note)
        unsteady = {u["case"]: u["why"] for u in data["meta"].get("unsteady", [])}
        for key, (first, second) in runs.items():
            bar = 0.03 if tasks.get(key[0]).tensor_cores else 0.02
            steady = abs(first - second) / min(first, second) <= bar
            assert steady != (key[1] in unsteady), (path.name, key, first, second, unsteady.get(key[1]))
            checked += 1
        assert set(unsteady) <= {key[1] for key in runs}, (path.name, unsteady)
    assert checked >= 30


def test_bench_command_refuses_and_shows_recorded_results(tmp_path):
    env = {"COURSE_PROGRESS": str(tmp_path / "p.json"), "COURSE_MODE": "cpu", "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [sys.executable, "-m", "course_lib", "bench", "vector_add"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    assert "Timing needs a GPU" in run.stdout
    assert " us" not in run.stdout.split("recorded on")[0], "a time was printed before the recorded figures"


def test_floor_is_the_larger_of_memory_and_compute():
    peaks = roofline.Peaks("test", 1000.0, {"float32": 10.0}, "test")  # 1 TB/s, 10 TFLOP/s
    f = roofline.floor(n_bytes=10**9, n_flops=10**9, peaks=peaks)  # 1 ms of memory, 0.1 ms of maths
    assert f.bound == "memory" and f.ms == pytest.approx(1.0)
    f = roofline.floor(n_bytes=10**6, n_flops=10**11, peaks=peaks)  # 0.001 ms vs 10 ms
    assert f.bound == "compute" and f.ms == pytest.approx(10.0)
    assert roofline.fraction_of_roofline(2.0, 10**9, 0, peaks) == pytest.approx(0.5)
    assert peaks.ridge("float32") == pytest.approx(10.0)


def test_datasheet_table_covers_common_gpus():
    for name in (
        "NVIDIA H100 80GB HBM3",
        "NVIDIA H200",
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA L4",
        "NVIDIA GeForce RTX 4090",
    ):
        peaks = roofline.datasheet_peaks(name)
        assert peaks.bandwidth_gbs > 0 and peaks.tflops["bfloat16"] > 0
    assert roofline.datasheet_peaks("NVIDIA H200").bandwidth_gbs > roofline.datasheet_peaks("NVIDIA H100").bandwidth_gbs


def test_roofline_plot_draws(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    peaks = roofline.datasheet_peaks()
    ax = roofline.plot([{"label": "add", "bytes": 12e6, "flops": 1e6, "ms": 0.004}], peaks)
    assert ax.get_xscale() == "log" and len(ax.collections) == 1


def test_warp_sectors_by_hand():
    base = 1 << 20  # 32-byte aligned
    lanes = np.arange(32, dtype=np.uint64)
    on = np.ones(32, dtype=bool)
    assert traffic.warp_sectors(base + lanes * 4, on, 4) == (1, 4, 4)  # coalesced fp32: 128 bytes
    assert traffic.warp_sectors(base + 4 + lanes * 4, on, 4) == (1, 5, 4)  # one element off: 5 sectors
    assert traffic.warp_sectors(base + lanes * 8, on, 4) == (1, 8, 4)  # every second element
    assert traffic.warp_sectors(base + lanes * 128, on, 4) == (1, 32, 4)  # one sector per lane
    half = np.arange(32) < 16
    assert traffic.warp_sectors(base + lanes * 4, half, 4) == (1, 2, 2)  # masked lanes cost nothing
    assert traffic.warp_sectors(base + lanes * 4, np.zeros(32, dtype=bool), 4) == (0, 0, 0)
    assert traffic.warp_sectors(base + np.arange(64, dtype=np.uint64) * 2, np.ones(64, dtype=bool), 2) == (2, 4, 4)


def test_model_predictions_for_the_three_copies():
    predicted = validate_traffic.predict()
    per_warp = {
        k: v["sectors_per_element"] / predicted["coalesced"]["sectors_per_element"] for k, v in predicted.items()
    }
    assert per_warp["misaligned"] == pytest.approx(9 / 8)  # 5 + 4 sectors per warp instead of 4 + 4
    assert per_warp["strided_2"] == pytest.approx(12 / 8)
    assert per_warp["strided_4"] == pytest.approx(20 / 8)
    assert per_warp["strided_8"] == pytest.approx(36 / 8)
    distinct = (
        predicted["misaligned"]["distinct_sectors_per_element"] / predicted["coalesced"]["distinct_sectors_per_element"]
    )
    assert distinct == pytest.approx(1.0, abs=0.01)  # neighbouring warps share the extra sector


def _ranks(values: dict, tie: float) -> dict:
    """Rank with ties: values within `tie` (relative) of the previous one share its rank."""
    order = sorted(values, key=values.get)
    ranks, rank, prev = {}, 0, None
    for name in order:
        if prev is not None and values[name] > values[prev] * (1 + tie):
            rank += 1
        ranks[name] = rank
        prev = name
    return ranks


def test_model_ranks_the_copies_as_the_h200_does():
    """The recorded H200 run (results/traffic_validation_h200.json) against the model, live."""
    record = json.loads(RECORD.read_text())
    assert "H200" in record["gpu"]
    rows = {r["variant"]: r for r in record["comparison"]}
    predicted = validate_traffic.predict()  # computed now, not read from the record
    base = predicted["coalesced"]
    model = {k: v["distinct_sectors_per_element"] / base["distinct_sectors_per_element"] for k, v in predicted.items()}
    measured = {k: rows[k]["measured_ratio"] for k in model}
    assert _ranks(model, tie=0.03) == _ranks(measured, tie=0.03)
    # per-warp sectors (L1 requests) never order two copies against the measurement
    per_warp = {k: v["sectors_per_element"] for k, v in predicted.items()}
    for a in per_warp:
        for b in per_warp:
            if measured[a] > measured[b] * 1.03:
                assert per_warp[a] > per_warp[b]
    # and the strided copies' predicted cost is within 20% of the measured one
    for k in ("strided_2", "strided_4", "strided_8"):
        assert model[k] == pytest.approx(measured[k], rel=0.2)


def test_recorder_refuses_on_gpu_mode(monkeypatch):
    monkeypatch.setattr(runtime, "MODE", runtime.GPU)
    with pytest.raises(RuntimeError, match="CPU mode"):
        with traffic.record():
            pass


# --------------------------------------------------------------------------------------------------
# bench's launch hiding, on a simulated GPU: a host clock and a GPU queue, no CUDA


class SimulatedGpu:
    """A host that takes ``launch_us`` (drawn at random each call) to launch a kernel of ``kernel_us``,
    and a GPU that runs what is queued in order, idle until the host has queued it. CUDA events get
    the time the GPU reaches them, so a GPU waiting for the host counts, as on a real one."""

    def __init__(self, rng, launch_us: tuple[float, float], kernel_us: float, flush_us: float):
        self.rng, self.launch_us, self.kernel_s, self.flush_s = rng, launch_us, kernel_us * 1e-6, flush_us * 1e-6
        self.host = 0.0  # the host's clock, seconds
        self.gpu = 0.0  # when the GPU's queue runs dry
        self.launches: list[float] = []  # each launch's host time, seconds
        sim = self

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

            def record(self):
                sim.host += 1e-6
                self.at = sim.gpu = max(sim.gpu, sim.host)

            def elapsed_time(self, end):
                return (end.at - self.at) * 1e3  # ms, as torch's

        self.Event = Event

    def _queue(self, seconds: float) -> None:
        self.gpu = max(self.gpu, self.host) + seconds

    def perf_counter(self) -> float:
        return self.host

    def synchronize(self) -> None:
        self.host = max(self.host, self.gpu)

    def call(self) -> None:
        launch = self.rng.uniform(*self.launch_us) * 1e-6
        self.launches.append(launch)
        self.host += launch
        self._queue(self.kernel_s)

    def flush(self) -> None:
        self.host += 3e-6
        self._queue(self.flush_s)

    def sleep(self, cycles: int) -> None:
        self.host += 3e-6
        self._queue(cycles / 1.98e9)  # an H200's boost clock: a spin runs no shorter than asked


@pytest.fixture
def simulated(monkeypatch):
    """``make(launch_us, kernel_us, flush_us)`` installs a SimulatedGpu under timing and returns it."""
    import types

    import torch

    rng = np.random.default_rng(10)

    def make(launch_us, kernel_us=5.0, flush_us=0.0):
        sim = SimulatedGpu(rng, launch_us, kernel_us, flush_us)
        monkeypatch.setattr(runtime, "is_gpu", lambda: True)
        monkeypatch.setattr(timing, "_clocks_up", True)
        monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=sim.perf_counter))
        monkeypatch.setattr(timing, "_flusher", lambda flush: sim.flush if flush else (lambda: None))
        monkeypatch.setattr(torch.cuda, "Event", sim.Event)
        monkeypatch.setattr(torch.cuda, "synchronize", sim.synchronize)
        monkeypatch.setattr(torch.cuda, "_sleep", sim.sleep)
        return sim

    return make


def test_spin_decision_does_not_flip_on_noisy_launch_times(simulated):
    """Launch times spread around the old rule's threshold (host median < 0.7x the flush: no spin):
    that rule went either way across these draws; bench's rule spins in every one, and the GPU's
    queued work before each call covers 3x the slowest launch seen each time."""
    flush_us = 60.0
    old_rule, spins = [], []
    for _ in range(50):
        base = np.random.default_rng(len(spins)).uniform(30, 55)  # around 0.7 x 60 = 42 us
        sim = simulated((0.8 * base, 1.2 * base), flush_us=flush_us)
        cycles = timing._spin_cycles(sim.call, sim.flush, flushes=True)
        spins.append(cycles)
        old_rule.append(bool(np.median(sim.launches) < 0.7 * flush_us * 1e-6))
        assert cycles / timing.CLOCK_BOUND_HZ + flush_us * 1e-6 >= timing.HOST_MARGIN * max(sim.launches)
    assert len(set(old_rule)) == 2, "the draws should straddle the old threshold"
    assert all(spins), "a draw dropped the spin"


def test_a_flush_three_times_the_launch_needs_no_spin_in_any_draw(simulated):
    for _ in range(50):
        sim = simulated((15, 40), flush_us=400.0)  # an H200's read flush against a Triton launch
        assert timing._spin_cycles(sim.call, sim.flush, flushes=True) == 0


def test_the_spin_shrinks_to_nothing_at_the_threshold():
    """No jump: either side of the threshold the GPU gets the same work before the call."""
    launch = 20e-6
    need = timing.HOST_MARGIN * launch + 10e-6
    for flush_s in np.linspace(0.5 * need, 1.5 * need, 41):
        spin = timing._spin_seconds(launch, flush_s)
        assert spin + flush_s == pytest.approx(max(need, flush_s))
    assert timing._spin_seconds(launch, need * (1 - 1e-9)) < 1e-12
    assert timing._spin_seconds(1.0, 0.0) == timing.SPIN_CAP_S  # a host pause does not spin forever


def test_warm_l2_bench_always_hides_the_launch(simulated):
    """flush=None: a 5 us copy launched in 12-20 us of host time reads 5 us in every run (without the
    spin the same simulation reads the launch time, which is what a warm-L2 record once showed)."""
    for _ in range(5):
        sim = simulated((12, 20), kernel_us=5.0)
        t = timing.bench(sim.call, flush=None)
        assert t.median_ms * 1e3 == pytest.approx(5.0, rel=0.01), t
        assert t.p80_ms * 1e3 == pytest.approx(5.0, rel=0.01), t
        assert "spin" in t.method and "L2 warm" in t.method
    sim = simulated((12, 20), kernel_us=5.0)
    unhidden = timing.bench(sim.call, flush=None, hide_host=False)
    assert unhidden.median_ms * 1e3 > 12, unhidden


def test_flushed_bench_times_the_kernel_with_or_without_a_spin(simulated):
    for launch_us, flush_us in (((15, 40), 400.0), ((30, 50), 60.0)):
        sim = simulated(launch_us, kernel_us=7.0, flush_us=flush_us)
        t = timing.bench(sim.call, flush="read")
        assert t.median_ms * 1e3 == pytest.approx(7.0, rel=0.01), (launch_us, flush_us, t)


def test_max_autotune_is_timed_at_its_best_and_says_which(monkeypatch):
    """torch.compile max-autotune's CUDA graphs copy every input not marked static on each call: the
    baseline compiles both ways a knowledgeable user would (graphs off; inputs marked static), keeps the
    faster and names it. Other modes compile once."""
    import torch

    compiled_modes, static_when_compiled = [], []
    x = torch.ones(4)

    def fake_compile(fn, mode=None):
        compiled_modes.append(mode)
        static_when_compiled.append(getattr(x, "_dynamo_static_input_type", None) is not None)
        return lambda **kw: fn(**kw)

    monkeypatch.setattr(torch, "compile", fake_compile)
    monkeypatch.setattr(torch._dynamo, "reset", lambda: None)
    times = iter([2.0, 1.0])  # the static way is faster here

    def timer(call):
        call()
        return timing.Timing(next(times), 0.0, 0.0, "fake")

    fn, how, _ = timing.compiled_at_best(lambda x: x + 1, "max-autotune", {"x": x}, timer)
    assert how == "max-autotune, inputs marked static"
    assert compiled_modes == ["max-autotune-no-cudagraphs", "max-autotune"]
    assert static_when_compiled == [False, True]
    assert torch.equal(fn(x=x), x + 1)
    compiled_modes.clear()
    times = iter([1.0, 2.0])  # graphs off is faster: compiled again after the reset, and kept
    fn, how, _ = timing.compiled_at_best(lambda x: x + 1, "max-autotune", {"x": x}, timer)
    assert how == "max-autotune-no-cudagraphs" and compiled_modes[-1] == "max-autotune-no-cudagraphs"
    assert static_when_compiled[-1] is False  # recompiled on inputs no longer marked static
    compiled_modes.clear()
    fn, how, _ = timing.compiled_at_best(lambda x: x + 1, "default", {"x": x}, timer)
    assert how == "default" and compiled_modes == [None]
