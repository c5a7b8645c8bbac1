"""Exception chains, and the frames of them that lie in the learner's own file."""

from __future__ import annotations

import os
import traceback
from pathlib import Path


def chain(e: BaseException):
    """``e``, then its cause or context, and so on (each once)."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def learner_frames(e: BaseException, path: Path, limit: int = 3) -> list[str]:
    """The last ``limit`` lines of the chain's tracebacks that lie in ``path``, as "file:line: code"."""
    lines = []
    for exc in chain(e):
        for fs in traceback.extract_tb(exc.__traceback__):
            try:
                same = os.path.exists(fs.filename) and os.path.samefile(fs.filename, path)
            except OSError:
                same = False
            if same:
                row = f"  {Path(path).name}:{fs.lineno}: {(fs.line or '').strip()}"
                if row not in lines:
                    lines.append(row)
    return lines[-limit:]


def raised_in(e: BaseException, path: Path) -> bool:
    """Whether ``e`` was raised by a line of ``path`` itself (its innermost frame lies there)."""
    frames = traceback.extract_tb(e.__traceback__)
    if not frames:
        return False
    try:
        return os.path.samefile(frames[-1].filename, path)
    except OSError:
        return False
