"""The ping-pong schedule of chapter 10's candidate GEMM (solutions/ws_compression.py,
`_pingpong_consumer`), as a protocol: one producer filling a ring of slots in tile order, two consumers
taking alternate tiles, mbarriers that keep only a parity bit. Run under many random interleavings:

- with the turn barriers (a consumer's main loop waits for the other's to have issued its last step),
  every step reads the data loaded for it and nothing deadlocks;
- without them, a consumer can wait on a slot's ready barrier two phases early: the parity matches a
  phase that completed long ago and the wait passes on a slot that holds other data (or none).

The one-launch variant (capstone_one_launch_kernel, scripts/capstone_variants.py) is modelled too, over
several programs with the user GEMM's tiles first and flags between the GEMMs: it finishes and reads its
own data; counting every tile's K steps alike, numbering the candidates first, or raising a flag before
the tile's last MMA completed each fails.

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


# ---------------------------------------------------------------------------------------------------
# The one-launch variant (scripts/capstone_variants.py, capstone_one_launch_kernel): several programs,
# each a producer and two ping-pong consumers, over one tile numbering: the user GEMM's tiles first,
# then the candidates'. A user tile's consumer raises the tile's flag after its last MMA completed (and
# its store); a candidate's consumer waits for its user tile's flag before its turn. Tiles of the two
# GEMMs have different K steps, so the ring's count at a tile's first step is the kernel's formula:
# min(j, n_user) * ku + max(j - n_user, 0) * kc, with n_user the program's user tiles, all first.


def kernel_count(j: int, n_user: int, ku: int, kc: int) -> int:
    return min(j, n_user) * ku + max(j - n_user, 0) * kc


def one_launch_roles(programs, user_tiles, cand_tiles, needs, ku, kc, nb, user_first=True, count=kernel_count,
                     raise_early=False):  # fmt: skip
    """Generators per program: tile t < user_tiles is user tile t (when user_first; else the candidates
    come first), a candidate tile c needs user tile needs[c]."""
    total = user_tiles + cand_tiles

    def kind(t):  # ("user", u) or ("cand", c)
        if user_first:
            return ("user", t) if t < user_tiles else ("cand", t - user_tiles)
        return ("cand", t) if t < cand_tiles else ("user", t - cand_tiles)

    def steps(t):
        return ku if kind(t)[0] == "user" else kc

    def producer(p):
        n = 0
        for t in range(p, total, programs):
            for _ in range(steps(t)):
                s = n % nb
                yield "wait", ((p, "empty", s), ((n // nb) & 1) ^ 1)
                yield "load", (s, n)
                n += 1

    def consumer(p, role):
        mine = list(range(p, total, programs))
        n_user = sum(kind(t)[0] == "user" for t in mine)  # the kernel: ceil(max(user_tiles - p, 0) / programs)
        for i, j in enumerate(range(role, len(mine), 2)):
            t = mine[j]
            what, index = kind(t)
            n = count(j, n_user, ku, kc)
            if what == "cand":
                yield "flag_wait", needs[index]
            yield "wait", ((p, "turn", role), (i & 1) ^ (1 - role))
            for kk in range(steps(t)):
                s = n % nb
                yield "wait", ((p, "ready", s), (n // nb) & 1)
                yield "mma", (s, n, t)
                yield "mma_wait", 1
                if kk > 0:
                    yield "arrive", (p, "empty", (n - 1) % nb)
                n += 1
            yield "arrive", (p, "turn", 1 - role)
            if what == "user" and raise_early:
                yield "raise", index  # before its last MMA completed: the bug this model must catch
            yield "mma_wait", 0
            yield "arrive", (p, "empty", (n - 1) % nb)
            if what == "user" and not raise_early:
                yield "raise", index

    live = {}
    for p in range(programs):
        live[p, "producer"] = producer(p)
        live[p, "consumer 0"] = consumer(p, 0)
        live[p, "consumer 1"] = consumer(p, 1)
    return live


def run_one_launch(seed: int, programs=3, users=4, cands=9, ku=3, kc=2, nb=3, **kwargs) -> str:
    """One random interleaving of the one-launch protocol over all programs: "ok", "deadlock" or what
    went wrong (a step read from a slot holding another, a user tile read before all its MMAs ended)."""
    rng = random.Random(seed)
    needs = sorted(rng.randrange(users) for _ in range(cands))  # user_of: sorted, any user count
    live = one_launch_roles(programs, users, cands, needs, ku, kc, nb, **kwargs)
    bars = {}
    slots = {p: [None] * nb for p in range(programs)}
    running = {name: [] for name in live if name[1] != "producer"}  # issued MMAs: (slot, count, tile)
    completed = {}  # tile -> its MMAs completed so far
    flags = set()
    user_done = set()  # user tiles whose every MMA has completed
    pending = {name: next(gen) for name, gen in live.items()}

    def bar(key):
        return bars.setdefault(key, Bar())

    def ready(name):
        op, a = pending[name]
        if op == "wait":
            return bar(a[0]).passes(a[1])
        if op == "flag_wait":
            return a in flags
        return op != "mma_wait" or len(running[name]) <= a

    while pending or any(running.values()):
        choices = [n for n in pending if ready(n)] + [("complete", n) for n, r in running.items() if r]
        if not choices:
            return "deadlock"
        name = rng.choice(choices)
        if name[0] == "complete":
            s, n, t = running[name[1]].pop(0)
            if slots[name[1][0]][s] != n:
                return f"program {name[1][0]}'s MMA of step {n} found slot {s} overwritten"
            completed[t] = completed.get(t, 0) + 1
            u = t if kwargs.get("user_first", True) else t - cands  # the user tile's number, if it is one
            if 0 <= u < users and completed[t] == ku:
                user_done.add(u)
            continue
        op, a = pending[name]
        p = name[0]
        if op == "load":
            slots[p][a[0]] = a[1]
            bar((p, "ready", a[0])).completed += 1
        elif op == "mma":
            if slots[p][a[0]] != a[1]:
                return f"program {p} multiplied step {a[1]} from slot {a[0]}, which holds step {slots[p][a[0]]}"
            running[name].append(a)
        elif op == "arrive":
            bar(a).completed += 1
        elif op == "raise":
            flags.add(a)
        elif op == "flag_wait" and a not in user_done:
            return f"a candidate read user tile {a} before all its MMAs had completed"
        try:
            pending[name] = next(live[name])
        except StopIteration:
            del pending[name]
    return "ok"


@pytest.mark.parametrize(
    "programs, users, cands, ku, kc, nb", [(3, 4, 9, 3, 2, 3), (2, 5, 6, 2, 4, 2), (4, 9, 4, 1, 3, 4)]
)
def test_one_launch_every_interleaving_tried_is_right_and_finishes(programs, users, cands, ku, kc, nb):
    outcomes = {run_one_launch(seed, programs, users, cands, ku, kc, nb) for seed in range(200)}
    assert outcomes == {"ok"}, outcomes


def test_one_launch_with_one_count_for_every_tile_reads_the_wrong_steps():
    """Counting every tile as a candidate's K steps (the ping-pong kernel's count) breaks the ring."""
    outcomes = {run_one_launch(seed, count=lambda j, n_user, ku, kc: j * kc) for seed in range(50)}
    assert any("which holds step" in o or o == "deadlock" for o in outcomes), outcomes


def test_one_launch_with_the_candidates_first_can_hang():
    """Candidate tiles numbered before the user tiles: a program's candidate waits, before its turn, on a
    user tile that a later tile of its own program (or one stuck behind it) has to compute."""
    outcomes = {run_one_launch(seed, programs=2, users=2, cands=6, user_first=False) for seed in range(50)}
    assert "deadlock" in outcomes and outcomes <= {"ok", "deadlock"}, outcomes


def test_one_launch_with_the_flag_raised_before_the_last_mma_is_caught():
    outcomes = {run_one_launch(seed, raise_early=True) for seed in range(200)}
    assert any("before all its MMAs had completed" in o for o in outcomes), outcomes
