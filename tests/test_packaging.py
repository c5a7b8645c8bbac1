"""The wheel holds every module of course_lib/, and each of them imports from the installed copy.

The editable install of the checkout finds any module on disk, so a subpackage that the wheel
leaves out goes unseen until someone installs the wheel. This test builds one (from a copy of the
checkout, so that no build/ folder is left in it), installs it into a folder of its own and imports,
from there, every module it finds, then compares that list with the .py files under course_lib/.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

PACKAGE = ROOT / "course_lib"

# Run in the installed copy: list its modules (walking the package), import each, say where from.
PROBE = r"""
import importlib.util, json, pkgutil
import course_lib

def fail(name):
    raise  # re-raise what stopped pkgutil from importing a package

names = ["course_lib"] + [m.name for m in pkgutil.walk_packages(course_lib.__path__, "course_lib.", onerror=fail)]
files = {}
for name in names:
    if name.split(".")[-1] == "__main__":  # importing it would start the command line
        spec = importlib.util.find_spec(name)
        files[name] = spec.origin
    else:
        files[name] = importlib.import_module(name).__file__
print("MODULES " + json.dumps(files))
"""


def modules_on_disk() -> dict[str, Path]:
    """Module name -> file, for every .py file under the checkout's course_lib/."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if "__pycache__" in parts:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def not_packages(names) -> list[str]:
    """Folders under course_lib/ that hold .py files but no __init__.py (so no wheel has them)."""
    folders = {modules_on_disk()[n].parent for n in names}
    return sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists())


def _pip(*args: str, cwd: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


@pytest.mark.timeout(60)
def test_the_wheel_holds_every_module(tmp_path):
    pytest.importorskip("setuptools", reason="the wheel is built without build isolation, with this venv's setuptools")
    # a copy of what setuptools reads: pyproject.toml, README.md and the other top-level files, course_lib/
    src = tmp_path / "src"
    src.mkdir()
    for item in ROOT.iterdir():
        if item.is_file():
            shutil.copy2(item, src / item.name)
    shutil.copytree(PACKAGE, src / "course_lib", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))

    wheels = tmp_path / "wheels"
    _pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(wheels), ".", cwd=src)
    (wheel,) = wheels.glob("triton_kernel_course-*.whl")
    site = tmp_path / "site"
    _pip("install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel), cwd=tmp_path)

    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COURSE_", "PYTHON", "TRITON_INTERPRET"))}
    env.update(PYTHONPATH=str(site), PYTHONNOUSERSITE="1", COURSE_MODE="cpu")
    env["COURSE_PROGRESS"] = str(run_dir / "progress.json")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=run_dir, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, (
        f"importing the installed course_lib failed:\n{proc.stdout[-3000:]}{proc.stderr[-5000:]}"
    )
    line = next(x for x in reversed(proc.stdout.splitlines()) if x.startswith("MODULES "))
    installed = json.loads(line.removeprefix("MODULES "))

    assert Path(installed["course_lib"]).is_relative_to(site), f"course_lib came from {installed['course_lib']}"
    not_installed = {name: f for name, f in installed.items() if not Path(f).is_relative_to(site)}
    assert not not_installed, f"imported from outside the installed wheel: {not_installed}"

    on_disk = modules_on_disk()
    missing = sorted(set(on_disk) - set(installed))
    extra = sorted(set(installed) - set(on_disk))
    assert not missing, f"in course_lib/ but not in the wheel: {missing}" + (
        f"; these folders have no __init__.py: {not_packages(missing)}" if not_packages(missing) else ""
    )
    assert not extra, f"in the wheel but not in course_lib/: {extra}"


def _name(requirement: str) -> str:
    import re

    return re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_the_binder_environment_is_the_runtime_only_and_the_same_packages():
    """environment.yml: pyproject.toml's dependencies (no dev tools), torch's CPU build, no install of
    the course itself (postBuild does that, without dependencies, so the layer above survives commits)."""
    import tomllib
    import yaml

    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    options = [line for line in pip if line.startswith("-")]
    packages = {_name(line) for line in pip if not line.startswith("-")}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert packages - {"setuptools"} == {_name(d) for d in project["dependencies"]}
    assert options == ["--extra-index-url https://download.pytorch.org/whl/cpu"]
    assert not any(name in packages for name in ("pytest", "ruff", "playwright", "nbgrader"))
    post = ROOT / "postBuild"
    assert os.access(post, os.X_OK) and "--no-deps" in post.read_text() and "-e ." in post.read_text()
