"""The learner's progress file: what passed, when, and which hints were seen.

Written atomically (a temporary file, fsync, then rename) under a lock, so a crash or two processes
at once never leave it half-written or lose an earlier result. COURSE_PROGRESS moves it.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

from . import filelock
from .runtime import course_root


def progress_path() -> Path:
    env = os.environ.get("COURSE_PROGRESS")
    return Path(env).expanduser() if env else course_root() / "progress.json"


def load(path: Path | None = None) -> dict:
    path = path or progress_path()
    if not path.exists():
        return {"tasks": {}}
    try:
        data = json.loads(path.read_text())
        readable = isinstance(data, dict) and isinstance(data.setdefault("tasks", {}), dict)
    except (json.JSONDecodeError, UnicodeDecodeError):
        readable = False
    if not readable:
        # never throw a learner's history away: keep the unreadable file aside and start afresh
        aside = path.with_name(path.name + f".unreadable-{int(time.time())}")
        path.rename(aside)
        return {"tasks": {}}
    return data


def _write(path: Path, data: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def update(change, path: Path | None = None) -> dict:
    """Apply ``change(data)`` to the progress file under the lock and write it atomically."""
    path = path or progress_path()
    with filelock.held(path.with_name(path.name + ".lock")):
        data = load(path)
        change(data)
        _write(path, data)
    return data


def record_results(results, path: Path | None = None) -> None:
    now = time.strftime("%Y-%m-%dT%H:%M:%S")

    def change(data):
        for r in results:
            entry = data["tasks"].setdefault(r.task, {"attempts": 0})
            entry["attempts"] = entry.get("attempts", 0) + 1
            entry["last_status"] = r.status
            entry["last_checked"] = now
            if r.passed and "first_passed" not in entry:
                entry["first_passed"] = now

    update(change, path)


def record_hint(task: str, number: int, path: Path | None = None) -> None:
    def change(data):
        entry = data["tasks"].setdefault(task, {"attempts": 0})
        entry["hints_seen"] = max(entry.get("hints_seen", 0), number)

    update(change, path)


def status_of(task: str, data: dict) -> str:
    entry = data["tasks"].get(task)
    if not entry:
        return "not started"
    if entry.get("last_status") == "pass":
        return "passed"
    if "first_passed" in entry:
        return f"passed before, now {entry.get('last_status')}"
    waiting = {"todo": "not implemented yet", "needs_gpu": "checked here, needs a Hopper GPU"}
    return waiting.get(entry.get("last_status"), "attempted")
