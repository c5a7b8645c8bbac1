"""Right kernels written in forms that compiled Triton takes and Triton's interpreter (3.6 to 3.9) did not:
CPU mode failed them, where a GPU passes them. course_lib.interpreter mends each; the wrong submissions
of every chapter still fail (their own tests)."""

from __future__ import annotations

import pytest
from conftest import GOOD, requires_interpreter

from course_lib import grader
from course_lib.grader import PASS

SEED = 2024

FORMS = {
    # alpha.to(tl.float32) on a float argument: "'float' object has no attribute 'to'"
    "ch02_float_scalar_to": "scaled_add",
    # blk.to(tl.int64) on a `for blk in range(...)` counter: "'int' object has no attribute 'to'"
    "ch04_loop_counter_to": "residual_dropout",
    # tl.sigmoid(2.0 * C * u) with C = tl.constexpr(...): "cannot convert ... to tensor"
    "ch04_constexpr_times_tensor": "fused_bias_gelu",
    # libdevice.tanh and libdevice.erf: "unsupported operand type(s) for +: 'float' and 'NoneType'"
    "ch04_libdevice_gelu": "fused_bias_gelu",
}


@requires_interpreter
@pytest.mark.parametrize("folder", sorted(FORMS))
def test_a_right_kernel_in_a_form_the_interpreter_lacked_passes(folder):
    result = grader.grade_task(FORMS[folder], GOOD / folder, seed=SEED)
    assert result.status == PASS, "\n".join([result.summary, *result.details])


@requires_interpreter
def test_the_module_keeps_its_own_range():
    """The loops are rewritten in the interpreter's copy of a kernel only: after the kernel ran, the
    module's own Python code (a launcher's loop) still gets Python's range."""
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("loop_form", GOOD / "ch04_loop_counter_to" / "residual_dropout.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    gen = torch.Generator().manual_seed(0)
    x, residual = torch.randn(1000, generator=gen), torch.randn(1000, generator=gen)
    out = torch.empty(1000)
    module.residual_dropout(x, residual, out, 0.25, 7)
    kept = out != residual
    assert kept.sum() > 600 and torch.allclose(out[kept], (residual + x / 0.75)[kept], atol=1e-5)
    assert "range" not in vars(module)  # the kernel's counter came from the rewritten copy's own name
