"""Mode set-up and the grader's isolation, seen from fresh Python processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT, TESTS

from course_lib import grader, runtime
from course_lib.grader import FAIL, PASS, report


def python(code_or_script: str, tmp_path, env: dict | None = None, script: bool = False):
    full_env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "COURSE_MODE")}
    full_env["COURSE_PROGRESS"] = str(tmp_path / "progress.json")
    full_env.update(env or {})
    argv = [sys.executable, code_or_script] if script else [sys.executable, "-c", code_or_script]
    return subprocess.run(argv, cwd=tmp_path, env=full_env, capture_output=True, text=True, timeout=300)


def test_cpu_mode_sets_up_the_interpreter():
    assert runtime.is_cpu() and runtime.device() == "cpu"
    assert os.environ["TRITON_INTERPRET"] == "1"


def test_triton_imported_first_gives_a_clear_message(tmp_path):
    run = python("import triton\nimport course_lib", tmp_path, env={"COURSE_MODE": "cpu"})
    assert run.returncode != 0
    error = run.stderr[run.stderr.rindex("course_lib.runtime.CourseSetupError: ") :]
    assert error.startswith("course_lib.runtime.CourseSetupError: Triton was imported before course_lib"), run.stderr
    assert "restart the Python kernel" in error
    assert f"{os.sep}triton{os.sep}" not in run.stderr.replace(str(ROOT), "")  # no frame deep in Triton


def test_triton_imported_first_is_fine_with_the_interpreter_on(tmp_path):
    run = python("import triton\nimport course_lib\nprint(course_lib.MODE)", tmp_path, env={"TRITON_INTERPRET": "1"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "cpu"


def test_unknown_mode_is_explained(monkeypatch):
    monkeypatch.setenv("COURSE_MODE", "tpu")
    with pytest.raises(runtime.CourseSetupError, match="COURSE_MODE='tpu' is not understood"):
        runtime._want_mode()


def test_check_from_a_script_without_a_main_guard(tmp_path):
    """A learner's script calls check() at top level, with no `if __name__ == "__main__":`."""
    script = tmp_path / "my_check.py"
    script.write_text(
        "import course_lib\n\n"
        "result = course_lib.check('vector_add', source='solutions', seed=1)\n"
        "print('ALL PASS' if result.passed else repr(result))\n"
    )
    run = python(str(script), tmp_path, env={"COURSE_MODE": "cpu", "COURSE_ROOT": str(ROOT)}, script=True)
    assert run.stdout.strip().splitlines()[-1:] == ["ALL PASS"], run.stdout + run.stderr


def test_what_the_learner_code_printed_is_shown(isolated_grader, tmp_path):
    (tmp_path / "vector_add.py").write_text(
        "def vector_add(x, y, out):\n    print('my debug line', x.shape)\n    return out\n"
    )
    result = isolated_grader.grade(["vector_add"], source=tmp_path, seed=1)[0]
    assert result.status == FAIL and "no Triton kernel was launched" in result.summary
    assert "my debug line torch.Size([1])" in result.output
    text = report.text([result])
    assert "your code printed:" in text and "my debug line" in text


def test_grading_in_process_and_isolated_agree(isolated_grader):
    seed = 5
    inside = grader.grade_task("vector_add", TESTS / "wrong" / "wrong_formula", seed=seed)
    isolated = isolated_grader.grade(["vector_add"], source=TESTS / "wrong" / "wrong_formula", seed=seed)[0]
    assert inside.status == isolated.status == FAIL
    assert (inside.summary, inside.details) == (isolated.summary, isolated.details)
    solved = isolated_grader.grade(["vector_add"], source="solutions", seed=seed)[0]
    assert solved.status == PASS


def test_a_folder_outside_the_course_gets_a_note_naming_the_graded_one(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_ROOT", raising=False)
    root = runtime.course_root()
    assert runtime.other_checkout_note(root) == ""
    assert runtime.other_checkout_note(root / "notebooks") == ""
    note = runtime.other_checkout_note(tmp_path)
    assert str(root) in note and str(tmp_path.resolve()) in note and "COURSE_ROOT" in note
    monkeypatch.setenv("COURSE_ROOT", str(tmp_path))
    assert runtime.other_checkout_note(tmp_path) == ""


def test_gpu_mode_gives_triton_a_scratch_allocator(monkeypatch):
    """A tensor descriptor made inside a kernel (tl.make_tensor_descriptor) needs scratch memory at each launch,
    from the allocator triton.set_allocator installs (Triton's default raises). GPU mode installs one backed by
    torch; CPU mode, whose interpreter needs none, leaves Triton's default alone."""
    import torch
    import triton
    from triton.runtime import _allocation

    before = _allocation._allocator.get()
    try:
        assert runtime.install_scratch_allocator() is False and _allocation._allocator.get() is before  # CPU mode
        monkeypatch.setattr(runtime, "MODE", runtime.GPU)
        made = []
        monkeypatch.setattr(torch, "empty", lambda size, **kw: made.append((size, kw)) or "buffer")
        assert runtime.install_scratch_allocator() is True
        assert _allocation._allocator.get()(128, 128, None) == "buffer"
        assert made == [(128, {"device": "cuda", "dtype": torch.int8})]
    finally:
        triton.set_allocator(before)


def test_what_a_context_variable_holds_is_set_again_before_every_notebook_cell():
    """ipykernel 5 (older Colab images) and 7.0.0 run each cell in a fresh context, where Triton's allocator
    (a context variable) is back to its default: the course sets it again before every cell, once per name
    however often it is imported, and not at all outside IPython."""
    import contextvars
    import types

    from IPython.core.events import EventManager, available_events

    shell = types.SimpleNamespace()
    shell.events = EventManager(shell, available_events)
    var = contextvars.ContextVar("course_test_var", default="default")
    assert runtime.keep_in_every_cell("test", lambda: var.set("set"), shell=shell) is True
    assert runtime.keep_in_every_cell("test", lambda: var.set("set"), shell=shell) is True  # imported again

    def a_cell_in_a_fresh_context():
        shell.events.trigger("pre_run_cell", None)
        return var.get()

    assert contextvars.Context().run(a_cell_in_a_fresh_context) == "set"
    assert len(shell.events.callbacks["pre_run_cell"]) == 1
    assert var.get() == "default"  # only the cell's context was touched


def test_a_task_file_that_sets_triton_s_allocator_is_told_the_course_does(tmp_path):
    from course_lib.grader import precheck

    [finding] = precheck.check_source("import triton\n\ntriton.set_allocator(lambda size, align, stream: None)\n")
    assert finding.rule == "escape-attribute" and "the course installs one itself on a GPU" in finding.message
    assert "delete the call" in finding.message
