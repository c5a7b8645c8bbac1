"""Chapter 03: dynamic compilation. An autotuned kernel whose key does not re-tune on every length."""

from __future__ import annotations

import torch

from .. import runtime
from ..compilation import autotuners_in, describe_config
from . import Case, SpeedTiers, TaskSpec, elementwise_cases, nbytes, register
from .ch02_first_kernel import scaled_add_inputs, scaled_add_reference  # the same alpha * x + y

# Lengths the re-tuning check launches with: five in one power-of-two class (4097 to 8192), then one
# 4x longer, in a class no graded case visits (their lengths: 1, 3, 1000, 1537, 4097 and the large
# one). Kept small: in the interpreter every new key runs every config once.
SAME_CLASS_SIZES = (5000, 5003, 5031, 5064, 5100)
OTHER_CLASS_SIZE = 20_011
PERF_SIZE = 16 * 2**20 + 5  # three fp32 vectors of 64 MB: 192 MB, over 3x the 60 MB L2 of an H200
PERF_TOLERANCE = 0.10  # the learner's launcher within 10% of the fastest config forced by hand


def _inputs_of_length(n: int, seed: int) -> dict:
    gen = torch.Generator(device=runtime.device()).manual_seed(seed)
    return scaled_add_inputs(Case((n,), torch.float32, "extra"), gen)


def _cache_entries(tuners: dict) -> int:
    return sum(len(t.cache) for t in tuners.values())


def probe_autotune(module, entry) -> dict:
    """Facts about the learner's autotuners, gathered in the worker (plain data; judged by
    ``judge_autotune`` in the grader's protected process): their configs and keys, how often the
    cache grew over lengths of one size class and of another, and on a GPU the time of each config."""
    tuners = autotuners_in(module)
    facts = {"tuners": {name: {"configs": len(t.configs), "keys": list(t.keys)} for name, t in tuners.items()}}
    if not tuners or any(len(t.configs) < 2 for t in tuners.values()):
        return facts
    before = _cache_entries(tuners)
    for i, n in enumerate(SAME_CLASS_SIZES):
        entry(**_inputs_of_length(n, seed=i))
    facts["grew_same_class"] = _cache_entries(tuners) - before
    before = _cache_entries(tuners)
    entry(**_inputs_of_length(OTHER_CLASS_SIZE, seed=len(SAME_CLASS_SIZES)))
    facts["grew_other_class"] = _cache_entries(tuners) - before
    if runtime.is_gpu() and facts["grew_same_class"] <= 1 and facts["grew_other_class"]:
        facts["speed"] = _speed_rows(tuners, entry)
    return facts


def _speed_rows(tuners: dict, entry) -> dict:
    """Time the launcher as the learner wrote it, and the same launcher with each config forced."""
    from ..timing import bench

    inputs = _inputs_of_length(PERF_SIZE, seed=99)
    call = lambda: entry(**inputs)
    rows = []
    for name, tuner in tuners.items():
        configs, cache = tuner.configs, tuner.cache
        try:
            for config in configs:
                tuner.configs, tuner.cache = [config], {}  # one config: the autotuner just uses it
                rows.append([f"{name}: {describe_config(config)}", bench(call).median_ms])
        finally:
            tuner.configs, tuner.cache = configs, cache
    return {"forced": rows, "tuned_ms": bench(call).median_ms}


def judge_autotune(facts: dict) -> list[tuple[bool, str, list[str]]]:
    tuners = dict(facts.get("tuners") or {})
    if not tuners:
        return [
            (
                False,
                "no @triton.autotune kernel was found in the file: wrap the kernel with "
                "triton.autotune(configs=[...], key=[...]), or write @triton.autotune(...) above @triton.jit",
                [
                    "The autotuner is the point of this task: it tries each config and keeps the fastest.",
                    "A plain @triton.jit kernel with one fixed BLOCK_SIZE computes the right values but tunes nothing.",
                ],
            )
        ]
    found = []
    for name, tuner in tuners.items():
        if int(tuner.get("configs", 0)) < 2:
            found.append(
                (
                    False,
                    f"`{name}` is autotuned over {int(tuner.get('configs', 0))} config: give it at least 2 to choose "
                    "from",
                    [
                        "With a single config there is nothing to compare: Triton skips the timing and uses it.",
                        "Add configs that differ in BLOCK_SIZE and num_warps, e.g. 256/2 warps up to 4096/8 warps.",
                    ],
                )
            )
    if found:
        return found
    keys = ", ".join(f"`{name}`: key={list(t.get('keys', []))}" for name, t in tuners.items())
    grew = int(facts.get("grew_same_class", 0))
    if grew > 1:
        return [
            (
                False,
                f"the autotuner re-tuned {grew} times for {len(SAME_CLASS_SIZES)} lengths between "
                f"{SAME_CLASS_SIZES[0]} and {SAME_CLASS_SIZES[-1]} ({keys})",
                [
                    "The autotuner times every config again for each new value of its key. Keyed on the exact",
                    "length, every new length pays for a full round of timing (on a GPU, each config is run",
                    "dozens of times) before the launch you asked for. Pass a size class as an extra argument,",
                    "e.g. triton.next_power_of_2(n_elements), and key on it: lengths in one class share a config.",
                ],
            )
        ]
    if not int(facts.get("grew_other_class", 0)):
        return [
            (
                False,
                f"the key does not follow the size: lengths {SAME_CLASS_SIZES[-1]} and {OTHER_CLASS_SIZE}, "
                f"{OTHER_CLASS_SIZE / SAME_CLASS_SIZES[-1]:.0f}x apart, share one tuning ({keys})",
                [
                    "A key that does not change with the size tunes once, for whatever length comes first,",
                    "and uses that config for every other length. Key on a size class that changes when the",
                    "length changes by a power of two, e.g. triton.next_power_of_2(n_elements).",
                ],
            )
        ]
    speed = facts.get("speed")
    if speed:
        return [_judge_speed(speed)]
    return [(True, "the key re-tunes once per size class (speed is checked on a GPU)", [])]


def _judge_speed(speed: dict) -> tuple[bool, str, list[str]]:
    rows = [(str(label), float(ms)) for label, ms in speed["forced"]]
    tuned_ms = float(speed["tuned_ms"])
    best_label, best_ms = min(rows, key=lambda r: r[1])
    ratio = tuned_ms / best_ms
    details = [f"fp32, {PERF_SIZE:,} elements; median of course_lib.timing.bench, L2 flushed:"]
    details += [f"  forced {label:<52} {ms * 1e3:8.1f} us" for label, ms in rows]
    details.append(f"  your launcher, autotuned {'':<43}{tuned_ms * 1e3:8.1f} us ({ratio:.2f}x the best)")
    ok = ratio <= 1 + PERF_TOLERANCE
    summary = (
        f"the autotuned launcher runs at {ratio:.2f}x the time of its best config ({best_label})"
        if ok
        else f"the autotuned launcher takes {ratio:.2f}x the time of its best config ({best_label}); "
        f"within {1 + PERF_TOLERANCE:.2f}x is expected"
    )
    return ok, summary, details


register(
    TaskSpec(
        name="autotuned_axpy",
        chapter="03",
        title="alpha * x + y, autotuned, with a key that re-tunes once per size class",
        entry="autotuned_axpy",
        make_inputs=scaled_add_inputs,
        reference=scaled_add_reference,
        cases=elementwise_cases,
        bytes_moved=lambda case: nbytes(case, 3),
        flops=lambda case: 2 * case.shape[0],
        bench_cases=[Case((PERF_SIZE,), torch.float32, "bench")],
        speed=SpeedTiers(case=Case((4 * PERF_SIZE,), torch.float32, "timed")),
        probe=f"{__name__}:probe_autotune",
        judge=judge_autotune,
        hints=[
            "Start from scaled_add: the kernel body is the same. What changes is around it: the kernel "
            "is wrapped in the autotuner, axpy_kernel = triton.autotune(configs=[triton.Config("
            "{'BLOCK_SIZE': 256}, num_warps=2), ...], key=[...])(axpy_kernel) (or @triton.autotune(...) "
            "written above @triton.jit), and the launcher no longer passes BLOCK_SIZE: the autotuner does.",
            "The grid must follow the chosen BLOCK_SIZE, so make it a function of the meta-parameters: "
            "grid = lambda meta: (triton.cdiv(n_elements, meta['BLOCK_SIZE']),).",
            "key=['n_elements'] re-tunes for every new length: each new value of the key times every "
            "config again. Add a kernel argument such as size_class, pass "
            "triton.next_power_of_2(n_elements) for it, and key on it: all lengths from 4097 to 8192 "
            "then share one tuning.",
        ],
    )
)
