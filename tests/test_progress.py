"""The learner's progress file: atomic writes under a lock, never lost, a corrupt file kept aside."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from course_lib import progress
from course_lib.grader import FAIL, PASS, TODO, TaskResult


def result(task: str, status: str) -> TaskResult:
    return TaskResult(task, status, "summary")


def test_progress_path_follows_the_environment(progress_file):
    assert progress.progress_path() == progress_file


def test_results_are_recorded_and_read_back(progress_file):
    progress.record_results([result("vector_add", TODO), result("vector_copy", PASS)])
    progress.record_results([result("vector_add", FAIL), result("vector_copy", FAIL)])
    data = json.loads(progress_file.read_text())
    assert data == progress.load()
    add, copy = data["tasks"]["vector_add"], data["tasks"]["vector_copy"]
    assert add["attempts"] == 2 and add["last_status"] == FAIL and "first_passed" not in add
    assert copy["attempts"] == 2 and copy["last_status"] == FAIL and "first_passed" in copy
    assert progress.status_of("vector_copy", data) == "passed before, now fail"
    assert progress.status_of("vector_add", data) == "attempted"
    assert progress.status_of("scaled_add", data) == "not started"


def test_hints_seen_only_grow(progress_file):
    progress.record_hint("vector_add", 2)
    progress.record_hint("vector_add", 1)
    assert progress.load()["tasks"]["vector_add"]["hints_seen"] == 2


def test_a_crash_while_writing_keeps_the_old_file(progress_file, monkeypatch):
    progress.record_results([result("vector_add", PASS)])
    before = progress_file.read_text()

    def dump_half_then_die(data, f, **kwargs):
        f.write(json.dumps(data)[:10])
        raise KeyboardInterrupt  # the kernel is interrupted in the middle of the write

    monkeypatch.setattr(progress.json, "dump", dump_half_then_die)
    with pytest.raises(KeyboardInterrupt):
        progress.record_results([result("vector_add", FAIL)])
    assert progress_file.read_text() == before
    assert sorted(p.name for p in progress_file.parent.iterdir()) == ["progress.json", "progress.json.lock"]


def test_concurrent_updates_lose_nothing(progress_file):
    def one(i):
        progress.record_results([result("vector_add", TODO)])

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, range(64)))
    assert progress.load()["tasks"]["vector_add"]["attempts"] == 64


@pytest.mark.parametrize(
    "garbage",
    [b'{"tasks": {"vector_add": {"attem', b"", b"\xff\xfe\x00\x01 not text", b"[1, 2]", b'{"tasks": []}'],
    ids=["truncated", "empty", "not-utf8", "a-list", "tasks-a-list"],
)
def test_a_corrupt_file_is_moved_aside_not_deleted(progress_file, garbage):
    progress_file.write_bytes(garbage)
    progress.record_results([result("vector_add", PASS)])
    assert progress.load()["tasks"]["vector_add"]["last_status"] == PASS
    aside = [p for p in progress_file.parent.iterdir() if p.name.startswith("progress.json.unreadable")]
    assert len(aside) == 1, sorted(p.name for p in progress_file.parent.iterdir())
    assert aside[0].read_bytes() == garbage
