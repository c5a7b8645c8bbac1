"""An emulator of Hopper's mbarriers, TMA loads and wgmma, for chapter 09's ring exercise.

A warp-specialized GEMM's main loop runs two roles over a ring of ``num_buffers`` shared-memory
slots: a *producer* (one warp issuing TMA loads) and a *consumer* (a warpgroup issuing wgmma). In
the exercise each role is a Python generator that yields the operations below, which mirror Gluon's
``mbarrier.wait / expect / arrive``, ``tma.async_copy_global_to_shared``, ``warpgroup_mma`` and
``warpgroup_mma_wait``. This module runs the two generators interleaved, in an order a seeded
scheduler picks, and checks every rule of the protocol.

The operations
--------------
``Wait(bar, phase)``      block until ``bar`` has completed the phase of parity ``phase`` (mbarrier.wait)
``ExpectTx(bar, nbytes)`` one arrival on ``bar``, and ``nbytes`` more bytes that must land before its
                          phase completes (mbarrier.expect: ``mbarrier.arrive.expect_tx`` in PTX)
``Load(k, slot, bar)``    an asynchronous TMA copy of step k's A and B tiles (``STAGE_BYTES`` bytes)
                          into ``slot``; when the bytes land they count against ``bar``'s expected bytes
``Mma(slot)``             an asynchronous wgmma: acc += A_k @ B_k, read from ``slot``
``MmaWait(pending)``      block until at most ``pending`` MMAs are still running (warpgroup_mma_wait)
``Arrive(bar)``           one arrival on ``bar`` (mbarrier.arrive)

Every barrier of the ring is initialised with count 1: ``ready[s]``'s phase completes when the
producer's ExpectTx has arrived *and* the load's bytes have landed; ``empty[s]``'s when the consumer
arrives after it is done with the slot.

Phases and parity (as on the hardware)
--------------------------------------
A barrier counts the phases it completes: 0, 1, 2, ... A wait does not name a phase number but a
parity bit: ``Wait(bar, phase=p)`` passes when the *latest completed* phase has parity ``p``, that is
when the number of completed phases ``c`` has ``c % 2 != p``; otherwise it blocks until the next
completion. A fresh barrier (``c = 0``) behaves as if a phase of parity 1 had just completed, so
``Wait(bar, 1)`` passes at once and ``Wait(bar, 0)`` waits for the first completion.

Slot ``s`` is used for the i-th time (round ``i``) at ``k = i * num_buffers + s``:

* the consumer waits for the i-th completion of ``ready[s]``: ``Wait(ready[s], phase=i % 2)``;
* the producer, before round ``i``, needs the consumer's release of round ``i - 1``, the i-th
  completion of ``empty[s]``. In round 0 there is none: waiting with the *opposite* parity,
  ``Wait(empty[s], phase=(i % 2) ^ 1)``, passes at once on the fresh barrier and thereafter waits for
  exactly the release it needs. (The other usual trick: the consumer arrives once on every
  ``empty[s]`` before its loop, and the producer waits with ``phase=i % 2``.)

Parity is all the hardware keeps: a wait with the wrong bit either blocks forever (a deadlock) or
passes on an *older* completion and lets a role run ahead of the data.

What is checked
---------------
Beyond what the schedule happens to do, the emulator tracks what each role *knows*: a wait that
passes tells its role everything that happened before the phase it observed completed (the bytes
that landed, what the arriving role knew); ``MmaWait(pending=n)`` tells the consumer that every MMA
but the newest ``n`` has finished. The rules hold in every order, not only in the one that ran:

* **read of a buffer not yet filled**: the Mma of step k needs the consumer to know the load of k
  landed (a missing wait on ``ready[s]``, or one with the wrong phase);
* **overwrite of a buffer still in use**: the Load of step k into slot s (round >= 1) needs the
  producer to know the MMA of k - num_buffers has finished (a missing wait on ``empty[s]``);
* **early release**: ``Arrive(empty[s])`` before the consumer has issued the Mma for the tile it waited for;
* **release before the MMA finished** (the Hopper bug): ``Arrive(empty[s])`` while the MMA reading
  slot s may still be running, e.g. after ``MmaWait(pending=1)``: the producer then overwrites a
  tile wgmma is still reading;
* **wrong result**: every k multiplied exactly once, in order, from its own slot, all MMAs finished
  (``MmaWait(pending=0)``) before the consumer returns;
* **deadlock**: both roles blocked and nothing in flight to wake them.

Loads and MMAs complete later, when the scheduler decides: ``"random"`` (any enabled event, seeded),
``"late"`` (adversarial: the roles run as far as they can, loads and MMAs complete only when both
roles are blocked, in a seeded order: loads may land out of order, MMAs finish in issue order) and
``"eager"`` (each load and MMA completes as soon as it can).

Sealing: a trace, replayed
--------------------------
The grader runs the learner's generators only in its worker process: ``record`` runs them and
returns a plain JSON trace of every operation each role yielded and every scheduling decision.
The grader's own process hands that text to ``replay``, which runs a fresh emulator on the yielded
operations, makes every scheduling decision itself from the seed, checks that the trace says the same
at each step (a wait that could not have passed, a load that was not in flight, a different order:
the trace is rejected) and judges every rule itself. Nothing the worker computes is trusted.

In a notebook: ``simulate(producer, consumer, k_steps=8, num_buffers=3, schedule="late")`` runs both
roles here and returns the outcome with its timeline.
"""

from __future__ import annotations

import json
import numbers
import random
from dataclasses import dataclass, field

STAGE_BYTES = 2 * 128 * 64 * 2  # one k step: an A tile (128 x 64) and a B tile (64 x 128) in fp16, 32 KiB
SCHEDULES = ("random", "late", "eager")
ROLES = ("producer", "consumer")
TRACE_VERSION = 1
MAX_TRACE_CHARS = 4_000_000
MAX_STEPS, MAX_BUFFERS = 512, 16


def max_events(k_steps: int, num_buffers: int) -> int:
    """More events than any sensible protocol needs (about 16 per k step); past it the run stops."""
    return 200 + 40 * k_steps + 8 * num_buffers


# --------------------------------------------------------------------------------------------------
# what the roles yield


@dataclass(frozen=True)
class Bar:
    """A handle on one barrier of the ring: ``ready[s]`` or ``empty[s]``. It holds no state."""

    name: str
    index: int

    def __repr__(self) -> str:
        return f"{self.name}[{self.index}]"


@dataclass(frozen=True)
class Wait:
    bar: Bar
    phase: int

    def __str__(self) -> str:
        return f"Wait({self.bar!r}, phase={self.phase})"


@dataclass(frozen=True)
class ExpectTx:
    bar: Bar
    nbytes: int

    def __str__(self) -> str:
        return f"ExpectTx({self.bar!r}, {self.nbytes})"


@dataclass(frozen=True)
class Load:
    k: int
    slot: int
    bar: Bar

    def __str__(self) -> str:
        return f"Load({self.k}, slot={self.slot}, bar={self.bar!r})"


@dataclass(frozen=True)
class Mma:
    slot: int

    def __str__(self) -> str:
        return f"Mma(slot={self.slot})"


@dataclass(frozen=True)
class MmaWait:
    pending: int

    def __str__(self) -> str:
        return f"MmaWait(pending={self.pending})"


@dataclass(frozen=True)
class Arrive:
    bar: Bar
    count: int = 1

    def __str__(self) -> str:
        return f"Arrive({self.bar!r})" if self.count == 1 else f"Arrive({self.bar!r}, count={self.count})"


_OPS = {cls.__name__: cls for cls in (Wait, ExpectTx, Load, Mma, MmaWait, Arrive)}
_FIELDS = {
    "Wait": ("bar", "phase"),
    "ExpectTx": ("bar", "nbytes"),
    "Load": ("k", "slot", "bar"),
    "Mma": ("slot",),
    "MmaWait": ("pending",),
    "Arrive": ("bar", "count"),
}
END = None  # what a source returns when a role's generator has returned


def _plain_field(value):
    if type(value) is Bar:
        if type(value.name) is str and isinstance(value.index, numbers.Integral):
            return [value.name, int(value.index)]
        return {"bad": "Bar"}
    if isinstance(value, numbers.Integral):
        return int(value)
    return {"bad": type(value).__name__}


def encode(op) -> dict:
    """An operation as plain JSON data (anything else a role yields is named by its type)."""
    name = type(op).__name__
    if _OPS.get(name) is not type(op):
        return {"op": "?", "type": name}
    return {"op": name, **{f: _plain_field(getattr(op, f)) for f in _FIELDS[name]}}


class Violation(Exception):
    """A rule broken, or a trace that is not what the replay gives; ``rule`` names which."""

    def __init__(self, rule: str, summary: str, details: list[str] | None = None):
        super().__init__(summary)
        self.rule, self.summary, self.details = rule, summary, list(details or [])


def decode(data, role: str, num_buffers: int):
    """The operation that ``encode`` made, checked field by field; Violation('protocol') otherwise."""
    ops = "Wait, ExpectTx, Load, Mma, MmaWait or Arrive from course_lib.barriers"
    if not isinstance(data, dict) or data.get("op") not in _FIELDS:
        what = data.get("type", "something else") if isinstance(data, dict) else "something else"
        what = "None" if what == "NoneType" else f"a {what}"
        raise Violation("protocol", f"operation out of protocol: the {role} yielded {what}; a role yields {ops}")
    name = data["op"]
    fields = _FIELDS[name]
    if set(data) != {"op", *fields}:
        raise Violation("protocol", f"operation out of protocol: a {name} with fields {sorted(set(data) - {'op'})}")
    values = {}
    for f in fields:
        v = data[f]
        if f == "bar":
            ok = (
                isinstance(v, list)
                and len(v) == 2
                and v[0] in ("ready", "empty")
                and type(v[1]) is int
                and 0 <= v[1] < num_buffers
            )
            if not ok:
                raise Violation(
                    "protocol",
                    f"operation out of protocol: the {role} yielded a {name} whose bar is not one of the ring's "
                    f"barriers (ready[s] or empty[s] for s in 0..{num_buffers - 1}, as handed to the role)",
                )
            values[f] = Bar(v[0], v[1])
        elif type(v) is not int:
            what = v.get("bad", "value") if isinstance(v, dict) else type(v).__name__
            raise Violation(
                "protocol", f"operation out of protocol: the {role} yielded a {name} whose {f} is a {what}, not an int"
            )
        else:
            values[f] = v
    return _OPS[name](**values)


# --------------------------------------------------------------------------------------------------
# the emulator


@dataclass
class _BarState:
    completed: int = 0  # phases completed so far
    pending: int = 1  # arrivals the current phase still needs (count = 1)
    tx: int = 0  # bytes the current phase still expects (negative: landed before they were expected)
    known: set = field(default_factory=set)  # what a wait that passes now learns
    phase_known: set = field(default_factory=set)  # released into the current phase, learned when it completes


@dataclass
class _Role:
    name: str
    pending: object = None  # the operation yielded and not yet run
    finished: bool = False
    known: set = field(default_factory=set)  # facts: "L3" (the load of k=3 landed), "M3" (the MMA of k=3 finished)
    issued: int = 0  # loads (producer) or MMAs (consumer) issued so far: the k it is at
    last_wait: dict = field(default_factory=dict)  # barrier -> (phase, completed phases when it passed)
    last_mma_wait: int | None = None  # pending= of the consumer's latest MmaWait since its latest Mma


@dataclass
class _LoadRec:
    k: int
    slot: int
    landed: bool = False


@dataclass
class _MmaRec:
    k: int
    slot: int
    read: int | None  # the step whose data the slot held when the MMA was issued (None: not landed)
    done: bool = False
    corrupted: bool = False  # a load into its slot was issued while it ran


@dataclass
class Outcome:
    """The verdict of one run: ``ok``, a one-line ``summary`` and ``details`` for a failure, the
    ``timeline`` (one line per event) and the events as plain data."""

    ok: bool
    summary: str
    details: list[str]
    timeline: list[str]
    events: list
    rule: str = ""

    def report(self) -> str:
        head = "OK: " + self.summary if self.ok else "FAIL: " + self.summary
        return "\n".join([head, *self.details])


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


class _Run:
    def __init__(self, k_steps: int, num_buffers: int, seed: int, schedule: str, claimed: list | None = None):
        for name, value, lo, hi in (("k_steps", k_steps, 1, MAX_STEPS), ("num_buffers", num_buffers, 1, MAX_BUFFERS)):
            if type(value) is not int or not lo <= value <= hi:
                raise ValueError(f"{name} must be an int from {lo} to {hi}, not {value!r}")
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, not {schedule!r}")
        if type(seed) is not int:
            raise ValueError(f"seed must be an int, not {seed!r}")
        self.K, self.NB, self.seed, self.schedule = k_steps, num_buffers, seed, schedule
        self.rng = random.Random(seed)
        self.bars = {Bar(n, i): _BarState() for n in ("ready", "empty") for i in range(num_buffers)}
        self.roles = {r: _Role(r) for r in ROLES}
        self.loads: list[_LoadRec] = []
        self.mmas: list[_MmaRec] = []
        self.slot_k: list[int | None] = [None] * num_buffers  # the latest step loaded into each slot
        self.slot_landed = [False] * num_buffers
        self.unreleased: list[int | None] = [None] * num_buffers  # step whose Mma read the slot, not yet released
        self.waited = [False] * num_buffers  # the consumer passed a wait on ready[s] since it last released s
        self.events: list = []
        self.timeline: list[str] = []
        self.claimed = claimed

    # ---- driving ---------------------------------------------------------------------------------

    def execute(self, source) -> Outcome:
        try:
            self._loop(source)
        except Violation as v:
            tail = self.timeline[-10:]
            details = list(v.details)
            if tail:
                details += [f"the last {len(tail)} events (of {len(self.timeline)}):", *(f"  {t}" for t in tail)]
            return Outcome(False, v.summary, details, self.timeline, self.events, v.rule)
        done = f"{self.K} steps through {_plural(self.NB, 'buffer')} in {len(self.timeline)} events"
        return Outcome(True, done, [], self.timeline, self.events)

    def _loop(self, source) -> None:
        limit = max_events(self.K, self.NB)
        while True:
            for name in ROLES:
                role = self.roles[name]
                if role.pending is None and not role.finished:
                    item = source(name)
                    if item is END:
                        self._emit(["r", name])
                        self._finish(role)
                    else:
                        self._emit(["y", name, item])
                        role.pending = decode(item, name, self.NB)
                        self._check_yield(role, role.pending)
            if all(r.finished for r in self.roles.values()):
                self._final()
                return
            if len(self.events) > limit:
                raise Violation(
                    "too many",
                    f"the roles issued more than {limit} operations for k_steps={self.K}: a loop that never ends, "
                    "or far more operations than the ring needs",
                )
            choices = self._choices()
            if not choices:
                raise self._deadlock()
            event = self._pick(choices)
            self._emit(event)
            self._apply(event)

    def _emit(self, event: list) -> None:
        self.events.append(event)

    def _choices(self) -> list:
        out = [["s", r.name] for r in self.roles.values() if not r.finished and self._enabled(r)]
        out += [["l", rec.k] for rec in self.loads if not rec.landed]
        if any(not m.done for m in self.mmas):
            out.append(["m"])
        return out

    def _pick(self, choices: list) -> list:
        runs = [c for c in choices if c[0] == "s"]
        later = [c for c in choices if c[0] != "s"]
        if self.schedule == "late":
            pool = runs or later
        elif self.schedule == "eager":
            pool = later or runs
        else:
            pool = choices
        mine = pool[self.rng.randrange(len(pool))] if len(pool) > 1 else pool[0]
        if self.claimed is not None:
            self._compare(mine)
        return mine

    # ---- the replay's comparison with the claimed trace -----------------------------------------

    def claimed_source(self, role: str):
        i = len(self.events)
        if i >= len(self.claimed):
            raise Violation(
                "inconsistent",
                f"inconsistent trace: it ends at event {i}, where the {role}'s next operation (or its return) "
                "should be",
            )
        event = self.claimed[i]
        if isinstance(event, list) and len(event) == 3 and event[0] == "y" and event[1] == role:
            return event[2]
        if event == ["r", role]:
            return END
        raise Violation(
            "inconsistent",
            f"inconsistent trace: event {i} is {_short(event)}, where the {role}'s next operation (or its return) "
            "should be",
        )

    def _compare(self, mine: list) -> None:
        i = len(self.events)
        theirs = self.claimed[i] if i < len(self.claimed) else None
        if theirs == mine:
            return
        said = self._describe_event(mine)
        if theirs is None:
            raise Violation(
                "inconsistent",
                f"inconsistent trace: it ends at event {i}, before the run does",
                [f"the grader's replay of this case (schedule {self.schedule!r}, seed {self.seed}) goes on: {said}"],
            )
        if isinstance(theirs, list) and len(theirs) == 2 and theirs[0] == "s" and theirs[1] in self.roles:
            role = self.roles[theirs[1]]
            if role.finished or role.pending is None:
                why = f"the trace has the {role.name} run an operation there, but it has none pending"
            elif not self._enabled(role):
                why = (
                    f"the trace has the {role.name}'s {role.pending} pass there, but it could not: "
                    f"{self._blocked(role)}"
                )
            else:
                why = f"the trace runs the {role.name}'s {role.pending} there"
        elif isinstance(theirs, list) and len(theirs) == 2 and theirs[0] == "l":
            if not any(rec.k == theirs[1] and not rec.landed for rec in self.loads):
                why = f"the trace has a load of k={theirs[1]!r} land there, but no such load was in flight"
            else:
                why = f"the trace lands the load of k={theirs[1]} there"
        elif theirs == ["m"]:
            why = "the trace finishes an MMA there" + (
                "" if any(not m.done for m in self.mmas) else ", but none was running"
            )
        else:
            why = f"the trace says {_short(theirs)}"
        raise Violation(
            "inconsistent",
            f"inconsistent trace at event {i}: {why}",
            [f"the grader's replay of this case (schedule {self.schedule!r}, seed {self.seed}) has: {said}"],
        )

    # ---- what blocks, what runs -----------------------------------------------------------------

    def _passes(self, bar: Bar, phase: int) -> bool:
        return self.bars[bar].completed % 2 != phase

    def _running_mmas(self) -> int:
        return sum(not m.done for m in self.mmas)

    def _enabled(self, role: _Role) -> bool:
        op = role.pending
        if isinstance(op, Wait):
            return self._passes(op.bar, op.phase)
        if isinstance(op, MmaWait):
            return self._running_mmas() <= op.pending
        return op is not None

    def _bar_text(self, bar: Bar) -> str:
        b = self.bars[bar]
        text = f"{bar!r} has completed {_plural(b.completed, 'phase')}"
        needs = []
        if b.pending:
            needs.append(_plural(b.pending, "arrival"))
        if b.tx > 0:
            needs.append(f"{b.tx} bytes to land")
        if needs:
            text += f"; its current phase still needs {' and '.join(needs)}"
        elif b.tx < 0:
            text += f"; {-b.tx} bytes landed that nothing expected"
        return text

    def _blocked(self, role: _Role) -> str:
        op = role.pending
        if isinstance(op, Wait):
            need = "an odd" if op.phase == 0 else "an even"
            return (
                f"{self._bar_text(op.bar)}, and Wait(phase={op.phase}) passes only once it has completed {need} number"
            )
        if isinstance(op, MmaWait):
            return f"{_plural(self._running_mmas(), 'MMA')} still running"
        return "nothing blocks it"

    def _where(self, role: _Role) -> str:
        k = role.issued
        if k >= self.K:
            return f"the {role.name}, past its last step"
        verb = "to load" if role.name == "producer" else "to multiply"
        return f"the {role.name}, about {verb} k={k} (slot {k % self.NB}, round {k // self.NB})"

    def _deadlock(self) -> Violation:
        lines = []
        for role in self.roles.values():
            if role.finished:
                lines.append(f"the {role.name} has returned")
            else:
                lines.append(f"{self._where(role)}, waits: {role.pending}: {self._blocked(role)}")
        held = self._held_slot()
        if held is not None:
            return self._hold_and_wait(*held, lines)
        hint = (
            "check the phases: the consumer waits on ready[s] with phase round % 2, the producer on empty[s] "
            "with (round % 2) ^ 1 (round 0 must pass at once), and each ExpectTx announces STAGE_BYTES"
        )
        return Violation("deadlock", "deadlock: both roles wait and nothing in flight can wake them", [*lines, hint])

    def _held_slot(self) -> tuple[int, int] | None:
        """(slot, step) where the deadlock is no phase bug: the producer waits to load step k into slot s, and
        one release of empty[s] would let it through; the consumer has multiplied the slot's previous tile and
        not released it, and waits for step k's tile, which one completion of ready[s] would let through."""
        producer, consumer = self.roles["producer"], self.roles["consumer"]
        wait_p, wait_c = producer.pending, consumer.pending
        if producer.finished or consumer.finished or not isinstance(wait_p, Wait) or not isinstance(wait_c, Wait):
            return None
        k, s = producer.issued, producer.issued % self.NB
        if k >= self.K or consumer.issued != k or wait_p.bar != Bar("empty", s) or wait_c.bar != Bar("ready", s):
            return None
        if self.unreleased[s] is None:
            return None
        one_more = [(self.bars[w.bar].completed + 1) % 2 != w.phase for w in (wait_p, wait_c)]
        return (s, k) if all(one_more) else None

    def _hold_and_wait(self, s: int, k: int, lines: list[str]) -> Violation:
        consumer = self.roles["consumer"]
        held = self.unreleased[s]
        story = (
            f"the consumer holds slot {s}: it multiplied k={held} there and has not released it, and now waits "
            f"for k={k}'s tile, which the producer can load only into slot {s}, once it is released: each waits "
            "for the other"
        )
        phases = (
            f"the phases are right: one release of empty[{s}] lets the producer's wait through, and the load of "
            f"k={k} the consumer's"
        )
        kept = consumer.last_mma_wait or 0
        if f"M{held}" not in consumer.known and kept >= self.NB:
            mmas, later = ("one MMA", "the next MMA") if kept == 1 else (f"{kept} MMAs", f"{kept} more MMAs")
            need = kept + 1
            return Violation(
                "deadlock",
                f"deadlock: keeping {mmas} in flight needs at least {need} buffers, and this case has {self.NB}",
                [
                    *lines,
                    story,
                    f"MmaWait(pending={kept}) leaves {mmas} running, still reading "
                    f"{'its slot' if kept == 1 else 'their slots'}, so the consumer releases a slot only after "
                    f"{later}: the next step's tile needs a slot of its own beside the {kept} held, {need} in all",
                    phases,
                    f"your protocol is right with {need} buffers or more; with fewer, keep fewer MMAs in flight: "
                    f"keep = min({kept}, num_buffers - 1), and with keep = 0 MmaWait(pending=0) then release the "
                    "slot just read (a Gluon kernel that always keeps one in flight says so: "
                    f"gl.static_assert(NUM_BUFFERS >= {need}))",
                ],
            )
        return Violation(
            "deadlock",
            f"deadlock: the consumer holds slot {s} while it waits for the tile that must go into it",
            [
                *lines,
                story,
                phases,
                f"release slot {s} once the MMA that read it has finished, before waiting for a tile that needs it: "
                "Mma, MmaWait(pending=0), Arrive(empty[s]) (or, keeping one MMA in flight, release the previous "
                "step's slot after MmaWait(pending=1): that needs 2 buffers)",
            ],
        )

    # ---- checks when a role yields ----------------------------------------------------------------

    def _check_yield(self, role: _Role, op) -> None:
        def bad(text):
            raise Violation("protocol", f"operation out of protocol: the {role.name} yielded {op}: {text}")

        if isinstance(op, (Load, ExpectTx)) and role.name != "producer":
            bad("loads and their expected bytes are the producer's job")
        if isinstance(op, (Mma, MmaWait)) and role.name != "consumer":
            bad("MMAs are the consumer's job")
        if isinstance(op, Wait) and op.phase not in (0, 1):
            bad("a phase is a parity bit, 0 or 1")
        if isinstance(op, ExpectTx) and op.nbytes <= 0:
            bad("the expected bytes must be positive")
        if isinstance(op, MmaWait) and op.pending < 0:
            bad("pending counts MMAs left running: 0 or more")
        if isinstance(op, Arrive) and op.count != 1:
            bad("every barrier of the ring is initialised with count=1: one arrival per phase")
        if isinstance(op, (Load, Mma)) and not 0 <= op.slot < self.NB:
            bad(f"the ring's slots are 0..{self.NB - 1}")

    # ---- running one event ------------------------------------------------------------------------

    def _note(self, who: str, text: str) -> None:
        self.timeline.append(f"{len(self.timeline) + 1:4d}  {who:<8} {text}")

    def _describe_event(self, event: list) -> str:
        if event[0] == "s":
            role = self.roles[event[1]]
            return f"the {role.name} runs {role.pending}"
        if event[0] == "l":
            return f"the load of k={event[1]} lands"
        return "the oldest running MMA finishes"

    def _apply(self, event: list) -> None:
        if event[0] == "l":
            self._land(next(rec for rec in self.loads if rec.k == event[1] and not rec.landed))
            return
        if event[0] == "m":
            self._mma_done(next(m for m in self.mmas if not m.done))
            return
        role = self.roles[event[1]]
        op, role.pending = role.pending, None
        if isinstance(op, Wait):
            b = self.bars[op.bar]
            role.known |= b.known
            role.last_wait[op.bar] = (op.phase, b.completed)
            if role.name == "consumer" and op.bar.name == "ready":
                self.waited[op.bar.index] = True
            self._note(role.name, f"{op} passes ({op.bar!r} has completed {_plural(b.completed, 'phase')})")
        elif isinstance(op, ExpectTx):
            self._note(role.name, str(op))
            self.bars[op.bar].tx += op.nbytes
            self._arrive(op.bar, role)
        elif isinstance(op, Arrive):
            if op.bar.name == "empty":
                self._check_release(role, op.bar.index)
            self._note(role.name, str(op))
            self._arrive(op.bar, role)
        elif isinstance(op, Load):
            self._load(role, op)
        elif isinstance(op, Mma):
            self._mma(role, op)
        elif isinstance(op, MmaWait):
            done = role.issued - op.pending
            role.known |= {f"M{j}" for j in range(max(done, 0))}
            role.last_mma_wait = op.pending
            self._note(role.name, f"{op} passes ({_plural(self._running_mmas(), 'MMA')} still running)")

    def _arrive(self, bar: Bar, role: _Role) -> None:
        b = self.bars[bar]
        b.phase_known |= role.known
        b.pending -= 1
        self._maybe_complete(bar)

    def _maybe_complete(self, bar: Bar) -> None:
        b = self.bars[bar]
        if b.pending == 0 and b.tx == 0:
            b.known |= b.phase_known
            b.phase_known = set()
            b.pending = 1
            b.completed += 1
            self._note("", f"{bar!r} completes phase {b.completed - 1} (parity {(b.completed - 1) % 2})")

    def _land(self, rec: _LoadRec) -> None:
        rec.landed = True
        if self.slot_k[rec.slot] == rec.k:
            self.slot_landed[rec.slot] = True
        self._note("TMA", f"the load of k={rec.k} lands in slot {rec.slot}")
        bar = Bar("ready", rec.slot)
        self.bars[bar].tx -= STAGE_BYTES
        self.bars[bar].phase_known.add(f"L{rec.k}")
        self._maybe_complete(bar)

    def _mma_done(self, m: _MmaRec) -> None:
        m.done = True
        self._note("wgmma", f"the MMA of k={m.k} (slot {m.slot}) finishes")

    def _state_of_mma(self, k: int) -> str:
        m = self.mmas[k] if k < len(self.mmas) else None
        if m is None:
            return "had not been issued"
        return "was still running" if not m.done else "had finished, but nothing made the producer wait for it"

    def _load(self, role: _Role, op: Load) -> None:
        k, s, NB = op.k, op.slot, self.NB
        if k != role.issued or k >= self.K:
            nxt = f"k={role.issued}" if role.issued < self.K else f"none (k_steps is {self.K}: k runs 0..{self.K - 1})"
            raise Violation(
                "protocol",
                f"operation out of protocol: the producer's {op}: loads go in order, each k once; "
                f"its next load is {nxt}",
            )
        if s != k % NB or op.bar != Bar("ready", s):
            raise Violation(
                "protocol",
                f"operation out of protocol: the producer's {op}: step k goes into slot k % num_buffers = {k % NB}, "
                f"and its bytes count on ready[{k % NB}]",
            )
        r = k // NB
        if k >= NB and f"M{k - NB}" not in role.known:
            details = [
                f"in this schedule the MMA of k={k - NB} {self._state_of_mma(k - NB)}",
                f"before each load the producer waits on empty[{s}] with phase (round % 2) ^ 1 = {(r % 2) ^ 1}; the "
                f"consumer arrives on empty[{s}] only once the MMA that read the slot has finished",
            ]
            last = role.last_wait.get(Bar("empty", s))
            if last is None:
                details.insert(1, f"the producer never waited on empty[{s}]")
            else:
                details.insert(
                    1,
                    f"the producer's last wait on empty[{s}] was Wait(empty[{s}], phase={last[0]}), which passed when "
                    f"empty[{s}] had completed {_plural(last[1], 'phase')}",
                )
            raise Violation(
                "overwrite",
                f"overwrite of a buffer still in use: the producer's Load of k={k} into slot {s} (round {r}) came "
                f"before it knew the MMA reading k={k - NB} from slot {s} had finished",
                details,
            )
        for m in self.mmas:
            if not m.done and m.slot == s:
                m.corrupted = True
        self.loads.append(_LoadRec(k, s))
        self.slot_k[s], self.slot_landed[s] = k, False
        role.issued += 1
        self._note(role.name, str(op))

    def _mma(self, role: _Role, op: Mma) -> None:
        n, s, NB = role.issued, op.slot, self.NB
        if n >= self.K:
            raise Violation(
                "wrong result",
                f"wrong result: the consumer issued an Mma after multiplying all {self.K} steps: "
                "each k is multiplied once",
            )
        if s != n % NB:
            raise Violation(
                "wrong result",
                f"wrong result: the consumer's Mma number {n + 1} should multiply k={n} from slot {n % NB}, but it "
                f"read slot {s}: every k is multiplied once, in order, and step k lives in slot k % num_buffers",
            )
        r = n // NB
        if f"L{n}" not in role.known:
            rec = next((x for x in self.loads if x.k == n), None)
            state = (
                "had not been issued"
                if rec is None
                else (
                    "had not landed yet" if not rec.landed else "had landed, but nothing made the consumer wait for it"
                )
            )
            details = [f"in this schedule the load of k={n} {state}"]
            last = role.last_wait.get(Bar("ready", s))
            if last is None:
                details.append(f"the consumer never waited on ready[{s}]")
            else:
                details.append(
                    f"the consumer's last wait on ready[{s}] was Wait(ready[{s}], phase={last[0]}), which passed when "
                    f"ready[{s}] had completed {_plural(last[1], 'phase')}"
                    + (": an older phase, not this round's" if last[1] <= r else "")
                )
            details.append(
                f"before its Mma the consumer waits on ready[{s}] with phase round % 2 = {r % 2}: that wait passes "
                f"only once the load of k={n} has landed"
            )
            raise Violation(
                "unfilled read",
                f"read of a buffer not yet filled: the consumer's Mma of k={n} (slot {s}, round {r}) came before it "
                f"knew the load of k={n} had landed",
                details,
            )
        read = self.slot_k[s] if self.slot_landed[s] else None
        self.mmas.append(_MmaRec(n, s, read))
        self.unreleased[s] = n
        role.issued += 1
        role.last_mma_wait = None
        self._note(role.name, f"{op}: acc += A_{n} @ B_{n}")

    def _check_release(self, role: _Role, s: int) -> None:
        k = self.unreleased[s]
        if k is not None:
            if f"M{k}" in role.known:
                self.unreleased[s], self.waited[s] = None, False
                return
            m = self.mmas[k]
            consumer = self.roles["consumer"]
            if role.name == "consumer" and consumer.last_mma_wait is not None:
                n = consumer.last_mma_wait
                why = (
                    f"the last MmaWait(pending={n}) left up to {_plural(n, 'MMA')} running, and the newest, the one "
                    f"reading slot {s}, is among them"
                )
            else:
                why = "no MmaWait since that Mma was issued: it may still be running"
            raise Violation(
                "release before done",
                f"release before the MMA finished (the Hopper bug): the {role.name}'s Arrive(empty[{s}]) for k={k} "
                f"came while the wgmma reading slot {s} could still be running",
                [
                    why,
                    f"in this schedule it {'was still running' if not m.done else 'had finished by chance'}",
                    "the producer may now load the next tile into the slot wgmma is still reading: on a Hopper GPU "
                    "this gives wrong results now and then. Wait with MmaWait(pending=0) before the arrive (or, "
                    "keeping one MMA in flight with MmaWait(pending=1), release the slot of the previous step, whose "
                    "MMA is done)",
                ],
            )
        if self.waited[s]:
            nxt = self.roles["consumer"].issued
            while nxt % self.NB != s:
                nxt += 1
            raise Violation(
                "early release",
                f"early release: the {role.name}'s Arrive(empty[{s}]) came before "
                f"{'its' if role.name == 'consumer' else 'the consumer' + chr(39) + 's'} Mma of k={nxt} "
                f"(slot {s}, round {nxt // self.NB}) was issued, let alone finished",
                [
                    f"the consumer waited on ready[{s}] for k={nxt} and released the slot before reading it: the "
                    "producer may overwrite it first",
                    "release a slot after its Mma and an MmaWait that covers it: Mma, MmaWait(pending=0), Arrive",
                ],
            )
        # an arrival with nothing to release (arriving once on each empty[s] before the loop): allowed;
        # if it puts the phases out of step, the producer's next load shows it

    def _finish(self, role: _Role) -> None:
        role.finished = True
        self._note(role.name, "returns")
        if role.name == "producer" and role.issued < self.K:
            raise Violation(
                "incomplete",
                f"the producer returned after loading {role.issued} of {self.K} steps: every k = 0..{self.K - 1} "
                "is loaded once",
            )
        if role.name == "consumer":
            if role.issued < self.K:
                raise Violation(
                    "wrong result",
                    f"wrong result: the consumer returned after multiplying {role.issued} of {self.K} steps: "
                    f"k = {role.issued}..{self.K - 1} never reached the accumulator",
                )
            unsure = [m.k for m in self.mmas if f"M{m.k}" not in role.known]
            if unsure:
                raise Violation(
                    "wrong result",
                    f"wrong result: the consumer returned while the MMA of k={unsure[-1]} could still be running: the "
                    "epilogue would store an unfinished accumulator; end with MmaWait(pending=0)",
                )

    def _final(self) -> None:
        read = [m.read for m in self.mmas]
        bad = [m.k for m in self.mmas if m.corrupted or not m.done]
        if read != list(range(self.K)) or bad:
            raise Violation(
                "wrong result",
                f"wrong result: the accumulator summed the tiles of k = {read} instead of 0..{self.K - 1} once each",
            )


def _short(value, limit: int = 120) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------------------------------
# running generators, recording, replaying


def _generator_source(producer, consumer, k_steps: int, num_buffers: int):
    ready = [Bar("ready", i) for i in range(num_buffers)]
    empty = [Bar("empty", i) for i in range(num_buffers)]
    iterators = {}
    for name, fn in (("producer", producer), ("consumer", consumer)):
        made = fn(k_steps, num_buffers, list(ready), list(empty))
        try:
            iterators[name] = iter(made)
        except TypeError:
            raise TypeError(
                f"the {name} returned {type(made).__name__}: it must be a generator function that yields its operations"
            ) from None

    def source(role: str):
        try:
            return encode(next(iterators[role]))
        except StopIteration:
            return END

    return source


def simulate(producer, consumer, k_steps: int, num_buffers: int, seed: int = 0, schedule: str = "random") -> Outcome:
    """Run the two roles here under one schedule; ``print(outcome.report())``, ``outcome.timeline``."""
    run = _Run(k_steps, num_buffers, seed, schedule)
    return run.execute(_generator_source(producer, consumer, k_steps, num_buffers))


def record(producer, consumer, k_steps: int, num_buffers: int, seed: int, schedule: str) -> str:
    """Run the two roles and return the trace (JSON text) that ``replay`` judges."""
    run = _Run(k_steps, num_buffers, seed, schedule)
    run.execute(_generator_source(producer, consumer, k_steps, num_buffers))
    trace = {
        "version": TRACE_VERSION,
        "k_steps": k_steps,
        "num_buffers": num_buffers,
        "seed": seed,
        "schedule": schedule,
        "events": run.events,
    }
    return json.dumps(trace, separators=(",", ":"))


def _rejected(summary: str) -> Outcome:
    return Outcome(False, summary, [], [], [], "inconsistent")


def replay(text, k_steps: int, num_buffers: int, seed: int, schedule: str) -> Outcome:
    """Judge a trace made by ``record``, trusting none of it: a fresh emulator runs the operations the
    trace says each role yielded, makes every scheduling decision itself and checks every rule."""
    if type(text) is not str:
        return _rejected(f"the trace is a {type(text).__name__}, not the JSON text barriers.record returns")
    if len(text) > MAX_TRACE_CHARS:
        return _rejected(f"the trace is {len(text):,} characters long, more than any run of this case makes")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return _rejected("the trace is not the JSON text barriers.record returns")
    if not isinstance(data, dict) or data.get("version") != TRACE_VERSION or not isinstance(data.get("events"), list):
        return _rejected("the trace is not one barriers.record made (no version or no events)")
    asked = {"k_steps": k_steps, "num_buffers": num_buffers, "seed": seed, "schedule": schedule}
    said = {key: data.get(key) for key in asked}
    if said != asked or any(type(said[key]) is not type(asked[key]) for key in asked):
        return _rejected(f"inconsistent trace: it is a run of {said}, the grader asked for {asked}")
    events = data["events"]
    if len(events) > max_events(k_steps, num_buffers) + 4:
        return _rejected(f"inconsistent trace: {len(events)} events, more than a run of this case can have")
    run = _Run(k_steps, num_buffers, seed, schedule, claimed=events)
    outcome = run.execute(run.claimed_source)
    if outcome.ok and len(events) != len(run.events):
        return _rejected(
            f"inconsistent trace: the run ends after {len(run.events)} events, the trace goes on to {len(events)}"
        )
    return outcome
