"""One lock on a file, across the threads and processes of one machine (POSIX ``flock``).

Used wherever the course writes or measures something that several graders, notebooks or users may
reach at once: the progress file, the time limits and speed bars measured once per machine, the
roofline's peaks, and the GPU's share-or-alone lock of the grader. Where ``fcntl`` does not exist
(Windows: one user, one grader) the locks are threads-only.
"""

from __future__ import annotations

import contextlib
import os
import stat
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


def acquire_between_users(path: Path, within_s: float) -> int | None:
    """Take ``path``'s exclusive flock where every user of the machine can take it (a file in a shared,
    sticky folder such as ``/tmp``): the first user creates it readable by all, the others open it
    read-only (flock needs no write access), and an existing file is opened without ``O_CREAT``, which
    ``fs.protected_regular`` refuses for another user's file there. Another user may hold it for ever,
    so the wait is bounded: NotNow after ``within_s`` seconds. None where it cannot be opened at all or
    there is no flock: go on unlocked."""
    if fcntl is None:
        return None
    fd = None
    # O_NONBLOCK: a FIFO put at the path by another user must not block the open (O_NOFOLLOW does not stop
    # one); the descriptor is checked to be a regular file below
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    for _ in range(3):  # created or removed between the two opens: try again
        try:
            fd = os.open(path, flags)
            break
        except FileNotFoundError:
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
                os.fchmod(fd, 0o644)  # readable by every user, whatever this process's umask
                break
            except FileExistsError:
                continue
            except OSError:
                return None
        except OSError:
            return None
    if fd is None:
        return None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:  # a FIFO, a device, a folder: no lock to take there, go on unlocked
        os.close(fd)
        return None
    end = time.monotonic() + within_s
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() >= end:
                    raise NotNow(str(path)) from None
                time.sleep(0.05)
    except BaseException:
        os.close(fd)
        raise


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
