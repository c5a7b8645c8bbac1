"""Write the autograder zip that Gradescope takes for one assignment of this course.

    python gradescope/make_autograder.py --tasks vector_add,softmax [--hidden my_hidden.json] [--out autograder.zip]

The zip's root holds what Gradescope looks for (``setup.sh``, ``run_autograder``), the assignment's
settings (``assignment.env``: its tasks), the hidden cases if given (``hidden_cases.json``), and the
course itself under ``course/``: every file git tracks in this checkout (or, without git, every file
but virtual environments, caches and git's own), as it is on disk now. See gradescope/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
COURSE = HERE.parent
LEFT_OUT = {".git", ".venv", ".deps", "__pycache__", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints", ".ci"}


def course_files(root: Path) -> list[Path]:
    """The course's files, relative to ``root``."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True, timeout=60
        ).stdout.decode()
        files = [Path(p) for p in listed.split("\0") if p]
        return [p for p in files if (root / p).is_file() and not set(p.parts) & LEFT_OUT]
    except (OSError, subprocess.SubprocessError):
        pass
    found = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in LEFT_OUT)
        found += [Path(folder, n).relative_to(root) for n in sorted(names)]
    return found


def _add(zf: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o755 if executable else 0o644) << 16
    zf.writestr(info, data)


def make(tasks: list[str], out: Path, hidden: Path | None = None, root: Path = COURSE) -> Path:
    sys.path.insert(0, str(root))
    from course_lib import tasks as course_tasks

    known = {t.name for t in course_tasks.all_tasks()}
    unknown = [t for t in tasks if t not in known]
    if not tasks or unknown:
        raise SystemExit(f"no such task: {', '.join(unknown)} (tasks: {', '.join(sorted(known))})" if unknown else
                         "give the assignment's tasks: --tasks vector_add,softmax")  # fmt: skip
    if hidden is not None:
        try:
            json.loads(hidden.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise SystemExit(f"the hidden cases file {hidden} cannot be read as JSON: {e}") from None
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with zipfile.ZipFile(tmp, "w") as zf:
        _add(zf, "setup.sh", (HERE / "setup.sh").read_bytes(), executable=True)
        _add(zf, "run_autograder", (HERE / "run_autograder").read_bytes(), executable=True)
        _add(zf, "assignment.env", f"TASKS={','.join(tasks)}\n".encode())
        if hidden is not None:
            _add(zf, "hidden_cases.json", hidden.read_bytes())
        for path in course_files(root):
            full = root / path
            _add(zf, f"course/{path.as_posix()}", full.read_bytes(), executable=os.access(full, os.X_OK))
    os.replace(tmp, out)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", required=True, help="the assignment's tasks, comma separated")
    p.add_argument("--hidden", type=Path, help="a JSON file of hidden cases (as `grade --hidden`)")
    p.add_argument("--out", type=Path, default=Path("autograder.zip"))
    args = p.parse_args(argv)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    path = make(tasks, args.out, args.hidden)
    print(f"wrote {path} ({path.stat().st_size // 1024} KB): upload it as the assignment's autograder")
    return 0


if __name__ == "__main__":
    sys.exit(main())
