"""Everything the worker says is a claim: each field of each reply is checked here, in the grader's
process, for its type and its range before anything reads it.

The worker runs the learner's code, so a reply may carry anything: a string where a count belongs,
a list a million long, a name that is no input. ``Unreadable`` says which field is wrong; the grader
fails the task with that (the learner's process sent it), and never crashes on it.
"""

from __future__ import annotations

import re

from .result import CRASH, FAIL, NEEDS_GPU, TODO
from .shared import DTYPES

MAX_TEXT = 20_000  # characters in one message or detail line
MAX_ITEMS = 400  # entries in one list (launches, detail lines, names)
STATUSES = (FAIL, TODO, CRASH, NEEDS_GPU)  # NEEDS_GPU: a Gluon construct CPU mode's simulator does not run


class Unreadable(ValueError):
    """A reply field that is not what the grader's own worker code sends."""

    def __init__(self, field: str, why: str):
        super().__init__(f"{field}: {why}")
        self.field, self.why = field, why


# Control characters (an escape sequence moves the cursor, rewrites a terminal's line or title, or
# writes its clipboard): shown as visible escapes, so that a learner's text cannot pose as the
# grader's own lines in an instructor's terminal, CSV or summary.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(value: str) -> str:
    """``value`` with its control characters (but newline and tab) written as escapes (\\x1b)."""
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", value)


def text(value, field: str, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str):
        raise Unreadable(field, f"a {type(value).__name__} where text belongs")
    value = visible(value)
    return value if len(value) <= limit else value[:limit] + " ..."


def count(value, field: str, high: int | None = None) -> int:
    if type(value) is not int or value < 0 or (high is not None and value > high):
        raise Unreadable(field, f"{value!r:.60} where a count{f' up to {high}' if high is not None else ''} belongs")
    return value


def number(value, field: str) -> float:
    if type(value) not in (int, float) or value != value or value in (float("inf"), float("-inf")):
        raise Unreadable(field, f"{value!r:.60} where a number belongs")
    return float(value)


def flag(value, field: str) -> bool:
    if type(value) is not bool:
        raise Unreadable(field, f"{value!r:.60} where true or false belongs")
    return value


def texts(value, field: str, limit: int = MAX_ITEMS) -> list[str]:
    if not isinstance(value, list) or len(value) > limit:
        raise Unreadable(field, f"a list of at most {limit} lines expected, got {type(value).__name__}")
    return [text(v, f"{field}[{i}]") for i, v in enumerate(value)]


def mapping(value, field: str) -> dict:
    if not isinstance(value, dict):
        raise Unreadable(field, f"a {type(value).__name__} where a table belongs")
    return value


def error(value, field: str = "error") -> dict | None:
    """{status, summary, details} of the learner's exception, or None; facts too where the worker sent
    them (an out-of-bounds access: the details without their generic advice)."""
    if value is None:
        return None
    value = mapping(value, field)
    status = text(value.get("status"), f"{field}.status", 20)
    if status not in STATUSES:
        raise Unreadable(f"{field}.status", f"{status!r} is not a status")
    out = {
        "status": status,
        "summary": text(value.get("summary", ""), f"{field}.summary"),
        "details": texts(value.get("details", []), f"{field}.details"),
    }
    if "facts" in value:
        out["facts"] = texts(value["facts"], f"{field}.facts")
    return out


def names(value, field: str, allowed: set[str]) -> list[str]:
    items = texts(value, field)
    unknown = [n for n in items if n not in allowed]
    if unknown:
        raise Unreadable(field, f"{unknown[0]!r} is not one of the case's tensors")
    return items


def counts_by_name(value, field: str, allowed: dict[str, int]) -> dict[str, int]:
    """{name: count} with each name among ``allowed`` and each count at most allowed[name]."""
    table = mapping(value, field)
    out = {}
    for name, n in table.items():
        if name not in allowed:
            raise Unreadable(field, f"{name!r} is not one of the case's tensors")
        out[name] = count(n, f"{field}[{name!r}]", allowed[name])
    return out


def loaded(reply: dict) -> dict:
    kind = reply.get("kind")
    if kind == "loaded":
        return {"kind": kind}
    status = text(reply.get("status", FAIL), "status", 20)
    if status not in (FAIL, TODO):  # a file that does not load is unfinished or wrong, nothing else
        raise Unreadable("status", f"{status!r} is not how a load ends")
    return {
        "kind": kind,
        "status": status,
        "summary": text(reply.get("summary", ""), "summary"),
        "details": texts(reply.get("details", []), "details"),
    }


MAX_DIMS = 8
MAX_RETURNED_BYTES = 1 << 30


def returned(value, field: str = "returned") -> dict | None:
    """The description of a launcher's returned tensor: dtype, size, stride, the span of bytes sent."""
    if value is None:
        return None
    value = mapping(value, field)
    if "not_a_tensor" in value:
        return {
            "not_a_tensor": text(value["not_a_tensor"], f"{field}.not_a_tensor", 200),
            "tensor_subclass": flag(value.get("tensor_subclass", False), f"{field}.tensor_subclass"),
        }
    dtype = text(value.get("dtype"), f"{field}.dtype", 20)
    if dtype not in DTYPES:
        raise Unreadable(f"{field}.dtype", f"{dtype!r} is not a dtype")
    size, stride = value.get("size"), value.get("stride")
    if not isinstance(size, list) or not isinstance(stride, list) or len(size) != len(stride) or len(size) > MAX_DIMS:
        raise Unreadable(f"{field}.size", "size and stride must be lists of the same length")
    out = {
        "dtype": dtype,
        "size": [count(s, f"{field}.size", 1 << 40) for s in size],
        "stride": [count(s, f"{field}.stride", 1 << 40) for s in stride],
        "span_nbytes": count(value.get("span_nbytes", 0), f"{field}.span_nbytes", MAX_RETURNED_BYTES),
        "ptr_mod_16": count(value.get("ptr_mod_16", 0), f"{field}.ptr_mod_16", 15),
        "shares_input": flag(value.get("shares_input", False), f"{field}.shares_input"),
        "has_bytes": flag(value.get("has_bytes", False), f"{field}.has_bytes"),
    }
    if "unwritten_by_kernel" in value:
        numel = 1
        for s in out["size"]:
            numel *= s
        out["unwritten_by_kernel"] = count(value["unwritten_by_kernel"], f"{field}.unwritten_by_kernel", numel)
    return out


def case_done(reply: dict, inputs: dict[str, int], outputs: dict[str, int]) -> dict:
    """A case's reply; ``inputs`` and ``outputs`` map the case's tensor names to their sizes."""
    out = {
        "kind": "case_done",
        "error": error(reply.get("error")),
        "launches": texts(reply.get("launches", []), "launches"),  # each kernel's name once
        "launch_count": count(reply.get("launch_count", 0), "launch_count"),
        "seconds": number(reply.get("seconds", 0.0), "seconds"),
        "returned": returned(reply.get("returned")),
        "flow": None,
    }
    flow = reply.get("flow")
    if flow is not None:
        flow = mapping(flow, "flow")
        out["flow"] = {
            "unread_inputs": names(flow.get("unread_inputs", []), "flow.unread_inputs", set(inputs)),
            "unread_elements": counts_by_name(flow.get("unread_elements", {}), "flow.unread_elements", inputs),
            "unwritten_by_kernel": counts_by_name(
                flow.get("unwritten_by_kernel", {}), "flow.unwritten_by_kernel", outputs
            ),
        }
    return out


def call_done(reply: dict) -> dict:
    out: dict = {"kind": "call_done"}
    if "missing" in reply:
        out["missing"] = flag(reply["missing"], "missing")
    if "todo" in reply:
        out["todo"] = text(reply["todo"], "todo")
    if "raised" in reply:
        out["raised"] = text(reply["raised"], "raised")
        out["frames"] = texts(reply.get("frames", []), "frames")
    if "value" in reply:
        out["value"] = plain_value(reply["value"], "value")
    return out


def plain_value(value, field: str, depth: int = 0):
    """A learner's return value as the worker made it plain: numbers, text, short lists, or a type's name."""
    if value is None or type(value) in (bool, int, float):
        return value
    if type(value) is str:
        return text(value, field)
    if type(value) is list and depth < 3 and len(value) <= 64:
        return [plain_value(v, f"{field}[{i}]", depth + 1) for i, v in enumerate(value)]
    if type(value) is dict and set(value) == {"not_plain"}:
        return {"not_plain": text(value["not_plain"], f"{field}.not_plain", 200)}
    raise Unreadable(field, f"a {type(value).__name__} where a plain value belongs")


def probe_done(reply: dict) -> dict:
    if reply.get("error") is not None:
        return {"kind": "probe_done", "error": error(reply["error"])}
    return {"kind": "probe_done", "facts": mapping(reply.get("facts", {}), "facts")}


def message(err: Unreadable) -> str:
    return (
        f"the process that ran your code sent a report the grader cannot read ({err.field}: {err.why}): "
        "the grader's own worker code never sends that, so something in the task file changed it"
    )


def speed_step(reply: dict) -> dict:
    """A timed window's report (``speed_ready``, ``speed_went``): the learner's error, if any, and how
    many kernels its calls launched. The time itself is never the worker's word: the grader's clock."""
    return {
        "kind": reply.get("kind"),
        "error": error(reply.get("error")),
        "launch_count": count(reply.get("launch_count", 0), "launch_count", 1 << 40),
    }
