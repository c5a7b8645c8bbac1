"""The operating-system sandbox around a worker that grades someone else's code (grader/sandbox.py).

Arbitrary code runs in these workers (the pre-check is off in every test here): each test shows what
the sandbox alone holds. A spy submission tries to read the reference solutions, another learner's
file, the grader's cache and the hidden cases, to write them, to see other processes, to reach the
network, and to leave a process behind; it reports what it managed by raising, so that its report
lands in its own result. Everything it aims at is this test's own scratch: a room under tmp_path,
the session's cache (conftest's COURSE_CACHE), a socket this test opens. A file it might create
where it must not (were the sandbox broken) is an empty one with a unique name, removed afterwards.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import secrets
import site
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, requires_sandbox, run_course

from course_lib import grader, runtime
from course_lib.grader import sandbox

pytestmark = requires_sandbox
SEED = 5

SPY_HEAD = """
import json, os, socket

TARGETS = {targets!r}
found = {{}}


def attempt(name, fn):
    try:
        found[name] = ("done", str(fn())[:200])
    except Exception as e:  # noqa: BLE001
        found[name] = ("refused", type(e).__name__)


def read(path):
    with open(path, "rb") as f:
        return f.read(64)


def write(path, data=b"# changed by the spy"):
    with open(path, "wb") as f:
        f.write(data)
    return "written"


def connect(address):
    s = socket.create_connection(address, timeout=2)
    s.close()
    return "connected"


def proc_texts():
    texts = []
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
        for part in ("environ", "cmdline"):
            try:
                with open(f"/proc/{{pid}}/{{part}}", "rb") as f:
                    texts.append(f.read().decode(errors="replace"))
            except OSError:
                pass
    return " ".join(texts).replace("\\0", " ")
"""
ATTEMPTS = {
    "read solution": 'read(TARGETS["solution"])',
    "list course root": 'os.listdir(TARGETS["course_root"])',
    "read victim": 'read(TARGETS["victim"])',
    "list room": 'os.listdir(TARGETS["room"])',
    "read hidden": 'read(TARGETS["hidden"])',
    "read the grader's folder": 'os.listdir(TARGETS["grader_cwd"])',
    "read /etc/shadow": 'read("/etc/shadow")',
    "write victim": 'write(TARGETS["victim"])',
    "write cache": 'write(os.path.join(TARGETS["cache"], "limits-poisoned.json"), b"{}")',
    "plant in site-packages": 'write(TARGETS["planted"], b"")',
    "write own task file": "write(__file__)",
    "signal the grader": 'os.kill(TARGETS["grader_pid"], 0)',
    "loopback": 'connect(("127.0.0.1", TARGETS["port"]))',
    "outside": 'connect(("1.1.1.1", 53))',
    "processes": 'sorted(int(p) for p in os.listdir("/proc") if p.isdigit())',
    "seen in /proc": '[w for w in (TARGETS["token"], "COURSE_HIDDEN", "COURSE_CACHE") if w in proc_texts()]',
}
READS = ("read solution", "list course root", "read victim", "list room", "read hidden")


def spy_source(targets: dict, attempts=tuple(ATTEMPTS)) -> str:
    """A task file that makes each attempt at import and raises its findings as JSON."""
    lines = [SPY_HEAD.format(targets=targets)]
    lines += [f"attempt({name!r}, lambda: {ATTEMPTS[name]})" for name in attempts]
    lines.append('raise RuntimeError("SPY" + json.dumps(found) + "YPS")')
    return "\n".join(lines) + "\n"


def spy_report(result: grader.TaskResult) -> dict:
    text = result.summary + "\n".join(result.details)
    start, end = text.index("SPY") + 3, text.index("YPS")
    return json.loads(text[start:end])


@pytest.fixture
def room(tmp_path):
    """A room of two learners, a hidden-cases file with a secret in its name and contents, and a
    listening socket: the spy's targets, all this test's own."""
    token = secrets.token_hex(8)
    (tmp_path / "instructor").mkdir()  # where the instructor starts the grader: it holds their secrets
    (tmp_path / "instructor" / f"answers-{token}.txt").write_text("the answer key")
    root = tmp_path / "room"
    (root / "victim").mkdir(parents=True)
    (root / "spy").mkdir()
    victim = root / "victim" / "vector_add.py"
    victim.write_bytes((ROOT / "solutions" / "vector_add.py").read_bytes())
    hidden = tmp_path / f"hidden-{token}.json"
    hidden.write_text(json.dumps({"vector_add": [{"shape": [77], "dtype": "float32", "label": f"hidden-{token}"}]}))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    planted = Path(site.getsitepackages()[0]) / f"course-spy-{token}.pth"
    cache = runtime.cache_root()
    cache.mkdir(parents=True, exist_ok=True)
    targets = {
        "solution": str(ROOT / "solutions" / "vector_add.py"),
        "course_root": str(ROOT),
        "victim": str(victim),
        "room": str(root),
        "cache": str(cache),
        "hidden": str(hidden),
        "planted": str(planted),
        "grader_pid": os.getpid(),
        "grader_cwd": str(tmp_path / "instructor"),
        "token": token,
        "port": listener.getsockname()[1],
    }
    (root / "spy" / "vector_add.py").write_text(spy_source(targets))
    yield {"root": root, "token": token, "hidden": hidden, "victim": victim, "listener": listener,
           "planted": planted, "cache": cache, "targets": targets}  # fmt: skip
    listener.close()
    planted.unlink(missing_ok=True)


def test_a_sandboxed_worker_reaches_nothing_but_its_own(room, monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_HIDDEN_CASES", str(room["hidden"]))
    monkeypatch.chdir(tmp_path / "instructor")  # the grader started in a folder of the instructor's
    monkeypatch.syspath_prepend(str(tmp_path / "instructor"))  # as `python -m` and scripts put it on sys.path
    before = hashlib.sha256(room["victim"].read_bytes()).hexdigest()
    result = grader.grade_task(
        "vector_add", room["root"] / "spy", SEED, hidden=str(room["hidden"]), check_source=False, sandboxed=True
    )
    assert result.sandboxed and result.status == "fail"
    found = spy_report(result)
    # the course's folder holds only what the worker's Python needs: course_lib (and the venv, if there)
    assert set(json.loads(found["list course root"][1].replace("'", '"'))) <= {"course_lib", ".venv"}
    for name in ("read solution", "read victim", "write victim", "list room", "write cache", "read the grader's folder",
                 "read /etc/shadow",
                 "read hidden", "plant in site-packages", "write own task file", "signal the grader", "loopback",
                 "outside"):  # fmt: skip
        assert found[name][0] == "refused", (name, found[name])
    assert found["processes"][0] == "done" and len(json.loads(found["processes"][1])) <= 3  # its own: init, itself
    assert found["seen in /proc"] == ["done", "[]"]  # no process there shows the grader's environment
    # nothing changed outside, and nothing the grader alone read is in the report or the output
    assert hashlib.sha256(room["victim"].read_bytes()).hexdigest() == before
    assert not (room["cache"] / "limits-poisoned.json").exists()
    assert not room["planted"].exists()
    with pytest.raises(BlockingIOError):
        room["listener"].accept()
    assert room["token"] not in "\n".join([result.summary, *result.details, result.output])


def test_the_same_spy_unsandboxed_reaches_what_the_sandbox_hides(room):
    """The control: without the sandbox (one's own check) the same reads succeed, so what the sandbox
    holds is the sandbox's doing. Only the reads of this test's own files run here: nothing is
    written, and no other process is looked at."""
    (room["root"] / "spy" / "vector_add.py").write_text(spy_source(room["targets"], READS))
    result = grader.grade_task("vector_add", room["root"] / "spy", SEED, check_source=False, sandboxed=False)
    found = spy_report(result)
    assert not result.sandboxed
    assert {found[name][0] for name in READS} == {"done"}, found


def _attacker(victim: Path, cache: Path, marker: str) -> str:
    return f"""
import os, subprocess
for path in ({str(victim)!r}, {str(cache / "limits-cpu.json")!r}):
    try:
        with open(path, "w") as f:
            f.write("broken")
    except OSError:
        pass
subprocess.Popen(["sleep", "300", {marker!r}], start_new_session=True)  # left behind, on purpose


def vector_add(x, y, out):
    return out
"""


def _processes_with(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                    found.append(pid)
            except OSError:
                pass
    return found


def test_a_room_graded_together_harms_no_peer_and_leaves_no_process(room):
    marker = f"course-spy-{room['token']}"
    attacker = room["root"] / "spy" / "vector_add.py"
    attacker.write_text(_attacker(room["victim"], room["cache"], marker))
    before = room["victim"].read_bytes()
    jobs = [grader.Job(name, "vector_add", room["root"] / name) for name in ("spy", "victim")]
    results = grader.grade_jobs(jobs, seed=SEED, workers=2, check_source=False, sandboxed=True)
    spy, victim = results
    said = "\n".join(f"{r.learner}: {r.status}: {r.summary}\n{r.output[-1500:]}" for r in results)
    assert spy.status == "fail" and victim.status == "pass", said
    assert room["victim"].read_bytes() == before
    assert (
        not (room["cache"] / "limits-cpu.json").exists()
        or "broken" not in (room["cache"] / "limits-cpu.json").read_text()
    )
    time.sleep(0.5)
    assert _processes_with(marker) == [], "a process the submission started outlived its sandbox"


def test_the_view_binds_no_course_folder_but_course_lib_and_clears_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_HIDDEN_CASES", "/somewhere/hidden.json")
    monkeypatch.chdir(tmp_path)
    view = sandbox.View(
        task_dir=tmp_path,
        env=sandbox.worker_environment({"COURSE_MODE": "cpu"}),
        hidden=[runtime.course_root()],
        allowed=[Path(sys.prefix)],
    )
    args = sandbox.command(view, ["python"])
    binds = [args[i + 1] for i, a in enumerate(args) if a in ("--ro-bind", "--bind", "--dev-bind")]
    root = str(runtime.course_root())
    inside = [b for b in binds if b == root or b.startswith(root + os.sep)]
    assert inside and all(b.startswith((str(ROOT / "course_lib"), sys.prefix)) for b in inside), inside
    assert str(tmp_path) in binds  # the task folder, read-only
    assert binds.count(str(tmp_path)) == 1 and "/tmp" not in binds and "/" not in binds
    assert "--clearenv" in args and "--unshare-all" in args and "--die-with-parent" in args
    assert "/somewhere/hidden.json" not in args and not any("COURSE_HIDDEN" in a for a in args)
    assert args[args.index("--cap-drop") + 1] == "ALL"


def test_without_a_sandbox_a_room_is_refused_and_graded_only_when_told(tmp_path):
    room = tmp_path / "room"
    (room / "ada").mkdir(parents=True)
    (room / "ada" / "vector_add.py").write_bytes((ROOT / "solutions" / "vector_add.py").read_bytes())
    out = tmp_path / "grades.csv"
    no_bwrap = {"COURSE_BWRAP": "/bin/false"}
    progress = tmp_path / "progress.json"
    refused = run_course("grade", str(room), "--out", str(out), "--task", "vector_add", progress=progress, env=no_bwrap)
    assert refused.returncode == 2 and "cannot grade a room safely here" in refused.stderr
    assert "--unsandboxed" in refused.stderr and not out.exists()
    graded = run_course(
        "grade", str(room), "--out", str(out), "--task", "vector_add", "--unsandboxed", progress=progress, env=no_bwrap
    )
    assert graded.returncode == 0, graded.stdout + graded.stderr
    rows = list(csv.DictReader(out.open(newline="")))
    assert rows[0]["sandboxed"] == "no" and rows[0]["status"] == "pass"
    assert "WITHOUT the sandbox" in (tmp_path / "grades.summary.md").read_text()
    checked = run_course("check", "vector_add", "--source", str(room / "ada"), progress=progress, env=no_bwrap)
    assert checked.returncode == 0 and "was graded without the sandbox" in checked.stdout


def test_ones_own_work_is_graded_without_making_a_trial_sandbox(monkeypatch):
    """The trial sandbox imports torch (a second or two): checking one's own exercises needs none, so
    none is made; a room's worker still asks for one. Without bwrap the reason is known without a trial."""

    def trial():
        raise AssertionError("a trial sandbox was made")

    trial.cache_info = lambda: type("Info", (), {"currsize": 0})()
    monkeypatch.setattr(sandbox, "available", trial)
    monkeypatch.delenv("COURSE_SANDBOX", raising=False)
    assert not grader.make_worker(ROOT / "exercises").sandboxed
    assert not grader.make_worker(ROOT / "solutions", sandboxed=False).sandboxed
    with pytest.raises(AssertionError, match="trial sandbox"):
        grader.make_worker(ROOT / "tests" / "good" / "controls")  # another's work: sandboxed if possible
    monkeypatch.setattr(sandbox, "_bwrap", lambda: None)
    assert "not installed" in sandbox.known_unavailable()
    monkeypatch.setattr(sandbox, "_bwrap", lambda: "/usr/bin/bwrap")
    assert sandbox.known_unavailable() is None  # not known without a trial: the note is left to the doctor


def test_a_room_is_graded_in_the_sandbox_and_says_so(tmp_path):
    room = tmp_path / "room"
    (room / "ada").mkdir(parents=True)
    (room / "ada" / "vector_add.py").write_bytes((ROOT / "solutions" / "vector_add.py").read_bytes())
    out = tmp_path / "grades.csv"
    run = run_course("grade", str(room), "--out", str(out), "--task", "vector_add", progress=tmp_path / "p.json")
    assert run.returncode == 0, run.stdout + run.stderr
    assert next(csv.DictReader(out.open(newline="")))["sandboxed"] == "yes"
    assert "graded in the sandbox: bubblewrap" in (tmp_path / "grades.summary.md").read_text()


def test_the_doctor_reports_the_sandbox(tmp_path):
    run = run_course("doctor", progress=tmp_path / "p.json")
    assert "grading sandbox" in run.stdout and "bubblewrap" in run.stdout
    missing = run_course("doctor", progress=tmp_path / "p.json", env={"COURSE_BWRAP": "/bin/false"})
    assert "[warn] grading sandbox" in missing.stdout and "Checking your own exercises works" in missing.stdout.replace(
        "\n", " "
    ).replace("  ", " ")


def test_a_case_file_has_no_name_and_is_private():
    import torch

    from course_lib.grader.shared import SharedCase

    with SharedCase({"x": torch.arange(10.0)}) as shared:
        info = os.fstat(shared.fd)
        assert info.st_nlink == 0 and info.st_mode & 0o077 == 0  # no name anywhere; this user's alone
        assert not any(p.name.startswith("course-case-") for p in Path("/dev/shm").iterdir() if p.is_file())


def test_a_case_file_holds_every_layout_and_reads_back_what_the_worker_left(monkeypatch):
    """Views of one storage, a strided view with an offset and a guarded output are
    written once each, read as written (``tensors``), and read back as the file holds them after
    another process changed it, in pieces smaller than the file; the gaps between storages are zeros;
    a file cut short is CaseFileDamaged."""
    import torch

    from course_lib.grader import shared as shared_module
    from course_lib.grader.shared import CaseFileDamaged, SharedCase

    monkeypatch.setattr(shared_module, "_CHUNK", 1000)  # many read and write calls per region
    base = torch.arange(3000, dtype=torch.float32)
    strided = torch.arange(600, dtype=torch.float16).reshape(20, 30)[2:, ::3]
    guarded = torch.full((5000,), float("nan"))
    tensors = {"a": base[:1000], "b": base[1000:], "s": strided, "out (guarded)": guarded,
               "out": guarded[64:4064]}  # fmt: skip
    with SharedCase(tensors) as shared:
        assert len(shared.regions) == 3  # base's storage once
        for name, t in tensors.items():
            got = shared.tensors[name]
            assert got.dtype == t.dtype and got.shape == t.shape and torch.equal(got.nan_to_num(), t.nan_to_num())
        raw = shared.read_back()
        (offset, nbytes), (second, _) = shared.regions[0], shared.regions[1]
        assert not raw[offset + nbytes : second].any()  # the gap
        os.pwrite(shared.fd, torch.tensor([7.0] * 3).numpy().tobytes(), offset + 4)  # a, elements 1-3
        back = shared.returned_views()
        assert back["a"][:5].tolist() == [0.0, 7.0, 7.0, 7.0, 4.0] and shared.tensors["a"][1] == 1.0
        os.ftruncate(shared.fd, shared.nbytes - 5000)
        with pytest.raises(CaseFileDamaged, match="holds"):
            shared.returned_views()


def test_stale_job_folders_of_this_user_are_removed(tmp_path, monkeypatch):
    from course_lib.grader import isolation

    monkeypatch.setattr(isolation, "_private_root", lambda: str(tmp_path))
    old, new = tmp_path / "course-job-old", tmp_path / "course-job-new"
    old.mkdir()
    new.mkdir()
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    isolation.remove_stale_jobs()
    assert not old.exists() and new.exists()


def test_a_worker_left_running_dies_with_its_sandbox(tmp_path):
    """bwrap's --die-with-parent and PID namespace: killing the sandbox ends everything inside it."""
    marker = f"course-orphan-{secrets.token_hex(6)}"
    view = sandbox.View(task_dir=tmp_path, hidden=[runtime.course_root()], allowed=[Path(sys.prefix)])
    argv = ["/bin/sh", "-c", f"(sleep 300 {marker} &) ; sleep 300"]
    proc = subprocess.Popen(sandbox.command(view, argv))
    time.sleep(1.0)
    assert _processes_with(marker)
    proc.kill()
    proc.wait()
    time.sleep(0.5)
    assert _processes_with(marker) == []


RESOURCES = """
import os, threading, time
WHAT = {what!r}
if WHAT == "memory":  # four processes of 400 MB each: each under any limit per process
    for _ in range(3):
        if os.fork() == 0:
            break
    block = bytearray(400 << 20)
    time.sleep(60)
elif WHAT == "memfd":  # memory in files no process maps: in no process's resident set
    files = []
    for _ in range(6):
        fd = os.memfd_create("held")
        os.posix_fallocate(fd, 0, 256 << 20)
        files.append(fd)
    time.sleep(60)
elif WHAT == "threads":
    for _ in range(200):
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    time.sleep(60)
else:  # the host's settings and the sandbox's own disks
    found = {{}}
    for name, path, data in (("sysctl", "/proc/sys/kernel/core_pattern", b"core"), ("root", "/big", b"x"),
                             ("dev", "/dev/big", b"x"), ("shm", "/dev/shm/big", b"x" * (128 << 20))):
        try:
            with open(path, "wb") as f:
                f.write(data)
            found[name] = "written"
        except OSError as e:
            found[name] = type(e).__name__
    raise RuntimeError("SPY" + __import__("json").dumps(found) + "YPS")


def vector_add(x, y, out):
    return out
"""


@pytest.mark.parametrize("what", ["memory", "memfd", "threads"])
def test_a_sandbox_as_a_whole_is_held_to_its_memory_and_threads(tmp_path, monkeypatch, what):
    from course_lib.grader import isolation

    monkeypatch.setitem(isolation.SANDBOX_MEMORY_BYTES, runtime.MODE, 1 << 30)
    monkeypatch.setattr(isolation, "SANDBOX_TASKS", 128)
    (tmp_path / "vector_add.py").write_text(RESOURCES.format(what=what))
    start = time.monotonic()
    result = grader.grade_task("vector_add", tmp_path, SEED, timeout=40, check_source=False, sandboxed=True)
    assert result.status == "crash" and "stopped by the grader" in result.summary, result.summary
    assert ("threads and processes" if what == "threads" else "GiB of memory together") in result.summary
    assert time.monotonic() - start < 35


def test_the_hosts_settings_and_the_sandboxs_disks_are_not_writable(tmp_path):
    (tmp_path / "vector_add.py").write_text(RESOURCES.format(what="disks"))
    result = grader.grade_task("vector_add", tmp_path, SEED, check_source=False, sandboxed=True)
    found = spy_report(result)
    assert found["sysctl"] != "written" and found["root"] != "written" and found["dev"] != "written"
    assert found["shm"] != "written"  # 128 MB into a 64 MB /dev/shm
