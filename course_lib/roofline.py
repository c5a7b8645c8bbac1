"""The roofline: how fast a kernel could be, from the bytes it must move and the FLOPs it must do.

A kernel's floor time is max(bytes / bandwidth, FLOPs / FLOP rate). Measured time over that floor
says how far it is from the best any version could do, and which term bounds it says whether to
work on memory traffic or on arithmetic.

Peaks come from a measurement on this GPU (cached per GPU), or from a table of datasheet figures
when nothing was measured (CPU mode, or before the first measurement).

The roof is the hardware's. The memory roof is measured: the faster of a copy and an add of 2 GiB
tensors (the datasheet's 4.8 TB/s is a signalling rate no kernel reaches). The compute roof is the
datasheet's dense peak of the GPU: cuBLAS's measured matmul rate is the best *library*, kept beside
it as ``library_tflops``, never the roof (a kernel at parity with cuBLAS is not at 100% of the
hardware). For a GPU the table does not list, the measured matmul stands in.

Peaks measured on a GPU that other processes are using come out low, and every kernel then looks
faster than the hardware allows. So the measurement runs under a lock shared by the processes of
this machine; a figure under half the datasheet's is measured again, and then replaced by the
datasheet; only figures that pass are cached; and a kernel timed above 105% of the roofline sends
the peaks to be measured again (``check_fraction``).
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from . import filelock, runtime


@dataclass(frozen=True)
class Peaks:
    gpu: str
    bandwidth_gbs: float  # device memory, counting bytes read plus bytes written
    tflops: dict  # dtype name -> dense TFLOP/s ("bfloat16", "float16", "float32")
    source: str  # "measured on ... (date, versions)" or "datasheet"
    copy_gbs: float | None = None  # a plain device-to-device copy, bytes read + written (measured only)
    # cuBLAS's 8192^3 matmuls measured beside: the best library, not the roof (see ``hardware``)
    library_tflops: dict | None = None

    def flops_rate(self, dtype: str) -> float:
        return self.tflops.get(dtype, self.tflops.get("float32", 0.0))

    def ridge(self, dtype: str) -> float:
        """FLOP per byte above which a kernel is compute-bound."""
        return self.flops_rate(dtype) * 1e12 / (self.bandwidth_gbs * 1e9)

    def to_dict(self) -> dict:
        return asdict(self)


# Vendor datasheet figures (dense, no sparsity). Leads only: measured figures are lower, and the
# course uses them whenever it has them.
DATASHEET = {
    "H200": Peaks("NVIDIA H200 (SXM)", 4800, {"bfloat16": 989, "float16": 989, "float32": 67}, "datasheet"),
    "H100": Peaks("NVIDIA H100 (SXM)", 3350, {"bfloat16": 989, "float16": 989, "float32": 67}, "datasheet"),
    "A100": Peaks("NVIDIA A100 80GB (SXM)", 2039, {"bfloat16": 312, "float16": 312, "float32": 19.5}, "datasheet"),
    "L4": Peaks("NVIDIA L4", 300, {"bfloat16": 121, "float16": 121, "float32": 30.3}, "datasheet"),
    "RTX 4090": Peaks("NVIDIA GeForce RTX 4090", 1008, {"bfloat16": 165, "float16": 165, "float32": 82.6}, "datasheet"),
}
REFERENCE_GPU = "H200"  # the GPU the course's recorded results come from


# A measured figure under this share of the datasheet's: the GPU was shared (or throttled) meanwhile.
PLAUSIBLE_SHARE = 0.5
PLAUSIBLE_ABOVE = 1.5  # figures past 1.5 times the datasheet's: a written file, not a measurement
# A kernel above this fraction of the roofline: the peaks it was measured against were too low.
OVER_ROOFLINE = 1.05
# After a measurement fell back to the datasheet, other processes use the datasheet too (instead
# of measuring a GPU that still looks shared) for this long.
FALLBACK_S = 300.0
# A hub administrator's measurement, shared read-only by every user of the machine (``peaks --shared``)
SHARED_CACHE_ENV = "COURSE_SHARED_CACHE"
# how long a user waits while another user of the machine measures (a measurement takes seconds;
# a process that holds the lock for longer is stuck or hostile, and the datasheet stands in)
MACHINE_WAIT_S = 120.0
_RECHECK_NOTE = "; measured again after a kernel ran at {:.0%} of the roofline of the peaks cached before"


def datasheet_for(gpu_name: str) -> Peaks | None:
    """The table's figures for a GPU name (substring match), or None for a GPU the table does not list."""
    name = gpu_name.upper()
    for key in sorted(DATASHEET, key=len, reverse=True):
        if key.upper() in name:
            return DATASHEET[key]
    return None


def datasheet_peaks(gpu_name: str | None = None) -> Peaks:
    """Table figures for a GPU name (substring match), or for the course's reference GPU."""
    return datasheet_for(gpu_name or REFERENCE_GPU) or DATASHEET[REFERENCE_GPU]


def hardware(peaks: Peaks) -> Peaks:
    """Measured peaks with the compute roof set to the GPU's datasheet peak and the measured matmul
    rates moved to ``library_tflops``. Peaks already converted, datasheet peaks and peaks of a GPU the
    table does not list come back as they are (for those, the measured matmul is the only figure)."""
    if peaks.library_tflops is not None or not peaks.source.startswith("measured"):
        return peaks
    sheet = datasheet_for(peaks.gpu)
    if sheet is None:
        return peaks
    roof = {k: max(v, peaks.tflops.get(k, 0.0)) for k, v in sheet.tflops.items()}  # never under a measurement
    return replace(peaks, tflops=roof, library_tflops=dict(peaks.tflops))


def covering(peaks: Peaks, rows: list[dict], rate_dtype: Callable[[dict], str]) -> Peaks:
    """``peaks`` with each roof raised to the fastest rate a row of the same run reached, where one did
    (a measured bandwidth is a copy's or an add's, and a kernel may beat it by a percent): a roof is
    never below what a kernel reaches, so no fraction exceeds 100%. Rows: bench records (``gbs``,
    ``tflops``, ``dtype``) whose fraction is recorded (partial ones, with None, are left out);
    ``rate_dtype`` names the rate a row's FLOPs run at."""
    counted = [r for r in rows if r.get("roofline_fraction") is not None]
    bandwidth = max([peaks.bandwidth_gbs] + [float(r.get("gbs") or 0.0) for r in counted])
    tflops = dict(peaks.tflops)
    for r in counted:
        name = rate_dtype(r)
        tflops[name] = max(tflops.get(name, 0.0), float(r.get("tflops") or 0.0))
    if bandwidth == peaks.bandwidth_gbs and tflops == peaks.tflops:
        return peaks
    return replace(peaks, bandwidth_gbs=bandwidth, tflops=tflops)


def from_record(data: dict) -> Peaks:
    """The peaks of a record's meta.peaks, on the hardware's roof. Records written before the roof
    was the datasheet's kept cuBLAS's measured rates as ``tflops``: they come back as
    ``library_tflops``, the datasheet peak as the roof (``hardware``)."""
    known = {f.name for f in fields(Peaks)}
    return hardware(Peaks(**{k: v for k, v in data.items() if k in known}))


def _figure(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


def implausible(peaks: Peaks, gpu_name: str | None = None) -> str | None:
    """Why measured peaks cannot be this GPU's unshared figures, or None when they can.

    A copy, bandwidth or matmul figure under half the datasheet's means the GPU was shared (or
    throttled) while it was measured. GPUs missing from ``DATASHEET`` are not checked.
    """
    sheet = datasheet_for(gpu_name or peaks.gpu)
    if sheet is None:
        return None
    figures = [(peaks.copy_gbs, sheet.bandwidth_gbs, "GB/s copy", "GB/s")]
    figures.append((peaks.bandwidth_gbs, sheet.bandwidth_gbs, "GB/s bandwidth", "GB/s"))
    matmuls = peaks.library_tflops if peaks.library_tflops is not None else peaks.tflops
    figures += [(matmuls.get(k), v, f"TFLOP/s {k} matmul", "TFLOP/s") for k, v in sheet.tflops.items()]
    for got, want, what, unit in figures:
        if got is not None and got < PLAUSIBLE_SHARE * want:
            return f"measured {_figure(got)} {what}, under half of the {_figure(want)} {unit} datasheet figure"
        if got is not None and got > PLAUSIBLE_ABOVE * want:  # no GPU beats its datasheet by half again
            return (f"{_figure(got)} {what}, more than {PLAUSIBLE_ABOVE:g} times the {_figure(want)} {unit} "
                    "datasheet figure")  # fmt: skip
    return None


def _file_name(gpu_name: str) -> str:
    return "peaks-" + "".join(ch if ch.isalnum() else "_" for ch in gpu_name)


def _cache_file(gpu_name: str) -> Path:
    """This user's cached measurement."""
    return runtime.cache_root() / f"{_file_name(gpu_name)}.json"


def shared_file(gpu_name: str) -> Path | None:
    """The administrator's measurement for every user of the machine (``COURSE_SHARED_CACHE``), or
    None where that is not set."""
    folder = os.environ.get(SHARED_CACHE_ENV)
    return Path(folder).expanduser() / f"{_file_name(gpu_name)}.json" if folder else None


def _machine_lock_file(gpu_name: str) -> Path:
    """The lock that makes the users of one machine measure one at a time (a measurement taken while
    another one runs on the same GPU is low): in the shared temporary folder, since users share no
    other writable one."""
    return Path(tempfile.gettempdir()) / f"course_lib-{_file_name(gpu_name)}.lock"


def untrusted(path: Path) -> str | None:
    """Why a shared peaks file cannot be trusted, or None. A learner who could write it, or make or rename
    a folder on its path, would set every user's roofline, so: the file and its folder belong to root (the
    administrator writes them with sudo) or to this user, neither is a link or writable by group or
    others, and no folder above them lets others replace the next folder down (``_replaceable``)."""
    return (_open_to_others(path.parent, owned=True) or _open_to_others(path, owned=True)
            or _replaceable(path.parent))  # fmt: skip


def _replaceable(folder: Path) -> str | None:
    """Why another user could swap a folder on ``folder``'s path, or None: each folder above it is either
    closed to others, or sticky (like /tmp) with the next folder down owned by root or this user, which
    only they can then rename or remove."""
    try:
        chain = [folder.resolve(), *folder.resolve().parents]
        for child, parent in zip(chain, chain[1:]):
            info = os.stat(parent)
            if not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                continue
            if not info.st_mode & stat.S_ISVTX or os.lstat(child).st_uid not in (0, os.getuid()):
                return f"{parent} lets other users replace {child}"
    except OSError as err:
        return f"{folder}: {err.strerror or err}"
    return None


def _open_to_others(item: Path, owned: bool = False) -> str | None:
    try:
        info = os.lstat(item)
    except OSError as err:
        return f"{item}: {err.strerror or err}"
    if stat.S_ISLNK(info.st_mode):
        return f"{item} is a symbolic link"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{item} can be written by other users"
    if owned and info.st_uid not in (0, os.getuid()):
        return f"{item} belongs to another user (uid {info.st_uid}), not to root"
    return None


def _read_shared(gpu_name: str) -> Peaks | None:
    """The administrator's figures where they exist, can be trusted and pass the datasheet check."""
    path = shared_file(gpu_name)
    try:  # a folder this user may not enter (a home folder of mode 0750): as if absent
        if path is None or not path.is_file() or untrusted(path) is not None:
            return None
    except OSError:
        return None
    return _read_cached(path, gpu_name)


def _fallback_file(path: Path) -> Path:
    return path.with_name(path.stem + ".fallback.json")


def _write(path: Path, data: dict) -> None:
    """Whole or not at all: a process that reads without the lock never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def _read_cached(path: Path, gpu_name: str) -> Peaks | None:
    """The cached measurement; None when missing, unreadable, or failing the datasheet check (an
    older course_lib cached whatever it measured)."""
    try:
        peaks = Peaks(**json.loads(path.read_text()))
        if implausible(peaks, gpu_name) is None:
            return hardware(peaks)
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    return None


def _read_fallback(path: Path, gpu_name: str) -> Peaks | None:
    """The datasheet, when a measurement fell back to it less than FALLBACK_S ago (any process)."""
    try:
        note = json.loads(_fallback_file(path).read_text())
        age = time.time() - float(note["time"])
        source = str(note["source"])
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return replace(datasheet_peaks(gpu_name), source=source) if 0 <= age < FALLBACK_S else None


def measure_peaks() -> Peaks:
    """Measure copy bandwidth and matmul rates on this GPU (a few seconds). GPU mode only."""
    from . import timing

    timing._require_gpu()
    import torch

    info = runtime.gpu_info()
    n = 512 * 2**20  # 2 GiB of fp32 per tensor: far past the L2
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    copy = timing.bench(lambda: c.copy_(a))
    add = timing.bench(lambda: torch.add(a, b, out=c))
    copy_gbs = 2 * n * 4 / (copy.median_ms * 1e-3) / 1e9
    # A copy does not quite reach the best rate device memory gives (an add with two read streams
    # went 1.7% faster on an H200): the roof is the faster of the two, so no kernel sits above it.
    bandwidth = max(copy_gbs, 3 * n * 4 / (add.median_ms * 1e-3) / 1e9)
    a = b = c = None  # free 6 GiB before the matmuls
    tflops = {}
    size = 8192
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 means float32 here, not TF32
    try:
        for name, dtype in (
            ("bfloat16", torch.bfloat16),
            ("float16", torch.float16),
            ("float32", torch.float32),
        ):
            a = torch.randn(size, size, device="cuda", dtype=dtype)
            b = torch.randn(size, size, device="cuda", dtype=dtype)
            t = timing.bench(lambda a=a, b=b: a @ b, rep_ms=200)
            tflops[name] = 2 * size**3 / (t.median_ms * 1e-3) / 1e12
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    v = runtime.versions()
    source = (
        f"measured on {info.name}, {time.strftime('%Y-%m-%d')}, torch {v['torch']}, triton {v['triton']}: "
        "copy_ and add of 2 GiB tensors, cuBLAS 8192^3 matmuls (no TF32 for float32), median of course_lib.timing.bench"
    )
    return Peaks(
        info.name, round(bandwidth, 1), {k: round(val, 1) for k, val in tflops.items()}, source, round(copy_gbs, 1)
    )


def _measure_checked(gpu_name: str, path: Path, measure: Callable[[], Peaks] | None, note: str = "") -> Peaks:
    """Measure (call with the lock held): figures that pass the datasheet check are cached and
    returned; figures that fail it twice are not cached, and the datasheet stands in for them."""
    measure = measure or measure_peaks  # looked up now, so that tests can replace measure_peaks
    problem = None
    for _ in range(2):
        peaks = measure()
        problem = implausible(peaks, gpu_name)
        if problem is None:
            peaks = replace(peaks, source=peaks.source + note)
            _write(path, peaks.to_dict())
            _fallback_file(path).unlink(missing_ok=True)
            return hardware(peaks)
    source = f"datasheet ({problem}, in two measurements: the GPU looked shared or throttled)"
    _write(_fallback_file(path), {"time": time.time(), "source": source})
    return replace(datasheet_peaks(gpu_name), source=source)


def gpu_peaks(remeasure: bool = False, measure: Callable[[], Peaks] | None = None) -> Peaks:
    """This GPU's peaks on the hardware's roof (``hardware``): measured once and cached per GPU name;
    the datasheet in CPU mode.

    Read in turn: this user's cache, then the administrator's figures (``COURSE_SHARED_CACHE``, see
    ``measure_shared``), else ``measure`` (default ``measure_peaks``) takes the measurement, under this
    user's lock (a process that waited for it uses what the other one cached) and the machine's (users
    measure one at a time).
    Figures under half the datasheet's are measured again once, then replaced by the datasheet
    (``Peaks.source`` says so) and never cached. ``remeasure`` replaces the cached figures.
    """
    info = runtime.gpu_info()
    if info is None:
        return datasheet_peaks()
    path = _cache_file(info.name)
    stale = _read_cached(path, info.name) if remeasure else None
    if not remeasure:
        known = _read_cached(path, info.name) or _read_shared(info.name) or _read_fallback(path, info.name)
        if known is not None:
            return known
    with filelock.held(path.with_name(path.name + ".lock")):
        # another process may have measured while this one waited for the lock
        cached = _read_cached(path, info.name)
        if cached is not None and cached != stale:
            return cached
        if not remeasure and (fallback := _read_fallback(path, info.name)) is not None:
            return fallback
        return _measure_on_this_machine(info.name, path, measure, remeasure=remeasure)


def _measure_on_this_machine(
    gpu_name: str, path: Path, measure: Callable[[], Peaks] | None, note: str = "", remeasure: bool = False
) -> Peaks:
    """Measure (with this user's lock held) once no other user of the machine is measuring: N users of a
    hub who open the roofline at once measure one after another, and a user who waited takes the
    administrator's figures if they appeared meanwhile. Where another user holds the machine's lock for
    more than MACHINE_WAIT_S, the datasheet stands in for FALLBACK_S."""
    try:
        fd = filelock.acquire_between_users(_machine_lock_file(gpu_name), MACHINE_WAIT_S)
    except filelock.NotNow:
        source = f"datasheet (another user of this machine was measuring the peaks for over {MACHINE_WAIT_S:.0f} s)"
        _write(_fallback_file(path), {"time": time.time(), "source": source})
        return replace(datasheet_peaks(gpu_name), source=source)
    try:
        if not remeasure and not note and (shared := _read_shared(gpu_name)) is not None:
            return shared
        return _measure_checked(gpu_name, path, measure, note)
    finally:
        filelock.release(fd)


def measure_shared(remeasure: bool = False, measure: Callable[[], Peaks] | None = None) -> tuple[Peaks, Path]:
    """For a hub administrator: measure this GPU's peaks (or take this user's cached figures) and write
    them to ``COURSE_SHARED_CACHE``, readable by every user and writable by none of them, so that no user
    measures. ValueError, with the reason, where that folder is not set or could be written by others."""
    info = runtime.gpu_info()
    if info is None:
        raise ValueError("no GPU here: there are no peaks to measure (CPU mode uses the datasheet)")
    target = shared_file(info.name)
    if target is None:
        raise ValueError(f"set {SHARED_CACHE_ENV} to the folder every user's environment will name")
    target.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(target.parent, 0o755)  # every user reads and enters it, whatever this process's umask
    problem = _open_to_others(target.parent, owned=True)
    if problem is None and os.path.lexists(target):
        problem = _open_to_others(target, owned=True)
    if problem is None:
        problem = _replaceable(target.parent)
    if problem is not None:
        raise ValueError(f"{problem}: users would not trust it (chmod go-w, run as root)")
    peaks = gpu_peaks(remeasure=remeasure, measure=measure)
    if not peaks.source.startswith("measured"):
        raise ValueError(f"not shared: {peaks.source}")
    _write(target, peaks.to_dict())  # the figures on the hardware's roof, as every user reads them
    os.chmod(target, 0o644)
    return peaks, target


def check_fraction(fraction: float, peaks: Peaks, measure: Callable[[], Peaks] | None = None) -> Peaks:
    """The peaks to use after a kernel was timed at ``fraction`` of the roofline of ``peaks``.

    Above OVER_ROOFLINE (105%) against measured peaks, the peaks were measured low (the GPU was
    shared then): the cached figures are removed and measured again under the lock, or the
    datasheet stands in (see ``gpu_peaks``); the returned peaks' source says which. Otherwise, and
    for peaks that were already measured again this way, ``peaks`` itself comes back: compare with
    ``is`` or ``==`` to know whether anything changed.
    """
    if fraction <= OVER_ROOFLINE or not peaks.source.startswith("measured"):
        return peaks
    if _RECHECK_NOTE.split("{")[0] in peaks.source:
        return peaks  # measured again once already: the kernel's count or timing is off, not the peaks
    info = runtime.gpu_info()
    if info is None:
        return peaks
    path = _cache_file(info.name)
    with filelock.held(path.with_name(path.name + ".lock")):
        cached = _read_cached(path, info.name)
        if cached is not None and cached != hardware(peaks):
            return cached  # measured again by another process meanwhile
        if (fallback := _read_fallback(path, info.name)) is not None:
            return fallback
        path.unlink(missing_ok=True)
        return _measure_on_this_machine(info.name, path, measure, _RECHECK_NOTE.format(fraction))


# --------------------------------------------------------------------------------------------------
# the model


@dataclass(frozen=True)
class Floor:
    bytes: int
    flops: int
    memory_ms: float
    compute_ms: float

    @property
    def ms(self) -> float:
        return max(self.memory_ms, self.compute_ms)

    @property
    def bound(self) -> str:
        return "memory" if self.memory_ms >= self.compute_ms else "compute"

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")


def floor(n_bytes: int, n_flops: int, peaks: Peaks, dtype: str = "float32") -> Floor:
    memory_ms = n_bytes / (peaks.bandwidth_gbs * 1e9) * 1e3
    rate = peaks.flops_rate(dtype)
    compute_ms = n_flops / (rate * 1e12) * 1e3 if rate else 0.0
    return Floor(n_bytes, n_flops, memory_ms, compute_ms)


def fraction_of_roofline(measured_ms: float, n_bytes: int, n_flops: int, peaks: Peaks, dtype: str = "float32") -> float:
    """Floor time over measured time: 1.0 means the kernel runs at the roofline."""
    return floor(n_bytes, n_flops, peaks, dtype).ms / measured_ms


def plot(points: list[dict], peaks: Peaks, dtype: str = "float32", ax=None, title: str | None = None):
    """A roofline plot. Each point: {"label", "bytes", "flops", "ms"}; ms None plots the floor only.

    x: arithmetic intensity (FLOP/byte); y: achieved GFLOP/s. Kernels that do no arithmetic (a copy)
    have no place on this plot; compare them by GB/s instead.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.2))
    bw = peaks.bandwidth_gbs  # GB/s
    top = peaks.flops_rate(dtype) * 1e3  # GFLOP/s
    ridge = top / bw
    xs = [i for i in (p["flops"] / p["bytes"] for p in points if p["bytes"] and p["flops"])] or [ridge]
    lo, hi = min(xs + [ridge]) / 8, max(xs + [ridge]) * 8
    ax.plot(
        [lo, ridge, hi],
        [bw * lo, top, top],
        color="black",
        lw=1.5,
        label=f"roofline ({peaks.source.split(':')[0].split(' (')[0]})",
    )
    for p in points:
        if not p["flops"] or not p["bytes"]:
            continue
        x = p["flops"] / p["bytes"]
        if p.get("ms"):
            y = p["flops"] / (p["ms"] * 1e-3) / 1e9
            ax.scatter([x], [y], s=40, zorder=3, label=f"{p['label']}: {y / min(bw * x, top):.0%} of roof")
        else:
            ax.scatter([x], [min(bw * x, top)], s=40, marker="x", zorder=3, label=f"{p['label']} (floor)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(title or f"roofline, {dtype}")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    return ax
