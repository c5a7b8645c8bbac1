"""A failure's report keeps what was found apart from the generic advice on it, from where it is made to
the grader's verdict: ``hooks.ReportLine`` (an out-of-bounds access: what was seen, and the likely causes or
"add a mask"), the worker's ``facts`` beside its ``details``, and ``compare.Verdict``'s ``finding`` and
``cause``. Where a task knows better (its ``out_of_bounds_hint``, its ``diagnose``), the grader shows the
facts and its own words, never the generic advice, which could contradict them. The tests read the advice
from those fields, never from its sentences."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from conftest import requires_interpreter

from course_lib import hooks, tasks
from course_lib.compare import compare
from course_lib.grader import cases, claims
from course_lib.grader.worker import _explain

HINT = "The task's own hint: the cause its exercise makes."


@triton.jit
def unmasked_copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))


def stopped_access() -> tuple[hooks.OutOfBoundsAccess, dict]:
    """A real out-of-bounds report (an unmasked load past the end of 10 elements) and the error the
    worker sends for it, as the grader reads it."""
    x, out = torch.arange(10, dtype=torch.float32), torch.zeros(16)
    try:
        unmasked_copy_kernel[(1,)](x, out, BLOCK=16)
    except Exception as e:
        error = claims.error(_explain(e, Path(__file__)))
        found = e
        while not isinstance(found, hooks.OutOfBoundsAccess):
            found = found.__cause__ or found.__context__
        return found, error
    pytest.fail("the unmasked load past the end was not stopped")


def judged(error: dict, hint: str) -> cases.Outcome:
    """The verdict on a case whose worker sent ``error``, for vector_add with ``hint`` as its own."""
    spec = dataclasses.replace(tasks.get("vector_add"), out_of_bounds_hint=hint)
    case = spec.cases("cpu")[0]
    return cases.judge(spec, case, cases.prepare(spec, case, 1), {"error": error}, None)


@requires_interpreter
def test_an_out_of_bounds_report_keeps_its_advice_apart():
    """The exception's message is its lines as a learner reads them; the worker sends them as details, and
    each line's fact alone (the learner's own frames after them) as facts."""
    access, error = stopped_access()
    advised = [line for line in access.lines if line.advice]
    assert len(advised) >= 2, access.lines  # the offsets pattern's likely cause, and "add a mask"
    assert str(access) == "\n".join(line.text() for line in access.lines)
    assert error["summary"] == "out-of-bounds access: " + access.lines[0].text()
    where = error["details"][len(access.lines) - 1 :]
    assert where and all(Path(__file__).name in line for line in where)  # the learner's frames
    assert error["details"] == [line.text() for line in access.lines[1:]] + where
    assert error["facts"] == [line.text(advice=False) for line in access.lines[1:]] + where
    again = pickle.loads(pickle.dumps(access))
    assert again.lines == access.lines and str(again) == str(access)


@requires_interpreter
def test_a_tasks_out_of_bounds_hint_leaves_the_generic_advice_out():
    """With a hint of its own, the report is the hint, then every fact and none of the advice; without
    one, the report is what the worker said, advice and all."""
    access, error = stopped_access()
    hinted = judged(error, HINT)
    assert hinted.raised and hinted.summary == error["summary"]
    assert hinted.details == [HINT, *error["facts"]]
    text = "\n".join([hinted.summary, *hinted.details])
    for line in access.lines:
        assert line.fact in text
        assert not line.advice or line.advice not in text, line
    plain = judged(error, "")
    assert plain.details == error["details"]
    assert all(line.advice in "\n".join(plain.details) for line in access.lines[1:])


def test_a_report_without_facts_apart_keeps_its_details_under_a_hint():
    """An error the worker sent without facts (an older worker) has no advice to leave out: its details
    follow the hint whole."""
    error = {"status": "fail", "summary": "out-of-bounds access: a load", "details": ["what was seen"]}
    assert judged(claims.error(error), HINT).details == [HINT, "what was seen"]


def test_a_diagnosis_leaves_the_comparisons_guess_out():
    """A wrong output the comparison guesses a cause for (a little off: precision?) is reported with that
    guess; where the task's diagnosis names the mistake, the finding's figures follow the diagnosis alone."""
    spec = tasks.get("vector_add")
    case = next(c for c in spec.cases("cpu") if c.dtype == torch.float32)
    outcomes = {}
    for named in ("the mistake the task names", None):
        diagnosed = dataclasses.replace(spec, diagnose=lambda inputs, got, case, named=named: named)
        prepared = cases.prepare(diagnosed, case, 1)
        expected = cases.reference_of(diagnosed, prepared.pristine)
        got = expected.clone()
        got.reshape(-1)[0] += 1e-3 + 1e-2 * abs(float(got.reshape(-1)[0]))  # one element a little off
        prepared.tensors["out"].copy_(got)
        verdict = compare(prepared.tensors["out"], expected, spec.tolerance[case.dtype])
        outcomes[named] = cases.judge(diagnosed, case, prepared, {"launches": ["add_kernel"]}, None), verdict
    (named, verdict), (plain, same) = outcomes.values()
    assert verdict.cause and verdict.summary == same.summary == f"{verdict.finding}: {verdict.cause}"
    assert named.diagnosed and named.summary == f"the mistake the task names ({verdict.finding})"
    assert verdict.cause not in named.summary
    assert not plain.diagnosed and plain.summary == verdict.summary
