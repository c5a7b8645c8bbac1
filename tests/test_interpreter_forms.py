"""Right kernels written in forms that compiled Triton takes and Triton's interpreter (3.6 to 3.9) did not:
CPU mode failed them, where a GPU passes them. course_lib.interpreter mends each; the wrong submissions
of every chapter still fail (their own tests)."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from conftest import GOOD, requires_interpreter
from triton.language.extra import libdevice

from course_lib import grader
from course_lib.grader import PASS

SEED = 2024
C = tl.constexpr(7)  # a module-level constant, as kernels use them

FORMS = {
    # alpha.to(tl.float32) on a float argument: "'float' object has no attribute 'to'"
    "ch02_float_scalar_to": "scaled_add",
    # blk.to(tl.int64) on a `for blk in range(...)` counter: "'int' object has no attribute 'to'"
    "ch04_loop_counter_to": "residual_dropout",
    # tl.sigmoid(2.0 * C * u) with C = tl.constexpr(...): "cannot convert ... to tensor"
    "ch04_constexpr_times_tensor": "fused_bias_gelu",
    # libdevice.tanh and libdevice.erf: "unsupported operand type(s) for +: 'float' and 'NoneType'"
    "ch04_libdevice_gelu": "fused_bias_gelu",
    # tl.reduce with a combine function of its own (Welford): right, but HANG past every limit in CPU mode
    "ch05_welford": "layernorm",
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


@requires_interpreter
def test_scalars_and_libdevice_behave_as_compiled():
    """Found by a review of the work-arounds: a loop over i64 bounds counts in i64 (3e9 does not wrap);
    libdevice's round takes halves away from zero; erfc keeps its far tail; fp16 is refused with the
    fix, as compiled Triton refuses it; constexpr % tensor and constexpr < tensor give tensors."""
    from course_lib.interpreter import LibdeviceTypeError

    @triton.jit
    def wide(out_ptr, n):
        for i in range(0, n.to(tl.int64)):
            tl.store(out_ptr + i, i * 1_000_000_000)

    out = torch.zeros(4, dtype=torch.int64)
    wide[(1,)](out, 4)
    assert out.tolist() == [0, 1_000_000_000, 2_000_000_000, 3_000_000_000]

    @triton.jit
    def maths(x_ptr, out_ptr, WHICH: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, 4))
        if WHICH == 0:
            y = libdevice.round(x)
        elif WHICH == 1:
            y = libdevice.erfc(x)
        else:
            y = libdevice.tanh(x)
        tl.store(out_ptr + tl.arange(0, 4), y)

    x = torch.tensor([0.5, 1.5, 2.5, -2.5])
    out = torch.zeros(4)
    maths[(1,)](x, out, WHICH=0)
    assert out.tolist() == [1.0, 2.0, 3.0, -3.0]
    maths[(1,)](torch.tensor([6.0, 0.0, 1.0, 2.0]), out, WHICH=1)
    assert 2.1e-17 < out[0].item() < 2.2e-17
    with pytest.raises(Exception, match="takes float32 or float64, not fp16") as raised:
        maths[(1,)](x.half(), out.half(), WHICH=2)
    assert isinstance(raised.value, LibdeviceTypeError) or "LibdeviceTypeError" in repr(raised.value)

    @triton.jit
    def ops(x_ptr, out_ptr):
        x = tl.load(x_ptr + tl.arange(0, 4))
        tl.store(out_ptr + tl.arange(0, 4), (C % x) + tl.where(C < x, 100, 0))

    xs = torch.tensor([2, 3, 8, 5], dtype=torch.int32)
    got = torch.zeros(4, dtype=torch.int32)
    ops[(1,)](xs, got)
    assert got.tolist() == [1, 1, 107, 2]


@triton.jit
def _dot_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr, PRECISION: tl.constexpr):
    rows = tl.arange(0, N)
    a = tl.load(a_ptr + rows[:, None] * N + rows[None, :])
    b = tl.load(b_ptr + rows[:, None] * N + rows[None, :])
    if PRECISION == "default":
        c = tl.dot(a, b)
    else:
        c = tl.dot(a, b, input_precision=PRECISION)
    tl.store(c_ptr + rows[:, None] * N + rows[None, :], c)


@requires_interpreter
def test_a_float32_dot_is_tf32_unless_told_otherwise_as_on_a_gpu():
    """A GPU multiplies float32 in TF32 by default (each input rounded to 10 bits of mantissa); the
    interpreter did it exactly, so a kernel without input_precision="ieee" passed float32 cases in CPU
    mode that it fails on the GPU (tests/wrong/ch07_tf32_dot)."""
    from course_lib.interpreter import tf32_rounded

    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(16, 16, generator=gen), torch.randn(16, 16, generator=gen)
    exact = (a.double() @ b.double()).float()
    as_tf32 = torch.from_numpy(tf32_rounded(a.numpy())).double() @ torch.from_numpy(tf32_rounded(b.numpy())).double()
    for precision, expected in (("default", as_tf32.float()), ("tf32", as_tf32.float()), ("ieee", exact)):
        c = torch.empty(16, 16)
        _dot_kernel[(1,)](a, b, c, N=16, PRECISION=precision)
        assert torch.allclose(c, expected, rtol=1e-6, atol=1e-6), precision
    assert (as_tf32.float() - exact).abs().max() > 1e-3  # the difference is there to be seen
    c = torch.empty(16, 16)
    _dot_kernel[(1,)](a, b, c, N=16, PRECISION="tf32x3")  # three TF32 products: float32's accuracy
    assert torch.allclose(c, exact, rtol=1e-6, atol=1e-6)


def test_the_tf32_hint_reads_the_calls_not_the_words():
    from course_lib.grader.precheck import tf32_dot_lines

    source = b"""import triton.language as tl
from triton.language import dot
def k(a, b, acc):
    acc = tl.dot(a, b, acc)                            # 4: TF32 on float32
    acc = tl.dot(a, b, acc, input_precision="ieee")
    acc = tl.dot(a, b, acc, "ieee")
    acc = dot(a, b)                                    # 7: the same function, imported by name
    acc = tl.dot(a, b, allow_tf32=False)
    acc = other.dot(a, b)                              # not Triton's
    # tl.dot(a, b) in a comment
"""
    assert tf32_dot_lines(source) == [4, 7]
    assert tf32_dot_lines(b"def (:") == []


@triton.jit
def _arg_max_combine(value_a, index_a, value_b, index_b):
    take_b = (value_b > value_a) | ((value_b == value_a) & (index_b < index_a))
    return tl.where(take_b, value_b, value_a), tl.where(take_b, index_b, index_a)


@triton.jit
def _reduce_kernel(x_ptr, value_ptr, index_ptr, N: tl.constexpr, AXIS: tl.constexpr):
    rows = tl.arange(0, 4)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :])
    index = tl.broadcast_to(cols[None, :], (4, N))
    value, at = tl.reduce((x, index), AXIS, _arg_max_combine)
    tl.store(value_ptr + tl.arange(0, 4 if AXIS == 1 else N), value)
    tl.store(index_ptr + tl.arange(0, 4 if AXIS == 1 else N), at)


@requires_interpreter
def test_a_custom_combine_reduces_as_a_tree_and_gives_the_compiled_answer():
    """tl.reduce with a combine function of the learner's own runs on whole halves of the axis at once
    (Triton's interpreter called it per element): the same answer, ties to the first index included, on
    rows whose largest value comes twice."""
    x = torch.tensor([[3.0, 7.0, 7.0, 1.0, 0.5, 7.0, 2.0, 6.0]] * 4)
    x[2, 0] = 9.0
    for N in (8, 4):  # powers of two, as tl.arange needs
        value, index = torch.empty(4), torch.empty(4, dtype=torch.int32)
        xs = x[:, :N].contiguous()
        _reduce_kernel[(1,)](xs, value, index, N=N, AXIS=1)
        expected_value, expected_index = xs.max(dim=1)
        assert torch.equal(value, expected_value), (value, expected_value)
        first = torch.tensor([int((row == row.max()).nonzero()[0]) for row in xs], dtype=torch.int32)
        assert torch.equal(index, first), (index, first)
