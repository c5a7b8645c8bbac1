"""The course's container (.devcontainer/): the way in from macOS and Windows.

No container engine runs on this course's test machines, so the image itself is never built here. What
is tested is everything the image does, as far as this machine allows: its definition (it runs the
README's two commands, keeps the environment out of the course folder that a learner's own folder
replaces, serves JupyterLab where the published port reaches it), and its two steps run for real on a
copy of the course, the environment elsewhere (COURSE_VENV), JupyterLab answered over HTTP."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT

FOLDER = ROOT / ".devcontainer"
DOCKERFILE = FOLDER / "Dockerfile"


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments left out."""
    steps, pending = [], ""
    for line in path.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip("\\").strip() + " "
        if not line.rstrip().endswith("\\"):
            word, _, rest = pending.strip().partition(" ")
            steps.append((word.upper(), rest.strip()))
            pending = ""
    return steps


def _one(steps, word: str) -> str:
    found = [rest for w, rest in steps if w == word]
    assert len(found) == 1, f"expected one {word} in {DOCKERFILE}: {found}"
    return found[0]


def test_the_image_runs_the_readmes_two_commands_with_the_environment_outside_the_course():
    steps = _instructions(DOCKERFILE)
    readme = (ROOT / "README.md").read_text()
    assert "bash setup.sh lab" in readme and "bash setup.sh test" in readme
    workdir = _one(steps, "WORKDIR")
    env = dict(part.split("=", 1) for part in shlex.split(_one(steps, "ENV")))
    venv = env["COURSE_VENV"]
    # a learner's folder mounted over WORKDIR must not hide the environment
    assert not (venv == workdir or venv.startswith(workdir.rstrip("/") + "/")), (venv, workdir)
    runs = [rest for w, rest in steps if w == "RUN"]
    assert any("bash setup.sh deps" in r for r in runs), runs  # the install `setup.sh test` makes
    command = json.loads(_one(steps, "CMD"))
    assert command[:3] == ["bash", "setup.sh", "lab"], command
    assert "--ip=0.0.0.0" in command, "JupyterLab must listen beyond the container's loopback"
    port = next(a.split("=", 1)[1] for a in command if a.startswith("--port="))
    assert _one(steps, "EXPOSE") == port
    # not at the repository's root: Binder (repo2docker) would build it instead of environment.yml
    assert not (ROOT / "Dockerfile").exists() and not (ROOT / "binder" / "Dockerfile").exists()

    dev = json.loads((FOLDER / "devcontainer.json").read_text())
    assert dev["build"]["dockerfile"] == "Dockerfile" and dev["build"]["context"] == ".."
    assert dev["workspaceFolder"] == workdir and f"target={workdir}," in dev["workspaceMount"]
    assert int(port) in dev["forwardPorts"]
    assert dev["customizations"]["vscode"]["settings"]["python.defaultInterpreterPath"] == f"{venv}/bin/python"

    ignored = (FOLDER / "Dockerfile.dockerignore").read_text().split()
    for private in (".venv", "progress.json", ".course"):  # a learner's state never goes into an image
        assert private in ignored, private


def test_shell_scripts_keep_lf_line_endings_on_a_windows_checkout():
    """A Windows clone with core.autocrlf turns LF into CRLF, and bash in the container then fails on
    the first line of setup.sh: .gitattributes pins LF for every script the container or CI runs."""
    scripts = ["setup.sh", "postBuild", ".ci/run", "gradescope/run_autograder", "gradescope/setup.sh"]
    attributes = subprocess.run(
        ["git", "check-attr", "eol", "--", *scripts], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    for script in scripts:
        assert f"{script}: eol: lf" in attributes, attributes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _course_copy(to: Path) -> None:
    """The course's files as `COPY . /course` would take them from a fresh clone: what git tracks."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            target = to / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
            target.chmod(source.stat().st_mode)


@pytest.mark.timeout(900)
def test_the_images_two_steps_run_on_a_copy_and_jupyterlab_answers(tmp_path):
    """The image's build step (`bash setup.sh deps` with COURSE_VENV) on a copy of the course, then its
    start (`bash setup.sh lab --ip ... --no-browser`) in that folder: JupyterLab serves the notebooks,
    and nothing of the environment is written into the course folder."""
    course, venv = tmp_path / "course", tmp_path / "opt" / "course-venv"
    _course_copy(course)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COURSE_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env.update({"COURSE_VENV": str(venv), "PYTHON": sys.executable})  # pip's own settings and cache kept
    # this test's own caches and Jupyter's runtime files: nothing another process on the machine uses
    env.update({"COURSE_CACHE": str(tmp_path / "cache"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter")})
    built = subprocess.run(
        ["bash", "setup.sh", "deps"], cwd=course, env=env, capture_output=True, text=True, timeout=600
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert (venv / "bin" / "python").exists() and not (course / ".venv").exists()

    port, token = _free_port(), "course-container-test"
    log = (tmp_path / "lab.log").open("w")
    lab = subprocess.Popen(
        ["bash", "setup.sh", "lab", "--ip=127.0.0.1", f"--port={port}", "--no-browser", f"--ServerApp.token={token}"],
        cwd=course, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        listing, deadline = None, time.monotonic() + 240
        while listing is None and time.monotonic() < deadline and lab.poll() is None:
            try:
                url = f"http://127.0.0.1:{port}/api/contents/notebooks?token={token}"
                with urllib.request.urlopen(url, timeout=5) as reply:
                    listing = json.loads(reply.read())
            except OSError:
                time.sleep(1)
        said = (tmp_path / "lab.log").read_text()
        assert listing is not None, f"JupyterLab did not answer (exit {lab.poll()}):\n{said[-4000:]}"
        names = {item["name"] for item in listing["content"]}
        assert "00_setup.ipynb" in names, names
        assert re.search(r"exercises/: \d+ files", said) and "[  ok] mode" in said, said[-2000:]  # sync, doctor
        assert not (course / ".venv").exists()
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        try:
            lab.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(lab.pid, signal.SIGKILL)
        log.close()
