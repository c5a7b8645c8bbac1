"""A Gluon kernel's run on the CPU as a timeline (chapter 09): which partition waited on which barrier,
and for how many of the simulator's steps, from ``course_lib.gluon_cpu``'s trace of one program.

The simulator's steps are turns, not time: a step is one partition running up to its next barrier
operation, or one asynchronous event (a TMA copy landing, a wgmma completing). So the picture says who
waited on whom and in what order, under one seeded order of events; chapter 09's pipeline model
(``pipeline_timeline``) says how long, from latencies."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_EVENT_KINDS = {"TMA copy": "#1f77b4", "wgmma": "#2ca02c", "TMA store": "#ff7f0e"}
_WAIT_COLOURS = {"ready": "#d62728", "empty": "#8c564b"}  # by the barrier's name; others grey


@dataclass
class ProgramTrace:
    """One program's run: its partitions in order of appearance, their waits, turns and the events."""

    steps: int
    partitions: list[str]
    waits: list[tuple[str, str, int, int]] = field(default_factory=list)  # (partition, barrier, start, end)
    turns: dict[str, int] = field(default_factory=dict)
    events: list[tuple[int, str]] = field(default_factory=list)  # (step, kind)

    def waited(self, partition: str) -> dict[str, int]:
        """Steps ``partition`` spent waiting, by barrier family (``ready``, ``empty``, ...)."""
        out: dict[str, int] = {}
        for who, barrier, start, end in self.waits:
            if who == partition:
                family = _family(barrier)
                out[family] = out.get(family, 0) + end - start
        return out


def _family(barrier: str) -> str:
    return re.sub(r"\[\d+\]$", "", barrier)


def _event_kind(what: str) -> str:
    for kind in _EVENT_KINDS:
        if what.startswith(f"the {kind}"):
            return kind
    return "other"


def program_trace(scheduler) -> ProgramTrace:
    """The trace of one program's scheduler (``gluon_cpu.simulate`` returns one per program)."""
    partitions: list[str] = []
    turns: dict[str, int] = {}
    waits, open_waits = [], {}
    for step, who, kind, what in scheduler.trace:
        if who not in partitions:
            partitions.append(who)
        if kind == "turn":
            turns[who] = turns.get(who, 0) + 1
        elif kind == "wait":
            open_waits[who] = (what, step)
        elif kind == "resume" and who in open_waits:
            barrier, start = open_waits.pop(who)
            waits.append((who, barrier, start, step))
    for who, (barrier, start) in open_waits.items():  # a wait still open when the run ended (a deadlock)
        waits.append((who, barrier, start, scheduler.steps))
    events = [(step, _event_kind(what)) for step, who, what in scheduler.log if who == "event"]
    partitions = [p for p in partitions if not p.startswith("program ")] or partitions
    return ProgramTrace(scheduler.steps, partitions, sorted(waits, key=lambda w: w[2]), turns, events)


def trace_text(trace: ProgramTrace, title: str = "") -> str:
    """Per partition: the steps it ran and the steps it waited, on which barriers, and its longest wait."""
    lines = [title] if title else []
    lines.append(f"{trace.steps} steps of the simulator (each a partition's turn, or an event: a copy lands...)")
    for who in trace.partitions:
        waited = trace.waited(who)
        mine = [w for w in trace.waits if w[0] == who]
        longest = max(mine, key=lambda w: w[3] - w[2], default=None)
        said = ", ".join(f"{n} steps on {family}[*]" for family, n in sorted(waited.items())) or "never"
        lines.append(f"  {who}: {trace.turns.get(who, 0)} turns; waited {said}")
        if longest is not None:
            start, end = longest[2], longest[3]
            lines.append(f"    longest wait: {end - start} steps on {longest[1]} (steps {start} to {end})")
    counts: dict[str, int] = {}
    for _, kind in trace.events:
        counts[kind] = counts.get(kind, 0) + 1
    plural = {"TMA copy": "TMA copies landed", "wgmma": "wgmmas completed", "TMA store": "TMA stores done"}
    lines.append("  events: " + ", ".join(f"{n} {plural.get(kind, kind)}" for kind, n in counts.items()))
    return "\n".join(lines)


def trace_figure(trace: ProgramTrace, title: str = ""):
    """One row per partition, its waits as hatched bars coloured by barrier (ready, empty), and a row of
    the asynchronous events as ticks (TMA copies landed, wgmmas completed, TMA stores done)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    rows = [*trace.partitions, "events"]
    fig = Figure(figsize=(11, 0.6 * len(rows) + 1.3))
    ax = fig.subplots()
    for y, who in enumerate(trace.partitions):
        ax.broken_barh([(0, trace.steps)], (y - 0.05, 0.1), facecolors="#dddddd")
        for _, barrier, start, end in (w for w in trace.waits if w[0] == who):
            colour = _WAIT_COLOURS.get(_family(barrier), "#7f7f7f")
            ax.broken_barh([(start, max(end - start, 0.5))], (y - 0.35, 0.7), facecolors="white",
                           edgecolors=colour, hatch="///", linewidth=0.8)  # fmt: skip
    y = len(rows) - 1
    for kind, colour in _EVENT_KINDS.items():
        steps = [s for s, k in trace.events if k == kind]
        if steps:
            ax.vlines(steps, y - 0.35, y + 0.35, colors=colour, linewidth=1.2)
    ax.set_yticks(range(len(rows)), rows)
    ax.invert_yaxis()
    ax.set_xlim(0, max(trace.steps, 1) * 1.01)
    ax.set_xlabel("step of the simulator (turns and events, not time)")
    ax.set_title(title or "one program of a Gluon kernel, run on the CPU: who waited on what", fontsize=10)
    handles = [
        Patch(facecolor="white", edgecolor=c, hatch="///", label=f"waits on {name}[*]")
        for name, c in _WAIT_COLOURS.items()
        if any(_family(w[1]) == name for w in trace.waits)
    ] + [Patch(color=c, label=k) for k, c in _EVENT_KINDS.items() if any(e[1] == k for e in trace.events)]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def run_traced(launcher, *args, seed: int = 0, event_weight: float = 1.0, **kwargs) -> list[tuple[str, list]]:
    """Call ``launcher(*args, **kwargs)`` (CPU tensors) with its Gluon launches simulated; returns, for each
    launch, (the kernel's name, [ProgramTrace of each program])."""
    from .. import gluon_cpu

    record: list = []
    with gluon_cpu.launches_simulated(seed=seed, event_weight=event_weight, record=record):
        launcher(*args, **kwargs)
    return [(name, [program_trace(s) for s in programs]) for name, programs in record]
