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


def _gpu(major: int, minor: int, name: str = "a GPU"):
    from course_lib.runtime import GpuInfo

    return GpuInfo(name=name, capability=(major, minor), sm_count=40, memory_gib=16.0, l2_mib=4.0)


def test_the_doctor_knows_the_gpu_generations():
    """Below 8.0 Triton compiles nothing (a T4): CPU mode. Below 9.0 (and past it) the Hopper tasks are
    named. Hopper runs everything."""
    t4 = checkup.gpu_generation(_gpu(7, 5, "Tesla T4"))
    assert t4.level == BAD and "COURSE_MODE=cpu" in t4.detail and "7.5" in t4.detail
    for major, minor in ((8, 0), (8, 6), (8, 9), (10, 0), (12, 0)):
        finding = checkup.gpu_generation(_gpu(major, minor))
        assert finding.level == WARN, (major, minor)
        assert "ws_matmul (chapter 09)" in finding.detail and "ws_compression (chapter 10)" in finding.detail
    h100 = checkup.gpu_generation(_gpu(9, 0, "NVIDIA H100"))
    assert h100.level == OK and "every task runs here" in h100.detail
    lines = checkup.format_findings([t4, checkup.gpu_generation(_gpu(8, 6))]).splitlines()
    assert all(len(line) <= checkup.LINE_WIDTH for line in lines), lines
