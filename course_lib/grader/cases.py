"""The protected side of one case: make its inputs, poison its outputs, and judge what came back.

Everything here runs in the process that decides the verdict, never in the submission's: the
inputs come from the task's input maker and the case's seed, the outputs are NaN-poisoned buffers
with guard elements around them, the reference is computed in float64 from a pristine copy, and
the comparison, the guard checks and the data-flow rule read only the shared file and the worker's
plain report.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import tasks
from ..compare import compare, count_of, poison, still_poisoned
from .result import FAIL, PASS

GUARD_ELEMENTS = 64  # poisoned elements after each output, to catch writes past its end on a GPU


@dataclass
class Outcome:
    ok: bool
    summary: str
    details: list[str]
    status: str = FAIL
    diagnosed: bool = False  # the summary names a known mistake
    raised: bool = False  # the learner's code raised (or did not compile): no values to judge

    @classmethod
    def failed(cls, summary: str, details: list[str] | None = None, status: str = FAIL) -> Outcome:
        return cls(False, summary, details or [], status)


def guarded_output(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A poisoned buffer with the output as a view inside it, and guard elements after it."""
    offset = t.storage_offset()
    span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    buf = torch.empty(offset + span + GUARD_ELEMENTS, dtype=t.dtype)
    poison(buf)
    return buf.as_strided(t.size(), t.stride(), offset), buf


def _inside(view: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
    """Boolean over ``buf``: which of its elements belong to ``view``."""
    inside = torch.zeros(buf.numel(), dtype=torch.bool)
    rel = view.storage_offset() - buf.storage_offset()
    inside.as_strided(view.size(), view.stride(), rel).fill_(True)
    return inside


def _changed_outside(view: torch.Tensor, buf: torch.Tensor) -> int:
    """How many elements outside ``view`` but inside ``buf`` were changed."""
    return int((~still_poisoned(buf.reshape(-1)[~_inside(view, buf)])).sum())


def _between_rows(view: torch.Tensor, buf: torch.Tensor) -> int:
    """How many changed elements of ``buf`` lie in the gaps between the rows of a 2-D ``view`` whose
    rows are further apart than their length (0 for any other view)."""
    if view.dim() != 2 or view.shape[0] < 2 or view.stride(1) != 1 or view.stride(0) <= view.shape[1]:
        return 0
    gaps = torch.zeros(buf.numel(), dtype=torch.bool)
    start = view.storage_offset() - buf.storage_offset()
    gaps[start : start + (view.shape[0] - 1) * view.stride(0) + view.shape[1]] = True
    gaps &= ~_inside(view, buf)
    return int((gaps & ~still_poisoned(buf.reshape(-1))).sum())


@dataclass
class PreparedCase:
    """A case's tensors and values, made in the protected process."""

    order: list[str]  # the launcher's keyword arguments, in the input maker's order
    # inputs, output views and "<output> (guarded)" buffers around them: packed into the shared file,
    # then replaced by their shared views
    tensors: dict[str, torch.Tensor]
    values: dict  # plain keyword arguments (floats, ints, strings)
    pristine: dict  # the inputs as made, for the reference and the read-only check


def prepare(spec: tasks.TaskSpec, case: tasks.Case, seed: int) -> PreparedCase:
    made = spec.make_inputs(case, torch.Generator().manual_seed(seed))
    pristine = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in made.items() if k not in spec.outputs}
    tensors, values = {}, {}
    for name, value in made.items():
        if name in spec.outputs:
            tensors[name], tensors[f"{name} (guarded)"] = guarded_output(value)
        elif isinstance(value, torch.Tensor):
            tensors[name] = value
        else:
            values[name] = value
    return PreparedCase(list(made), tensors, values, pristine)


def _flow_outcome(flow: dict | None, launches: list[str], partly_read: frozenset = frozenset()) -> Outcome | None:
    """The data-flow rule (interpreter): kernels read every element of every input (some of each of
    ``partly_read``) and wrote every output element."""
    if not flow:
        return None
    unread = [name for name in flow.get("unread_inputs", []) if name not in partly_read]
    unwritten = {k: v for k, v in dict(flow.get("unwritten_by_kernel", {})).items() if v}
    partly = {
        k: v for k, v in dict(flow.get("unread_elements", {})).items() if v and k not in unread and k not in partly_read
    }
    kernels = ", ".join(f"`{k}`" for k in dict.fromkeys(launches))
    rule = [
        "In the interpreter the grader sees every load: each element of each input must be read by a",
        "launched kernel, and each output element written by one. The computing belongs in the kernel.",
    ]
    if unread:
        names = ", ".join(f"`{n}`" for n in unread)
        return Outcome.failed(
            f"no kernel read {names}: the launcher seems to compute the answer with torch and copy it with a "
            f"kernel ({kernels} ran, but not on {names})",
            rule,
        )
    if partly:
        name, count = next(iter(partly.items()))
        return Outcome.failed(
            f"{count_of(count, 'element', 'elements')} of the input `{name}` {'was' if count == 1 else 'were'} "
            "never read by a kernel, yet the output is right: something other than a kernel used them "
            "(torch, numpy or a hook in the launcher?)",
            rule,
        )
    if unwritten:
        name, count = next(iter(unwritten.items()))
        return Outcome.failed(
            f"{count_of(count, 'element', 'elements')} of `{name}` {'was' if count == 1 else 'were'} not written by "
            "any kernel, yet not NaN either: something "
            "other than a kernel wrote them (torch in the launcher?)",
            ["In the interpreter the grader sees every store: each output element must be written by a kernel."],
        )
    return None


def _as_reference_input(value, device: str | None = None):
    """A case's input as the float64 reference takes it: floating tensors in float64, on ``device``."""
    if not isinstance(value, torch.Tensor):
        return value
    value = value if device is None else value.to(device)
    return value.double() if value.is_floating_point() else value


def reference_of(spec: tasks.TaskSpec, inputs: dict, device: str | None = None) -> torch.Tensor:
    """The float64 reference output of ``inputs`` (floating tensors are taken in float64), computed on
    ``device`` when given and left there, so that the comparison runs there too: on the H200 the
    judging of a timed case (128 Mi elements) held the GPU 15-71 s with the copies and the comparison
    on the CPU (the share of each was not measured; a 16 Mi-element comparison takes 4.3 s here). A
    reference that fails there (one that runs on the CPU only, a GPU short of memory) is computed on
    the CPU instead."""
    if device is not None:
        try:
            expected = spec.reference(**{k: _as_reference_input(v, device) for k, v in inputs.items()})
            expected.reshape(-1)[:1].cpu()  # surfaces a failure of the device (and refuses the meta device)
            return expected
        except Exception:
            pass
    return spec.reference(**{k: _as_reference_input(v) for k, v in inputs.items()})


def judge(
    spec: tasks.TaskSpec,
    case: tasks.Case,
    prepared: PreparedCase,
    reply: dict,
    returned,
    device: str | None = None,
    diagnose: bool = True,
) -> Outcome:
    """The verdict on one case, from the shared tensors and the worker's plain report. ``device``: where
    the float64 reference is computed (this process's GPU when the grader has one: the capstone's
    published case is 464 GFLOP, seconds on a CPU shared with other jobs; the CPU by default, and
    whenever the reference fails on the device), and the diagnosis of a wrong output. ``diagnose``: False
    leaves a wrong output undiagnosed (the grader asks only until one failure is named)."""
    error = reply.get("error")
    if error:
        details = list(error["details"])
        if spec.out_of_bounds_hint and str(error["summary"]).startswith("out-of-bounds access"):
            # the task names the cause its exercise makes: what was seen stays, the generic advice (the likely
            # causes of an offsets pattern, "add a mask" on a load the exercise keeps unmasked) would contradict
            # it and goes. A report without facts apart has no advice to leave out
            details = [spec.out_of_bounds_hint, *error.get("facts", details)]
        failed = Outcome.failed(error["summary"], details, status=error["status"])
        failed.raised = True
        return failed
    launches = list(reply.get("launches", []))
    if not launches and not spec.torch_task:
        return Outcome.failed("no Triton kernel was launched: the launcher must launch at least one @triton.jit kernel")
    for name, before in prepared.pristine.items():
        if isinstance(before, torch.Tensor) and not torch.equal(prepared.tensors[name], before):
            return Outcome.failed(
                f"the kernel changed the input `{name}`: inputs are read-only (if nothing stores to it on "
                "purpose, a store ran past the end of another tensor into it: check the masks)"
            )
    if spec.outputs:
        name = spec.outputs[0]
        got, buf = prepared.tensors[name], prepared.tensors[f"{name} (guarded)"]
        changed = _changed_outside(got, buf)
        if changed:
            between = _between_rows(got, buf)
            return Outcome.failed(
                f"wrote outside the output: {count_of(changed, 'element', 'elements')} outside `{name}` changed, "
                f"{between} of them "
                f"between its rows: `{name}`'s rows are {got.stride(0)} elements apart, more than a row's "
                f"{got.shape[-1]}; address rows with the output's row stride, not the row length"
                if between
                else f"wrote outside the output: {count_of(changed, 'element', 'elements')} just before or after "
                f"`{name}` changed "
                "(a mask or the grid lets programs write past the end)"
            )
    else:
        meta = reply.get("returned") or {}
        if returned is None:
            kind = meta.get("not_a_tensor", "nothing")
            if meta.get("tensor_subclass"):
                return Outcome.failed(
                    f"the launcher returned a {kind}, a subclass of torch.Tensor: return a torch.Tensor itself (a "
                    "subclass may say anything of its own layout, so the grader takes none)"
                )
            return Outcome.failed(f"the launcher returned {kind}, not a tensor")
        got = returned
    flow_meta = dict(reply.get("flow") or {})
    if not spec.outputs and reply.get("returned") and "unwritten_by_kernel" in reply["returned"]:
        flow_meta["unwritten_by_kernel"] = {"the returned tensor": reply["returned"]["unwritten_by_kernel"]}
    flowed = _flow_outcome(flow_meta, launches, spec.partly_read)
    expected = reference_of(spec, prepared.pristine, device)
    if tuple(got.shape) != tuple(expected.shape):
        return Outcome.failed(f"wrong shape: got {tuple(got.shape)}, expected {tuple(expected.shape)}")
    if got.dtype != case.dtype:
        return Outcome.failed(f"wrong dtype: got {got.dtype}, expected {case.dtype}")
    try:  # where the reference is: on the grader's GPU when it was computed there
        verdict = compare(got, expected, spec.tolerance[case.dtype], poisoned=True)
    except Exception:
        if expected.device.type == "cpu":
            raise
        verdict = compare(got, expected.cpu(), spec.tolerance[case.dtype], poisoned=True)  # a GPU short of memory
    if verdict.ok and flowed is not None:
        return flowed
    if verdict.ok and spec.check_layout is not None:
        try:
            ok, summary, details = spec.check_layout(case, dict(reply.get("returned") or {}), reply.get("span"))
        except Exception as e:  # a layout the check cannot read is a layout it cannot accept
            ok, summary, details = (
                False,
                f"the grader cannot read the returned tensor's layout ({type(e).__name__})",
                [],
            )
        if not ok:
            return Outcome(False, summary, list(details), FAIL, True)
    if verdict.ok:
        return Outcome(True, verdict.summary, verdict.details, PASS)
    found = _diagnosis(spec, prepared.pristine, got, case, device) if diagnose else None
    # a diagnosis names the mistake: the comparison's own guess at a cause (precision, "a slightly wrong
    # formula") would only blur it, so what it found alone goes in the parentheses
    summary = f"{found} ({verdict.finding})" if found else verdict.summary
    return Outcome(False, summary, verdict.details, FAIL, found is not None)


def _diagnosis(spec, pristine: dict, got: torch.Tensor, case: tasks.Case, device: str | None = None) -> str | None:
    """The task's guess at a known mistake behind a wrong output; never fails the grading itself. An
    output with NaN is diagnosed too (compare never passes a NaN, so a diagnosis that compares the whole
    output does not match it): a mistake may leave NaN where it leaves no key (a causal mask without
    its diagonal leaves the first query none). Each guess is a float64 computation of the task's size: on
    ``device`` (the grader's GPU) when given, else, or when that fails, on the CPU. On the H100
    (2026-12-05) eight gradings side by side spent 20-30 s judging a wrong attention of 300 keys on the
    CPU, under the GPU's shared hold."""
    if spec.diagnose is None:
        return None
    for where in ([device] if device else []) + [None]:
        try:
            inputs = {k: _as_reference_input(v, where) for k, v in pristine.items()}
            return spec.diagnose(inputs, got.detach().to(where or "cpu", torch.float64), case)
        except Exception:
            continue
    return None
