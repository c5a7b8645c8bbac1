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


@pytest.mark.parametrize(
    "table, said",
    [
        ({"flash_attention": [{"shape": [1, 2, 90, 64]}]}, "dtype float32 (the default when none is given) is not one"),
        (
            {"paged_decode": [{"shape": [3, 4], "dtype": "bfloat16"}]},
            "a shape of 2 dimensions; this task's cases have 3",
        ),
        ({"flash_attention": [{"shape": [1, 2, 90, 64], "dtype": "float16", "foo": 1}]}, "foo is no option"),
        ({"vector_add": [{"shape": [0], "dtype": "float16"}]}, "a list of positive integers"),
        ({"vector_add": [{"dtype": "float16"}]}, 'an object with a "shape"'),
        ({"no_such_task": []}, "does not have"),
    ],
)
def test_a_hidden_case_the_task_cannot_grade_is_refused_before_grading(tmp_path, table, said):
    """A case the task cannot grade (a dtype it has no tolerance for, a shape of the wrong rank, an option it
    does not take) is named before any learner is graded: it crashed every learner's row with the grader's
    own traceback, or (an unknown option) was dropped without a word."""
    path = tmp_path / "hidden.json"
    path.write_text(json.dumps(table))
    with pytest.raises(tasks.HiddenCaseError, match=said.replace("(", r"\(").replace(")", r"\)")):
        tasks.check_hidden(str(path))
    room = tmp_path / "room"
    (room / "alice").mkdir(parents=True)
    from course_lib.grader import roster

    with pytest.raises(roster.UsageError, match="the hidden cases file"):
        roster.grade_room(room, tmp_path / "grades.csv", ["vector_add"], hidden=str(path), progress=False)


def test_a_hidden_case_takes_the_options_of_the_tasks_own_cases(tmp_path):
    """Chapter 11's hidden cases name their options as the task's own cases do (causal, KV heads, page,
    context lengths): a grouped-query case catches a decode that reads the wrong KV head."""
    path = tmp_path / "hidden.json"
    path.write_text(json.dumps({
        "paged_decode": [{"shape": [2, 8, 64], "dtype": "float16", "kv_heads": 2, "page": 16, "contexts": [40, 300],
                          "label": "hidden GQA"}],
        "flash_attention": [{"shape": [1, 2, 90, 64], "dtype": "float16", "causal": True}],
    }))  # fmt: skip
    (case,) = tasks.hidden_cases("paged_decode", str(path))
    assert case.options == {"kv_heads": 2, "page": 16, "contexts": (40, 300)}
    assert tasks.hidden_cases("flash_attention", str(path))[0].options == {"causal": True}
    assert grader.grade_task("paged_decode", "solutions", seed=3, hidden=str(path)).status == PASS
    only_hidden = tmp_path / "only_hidden"
    only_hidden.mkdir()
    text = (ROOT / "tests" / "wrong" / "ch11_decode_head_modulo" / "paged_decode.py").read_text()
    (only_hidden / "paged_decode.py").write_text(text)
    result = grader.grade_task("paged_decode", only_hidden, seed=3, hidden=str(path))
    assert result.status == FAIL and "hidden GQA" in "\n".join([result.summary, *result.details])


def test_a_hidden_case_the_solution_fails_is_refused_before_grading(tmp_path):
    """A hidden case the course's own solution cannot pass (head dim 96: its tiles are powers of two) would
    fail every learner: grade tries the solutions on the hidden cases first and says so."""
    from course_lib.grader import roster

    path = tmp_path / "hidden.json"
    path.write_text(json.dumps({"flash_attention": [{"shape": [1, 2, 70, 96], "dtype": "float16"}]}))
    room = tmp_path / "room"
    (room / "alice").mkdir(parents=True)
    with pytest.raises(roster.UsageError, match="the course's solution of flash_attention does not pass the hidden"):
        roster.grade_room(room, tmp_path / "grades.csv", ["flash_attention"], hidden=str(path), progress=False)
