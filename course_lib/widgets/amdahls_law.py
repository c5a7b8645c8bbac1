"""Amdahl's law: the arithmetic and the calculator's sliders."""

from __future__ import annotations

from ._common import _heading, _pre


def amdahl(total_ms: float, part_ms: float, speedup: float) -> tuple[float, float]:
    """(new total in ms, overall speed-up) when ``part_ms`` of ``total_ms`` runs ``speedup`` times faster."""
    if total_ms <= 0:
        raise ValueError(f"total_ms must be positive, got {total_ms}")
    if not 0 <= part_ms <= total_ms:
        raise ValueError(f"part_ms must lie between 0 and total_ms ({total_ms}), got {part_ms}")
    if speedup <= 0:
        raise ValueError(f"speedup must be positive, got {speedup}")
    new_total = (total_ms - part_ms) + part_ms / speedup
    return new_total, total_ms / new_total


def amdahl_text(total_ms: float, part_ms: float, speedup: float) -> str:
    new_total, overall = amdahl(total_ms, part_ms, speedup)
    rest = total_ms - part_ms
    limit = "no limit: the part is the whole request" if rest == 0 else f"at most {total_ms / rest:.2f}x"
    return (
        f"The part takes {part_ms:.1f} ms of {total_ms:.1f} ms ({part_ms / total_ms:.0%}). "
        f"Made {speedup:g}x faster it takes {part_ms / speedup:.1f} ms, so the request takes "
        f"{new_total:.1f} ms instead of {total_ms:.1f} ms: {overall:.2f}x faster overall.\n"
        f"However fast the part gets, the other {rest:.1f} ms stay: {limit}."
    )


def _amdahl_bars(total_ms: float, part_ms: float, speedup: float) -> str:
    """Before/after bars in plain HTML, cheap enough to redraw on every slider move."""
    new_total, _ = amdahl(total_ms, part_ms, speedup)
    rest = total_ms - part_ms

    def bar(label, part, colour):
        scale = 420 / total_ms  # pixels per ms
        return (
            f'<div style="display:flex; align-items:center; margin:2px 0">'
            f'<span style="width:60px">{label}</span>'
            f'<span style="width:{part * scale:.1f}px; height:16px; background:{colour}" title="the part"></span>'
            f'<span style="width:{rest * scale:.1f}px; height:16px; background:#bbb" title="the rest"></span>'
            f'<span style="margin-left:6px">{rest + part:.1f} ms</span></div>'
        )

    return (
        bar("before", part_ms, "#d62728")
        + bar("after", part_ms / speedup, "#2ca02c")
        + '<div style="font-size:11px; color:#555">coloured: the part; grey: the rest of the request</div>'
    )


def amdahl_calculator(total_ms: float = 100.0, part_ms: float = 40.0, speedup: float = 4.0):
    """Sliders for a request's time, one part of it and that part's speed-up; the new total, live."""
    import ipywidgets as w

    style = {"description_width": "170px"}
    layout = w.Layout(width="520px")
    common = {"style": style, "layout": layout, "readout_format": ".1f"}
    total = w.FloatSlider(value=total_ms, min=1, max=1000, step=1, description="request time (ms)", **common)
    part = w.FloatSlider(value=part_ms, min=0, max=total_ms, step=0.5, description="the part's time (ms)", **common)
    factor = w.FloatSlider(value=speedup, min=1, max=100, step=0.5, description="the part's speed-up (x)", **common)
    answer = w.HTML()
    bars = w.HTML()

    def update(_=None):
        part.max = total.value  # the part cannot be longer than the request (this also clamps it)
        new_total, overall = amdahl(total.value, part.value, factor.value)
        answer.value = (
            f'<div style="font-size:15px; margin:4px 0">new total <b>{new_total:.1f} ms</b> '
            f"(was {total.value:.1f} ms): <b>{overall:.2f}x</b> faster overall</div>"
            + _pre(amdahl_text(total.value, part.value, factor.value))
        )
        bars.value = _amdahl_bars(total.value, part.value, factor.value)

    for slider in (total, part, factor):
        slider.observe(update, names="value")
    update()
    title = w.HTML(_heading("Amdahl's law: speeding up one part of a request"))
    return w.VBox([title, total, part, factor, answer, bars], layout=w.Layout(padding="4px"))
