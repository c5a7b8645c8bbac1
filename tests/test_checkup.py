"""The doctor's report fits a notebook's output area: no line past 100 characters, labels in a
narrow column, a label too long for it on a line of its own."""

from __future__ import annotations

from course_lib import checkup
from course_lib.checkup import BAD, OK, WARN, Finding

LONG_DETAIL = (
    "CPU mode: kernels run in Triton's interpreter. Correctness is checked fully; speed is not measured "
    "here (interpreter time says nothing about GPU time): the course shows the roofline model instead."
)


def test_lines_fit_and_details_line_up():
    found = [
        Finding(OK, "mode", LONG_DETAIL),
        Finding(OK, "loop with a runtime bound"),
        Finding(WARN, "progress file", "short"),
    ]
    lines = checkup.format_findings(found).splitlines()
    assert all(len(line) <= checkup.LINE_WIDTH for line in lines), lines
    assert lines[0].startswith("[  ok] mode ") and "CPU mode" in lines[0]
    column = lines[0].index("CPU mode")
    assert column <= len("[  ok] ") + checkup.LABEL_WIDTH + 2
    continued = [line for line in lines[1:-1] if not line.startswith("[")]
    assert continued and all(line[:column].strip() == "" and line[column] != " " for line in continued)
    assert "[  ok] loop with a runtime bound" in lines
    assert lines[-1] == "Ready for the course."
    joined = " ".join(line.strip() for line in lines)
    assert " ".join(LONG_DETAIL.split()) in joined  # wrapped, nothing lost


def test_a_long_label_gets_its_own_line():
    label = "a label much longer than the column it would have to fit in"
    lines = checkup.format_findings([Finding(OK, "mode", "fine"), Finding(BAD, label, "why")]).splitlines()
    assert lines[1] == f"[FAIL] {label}"
    assert lines[2].strip() == "why" and lines[2].index("why") == lines[0].index("fine")
    assert lines[-1].startswith("Not ready")


def test_the_doctor_on_this_machine_fits():
    text = checkup.format_findings(checkup.run())
    assert all(len(line) <= checkup.LINE_WIDTH for line in text.splitlines() if "/" not in line), text
