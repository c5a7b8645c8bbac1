"""Why the grader's time for a kernel reads above ``course_lib bench``'s, on one machine, in one run.

On an H100 (results/attention_h100_2026-12-05/seventh_run) the grader timed ws_attention's solution at
6946 us a call and SDPA at 6910, where ``course_lib bench`` on the same machine read 6627-6678 and 6810: 4%
and 1.5% more. The two clocks differ in three ways, and this script times each way on the same inputs in one
process, with the GPU's SM clock, power and throttle reasons sampled beside it (nvidia-smi, every ~0.1 s):

* ``bench``: CUDA events around each call, L2 flushed by a read before each, 25 ms of warm-up and 100 ms of
  calls: short bursts, a pause (the flush) between calls;
* ``windows``: what the grader does in its worker, R calls back to back timed by the host's clock, R by the
  grader's own rule (``tiers.plan``, ``tiers.grow``: a window of about 0.1 s, fastest of 7 after up to 4
  uncounted), no flush, seconds of sustained load;
* ``sustained``: CUDA events around each of 2 s of back-to-back calls, to see whether a call slows as the
  load goes on (clocks falling under the power limit), and ``bench`` again at once after it, GPU hot.

Each kernel is timed after 3 s idle, so that it starts from the same state. The grader's own path
(``isolation.time_file``: a worker process, the launcher's guard on one call a window) is timed last.

    PYTHONPATH=. python scripts/timing_gap.py --out results/.../experiment_timing_gap.json [--task ws_attention]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import threading
import time
from pathlib import Path

import course_lib  # noqa: F401  (sets up GPU mode)
import torch
from course_lib import runtime, sources, tasks, timing
from course_lib.grader import isolation, limits, tiers
from course_lib.grader import make_worker

FIELDS = ["clocks.sm", "power.draw", "temperature.gpu", "clocks_event_reasons.active"]
OLD_FIELDS = ["clocks.sm", "power.draw", "temperature.gpu", "clocks_throttle_reasons.active"]


class Sampler:
    """nvidia-smi's SM clock, power, temperature and throttle reasons, about every ``every`` seconds, stamped
    with this process's time.time() (the phases are stamped with the same clock)."""

    def __init__(self, every: float = 0.1):
        self.every, self.rows, self._stop = every, [], threading.Event()
        self.fields = FIELDS if self._query(FIELDS) else OLD_FIELDS
        self.thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _query(fields):
        cmd = ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", "-i", "0"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    def _run(self):
        while not self._stop.is_set():
            stamp = time.time()
            out = self._query(self.fields)
            if out:
                self.rows.append([round(stamp, 3), *[v.strip() for v in out.split(",")]])
            self._stop.wait(self.every)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join(timeout=15)


def _timed(call, reps: int) -> float:
    """Seconds for ``reps`` calls back to back and a synchronize, by the host's clock: one of the grader's
    windows (its worker's ``_timed_calls``), less the message's cost."""
    began = time.perf_counter()
    for _ in range(reps):
        call()
    torch.cuda.synchronize()
    return time.perf_counter() - began


def warmed(call) -> float:
    """One uncounted call (compiling what it needs, as the grader's worker does in its ``speed`` step), then
    one call's time by the host's clock, a synchronize included: the first call, which plans what follows."""
    call()
    torch.cuda.synchronize()
    return _timed(call, 1)


def windows(call) -> list[dict]:
    """The grader's clock in this process (``isolation.time_calls``): R calls back to back and a synchronize,
    timed by the host, R planned by the grader's own rule: ``tiers.settled_first`` and ``tiers.plan`` from
    the first call, ``tiers.grow`` over up to ``tiers.WARM_WINDOWS`` uncounted windows, then the counted
    windows (``tiers.WINDOWS`` of R calls, or a slow call's three of one). Only the counted ones are returned."""
    first = tiers.settled_first(warmed(call), lambda: _timed(call, 1))
    reps_plan = tiers.plan(first)
    if first < tiers.SLOW_CALL_S:
        reps = reps_plan[0]
        for _ in range(tiers.WARM_WINDOWS):
            if (grown := tiers.grow(reps, _timed(call, reps))) == reps:
                break
            reps = grown
        reps_plan = [reps] * tiers.WINDOWS
    out = []
    for reps in reps_plan:
        stamp = time.time()
        seconds = _timed(call, reps)
        out.append({"t": round(stamp, 3), "reps": reps, "ms_per_call": seconds / reps * 1e3})
    return out


def sustained(call, seconds: float = 2.0) -> list[dict]:
    """CUDA events around each of ``seconds`` of back-to-back calls (no flush, nothing between them)."""
    n = max(10, int(seconds / warmed(call)))
    events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    stamp = time.time()
    events[0].record()
    for i in range(n):
        call()
        events[i + 1].record()
    torch.cuda.synchronize()
    per = [events[i].elapsed_time(events[i + 1]) for i in range(n)]
    elapsed = 0.0
    rows = []
    for i, ms in enumerate(per):
        rows.append({"t": round(stamp + elapsed / 1e3, 3), "i": i, "ms": ms})
        elapsed += ms
    return rows


def summary(rows: list[dict], key: str) -> dict:
    values = sorted(r[key] for r in rows)
    return {"min": values[0], "median": values[len(values) // 2], "max": values[-1], "n": len(values)}


def time_kernel(label: str, call, phases: list) -> dict:
    def phase(name, run):
        stamp = time.time()
        value = run()
        phases.append({"kernel": label, "phase": name, "t0": round(stamp, 3), "t1": round(time.time(), 3)})
        return value

    time.sleep(3.0)  # idle: every kernel starts from the same state
    first = phase("bench", lambda: timing.bench(call))
    win = phase("windows", lambda: windows(call))
    hot = phase("bench after windows", lambda: timing.bench(call))
    long = phase("sustained", lambda: sustained(call))
    hot2 = phase("bench after sustained", lambda: timing.bench(call))
    best = min(r["ms_per_call"] for r in win)
    head, tail = long[: max(1, len(long) // 10)], long[-max(1, len(long) // 10) :]
    row = {
        "bench_ms": first.median_ms,
        "bench_method": first.method,
        "windows": win,
        "windows_best_ms": best,
        "bench_after_windows_ms": hot.median_ms,
        "sustained_first_tenth_ms": summary(head, "ms"),
        "sustained_last_tenth_ms": summary(tail, "ms"),
        "sustained": long,
        "bench_after_sustained_ms": hot2.median_ms,
    }
    print(
        f"{label:<12} bench {first.median_ms:.3f} ms | windows best {best:.3f} | bench after {hot.median_ms:.3f} | "
        f"sustained first tenth {row['sustained_first_tenth_ms']['median']:.3f}, last tenth "
        f"{row['sustained_last_tenth_ms']['median']:.3f} | bench after {hot2.median_ms:.3f}",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--task", default="ws_attention")
    parser.add_argument("--no-grader", action="store_true", help="leave out the grader's own path")
    args = parser.parse_args()
    timing._require_gpu()
    spec = tasks.get(args.task)
    case = spec.timed_case()
    _, entry = sources.load_file(sources.task_path(spec.name, "solutions"), spec.entry)
    inputs = spec.make_inputs(case, torch.Generator(device="cuda").manual_seed(0))
    ref_inputs = {k: v for k, v in inputs.items() if k not in spec.outputs}
    baseline = spec.baseline or spec.reference
    kernels = {"solution": lambda: entry(**inputs), "torch_eager": lambda: baseline(**ref_inputs)}
    phases: list = []
    data: dict = {"meta": {"gpu": runtime.gpu_info().name, "versions": runtime.versions(),
                           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                           "task": spec.name, "case": case.describe()}}  # fmt: skip
    with Sampler() as sampler:
        data["kernels"] = {label: time_kernel(label, call, phases) for label, call in kernels.items()}
        for held in (kernels, inputs, ref_inputs):  # the grader's worker needs the GPU's memory
            held.clear()
        torch.cuda.empty_cache()
        if not args.no_grader:
            stamp = time.time()
            worker = make_worker(sources.resolve("solutions"), sandboxed=None)
            timed = isolation.time_reference(spec, sources.resolve("solutions"), worker, limits.GENEROUS)
            phases.append(
                {"kernel": "grader", "phase": "time_reference", "t0": round(stamp, 3), "t1": round(time.time(), 3)}
            )
            data["grader"] = {
                name: {"ms": t.seconds * 1e3, "spread": t.spread, "calls": t.calls} for name, t in timed.items()
            }
            print("grader      " + " | ".join(f"{k} {v['ms']:.3f} ms" for k, v in data["grader"].items()), flush=True)
    data["phases"] = phases
    data["samples"] = {"fields": ["t", *sampler.fields], "rows": sampler.rows}
    for p in phases:  # each phase's SM clocks and power, from the samples inside it
        inside = [r for r in sampler.rows if p["t0"] <= r[0] <= p["t1"]]
        clocks = [float(r[1]) for r in inside if r[1].replace(".", "").isdigit()]
        power = [float(r[2]) for r in inside if r[2].replace(".", "").isdigit()]
        p["sm_mhz"] = [min(clocks), max(clocks)] if clocks else None
        p["power_w"] = [min(power), max(power)] if power else None
        p["reasons"] = sorted({r[4] for r in inside})
        print(
            f"  {p['kernel']:<12} {p['phase']:<22} SM {p['sm_mhz']} MHz, power {p['power_w']} W, reasons {p['reasons']}"
        )
    print(f"tiers' windows: {tiers.WINDOWS} of ~{tiers.WINDOW_S} s; this script's: the same (tiers.plan, tiers.grow)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(data, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
