"""Shared set-up for the grader's tests.

Every test runs in CPU mode (Triton's interpreter) against this checkout, and never touches the
learner's real progress.json: COURSE_PROGRESS points into a temporary folder for the whole session,
and the CLI helper gives each test its own progress file.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
WRONG = TESTS / "wrong"
GOOD = TESTS / "good"

# Before course_lib (and so Triton) is imported: the mode is decided at import.
os.environ.setdefault("COURSE_MODE", "cpu")
os.environ["COURSE_ROOT"] = str(ROOT)
_SESSION_DIR = tempfile.mkdtemp(prefix="course-tests-")
atexit.register(shutil.rmtree, _SESSION_DIR, True)
os.environ["COURSE_PROGRESS"] = str(Path(_SESSION_DIR) / "progress.json")
os.environ["COURSE_CACHE"] = str(Path(_SESSION_DIR) / "cache")  # time limits and peaks, timed afresh
os.environ.pop("COURSE_HIDDEN_CASES", None)
# The tests grade tests/wrong, tests/good and tmp folders by the hundred: they judge verdicts, so they
# run without the operating-system sandbox (about 2 s a worker). The tests of the sandbox itself, the
# hostile suite and the room tests ask for it explicitly (sandboxed=True, or `grade`).
os.environ["COURSE_SANDBOX"] = "off"

import pytest  # noqa: E402
import torch  # noqa: E402

import course_lib  # noqa: E402, F401  (sets up the interpreter before Triton is imported)
from course_lib import grader, runtime, tasks  # noqa: E402

requires_interpreter = pytest.mark.skipif(not runtime.is_cpu(), reason="checks Triton's interpreter (CPU mode)")

# The grader's operating-system sandbox (bubblewrap). Tests that need it skip on a machine without it,
# saying why; CI installs it and sets COURSE_TEST_SANDBOX=1, so that there they run or fail.
from course_lib.grader import sandbox as _sandbox  # noqa: E402

SANDBOX = _sandbox.available()
requires_sandbox = pytest.mark.skipif(
    not SANDBOX.ok and os.environ.get("COURSE_TEST_SANDBOX") != "1",
    reason=f"no grading sandbox here: {SANDBOX.reason}",
)


def task_names() -> list[str]:
    return [t.name for t in tasks.all_tasks()]


def assert_clean(proc: subprocess.CompletedProcess) -> None:
    """A command may fail, but never with a Python traceback."""
    assert "Traceback" not in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr


@pytest.fixture
def progress_file(tmp_path, monkeypatch) -> Path:
    """A fresh progress file for this test, also for course_lib calls made in this process."""
    path = tmp_path / "progress.json"
    monkeypatch.setenv("COURSE_PROGRESS", str(path))
    return path


def run_course(*args: str, progress: Path, env: dict | None = None, timeout: float = 300):
    """Run ``python -m course_lib ARGS`` from the repository root with the given progress file."""
    full_env = dict(os.environ)
    full_env["COURSE_PROGRESS"] = str(progress)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "course_lib", *args],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def cli(progress_file):
    """``cli("check", "vector_add")``: run the command line with this test's progress file."""

    def run(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        return run_course(*args, progress=progress_file, env=env, timeout=timeout)

    return run


@pytest.fixture(scope="session")
def isolated_grader():
    """The grader's fork server, started once, before any test changes the environment."""
    results = grader.grade(["vector_copy"], source="solutions", seed=0)
    assert results[0].passed, results[0]
    return grader


def _returning_inputs(case: tasks.Case, gen: torch.Generator) -> dict:
    return {"x": tasks.random_tensor(case, gen), "y": tasks.random_tensor(case, gen)}


RETURNING_TASK = tasks.TaskSpec(
    name="returning_add",
    chapter="99",
    title="x + y into a tensor the launcher allocates and returns (test-only task)",
    entry="returning_add",
    make_inputs=_returning_inputs,
    reference=lambda x, y: x + y,
    # "repeat" has the shape and dtype of "tail" with fresh inputs: a remembered result must fail it.
    cases=lambda mode: [
        tasks.Case((5,), torch.float32, "tiny"),
        tasks.Case((1000,), torch.float32, "tail"),
        tasks.Case((1000,), torch.float16, "tail"),
        tasks.Case((1000,), torch.float32, "repeat"),
    ],
    outputs=(),
)


@pytest.fixture
def returning_task(monkeypatch):
    """Register the test-only task ``returning_add`` (its launcher returns the output) for one test."""
    tasks.all_tasks()  # load the real tasks first
    monkeypatch.setitem(tasks._REGISTRY, RETURNING_TASK.name, RETURNING_TASK)
    return RETURNING_TASK


@pytest.fixture(autouse=True)
def _the_machine_keeps_its_dev_null():
    """A test must never touch a path other processes use: one that removed /dev/null (the grader's
    close() removes the worker log it was given) broke every later subprocess on the machine."""
    yield
    import stat

    mode = os.stat(os.devnull).st_mode if os.path.exists(os.devnull) else 0
    assert stat.S_ISCHR(mode), f"{os.devnull} is no longer a character device after this test"
