"""Hidden cases: instructors add shapes from a file outside the repository (COURSE_HIDDEN_CASES)."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from course_lib import grader, runtime, tasks
from course_lib.grader import FAIL, PASS

HIDDEN = {
    "vector_add": [
        {"shape": [200_000], "dtype": "float32"},
        {"shape": [77], "dtype": "float16", "misaligned": True, "label": "hidden-misaligned"},
    ]
}


@pytest.fixture
def hidden_file(tmp_path):
    path = tmp_path / "hidden.json"
    path.write_text(json.dumps(HIDDEN))
    return path


def public_case_count(task: str) -> int:
    return len(tasks.get(task).all_cases(runtime.MODE))


def test_hidden_cases_are_added_and_graded(hidden_file, monkeypatch):
    public = public_case_count("vector_add")
    monkeypatch.setenv("COURSE_HIDDEN_CASES", str(hidden_file))
    labels = [c.label for c in tasks.get("vector_add").all_cases(runtime.MODE)]
    assert labels[public:] == ["hidden", "hidden-misaligned"]
    result = grader.grade_task("vector_add", "solutions", seed=11)
    assert result.status == PASS, result.summary
    assert result.cases_total == public + len(HIDDEN["vector_add"])


def test_hidden_case_catches_what_the_public_ones_miss(hidden_file, monkeypatch, tmp_path):
    """A launcher that caps the grid at 128 programs passes every public case (the largest needs
    98) but not a hidden one of 200,000 elements."""
    source = tmp_path / "submission"
    source.mkdir()
    text = (ROOT / "solutions" / "vector_add.py").read_text()
    capped = text.replace(
        "grid = (triton.cdiv(n_elements, BLOCK_SIZE),)", "grid = (min(triton.cdiv(n_elements, BLOCK_SIZE), 128),)"
    )
    assert capped != text
    (source / "vector_add.py").write_text(capped)

    assert grader.grade_task("vector_add", source, seed=11).status == PASS
    monkeypatch.setenv("COURSE_HIDDEN_CASES", str(hidden_file))
    result = grader.grade_task("vector_add", source, seed=11)
    assert result.status == FAIL
    assert result.summary.startswith("case 'hidden'") and "never written" in result.summary, result.summary


def test_hidden_cases_through_the_command_line(hidden_file, cli):
    run = cli("check", "vector_add", "--solutions", "--json", env={"COURSE_HIDDEN_CASES": str(hidden_file)})
    [result] = json.loads(run.stdout)
    assert result["status"] == PASS, result
    assert result["cases_total"] == public_case_count("vector_add") + len(HIDDEN["vector_add"])


def test_hidden_cases_set_after_the_grader_started(hidden_file, monkeypatch, isolated_grader):
    """A notebook sets COURSE_HIDDEN_CASES after a first check(): the next check must see it."""
    before = isolated_grader.grade(["vector_add"], source="solutions", seed=3)[0]
    monkeypatch.setenv("COURSE_HIDDEN_CASES", str(hidden_file))
    after = isolated_grader.grade(["vector_add"], source="solutions", seed=3)[0]
    assert before.status == after.status == PASS
    assert after.cases_total == before.cases_total + len(HIDDEN["vector_add"])
