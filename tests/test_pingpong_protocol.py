"""The ping-pong schedule of chapter 10's candidate GEMM (solutions/ws_compression.py,
`_pingpong_consumer`), as a protocol: one producer filling a ring of slots in tile order, two consumers
taking alternate tiles, mbarriers that keep only a parity bit. Run under many random interleavings:

- with the turn barriers (a consumer's main loop waits for the other's to have issued its last step),
  every step reads the data loaded for it and nothing deadlocks;
- without them, a consumer can wait on a slot's ready barrier two phases early: the parity matches a
  phase that completed long ago and the wait passes on a slot that holds other data (or none).

The model is the kernel's loop structure with its parity formulas and asynchronous wgmma (an issued
MMA reads its slot until it completes; warpgroup_mma_wait(n) waits until at most n are running). It
leaves out the output tiles and their TMA stores. The kernel itself runs only on a Hopper GPU
(results/experiment_capstone_h200.json, checked against float64 there).
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
                yield "mma", (s, count)  # issued: it reads the slot until it completes
                yield "mma_wait", 1  # warpgroup_mma_wait(num_outstanding=1)
                if kk > 0:
                    yield "arrive", ("empty", (count - 1) % nb)
                count += 1
            if turns:
                yield "arrive", ("turn", 1 - role)
            yield "mma_wait", 0
            yield "arrive", ("empty", (count - 1) % nb)

    return {"producer": producer(), "consumer 0": consumer(0), "consumer 1": consumer(1)}


def run(tiles: int, k_steps: int, nb: int, turns: bool, seed: int, make_roles=roles) -> str:
    """One random interleaving; returns "ok", "deadlock" or what went wrong. An issued MMA completes at a
    moment the scheduler picks (the oldest of its warpgroup first); it must find its step's data in
    its slot both when it is issued and when it completes."""
    rng = random.Random(seed)
    bars = {("ready", s): Bar() for s in range(nb)} | {("empty", s): Bar() for s in range(nb)}
    bars |= {("turn", r): Bar() for r in range(2)}
    slot = [None] * nb  # the count whose data each slot holds
    live = make_roles(tiles, k_steps, nb, turns)
    pending = {name: next(gen) for name, gen in live.items()}
    running = {"consumer 0": [], "consumer 1": []}  # issued MMAs not completed: (slot, count)
    done = []

    def ready(name):
        op, a = pending[name]
        if op == "wait":
            return bars[a[0], a[1]].passes(a[2])
        return op != "mma_wait" or len(running[name]) <= a

    while pending or any(running.values()):
        choices = [n for n in pending if ready(n)] + [("complete", n) for n, r in running.items() if r]
        if not choices:
            return "deadlock"
        name = rng.choice(choices)
        if isinstance(name, tuple):  # an MMA completes
            s, count = running[name[1]].pop(0)
            if slot[s] != count:
                return f"{name[1]}'s MMA of step {count} found slot {s} overwritten with step {slot[s]}"
            done.append(count)
            continue
        op, a = pending[name]
        if op == "load":
            slot[a[0]] = a[1]
            bars["ready", a[0]].completed += 1  # expect + the bytes landed: the phase completes
        elif op == "mma":
            if slot[a[0]] != a[1]:
                return f"{name} multiplied step {a[1]} from slot {a[0]}, which holds step {slot[a[0]]}"
            running[name].append(a)
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


def test_a_slot_released_before_its_mma_completed_is_caught():
    """The Hopper release bug of chapter 09, in the ping-pong schedule: releasing the slot right after
    issuing its wgmma lets the producer overwrite data the MMA is still reading."""

    def early_release(tiles, k_steps, nb, turns):
        made = roles(tiles, k_steps, nb, turns)

        def wrap(gen):
            for op, a in gen:
                if op == "arrive" and a[0] == "empty":
                    continue  # the release moves: right after the issue
                yield op, a
                if op == "mma":
                    yield "arrive", ("empty", a[0])

        return {name: (gen if name == "producer" else wrap(gen)) for name, gen in made.items()}

    outcomes = {run(6, 4, 4, turns=True, seed=seed, make_roles=early_release) for seed in range(300)}
    assert any("overwritten" in o for o in outcomes), outcomes
