"""Colab, Kaggle, a notebook opened on its own: the setup cell and ``course_lib/hosted.py``.

``plan`` is tested on the runtimes a learner meets (no GPU, a T4, an A100 whose torch is too old, an
H100 with torch 2.10+, a bare Jupyter). The cell itself runs for real in a Python that cannot import
course_lib (``-S``: site-packages on the path without their ``.pth`` files, so the editable install is
not seen, as in a fresh Colab runtime that has torch and Triton), fetching the course by git from a
repository made of the tracked files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from test_container import _course_copy

from course_lib import cli, hosted, publish

ROOT = Path(__file__).resolve().parent.parent
HAVE_ALL = {"torch": "2.11.0+cu130", "triton": "3.6.0", "numpy": "2", "matplotlib": "3", "tqdm": "4", "ipywidgets": "8"}


def test_no_gpu_is_cpu_mode_and_installs_nothing_present():
    chosen = hosted.plan(None, HAVE_ALL)
    assert chosen.mode == "cpu" and chosen.installs == [] and "no NVIDIA GPU" in chosen.why


def test_a_t4_is_cpu_mode_and_says_why():
    chosen = hosted.plan(("Tesla T4", (7, 5)), {**HAVE_ALL, "triton": "3.5.0", "torch": "2.9.0+cu126"})
    assert chosen.mode == "cpu" and "compute capability 7.5" in chosen.why and "below Triton's 8.0" in chosen.why
    # the interpreter of a supported Triton, without touching the runtime's torch
    assert chosen.installs == [["--no-deps", hosted.TRITON_SPEC]]


def test_an_a100_with_an_old_torch_is_cpu_mode_with_the_way_to_gpu_mode():
    chosen = hosted.plan(("NVIDIA A100-SXM4-40GB", (8, 0)), {**HAVE_ALL, "triton": "3.5.1", "torch": "2.9.1"})
    assert chosen.mode == "cpu" and "torch 2.10 or newer" in chosen.why and "restart the runtime" in chosen.why
    assert ["--no-deps", hosted.TRITON_SPEC] in chosen.installs
    assert not any("torch" in arg for args in chosen.installs for arg in args), "the runtime's torch replaced"


def test_a_triton_installed_beside_an_old_torch_keeps_cpu_mode():
    """The first run put Triton 3.6's interpreter beside torch 2.9; after a restart the cell must still not
    take GPU mode, which needs the torch that pins a Triton 3.6 or newer."""
    chosen = hosted.plan(("NVIDIA A100-SXM4-40GB", (8, 0)), {**HAVE_ALL, "triton": "3.6.0", "torch": "2.9.1+cu126"})
    assert chosen.mode == "cpu" and "torch 2.10 or newer" in chosen.why


def test_odd_version_strings():
    assert hosted._version("3.6.0+git1a2b") == (3, 6, 0) and hosted._version("2.10.0a0") == (2, 10, 0)
    assert hosted.plan(("NVIDIA H100", (9, 0)), {**HAVE_ALL, "torch": "2.10.0a0", "triton": "3.6.0+git"}).mode == "gpu"


def test_a_nightly_torchs_pytorch_triton_counts_as_triton(monkeypatch):
    """PyTorch's nightly wheels install Triton as the distribution "pytorch-triton": it is Triton, not missing
    (else the setup would install a second one over it)."""
    import importlib.metadata

    def version(dist):
        if dist == "pytorch-triton":
            return "3.7.0+git1234abcd"
        raise importlib.metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(importlib.metadata, "version", version)
    assert hosted._installed("triton") == "3.7.0+git1234abcd"
    assert hosted._installed("numpy") is None
    decided = hosted.plan(("NVIDIA H100 80GB HBM3", (9, 0)), {**HAVE_ALL, "triton": hosted._installed("triton")})
    assert decided.mode == "gpu" and not any("triton" in " ".join(a) for a in decided.installs)


def test_a_hopper_with_triton_36_is_gpu_mode_and_installs_nothing():
    chosen = hosted.plan(("NVIDIA H100 80GB HBM3", (9, 0)), HAVE_ALL)
    assert chosen.mode == "gpu" and chosen.installs == []


def test_a_bare_jupyter_gets_the_cpu_build_of_torch_and_what_is_missing():
    chosen = hosted.plan(None, {"numpy": "2"})
    missing = ["matplotlib", "tqdm", "ipywidgets"]
    assert chosen.installs == [hosted.CPU_TORCH, ["--no-deps", hosted.TRITON_SPEC], missing]


def test_every_notebook_carries_the_setup_cell_before_its_first_code():
    assert publish.publish(ROOT, check=True) == [], "run python -m course_lib publish"
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        first_code = next(c for c in cells if c["cell_type"] == "code")
        assert publish.SETUP_TAG in first_code["metadata"]["tags"], path.name


def test_publish_writes_links_for_a_github_repository_and_refuses_others(tmp_path, monkeypatch):
    (tmp_path / "notebooks").mkdir()
    for name in ("00_setup.ipynb", "06_matmul.ipynb"):
        (tmp_path / "notebooks" / name).write_text((ROOT / "notebooks" / name).read_text())
    repo = "https://github.com/example-org/triton-kernel-course"
    assert publish.publish(tmp_path, repo=repo) == ["00_setup.ipynb", "06_matmul.ipynb"]
    cells = json.loads((tmp_path / "notebooks" / "06_matmul.ipynb").read_text())["cells"]
    links = "".join(cells[1]["source"])
    path = "example-org/triton-kernel-course/blob/main/notebooks/06_matmul.ipynb"
    assert f"colab.research.google.com/github/{path}" in links
    assert "kaggle.com/kernels/welcome?src=https://github.com/example-org/triton-kernel-course/blob/main/" in links
    setup = next(c for c in cells if publish.SETUP_TAG in c["metadata"].get("tags", []))
    assert f'or "{repo}"' in "".join(setup["source"])
    # again: nothing changes, and the repository named is kept when none is given
    assert publish.publish(tmp_path) == [] and publish.publish(tmp_path, check=True) == []
    # a branch named once is kept by a later publish that names none
    assert publish.publish(tmp_path, repo=repo, branch="course-2027") == ["00_setup.ipynb", "06_matmul.ipynb"]
    assert publish.publish(tmp_path) == [] and publish.publish(tmp_path, repo=repo) == []
    assert "/blob/course-2027/notebooks/06_matmul.ipynb" in (tmp_path / "notebooks" / "06_matmul.ipynb").read_text()
    assert publish.publish(tmp_path, branch="main") == ["00_setup.ipynb", "06_matmul.ipynb"]
    with pytest.raises(ValueError, match="not https://github.com/ORG/NAME"):
        publish.publish(tmp_path, repo="https://gitlab.com/a/b")
    with pytest.raises(ValueError, match="not a branch name"):
        publish.publish(tmp_path, repo=repo, branch="main) [x](javascript:alert(1)) (")
    with pytest.raises(ValueError, match="not a repository URL"):
        publish.setup_source('x"; import os; os.system("rm -rf ~") #')
    monkeypatch.setenv("COURSE_ROOT", str(tmp_path))
    assert cli.main(["publish", "--check"]) == 0
    assert cli.main(["publish", "--repo", ""]) == 0
    assert "Open in Colab" not in (tmp_path / "notebooks" / "06_matmul.ipynb").read_text()
    assert cli.main(["publish", "--repo", "ftp://x/y"]) == 2


def _fresh_python_run(code: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    """``code`` in this interpreter with -S: torch, Triton and the rest importable, course_lib not."""
    site = sysconfig.get_paths()["purelib"]
    prelude = f"import sys; sys.path.append({site!r})\n"
    return subprocess.run([sys.executable, "-S", "-c", prelude + code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip


def _cell_sources(name: str) -> list[str]:
    cells = json.loads((ROOT / "notebooks" / name).read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


@pytest.mark.timeout(900)
def test_the_setup_cell_fetches_and_sets_up_the_course_in_a_fresh_runtime(tmp_path):
    # the published repository: the tracked files, committed
    published = tmp_path / "published"
    _course_copy(published)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=published, check=True)
    subprocess.run([*git, "add", "-A"], cwd=published, check=True)
    subprocess.run([*git, "commit", "-qm", "course"], cwd=published, check=True)

    content = tmp_path / "content"  # Colab's /content: the runtime's working folder
    content.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COURSE_", "PYTHON", "TRITON_"))}
    env.update(COURSE_REPO=published.as_uri(), HOME=str(tmp_path / "home"), COURSE_CACHE=str(tmp_path / "cache"))
    setup, first = _cell_sources("00_setup.ipynb")[:2]
    assert first.startswith("import course_lib")
    probe = """
import os, subprocess, sys
import course_lib
print("FILE", course_lib.__file__)
print("ROOT", course_lib.runtime.course_root())
print("MODE", course_lib.MODE)
child = subprocess.run([sys.executable, "-c", "import course_lib; print(course_lib.__file__)"],
                       capture_output=True, text=True)
print("CHILD", child.stdout.strip(), child.stderr[-300:])
done = subprocess.run([sys.executable, "-m", "course_lib", "check", "vector_copy", "--solutions"],
                      capture_output=True, text=True)
print("CHECK", done.returncode, done.stdout[-400:].replace(chr(10), " | "))
"""
    ran = _fresh_python_run(setup + "\n" + first + "\n" + setup + "\n" + probe, content, env)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    home = content / publish.HOME_NAME
    out = dict(line.split(" ", 1) for line in ran.stdout.splitlines() if line.split(" ", 1)[0] in
               ("FILE", "ROOT", "MODE", "CHILD", "CHECK"))  # fmt: skip
    assert out["FILE"] == str(home / "course_lib" / "__init__.py")
    assert out["ROOT"] == str(home) and out["MODE"] == "cpu"
    assert out["CHILD"].startswith(str(home / "course_lib")), out["CHILD"]
    assert out["CHECK"].startswith("0 "), out["CHECK"]
    assert "mode: CPU: no NVIDIA GPU here" in ran.stdout
    assert (home / ".git").is_dir() and (home / "exercises").is_dir()

    # the runtime restarted (the clone is still on its disk): no fetch, the same course
    env["COURSE_REPO"] = str(tmp_path / "no-such-repository")
    again = _fresh_python_run(setup + "\nimport course_lib\nprint('FILE', course_lib.__file__)", content, env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"FILE {home / 'course_lib' / '__init__.py'}" in again.stdout

    # no repository named anywhere: a clear message, not a traceback from git
    env.pop("COURSE_REPO")
    bare = tmp_path / "elsewhere"
    bare.mkdir()
    lost = _fresh_python_run(setup, bare, env)
    assert lost.returncode != 0 and "names no repository to fetch the course from: set COURSE_REPO" in lost.stderr

    # a notebook opened from its own course folder in a Jupyter without course_lib: that folder, no clone
    own = _fresh_python_run(
        setup + "\nimport course_lib\nprint('FILE', course_lib.__file__)", published / "notebooks", env
    )
    assert own.returncode == 0, own.stderr[-2000:]
    assert f"FILE {published / 'course_lib' / '__init__.py'}" in own.stdout
    assert not (published / "notebooks" / publish.HOME_NAME).exists()
