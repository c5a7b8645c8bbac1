"""Speed tiers on a GPU: how fast a correct kernel is, timed by the grader's own clock.

A kernel task that passes every case on a GPU is timed once more on its timed case (``TaskSpec.
timed_case``), and given a tier from the bars in its spec (``TaskSpec.speed_tiers``):

* ``works``  every case is right;
* ``fast``   it also meets the ``fast`` bar (by default: torch eager's speed);
* ``expert`` it also meets the ``expert`` bar (by default: 80% of the speed of the course's solution).

What decides a tier lives here, in the grader's process, never in the learner's:

* **The clock is the grader's.** The worker is told to run the launcher R times and to report when
  the GPU is done; the grader measures the time between its message and the reply. R grows over
  uncounted windows until R calls take about 100 ms (``grow``), so the message's own cost is 1-3% of
  a window at most. Of seven windows the fastest counts: whatever disturbs a window (another process
  busy on the CPU, say) only slows it. Nothing the learner's process says about time is read.
* **The timed calls compute.** Every call of every window must launch a kernel of its own, and after
  the last window one more call, on fresh inputs at the timed shape with poisoned outputs, is judged
  like any case (its reference computed on this process's GPU). A launcher that keeps state between
  calls to skip work is what the pre-check refuses; code that gets past it can only slow itself.
* **The bars are measured on this GPU the same way**: the course's solution and the torch baseline
  run in a worker of the grader's own (the course's code only, no learner's), through the same
  protocol, once per machine and set of versions (cached beside the time limits).
* **The machine is the timing's alone.** Every other grading step on a GPU holds the GPU shared, a
  case for all of its work (its inputs made, the worker's run, the float64 reference and the
  comparison); a timing window holds it exclusively (``gpu_use``): a lock across processes, so
  several graders on one machine never time while another one's kernels or references run. A
  waiting timer keeps new steps out.
* **Noise is parity.** Each time has a spread (how far the third fastest window is from the fastest,
  counted as 3% to 10%); a kernel within the spreads of both times meets a bar.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import platform
import random
import subprocess
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import filelock, runtime, tasks
from . import trace

WORKS, FAST, EXPERT = "works", "fast", "expert"
WINDOW_S = 0.1  # the length of one timing window (R calls): the message's own cost is 1-3% of it at most
WINDOWS = 7
MAX_REPS = 8192  # calls in one window at most
WARM_WINDOWS = 4  # uncounted windows at most, while R grows until a window lasts about WINDOW_S
SLOW_CALL_S = 0.25  # a call this slow is timed one call at a time (three of them)
MIN_NOISE = 0.03  # a spread below 3% is not believed: back-to-back windows on one GPU vary that much
MAX_NOISE = 0.10  # nor one above 10%: parity is a band around a bar, not a pass for any time
CACHE_DAYS = 7.0  # bars measured longer ago than this are measured again


@dataclass(frozen=True)
class Timing:
    """One thing's time per call on the timed case: the fastest window's, and the spread (the third
    fastest window's time against it)."""

    seconds: float
    spread: float
    calls: int  # how many calls the windows held in all

    @property
    def us(self) -> float:
        return self.seconds * 1e6

    def noise(self) -> float:
        return min(MAX_NOISE, max(MIN_NOISE, self.spread))


def per_call(windows: list[tuple[int, float]]) -> Timing:
    """A time per call from (calls, seconds) windows: the fastest window's time per call. What slows a
    window (another process on the CPU that launches, a clock tick, the message's own cost) only ever
    adds, so the fastest window is the nearest to the kernel's own time; the spread is how far the
    third fastest is from it (the floor's jitter), which is what parity allows."""
    estimates = sorted(t / n for n, t in windows if n > 0 and t > 0)
    if not estimates:
        return Timing(float("inf"), 1.0, 0)
    best = estimates[0]
    third = estimates[min(2, len(estimates) - 1)]
    return Timing(best, (third - best) / best, sum(n for n, _ in windows))


def settled_first(first_call_s: float, again):
    """The first call's time that plans the windows: a first call slow enough to be timed one call at a
    time is timed once more (``again()``) and the faster counts, so that one call held up on the host
    does not time a fast kernel one call at a time (on the H200, in a grader whose other threads were
    busy, single calls of 0.2 ms kernels read 0.04-1.3 s). What ``again()`` returns that is no time (a failure) is
    returned as it is."""
    if first_call_s < SLOW_CALL_S:
        return first_call_s
    second = again()
    return min(first_call_s, second) if isinstance(second, float) else second


def plan(first_call_s: float) -> list[int]:
    """The windows to time, from one call's time (which includes the message's cost): ``WINDOWS``
    windows of R calls, R calls taking about ``WINDOW_S``; a slow call is timed alone, three times.
    R is a first guess: ``grow`` corrects it from the uncounted windows before the counted ones."""
    if first_call_s >= SLOW_CALL_S:
        return [1, 1, 1]
    reps = max(2, min(MAX_REPS, math.ceil(WINDOW_S / max(first_call_s, 1e-6))))
    return [reps] * WINDOWS


def grow(reps: int, window_s: float) -> int:
    """R for the next window, after a window of ``reps`` calls took ``window_s`` (the message's cost
    included): ``reps`` itself once a window lasts most of ``WINDOW_S``, else more calls. A first call
    slowed by anything (a cold cache, the clocks rising, other processes on the CPU) gives too small an
    R; windows that short are mostly the message's cost (on the H200, with 8 jobs beside it, 21 calls of
    200 us came out 1.5-2x slow), so no window is counted until one lasts long enough."""
    if window_s >= 0.8 * WINDOW_S or reps >= MAX_REPS:
        return reps
    return min(MAX_REPS, math.ceil(reps * 1.1 * WINDOW_S / max(window_s, 1e-6)))


# --------------------------------------------------------------------------------------------------
# the decision


@dataclass(frozen=True)
class Bars:
    """What the tiers are measured against on this GPU, per call of the timed case."""

    eager: Timing
    solution: Timing
    roofline_s: float | None  # the bytes/FLOPs model's time at this GPU's peaks (``roofline_seconds``)
    gpu: str
    measured: str  # when (UTC, "YYYY-MM-DD HH:MM")

    def seconds(self, against: str) -> tuple[float, float]:
        """(time per call, noise) of a bar's reference."""
        if against == "eager":
            return self.eager.seconds, self.eager.noise()
        if against == "solution":
            return self.solution.seconds, self.solution.noise()
        if against == "roofline" and self.roofline_s:
            return self.roofline_s, 0.0
        raise ValueError(f"no bar called {against!r}")


@dataclass(frozen=True)
class Decision:
    tier: str
    line: str  # what the report says: the time, each bar and which one decided
    us: float
    roofline_fraction: float | None


def _meets(mine: Timing, bar: tasks.Tier, bars: Bars) -> tuple[bool, float]:
    """Whether ``mine`` meets ``bar``, and the time it had to beat (within the noise of both)."""
    reference_s, reference_noise = bars.seconds(bar.against)
    allowed = reference_s / bar.fraction
    return mine.seconds <= allowed * (1.0 + mine.noise() + reference_noise), allowed


def decide(spec: tasks.TaskSpec, mine: Timing, bars: Bars, case: tasks.Case) -> Decision:
    """The tier of a correct kernel that took ``mine`` per call of ``case``."""
    tiers = spec.speed_tiers()
    fast, fast_s = _meets(mine, tiers.fast, bars)
    expert, expert_s = _meets(mine, tiers.expert, bars)
    tier = EXPERT if fast and expert else FAST if fast else WORKS
    fraction = None
    if bars.roofline_s:
        fraction = min(1.0, bars.roofline_s / mine.seconds)
    figures = [
        f"torch eager {bars.eager.us:.1f} us ({bars.eager.seconds / mine.seconds:.2f}x yours)",
        f"the course's solution {bars.solution.us:.1f} us (both timed here {bars.measured} UTC)",
    ]
    if fraction is not None:
        figures.append(f"{fraction:.0%} of the hardware's roofline")
    nxt = ""
    if tier == WORKS:
        nxt = f"; fast needs {tiers.fast.describe()} (about {fast_s * 1e6:.1f} us)"
    elif tier == FAST:
        nxt = f"; expert needs {tiers.expert.describe()} (about {expert_s * 1e6:.1f} us)"
    line = (
        f"speed: {tier.upper()} - {mine.us:.1f} us a call (spread {mine.spread:.0%}) on {bars.gpu}, "
        f"{case.describe()}; {', '.join(figures)}{nxt}"
    )
    return Decision(tier, line, round(mine.us, 3), None if fraction is None else round(fraction, 4))


def _model(spec: tasks.TaskSpec, case: tasks.Case) -> tuple[int, int, str] | None:
    """(bytes, FLOPs, the dtype whose rate applies) of the task's cost model for ``case``, or None."""
    if spec.bytes_moved is None and spec.flops is None:
        return None
    dtype = str(case.dtype).replace("torch.", "") if spec.tensor_cores else "float32"
    return (spec.bytes_moved(case) if spec.bytes_moved else 0), (spec.flops(case) if spec.flops else 0), dtype


def _datasheet():
    """This GPU's datasheet peaks (``roofline.DATASHEET``), or None for a GPU the table does not list."""
    from .. import roofline

    info = runtime.gpu_info()
    return roofline.datasheet_for(info.name) if info is not None else None


def roofline_seconds(spec: tasks.TaskSpec, case: tasks.Case) -> float | None:
    """The time the task's bytes/FLOPs model allows at this GPU's datasheet peaks (the hardware's roof);
    None without a model or for a GPU ``roofline.DATASHEET`` does not list. Measured peaks are no roof
    here: a kernel can beat the rate cuBLAS reached when they were measured."""
    try:
        from .. import roofline

        model, sheet = _model(spec, case), _datasheet()
        if model is None or sheet is None:
            return None
        n_bytes, n_flops, dtype = model
        seconds = roofline.floor(n_bytes, n_flops, sheet, dtype).ms * 1e-3
        return seconds if seconds > 0 else None
    except Exception:  # no model for this case: the tier is decided without the roofline
        return None


# The timing protocol's version: bars timed by another protocol are timed again.
PROTOCOL = "timing-3"


def physical_floor_s(spec: tasks.TaskSpec, case: tasks.Case) -> float | None:
    """The least time a call of ``case`` can take on this GPU: the model's FLOPs at the datasheet's peak
    rate, and its bytes beyond what the L2 may keep between calls (this GPU's L2 size) at the datasheet's
    bandwidth. None where the GPU is not in the datasheet table or the task has no model. Timed calls
    faster than this did not all do the work."""
    try:
        from .. import roofline

        model, sheet, info = _model(spec, case), _datasheet(), runtime.gpu_info()
        if model is None or sheet is None or info is None:
            return None
        n_bytes, n_flops, dtype = model
        l2_bytes = int(info.l2_mib * 2**20)
        floor = roofline.floor(max(0, n_bytes - l2_bytes), n_flops, sheet, dtype)
        return floor.ms * 1e-3 if floor.ms > 0 else None
    except Exception:
        return None


# --------------------------------------------------------------------------------------------------
# the GPU's lock: steps share it, timing takes it alone


def _locks_dir() -> Path:
    path = runtime.cache_root() / "locks"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


@functools.cache
def _physical_gpus() -> tuple[tuple[str, str], ...]:
    """(index, UUID) of every GPU as nvidia-smi numbers them (PCI bus order), or () without nvidia-smi."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    if out.returncode != 0:
        return ()
    rows = [tuple(part.strip() for part in line.split(",", 1)) for line in out.stdout.splitlines() if "," in line]
    return tuple((index, uuid) for index, uuid in rows if uuid.startswith("GPU-"))


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)


def gpu_key(env: dict | None = None) -> str:
    """Which physical GPU a worker with ``env`` uses, as one name for every grader on the machine: the
    UUID of the first of its CUDA_VISIBLE_DEVICES (or of this process's; GPU 0 where neither sets it).
    An index and a UUID (or its prefix) of the same GPU give the same key, so two graders that name it
    differently still take one lock. Indices are read in PCI bus order, nvidia-smi's (CUDA's own
    default order differs only between GPUs of different kinds). Without nvidia-smi, or for a name it
    does not list (a MIG instance), the name itself."""
    first = "0"
    for source in (env or {}, os.environ):
        visible = source.get("CUDA_VISIBLE_DEVICES")
        if visible:
            first = visible.split(",")[0].strip()
            break
    for index, uuid in _physical_gpus():
        if first == index or (first.startswith("GPU-") and uuid.startswith(first)):
            return _safe(uuid)
    return _safe(first)


# A timer closes the gate for at most PATIENCE_S at a time while it waits for the running steps, then
# opens it again for a moment (BACKOFF_S) and tries again; after POLITE_S of that it keeps the gate
# closed until the GPU is its own. A step holds the GPU shared for as long as its case runs, and a
# learner's first run of a case compiles their kernels there: 5-10 s. A timer that closed the gate and
# waited for such a step kept every other job out meanwhile: in a room of 12 jobs on the H200 the steps
# waited 1343 s in all behind 64 timings that held the GPU 58 s (results/grader_h200/speed_2026-12-04_dedupe).
PATIENCE_S = 0.5
BACKOFF_S = (0.2, 0.8)
POLITE_S = 20.0


@contextlib.contextmanager
def gpu_use(key: str, exclusive: bool):
    """Hold GPU ``key`` shared (a grading step) or exclusively (a timing window), across processes.

    Two files: a gate and the lock itself. A step passes the gate (briefly, exclusively) and then
    takes the lock shared. A timer takes the gate and holds it while it waits for the lock, so no new
    step starts while it waits and the steps already running finish first; where they do not finish
    within PATIENCE_S (a step compiling), it lets the gate go for a moment and tries again, and after
    POLITE_S it waits at the closed gate for as long as it takes (a timer is never starved). Either
    way nothing else holds the GPU while a timer does."""
    folder = _locks_dir()
    gate_path, lock_path = folder / f"gpu-{key}.gate", folder / f"gpu-{key}.lock"
    asked = time.perf_counter()
    tries = 0
    while True:
        tries += 1
        gate = filelock.acquire(gate_path, exclusive=True)
        patient = exclusive and time.perf_counter() - asked < POLITE_S
        try:
            lock = filelock.acquire(lock_path, exclusive=exclusive, within_s=PATIENCE_S if patient else None)
        except filelock.NotNow:
            filelock.release(gate)  # steps queued at the gate go in; the timer comes back
            time.sleep(random.uniform(*BACKOFF_S))
            continue
        except BaseException:
            filelock.release(gate)
            raise
        break
    if not exclusive:
        filelock.release(gate)
        gate = None
    got = time.perf_counter()
    try:
        yield
    finally:
        filelock.release(lock)
        filelock.release(gate)
        if trace.on():
            now = time.perf_counter()
            more = {"tries": tries} if exclusive else {}
            trace.event("gpu " + ("alone" if exclusive else "shared"), gpu=key,
                        waited_s=round(got - asked, 4), held_s=round(now - got, 4), **more)  # fmt: skip


class SharedHold:
    """A grading step's shared hold of GPU ``key`` (``gpu_use``), which the step's worker lets go while
    Triton compiles one of the learner's kernels (seconds of CPU work, no GPU work) and takes back before
    the kernel launches (``isolation._Session.ask``, ``worker._GpuHold``). A timer then waits for the
    steps' launches, not for their compiles. ``on`` returns the seconds it waited for the GPU.
    ``taken``: whether ``with`` takes it at once (else only ``on`` does); ``with`` always lets it go."""

    def __init__(self, key: str, taken: bool = True):
        self.key = key
        self.taken = taken
        self._held = None

    @property
    def held(self) -> bool:
        return self._held is not None

    def on(self) -> float:
        if self._held is not None:
            return 0.0
        began = time.perf_counter()
        held = gpu_use(self.key, exclusive=False)
        held.__enter__()
        self._held = held
        return time.perf_counter() - began

    def off(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.__exit__(None, None, None)

    def __enter__(self) -> SharedHold:
        if self.taken:
            self.on()
        return self

    def __exit__(self, *exc) -> None:
        self.off()


# --------------------------------------------------------------------------------------------------
# the bars, measured once per machine


def _cache_file() -> Path:
    import torch
    import triton

    host = "".join(ch if ch.isalnum() else "_" for ch in platform.node() or "machine")
    return runtime.cache_root() / f"speed-bars-torch{torch.__version__}-triton{triton.__version__}-{host}.json"


def read_bars(task: str, key: str) -> Bars | None:
    try:
        entry = json.loads(_cache_file().read_text()).get(task)
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != key:
        return None
    try:
        age_days = (time.time() - float(entry["when"])) / 86400
        bars = Bars(
            Timing(**entry["eager"]), Timing(**entry["solution"]), entry.get("roofline_s"),
            str(entry["gpu"]), str(entry["measured"]),
        )  # fmt: skip
    except (KeyError, TypeError, ValueError):
        return None
    good = all(0 < t.seconds < 3600 and t.spread >= 0 for t in (bars.eager, bars.solution))
    return bars if good and 0 <= age_days < CACHE_DAYS else None


def write_bars(task: str, key: str, bars: Bars) -> None:
    path = _cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with cache_lock("speed-bars-file"):
        try:
            table = json.loads(path.read_text())
            table = table if isinstance(table, dict) else {}
        except (OSError, ValueError):
            table = {}
        entry = asdict(bars)
        table[task] = {**entry, "key": key, "when": time.time()}
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(json.dumps(table, indent=1, sort_keys=True))
        os.replace(tmp, path)


@contextlib.contextmanager
def cache_lock(name: str):
    """One holder at a time of ``name`` on this machine, across threads and processes: what is measured
    once per machine (time limits, speed bars) is measured by the first grader, and the others wait
    for it and read it."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
    with filelock.held(_locks_dir() / f"{safe}.lock"):
        yield
