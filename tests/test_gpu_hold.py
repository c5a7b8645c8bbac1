"""A grading step's shared hold on the GPU is let go while the worker compiles (tiers.SharedHold,
isolation._Session.ask, worker._GpuHold): a timer of another job then waits for launches, not for
compiles. The protocol is tested here with a worker played by a thread over a socket pair; the real
Triton hooks only fire on a GPU (the GPU-only test at the end)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from course_lib import filelock, runtime
from course_lib.grader import isolation, tiers, worker

KEY = "hold-test"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


class _Alive:
    pid = os.getpid()

    def is_alive(self) -> bool:
        return True


def _session_and_worker_end():
    """A _Session whose worker is the other end of a socket pair (played by the test)."""
    mine, theirs = socket.socketpair()
    session = isolation._Session.__new__(isolation._Session)
    session.receive = Connection(mine.detach())
    session.proc = _Alive()
    return session, Connection(theirs.detach())


def _send(conn, message: dict) -> None:
    conn.send_bytes(json.dumps(message).encode())


def _receive(conn) -> dict:
    return json.loads(conn.recv_bytes().decode())


def _slow_hold(seconds: float) -> type:
    """A SharedHold whose taking back waits ``seconds`` first, as behind another job's timing window."""

    class SlowHold(tiers.SharedHold):
        def on(self) -> float:
            if self.held:
                return 0.0
            time.sleep(seconds)
            return super().on() + seconds

    return SlowHold


def _lock_free_within(seconds: float) -> bool:
    """Whether a timer could hold the GPU alone within ``seconds`` (no step holds it shared)."""
    try:
        fd = filelock.acquire(tiers._locks_dir() / f"gpu-{KEY}.lock", exclusive=True, within_s=seconds)
    except filelock.NotNow:
        return False
    filelock.release(fd)
    return True


def test_the_step_lets_the_gpu_go_while_the_worker_compiles_and_takes_it_back(cache):
    session, worker_end = _session_and_worker_end()
    seen = {}

    def worker_side():
        _receive(worker_end)  # the step
        seen["held at first"] = not _lock_free_within(0.2)
        _send(worker_end, {"kind": "gpu_off"})  # Triton is about to compile
        time.sleep(0.2)
        seen["free while compiling"] = _lock_free_within(2.0)
        _send(worker_end, {"kind": "gpu_on"})  # compiled: about to launch
        seen["granted"] = _receive(worker_end)["kind"]
        seen["held again"] = not _lock_free_within(0.2)
        _send(worker_end, {"kind": "case_done", "x": 1})

    thread = threading.Thread(target=worker_side)
    thread.start()
    with tiers.SharedHold(KEY) as hold:
        reply, _ = session.ask({"kind": "case"}, 10.0, "case_done", hold=hold)
        assert hold.held
    thread.join(10)
    assert reply == {"kind": "case_done", "x": 1}
    assert seen == {"held at first": True, "free while compiling": True, "granted": "gpu_granted", "held again": True}
    assert _lock_free_within(0.5)  # and let go at the end


def test_time_waited_for_the_gpu_does_not_count_against_the_step(cache):
    session, worker_end = _session_and_worker_end()

    SlowHold = _slow_hold(1.0)

    def worker_side():
        _receive(worker_end)
        _send(worker_end, {"kind": "gpu_off"})
        _send(worker_end, {"kind": "gpu_on"})
        _receive(worker_end)
        _send(worker_end, {"kind": "case_done"})

    thread = threading.Thread(target=worker_side)
    thread.start()
    with SlowHold(KEY) as hold:
        reply, _ = session.ask({"kind": "case"}, 0.6, "case_done", hold=hold)
    thread.join(10)
    assert reply["kind"] == "case_done"


@pytest.mark.parametrize("with_hold", [True, False])
def test_a_worker_that_asks_for_the_gpu_for_ever_still_runs_out_of_time(cache, with_hold, monkeypatch):
    """The waits extend the step by at most max(its own limit, MIN_GPU_EXTENSION_S) (here 0.5 s);
    without a hold nothing extends it."""
    monkeypatch.setattr(isolation, "MIN_GPU_EXTENSION_S", 0.5)
    session, worker_end = _session_and_worker_end()
    stop = threading.Event()

    SlowHold = _slow_hold(0.3)

    def worker_side():
        try:
            _receive(worker_end)
            while not stop.is_set():
                _send(worker_end, {"kind": "gpu_off"})
                _send(worker_end, {"kind": "gpu_on"})
                if _receive(worker_end)["kind"] != "gpu_granted":
                    return
        except (OSError, EOFError):  # the grader's end closed
            return

    thread = threading.Thread(target=worker_side, daemon=True)
    thread.start()
    began = time.monotonic()
    with SlowHold(KEY) as hold:
        # it runs out of time, or (answered at once, without a hold) of requests first
        with pytest.raises((isolation._Late, isolation._TooMuch)):
            session.ask({"kind": "case"}, 0.5, "case_done", hold=hold if with_hold else None)
    took = time.monotonic() - began
    stop.set()
    session.receive.close()
    thread.join(5)
    assert took < (0.5 + 0.5 + 0.3 + 0.5 if with_hold else 0.5 + 0.5), took


def test_loading_takes_the_gpu_only_when_the_worker_asks(cache):
    session, worker_end = _session_and_worker_end()
    seen = {}

    def worker_side():
        seen["free while importing"] = _lock_free_within(1.0)
        _send(worker_end, {"kind": "gpu_on"})  # the module compiled a kernel at import and launches it
        seen["granted"] = _receive(worker_end)["kind"]
        seen["held for the launch"] = not _lock_free_within(0.2)
        _send(worker_end, {"kind": "loaded"})

    thread = threading.Thread(target=worker_side)
    thread.start()
    with tiers.SharedHold(KEY, taken=False) as hold:
        assert _lock_free_within(0.2)
        session.ask(None, 10.0, "loaded", hold=hold)
    thread.join(10)
    assert seen == {"free while importing": True, "granted": "gpu_granted", "held for the launch": True}
    assert _lock_free_within(0.5)


def test_without_a_hold_the_worker_is_granted_at_once(cache):
    """A timing window (inside the exclusive hold) or a CPU step: the request is answered, nothing locked."""
    session, worker_end = _session_and_worker_end()

    def worker_side():
        _receive(worker_end)
        _send(worker_end, {"kind": "gpu_off"})
        _send(worker_end, {"kind": "gpu_on"})
        assert _receive(worker_end)["kind"] == "gpu_granted"
        _send(worker_end, {"kind": "speed_went"})

    thread = threading.Thread(target=worker_side)
    thread.start()
    reply, _ = session.ask({"kind": "speed_go"}, 5.0, "speed_went")
    thread.join(10)
    assert reply["kind"] == "speed_went"


def test_a_request_is_no_reply(cache):
    """A step that expects a reply never takes a request for one: a "gpu_off" is done and the step waits
    on for its answer (the protocol before the GPU hold called it a garbled reply), and what follows it
    must still be that answer."""
    session, worker_end = _session_and_worker_end()
    _send(worker_end, {"kind": "gpu_off"})
    _send(worker_end, {"kind": "case_done", "n": 1})
    reply, _ = session.ask(None, 2.0, "case_done")
    assert reply == {"kind": "case_done", "n": 1}
    _send(worker_end, {"kind": "gpu_off"})
    _send(worker_end, {"kind": "something else"})
    with pytest.raises(isolation._Garbled):
        session.ask(None, 2.0, "case_done")


# the worker's side ------------------------------------------------------------------------------


def test_the_worker_asks_once_from_its_own_thread_and_waits_for_the_grant():
    here, there = socket.socketpair()
    grader, conn = Connection(here.detach()), Connection(there.detach())
    hold = worker._GpuHold(conn)
    assert not hold.held  # loading the file: not held until asked for
    hold.off()
    assert not grader.poll(0.1)
    hold.begin_step()  # each step the grader sends: held for it
    assert hold.held
    assert hold.off() is False  # Triton's jit_cache_hook: False means "compile it"
    hold.off()  # once only
    assert _receive(grader) == {"kind": "gpu_off"}
    assert not grader.poll(0.1)
    _send(grader, {"kind": "gpu_granted"})
    hold.on()
    assert hold.held and _receive(grader) == {"kind": "gpu_on"}
    hold.on()  # held: nothing asked
    assert not grader.poll(0.1)

    other = threading.Thread(target=hold.off)  # a thread of the learner's: the socket is not its own
    other.start()
    other.join()
    assert hold.held and not grader.poll(0.1)

    hold.off()
    _receive(grader)
    _send(grader, {"kind": "case"})  # not the grant: the grader's words are out of step
    with pytest.raises(RuntimeError, match="request for the GPU"):
        hold.on()


def test_the_worker_hooks_triton_only_where_it_compiles_for_a_gpu():
    import triton

    from course_lib import hooks

    knobs = triton.knobs.runtime
    saved = knobs.jit_cache_hook, knobs.jit_post_compile_hook, hooks.before_run
    try:
        for mode, hooked in (("cpu", False), ("gpu", True)):
            knobs.jit_cache_hook = knobs.jit_post_compile_hook = hooks.before_run = None
            w = worker._Worker(None, {"file": "x.py", "mode": mode})
            assert (knobs.jit_cache_hook == w.hold.off) is hooked
            assert (knobs.jit_post_compile_hook == w.hold.on) is hooked
            assert (hooks.before_run == w.hold.on) is hooked
    finally:
        knobs.jit_cache_hook, knobs.jit_post_compile_hook, hooks.before_run = saved


def test_each_launch_first_takes_back_what_a_failed_compile_let_go():
    """A compile that raised calls no post-compile hook (an autotuner catches it and tries the next
    config): the course's launch wrapper calls hooks.before_run before every launch."""
    import torch
    import triton
    import triton.language as tl

    from course_lib import hooks

    @triton.jit
    def fill(out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        tl.store(out_ptr + offsets, 1.0, mask=offsets < n)

    calls = []
    saved = hooks.before_run
    hooks.before_run = lambda: calls.append(1)
    try:
        out = torch.zeros(8, device="cuda" if runtime.is_gpu() else "cpu")
        fill[(1,)](out, 8, BLOCK=8)
    finally:
        hooks.before_run = saved
    assert calls and out.sum().item() == 8


@pytest.mark.parametrize("requests", [isolation.MAX_GPU_REQUESTS + 5, 100_000])
def test_a_worker_that_asks_and_never_reads_is_stopped(cache, monkeypatch, requests):
    """Each answer is bytes in the worker's socket, which holds a few hundred: a flood of requests
    from a worker that never reads them would block the grader's next answer for ever. The answer
    that does not fit in time ends the step (_Late), as do more than MAX_GPU_REQUESTS (_TooMuch)."""
    monkeypatch.setattr(isolation, "SEND_WITHIN_S", 0.5)
    session, worker_end = _session_and_worker_end()
    stop = threading.Event()

    def worker_side():
        try:
            _receive(worker_end)
            for _ in range(requests):
                if stop.is_set():
                    return
                _send(worker_end, {"kind": "gpu_on"})
        except OSError:
            return

    thread = threading.Thread(target=worker_side, daemon=True)
    thread.start()
    began = time.monotonic()
    with pytest.raises((isolation._Late, isolation._TooMuch)):
        session.ask({"kind": "case"}, 30.0, "case_done")
    assert time.monotonic() - began < 10
    stop.set()
    session.receive.close()
    thread.join(5)
    assert not thread.is_alive()


def test_a_message_to_a_worker_that_reads_nothing_is_late_not_waited_for(tmp_path):
    """The grader's every send has a deadline: a full socket is _Late, and ending such a worker
    (close: "exit", then a kill) does not wait on it."""
    session, worker_end = _session_and_worker_end()
    filler = {"kind": "case", "pad": "x" * 4096}
    began = time.monotonic()
    with pytest.raises(isolation._Late):
        for _ in range(10_000):
            session.send(filler, within=0.3)
    assert time.monotonic() - began < 10

    class _Killable(_Alive):
        killed = False

        def join(self, timeout=None):
            return None

        def kill(self):
            self.killed = True

    session.proc = _Killable()
    session.log_path = str(tmp_path / "worker.log")  # close() reads the log, then removes it
    Path(session.log_path).write_text("")
    began = time.monotonic()
    session.close()
    assert time.monotonic() - began < 5 and session.proc.killed
    assert not Path(session.log_path).exists()
    worker_end.close()


def test_a_reply_waiting_when_the_extended_deadline_has_passed_is_read_not_late(cache, monkeypatch):
    """A wait for the GPU longer than the extension cap leaves the step's deadline behind it; a worker
    that answered at once is not hung for that (found by a review: it was reported as a TIMEOUT)."""
    monkeypatch.setattr(isolation, "MIN_GPU_EXTENSION_S", 0.1)
    session, worker_end = _session_and_worker_end()

    SlowHold = _slow_hold(1.5)

    def worker_side():
        _receive(worker_end)
        _send(worker_end, {"kind": "gpu_off"})
        _send(worker_end, {"kind": "gpu_on"})
        _receive(worker_end)
        _send(worker_end, {"kind": "case_done", "x": 2})

    thread = threading.Thread(target=worker_side)
    thread.start()
    with SlowHold(KEY) as hold:
        reply, _ = session.ask({"kind": "case"}, 0.3, "case_done", hold=hold)
    thread.join(10)
    assert reply["x"] == 2


def test_a_worker_that_trickles_its_reply_past_the_deadline_is_cut_off(cache):
    """What has arrived by the deadline is read for READ_GRACE_S more, no longer: a header that
    promises many bytes, then one byte now and then, is late."""
    import struct

    session, worker_end = _session_and_worker_end()
    stop = threading.Event()

    def worker_side():
        _receive(worker_end)
        # Connection's framing: a 4-byte length, then the bytes
        os.write(worker_end.fileno(), struct.pack("!i", 10_000) + b"{")
        while not stop.is_set():
            try:
                os.write(worker_end.fileno(), b" ")
            except OSError:
                return
            time.sleep(0.05)

    thread = threading.Thread(target=worker_side, daemon=True)
    thread.start()
    began = time.monotonic()
    with pytest.raises(isolation._Late):
        session.ask({"kind": "case"}, 0.5, "case_done")
    assert time.monotonic() - began < 0.5 + 2 * isolation.READ_GRACE_S + 1
    stop.set()
    session.receive.close()
    thread.join(5)


def test_the_log_read_at_the_end_is_removed_only_if_it_is_a_plain_file(tmp_path):
    """close() reads the worker's log and removes it; a path that is a link (or a device) stays."""
    target = tmp_path / "kept.txt"
    target.write_text("printed")
    link = tmp_path / "log-link"
    link.symlink_to(target)
    assert isolation._read_tail(str(link)) == "printed"
    assert link.is_symlink() and target.exists()
    plain = tmp_path / "worker.log"
    plain.write_text("printed")
    assert isolation._read_tail(str(plain)) == "printed" and not plain.exists()


def test_a_descriptor_still_reaches_the_worker(tmp_path):
    """send_fd writes what multiprocessing.reduction.recv_handle reads (the case files go this way)."""
    from multiprocessing import reduction

    session, worker_end = _session_and_worker_end()
    path = tmp_path / "case.bin"
    path.write_bytes(b"case bytes")
    fd = os.open(path, os.O_RDONLY)
    try:
        session.send_fd(fd)
    finally:
        os.close(fd)
    got = reduction.recv_handle(worker_end)
    with os.fdopen(got, "rb") as f:
        assert f.read() == b"case bytes"


def test_waiting_for_the_gpu_is_not_looking_hung(cache):
    session, worker_end = _session_and_worker_end()
    slow = []

    SlowHold = _slow_hold(1.0)

    def worker_side():
        _receive(worker_end)
        _send(worker_end, {"kind": "gpu_off"})
        _send(worker_end, {"kind": "gpu_on"})
        _receive(worker_end)
        time.sleep(0.2)
        _send(worker_end, {"kind": "case_done"})

    thread = threading.Thread(target=worker_side)
    thread.start()
    with SlowHold(KEY) as hold:
        session.ask({"kind": "case"}, 1.0, "case_done", on_slow=lambda: slow.append(1), hold=hold)
    thread.join(10)
    assert not slow, "a step that waited 1 s for other jobs' timing is not hung"


# on a GPU: the real hooks -----------------------------------------------------------------------


@pytest.mark.skipif(not runtime.is_gpu(), reason="Triton compiles for a GPU only there")
def test_a_job_lets_the_gpu_go_while_triton_compiles(tmp_path):
    trace_file = tmp_path / "trace.jsonl"
    env = {**os.environ, "COURSE_TRACE": str(trace_file), "COURSE_PERF": "0", "TRITON_CACHE_DIR": str(tmp_path / "t")}
    env["COURSE_PROGRESS"] = str(tmp_path / "progress.json")
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "course_lib", "check", "softmax", "--solutions"],
        cwd=root, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert "PASS" in done.stdout, done.stdout + done.stderr
    events = [json.loads(line) for line in trace_file.read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds.count("gpu let go") >= 1 and kinds.count("gpu taken back") >= 1, sorted(set(kinds))
