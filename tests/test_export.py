"""A room's gradebook for Gradescope and Canvas (course_lib/grader/export.py, gradescope/): the files
follow each system's documented format, a task the grading machine cannot run is never scored 0, and
the Gradescope autograder grades a submission in the sandbox, whose code cannot write the results."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from course_lib import cli, grader
from course_lib.grader import export, roster

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "gradescope"))
import make_autograder  # noqa: E402

# Gradescope's autograder specification (https://gradescope-autograders.readthedocs.io/en/latest/specs/)
TOP_KEYS = {
    "score", "execution_time", "output", "output_format", "test_output_format", "test_name_format", "visibility",
    "stdout_visibility", "extra_data", "tests", "leaderboard",
}  # fmt: skip
TEST_KEYS = {
    "score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags",
    "visibility", "extra_data",
}  # fmt: skip
VISIBILITY = {"visible", "hidden", "after_due_date", "after_published"}


def assert_gradescope_results(results: dict) -> None:
    """What Gradescope's specification asks of results.json, field by field."""
    assert set(results) <= TOP_KEYS, set(results) - TOP_KEYS
    assert isinstance(results["score"], float | int)
    assert isinstance(results.get("execution_time", 0), int)
    assert isinstance(results.get("output", ""), str)
    assert results.get("visibility", "visible") in VISIBILITY
    assert results.get("stdout_visibility", "visible") in VISIBILITY
    for test in results["tests"]:
        assert set(test) <= TEST_KEYS, set(test) - TEST_KEYS
        assert isinstance(test["name"], str) and isinstance(test["number"], str)
        assert isinstance(test["score"], float | int) and isinstance(test["max_score"], float | int)
        assert 0 <= test["score"] <= test["max_score"]
        assert test["status"] in ("passed", "failed")
        assert isinstance(test["output"], str) and all(isinstance(t, str) for t in test["tags"])
        assert test["visibility"] in VISIBILITY
    for entry in results.get("leaderboard", []):
        assert set(entry) <= {"name", "value", "order"} and isinstance(entry["name"], str)
        assert entry.get("order", "desc") in ("asc", "desc")
    assert results["score"] == pytest.approx(sum(t["score"] for t in results["tests"]))


def _row(learner, task, status, message="", **kw):
    kw.setdefault("submitted", "2026-12-03T09:00:00Z")
    return roster.make_row(learner, task, status, message, timestamp="2026-12-04T15:00:00Z", seed=7, seconds=1.5,
                           **kw)  # fmt: skip


def _gradebook(tmp_path, rows, name="grades.csv") -> Path:
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text(json.dumps(rows))
    else:
        path.write_text(roster.csv_text(rows))
    return path


ROWS = [
    _row("ada", "vector_add", "pass", "9 cases passed", tier="expert", us=188.1, fraction=0.89, speed_points=True),
    _row("ada", "softmax", "fail", "case 'tail' 2 of 9 elements are wrong"),
    _row("ada", "ws_matmul", "needs_gpu", "needs a Hopper GPU (sm_90) to run"),
    _row("ada", "vector_copy", "missing", "no file vector_copy.py"),
    _row("bob", "vector_add", "pass", "9 cases passed", same_file_as="ada"),
    _row("bob", "softmax", "pass", "9 cases passed"),
    _row("bob", "ws_matmul", "needs_gpu", "needs a Hopper GPU (sm_90) to run"),
    _row("bob", "vector_copy", "pass", "3 cases passed", submitted="2026-12-03T09:30:00Z"),
]


# Gradescope -------------------------------------------------------------------------------------


def test_gradescope_results_follow_the_specification_and_never_score_an_ungraded_task(tmp_path):
    rows = roster.read_rows(_gradebook(tmp_path, ROWS))
    results = export.gradescope_results(rows, "ada")
    assert_gradescope_results(results)
    tests = {t["name"]: t for t in results["tests"]}
    # in the course's order
    assert [t["name"] for t in results["tests"]] == ["vector_copy", "vector_add", "softmax", "ws_matmul"]
    assert (tests["vector_add"]["score"], tests["vector_add"]["max_score"], tests["vector_add"]["status"]) == (
        2.0, 2.0, "passed",
    )  # fmt: skip
    assert "speed: expert, 188.1 us a call" in tests["vector_add"]["output"]
    assert (tests["softmax"]["score"], tests["softmax"]["status"]) == (0.0, "failed")
    assert "2 of 9 elements are wrong" in tests["softmax"]["output"]
    # a Hopper task graded without a Hopper GPU: worth 0 of 0 here, and it says so
    assert (tests["ws_matmul"]["score"], tests["ws_matmul"]["max_score"]) == (0.0, 0.0)
    assert "not scored" in tests["ws_matmul"]["output"]
    assert results["score"] == 2.0 and "1 of 3 tasks graded here pass; 1 need a Hopper GPU" in results["output"]
    assert results["leaderboard"] == [{"name": "vector_add (us)", "value": 188.1, "order": "asc"}]
    bob = export.gradescope_results(rows, "bob")
    assert_gradescope_results(bob)
    assert "leaderboard" not in bob and "the same file as ada's" in bob["tests"][1]["output"]


def test_gradescope_export_writes_one_file_per_learner_and_reads_json_too(tmp_path, capsys):
    book = _gradebook(tmp_path, ROWS, "grades.json")
    assert cli.main(["export", str(book), "--to", "gradescope", "--out", str(tmp_path / "out")]) == 0
    for name in ("ada", "bob"):
        assert_gradescope_results(json.loads((tmp_path / "out" / name / "results.json").read_text()))
    one = tmp_path / "ada.json"
    args = ["export", str(book), "--to", "gradescope", "--learner", "ada", "--out", str(one), "--visibility", "hidden"]
    assert cli.main(args) == 0
    assert json.loads(one.read_text())["visibility"] == "hidden"
    assert cli.main(["export", str(book), "--to", "gradescope", "--learner", "zoe", "--out", str(one)]) == 2
    assert "no rows for 'zoe'" in capsys.readouterr().err


def test_an_export_of_what_is_no_gradebook_says_so(tmp_path, capsys):
    other = tmp_path / "notes.csv"
    other.write_text("a,b\n1,2\n")
    for path in (other, tmp_path / "absent.csv"):
        assert cli.main(["export", str(path), "--to", "gradescope"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "Traceback" not in err


def test_a_gradebook_edited_by_hand_or_unwritable_output_gets_a_message_not_a_traceback(tmp_path, capsys, monkeypatch):
    """A JSON gradebook that is not a list of rows, a tier without a time, two learner names that
    make one folder, the default --out with several learners, and an output that cannot be written."""
    for text in ("[1, 2]", '{"rows": []}', '[{"student_id": "ada"}]'):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        assert cli.main(["export", str(bad), "--to", "gradescope"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "not a gradebook" in err, err
    # a tier kept without its time: said, and no leaderboard entry
    tier_only = [dict(ROWS[0], time_us=None)]
    results = export.gradescope_results(tier_only, "ada")
    assert "speed: expert" in results["tests"][0]["output"] and "leaderboard" not in results
    # "a b" and "a_b" clean to one folder: refused, nothing written
    clash = [_row("a b", "vector_add", "pass"), _row("a_b", "vector_add", "fail", "wrong")]
    book = _gradebook(tmp_path, clash, "clash.csv")
    assert cli.main(["export", str(book), "--to", "gradescope", "--out", str(tmp_path / "clash")]) == 2
    assert "would both be written" in capsys.readouterr().err and not (tmp_path / "clash").exists()
    # several learners and no --out: a folder of its own name, not a folder called results.json
    monkeypatch.chdir(tmp_path)
    assert cli.main(["export", str(_gradebook(tmp_path, ROWS)), "--to", "gradescope"]) == 0
    assert (tmp_path / "gradescope_results" / "ada" / "results.json").is_file()
    assert not (tmp_path / "results.json").exists()
    capsys.readouterr()
    # an output folder that cannot be written
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "ada").write_text("a file where the folder would go")
    assert cli.main(["export", str(_gradebook(tmp_path, ROWS)), "--to", "gradescope", "--out", str(locked)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write") and "Traceback" not in err


# Canvas -----------------------------------------------------------------------------------------

ROSTER = (
    "Student,ID,SIS User ID,SIS Login ID,Section,Homework 1 (1234)\n"
    "    Points Possible,,,,,10\n"
    '"Lovelace, Ada",101,s-101,ada,Room A,9\n'
    '"=HYPERLINK(""x"")",102,s-102,bob,Room A,\n'
    '"Hopper, Grace",103,s-103,grace,Room B,\n'
)


def _roster(tmp_path) -> Path:
    path = tmp_path / "canvas_export.csv"
    path.write_text(ROSTER)
    return path


def _read(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_canvas_gets_one_row_per_student_matched_by_its_own_ids(tmp_path):
    rows = roster.read_rows(_gradebook(tmp_path, ROWS))
    text, notes = export.canvas_csv(rows, _roster(tmp_path))
    table = _read(text)
    assert table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                        "vector_copy", "vector_add", "softmax", "ws_matmul"]  # fmt: skip
    ada, bob = table[1], table[2]
    assert ada[:5] == ["Lovelace, Ada", "101", "s-101", "ada", "Room A"]
    assert ada[5:] == ["0", "2", "0", ""]  # missing is 0, a pass 1 and its expert tier 1; needs_gpu blank, not 0
    assert bob[0] == '\'=HYPERLINK("x")' and bob[5:] == ["1", "1", "1", ""]  # a formula is text
    assert len(table) == 3, "grace handed nothing in: her row is left out (Canvas keeps what it has)"
    assert any("left blank" in n for n in notes)
    total, _ = export.canvas_csv(rows, _roster(tmp_path), assignment="Triton room 1")
    assert _read(total) == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Triton room 1"],
        ["Lovelace, Ada", "101", "s-101", "ada", "Room A", "2"],
        ['\'=HYPERLINK("x")', "102", "s-102", "bob", "Room A", "3"],
    ]


def test_canvas_names_the_folders_no_student_matches(tmp_path, capsys):
    rows = roster.read_rows(_gradebook(tmp_path, [*ROWS, _row("zed", "vector_add", "pass")]))
    with pytest.raises(export.ExportError, match="1 learner folder.*zed"):
        export.canvas_csv(rows, _roster(tmp_path))
    text, notes = export.canvas_csv(rows, _roster(tmp_path), skip_unmatched=True)
    assert "zed" not in text and any("zed" in n for n in notes)
    # by another column, and the command line's errors
    text, _ = export.canvas_csv(roster.read_rows(_gradebook(tmp_path, [_row("s-103", "vector_add", "pass")])),
                                _roster(tmp_path), match="SIS User ID")  # fmt: skip
    assert _read(text)[1][:2] == ["Hopper, Grace", "103"]
    book = _gradebook(tmp_path, ROWS)
    assert cli.main(["export", str(book), "--to", "canvas"]) == 2
    assert "--roster" in capsys.readouterr().err
    canvas = ["export", str(book), "--to", "canvas", "--roster", str(_roster(tmp_path))]
    assert cli.main([*canvas, "--match", "Email"]) == 2
    assert "no column 'Email'" in capsys.readouterr().err
    no_ids = tmp_path / "names.csv"
    no_ids.write_text("Student\nAda\n")
    assert cli.main(["export", str(book), "--to", "canvas", "--roster", str(no_ids)]) == 2
    assert "no ID column" in capsys.readouterr().err
    out = tmp_path / "canvas.csv"
    assert cli.main(["export", str(book), "--to", "canvas", "--roster", str(_roster(tmp_path)), "--out", str(out)]) == 0
    assert _read(out.read_text())[1][3] == "ada"


# the Gradescope autograder ----------------------------------------------------------------------

TAMPER = """
# a correct vector_copy whose import also tries to write the results and read the hidden cases
for _path in ({results!r}, {hidden!r}):
    try:
        if _path.endswith("results.json"):
            with open(_path, "w") as _f:
                _f.write('{{"score": 100.0, "tests": []}}')
        else:
            with open(_path) as _f:
                print("READ THE HIDDEN CASES", len(_f.read()))
    except OSError:
        pass
"""


def _autograder(tmp_path, hidden: Path) -> Path:
    """The zip for vector_copy and vector_add, unpacked where Gradescope unpacks it: its /autograder."""
    made = make_autograder.make(["vector_copy", "vector_add"], tmp_path / "autograder.zip", hidden)
    with zipfile.ZipFile(made) as zf:
        names = set(zf.namelist())
        assert {"setup.sh", "run_autograder", "assignment.env", "hidden_cases.json"} <= names
        assert "course/course_lib/grader/roster.py" in names and "course/solutions/vector_copy.py" in names
        assert not any("/.venv/" in n or "__pycache__" in n for n in names)
        assert zf.read("assignment.env") == b"TASKS=vector_copy,vector_add\n"
        assert (zf.getinfo("run_autograder").external_attr >> 16) & 0o111
        autograder = tmp_path / "autograder"
        zf.extractall(autograder / "source")
    (autograder / "source" / "run_autograder").chmod(0o755)
    return autograder


def _submit(autograder: Path, files: dict[str, str]) -> tuple[dict, str]:
    """Gradescope's run for one upload (an exercises/ folder holding ``files``): results.json, output."""
    upload = autograder / "submission" / "exercises"
    if upload.exists():
        for old in upload.iterdir():
            old.unlink()
    upload.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (upload / name).write_text(text)
    results = autograder / "results" / "results.json"
    results.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "COURSE_ROOT"}  # the course is the zip's copy
    env.update({"AUTOGRADER_ROOT": str(autograder), "PYTHON": sys.executable})
    run = autograder / "source" / "run_autograder"
    done = subprocess.run(["bash", str(run)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(results.read_text())
    assert_gradescope_results(out)
    return out, done.stdout + done.stderr


def test_the_gradescope_autograder_grades_one_submission_and_its_code_cannot_write_the_results(tmp_path):
    hidden = tmp_path / "hidden.json"
    hidden.write_text("{}")
    autograder = _autograder(tmp_path, hidden)
    solution = (ROOT / "solutions" / "vector_copy.py").read_text()
    results, _ = _submit(autograder, {"vector_copy.py": solution, "notes.txt": "not a task"})
    tests = {t["name"]: t for t in results["tests"]}
    assert set(tests) == {"vector_copy", "vector_add"} and results["score"] == 1.0
    assert tests["vector_copy"]["status"] == "passed", tests["vector_copy"]["output"]
    assert tests["vector_add"]["status"] == "failed" and "MISSING" in tests["vector_add"]["output"]

    results_path = autograder / "results" / "results.json"
    hidden_path = autograder / "source" / "hidden_cases.json"
    tamper = solution + TAMPER.format(results=str(results_path), hidden=str(hidden_path))
    # the pre-check refuses the file (it opens files), and the results are the grader's
    results, output = _submit(autograder, {"vector_copy.py": tamper})
    assert results["score"] == 0.0 and "does not allow" in results["tests"][0]["output"]
    # past the pre-check, in the sandbox, the same file runs and passes, and reaches neither file
    (tmp_path / "file").mkdir()
    (tmp_path / "file" / "vector_copy.py").write_text(tamper)
    results_path.write_text("the grader's")
    result = grader.grade_task(
        "vector_copy", tmp_path / "file", 3, hidden=str(hidden_path), check_source=False, sandboxed=True
    )
    assert result.status == "pass", result.summary
    assert results_path.read_text() == "the grader's"
    assert "READ THE HIDDEN CASES" not in result.output + output


# nbgrader ---------------------------------------------------------------------------------------


def test_nbgrader_gets_the_grades_through_its_own_gradebook_and_an_export_again_updates_them(tmp_path, capsys):
    api = pytest.importorskip("nbgrader.api")
    db = f"sqlite:///{tmp_path / 'gradebook.db'}"
    book = _gradebook(tmp_path, ROWS)
    args = ["export", str(book), "--to", "nbgrader", "--db", db, "--assignment", "triton-1"]
    assert cli.main(args) == 0
    assert "left without a score" in capsys.readouterr().out

    def scores():
        with api.Gradebook(db) as gb:
            subs = {d["student"]: (d["score"], d["max_score"]) for d in gb.submission_dicts("triton-1")}
            waiting = gb.find_grade("ws_matmul", export.NBGRADER_NOTEBOOK, "triton-1", "ada")
            return subs, (waiting.auto_score, waiting.needs_manual_grade)

    subs, waiting = scores()
    with api.Gradebook(db) as gb:  # the hand-in's time: the newest of the learner's files
        assert gb.find_submission("triton-1", "bob").timestamp.isoformat().startswith("2026-12-03T09:30:00")
    # nbgrader's own sums: ada 0 + 2 + 0 + (ws_matmul, not scored) of 1 + 2 + 1 + 1; bob 1 + 1 + 1
    assert subs == {"ada": (2.0, 5.0), "bob": (3.0, 5.0)}
    assert waiting == (None, True), "a task not graded here has no score: it waits, it is not a 0"
    # the next run's gradebook: bob's softmax now fails, and a learner more
    again = [r if (r["student_id"], r["assignment"]) != ("bob", "softmax") else {**r, "status": "fail", "score": 0.0}
             for r in ROWS] + [_row("cy", "vector_copy", "pass")]  # fmt: skip
    assert cli.main(["export", str(_gradebook(tmp_path, again, "again.csv")), *args[2:]]) == 0
    subs, _ = scores()
    assert subs["bob"] == (2.0, 5.0) and subs["ada"] == (2.0, 5.0) and subs["cy"][0] == 1.0
    assert cli.main(["export", str(book), "--to", "nbgrader", "--db", db]) == 2
    assert "--assignment" in capsys.readouterr().err
