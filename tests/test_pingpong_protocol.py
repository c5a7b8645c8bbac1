"""The ping-pong schedule of chapter 10's candidate GEMM (solutions/ws_compression.py,
`_pingpong_consumer`), as a protocol: one producer filling a ring of slots in tile order, two consumers
taking alternate tiles, mbarriers that keep only a parity bit. Run under many random interleavings:

- with the turn barriers (a consumer's main loop waits for the other's to have issued its last step),
  every step reads the data loaded for it and nothing deadlocks;
- without them, a consumer can wait on a slot's ready barrier two phases early: the parity matches a
  phase that completed long ago and the wait passes on a slot that holds other data (or none).

The model is the kernel's loop structure with its parity formulas; the kernel itself runs only on a
Hopper GPU (results/experiment_capstone_h200.json, checked against float64 there).
"""

from __future__ import annotations

import random

import pytest


class Bar:
    """An mbarrier of count 1: the number of completed phases; wait(p) passes when the latest completed
    phase has parity p (a fresh barrier acts as if a phase of parity 1 had completed)."""

    def __init__(self):
        self.completed = 0

    def passes(self, parity: int) -> bool:
        return self.completed % 2 != parity


def roles(tiles: int, k_steps: int, nb: int, turns: bool):
    """Generators of (op, args) for the producer and the two consumers, as the kernel's loops are written."""

    def producer():
        for count in range(tiles * k_steps):
            s = count % nb
            yield "wait", ("empty", s, ((count // nb) & 1) ^ 1)
            yield "load", (s, count)

    def consumer(role: int):
        for i, j in enumerate(range(role, tiles, 2)):  # this role's tiles of the program: j = 2 i + role
            count = j * k_steps
            if turns:
                yield "wait", ("turn", role, (i & 1) ^ (1 - role))
            for kk in range(k_steps):
                s = count % nb
                yield "wait", ("ready", s, (count // nb) & 1)
                yield "mma", (s, count)
                if kk > 0:
                    yield "arrive", ("empty", (count - 1) % nb)
                count += 1
            if turns:
                yield "arrive", ("turn", 1 - role)
            yield "arrive", ("empty", (count - 1) % nb)

    return {"producer": producer(), "consumer 0": consumer(0), "consumer 1": consumer(1)}


def run(tiles: int, k_steps: int, nb: int, turns: bool, seed: int) -> str:
    """One random interleaving; returns "ok", "deadlock" or what went wrong."""
    rng = random.Random(seed)
    bars = {("ready", s): Bar() for s in range(nb)} | {("empty", s): Bar() for s in range(nb)}
    bars |= {("turn", r): Bar() for r in range(2)}
    slot = [None] * nb  # the count whose data each slot holds
    live = roles(tiles, k_steps, nb, turns)
    pending = {name: next(gen) for name, gen in live.items()}
    done = []
    while pending:
        runnable = [n for n, (op, a) in pending.items() if op != "wait" or bars[a[0], a[1]].passes(a[2])]
        if not runnable:
            return "deadlock"
        name = rng.choice(runnable)
        op, a = pending[name]
        if op == "load":
            slot[a[0]] = a[1]
            bars["ready", a[0]].completed += 1  # expect + the bytes landed: the phase completes
        elif op == "mma":
            if slot[a[0]] != a[1]:
                return f"{name} multiplied step {a[1]} from slot {a[0]}, which holds step {slot[a[0]]}"
            done.append(a[1])
        elif op == "arrive":
            bars[a[0], a[1]].completed += 1
        try:
            pending[name] = next(live[name])
        except StopIteration:
            del pending[name]
    if sorted(done) != list(range(tiles * k_steps)):
        return f"steps multiplied: {sorted(done)}"
    return "ok"


@pytest.mark.parametrize("tiles, k_steps, nb", [(6, 4, 4), (7, 14, 4), (5, 2, 4), (8, 4, 5), (3, 1, 2)])
def test_with_turns_every_interleaving_tried_reads_its_own_data(tiles, k_steps, nb):
    outcomes = {run(tiles, k_steps, nb, turns=True, seed=seed) for seed in range(300)}
    assert outcomes == {"ok"}, outcomes


@pytest.mark.parametrize("tiles, k_steps, nb", [(6, 4, 4), (7, 14, 4)])
def test_without_turns_a_consumer_waits_two_phases_early(tiles, k_steps, nb):
    outcomes = [run(tiles, k_steps, nb, turns=False, seed=seed) for seed in range(300)]
    stale = [o for o in outcomes if "which holds" in o]
    assert stale, set(outcomes)  # the second consumer's first wait passes on a fresh or stale barrier
    assert "consumer 1 multiplied step" in stale[0] or "consumer 0 multiplied step" in stale[0]
