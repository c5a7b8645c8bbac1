"""One install, many users (a JupyterHub): each user's checks grade their own copy of the course and
write their own progress; the grader's workers and memory follow the container's quota, not the
host's size."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from course_lib import runtime, stubs
from course_lib.grader import isolation

ROOT = Path(__file__).resolve().parent.parent


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_quota_of_a_cgroup_v2_container(tmp_path):
    _tree(tmp_path / "fs", {
        "cpu.max": "max 100000", "memory.max": "max",
        "hub/user-ada/cpu.max": "150000 100000", "hub/user-ada/memory.max": str(2 * 2**30),
        "hub/cpu.max": "400000 100000",
    })  # fmt: skip
    _tree(tmp_path, {"cgroup": "0::/hub/user-ada\n"})
    assert runtime.quota(tmp_path / "fs", tmp_path / "cgroup") == runtime.Quota(1.5, 2 * 2**30)
    _tree(tmp_path, {"none": "0::/\n"})
    assert runtime.quota(tmp_path / "fs", tmp_path / "none") == runtime.Quota(None, None)


def test_the_quota_of_a_cgroup_v1_container(tmp_path):
    _tree(tmp_path / "fs", {
        "cpu,cpuacct/cpu.cfs_quota_us": "-1", "cpu,cpuacct/cpu.cfs_period_us": "100000",
        "cpu,cpuacct/docker/c1/cpu.cfs_quota_us": "200000", "cpu,cpuacct/docker/c1/cpu.cfs_period_us": "100000",
        "memory/memory.limit_in_bytes": "9223372036854771712",
    })  # fmt: skip
    _tree(tmp_path, {"cgroup": "4:memory:/docker/c1\n1:cpu,cpuacct:/docker/c1\n0::/\n"})
    assert runtime.quota(tmp_path / "fs", tmp_path / "cgroup") == runtime.Quota(2.0, None)
    _tree(tmp_path / "fs", {"memory/docker/c1/memory.limit_in_bytes": str(3 * 2**30)})
    assert runtime.quota(tmp_path / "fs", tmp_path / "cgroup").memory_bytes == 3 * 2**30


def test_workers_and_memory_follow_the_quota(monkeypatch):
    monkeypatch.setattr(runtime, "quota", lambda: runtime.Quota(1.5, 2 * 2**30))
    assert runtime.usable_cpus() == 1
    monkeypatch.delenv("COURSE_CHILD_MEMORY_GB", raising=False)
    assert isolation.child_memory_bytes() == int(1.5 * 2**30)  # three quarters of a Binder's 2 GB
    monkeypatch.setattr(runtime, "quota", lambda: runtime.Quota(None, 64 * 2**30))
    assert isolation.child_memory_bytes() == 6 * 2**30
    assert runtime.usable_cpus() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("COURSE_CHILD_MEMORY_GB", "3")
    assert isolation.child_memory_bytes() == 3 * 2**30


def _user_copy(home: Path, solved: bool) -> Path:
    """A user's own copy of the course: the notebooks, the solutions, and exercises/ (vector_copy
    solved or untouched)."""
    course = home / "course"
    shutil.copytree(ROOT / "notebooks", course / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copytree(ROOT / "solutions", course / "solutions", ignore=shutil.ignore_patterns("__pycache__"))
    (course / "exercises").mkdir()
    solution = (ROOT / "solutions" / "vector_copy.py").read_text()
    (course / "exercises" / "vector_copy.py").write_text(
        solution if solved else stubs.make_exercise(solution, "vector_copy")
    )
    return course


def test_one_install_grades_each_users_own_copy(tmp_path):
    ada, bob = _user_copy(tmp_path / "ada", solved=True), _user_copy(tmp_path / "bob", solved=False)
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_ROOT", "COURSE_PROGRESS")}
    seen = {}
    for name, course in (("ada", ada), ("bob", bob)):
        done = subprocess.run(
            [sys.executable, "-m", "course_lib", "check", "vector_copy"],
            cwd=course / "notebooks", env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        seen[name] = done.stdout.split()[0] if done.stdout.strip() else done.stderr
        progress = json.loads((course / "progress.json").read_text())
        assert progress["tasks"]["vector_copy"]["last_status"] == ("pass" if name == "ada" else "todo"), progress
    assert seen == {"ada": "PASS", "bob": "TODO"}
    assert not (ROOT / "notebooks" / "progress.json").exists()


def test_the_doctor_warns_of_a_container_too_small_to_grade_in():
    from course_lib import checkup

    assert checkup.memory_finding(None).level == checkup.OK
    assert checkup.memory_finding(4 * 2**30).level == checkup.OK
    small = checkup.memory_finding(1 * 2**30)
    assert small.level == checkup.WARN and "2 GiB or more" in small.detail
