"""lesson.write_variant's temporary folders do not outlive their notebook: removed with the Variant,
when Python exits, when the process is ended by SIGTERM (as Jupyter ends a kernel that is slow to
shut down), and, after a process was killed outright, by the next variant written."""

from __future__ import annotations

import gc
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from course_lib import lesson

ROOT = Path(__file__).resolve().parent.parent
MAKE_VARIANT = (
    "import os, signal, sys\n"
    "from course_lib import lesson\n"
    "v = lesson.write_variant('vector_add', {'BLOCK_SIZE = 1024': 'BLOCK_SIZE = 256'}, source='solutions')\n"
    "print(v.folder, flush=True)\n"
    "assert v.folder.is_dir()\n"
    "END\n"
)


def _run(end: str) -> tuple[subprocess.CompletedProcess, Path]:
    run = subprocess.run(
        [sys.executable, "-c", MAKE_VARIANT.replace("END", end)],
        cwd=ROOT,
        env={"COURSE_MODE": "cpu", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = run.stdout.split()
    assert lines, run.stderr
    return run, Path(lines[0])


@pytest.mark.parametrize("end", ["pass", "sys.exit(3)"])
def test_the_folder_is_gone_after_python_exits(end):
    run, folder = _run(end)  # the variant is never deleted: only the exit can remove its folder
    assert run.returncode in (0, 3), run.stderr
    assert not folder.exists()


def test_the_folder_is_gone_after_sigterm():
    run, folder = _run("os.kill(os.getpid(), signal.SIGTERM)")
    assert run.returncode == -signal.SIGTERM, run.stderr  # still dies of the signal
    assert not folder.exists()


def test_a_killed_process_folder_goes_with_the_next_variant():
    run, folder = _run("os.kill(os.getpid(), signal.SIGKILL)")
    assert run.returncode == -signal.SIGKILL
    assert folder.is_dir()  # nothing could run in a killed process
    fresh = lesson.write_variant("vector_add", {}, source="solutions")
    assert not folder.exists() and fresh.folder.is_dir()
    made = fresh.folder
    del fresh
    gc.collect()
    assert not made.exists()  # and a Variant that is collected takes its folder with it


def test_a_folder_the_caller_names_is_kept(tmp_path):
    variant = lesson.write_variant("vector_add", {}, source="solutions", folder=tmp_path / "mine")
    del variant
    gc.collect()
    assert (tmp_path / "mine" / "vector_add.py").exists()
