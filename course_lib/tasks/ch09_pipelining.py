"""Chapter 09: producer/consumer pipelining. The ring of a warp-specialized GEMM, with mbarriers.

The task ``ring_pipeline`` is no kernel: the learner writes the producer (TMA loads) and the
consumer (wgmma) of a GEMM's main loop as Python generators that yield the operations of
``course_lib.barriers``, an emulator of Hopper's mbarrier, TMA and wgmma semantics.

Sealing: in the worker, ``ring_trace`` (given in the task file) runs the learner's generators under
the emulator and returns a plain JSON trace: every operation each role yielded and every scheduling
decision. Here, in the grader's process, ``barriers.replay`` runs a fresh emulator on that trace,
makes every scheduling decision itself from the case's seed and schedule, rejects a trace that says
otherwise at any step, and judges every rule itself. The worker's own verdict is never asked for.
"""

from __future__ import annotations

import torch

from .. import barriers
from . import Case, TaskSpec, register

FUNCTION = "ring_trace"
ORDER = {
    "random": "seeded random order",
    "late": "loads and MMAs as late as allowed",
    "eager": "loads and MMAs as early as possible",
}

# (k_steps, num_buffers, schedule): one and two buffers, k_steps below, at and off multiples of the
# ring, and the adversarial order (the roles run as far as they can before anything completes).
CASES = [
    (8, 3, "random"),
    (8, 3, "late"),
    (4, 1, "late"),
    (3, 1, "random"),
    (7, 2, "late"),
    (5, 2, "eager"),
    (9, 2, "random"),
    (10, 4, "random"),
    (3, 4, "late"),
    (11, 3, "late"),
    (6, 3, "eager"),
]


def _case(k_steps: int, num_buffers: int, schedule: str) -> Case:
    label = f"{num_buffers} buffer{'s' * (num_buffers != 1)}, {k_steps} steps, {ORDER[schedule]}"
    params = (("k_steps", k_steps), ("num_buffers", num_buffers), ("schedule", schedule))
    return Case((), torch.float32, label, params=params)


def _cases(mode: str) -> list[Case]:
    return [_case(*c) for c in CASES]


def _question(case: Case, seed: int) -> dict:
    """The keyword arguments of ring_trace for one case. A hidden case (COURSE_HIDDEN_CASES) gives
    [k_steps, num_buffers] as its shape and the schedule as its label:
    {"ring_pipeline": [{"shape": [13, 3], "label": "late"}]}."""
    options = case.options
    if "k_steps" in options:
        k_steps, num_buffers, schedule = options["k_steps"], options["num_buffers"], options["schedule"]
    else:
        if len(case.shape) != 2:
            raise ValueError("a ring_pipeline case needs a shape of two numbers: [k_steps, num_buffers]")
        k_steps, num_buffers = (int(v) for v in case.shape)
        schedule = case.label if case.label in barriers.SCHEDULES else "late"
    return {"k_steps": k_steps, "num_buffers": num_buffers, "seed": int(seed), "schedule": schedule}


def _make_inputs(case: Case, gen: torch.Generator) -> dict:
    seed = int(torch.randint(0, 2**31 - 1, (), generator=gen))
    return _question(case, seed)


def _reference(k_steps, num_buffers, seed, schedule):
    """What the accumulator must hold: the tiles of every k once, in order."""
    return list(range(k_steps))


def _call_case(case: Case, seed: int) -> tuple[str, dict]:
    return FUNCTION, _question(case, seed)


def _judge_call(case: Case, function: str, kwargs: dict, reply: dict) -> tuple[bool, str, list[str]]:
    """Replay the worker's trace in a fresh emulator here; only this replay's verdict counts."""
    if reply.get("missing"):
        return False, f"ring_pipeline.py has no function `{FUNCTION}` (it is given in the exercise: keep it)", []
    if "raised" in reply:
        return False, f"running your roles raised {reply['raised']}", [str(line) for line in reply.get("frames", [])]
    outcome = barriers.replay(reply.get("value"), **kwargs)
    if outcome.ok:
        return True, "", []
    details = list(outcome.details)
    if outcome.rule == "inconsistent":
        details.append(f"{FUNCTION} must return what barriers.record returns for your producer and consumer, unchanged")
    arguments = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    details.append(f"replay it in a notebook: barriers.simulate(producer, consumer, {arguments})")
    return False, outcome.summary, details


register(
    TaskSpec(
        name="ring_pipeline",
        chapter="09",
        title="A producer/consumer ring with mbarriers (warp specialization, emulated)",
        entry=FUNCTION,
        make_inputs=_make_inputs,
        reference=_reference,
        cases=_cases,
        outputs=(),
        bytes_moved=None,  # an emulated protocol, not a kernel: nothing to benchmark
        flops=None,
        call_case=_call_case,
        judge_call=_judge_call,
        timeout_s=60.0,
        hints=[
            "The slot and round of step k: s = k % num_buffers, r = k // num_buffers. Each role loops over k "
            "and yields, in order: the producer Wait(empty[s], ...), ExpectTx(ready[s], STAGE_BYTES), "
            "Load(k, slot=s, bar=ready[s]); the consumer Wait(ready[s], ...), Mma(slot=s), MmaWait(...), "
            "Arrive(empty[s]).",
            "A wait names a parity, not a phase number: Wait(bar, phase=p) passes once the barrier's latest "
            "completed phase has parity p. ready[s] completes once per round, so in round r the consumer "
            "waits with phase r % 2. Waiting with 0 every round passes in round 1 on round 0's completion, "
            "before round 1's tile has landed.",
            "The producer's first wait on each empty[s] must pass before the consumer has released anything. "
            "A fresh barrier behaves as if a phase of parity 1 had just completed, so wait with the opposite "
            "parity: Wait(empty[s], phase=(r % 2) ^ 1) passes at once in round 0 and, in round r, waits for "
            "the consumer's release of round r - 1. (Or the consumer arrives once on every empty[s] before "
            "its loop, and the producer waits with r % 2.)",
            "Mma is asynchronous, like warpgroup_mma(is_async=True): it still reads slot s after it is issued. "
            "Release the slot only after MmaWait(pending=0), which waits until no MMA is running. "
            "MmaWait(pending=1) leaves the newest MMA, the one reading slot s, running: arriving on empty[s] "
            "then lets the producer overwrite the tile under it (a real Hopper bug). Before returning, no MMA "
            "may be left running.",
        ],
    )
)
