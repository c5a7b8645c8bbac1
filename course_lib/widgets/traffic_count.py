"""Memory traffic of a task counted in the interpreter (CPU mode): run its launcher once under
``course_lib.traffic.record()`` at a small shape."""

from __future__ import annotations

from .. import traffic
from ._common import _load_entry, _own_if_withheld, _spec
from .model import _case, base_case

TRAFFIC_ELEMENTS = 16_384  # 1-D size the interpreter counts traffic at: 16 blocks of 1024, ~0.1 s


def traffic_shape(task) -> tuple[int, ...]:
    """A small shape of the task for the interpreter: 16,384 elements, or N-D dims of at most 128."""
    shape = tuple(base_case(task).shape)
    if len(shape) == 1:
        return (min(shape[0], TRAFFIC_ELEMENTS),)
    return tuple(min(d, 128) for d in shape)


def count_traffic(task, shape=None, source: str = "solutions") -> tuple[traffic.Recorder, object]:
    """Run a task's launcher once in the interpreter under ``traffic.record()``: (recorder, case). In a
    released copy, which withholds the solutions, the learner's own exercise stands in for one."""
    import torch

    spec = _spec(task)
    case = _case(spec, shape or traffic_shape(spec), "traffic")
    entry = _load_entry(spec, _own_if_withheld(spec, source))
    inputs = spec.make_inputs(case, torch.Generator().manual_seed(0))
    with traffic.record() as rec:
        entry(**inputs)
    return rec, case


def traffic_text(rec: traffic.Recorder) -> str:
    """The recorder's table and one verdict, with the one definition of efficiency the table uses:
    useful bytes over bytes fetched. Sectors against the ideal is a second, separate question (a
    warp can touch the fewest sectors and still use an eighth of them)."""
    s = rec.summary()
    efficiency = s["efficiency"]
    if efficiency >= 0.999:
        verdict = "every byte fetched is used"
    else:
        verdict = f"warps fetch {1 / efficiency:.2f}x the bytes they use"
        if s["sectors"] > s["ideal_sectors"]:
            verdict += f", touching {s['sectors'] / s['ideal_sectors']:.2f}x the sectors their data needs"
        else:
            verdict += ": each warp touches the fewest sectors its data fits in, but fills only part of each"
    return f"{rec.table()}\nefficiency {efficiency:.0%} (useful bytes / bytes fetched): {verdict}."
