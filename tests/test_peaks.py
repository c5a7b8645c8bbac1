"""The roofline's peaks: measured under a lock, checked against the datasheet, never cached when bad.

No GPU here: ``runtime.gpu_info`` is faked to an H200 and the measurement is a function that returns
fixed figures (and counts its calls), so only the bookkeeping around the measurement is under test.
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import time
from pathlib import Path

import pytest

from course_lib import bench, filelock, roofline, runtime, tasks, timing

H200 = runtime.GpuInfo("NVIDIA H200", (9, 0), 132, 139.8, 60.0)
TFLOPS = {"bfloat16": 758.1, "float16": 728.5, "float32": 51.2}


def measured(bandwidth: float = 4379.4, copy: float = 4277.4, tflops: dict | None = None) -> roofline.Peaks:
    return roofline.Peaks("NVIDIA H200", bandwidth, dict(tflops or TFLOPS), "measured on NVIDIA H200 (fake)", copy)


GOOD = measured()
SHARED = measured(bandwidth=950.0, copy=900.0)  # four processes timing at once: a quarter of the rate
# passes the datasheet check (above half of 4800 GB/s) yet is 40% low: two processes shared the GPU
HALF_SHARED = measured(bandwidth=2600.0, copy=2500.0)


class FakeMeasure:
    """Returns the given peaks in turn (the last one repeats) and counts its calls."""

    def __init__(self, *results: roofline.Peaks):
        self.results = list(results)
        self.calls = 0

    def __call__(self) -> roofline.Peaks:
        self.calls += 1
        return self.results[min(self.calls, len(self.results)) - 1]


@pytest.fixture
def h200(tmp_path, monkeypatch) -> Path:
    """An H200 that is never touched, with its own empty cache; returns the peaks cache file."""
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(roofline.SHARED_CACHE_ENV, raising=False)
    monkeypatch.setattr(runtime, "gpu_info", lambda: H200)
    monkeypatch.setattr(roofline, "measure_peaks", FakeMeasure(GOOD))
    # the machine's lock lives in this test's folder, never in the real /tmp another process may use
    monkeypatch.setattr(roofline, "_machine_lock_file", lambda name: tmp_path / "machine" / "peaks.lock")
    (tmp_path / "machine").mkdir()
    return roofline._cache_file(H200.name)


def test_a_good_measurement_is_cached_and_reused(h200):
    measure = FakeMeasure(GOOD)
    first = roofline.gpu_peaks(measure=measure)
    second = roofline.gpu_peaks(measure=measure)
    assert first == second == roofline.hardware(GOOD)
    assert measure.calls == 1
    assert roofline.Peaks(**json.loads(h200.read_text())) == GOOD


def test_remeasure_replaces_the_cached_figures(h200):
    roofline.gpu_peaks(measure=FakeMeasure(GOOD))
    newer = measured(bandwidth=4400.0)
    measure = FakeMeasure(newer)
    assert roofline.gpu_peaks(remeasure=True, measure=measure) == roofline.hardware(newer)
    assert measure.calls == 1
    assert roofline.gpu_peaks(measure=measure) == roofline.hardware(newer)


def test_a_shared_gpu_is_measured_twice_then_the_datasheet_stands_in(h200):
    measure = FakeMeasure(SHARED)
    peaks = roofline.gpu_peaks(measure=measure)
    assert measure.calls == 2
    sheet = roofline.DATASHEET["H200"]
    assert (peaks.bandwidth_gbs, peaks.tflops) == (sheet.bandwidth_gbs, sheet.tflops)
    assert peaks.source.startswith("datasheet (measured 900 GB/s copy, under half of the 4800 GB/s datasheet figure")
    assert "shared" in peaks.source
    assert not h200.exists(), "a bad measurement was cached"
    # the next caller (this process or another) takes the datasheet for a while, without measuring
    again = roofline.gpu_peaks(measure=measure)
    assert again == peaks and measure.calls == 2
    assert not h200.exists()


def test_a_shared_gpu_that_recovers_on_the_second_measurement(h200):
    measure = FakeMeasure(SHARED, GOOD)
    assert roofline.gpu_peaks(measure=measure) == roofline.hardware(GOOD)
    assert measure.calls == 2
    assert roofline.Peaks(**json.loads(h200.read_text())) == GOOD


def test_a_slow_matmul_fails_the_check_too(h200):
    measure = FakeMeasure(measured(tflops={**TFLOPS, "bfloat16": 300.0}))
    peaks = roofline.gpu_peaks(measure=measure)
    assert peaks.source.startswith("datasheet (measured 300 TFLOP/s bfloat16 matmul, under half of the 989")
    assert not h200.exists()


def test_the_datasheet_fallback_expires(h200, monkeypatch):
    roofline.gpu_peaks(measure=FakeMeasure(SHARED))
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now + roofline.FALLBACK_S + 1)
    measure = FakeMeasure(GOOD)
    assert roofline.gpu_peaks(measure=measure) == roofline.hardware(GOOD)
    assert measure.calls == 1


def test_a_bad_cached_file_is_ignored_and_measured_again(h200):
    h200.parent.mkdir(parents=True)
    h200.write_text(json.dumps(SHARED.to_dict()))  # what an older course_lib cached on a shared GPU
    measure = FakeMeasure(GOOD)
    assert roofline.gpu_peaks(measure=measure) == roofline.hardware(GOOD)
    assert measure.calls == 1
    assert roofline.Peaks(**json.loads(h200.read_text())) == GOOD


def test_an_unreadable_cached_file_is_measured_again(h200):
    h200.parent.mkdir(parents=True)
    h200.write_text('{"gpu": "NVIDIA H200", "bandw')
    measure = FakeMeasure(GOOD)
    assert roofline.gpu_peaks(measure=measure) == roofline.hardware(GOOD)
    assert measure.calls == 1


def test_gpus_missing_from_the_datasheet_are_not_checked(h200, monkeypatch):
    odd = runtime.GpuInfo("Some Future GPU", (12, 0), 10, 8.0, 4.0)
    monkeypatch.setattr(runtime, "gpu_info", lambda: odd)
    slow = roofline.Peaks(odd.name, 100.0, {"float32": 1.0}, "measured on Some Future GPU (fake)", 90.0)
    measure = FakeMeasure(slow)
    assert roofline.gpu_peaks(measure=measure) == slow
    assert measure.calls == 1
    assert roofline.implausible(slow) is None


def test_a_kernel_at_340_percent_of_the_roofline_sends_the_peaks_to_be_measured_again(h200):
    # passes the check, but low
    assert roofline.gpu_peaks(measure=FakeMeasure(HALF_SHARED)) == roofline.hardware(HALF_SHARED)
    measure = FakeMeasure(GOOD)
    new = roofline.check_fraction(3.4, HALF_SHARED, measure=measure)
    assert measure.calls == 1
    assert new.bandwidth_gbs == GOOD.bandwidth_gbs
    assert new.source.startswith(GOOD.source) and "340% of the roofline" in new.source
    assert roofline.gpu_peaks(measure=measure) == new  # cached for everyone
    # measured again once: a kernel still above the roofline is believed, not chased
    assert roofline.check_fraction(1.2, new, measure=measure) is new
    assert measure.calls == 1


def test_a_fraction_under_105_percent_changes_nothing(h200):
    roofline.gpu_peaks(measure=FakeMeasure(GOOD))
    measure = FakeMeasure(GOOD)
    assert roofline.check_fraction(1.05, GOOD, measure=measure) is GOOD
    assert roofline.check_fraction(0.9, GOOD, measure=measure) is GOOD
    assert roofline.check_fraction(3.4, roofline.DATASHEET["H200"], measure=measure) is roofline.DATASHEET["H200"]
    assert measure.calls == 0


def test_a_kernel_over_the_roofline_on_a_shared_gpu_gets_the_datasheet(h200):
    roofline.gpu_peaks(measure=FakeMeasure(HALF_SHARED))
    new = roofline.check_fraction(3.4, HALF_SHARED, measure=FakeMeasure(SHARED))
    assert new.source.startswith("datasheet (measured 900 GB/s copy")
    assert new.bandwidth_gbs == roofline.DATASHEET["H200"].bandwidth_gbs
    assert not h200.exists(), "the low figures were left in the cache"


def test_check_fraction_takes_what_another_process_measured_meanwhile(h200):
    roofline.gpu_peaks(measure=FakeMeasure(GOOD))  # the cache no longer holds the caller's peaks
    measure = FakeMeasure(measured(bandwidth=4500.0))
    assert roofline.check_fraction(3.4, HALF_SHARED, measure=measure) == roofline.hardware(GOOD)
    assert measure.calls == 0


def test_bench_measures_the_peaks_again_above_the_roofline(h200, monkeypatch):
    """bench: a fraction of 170% against low cached peaks is recomputed against new ones, and said."""
    spec = tasks.get("vector_add")
    case = spec.bench_cases[0]
    roofline.gpu_peaks(measure=FakeMeasure(HALF_SHARED))
    floor_ms = roofline.floor(spec.bytes_moved(case), 0, HALF_SHARED).ms
    fast = timing.Timing(floor_ms / 1.7, floor_ms / 1.7, floor_ms / 1.7, "fake")
    rows = [bench._record(spec, case, "solution", fast, HALF_SHARED)]
    measure = FakeMeasure(GOOD)
    monkeypatch.setattr(roofline, "measure_peaks", measure)
    peaks, said = bench._check_peaks(rows, HALF_SHARED)
    assert measure.calls == 1 and peaks.bandwidth_gbs == GOOD.bandwidth_gbs
    assert rows[0]["roofline_fraction"] == pytest.approx(1.7 * HALF_SHARED.bandwidth_gbs / GOOD.bandwidth_gbs)
    assert said.startswith("peaks measured again: a kernel ran at 170% of the roofline"), said


# --------------------------------------------------------------------------------------------------
# the lock: processes that start at once measure once


def _measure_slowly(log: str) -> roofline.Peaks:
    with open(log, "a") as f:
        f.write("start\n")
    time.sleep(0.5)
    with open(log, "a") as f:
        f.write("end\n")
    return GOOD


def _child(cache: str, log: str, out: str, go) -> None:
    import os
    from functools import partial

    os.environ["COURSE_CACHE"] = cache
    os.environ.pop(roofline.SHARED_CACHE_ENV, None)
    runtime.gpu_info = lambda: H200  # this process's own copy of the module
    roofline._machine_lock_file = lambda name: Path(cache).parent / "machine.lock"
    go.wait(10)
    peaks = roofline.gpu_peaks(measure=partial(_measure_slowly, log))
    Path(out).write_text(json.dumps(peaks.to_dict()))


@pytest.mark.skipif(filelock.fcntl is None, reason="no fcntl: no lock on this platform")
@pytest.mark.timeout(30)
def test_two_processes_measure_once(tmp_path):
    # fork: fast, and no import of course_lib in the children (spawn elsewhere: each child imports it)
    fork = sys.platform.startswith("linux")
    ctx = multiprocessing.get_context("fork" if fork else "spawn")
    go = ctx.Event()
    log = tmp_path / "measure.log"
    outs = [tmp_path / f"peaks-{i}.json" for i in range(2)]
    children = [ctx.Process(target=_child, args=(str(tmp_path / "cache"), str(log), str(out), go)) for out in outs]
    start = time.perf_counter()
    for p in children:
        p.start()
    go.set()  # both ask for the peaks at the same moment
    for p in children:
        p.join(15)
    for p in children:
        if p.is_alive():
            p.kill()
    assert [p.exitcode for p in children] == [0, 0]
    assert log.read_text().splitlines() == ["start", "end"], "measured more than once"
    assert [roofline.Peaks(**json.loads(out.read_text())) for out in outs] == [roofline.hardware(GOOD)] * 2
    if fork:
        assert time.perf_counter() - start < 5


def test_the_compute_roof_is_the_datasheet_peak_and_cublas_the_best_library(h200):
    """cuBLAS's measured matmul is the best library, never the roof: a kernel at parity with it
    is at 77% of an H200's 989 TFLOP/s, not at 100%."""
    peaks = roofline.gpu_peaks(measure=FakeMeasure(GOOD))
    assert peaks.tflops["bfloat16"] == 989 and peaks.library_tflops == TFLOPS
    assert peaks.bandwidth_gbs == GOOD.bandwidth_gbs  # the memory roof stays measured
    at_cublas = 2 * 8192**3 / (TFLOPS["bfloat16"] * 1e12) * 1e3  # ms
    fraction = roofline.fraction_of_roofline(at_cublas, 3 * 8192**2 * 2, 2 * 8192**3, peaks, "bfloat16")
    assert fraction == pytest.approx(758.1 / 989)


def test_a_record_of_the_old_kind_is_read_on_the_hardware_roof():
    old = GOOD.to_dict()
    del old["library_tflops"]  # written before the roof was the datasheet's
    peaks = roofline.from_record(old)
    assert peaks.tflops["float16"] == 989 and peaks.library_tflops["float16"] == 728.5
    assert roofline.from_record(peaks.to_dict()) == peaks  # converted once, not twice


def test_a_gpu_the_table_does_not_list_keeps_its_measured_matmul_as_roof():
    odd = roofline.Peaks("Some Future GPU", 100.0, {"float32": 1.0}, "measured on Some Future GPU (fake)", 90.0)
    assert roofline.hardware(odd) == odd


def test_a_roof_is_never_under_a_measurement():
    fast = measured(tflops={"bfloat16": 1200.0, "float16": 700.0, "float32": 50.0})  # a future cuBLAS, or a bad count
    assert roofline.hardware(fast).tflops["bfloat16"] == 1200.0


def test_no_roof_sits_under_a_rate_its_own_run_reached():
    """A measured bandwidth is a copy's or an add's; a kernel of the same run may beat it by a percent.
    The roof is raised to it, so no fraction of the roofline exceeds 100%."""
    peaks = roofline.hardware(GOOD)
    rows = [
        {"gbs": GOOD.bandwidth_gbs * 1.01, "tflops": 0.1, "dtype": "float32", "roofline_fraction": 1.01},
        {"gbs": 50.0, "tflops": 900.0, "dtype": "bfloat16", "roofline_fraction": 0.9},
        {"gbs": 9e9, "tflops": 9e9, "dtype": "bfloat16", "roofline_fraction": None},  # partial: not counted
    ]
    covered = roofline.covering(peaks, rows, lambda r: r["dtype"])
    assert covered.bandwidth_gbs == pytest.approx(GOOD.bandwidth_gbs * 1.01)
    assert covered.tflops["bfloat16"] == 989  # 900 is under the datasheet's peak
    assert roofline.covering(peaks, rows[1:], lambda r: r["dtype"]) is peaks


def test_no_recorded_figure_exceeds_its_roof_and_partial_rows_have_no_fraction():
    """Every bench record of results/, read as the notebooks read it: at most 100% of the roofline, and
    the rows that do a part of the task's work (cuBLAS's candidate GEMM alone, credited with the
    layer's FLOPs they read 107-108% before) carry no fraction."""
    from course_lib import results

    names = sorted({r["task"] for data in results.load_bench_files() for r in data["records"]})
    partial = 0
    for name in names:
        for r in results.records(name):
            if r["variant"] in tasks.get(name).partial_variants:
                assert r["roofline_fraction"] is None
                partial += 1
            else:
                assert r["roofline_fraction"] <= 1.0 + 1e-9, (name, r["variant"], r["roofline_fraction"])
    assert partial >= 4  # fused_broadcast's and ws_compression's cuBLAS candidate rows


# --------------------------------------------------------------------------------------------------
# many users of one machine (a hub): the administrator's figures, and one measurement at a time


@pytest.fixture
def shared(h200, tmp_path, monkeypatch) -> Path:
    """COURSE_SHARED_CACHE set to a folder only its owner can write; returns the shared peaks file."""
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    monkeypatch.setenv(roofline.SHARED_CACHE_ENV, str(folder))
    return roofline.shared_file(H200.name)


def test_users_read_the_administrators_figures_and_measure_nothing(shared, monkeypatch, tmp_path):
    admin = measured(bandwidth=4401.0)
    peaks, target = roofline.measure_shared(measure=FakeMeasure(admin))
    assert target == shared and oct(shared.stat().st_mode & 0o777) == "0o644"
    # a learner: another cache, the same shared folder
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path / "learner-cache"))
    measure = FakeMeasure(GOOD)
    assert roofline.gpu_peaks(measure=measure) == roofline.hardware(admin) == peaks
    assert measure.calls == 0, "a user measured though the administrator's figures were there"
    # the learner's own measurement, when asked for, wins over the shared one afterwards
    assert roofline.gpu_peaks(remeasure=True, measure=measure) == roofline.hardware(GOOD)
    assert measure.calls == 1 and roofline.gpu_peaks(measure=measure) == roofline.hardware(GOOD)


@pytest.mark.parametrize("opened", ["folder", "file"])
def test_a_shared_file_others_can_write_is_not_trusted(shared, opened):
    shared.write_text(json.dumps(measured(bandwidth=4402.0).to_dict()))
    shared.chmod(0o644)
    (shared.parent if opened == "folder" else shared).chmod(0o777 if opened == "folder" else 0o666)
    assert "can be written by other users" in roofline.untrusted(shared)
    measure = FakeMeasure(GOOD)
    assert roofline.gpu_peaks(measure=measure) == roofline.hardware(GOOD)
    assert measure.calls == 1, "a file any learner could have written set the roofline"
    if opened == "file":
        with pytest.raises(ValueError, match="can be written by other users"):
            roofline.measure_shared(measure=FakeMeasure(GOOD))
    else:  # the administrator's own command closes the folder again
        roofline.measure_shared(measure=FakeMeasure(GOOD))
        assert oct(shared.parent.stat().st_mode & 0o777) == "0o755" and roofline.untrusted(shared) is None


def test_a_shared_link_is_not_trusted(shared, tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(measured(bandwidth=4403.0).to_dict()))
    shared.symlink_to(elsewhere)
    assert "symbolic link" in roofline.untrusted(shared)
    assert roofline.gpu_peaks(measure=FakeMeasure(GOOD)) == roofline.hardware(GOOD)


def test_measure_shared_says_what_is_missing(h200):
    with pytest.raises(ValueError, match=roofline.SHARED_CACHE_ENV):
        roofline.measure_shared(measure=FakeMeasure(GOOD))


def test_measure_shared_refuses_figures_that_are_not_a_measurement(shared):
    with pytest.raises(ValueError, match="not shared: datasheet"):
        roofline.measure_shared(measure=FakeMeasure(SHARED))
    assert not shared.exists()


@pytest.mark.skipif(filelock.fcntl is None, reason="no fcntl: no lock on this platform")
def test_a_user_who_holds_the_machines_lock_for_ever_costs_a_bounded_wait(h200, tmp_path, monkeypatch):
    """Another user's process (here: this one, through another descriptor) holds the machine's lock and
    never lets go: the wait ends after MACHINE_WAIT_S, the datasheet stands in, nothing is cached."""
    monkeypatch.setattr(roofline, "MACHINE_WAIT_S", 0.3)
    holder = filelock.acquire_between_users(roofline._machine_lock_file(H200.name), 1.0)
    try:
        measure = FakeMeasure(GOOD)
        start = time.monotonic()
        peaks = roofline.gpu_peaks(measure=measure)
        assert time.monotonic() - start < 3
        assert measure.calls == 0 and peaks.source.startswith("datasheet (another user of this machine")
        assert not h200.exists()
    finally:
        filelock.release(holder)


@pytest.mark.skipif(filelock.fcntl is None, reason="no fcntl: no lock on this platform")
def test_the_machines_lock_is_opened_read_only_by_other_users(tmp_path):
    """A lock file another user created (0644, not writable here) still locks: flock needs only a
    descriptor, and an existing file is opened without O_CREAT (fs.protected_regular)."""
    path = tmp_path / "peaks.lock"
    fd = filelock.acquire_between_users(path, 1.0)
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    filelock.release(fd)
    path.chmod(0o444)  # as another user's file looks to this one
    fd = filelock.acquire_between_users(path, 1.0)
    assert fd is not None
    with pytest.raises(filelock.NotNow):
        filelock.acquire_between_users(path, 0.1)
    filelock.release(fd)
    filelock.release(filelock.acquire_between_users(path, 0.1))


def _user(cache: str, shared: str, lock: str, log: str, out: str, go) -> None:
    import os
    from functools import partial

    os.environ["COURSE_CACHE"] = cache
    os.environ[roofline.SHARED_CACHE_ENV] = shared
    runtime.gpu_info = lambda: H200
    roofline._machine_lock_file = lambda name: Path(lock)
    go.wait(10)
    peaks = roofline.gpu_peaks(measure=partial(_measure_slowly, log))
    Path(out).write_text(json.dumps(peaks.to_dict()))


@pytest.mark.skipif(filelock.fcntl is None or not sys.platform.startswith("linux"), reason="fork and flock")
@pytest.mark.timeout(30)
def test_users_with_their_own_caches_measure_one_after_another(tmp_path):
    """Three users (three caches) open the roofline at once: each measures, but never two at a time."""
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    log = tmp_path / "measure.log"
    outs = [tmp_path / f"peaks-{i}.json" for i in range(3)]
    args = [(str(tmp_path / f"cache-{i}"), str(tmp_path / "none"), str(tmp_path / "machine.lock"), str(log), str(o), go)
            for i, o in enumerate(outs)]  # fmt: skip
    users = [ctx.Process(target=_user, args=a) for a in args]
    for p in users:
        p.start()
    go.set()
    for p in users:
        p.join(20)
        if p.is_alive():
            p.kill()
    assert [p.exitcode for p in users] == [0, 0, 0]
    assert log.read_text().splitlines() == ["start", "end"] * 3, "two users measured at once"


def test_the_doctor_says_where_the_peaks_come_from(shared):
    from course_lib import checkup

    assert "does not exist" in checkup.peaks_finding(H200).detail
    roofline.measure_shared(measure=FakeMeasure(GOOD))
    assert checkup.peaks_finding(H200).detail.startswith("the administrator's, for every user")
    shared.chmod(0o666)
    found = checkup.peaks_finding(H200)
    assert found.level == checkup.WARN and "can be written by other users" in found.detail


def test_the_peaks_command(shared, monkeypatch, capsys):
    from course_lib import cli

    monkeypatch.setattr(runtime, "is_gpu", lambda: True)
    assert cli.main(["peaks", "--shared"]) == 0
    out = capsys.readouterr().out
    assert f"written for every user: {shared}" in out and "source: measured on NVIDIA H200" in out
    monkeypatch.setattr(runtime, "is_gpu", lambda: False)
    assert cli.main(["peaks", "--shared"]) == 2


@pytest.mark.skipif(filelock.fcntl is None, reason="no fcntl: no lock on this platform")
@pytest.mark.timeout(20)
def test_a_fifo_at_the_machines_lock_path_does_not_hang_a_user(tmp_path):
    """Another user may put a FIFO where the lock goes: opening it must not block (it is no lock: go on
    unlocked)."""
    import os

    fifo = tmp_path / "peaks.lock"
    os.mkfifo(fifo)
    start = time.monotonic()
    assert filelock.acquire_between_users(fifo, 1.0) is None
    assert time.monotonic() - start < 2


def test_figures_far_above_the_datasheet_are_no_measurement(h200):
    absurd = measured(bandwidth=1e9, copy=1e9, tflops={"bfloat16": 1e9, "float16": 1e9, "float32": 1e9})
    assert "more than 1.5 times" in roofline.implausible(absurd)


@pytest.mark.skipif(not hasattr(__import__("os"), "getuid") or __import__("os").getuid() != 0, reason="needs root")
def test_a_shared_file_of_another_user_or_under_a_folder_others_can_swap_is_not_trusted(shared, tmp_path):
    import os

    roofline.measure_shared(measure=FakeMeasure(GOOD))
    assert roofline.untrusted(shared) is None
    os.chown(shared, 65534, 65534)  # nobody's
    assert "belongs to another user" in roofline.untrusted(shared)
    os.chown(shared, 0, 0)
    # a sticky, world-writable folder (like /tmp) above a folder that another user made
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    theirs = sticky / "cache"
    theirs.mkdir(mode=0o755)
    theirs.chmod(0o755)
    (theirs / shared.name).write_text(shared.read_text())
    (theirs / shared.name).chmod(0o644)
    assert roofline.untrusted(theirs / shared.name) is None  # ours: only we may rename it
    assert roofline._replaceable(theirs) is None
    os.chown(theirs, 65534, 65534)  # now another user could rename it and put their own in its place
    assert "lets other users replace" in roofline._replaceable(theirs)
    assert roofline.untrusted(theirs / shared.name) is not None


def test_a_shared_folder_this_user_may_not_enter_is_as_if_absent(shared, monkeypatch):
    roofline.measure_shared(measure=FakeMeasure(GOOD))

    def refuse(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(type(shared), "is_file", refuse)
    assert roofline._read_shared(H200.name) is None
    from course_lib import checkup

    assert "Permission denied" in checkup.peaks_finding(H200).detail


def test_measure_shared_works_without_the_administrators_own_cache(shared, h200):
    roofline.measure_shared(measure=FakeMeasure(GOOD))
    h200.unlink()  # the administrator's cache cleared (or sudo with another HOME)
    peaks, target = roofline.measure_shared(measure=FakeMeasure(GOOD))
    assert target == shared and roofline._read_shared(H200.name) == peaks


def test_a_cases_table_never_prints_more_than_the_roof():
    """bench prints each case's rows as they are timed, before the run raises the roof to its fastest row:
    a row above the roof measured before (SDPA's contiguous decode on the H200, 2026-12-06: 4641 GB/s, printed
    as 105% of the roofline) says so instead."""
    from course_lib import bench

    assert bench.fraction_text(0.99).strip() == "99% of roofline"
    assert bench.fraction_text(1.0).strip() == "100% of roofline"
    over = bench.fraction_text(1.05)
    assert "%" not in over and "raised" in over
    assert bench.fraction_text(None).strip() == "a part"
