"""Releasing an assignment (``python -m course_lib release OUT``, course_lib/release.py): the learner's
copy has no solutions and shows none, its doctor and notebooks work there, and its learners' files
are graded from the instructor's copy."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT
from nbclient import NotebookClient

from course_lib import release, stubs, tasks

SOLUTIONS = ROOT / "solutions"
LAST = max(spec.chapter for spec in tasks.all_tasks())  # the last chapter: its release holds every task


ALL_CHAPTERS = {f"{n:02d}" for n in range(11)}


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    """The assignment of the last chapter: every notebook and exercise is released, and the most cells withheld."""
    out = tmp_path_factory.mktemp("release") / "course"
    lines = release.release(out, {LAST}, ROOT)
    assert lines[0].startswith(f"released {out}: the assignment of chapter {LAST}")
    return out


def _runs(first: str):
    chapters = {task: tasks.get(task).chapter for task in (p.stem for p in SOLUTIONS.glob("*.py"))}
    return release.solution_runs(SOLUTIONS, {t: c for t, c in chapters.items() if c >= first}, chapters)


def _run(args, cwd, **env):
    environment = {k: v for k, v in os.environ.items() if k != "COURSE_ROOT"}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "course_lib", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_release_withholds_the_solutions_and_shows_none(released):
    for name in ("solutions", "tests", "scripts", "gradescope", ".git", ".ci"):
        assert not (released / name).exists(), name
    marker = json.loads((released / release.MARKER).read_text())
    assert "solutions" in marker["withheld"] and len(marker["exercises"]) == len(list(SOLUTIONS.glob("*.py")))
    for path in SOLUTIONS.glob("*.py"):  # each exercise as generated, and known to be untouched
        assert (released / "exercises" / path.name).read_text() == stubs.make_exercise(path.read_text(), path.stem)
        assert stubs.is_untouched(path.stem, released)
    assert release.shown_solutions(released, _runs(LAST)) == []
    assert not list(released.parent.glob(".course.releasing-*"))  # the staging folder became the copy
    assert "A released copy of the course" in (released / "README.md").read_text()
    # the records that print a solution's code are left out, and said so
    for path in marker["records_left_out"]:
        assert path.startswith("results/") and not (released / path).exists()


def test_released_notebooks_have_no_outputs_and_withhold_the_cells_that_run_solutions(released):
    withheld = 0
    for path in sorted((released / "notebooks").glob("*.ipynb")):
        original = json.loads((ROOT / "notebooks" / path.name).read_text())["cells"]
        for mine, theirs in zip(json.loads(path.read_text())["cells"], original, strict=True):
            source = "".join(mine["source"])
            if mine["cell_type"] == "code":
                assert mine["outputs"] == [] and mine["execution_count"] is None
            if release.NEEDS_SOLUTION not in theirs["metadata"].get("tags", []):
                assert source == "".join(theirs["source"])
                continue
            withheld += 1
            if mine["cell_type"] == "markdown":  # a walk through an answer
                assert source == release.WITHHELD_MARKDOWN
                continue
            assert source.startswith(release.WITHHELD_CELL)
            # the code stays, commented out, line for line
            kept = [line[2:] if line.startswith("# ") else line[1:] for line in source.splitlines()[3:]]
            assert kept == "".join(theirs["source"]).splitlines()
        # a notebook with withheld cells has no recorded run in the copy: it would print them
        if any(release.NEEDS_SOLUTION in c["metadata"].get("tags", []) for c in original):
            assert not list((released / "results").glob(f"notebook_runs_*/{path.stem}.txt"))
    assert withheld == json.loads((released / release.MARKER).read_text())["cells_withheld"] > 40


@pytest.mark.parametrize("name", ["02_first_kernel.ipynb", "09_pipelining.ipynb"])
def test_a_released_notebook_runs_top_to_bottom(released, name, tmp_path, monkeypatch):
    """Two notebooks of the release: 02 (its demonstrations write variants of the solution) and 09 (it
    shows the solution's source); every notebook's tagged cells are checked above."""
    monkeypatch.setenv("COURSE_PROGRESS", str(tmp_path / "progress.json"))
    monkeypatch.setenv("COURSE_MODE", "cpu")
    monkeypatch.delenv("COURSE_ROOT", raising=False)
    path = released / "notebooks" / name
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.get("output_type") == "error"]
    assert not errors
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "withheld in this released copy" in printed


def test_the_doctor_knows_a_released_copy(released):
    done = _run(["doctor"], cwd=released / "notebooks", COURSE_MODE="cpu", PYTHONPATH=str(ROOT))
    assert "a released copy" in done.stdout and "set COURSE_ROOT" not in done.stdout, done.stdout


def test_a_learner_checks_in_the_release_and_is_graded_from_the_instructors_copy(released, tmp_path):
    learner = tmp_path / "learner"
    shutil.copytree(released, learner)
    shutil.copy(SOLUTIONS / "vector_add.py", learner / "exercises" / "vector_add.py")
    env = {"COURSE_MODE": "cpu", "PYTHONPATH": str(ROOT), "COURSE_PROGRESS": str(tmp_path / "progress.json")}
    own = _run(["check", "vector_add"], cwd=learner, **env)
    assert own.returncode == 0 and own.stdout.startswith("PASS  vector_add"), own.stdout + own.stderr
    graded = _run(["check", "vector_add", "--source", str(learner / "exercises")], cwd=ROOT, **env)
    assert graded.returncode == 0 and graded.stdout.startswith("PASS  vector_add"), graded.stdout + graded.stderr
    untouched = _run(["check", "softmax", "--source", str(learner / "exercises")], cwd=ROOT, **env)
    assert untouched.returncode != 0 and "TODO" in untouched.stdout


# --------------------------------------------------------------------------------------------------
# the search for solutions' code, on a small course of its own


def _course(tmp_path: Path, notebook_code: str = "", record: str = "") -> Path:
    root = tmp_path / "instructor"
    (root / "solutions").mkdir(parents=True)
    (root / "notebooks").mkdir()
    (root / "results").mkdir()
    (root / "solutions" / "vector_add.py").write_text(
        textwrap.dedent(
            """\
            def twice(x, out):
                n = x.numel()
                # BEGIN SOLUTION
                # TODO: out = 2 x
                doubled = x * 2
                doubled = doubled.contiguous()
                out.copy_(doubled)
                # END SOLUTION
                return out
            """
        )
    )
    cell = {"cell_type": "code", "metadata": {}, "source": notebook_code, "outputs": [], "execution_count": 3}
    (root / "notebooks" / "02_a.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4}))
    (root / "results" / "run.txt").write_text(record)
    return root


def test_a_release_that_would_show_a_solution_is_refused_and_leaves_nothing(tmp_path):
    code = "import torch\ndoubled = x * 2\n  doubled = doubled.contiguous()  # a comment\nout.copy_(doubled)\n"
    root = _course(tmp_path, notebook_code=code)
    out = tmp_path / "out"
    with pytest.raises(release.ReleaseError, match="notebooks/02_a.ipynb shows solutions/vector_add.py"):
        release.release(out, {"02"}, root)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["instructor"]  # no copy, no staging folder left


def test_a_record_that_prints_a_solution_is_left_out_and_common_ground_is_no_find(tmp_path):
    # two of the three lines are not a run; a line the exercise gives (n = x.numel()) breaks none here
    root = _course(tmp_path, notebook_code="doubled = x * 2\nout.copy_(doubled)\n", record="doubled = x * 2\n"
                   "doubled = doubled.contiguous()\nout.copy_(doubled)\n")  # fmt: skip
    out = tmp_path / "out"
    lines = release.release(out, {"02"}, root)
    assert any("left out: results/run.txt" in line for line in lines)
    assert not (out / "results" / "run.txt").exists() and (out / "notebooks" / "02_a.ipynb").exists()
    assert json.loads((out / "notebooks" / "02_a.ipynb").read_text())["cells"][0]["execution_count"] is None
    assert not (out / "solutions").exists()


def test_release_refuses_a_folder_that_exists_or_lies_inside_or_a_course_without_solutions(tmp_path):
    root = _course(tmp_path)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.py").write_text("a learner's work")
    with pytest.raises(release.ReleaseError, match="exists"):
        release.release(tmp_path / "taken", {"02"}, root)
    assert (tmp_path / "taken" / "mine.py").read_text() == "a learner's work"
    with pytest.raises(release.ReleaseError, match="inside the course folder"):
        release.release(root / "release", {"02"}, root)
    with pytest.raises(release.ReleaseError, match="no solutions/"):
        release.release(tmp_path / "new", {"02"}, tmp_path / "taken")
    with pytest.raises(release.ReleaseError, match="not in the course"):
        release.release(tmp_path / "new", {"07"}, root)


def test_the_command_line_says_a_refusal_in_one_line(tmp_path):
    done = _run(["release", str(tmp_path), "--chapters", "06"], cwd=ROOT)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "exists" in done.stderr
    assert "Traceback" not in done.stderr
    done = _run(["release", str(tmp_path / "new"), "--chapters", "6-x"], cwd=ROOT)
    assert done.returncode == 2 and "is not a chapter" in done.stderr and not (tmp_path / "new").exists()
    assert release.parse_chapters("00-02,06") == {"00", "01", "02", "06"}


def test_on_a_gpu_a_released_copy_says_who_times_its_kernels(monkeypatch):
    from course_lib import runtime, sources
    from course_lib.grader import report
    from course_lib.grader.result import PASS, TaskResult

    passed = TaskResult(task="vector_add", status=PASS, summary="9 cases passed")
    monkeypatch.setattr(runtime, "is_cpu", lambda: False)
    assert not any("withholds" in line for line in report.footer([passed]))  # the instructor's copy
    monkeypatch.setattr(sources, "solution_present", lambda task: False)
    assert any("withholds (a released assignment)" in line for line in report.footer([passed]))


# --------------------------------------------------------------------------------------------------
# an assignment's scope, an interrupted release, a broken notebook, and the copy's own commands


def test_an_assignment_ends_where_a_later_exercise_gives_its_answers(tmp_path):
    """fused_linear (chapter 07) gives grouped_matmul's tile mapping (chapter 06): 06 and 07 in one
    assignment is refused; 06 alone releases notebooks and exercises up to chapter 06 only."""
    with pytest.raises(release.ReleaseError, match="exercises/fused_linear.py shows solutions/grouped_matmul.py"):
        release.release(tmp_path / "both", {"06", "07"}, ROOT)
    assert not (tmp_path / "both").exists()
    out = tmp_path / "six"
    release.release(out, {"06"}, ROOT)
    assert {p.name[:2] for p in (out / "notebooks").glob("*.ipynb")} == {f"{n:02d}" for n in range(7)}
    assert {p.stem for p in (out / "exercises").glob("*.py")} == {
        p.stem for p in SOLUTIONS.glob("*.py") if tasks.get(p.stem).chapter <= "06"
    }
    assert json.loads((out / release.MARKER).read_text())["tasks"] == ["grouped_matmul", "tiled_matmul"]


def test_an_interrupted_release_leaves_no_copy(tmp_path, monkeypatch):
    root, out = _course(tmp_path), tmp_path / "out"

    def interrupted(text, task):
        assert not out.exists()  # the copy is built elsewhere and renamed into place at the end
        raise KeyboardInterrupt

    monkeypatch.setattr(stubs, "make_exercise", interrupted)
    with pytest.raises(KeyboardInterrupt):
        release.release(out, {"02"}, root)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["instructor"]


def test_a_notebook_that_is_not_one_is_named(tmp_path):
    root = _course(tmp_path)
    (root / "notebooks" / "02_a.ipynb").write_text("{ not json")
    with pytest.raises(release.ReleaseError, match="notebooks/02_a.ipynb is not a notebook"):
        release.release(tmp_path / "out", {"02"}, root)


def test_sync_exercises_in_a_release_restores_what_was_released_and_keeps_edits(released, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(released, copy)
    (copy / "exercises" / "vector_add.py").unlink()
    (copy / "exercises" / "softmax.py").write_text("# mine\n")
    env = {"COURSE_MODE": "cpu", "PYTHONPATH": str(ROOT), "COURSE_PROGRESS": str(tmp_path / "progress.json")}
    done = _run(["sync-exercises"], cwd=copy, **env)
    assert done.returncode == 0 and "restored  exercises/vector_add.py" in done.stdout, done.stdout + done.stderr
    assert "1 with your edits kept" in done.stdout and (copy / "exercises" / "softmax.py").read_text() == "# mine\n"
    assert stubs.is_untouched("vector_add", copy)
    done = _run(["sync-exercises", "--force"], cwd=copy, **env)
    assert stubs.is_untouched("softmax", copy) and list((copy / "exercises").glob("softmax.py.bak-*"))


def test_in_a_release_bench_and_the_last_hint_say_the_solutions_are_withheld(released, monkeypatch, capsys, tmp_path):
    from course_lib import cli, runtime

    monkeypatch.setenv("COURSE_ROOT", str(released))
    monkeypatch.setenv("COURSE_PROGRESS", str(tmp_path / "progress.json"))
    assert cli.main(["hint", "vector_add", "99"]) == 0
    assert "withheld in this copy" in capsys.readouterr().out
    monkeypatch.setattr(runtime, "is_gpu", lambda: True)
    assert cli.main(["bench", "vector_add"]) == 2
    assert "withholds" in capsys.readouterr().err


def test_keep_hints_cuts_each_form_of_hint_list_and_leaves_others():
    source = textwrap.dedent(
        """\
        B_HINTS = [
            "b one",
            "b two " "joined",  # a comment
            "b three",
        ]
        register(TaskSpec(name="a", hints=["a one", "a two"], title="x"))
        register(_spec(name="b", hints=B_HINTS))
        register(TaskSpec(name="c", hints=["c one", "c two"]))
        """
    )
    cut, withheld = release.keep_hints(source, {"a", "b"}, 1)
    assert withheld == {"a": 1, "b": 2}
    lists = {
        task: [ast.literal_eval(e) for e in node.elts] for task, node in release._hint_lists(ast.parse(cut)).items()
    }
    assert lists == {"a": ["a one"], "b": ["b one"], "c": ["c one", "c two"]}
    none, _ = release.keep_hints(source, {"b"}, 0)
    assert [ast.literal_eval(e) for e in release._hint_lists(ast.parse(none))["b"].elts] == []


def test_a_release_can_keep_only_the_first_hints(tmp_path):
    out = tmp_path / "nine"
    lines = release.release(out, {"09"}, ROOT, hints=1)
    later = {t for t in (p.stem for p in SOLUTIONS.glob("*.py")) if tasks.get(t).chapter >= "09"}
    marker = json.loads((out / release.MARKER).read_text())
    assert set(marker["hints_withheld"]) == later and any(f"withheld ({len(later)} tasks)" in line for line in lines)
    env = {k: v for k, v in os.environ.items() if k != "COURSE_ROOT"}
    env.update(PYTHONPATH=str(out), COURSE_MODE="cpu", COURSE_PROGRESS=str(tmp_path / "progress.json"))
    code = "import json; from course_lib import tasks; print(json.dumps({s.name: s.hints for s in tasks.all_tasks()}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=out, env=env, capture_output=True, text=True, timeout=300)
    released = json.loads(done.stdout)
    for task, hints in released.items():
        original = tasks.get(task).hints
        assert hints == (original[:1] if task in later else original), task
    hint = subprocess.run(
        [sys.executable, "-m", "course_lib", "hint", "ws_matmul", "2"], cwd=out, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert "its other 3 are withheld until the assignment is over" in hint.stdout, hint.stdout + hint.stderr
