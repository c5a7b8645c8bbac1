"""Show grading results: a line per task in a terminal, a table in a notebook."""

from __future__ import annotations

import html
from collections import Counter

from .. import runtime, sources, tasks
from .result import CRASH, FAIL, NEEDS_GPU, PASS, TIMEOUT, TODO, TaskResult

LABEL = {PASS: "PASS", FAIL: "FAIL", TODO: "TODO", TIMEOUT: "HANG", CRASH: "CRASH", NEEDS_GPU: "GPU"}
COLOUR = {
    PASS: "#1a7f37", FAIL: "#cf222e", TODO: "#9a6700", TIMEOUT: "#cf222e", CRASH: "#cf222e", NEEDS_GPU: "#0969da",
}  # fmt: skip


def settled(r: TaskResult) -> bool:
    """Nothing is wrong with this result: it passed, or its cases need a GPU this machine lacks and
    every check that could run here passed (the command line's exit code counts these as fine)."""
    return r.status in (PASS, NEEDS_GPU)


def result_lines(r: TaskResult, width: int = 14, output: bool = True) -> list[str]:
    lines = [f"{LABEL[r.status]:<5} {r.task:<{width}} {r.summary}"]
    lines += [f"      {d}" for d in r.details]
    if output and r.output.strip() and r.status != PASS:
        lines.append("      your code printed:")
        lines += [f"        {line}" for line in r.output.rstrip().splitlines()[-40:]]
    return lines


def footer(results: list[TaskResult]) -> list[str]:
    """The lines under the results: how many pass, how many by speed tier, and where speed is graded."""
    rows = []
    passed = sum(r.passed for r in results)
    waiting = sum(r.status == NEEDS_GPU for r in results)
    if len(results) > 1:
        rows.append(f"{passed} of {len(results)} tasks pass" + (f"; {waiting} need a Hopper GPU" if waiting else ""))
    tiers = Counter(r.tier for r in results if r.passed and r.tier)
    if tiers:
        order = ("expert", "fast", "works")
        rows.append("speed tiers: " + ", ".join(f"{tiers[t]} {t}" for t in order if tiers.get(t)))
    elif any(r.passed and _has_tiers(r.task) for r in results) and runtime.is_cpu():
        rows.append(
            "speed tiers (works / fast / expert) are graded on a GPU only: here the interpreter checks that "
            "kernels are right, and its times are no kernel's speed"
        )
    elif any(r.passed and _has_tiers(r.task) and not sources.solution_present(r.task) for r in results):
        rows.append(
            "speed tiers (works / fast / expert) are measured against the course's solutions, which this copy "
            "withholds (a released assignment): your instructor's grading times them"
        )
    return rows


def _has_tiers(task: str) -> bool:
    try:
        return tasks.get(task).speed_tiers() is not None
    except KeyError:
        return False


def text(results: list[TaskResult]) -> str:
    width = max([len(r.task) for r in results] + [8])
    rows = []
    for r in results:
        rows += result_lines(r, width)
    return "\n".join(rows + footer(results))


class Report:
    """What ``check()`` returns in a notebook: readable as text and as HTML, never an exception."""

    def __init__(self, results: list[TaskResult]):
        self.results = results

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return text(self.results)

    def _repr_html_(self) -> str:
        rows = []
        for r in self.results:
            body = "\n".join(r.details)
            if r.output.strip() and r.status != PASS:
                body += "\n\nyour code printed:\n" + r.output.rstrip()
            # JupyterLab's own style breaks a <pre> inside any word ("store" / "d"): lines wrap between words
            pre = "margin:4px 0 0 0; white-space:pre-wrap; word-break:normal; overflow-wrap:break-word"
            detail = f"<pre style='{pre}'>{html.escape(body)}</pre>" if body.strip() else ""
            style = f"color:{COLOUR[r.status]};font-weight:bold;vertical-align:top"
            rows.append(
                f"<tr><td style='{style}'>{LABEL[r.status]}</td>"
                f"<td style='vertical-align:top'><code>{html.escape(r.task)}</code></td>"
                f"<td style='text-align:left'>{html.escape(r.summary)}{detail}</td></tr>"
            )
        return "<table>" + "".join(rows) + "</table>"
