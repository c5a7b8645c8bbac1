"""Partitions of a Gluon program as threads that take turns, and asynchronous work as events.

One thread runs at a time: the one holding the turn. A partition gives the turn back at every point
where another could act (an mbarrier wait or arrive, a TMA copy or store issued, a wgmma started or
waited on). The scheduler then chooses, with its seeded random generator, what happens next: one of
the partitions that can go on, or one of the pending asynchronous completions (a TMA copy landing, a
wgmma finishing, a TMA store writing memory). A seed replays one interleaving exactly; other seeds try
other orders, so a protocol that only works in one order shows its mistake.

Nothing that can run means a deadlock: every partition waits on a barrier phase that no pending event
and no other partition will complete. ``Deadlock`` names who waits on what.
"""

from __future__ import annotations

import linecache
import random
import sys
import threading


class Deadlock(Exception):
    """Every partition left waits, and nothing pending can complete what they wait for."""


class _Abort(BaseException):
    """Unwinds a partition's thread when the run stops (a deadlock, another partition's error)."""


class Event:
    """An asynchronous completion the scheduler may fire when it chooses (``fire``), or that a partition's
    wait forces (``Scheduler.force``)."""

    def __init__(self, what: str, fire, owner=None, lazy: bool = False):
        self.what, self._fire, self.owner, self.done = what, fire, owner, False
        self.lazy = lazy  # nothing waits on it through a barrier (a wgmma, a TMA store): the late policy
        # leaves it in flight until a wait forces it or nothing else can happen

    def fire(self) -> None:
        if not self.done:
            self.done = True
            self._fire()


_PACKAGE = __file__.rsplit("/", 1)[0]


def _kernel_line() -> tuple[str, int] | None:
    """(file, line) of the innermost frame outside the simulator: the kernel's own call that waits."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else None


def _at(where: tuple[str, int] | None) -> str:
    if where is None:
        return ""
    filename, line = where
    text = linecache.getline(filename, line).strip()
    return f" (at {filename.rsplit('/', 1)[-1]}:{line}" + (f", `{text[:90]}`)" if text else ")")


class Partition:
    def __init__(self, name: str, body):
        self.name, self.body = name, body
        self.thread: threading.Thread | None = None
        self.ready = None  # None: may run; else a callable, true once its wait is over
        self.waiting_on = ""
        self.where = None  # (file, line) in the kernel's source of the wait it is blocked in
        self.finished = False
        self.error: BaseException | None = None


class Scheduler:
    def __init__(self, seed: int = 0, event_weight: float = 1.0, steps_limit: int = 2_000_000, thread_guard=None):
        self.rng = random.Random(seed)
        self.event_weight = event_weight  # how often an event is chosen against a partition
        self.events: list[Event] = []
        self.partitions: list[Partition] = []
        self._cv = threading.Condition()
        self._turn: object = None  # the Partition that runs, or self (the scheduler)
        self._aborted = False
        self._local = threading.local()
        self.steps = 0
        self.steps_limit = steps_limit
        self.log: list[tuple[int, str, str]] = []  # (step, partition or "event", what)
        # a context manager made for each partition's thread, around its body (the grader's torch guard:
        # a kernel body computes with Gluon's operations, not torch); ``refused()`` after the body, if it has
        self.thread_guard = thread_guard
        self.warp_specialized = False  # the program called gl.warp_specialize (the grader asks, per case)
        # (step, partition, "turn" | "wait" | "resume", what): the partitions' turns, and each wait on a
        # barrier that did not pass at once, from the step it began to the step its partition ran again
        self.trace: list[tuple[int, str, str, str]] = []

    # ---------------------------------------------------------------------------------- partitions

    def current(self) -> Partition | None:
        return getattr(self._local, "partition", None)

    def run(self, name: str, body) -> None:
        """Run ``body`` as the program's first partition, with the partitions it starts (``spawn``),
        interleaved, to the end; raise the first error."""
        self.spawn(name, body)
        try:
            self._loop(self.partitions)
        finally:
            self._stop(self.partitions)

    def spawn(self, name: str, body) -> Partition:
        """A new partition (gl.warp_specialize's workers), runnable from the next step on."""
        p = Partition(name, body)
        self.partitions.append(p)
        p.thread = threading.Thread(target=self._thread, args=(p,), name=f"gluon-{name}", daemon=True)
        p.thread.start()
        return p

    def _thread(self, p: Partition) -> None:
        self._local.partition = p
        with self._cv:
            while self._turn is not p and not self._aborted:
                self._cv.wait()
        try:
            if not self._aborted:
                if self.thread_guard is None:
                    p.body()
                else:
                    guard = self.thread_guard()
                    with guard:
                        p.body()
                    getattr(guard, "refused", lambda: None)()
        except _Abort:
            pass
        except BaseException as e:  # the kernel's own error, or a protocol error found in it
            p.error = e
        finally:
            p.finished = True
            with self._cv:
                self._turn = self
                self._cv.notify_all()

    def _runnable(self, parts):
        return [p for p in parts if not p.finished and (p.ready is None or p.ready())]

    def _loop(self, parts: list[Partition]) -> None:
        while True:
            failed = [p for p in parts if p.error is not None]
            if failed:
                raise failed[0].error
            if all(p.finished for p in parts):
                return
            self.steps += 1
            if self.steps > self.steps_limit:
                raise Deadlock(f"no end after {self.steps_limit} scheduling steps: " + self.waits(parts))
            runnable = self._runnable(parts)
            pending = [e for e in self.events if not e.done]
            if not runnable and not pending:
                raise Deadlock(self.waits(parts))
            choice = self._choose(runnable, pending)
            if isinstance(choice, Event):
                self.events.remove(choice)
                self.log.append((self.steps, "event", choice.what))
                choice.fire()
                continue
            if choice.ready is not None:
                self.trace.append((self.steps, choice.name, "resume", ""))
            self.trace.append((self.steps, choice.name, "turn", ""))
            choice.ready, choice.waiting_on = None, ""
            with self._cv:
                self._turn = choice
                self._cv.notify_all()
                while self._turn is not self:
                    self._cv.wait()

    def _choose(self, runnable, pending):
        if not pending or (runnable and self.event_weight <= 0):  # 0: events as late as can be
            return self.rng.choice(runnable)
        if self.event_weight <= 0:
            return self.rng.choice([e for e in pending if not e.lazy] or pending)
        if not runnable:
            return self.rng.choice(pending)
        if self.rng.random() * (1 + self.event_weight) < self.event_weight:
            return self.rng.choice(pending)
        return self.rng.choice(runnable)

    def waits(self, parts) -> str:
        waiting = [
            f"{p.name} waits on {p.waiting_on() if callable(p.waiting_on) else p.waiting_on}{_at(p.where)}"
            for p in parts
            if not p.finished and p.waiting_on
        ]
        return "; ".join(waiting) or "no partition can run"

    def _stop(self, parts) -> None:
        with self._cv:
            self._aborted = True
            self._cv.notify_all()
        for p in parts:
            p.thread.join(timeout=10)
        self.events = [e for e in self.events if not e.done]

    # ---------------------------------------------------------------------------- inside a partition

    def point(self, ready=None, waiting_on="") -> None:
        """Give the turn back (a point where another partition or an event may act); with ``ready``,
        come back only once ``ready()`` is true. Outside any partition (the program's own code before or
        after warp_specialize), fire events until ``ready()`` holds."""
        p = self.current()
        if p is None:
            self._drain(ready, waiting_on)
            return
        if ready is not None and not ready():
            said = waiting_on() if callable(waiting_on) else waiting_on
            self.trace.append((self.steps, p.name, "wait", said.split(" for parity")[0]))
            p.where = _kernel_line()
        else:
            ready = None  # passes at once: no wait to record, the partition only gives the turn back
        p.ready, p.waiting_on = ready, waiting_on
        with self._cv:
            self._turn = self
            self._cv.notify_all()
            while self._turn is not p and not self._aborted:
                self._cv.wait()
        if self._aborted:
            raise _Abort()

    def _drain(self, ready, waiting_on) -> None:
        while ready is not None and not ready():
            pending = [e for e in self.events if not e.done]
            if not pending:
                said = waiting_on() if callable(waiting_on) else waiting_on
                raise Deadlock(f"the program waits on {said}, and nothing pending completes it")
            event = self.rng.choice(pending)
            self.events.remove(event)
            self.log.append((self.steps, "event", event.what))
            event.fire()

    def add(self, event: Event) -> None:
        self.events.append(event)

    def force(self, event: Event) -> None:
        """Complete ``event`` now (a partition's wait for it)."""
        if event in self.events:
            self.events.remove(event)
        self.log.append((self.steps, "event", event.what))
        event.fire()

    def flush(self) -> None:
        """Fire every pending event (the program has ended)."""
        while self.events:
            self.force(self.events[0])
