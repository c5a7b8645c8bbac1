"""exercises/ from solutions/: the stub generator and sync-exercises (never loses a learner's edits)."""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest
from conftest import ROOT, assert_clean

from course_lib import stubs
from course_lib.stubs import MANIFEST, NOT_IMPLEMENTED, MarkerError, make_exercise

SAMPLE = textwrap.dedent(
    '''\
    """Sample task."""

    import triton
    import triton.language as tl


    @triton.autotune(
        configs=[triton.Config({"BLOCK_SIZE": 128})],
        key=["n_elements"],
    )
    @triton.jit
    def sample_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
        offsets = tl.arange(0, BLOCK_SIZE)
        # BEGIN SOLUTION
        # TODO: load x and store 2 * x.
        # TODO: mask the tail.
        mask = offsets < n_elements
        tl.store(out_ptr + offsets, 2 * tl.load(x_ptr + offsets, mask=mask), mask=mask)
        # END SOLUTION


    def sample(x, out):
        """out[:] = 2 * x."""
        if x.numel() == 0:
            return out
        # BEGIN SOLUTION
        sample_kernel[(1,)](x, out, x.numel())
        # END SOLUTION
        return out
    '''
)


def outside_regions(text: str) -> list[str]:
    lines, inside = [], False
    for line in text.splitlines():
        if line.strip() in ("# BEGIN SOLUTION", "# END SOLUTION"):
            inside = line.strip() == "# BEGIN SOLUTION"
        elif not inside:
            lines.append(line)
    return lines


def test_make_exercise_keeps_todo_and_stubs_each_region():
    text = make_exercise(SAMPLE, "sample")
    compile(text, "exercises/sample.py", "exec")
    lines = text.splitlines()
    # the kernel region: its TODO block, then a static assert that stops interpreter and compiler alike
    i = lines.index("    # TODO: load x and store 2 * x.")
    assert lines[i + 1] == "    # TODO: mask the tail."
    assert lines[i + 2] == f'    tl.static_assert(False, "{NOT_IMPLEMENTED}: sample_kernel in exercises/sample.py")'
    # the host region, which has no TODO block: a default one, then a raise at the region's indent
    j = next(k for k, line in enumerate(lines) if "raise NotImplementedError" in line)
    assert lines[j - 1] == "    # TODO: write this part."
    assert lines[j] == f'    raise NotImplementedError("{NOT_IMPLEMENTED}: sample in exercises/sample.py")'
    # the solution is gone; everything outside the regions is kept, in order
    assert "tl.store" not in text and "sample_kernel[(1,)]" not in text
    assert "# BEGIN SOLUTION" not in text and "# END SOLUTION" not in text
    remaining = iter(lines)
    assert all(any(line == kept for kept in remaining) for line in outside_regions(SAMPLE))
    assert "python -m course_lib check sample" in text


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("x = 1\n# END SOLUTION\n", ":2:"),
        ("x = 1\n# BEGIN SOLUTION\nx = 2\n", ":2:"),
        ("# BEGIN SOLUTION\n# BEGIN SOLUTION\nx = 2\n# END SOLUTION\n", ":2:"),
        ("x = 1\n", "has no"),
    ],
    ids=["end-without-begin", "begin-without-end", "nested", "no-region"],
)
def test_marker_errors(text, where):
    with pytest.raises(MarkerError) as info:
        make_exercise(text, "broken")
    assert "solutions/broken.py" in str(info.value) and where in str(info.value)


def test_every_real_solution_makes_an_exercise_that_compiles():
    for solution in sorted((ROOT / "solutions").glob("*.py")):
        text = make_exercise(solution.read_text(), solution.stem)
        compile(text, f"exercises/{solution.name}", "exec")
        assert NOT_IMPLEMENTED in text


# --------------------------------------------------------------------------------------------------
# sync() in a scratch course


@pytest.fixture
def course(tmp_path):
    """A scratch course root with two solutions and no exercises yet."""
    (tmp_path / "solutions").mkdir()
    for name in ("vector_add.py", "vector_copy.py"):
        shutil.copy(ROOT / "solutions" / name, tmp_path / "solutions" / name)
    return tmp_path


def snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.exists() else None


def test_sync_creates_missing_exercises_and_a_manifest(course):
    report = stubs.sync(course)
    assert sorted(report.written) == ["vector_add.py", "vector_copy.py"]
    for name in report.written:
        wanted = make_exercise((course / "solutions" / name).read_text(), name[:-3])
        assert (course / "exercises" / name).read_text() == wanted
        assert stubs.is_untouched(name[:-3], course)
    assert set(json.loads((course / "exercises" / MANIFEST).read_text())) == {"vector_add.py", "vector_copy.py"}
    again = stubs.sync(course)
    assert again.written == [] and sorted(again.unchanged) == ["vector_add.py", "vector_copy.py"]


def test_sync_uses_course_root_from_the_environment(course, monkeypatch):
    monkeypatch.setenv("COURSE_ROOT", str(course))
    report = stubs.sync()
    assert sorted(report.written) == ["vector_add.py", "vector_copy.py"]
    assert (course / "exercises" / "vector_add.py").exists()


def test_sync_keeps_an_edited_exercise_and_says_so(course):
    stubs.sync(course)
    target = course / "exercises" / "vector_add.py"
    mine = target.read_text().replace("raise NotImplementedError", "pass  # my attempt\n    # raise")
    target.write_text(mine)
    assert not stubs.is_untouched("vector_add", course)

    report = stubs.sync(course)
    assert report.kept_edits == ["vector_add.py"] and report.written == []
    assert target.read_text() == mine
    assert any(
        line.startswith("kept") and "vector_add.py" in line and "--force" in line for line in report.lines(False)
    )


def test_sync_force_replaces_an_edited_exercise_and_backs_it_up(course):
    stubs.sync(course)
    target = course / "exercises" / "vector_add.py"
    mine = target.read_text() + "\n# my notes\n"
    target.write_text(mine)

    report = stubs.sync(course, force=True)
    assert report.written == ["vector_add.py"]
    assert target.read_text() == make_exercise((course / "solutions" / "vector_add.py").read_text(), "vector_add")
    assert len(report.backups) == 1
    backup = course / report.backups[0]
    assert backup.read_text() == mine
    assert backup.name.startswith("vector_add.py.bak-")


def test_sync_updates_an_untouched_exercise_when_the_solution_changes(course):
    stubs.sync(course)
    solution = course / "solutions" / "vector_copy.py"
    solution.write_text(solution.read_text().replace("# TODO: store x", "# TODO: now store x"))
    report = stubs.sync(course)
    assert report.written == ["vector_copy.py"] and report.backups == [] and report.kept_edits == []
    assert "# TODO: now store x" in (course / "exercises" / "vector_copy.py").read_text()


def test_sync_check_reports_drift_and_writes_nothing(course):
    stubs.sync(course)
    (course / "exercises" / "vector_add.py").write_text("# edited\n")
    (course / "exercises" / "vector_copy.py").unlink()
    before = snapshot(course / "exercises")

    report = stubs.sync(course, check=True)
    assert sorted(report.drift) == ["vector_add.py", "vector_copy.py"]
    assert snapshot(course / "exercises") == before
    assert any(line.startswith("drift") and "vector_add.py" in line for line in report.lines(True))


def test_sync_check_on_a_course_without_exercises_creates_nothing(course):
    report = stubs.sync(course, check=True)
    assert sorted(report.drift) == ["vector_add.py", "vector_copy.py"]
    assert not (course / "exercises").exists()


def test_cli_sync_check_and_marker_errors(course, cli):
    env = {"COURSE_ROOT": str(course)}
    drift = cli("sync-exercises", "--check", env=env)
    assert drift.returncode == 1 and "drift" in drift.stdout
    assert cli("sync-exercises", env=env).returncode == 0
    assert cli("sync-exercises", "--check", env=env).returncode == 0

    (course / "solutions" / "broken.py").write_text("x = 1\n# END SOLUTION\n")
    broken = cli("sync-exercises", env=env)
    assert_clean(broken)
    assert broken.returncode == 2
    assert "error: solutions/broken.py:2" in broken.stderr


def test_cli_sync_check_passes_on_this_repository(cli):
    run = cli("sync-exercises", "--check")
    assert_clean(run)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "files, all as generated (none edited yet)" in run.stdout


def test_sync_summary_says_what_a_learner_has(course):
    """Fresh: every file as generated. Then the counts of what was written, kept and left as it was."""
    assert stubs.sync(course).lines(False)[-1] == "exercises/: 2 files: 2 written now"
    assert stubs.sync(course).lines(False)[-1] == "exercises/: 2 files, all as generated (none edited yet)"
    assert stubs.sync(course, check=True).lines(True)[-1] == "exercises/: 2 files, all as generated (none edited yet)"
    (course / "exercises" / "vector_add.py").write_text("# my attempt\n")
    assert stubs.sync(course).lines(False)[-1] == "exercises/: 2 files: 1 already as generated, 1 with your edits, kept"
    assert stubs.sync(course, check=True).lines(True)[-1] == (
        "exercises/: 2 files: 1 as generated, 1 differs from what solutions/ generates"
    )
    (course / "solutions" / "vector_copy.py").unlink()
    assert stubs.sync(course).lines(False)[-1] == "exercises/: 1 file: 1 with your edits, kept"
