"""The notebooks' way in from Colab and Kaggle: a setup cell in every notebook, and, once the course has a
public repository, "Open in Colab" and "Open in Kaggle" links.

The setup cell is the first code cell of every notebook (tagged ``course-setup``). Where ``course_lib``
can be imported (the course set up by ``setup.sh``, a hub, the container) it does nothing. Elsewhere it
clones the course (``COURSE_REPO``, else the URL written here by ``publish --repo``) into
``./triton-kernel-course`` (``COURSE_HOME``) and runs ``course_lib/hosted.py``, which picks the mode and
installs only what the runtime lacks. The links need a public GitHub repository: until
``python -m course_lib publish --repo https://github.com/ORG/NAME`` names one, notebooks carry the cell
and no links (a link to nowhere is worse than none).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

SETUP_TAG = "course-setup"
LINKS_TAG = "course-links"
HOME_NAME = "triton-kernel-course"

_SETUP = """\
# Colab, Kaggle, or this notebook opened on its own: fetch and set up the course first.
# Where the course is installed (setup.sh, a hub, the container), this cell does nothing.
import importlib.util, os, pathlib, runpy, subprocess
if importlib.util.find_spec("course_lib") is None:
    REPO = os.environ.get("COURSE_REPO") or "{repo}"
    HOME = pathlib.Path(os.environ.get("COURSE_HOME", "{home}")).expanduser().resolve()
    if "COURSE_HOME" not in os.environ and (pathlib.Path.cwd().parent / "course_lib" / "hosted.py").is_file():
        HOME = pathlib.Path.cwd().parent  # this notebook's own course folder, in a Jupyter without course_lib
    if not (HOME / "course_lib" / "hosted.py").is_file():
        if not REPO:
            raise RuntimeError("this copy names no repository to fetch the course from: set COURSE_REPO "
                               f"to its git URL, or put the course folder at {{HOME}}")
        subprocess.run(["git", "clone", "--depth", "1", "--", REPO, str(HOME)], check=True)
    runpy.run_path(str(HOME / "course_lib" / "hosted.py"), run_name="__main__")"""

GITHUB = re.compile(r"^https://github\.com/([A-Za-z0-9][A-Za-z0-9_.-]*)/([A-Za-z0-9][A-Za-z0-9_.-]*?)(?:\.git)?/?$")


def setup_source(repo: str = "") -> str:
    if any(ch in repo for ch in '"\\\n'):
        raise ValueError(f"not a repository URL: {repo!r}")
    return _SETUP.format(repo=repo, home=HOME_NAME)


def _branch(branch: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/-]*", branch) or ".." in branch:
        raise ValueError(f"not a branch name: {branch!r}")
    return branch


def links_source(repo: str, branch: str, notebook: str) -> str:
    """The markdown of a notebook's Colab and Kaggle links (``repo``: https://github.com/ORG/NAME)."""
    match = GITHUB.match(repo)
    if match is None:
        raise ValueError(f"Colab and Kaggle open notebooks from GitHub: {repo!r} is not https://github.com/ORG/NAME")
    org, name = match.groups()
    path = f"{org}/{name}/blob/{_branch(branch)}/notebooks/{notebook}"
    return (
        f"[Open in Colab](https://colab.research.google.com/github/{path}) · "
        f"[Open in Kaggle](https://kaggle.com/kernels/welcome?src=https://github.com/{path}) · "
        "the first code cell below sets the course up there (CPU mode on a T4, or with torch older than 2.10)"
    )


def _tagged(cell: dict, tag: str) -> bool:
    return tag in cell.get("metadata", {}).get("tags", [])


def _cell(kind: str, source: str, tag: str, cell_id: str) -> dict:
    cell = {"cell_type": kind, "id": cell_id, "metadata": {"tags": [tag]}, "source": source.splitlines(True)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def _named_in(notebook: dict, tag: str, pattern: str) -> str:
    """What ``pattern``'s group finds in the notebook's cell tagged ``tag`` ("" for no such cell or match)."""
    for cell in notebook["cells"]:
        if _tagged(cell, tag):
            found = re.search(pattern, "".join(cell["source"]))
            return found.group(1) if found else ""
    return ""


def _current_repo(notebook: dict) -> str:
    """The repository a notebook's setup cell names ("" for none)."""
    return _named_in(notebook, SETUP_TAG, r'os\.environ\.get\("COURSE_REPO"\) or "([^"]*)"')


def _current_branch(notebook: dict) -> str:
    """The branch a notebook's links open ("" for no links)."""
    return _named_in(notebook, LINKS_TAG, r"github\.com/[^/\s]+/[^/\s]+/blob/(\S+?)/notebooks/")


def updated(notebook: dict, name: str, repo: str, branch: str) -> dict:
    """The notebook with its setup cell (before the first code cell) and, for a GitHub ``repo``, its
    links (after the title cell), each replaced where it exists; outputs of other cells untouched."""
    cells = [c for c in notebook["cells"] if not (_tagged(c, SETUP_TAG) or _tagged(c, LINKS_TAG))]
    setup = _cell("code", setup_source(repo), SETUP_TAG, "course-setup")
    first_code = next((i for i, c in enumerate(cells) if c["cell_type"] == "code"), len(cells))
    cells.insert(first_code, setup)
    if repo:
        cells.insert(1 if cells and cells[0]["cell_type"] == "markdown" else 0,
                     _cell("markdown", links_source(repo, branch, name), LINKS_TAG, "course-links"))  # fmt: skip
    return {**notebook, "cells": cells}


def _text(notebook: dict) -> str:
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def publish(root: Path, repo: str | None = None, branch: str | None = None, check: bool = False) -> list[str]:
    """Write (or with ``check``, compare) every notebook's setup cell and links. ``repo`` None keeps
    the repository the notebooks already name, ``branch`` None the branch their links open (main where
    they have none). Returns the notebooks that changed (or would)."""
    changed = []
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        text = path.read_text()
        notebook = json.loads(text)
        chosen = _current_repo(notebook) if repo is None else repo
        kept = branch or _current_branch(notebook) or "main"
        new = _text(updated(notebook, path.name, chosen, kept))
        if new != text:
            changed.append(path.name)
            if not check:
                tmp = path.with_name(path.name + ".tmp")
                tmp.write_text(new)
                tmp.replace(path)
    return changed
