"""What the panels share: constants, HTML/text/PNG helpers, reading back what a widget tree shows,
and the one way they turn a task name into its spec and load a task file's launcher.

ipywidgets is imported inside the functions that need it, never here.
"""

from __future__ import annotations

import html
import io

CPU_NO_TIME = (
    "No time is shown: in CPU mode kernels run in Triton's interpreter, whose wall time says nothing "
    "about GPU speed (small blocks even look slow there)."
)
VARIANT_ORDER = ("solution", "torch_eager", "torch_compile", "cublas")


# --------------------------------------------------------------------------------------------------
# small formatting helpers


def _si(value: float, unit: str) -> str:
    """1234567 B -> '1.23 MB' (decimal prefixes, like GB/s)."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


# JupyterLab's own style breaks a <pre> inside any word: lines wrap between words here
PRE_STYLE = (
    "margin:0; font-size:12px; line-height:1.35; white-space:pre-wrap; word-break:normal; overflow-wrap:break-word"
)


def _pre(text: str) -> str:
    return f'<pre style="{PRE_STYLE}">{html.escape(text)}</pre>'


def _heading(text: str, note: str = "") -> str:
    extra = f'<div style="color:#555; font-size:12px">{html.escape(note)}</div>' if note else ""
    return f'<div style="margin-top:8px"><b>{html.escape(text)}</b>{extra}</div>'


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


class Picture:
    """A matplotlib figure that a notebook shows as a PNG without pyplot's inline backend (a bare
    ``Figure`` shows only its repr there); elsewhere its repr names it."""

    def __init__(self, fig):
        self.figure = fig

    def _repr_png_(self) -> bytes:
        return _png(self.figure)

    def __repr__(self) -> str:
        title = self.figure.axes[0].get_title() if self.figure.axes else ""
        return f"<figure{': ' + title if title else ''}>"


def picture(fig) -> Picture:
    """``display(picture(fig))`` shows ``fig`` as an image in a notebook (course_lib's plotting path)."""
    return Picture(fig)


def _image(fig):
    import ipywidgets as w

    return w.Image(value=_png(fig), format="png", layout=w.Layout(max_width="720px"))


# --------------------------------------------------------------------------------------------------
# tasks


def _spec(task):
    from .. import tasks

    return tasks.get(task) if isinstance(task, str) else task


def _own_if_withheld(spec, source: str) -> str:
    """``source``, or the learner's own exercises/ where the solutions are asked for and a released copy
    of the course withholds them."""
    from .. import sources

    return "exercises" if source == "solutions" and not sources.solution_present(spec.name) else source


def _load_entry(spec, source: str):
    """The launcher of ``spec``'s task file in ``source``."""
    from .. import sources

    return sources.load_file(sources.task_path(spec.name, source), spec.entry)[1]


# --------------------------------------------------------------------------------------------------
# what a widget tree shows (for tests and scripts)


def shown_text(widget) -> str:
    """Every text a widget tree shows, tags stripped: what a learner reads (for tests and scripts)."""
    import html
    import re

    import ipywidgets

    found = []
    if isinstance(widget, (ipywidgets.HTML, ipywidgets.Label)):
        found.append(html.unescape(re.sub(r"<[^>]+>", " ", widget.value)))
    for child in getattr(widget, "children", ()):
        found.append(shown_text(child))
    return "\n".join(found)


def shown_images(widget) -> list[bytes]:
    """The PNG bytes of every image in a widget tree, in order."""
    import ipywidgets

    if isinstance(widget, ipywidgets.Image):
        return [bytes(widget.value)]
    return [img for child in getattr(widget, "children", ()) for img in shown_images(child)]
