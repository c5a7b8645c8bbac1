"""The pipeline timeline (chapter 09): loads, computes and waits of a ring of buffers, one row per
role, from ``course_lib.pipeline_sim``; sliders re-run the model (it takes milliseconds)."""

from __future__ import annotations

from ..pipeline_sim import KIND_LABELS, MODES, WAITS, Timeline, simulate
from ._common import _heading, _png, _pre

_COLOURS = {
    "load": "#1f77b4",
    "issue": "#9467bd",
    "compute": "#2ca02c",
    "epilogue": "#ff7f0e",
    "wait_ready": "#d62728",
    "wait_empty": "#8c564b",
    "wait_turn": "#7f7f7f",
}
# the panel's first values: three output tiles of eight K steps, so epilogues and their overlap show
_FIRST = {
    "n_tiles": 8,
    "output_tiles": 3,
    "buffers": 3,
    "producers": 1,
    "consumers": 2,
    "load_latency": 1.0,
    "compute_time": 0.7,
    "transfer_time": 0.0,
    "epilogue_time": 2.0,
    "mode": "pingpong",
}
_INT_SLIDERS = {"buffers": 8, "producers": 4, "consumers": 4}  # name: the slider's top
_TIME_SLIDERS = {"load_latency": 5.0, "compute_time": 3.0, "transfer_time": 3.0, "epilogue_time": 10.0}


def timeline_text(timeline: Timeline) -> str:
    """The summary, then how each role spent the run (as fractions of the total time)."""
    lines = [timeline.summary(), "", "how each role spent the time:"]
    for role in timeline.roles:
        parts = [
            f"{KIND_LABELS[kind]} {timeline.time_in(role, kind) / timeline.total:.0%}"
            for kind in KIND_LABELS
            if kind != "load" and timeline.time_in(role, kind) > 0
        ]
        lines.append(f"  {role:<12} " + ("; ".join(parts) if parts else "nothing"))
    return "\n".join(lines)


def timeline_figure(timeline: Timeline, title: str = ""):
    """One row per role (waits hatched) and a row of loads in flight, one thin lane per buffer."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    p = timeline.params
    rows = [*timeline.roles, "loads in flight"]
    fig = Figure(figsize=(11, 0.55 * len(rows) + 1.2))
    ax = fig.subplots()
    for y, role in enumerate(rows):
        for kind in KIND_LABELS:
            if kind == "load":
                continue
            spans = [(i.start, i.length) for i in timeline.of(role, kind)]
            if spans:
                waiting = kind in WAITS
                ax.broken_barh(
                    spans,
                    (y - 0.35, 0.7),
                    facecolors="white" if waiting else _COLOURS[kind],
                    edgecolors=_COLOURS[kind],
                    hatch="///" if waiting else None,
                    linewidth=0.6,
                )
    lane = 0.8 / p["buffers"]
    y_loads = len(rows) - 1
    for i in timeline.intervals:
        if i.kind == "load":
            ax.broken_barh(
                [(i.start, i.length)],
                (y_loads - 0.4 + i.slot * lane, lane * 0.85),
                facecolors=_COLOURS["load"],
                edgecolors="black",
                linewidth=0.4,
            )
    ax.set_yticks(range(len(rows)), [*rows[:-1], f"loads in flight\n({p['buffers']} buffers)"])
    ax.invert_yaxis()
    ax.set_xlim(0, timeline.total * 1.01 if timeline.total > 0 else 1)
    ax.set_xlabel("time (us)")
    ax.set_title(
        title
        or f"{p['mode']}: tensor cores busy {timeline.utilization:.0%}, waiting for data {timeline.consumer_stall:.0%}",
        fontsize=10,
    )
    shown = {i.kind for i in timeline.intervals}
    handles = [
        Patch(
            facecolor="white" if kind in WAITS else _COLOURS[kind],
            edgecolor=_COLOURS[kind],
            hatch="///" if kind in WAITS else None,
            label=label,
        )
        for kind, label in KIND_LABELS.items()
        if kind in shown
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def pipeline_timeline(**params):
    """Sliders for the ring (buffers, producers, consumers, latency, compute, load spacing, epilogue,
    mode) over ``pipeline_sim.simulate``'s timeline and summary. ``params`` are simulate's arguments
    and set the sliders' first values (``n_tiles``, ``output_tiles`` and ``issue_time`` stay fixed)."""
    import ipywidgets as w

    first = {**_FIRST, **params}
    simulate(**first)  # bad parameters fail here, before any widget is built
    common = {"style": {"description_width": "150px"}, "layout": w.Layout(width="480px"), "continuous_update": False}
    sliders = {}
    for name, top in _INT_SLIDERS.items():
        value = first[name]
        sliders[name] = w.IntSlider(value=value, min=1, max=max(top, value), description=name, **common)
    for name, top in _TIME_SLIDERS.items():
        value = first[name]
        sliders[name] = w.FloatSlider(
            value=value, min=0, max=max(top, value), step=0.05, description=f"{name} (us)", **common
        )
    mode = w.ToggleButtons(options=list(MODES), value=first["mode"], description="mode")
    text = w.HTML()
    picture = w.Image(format="png", layout=w.Layout(max_width="900px"))

    def update(_=None):
        tl = simulate(**{**first, **{name: s.value for name, s in sliders.items()}, "mode": mode.value})
        text.value = _pre(timeline_text(tl))
        picture.value = _png(timeline_figure(tl))

    for control in (*sliders.values(), mode):
        control.observe(update, names="value")
    update()
    note = (
        "A teaching model (course_lib.pipeline_sim): loads land a latency after their issue and the tensor "
        "cores take one tile at a time; 'stages' is one warp group loading buffers - 1 tiles ahead (num_stages)."
    )
    title = w.HTML(_heading("a ring of buffers between loads and tensor cores", note))
    box = w.VBox([title, *sliders.values(), mode, picture, text])
    box.update = update  # so a notebook or a test can redraw without moving a slider
    return box
