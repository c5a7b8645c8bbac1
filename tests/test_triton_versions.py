"""The interpreter hooks on every supported Triton version.

The main install has the newest Triton. CI also installs 3.6.0, 3.7.1 and 3.8.0 into folders named
by COURSE_EXTRA_TRITONS (':'-separated); each test runs the course with one of them first on
PYTHONPATH. The hooks into Triton's interpreter are where such tools break between versions.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXTRA = [p for p in os.environ.get("COURSE_EXTRA_TRITONS", "").split(":") if p]
WRONG = ROOT / "tests" / "wrong"


def _run(triton_dir: str, *args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([triton_dir, str(ROOT)])
    env["COURSE_MODE"] = "cpu"
    env["COURSE_PROGRESS"] = str(tmp_path / "progress.json")
    return subprocess.run(
        [sys.executable, "-m", "course_lib", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def _version(triton_dir: str, tmp_path: Path) -> str:
    env = dict(os.environ, PYTHONPATH=triton_dir)
    out = subprocess.run(
        [sys.executable, "-c", "import triton; print(triton.__version__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def _task_names() -> list[str]:
    from course_lib import tasks

    return [spec.name for spec in tasks.all_tasks()]


pytestmark = pytest.mark.skipif(not EXTRA, reason="COURSE_EXTRA_TRITONS not set (CI sets it)")


@pytest.mark.parametrize("triton_dir", EXTRA, ids=[Path(p).name for p in EXTRA])
def test_doctor_canaries(triton_dir, tmp_path):
    assert Path(triton_dir).name.endswith(_version(triton_dir, tmp_path))
    run = _run(triton_dir, "doctor", tmp_path=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "FAIL" not in run.stdout


# On the versions between the oldest (3.6, the lent H200's) and the main install's (the newest, whose
# every solution tests/test_solutions_and_stubs.py grades), the tasks that lean on what changes between
# versions: the launch and bounds hooks, Philox, the autotuner's hooks, tensor descriptors (and TMA's
# store tail), Gluon compiled for sm_90.
VERSION_SENSITIVE = [
    "vector_add", "residual_dropout", "autotuned_axpy", "scale_rows", "padded_bmm", "fused_linear", "ws_matmul",
]  # fmt: skip


@pytest.mark.parametrize("triton_dir", EXTRA, ids=[Path(p).name for p in EXTRA])
def test_solutions_pass(triton_dir, tmp_path):
    oldest = triton_dir == min(EXTRA, key=lambda d: tuple(int(x) for x in _version(d, tmp_path).split(".")[:2]))
    which = ["--all"] if oldest else VERSION_SENSITIVE
    run = _run(triton_dir, "check", *which, "--solutions", tmp_path=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    graded = [line for line in run.stdout.splitlines() if re.match(r"\[\s*\d+/\d+\] (PASS|GPU) ", line)]
    assert len(graded) == (len(_task_names()) if oldest else len(VERSION_SENSITIVE)), run.stdout


@pytest.mark.parametrize("triton_dir", EXTRA, ids=[Path(p).name for p in EXTRA])
def test_out_of_bounds_caught(triton_dir, tmp_path):
    run = _run(triton_dir, "check", "vector_add", "--source", str(WRONG / "no_mask"), tmp_path=tmp_path)
    assert run.returncode == 1
    assert "out-of-bounds" in run.stdout, run.stdout
    assert "Traceback" not in run.stdout + run.stderr


@pytest.mark.parametrize("triton_dir", EXTRA, ids=[Path(p).name for p in EXTRA])
def test_untouched_exercises_fail_cleanly(triton_dir, tmp_path):
    # every task on the oldest Triton, the version-sensitive ones on the others (as test_solutions_pass):
    # a stub differs from its solution only in the bodies it leaves out (CI's time, 2026-12-04)
    oldest = triton_dir == min(EXTRA, key=lambda d: tuple(int(x) for x in _version(d, tmp_path).split(".")[:2]))
    which = ["--all"] if oldest else VERSION_SENSITIVE
    run = _run(triton_dir, "check", *which, tmp_path=tmp_path)
    assert run.returncode == 1
    lines = run.stdout.strip().splitlines()
    task_lines = [line.split("] ", 1)[1] for line in lines if line.startswith("[")]  # numbered as they finish
    assert len(task_lines) == (len(_task_names()) if oldest else len(VERSION_SENSITIVE)), run.stdout
    assert len(task_lines) == len(lines) - 2 and lines[-1].startswith("0 of "), run.stdout
    assert all(line.startswith("TODO") for line in task_lines), run.stdout
    assert "Traceback" not in run.stdout + run.stderr
