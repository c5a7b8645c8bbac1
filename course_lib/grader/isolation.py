"""The sealed boundary: grade one task with the learner's code in a process of its own.

This process (the protected one) reads the task file once, into a private folder of its own, checks
that copy (``precheck``), and hands the worker process (``worker``) that copy to import. It makes
every case's inputs, poisons the outputs, computes the reference and compares; the worker runs the
launcher on the tensors it is handed, in a file with no name whose descriptor it receives. Messages
both ways are plain JSON, each field checked here (``claims``) before anything reads it, so nothing
the worker patches in its own process (modules, builtins, torch, numpy), prints, or exits with can
change a verdict: a case passes only when the output, read back here into this process's memory,
matches the reference computed here.

Where anyone but the learner grades (a room, another folder), the worker runs inside an
operating-system sandbox (``sandbox``): it sees its own copy of the file, the Python environment and
course_lib, read-only, and nothing of the room, the solutions, the caches or the hidden cases.

Each step has a time limit (``limits``): a worker that does not answer in time is killed and the
task reported as hung; one that dies is reported with its exit code or signal, and grading goes on.
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import json
import multiprocessing
import os
import re
import select
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import types
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

from .. import runtime, sources, tasks
from . import cases as case_tools
from . import claims, precheck, sandbox, tiers, trace
from . import worker as worker_module
from .limits import Limits, StepClock
from .result import CRASH, FAIL, NEEDS_GPU, PASS, TIMEOUT, TODO, TaskResult
from .shared import CaseFileDamaged, SharedCase, tensor_from_bytes


def child_memory_bytes() -> int:
    """The address space a CPU-mode worker may map: COURSE_CHILD_MEMORY_GB, else 6 GiB, cut to three
    quarters of a container's memory limit (a Binder's 2 GB): past it the worker's allocation fails
    and the task fails with a message, where a container's limit would kill the whole grader. Never
    below 1.5 GiB, which torch's import needs: a container under 2 GiB is too small, and the doctor
    says so (checkup.memory_finding)."""
    setting = os.environ.get("COURSE_CHILD_MEMORY_GB")
    if setting:
        return int(float(setting) * 2**30)
    limit = runtime.quota().memory_bytes
    default = 6 * 2**30
    return min(default, max(int(1.5 * 2**30), limit * 3 // 4)) if limit else default


CPU_MEMORY_BYTES = child_memory_bytes()
# A sandbox as a whole, all its processes together (a submission may fork): its resident memory (a
# CUDA process holds more on the host than an interpreter's) and its threads, checked four times a second
SANDBOX_MEMORY_BYTES = {"cpu": CPU_MEMORY_BYTES, "gpu": 4 * CPU_MEMORY_BYTES}
SANDBOX_TASKS = 1024
MAX_REPLY_BYTES = 16 << 20  # one JSON reply; a returned tensor's bytes come apart (claims.MAX_RETURNED_BYTES)
MAX_FILE_BYTES = 1 << 20  # a task file: no exercise is anywhere near 1 MiB
# what a GPU worker may send in the middle of a step (``_Session.ask``): it lets the GPU go while Triton
# compiles a kernel, and takes it back before the kernel launches (worker._GpuHold)
GPU_REQUESTS = ("gpu_off", "gpu_on")
MAX_GPU_REQUESTS = 1000  # in one step: a compile is two; an autotuner's dozens of configs, a few dozen
MIN_GPU_EXTENSION_S = 60.0  # a step's time waited for the GPU is not its own, up to max(limit, this)
READ_GRACE_S = 1.0  # a reply already waiting when a step's deadline has passed: read, not late
SEND_WITHIN_S = 10.0  # a message to a worker: a worker that reads nothing is late, not waited for
SLOW_FRACTION = 0.5  # of a step's limit: a worker still silent then looks hung (``Worker.on_slow``)


# variables of Worker.env that the worker applies itself once started (``worker.main``): the thread
# count of each job's torch (side by side, jobs share the cores). A worker forked from the fork server
# gets them too, so they need no process of their own (a spawned worker imports torch and course_lib
# afresh: about 2 s of CPU a job on this course's 2-core CI machine)
FORK_SAFE_ENV = frozenset({"OMP_NUM_THREADS"})


@dataclass
class Worker:
    """Where and how the worker runs: the mode its kernels run in, its environment, and whether it
    runs inside the operating-system sandbox (``sandbox``)."""

    mode: str = field(default_factory=lambda: runtime.MODE)  # "cpu" (the interpreter) or "gpu"
    env: dict = field(default_factory=dict)  # variables set for the worker (e.g. CUDA_VISIBLE_DEVICES)
    sandboxed: bool = False
    # what the sandbox must hide even where it lies inside a folder the worker's Python needs
    hidden: tuple = ()
    # added to the worker process's niceness: the bounds check's interpreter runs at a lower CPU priority
    # than a GPU worker that may be timed beside it
    nice: int = 0
    # called once when a step has waited ``SLOW_FRACTION`` of its time limit: the job looks hung, so a
    # room lets another job start beside it while it waits out its limit (``grade_jobs``)
    on_slow: object = field(default=None, compare=False, repr=False)

    @property
    def needs_spawn(self) -> bool:
        """The fork server is started in CPU mode with the interpreter loaded; anything else spawns.
        A forked worker has the fork server's environment, not ``env``: only variables the worker
        applies itself after the fork (``FORK_SAFE_ENV``) leave it to the fork server."""
        return not (self.mode == runtime.CPU and runtime.is_cpu() and set(self.env) <= FORK_SAFE_ENV)


# --------------------------------------------------------------------------------------------------
# starting the worker

_FORKSERVER = None
_START_LOCK = threading.Lock()


def _context(worker: Worker):
    global _FORKSERVER
    if not worker.needs_spawn and "forkserver" in multiprocessing.get_all_start_methods():
        if _FORKSERVER is None:
            _FORKSERVER = multiprocessing.get_context("forkserver")
            _FORKSERVER.set_forkserver_preload(["course_lib.grader.worker"])
        return _FORKSERVER
    return multiprocessing.get_context("spawn")  # CUDA cannot be used in a forked process


@contextlib.contextmanager
def _starting(worker: Worker):
    """Hide the caller's main module and set the worker's environment while a process starts.

    multiprocessing re-imports the parent's ``__main__`` in every child (by name, or by path from
    its ``__file__``). A notebook, or a script calling check() without an ``if __name__ ==
    "__main__"`` guard, would then run again inside each worker. The worker needs nothing from it."""
    with _START_LOCK:
        real = sys.modules.get("__main__")
        stand_in = types.ModuleType("__main__")
        stand_in.__spec__ = None
        sys.modules["__main__"] = stand_in
        saved = {k: os.environ.get(k) for k in worker.env}
        os.environ.update(worker.env)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            if real is not None:
                sys.modules["__main__"] = real


class _Gone(Exception):
    """The worker ended or sent something that is not a report."""


class _Late(Exception):
    """The worker did not answer within its time limit."""


class _TooMuch(Exception):
    """The worker sent a message larger than any the grader's worker code sends."""


class _TooManyRequests(_TooMuch):
    """The worker asked for the GPU more often in one step than any compile or autotuner does."""


class _Garbled(Exception):
    """The worker sent a message that is no JSON object the grader can read."""


class _Unreadable(Exception):
    """The worker's reply did not pass ``claims``: the learner's code changed the worker."""

    def __init__(self, err: claims.Unreadable):
        super().__init__(str(err))
        self.err = err


def _private_root() -> str:
    """Where a job's private folder goes: RAM-backed where the machine has /dev/shm."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else tempfile.gettempdir()


class _Watchdog(threading.Thread):
    """Ends a sandbox whose processes together hold more memory or threads than it may: a limit per
    process (RLIMIT_AS) does not stop a submission that forks, and a grader run as root has no limit
    on processes at all."""

    def __init__(self, popen: subprocess.Popen, memory_bytes: int, tasks: int | None = None):
        super().__init__(daemon=True)
        self.popen, self.memory_bytes, self.tasks = popen, memory_bytes, tasks or SANDBOX_TASKS
        self.verdict: str | None = None

    def _tree(self) -> list[int]:
        pids, pending = [], [self.popen.pid]
        while pending:
            pid = pending.pop()
            pids.append(pid)
            with contextlib.suppress(OSError, ValueError):
                for task in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{task}/children") as f:
                        pending.extend(int(child) for child in f.read().split())
        return pids

    def _usage(self) -> tuple[int, int]:
        """(bytes, threads) of the sandbox's processes together: resident memory, and the memory of the
        files in RAM that they hold open without mapping (memfd), which no process's RSS shows."""
        memory = threads = 0
        files = set()
        for pid in self._tree():
            with contextlib.suppress(OSError, ValueError):
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            memory += int(line.split()[1]) * 1024
                        elif line.startswith("Threads:"):
                            threads += int(line.split()[1])
            with contextlib.suppress(OSError):
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    with contextlib.suppress(OSError):
                        if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:"):
                            info = os.stat(f"/proc/{pid}/fd/{fd}")
                            if (info.st_dev, info.st_ino) not in files:
                                files.add((info.st_dev, info.st_ino))
                                memory += info.st_blocks * 512
        return memory, threads

    def run(self) -> None:
        while self.popen.poll() is None:
            memory, threads = self._usage()
            if memory > self.memory_bytes:
                self.verdict = (
                    f"its processes held {memory / 2**30:.1f} GiB of memory together, over the sandbox's "
                    f"{self.memory_bytes / 2**30:.0f} GiB"
                )
            elif threads > self.tasks:
                self.verdict = f"it ran {threads} threads and processes, over the sandbox's {self.tasks}"
            if self.verdict:
                with contextlib.suppress(OSError):
                    self.popen.kill()
                return
            time.sleep(0.25)


class _Popened:
    """A subprocess (the sandbox) with the part of multiprocessing.Process's interface used here."""

    def __init__(self, popen: subprocess.Popen):
        self.popen = popen

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def join(self, timeout=None) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.popen.kill()

    @property
    def exitcode(self) -> int | None:
        code = self.popen.poll()
        if code is not None and code > 128:  # bwrap passes a signal on as 128 + its number
            return -(code - 128)
        return code

    @property
    def pid(self) -> int:
        return self.popen.pid


def _boot_argv(fd: int) -> list[str]:
    """The worker's command line inside the sandbox: this Python, this sys.path, nothing else."""
    path = sandbox.worker_sys_path()
    code = (
        "import sys; sys.dont_write_bytecode = True; "
        f"sys.path[:] = {path!r}; "
        "from course_lib.grader import worker; "
        f"worker.boot({fd})"
    )
    return [sys.executable, "-I", "-c", code]


class _Session:
    """One worker process and its socket; every receive has a deadline."""

    def __init__(self, setup: dict, worker: Worker, job_dir: Path):
        self.log_path = str(job_dir / "worker.log")  # the job's private folder: no other user reads it
        if worker.sandboxed:
            self._start_sandboxed(setup, worker, job_dir)
        else:
            self._start_pooled(setup, worker)

    def _start_pooled(self, setup: dict, worker: Worker) -> None:
        ctx = _context(worker)
        self.receive, send = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=worker_module.main, args=(send, setup, self.log_path), daemon=True)
        with _starting(worker):
            self.proc.start()
        send.close()

    def _start_sandboxed(self, setup: dict, worker: Worker, job_dir: Path) -> None:
        mine, theirs = socket.socketpair()
        self.receive = Connection(mine.detach())
        env = sandbox.worker_environment(worker.env)
        env["COURSE_MODE"] = worker.mode
        if worker.mode == runtime.CPU:
            env.update({"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""})
        view = sandbox.View(
            task_dir=Path(setup["file"]).parent,
            gpu=worker.mode == runtime.GPU,
            env=env,
            hidden=[*worker.hidden, runtime.course_root()],
            allowed=[Path(sys.prefix)],
        )
        fd = theirs.fileno()
        log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            popen = sandbox.start(
                view, _boot_argv(fd), pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        finally:
            os.close(log)
            theirs.close()
        self.proc = _Popened(popen)
        self.watchdog = _Watchdog(popen, SANDBOX_MEMORY_BYTES[worker.mode])
        self.watchdog.start()
        self.send(setup)

    def send(self, message: dict, within: float = SEND_WITHIN_S) -> None:
        """``message`` in multiprocessing's framing (a 4-byte length, then the bytes), all of it into the
        socket within ``within`` seconds (_Late): a worker that never reads its end would otherwise
        block the grader for ever once the socket is full (a few hundred small messages)."""
        data = json.dumps(message).encode()
        self._write(struct.pack("!i", len(data)) + data, None, time.monotonic() + within)

    def send_fd(self, fd: int, within: float = SEND_WITHIN_S) -> None:
        """The descriptor ``fd``, as ``multiprocessing.reduction.recv_handle`` reads it, within ``within``."""
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
        self._write(bytes([1]), rights, time.monotonic() + within)

    def _write(self, data: bytes, rights: list | None, deadline: float) -> None:
        """Write ``data`` (with the descriptors ``rights`` on its first byte) by ``deadline``, never
        blocking: each write takes what the socket has room for now."""
        try:
            fd = self.receive.fileno()
            second = os.dup(fd)  # a descriptor of its own: closing the socket leaves the Connection's
        except (OSError, ValueError) as e:
            raise _Gone() from e
        try:
            sock = socket.socket(fileno=second)
        except OSError as e:
            os.close(second)
            raise _Gone() from e
        view = memoryview(data)
        with sock:
            while view:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([], [fd], [], left)[1]:
                    if not self.proc.is_alive():
                        raise _Gone()
                    raise _Late()
                try:
                    if rights is not None:
                        sent = sock.sendmsg([view], rights, socket.MSG_DONTWAIT)
                        rights = None
                    else:
                        sent = sock.send(view, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    continue
                except OSError as e:
                    raise _Gone() from e
                view = view[sent:]

    def _exactly(self, n: int, deadline: float) -> bytes:
        """``n`` bytes from the worker by ``deadline`` (_Late), or _Gone if it closes its end first."""
        fd = self.receive.fileno()
        chunks, got = [], 0
        # past the deadline, what has arrived is still read, for READ_GRACE_S (a step that waited long for
        # the GPU may find its worker's reply waiting): only a worker with nothing sent is late, and one
        # that trickles bytes is cut off all the same
        now = time.monotonic()
        if deadline <= now:
            deadline = now + READ_GRACE_S
        while got < n:
            left = max(deadline - time.monotonic(), 0.0)
            if not select.select([fd], [], [], left)[0]:
                if not self.proc.is_alive():
                    raise _Gone()
                raise _Late()
            try:
                chunk = os.read(fd, min(n - got, 1 << 20))
            except OSError as e:
                raise _Gone() from e
            if not chunk:
                raise _Gone()
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _bytes(self, limit: float, most: int) -> bytes:
        """One message (multiprocessing's framing: a 4-byte length, -1 then 8 bytes for a huge one),
        each byte of it by the deadline: a worker that sends half a message and stops is hung, not
        waited for forever; one that announces more than ``most`` bytes is refused unread."""
        deadline = time.monotonic() + max(limit, 0.0)
        (size,) = struct.unpack("!i", self._exactly(4, deadline))
        if size == -1:
            (size,) = struct.unpack("!Q", self._exactly(8, deadline))
        if size < 0 or size > most:
            raise _TooMuch()
        return self._exactly(size, deadline)

    def ask(
        self,
        message: dict | None,
        limit: float,
        kind: str,
        fd: int | None = None,
        most_data: int | None = None,
        on_slow=None,
        hold: tiers.SharedHold | None = None,
    ) -> tuple[dict, bytes | None]:
        """Send ``message`` (and the descriptor ``fd``) and wait up to ``limit`` seconds for a reply of
        ``kind``; a returned tensor's bytes (at most ``most_data``) follow within the same time.
        ``on_slow()`` is called once if nothing has come after ``SLOW_FRACTION`` of the limit.

        Meanwhile the worker may say that it compiles ("gpu_off": the step's ``hold`` on the GPU is let
        go) and that it is about to launch again ("gpu_on": the hold is taken back, then granted). The
        time waited for the GPU does not count against ``limit``. Without a ``hold`` (a timing window,
        inside the exclusive hold; CPU mode) the worker is granted the GPU at once."""
        deadline = time.monotonic() + limit
        if message is not None:
            self.send(message, within=max(limit, 1.0))
        if fd is not None:
            self.send_fd(fd, within=max(limit, 1.0))
        slow_at = time.monotonic() + SLOW_FRACTION * limit if on_slow is not None else None
        extended = 0.0
        requests = 0
        while True:
            if slow_at is not None:
                until = min(slow_at, deadline)  # never past the step's own deadline
                if not select.select([self.receive.fileno()], [], [], max(until - time.monotonic(), 0.0))[0]:
                    if time.monotonic() >= slow_at:
                        on_slow()
                        slow_at = None
            try:
                reply = json.loads(self._bytes(max(deadline - time.monotonic(), 0.0), MAX_REPLY_BYTES).decode())
            except (ValueError, UnicodeDecodeError, RecursionError) as e:
                raise _Garbled() from e
            if not isinstance(reply, dict) or reply.get("kind") not in GPU_REQUESTS:
                break
            if time.monotonic() > deadline:
                raise _Late()  # out of time, waits included: only the step's reply is read past the deadline
            requests += 1
            if requests > MAX_GPU_REQUESTS:
                # each answer is bytes in the worker's socket: a worker that asks and never reads would
                # fill it, and the grader's next answer would wait for ever
                raise _TooManyRequests()
            waited = self._gpu_request(reply["kind"], hold)
            # the wait for other jobs' timing windows is not the step's time, up to its own limit again
            # (a minute at least): a worker that lets the GPU go and asks for it again behind every
            # timing window of a room does not run for ever
            deadline += min(waited, max(max(limit, MIN_GPU_EXTENSION_S) - extended, 0.0))
            extended += waited
            if slow_at is not None:
                slow_at += waited  # waiting for the GPU is not looking hung
        accepted = (kind, "load_failed") if kind == "loaded" else (kind,)
        if not isinstance(reply, dict) or reply.get("kind") not in accepted:
            raise _Garbled()
        data = None
        returned = reply.get("returned")
        if isinstance(returned, dict) and returned.get("has_bytes") is True:
            most = claims.MAX_RETURNED_BYTES if most_data is None else most_data
            data = self._bytes(max(deadline - time.monotonic(), 1.0), most)
        return reply, data

    def _gpu_request(self, kind: str, hold: tiers.SharedHold | None) -> float:
        """Do what the worker asked of the step's GPU hold; returns the seconds waited for the GPU."""
        if kind == "gpu_off":
            if hold is not None and hold.held:
                hold.off()
                if trace.on():
                    trace.event("gpu let go")
            return 0.0
        was_held = hold is None or hold.held
        waited = hold.on() if hold is not None else 0.0
        if trace.on() and not was_held:
            trace.event("gpu taken back", waited_s=round(waited, 4))
        # the worker waits for this answer; one that never reads fills its socket and the step ends
        self.send({"kind": "gpu_granted"}, within=SEND_WITHIN_S)
        return waited

    def close(self) -> str:
        """End the worker (politely, then by force) and return what it printed."""
        with contextlib.suppress(_Gone, _Late):
            self.send({"kind": "exit"}, within=1.0)  # a worker that reads nothing is killed below
        self.proc.join(timeout=2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.receive.close()
        return _read_tail(self.log_path)

    def how_it_ended(self) -> str:
        self.proc.join(timeout=2)
        watchdog = getattr(self, "watchdog", None)
        if watchdog is not None and watchdog.verdict:
            return f"stopped by the grader: {watchdog.verdict}"
        code = self.proc.exitcode
        if code is None:
            return "it stopped answering"
        return f"signal {-code}" if code < 0 else f"exit code {code}"


def _read_tail(path: str, limit: int = 4000) -> str:
    """The last ``limit`` characters of what the worker printed (never more is read)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 4 * limit))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(path).st_mode):  # the job's own log file: never a device or a link
                os.unlink(path)
    text = claims.visible(_without_teardown_noise(text))
    return text if len(text) <= limit else "...\n" + text[-limit:]


# what Triton's nanobind bindings print when a Python that compiled a Gluon kernel exits (Triton 3.9): the
# library's own report, not something the learner printed. Its list lines are dropped only inside a report.
_NANOBIND_HEADER = re.compile(r"^nanobind: leaked \d+ (instances|types|functions)!$")
_NANOBIND_ITEM = re.compile(r"^\s*- (leaked (instance|type|function) .*|\.\.\. skipped remainder)$")
_NANOBIND_TAIL = re.compile(
    r"^(nanobind: this is likely caused by a reference counting issue.*|See https://nanobind\.readthedocs\.io/\S*refleaks\S*)$"
)


def _without_teardown_noise(text: str) -> str:
    lines = text.splitlines(keepends=True)
    kept, inside = [], False
    for line in lines:
        bare = line.rstrip("\n")
        if _NANOBIND_HEADER.match(bare):
            inside = True
        elif not (inside and _NANOBIND_ITEM.match(bare)):
            inside = False
            if not _NANOBIND_TAIL.match(bare):
                kept.append(line)
    return "".join(kept) if len(kept) != len(lines) else text


# --------------------------------------------------------------------------------------------------
# the task file: read once, copied into a private folder


def file_sha256(path: Path) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def _with_other_stubs(summary: str, path: Path) -> str:
    """A TODO verdict names the stub that ran first (a kernel's, when the function it calls is never reached);
    the file's other unfinished parts are named beside it, in the file's order (read as text, never run)."""
    try:
        data = read_task_file(path) or b""
    except (OSError, ValueError):
        return summary
    named = re.findall(sources.NOT_IMPLEMENTED + r": (\w+)", data.decode("utf-8", "replace"))
    others = [n for n in dict.fromkeys(named) if not re.search(rf"\b{re.escape(n)}\b", summary)]
    return f"{summary} (still to write as well: {', '.join(others)})" if others else summary


def read_task_file(path: Path) -> bytes | None:
    """The task file's bytes, read once without following a final symbolic link; None when there is
    no such file. Raises OSError for a file that cannot be read and ValueError for one too large."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"the file is over {MAX_FILE_BYTES // 2**20} MiB")
    return data


@contextlib.contextmanager
def job_folder(task: str, data: bytes):
    """A private folder (0700) for one grading: ``task/<task>.py``, the copy of the file that is
    checked and imported, and the worker's log. Removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="course-job-", dir=_private_root()))
    try:
        (root / "task").mkdir(mode=0o700)
        copy = root / "task" / f"{task}.py"
        fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield root, copy
    finally:
        shutil.rmtree(root, ignore_errors=True)


def remove_stale_jobs(max_age_s: float = 3600) -> None:
    """Remove this user's job folders (and case files of older versions) left by a grader that was
    killed, after an hour."""
    now = time.time()
    for pattern in ("course-job-*", "course-case-*"):
        for path in Path(_private_root()).glob(pattern):
            with contextlib.suppress(OSError):
                info = path.lstat()
                if info.st_uid == os.getuid() and now - info.st_mtime > max_age_s:
                    shutil.rmtree(path) if path.is_dir() else path.unlink()


# --------------------------------------------------------------------------------------------------
# grading one task


def _short(case: tasks.Case) -> str:
    if not case.shape:  # tasks that are not kernels label their cases themselves
        return case.label
    return f"{case.label} {tuple(case.shape)} {str(case.dtype).replace('torch.', '')}"


def _dtype_list(cases: list[tasks.Case]) -> str:
    return ", ".join(dict.fromkeys(str(c.dtype).replace("torch.", "") for c in cases))


def reproduce_line(task: str, source_dir: Path, seed: int) -> str:
    if source_dir == sources.resolve("exercises"):
        flag = ""
    elif source_dir == sources.resolve("solutions"):
        flag = " --solutions"
    else:
        flag = f" --source {sources.display(source_dir)}"
    return f"python -m course_lib check {task}{flag} --seed {seed}"


class _Stop(Exception):
    """Grading this task ends here with ``result``."""

    def __init__(self, result: TaskResult):
        self.result = result


def _unreadable_file(result: TaskResult, path: Path, why: str) -> TaskResult:
    result.summary = f"{sources.display(path)} cannot be graded: {why}"
    return result


def run_task(
    spec: tasks.TaskSpec,
    source_dir: Path,
    seed: int,
    limits: Limits,
    worker: Worker | None = None,
    hidden: str | None = None,
    check_source: bool = True,
    perf: bool = False,
    clock: StepClock | None = None,
    bars=None,
) -> TaskResult:
    """Grade ``spec`` against ``source_dir/<task>.py`` with the learner's code in a worker process.

    ``perf`` (GPU mode): a passing kernel is timed (``tiers``); ``bars()`` gives what its speed is
    graded against (None: timed, no tier)."""
    worker = worker or Worker()
    with trace.task(spec.name, worker.mode), trace.span("task graded", what="limits" if clock else "grade"):
        result = _run_task(spec, source_dir, seed, limits, worker, hidden, check_source, perf, clock, bars)
        trace.event("task result", status=result.status, tier=result.tier, seconds=round(result.seconds or 0, 3))
        return result


def _run_task(spec, source_dir, seed, limits, worker, hidden, check_source, perf, clock, bars) -> TaskResult:
    path = source_dir / f"{spec.name}.py"
    start = time.perf_counter()
    result = TaskResult(spec.name, FAIL, "", source=sources.display(source_dir), seed=seed)
    result.sandboxed = worker.sandboxed
    try:
        data = read_task_file(path)
    except (OSError, ValueError) as e:
        return _unreadable_file(result, path, getattr(e, "strerror", None) or str(e))
    if data is None:
        result.status, result.summary = TODO, f"{sources.NOT_IMPLEMENTED}: {sources.display(path)} does not exist"
        return result
    result.file_sha256 = hashlib.sha256(data).hexdigest()
    problem = runtime.gluon_problem() if spec.needs == "hopper" else None
    if problem:
        result.summary = f"cannot grade this task here: {problem}"
        return result
    with job_folder(spec.name, data) as (job_dir, copy):
        if check_source:
            findings = precheck.check_bytes(data, path.name)
            if findings:
                result.summary, result.details = precheck.describe(findings, path.name)
                return result
        setup = _setup(spec, path, copy, worker)
        setup["tf32_dot_lines"] = precheck.tf32_dot_lines(data)  # the grader's own reading, for a failure's words
        return _graded(spec, source_dir, seed, limits, worker, hidden, perf, clock, result, setup, job_dir, start, bars)


def _setup(spec: tasks.TaskSpec, path: Path, copy: Path, worker: Worker) -> dict:
    """The worker's first message: the copy of the task file it imports, the launcher and the mode."""
    return {
        "file": str(copy),
        "display": sources.display(path),
        "entry": spec.entry,
        "outputs": list(spec.outputs),
        "forbid": sorted(spec.forbid_in_launcher),
        "torch_task": spec.torch_task,
        "mode": worker.mode,
        "memory_bytes": CPU_MEMORY_BYTES if worker.mode == runtime.CPU else None,
        "nice": worker.nice,
        "threads": worker.env.get("OMP_NUM_THREADS"),
        "simulated": spec.simulated and worker.mode == runtime.CPU,
    }


def _graded(
    spec, source_dir, seed, limits, worker, hidden, perf, clock, result, setup, job_dir, start, bars=None
) -> TaskResult:
    try:
        cases = spec.all_cases(worker.mode, hidden=hidden)
    except tasks.HiddenCaseError as e:  # the instructor's file, not the learner's: no learner's verdict
        result.status, result.summary = CRASH, f"the hidden cases file cannot be graded: {e}"
        result.details = [
            "Fix the file (`grade` checks it before grading, and says the same); this file was not graded."
        ]
        return result
    result.cases_total = len(cases)
    session = _Session(setup, worker, job_dir)
    phase = "loading the file"
    budget = time.monotonic() + limits.task_s
    try:
        gpu = worker.mode == runtime.GPU
        key = tiers.gpu_key(worker.env)
        # a GPU worker's every step holds the GPU shared. The interpreter's run of the bounds check does
        # not: its cases take seconds of CPU each, and a timing window waits for every holder (on the
        # H200, 2026-12-03, check --all --solutions graded 3 tasks in 150 s with it held); it runs at a
        # lower CPU priority instead (Worker.nice), so the timed worker gets a core when it needs one
        share = gpu

        def ask(message, limit, kind, fd=None, most_data=None, lock=True, hold=None, taken=True):
            # a timing window (lock=False, inside the exclusive hold) runs with no other grader's
            # kernels, references or interpreter beside it. A step that holds the GPU shared lets it go
            # while the worker compiles (tiers.SharedHold); ``hold``: the hold of the case it is part of;
            # taken=False: the step starts without the GPU and takes it only if the worker asks for it
            held = tiers.SharedHold(key, taken) if share and lock else contextlib.nullcontext(hold)
            began = time.perf_counter()
            wait = min(limit, max(budget - time.monotonic(), 0.5))
            try:
                with held as step_hold:
                    answer = session.ask(message, wait, kind, fd, most_data, _slow_once(worker), step_hold)
                if clock is not None:
                    clock.add(kind, time.perf_counter() - began)
                return answer
            except _Late:
                over = wait < limit  # the task's whole budget ran out first
                # the time it waited: the step's limit, or since the task began when its budget ran out (the
                # step's remnant of that budget said "after 3 s" of a task that had run 55)
                waited = time.monotonic() - (budget - limits.task_s) if over else wait
                raise _Stop(_hung(result, phase, waited, limits, over)) from None
            except _Gone:
                raise _Stop(_ended(result, phase, session.how_it_ended())) from None
            except (_TooMuch, _Garbled) as e:
                if isinstance(e, _TooManyRequests):
                    what = f"more than {MAX_GPU_REQUESTS} requests for the GPU"
                elif isinstance(e, _TooMuch):
                    what = "more data than any report holds"
                else:
                    what = "a report that is no JSON object"
                result.status = FAIL
                result.summary = (
                    f"during {phase} the process running your code sent {what}: the grader's own worker code "
                    "never does, so something in the task file changed it"
                )
                raise _Stop(result) from None

        def checked(read, reply, *args):
            try:
                return read(reply, *args)
            except claims.Unreadable as e:
                result.status, result.summary = FAIL, claims.message(e)
                raise _Stop(result) from None

        # loading the file starts a process, imports torch and the learner's module (seconds of CPU): the
        # GPU is taken only if the module compiles a kernel as it is imported (worker._GpuHold)
        reply, _ = ask(None, limits.load_s, "loaded", taken=False)
        reply = checked(claims.loaded, reply)
        if reply["kind"] == "load_failed":
            result.status = reply["status"]
            result.summary = reply["summary"]
            result.details = reply["details"]
            raise _Stop(result)
        failures = []
        unsimulated = None  # the case whose run met what CPU mode's Gluon simulator does not run
        reference_on = "cuda" if gpu and _cuda_here() else None  # the float64 references on this GPU

        for i, case in enumerate(cases):
            phase = f"case '{case.label}' ({case.describe()})"
            # the whole case holds the GPU shared, the grader's own work on it too (its inputs made, its
            # float64 reference, the comparison): a timing window of another job has the machine to
            # itself. Measured on the H200 (2026-12-03, results/grader_h200/speed_2026-12-03_trace): with
            # the grader's CPU work outside the hold, the timing windows of jobs beside it read 15.6 and
            # 50.3 ms a call for kernels of 0.2 ms: the timing thread, which times each window by this
            # process's clock, was held off its replies (likely by the GIL, which the judging's Python and
            # numpy parts and the freeing of large mapped tensors hold; not isolated). The price is that a
            # window waits for the judging of large timed cases (15-71 s on the CPU): see that README.
            # The learner's run lets the hold go while Triton compiles (tiers.SharedHold), and the judging
            # takes it back
            with tiers.SharedHold(key) if share else contextlib.nullcontext() as case_hold:

                def in_case(message, limit, kind, fd=None, most_data=None, lock=True, hold=case_hold):
                    answer = ask(message, limit, kind, fd, most_data, lock=False, hold=hold)
                    if hold is not None:
                        hold.on()
                    return answer

                # a wrong output is diagnosed until one is named (the verdict reports the first named), at most
                # DIAGNOSED_CASES of them: each guess is a float64 attention, a matmul..., held under the GPU
                diagnose = len(failures) < DIAGNOSED_CASES and not any(f[2].diagnosed for f in failures)
                outcome = _one_case(
                    spec, case, seed + i, in_case, checked, limits.for_case(i), device=reference_on, diagnose=diagnose
                )
            if outcome.ok:
                result.cases_passed += 1
                continue
            if outcome.status == NEEDS_GPU:
                if spec.simulated and not gpu and not failures:
                    # a construct CPU mode's simulator does not run: no more cases, but the structural checks
                    # still run below, and only a kernel that passes them waits for a Hopper GPU
                    unsimulated = outcome
                    break
                # from anywhere else (a GPU worker, a task with no simulator) it is no status a worker may claim
                outcome = case_tools.Outcome.failed(outcome.summary, list(outcome.details))
            if outcome.status == TODO:
                if not failures:  # nothing wrong so far: the task is simply unfinished
                    file = source_dir / f"{spec.name}.py"
                    result.status, result.summary = TODO, _with_other_stubs(outcome.summary, file)
                    raise _Stop(result)
                outcome = case_tools.Outcome.failed(
                    outcome.summary, [f"({outcome.summary}: the cases after this one were not run)"]
                )
                failures.append((i, case, outcome))
                break
            failures.append((i, case, outcome))
            if outcome.status == CRASH:  # a GPU whose context is broken runs nothing more
                break
        if failures:
            raise _Stop(_failed(spec, result, cases, failures, source_dir, seed, setup.get("tf32_dot_lines", ())))
        notes = []
        if spec.probe is not None:
            phase = "the task's checks on your kernels"
            reply, _ = ask(
                {"kind": "probe", "probe": spec.probe, "seed": probe_seed(seed)}, limits.extra_s, "probe_done"
            )
            reply = checked(claims.probe_done, reply)
            if reply.get("error"):
                error = reply["error"]
                if error["status"] == TODO:  # a stub compiled for the check: unfinished, not wrong
                    file = source_dir / f"{spec.name}.py"
                    result.status, result.summary = TODO, _with_other_stubs(error["summary"], file)
                    raise _Stop(result)
                problems = [(error["summary"], error["details"])]
            else:
                checks = _judged(spec, reply["facts"], worker.mode)
                problems = [(summary, details) for ok, summary, details in checks if not ok]
                notes = [line for ok, _, details in checks if ok for line in details]
            if problems:
                head = f"all {len(cases)} cases are right, but " if cases and unsimulated is None else ""
                result.summary = head + problems[0][0]
                result.failed = "checks"
                result.details = [line for _, details in problems for line in details]
                raise _Stop(result)
        if unsimulated is not None:
            result.status, result.summary = NEEDS_GPU, unsimulated.summary
            result.details = list(notes) + list(unsimulated.details)
            raise _Stop(result)
        if not spec.runs_here(worker.mode):
            result.status = NEEDS_GPU
            result.summary = _needs_summary(spec, worker.mode)
            result.details = list(notes) + [
                "its cases and its speed are graded on a Hopper GPU (H100, H200): run the same check there"
            ]
            raise _Stop(result)
        result.status = PASS
        result.summary = f"{len(cases)} cases ({_dtype_list(cases)}) passed in {time.perf_counter() - start:.1f} s"
        result.details = list(notes)
        if spec.simulated and not gpu:
            result.details.append(
                "the cases ran in course_lib's Gluon simulator (CPU mode): the values, and the barrier protocol "
                "under seeded orders of the partitions, the TMA copies and the wgmmas; its speed is graded on a "
                "Hopper GPU"
            )
        if perf and gpu and spec.timed_case() is not None:
            phase = "timing your kernel"
            passed = (result.summary, list(result.details))
            try:
                timing, outcome = time_calls(spec, spec.timed_case(), seed + 7919, ask, checked, limits.extra_s, key)
            except _Stop as stop:
                if stop.result.status != TIMEOUT:
                    raise
                # a right kernel too slow to time is still right: the pass stands, in the lowest tier
                result.status, (result.summary, result.details) = PASS, passed
                result.tier = tiers.WORKS
                result.details.append(f"speed: WORKS - the timed calls took over {limits.extra_s:.0f} s")
                raise _Stop(result) from None
            if not outcome.ok:
                result.status = CRASH if outcome.status == CRASH else FAIL
                result.summary = f"every case passed, but the timed calls were wrong: {outcome.summary}"
                result.failed = "checks"
                result.details = [
                    f"timed case: {spec.timed_case().describe()}",
                    *outcome.details,
                    "A launcher must compute on every call: timed calls get fresh inputs, and their output is "
                    "judged like any case's.",
                ]
                raise _Stop(result)
            result.details += _speed_lines(spec, timing, bars, result)
    except _Stop as stop:
        result = stop.result
    finally:
        result.output = session.close()
        result.seconds = time.perf_counter() - start
    return shown_safely(result)


def shown_safely(result: TaskResult) -> TaskResult:
    """The result with every control character in its text written out: a structural check's message
    can quote what the learner's process reported (a kernel's name, say), and a learner's text must not
    move an instructor's cursor or rewrite their terminal, CSV or summary."""
    result.summary = claims.visible(result.summary)
    result.details = [claims.visible(line) for line in result.details]
    result.output = claims.visible(result.output)
    return result


def _judged(spec: tasks.TaskSpec, facts: dict, mode: str) -> list[tuple[bool, str, list[str]]]:
    """The task's structural checks on the probe's facts, which are claims: a fact about the mode that
    is not this grader's own, or facts the judge cannot read, fail the task, never the grader."""
    if "mode" in facts and facts["mode"] != mode:
        return [
            (
                False,
                f"the structural checks' report says it ran in {str(facts['mode'])[:20]!r} mode, and the grader "
                f"runs in {mode} mode: the report came from code the task file changed",
                [],
            )
        ]
    try:
        checks = [(bool(ok), str(summary), [str(d) for d in details]) for ok, summary, details in spec.judge(facts)]
        # A probe that says whether its own run computed the answer ("right") is judged on that run: a
        # launcher that knows the probe's fixed shape and does something else there fails (the judge's own
        # message comes first where the run also broke a structural rule).
        if "right" in facts and facts["right"] is not True and all(ok for ok, *_ in checks):
            return [
                (
                    False,
                    f"{spec.entry} computed a wrong result on the grader's structural probe (the extra run whose "
                    "accesses or launches are checked)",
                    [
                        "The grader checks the structure of this one run, so it must compute the same answer as "
                        "every case: a launcher that does something else at the probe's shape is judged by what "
                        "it does there."
                    ],
                )
            ]
        return checks
    except Exception as e:  # a malformed fact: the worker's report, which the learner's code can reach
        return [
            (
                False,
                f"the structural checks could not read the report of the process that ran your code "
                f"({type(e).__name__}): the grader's own worker code always sends a readable one",
                [],
            )
        ]


def _needs_summary(spec: tasks.TaskSpec, mode: str) -> str:
    info = runtime.gpu_info() if mode == runtime.GPU else None
    here = f"this GPU is {info.name} (sm_{info.capability[0]}{info.capability[1]})" if info else "this is CPU mode"
    return (
        f"needs a Hopper GPU (sm_90) to run, and {here}: the structural checks passed (compiled for sm_90), "
        "the cases did not run, so this is no pass yet: wrong values show only there"
    )


def _slow_once(worker: Worker):
    """``worker.on_slow``, to be called at most once (the first slow step), or None."""
    callback = worker.on_slow
    if callback is None:
        return None

    def fire():
        worker.on_slow = None
        callback()

    return fire


def time_calls(spec, case, case_seed: int, ask, checked, limit: float, key: str, what: str = "entry"):
    """Time ``what`` ("entry": the launcher; "baseline": the task's torch baseline, in the grader's own
    worker only) on ``case`` by this process's clock (``tiers``). Returns (Timing or None, Outcome): for
    the launcher, the outcome judges one more call on fresh inputs after the windows (a baseline's output
    is not judged)."""
    trace.event("timing begun", what=what)
    with tiers.gpu_use(key, exclusive=False) if _cuda_here() else contextlib.nullcontext():
        prepared = case_tools.prepare(spec, case, case_seed)  # CPU work: none of it beside a timing window
    with SharedCase(prepared.tensors) as shared:
        message = {
            "kind": "speed", "shared": shared.message, "order": prepared.order, "values": prepared.values,
            "what": what, "task": spec.name,
        }  # fmt: skip
        reply, _ = ask(message, limit, "speed_ready", fd=shared.fd)
        reply = checked(claims.speed_step, reply)

        def refused(reply) -> case_tools.Outcome | None:
            if reply["error"]:
                err = reply["error"]
                return case_tools.Outcome.failed(err["summary"], err["details"], status=err["status"])
            if what == "entry" and not spec.torch_task and reply["launch_count"] < 1:
                return case_tools.Outcome.failed("a timed call launched no Triton kernel")
            return None

        if (bad := refused(reply)) is not None:
            return None, bad
        windows = []
        with tiers.gpu_use(key, exclusive=True):

            def window(reps: int) -> float | case_tools.Outcome:
                began = time.perf_counter()
                went, _ = ask({"kind": "speed_go", "reps": reps}, limit, "speed_went", lock=False)
                seconds = time.perf_counter() - began
                went = checked(claims.speed_step, went)
                bad = refused(went)
                if bad is None and what == "entry" and not spec.torch_task and went["launch_count"] < reps:
                    bad = case_tools.Outcome.failed(
                        f"{reps} timed calls launched {went['launch_count']} kernels: every call must launch its own"
                    )
                return bad if bad is not None else seconds

            first = window(1)
            if not isinstance(first, case_tools.Outcome):
                first = tiers.settled_first(first, lambda: window(1))
            if isinstance(first, case_tools.Outcome):
                return None, first
            reps_plan = tiers.plan(first)
            # windows not counted, until one lasts about WINDOW_S (tiers.grow): a GPU that sat idle raises
            # its clocks on the first ~50 ms of work (on the H200 the first thing timed on a fresh machine
            # came out 1.6x slow without one), and R from one first call can be far too small
            if first < tiers.SLOW_CALL_S:
                reps = reps_plan[0]
                for _ in range(tiers.WARM_WINDOWS):
                    warm = window(reps)
                    if isinstance(warm, case_tools.Outcome):
                        return None, warm
                    if (grown := tiers.grow(reps, warm)) == reps:
                        break
                    reps = grown
                reps_plan = [reps] * tiers.WINDOWS
            for reps in reps_plan:
                seconds = window(reps)
                if isinstance(seconds, case_tools.Outcome):
                    return None, seconds
                windows.append((reps, seconds))
        timing = tiers.per_call(windows)
        trace.event("timed", what=what, windows=[[reps, round(seconds, 5)] for reps, seconds in windows])
        reply, _ = ask({"kind": "speed_end"}, limit, "speed_done")
        checked(claims.speed_step, reply)
    if what != "entry":
        return timing, case_tools.Outcome(True, "", [], PASS)
    floor = tiers.physical_floor_s(spec, case)
    if floor is not None and timing.seconds < floor:
        return timing, case_tools.Outcome.failed(
            f"the timed calls took {timing.us:.1f} us a call, under the {floor * 1e6:.1f} us that this GPU's "
            "datasheet allows for the case's bytes and FLOPs: they cannot all have done the work",
            [f"timed case: {case.describe()}"],
        )
    # the timed calls' own output could be what an earlier call left in the same tensors: the output
    # judged is that of one more call on fresh inputs at the timed shape, a case like any other
    device = "cuda" if _cuda_here() else None

    def unlocked(message, limit, kind, fd=None, most_data=None, lock=True):
        return ask(message, limit, kind, fd, most_data, lock=False)

    # the reference is computed on this GPU: under the GPU's shared lock like the call, so that no
    # other job's timing window runs beside it
    with tiers.gpu_use(key, exclusive=False) if device else contextlib.nullcontext():
        outcome = _one_case(spec, case, case_seed + 1, unlocked, checked, limit, device=device)
    return timing, outcome


def _cuda_here() -> bool:
    try:
        import torch

        return runtime.is_gpu() and torch.cuda.is_available()
    except Exception:
        return False


def _speed_lines(spec, timing, bars, result: TaskResult) -> list[str]:
    """The report's speed line, and the tier in ``result`` (``bars``: None while the solution itself is
    timed for the time limits)."""
    if bars is None:
        return []
    try:
        measured = bars()
    except Exception as e:  # the bars are the grader's to measure: a failure there is no learner's
        return [f"speed: not graded here ({type(e).__name__}: {e})"]
    if measured is None:
        return ["speed: not graded here (the course's solution and the torch baseline could not be timed)"]
    decision = tiers.decide(spec, timing, measured, spec.timed_case())
    result.tier, result.speed_us, result.roofline_fraction = decision.tier, decision.us, decision.roofline_fraction
    return [decision.line]


def time_file(
    spec, source_dir: Path, worker: Worker, limits: Limits, whats=("entry",), seed: int = 0
) -> dict[str, tuple]:
    """{what: (Timing or None, Outcome)}: ``source_dir/<task>.py`` timed on the task's timed case by
    this process's clock, with no cases run first (``what``: "entry" the launcher, "baseline" the torch
    baseline). For the grader's own measurements (``grader.speed_bars``) and for tests; a learner's
    kernel is timed inside its grading (``run_task``). Raises RuntimeError when the file cannot load."""
    path = source_dir / f"{spec.name}.py"
    data = read_task_file(path)
    if data is None:
        raise RuntimeError(f"{sources.display(path)} does not exist")
    out = {}
    with job_folder(spec.name, data) as (job_dir, copy):
        session = _Session(_setup(spec, path, copy, worker), worker, job_dir)
        key = tiers.gpu_key(worker.env)
        gpu = worker.mode == runtime.GPU
        try:

            def ask(message, limit, kind, fd=None, most_data=None, lock=True):
                held = tiers.gpu_use(key, exclusive=False) if gpu and lock else contextlib.nullcontext()
                with held:
                    return session.ask(message, limit, kind, fd, most_data)

            def checked(read, reply, *args):
                return read(reply, *args)

            reply, _ = ask(None, limits.load_s, "loaded")
            if reply.get("kind") != "loaded":
                raise RuntimeError(f"{sources.display(path)} does not load: {reply.get('summary')}")
            for what in whats:
                out[what] = time_calls(spec, spec.timed_case(), seed, ask, checked, limits.extra_s, key, what)
        except (_Late, _Gone, _Garbled, _TooMuch, claims.Unreadable) as e:
            raise RuntimeError(f"the timing worker failed ({type(e).__name__})") from e
        finally:
            session.close()
    return out


def time_reference(spec, source_dir: Path, worker: Worker, limits: Limits, seed: int = 0) -> dict:
    """{"solution": Timing, "eager": Timing}: the course's solution and the torch baseline timed on the
    task's timed case in ``worker`` (the grader's own), the way a learner's kernel is. RuntimeError when
    either fails."""
    timed = time_file(spec, source_dir, worker, limits, ("entry", "baseline"), seed)
    out = {}
    for name, what in (("solution", "entry"), ("eager", "baseline")):
        timing, outcome = timed[what]
        if timing is None or not outcome.ok:
            raise RuntimeError(f"the {name} failed when timed: {outcome.summary}")
        out[name] = timing
    return out


# wrong outputs diagnosed in a grading, at most: the first failures are the small cases, which name a mistake
# when any can; a kernel wrong everywhere paid for a guess at every case (16 on chapter 11's GPU cases)
DIAGNOSED_CASES = 3


def probe_seed(seed: int) -> int:
    """The seed a task's probe is given when the task is graded with ``seed``: a probe may draw its shape from
    it, so that a launcher cannot tell the probe's call by a fixed shape."""
    return seed + 104729


def _one_case(
    spec, case, case_seed: int, ask, checked, limit: float, device=None, diagnose: bool = True
) -> case_tools.Outcome:
    if spec.call_case is not None:  # a task that is no kernel: a question, answered in plain data
        function, kwargs = spec.call_case(case, case_seed)
        reply, _ = ask({"kind": "call", "function": function, "kwargs": kwargs}, limit, "call_done")
        reply = checked(claims.call_done, reply)
        if "todo" in reply:
            return case_tools.Outcome.failed(reply["todo"], status=TODO)
        try:
            ok, summary, details = spec.judge_call(case, function, kwargs, reply)
        except Exception as e:  # a malformed reply that passed the type checks
            return case_tools.Outcome.failed(f"the grader cannot read what your function returned ({type(e).__name__})")
        return case_tools.Outcome(ok, summary, details, PASS if ok else FAIL)
    began = time.perf_counter()
    prepared = case_tools.prepare(spec, case, case_seed)
    with SharedCase(prepared.tensors) as shared:
        message = {"kind": "case", "shared": shared.message, "order": prepared.order, "values": prepared.values}
        if spec.simulated:  # CPU mode's Gluon simulator: events as often as partitions, or as late as can be
            message["simulation"] = {"seed": case_seed, "event_weight": 1.0 if case_seed % 2 == 0 else 0.0}
        # a returned tensor is the size of the case's tensors, give or take padding: never more than this
        most = 16 * shared.nbytes + (1 << 20)
        made = time.perf_counter()
        reply, data = ask(message, limit, "case_done", fd=shared.fd, most_data=most)
        ran = time.perf_counter()
        sizes = {name: t.numel() for name, t in shared.tensors.items()}
        outputs = {name: sizes[name] for name in spec.outputs if name in sizes}
        inputs = {name: n for name, n in sizes.items() if name not in spec.outputs and not name.endswith("(guarded)")}
        reply = checked(claims.case_done, reply, inputs, outputs)
        try:
            prepared.tensors = shared.returned_views()
        except CaseFileDamaged as e:
            return case_tools.Outcome.failed(
                f"the case's shared file came back damaged ({e}): something in the task file truncated it"
            )
        returned = None
        if data is not None and reply["returned"] is not None and "dtype" in reply["returned"]:
            try:
                returned, span = tensor_from_bytes(reply["returned"], data)
                reply["span"] = span
            except (ValueError, TypeError, RuntimeError) as e:
                return case_tools.Outcome.failed(f"the launcher returned a tensor the grader cannot read back ({e})")
        outcome = case_tools.judge(spec, case, prepared, reply, returned, device=device, diagnose=diagnose)
        if trace.on():  # where a case's time goes: its inputs made, the learner's run, the judging
            now = time.perf_counter()
            trace.event("case", label=case.label, bytes=shared.nbytes, made_s=round(made - began, 4),
                        ran_s=round(ran - made, 4), judged_s=round(now - ran, 4), ok=outcome.ok)  # fmt: skip
        return outcome


def _hung(result: TaskResult, phase: str, waited: float, limits: Limits, whole_task: bool) -> TaskResult:
    result.status = TIMEOUT
    what = "the task as a whole" if whole_task else phase
    result.summary = (
        f"no result after {waited:.0f} s for {what}: the kernel or launcher seems to hang "
        "(a loop that never ends, or a grid far too large)"
    )
    result.details = [
        f"time limits: {limits.describe()}",
        "A right kernel far slower than the course's solution ends here too (in CPU mode, a construct the "
        "interpreter runs slowly, such as a loop of many small steps per program): `check --timeout SECONDS` "
        "gives it longer.",
    ]
    return result


def _ended(result: TaskResult, phase: str, how: str) -> TaskResult:
    result.status = CRASH
    result.summary = (
        f"the process running your code ended ({how}) during {phase}, before reporting: the kernel or "
        "launcher crashed Python (a raw pointer gone wrong, os._exit, or the memory limit)"
    )
    return result


def _failed(spec, result: TaskResult, cases, failures, source_dir: Path, seed: int, tf32_lines=()) -> TaskResult:
    # the first failure, unless a later one names the mistake (a 1-element case rarely can)
    index, case, outcome = next((f for f in failures if f[2].diagnosed), failures[0])
    result.status = CRASH if failures[0][2].status == CRASH else FAIL
    result.failed = "raised" if outcome.raised else "values"
    result.summary = f"case '{case.label}' {outcome.summary}"
    which = "first failure" if index == failures[0][0] else "failure reported"
    result.details = [
        f"failed {len(failures)} of {len(cases)} cases: {', '.join(_short(c) for _, c, _ in failures)}",
        f"{which}: {case.describe()} (case {index + 1} of {len(cases)})",
        *outcome.details,
        f"reproduce: {reproduce_line(spec.name, source_dir, seed)}",
    ]
    values_wrong = [c for _, c, o in failures if not o.raised and o.status != CRASH]
    if tf32_lines and values_wrong and all(str(c.dtype) == "torch.float32" for _, c, _ in failures):
        where = ", ".join(map(str, tf32_lines))
        result.summary += (
            f"; only float32 cases fail, and tl.dot (line{'s' * (len(tf32_lines) > 1)} {where}) gives no "
            "input_precision: Triton then "
            'multiplies float32 in TF32, 10 bits of each input kept. Pass input_precision="ieee"'
        )
    return result
