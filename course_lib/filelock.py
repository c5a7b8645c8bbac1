"""One lock on a file, across the threads and processes of one machine (POSIX ``flock``).

Used wherever the course writes or measures something that several graders, notebooks or users may
reach at once: the progress file, the time limits and speed bars measured once per machine, the
roofline's peaks, and the GPU's share-or-alone lock of the grader. Where ``fcntl`` does not exist
(Windows: one user, one grader) the locks are threads-only.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_LOCK = threading.Lock()


class NotNow(Exception):
    """``acquire`` with a ``within_s`` did not get the lock in that time."""


def acquire(path: Path, exclusive: bool = True, within_s: float | None = None) -> int | None:
    """Take ``path``'s flock (created if missing) and return the descriptor that holds it; None where
    there is no flock or the file cannot be opened (a read-only folder: go on unlocked). With
    ``within_s``, give up after that many seconds (NotNow) instead of waiting for as long as it takes."""
    if fcntl is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    try:
        if within_s is None:
            fcntl.flock(fd, mode)
        else:
            end = time.monotonic() + within_s
            while True:
                try:
                    fcntl.flock(fd, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= end:
                        raise NotNow(str(path)) from None
                    time.sleep(0.002)
    except BaseException:
        os.close(fd)
        raise
    return fd


def release(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)  # closing the descriptor releases its flock


@contextlib.contextmanager
def held(path: Path) -> Iterator[None]:
    """Hold ``path`` exclusively: one thread of one process of this machine at a time."""
    key = os.path.abspath(path)
    with _THREAD_LOCKS_LOCK:
        local = _THREAD_LOCKS.setdefault(key, threading.Lock())
    with local:
        fd = acquire(path, exclusive=True)
        try:
            yield
        finally:
            release(fd)
