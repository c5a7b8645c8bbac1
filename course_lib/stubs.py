"""Generate exercises/ from solutions/: one source of truth.

In ``solutions/<task>.py`` the parts a learner writes sit between ``# BEGIN SOLUTION`` and
``# END SOLUTION``. A ``# TODO:`` comment block right after ``# BEGIN SOLUTION`` is kept as the stub's
text. The rest of the region becomes one statement that fails cleanly:

* inside a ``@triton.jit`` function: ``tl.static_assert(False, "not implemented yet: ...")``, which
  stops both the interpreter and the compiler with that sentence (``gl.static_assert`` in a
  ``@gluon.jit`` function);
* anywhere else: ``raise NotImplementedError("not implemented yet: ...")``.

``exercises/.manifest.json`` remembers what was generated, so a file the learner has edited is
recognised and never overwritten without ``force`` (and then a backup is kept).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .runtime import course_root

BEGIN = "# BEGIN SOLUTION"
END = "# END SOLUTION"
NOT_IMPLEMENTED = "not implemented yet"
MANIFEST = ".manifest.json"


class MarkerError(ValueError):
    pass


def _enclosing_def(lines: list[str], index: int, indent: int) -> tuple[str, str | None]:
    """Name of the function around line ``index`` and its kind of kernel: "gluon" (@gluon.jit),
    "triton" (@triton.jit) or None (plain Python)."""
    for j in range(index - 1, -1, -1):
        stripped = lines[j].lstrip()
        j_indent = len(lines[j]) - len(stripped)
        if stripped.startswith("def ") and j_indent < indent:
            name = re.match(r"def\s+(\w+)", stripped).group(1)
            k = j - 1
            kind = None
            while k >= 0 and lines[k].lstrip().startswith("@"):
                if "jit" in lines[k]:
                    kind = "gluon" if "gluon" in lines[k] else "triton"
                k -= 1
            return name, kind
    return "<module>", None


def make_exercise(solution_text: str, task: str) -> str:
    """The exercise text for one solution file."""
    lines = solution_text.splitlines()
    out: list[str] = [
        f"# Exercise file for task `{task}`: generated from solutions/{task}.py by",
        "# `python -m course_lib sync-exercises`. Replace each TODO stub with your code, then run",
        f"# `python -m course_lib check {task}`. Your edits are never overwritten by sync-exercises.",
    ]
    i = 0
    regions = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == END:
            raise MarkerError(f"solutions/{task}.py:{i + 1}: '{END}' without '{BEGIN}'")
        if line.strip() != BEGIN:
            out.append(line)
            i += 1
            continue
        indent = len(line) - len(line.lstrip())
        pad = " " * indent
        j = i + 1
        while j < len(lines) and lines[j].strip() != END:
            if lines[j].strip() == BEGIN:
                raise MarkerError(f"solutions/{task}.py:{j + 1}: '{BEGIN}' inside another region")
            j += 1
        if j == len(lines):
            raise MarkerError(f"solutions/{task}.py:{i + 1}: '{BEGIN}' without '{END}'")
        body = lines[i + 1 : j]
        todo = []
        for b in body:
            if b.strip().startswith("# TODO"):
                todo.append(b)
            else:
                break
        if not todo:
            todo = [f"{pad}# TODO: write this part."]
        fn, kind = _enclosing_def(lines, i, indent)
        place = "the module-level code" if fn == "<module>" else fn
        message = f"{NOT_IMPLEMENTED}: {place} in exercises/{task}.py"
        out.extend(todo)
        if kind == "gluon":
            out.append(f'{pad}gl.static_assert(False, "{message}")')
        elif kind == "triton":
            out.append(f'{pad}tl.static_assert(False, "{message}")')
        else:
            out.append(f'{pad}raise NotImplementedError("{message}")')
        regions += 1
        i = j + 1
    if regions == 0:
        raise MarkerError(f"solutions/{task}.py has no '{BEGIN}' region: nothing for a learner to write")
    return "\n".join(out) + "\n"


def digest(text: str) -> str:
    """What the manifest keeps of a generated exercise."""
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class SyncReport:
    written: list[str]  # created or updated
    unchanged: list[str]
    kept_edits: list[str]  # learner-edited files left alone
    drift: list[str]  # files that differ from what would be generated
    backups: list[str]

    def lines(self, check: bool) -> list[str]:
        rows = []
        for name in self.written:
            rows.append(f"wrote     exercises/{name}")
        for name in self.backups:
            rows.append(f"backed up {name}")
        for name in self.kept_edits:
            rows.append(
                f"kept      exercises/{name}: it holds your edits, so it was not replaced "
                "(--force replaces it and keeps a backup)"
            )
        if check:
            for name in self.drift:
                rows.append(f"drift     exercises/{name} differs from what solutions/ generates")
        rows.append(self.summary(check))
        return rows

    def summary(self, check: bool) -> str:
        """One line a learner reads: how many files exercises/ has and what state they are in."""
        changed = self.drift if check else self.written + self.kept_edits
        total = len(self.unchanged) + len(changed)
        head = f"exercises/: {total} file{'s' * (total != 1)}"
        if not changed:
            return f"{head}, all as generated (none edited yet)"
        if check:
            differ = "differs" if len(self.drift) == 1 else "differ"
            parts = [
                (len(self.unchanged), "as generated"),
                (len(self.drift), f"{differ} from what solutions/ generates"),
            ]
        else:
            parts = [
                (len(self.written), "written now"),
                (len(self.unchanged), "already as generated"),
                (len(self.kept_edits), "with your edits, kept"),
            ]
        return f"{head}: " + ", ".join(f"{n} {what}" for n, what in parts if n)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def sync(root: Path | None = None, check: bool = False, force: bool = False) -> SyncReport:
    """Bring exercises/ in line with solutions/. With check=True nothing is written."""
    root = root or course_root()
    sol_dir, ex_dir = root / "solutions", root / "exercises"
    if not check:
        ex_dir.mkdir(exist_ok=True)
    manifest_path = ex_dir / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    report = SyncReport([], [], [], [], [])
    new_manifest = dict(manifest)
    for sol in sorted(sol_dir.glob("*.py")):
        task = sol.stem
        wanted = make_exercise(sol.read_text(), task)
        target = ex_dir / sol.name
        if target.exists():
            current = target.read_text()
            if current == wanted:
                report.unchanged.append(sol.name)
                new_manifest[sol.name] = digest(wanted)
                continue
            report.drift.append(sol.name)
            edited = manifest.get(sol.name) != digest(current)
            if check:
                continue
            if edited and not force:
                report.kept_edits.append(sol.name)
                continue
            if edited:
                backup = target.with_name(f"{target.name}.bak-{time.strftime('%Y%m%d-%H%M%S')}")
                shutil.copy2(target, backup)
                report.backups.append(str(backup.relative_to(root)))
        elif check:
            report.drift.append(sol.name)
            continue
        _atomic_write(target, wanted)
        new_manifest[sol.name] = digest(wanted)
        report.written.append(sol.name)
    if not check and new_manifest != manifest:
        _atomic_write(manifest_path, json.dumps(new_manifest, indent=1, sort_keys=True) + "\n")
    return report


def is_untouched(task: str, root: Path | None = None) -> bool:
    """True when exercises/<task>.py is exactly what sync-exercises generated."""
    root = root or course_root()
    path = root / "exercises" / f"{task}.py"
    manifest_path = root / "exercises" / MANIFEST
    if not path.exists() or not manifest_path.exists():
        return False
    return json.loads(manifest_path.read_text()).get(path.name) == digest(path.read_text())
