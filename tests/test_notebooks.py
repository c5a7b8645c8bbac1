"""Every notebook runs top to bottom on the CPU, and is committed without outputs."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    names = [p.name for p in NOTEBOOKS]
    assert any(n.startswith("00_") for n in names) and any(n.startswith("02_") for n in names), names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, f"{path.name}: cells {dirty} hold outputs; strip them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_runs_top_to_bottom_on_cpu(path, tmp_path, monkeypatch):
    # a scratch progress file, so running the notebook does not touch the learner's own
    monkeypatch.setenv("COURSE_PROGRESS", str(tmp_path / "progress.json"))
    monkeypatch.setenv("COURSE_MODE", "cpu")
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.get("output_type") == "error"]
    assert not errors
    assert elapsed < 120, f"{path.name} took {elapsed:.0f} s on the CPU; keep notebooks under 2 minutes"
