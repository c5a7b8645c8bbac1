"""The hooks in course_lib.hooks (out-of-bounds checks in the interpreter, the launch watch), the bf16
fixes of course_lib.interpreter, and the launcher torch guard of course_lib.grader.guards.
The kernels here are small on purpose."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from conftest import requires_interpreter

from course_lib import hooks
from course_lib.grader import guards

pytestmark = requires_interpreter


def stopped_access(excinfo) -> hooks.OutOfBoundsAccess:
    """The OutOfBoundsAccess behind whatever the interpreter raised (it wraps kernel errors)."""
    e = excinfo.value
    while e is not None:
        if isinstance(e, hooks.OutOfBoundsAccess):
            return e
        e = e.__cause__ or e.__context__
    pytest.fail(f"no OutOfBoundsAccess behind {excinfo.value!r}")


def offsets_in(message: str) -> list[int]:
    text = message.split("offending offsets, in elements from its start: ")[1].split(".")[0]
    return [int(v) for v in text.split(", ") if v.lstrip("-").isdigit()]


@triton.jit
def copy_kernel(
    x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr, MASK_LOAD: tl.constexpr, MASK_STORE: tl.constexpr
):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    if MASK_LOAD:
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    else:
        x = tl.load(x_ptr + offsets)
    if MASK_STORE:
        tl.store(out_ptr + offsets, x, mask=mask)
    else:
        tl.store(out_ptr + offsets, x)


@triton.jit
def le_mask_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets <= n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def shifted_load_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets - 1, mask=mask), mask=mask)


@triton.jit
def tile_kernel(x_ptr, out_ptr, n_cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    tile = tl.load(x_ptr + rows[:, None] * n_cols + cols[None, :])  # (BLOCK_M, BLOCK_N), no mask
    tl.store(out_ptr + cols, tl.sum(tile, axis=0))


N, BLOCK = 10, 8  # two programs; the second one runs 6 lanes past the end
GRID = (triton.cdiv(N, BLOCK),)


def inside_bigger_buffer(n: int, fill: float = 0.0, before: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(view, buffer): a tensor of n elements with real memory after it, so that only the tensor's
    own bounds, not the allocation's, can make an access illegal."""
    buf = torch.full((before + n + 32,), fill)
    buf[before : before + n] = torch.arange(n, dtype=torch.float32) + 1
    return buf[before : before + n], buf


def test_masked_access_past_the_end_is_fine():
    x, _ = inside_bigger_buffer(N)
    out = torch.zeros(N)
    copy_kernel[GRID](x, out, N, BLOCK_SIZE=BLOCK, MASK_LOAD=True, MASK_STORE=True)
    assert torch.equal(out, x)


def test_unmasked_load_past_the_end_is_stopped_and_explained():
    x, _ = inside_bigger_buffer(N)
    out = torch.zeros(N)
    with pytest.raises(Exception) as info:
        copy_kernel[GRID](x, out, N, BLOCK_SIZE=BLOCK, MASK_LOAD=False, MASK_STORE=True)
    message = str(stopped_access(info))
    last_program = GRID[0] - 1
    assert f"kernel `copy_kernel`, program id ({last_program}, 0, 0): a load" in message
    assert offsets_in(message) == list(range(N, GRID[0] * BLOCK))
    assert "`x_ptr`" in message
    assert "had no mask" in message


def test_unmasked_store_past_the_end_is_stopped_before_it_touches_memory():
    x = torch.arange(N, dtype=torch.float32) + 1
    out, buf = inside_bigger_buffer(N, fill=-7.0)
    buf[:N] = -7.0
    with pytest.raises(Exception) as info:
        copy_kernel[GRID](x, out, N, BLOCK_SIZE=BLOCK, MASK_LOAD=True, MASK_STORE=False)
    message = str(stopped_access(info))
    assert "a store" in message and "`out_ptr`" in message
    assert offsets_in(message) == list(range(N, GRID[0] * BLOCK))
    last_start = (GRID[0] - 1) * BLOCK
    assert torch.equal(buf[:last_start], x[:last_start])  # earlier programs ran
    assert (buf[last_start:] == -7.0).all()  # the stopped store wrote nothing, in bounds or out


def test_mask_that_lets_one_lane_too_many_through_is_explained():
    x, _ = inside_bigger_buffer(N)
    out = torch.zeros(N + 1)[:N]
    with pytest.raises(Exception) as info:
        le_mask_kernel[GRID](x, out, N, BLOCK_SIZE=BLOCK)
    message = str(stopped_access(info))
    lanes = N - (GRID[0] - 1) * BLOCK + 1  # offsets <= N in the last program
    assert f"The mask let {lanes} of {BLOCK} lanes through" in message
    assert offsets_in(message) == [N]


def test_load_one_before_a_misaligned_view_is_caught():
    base = torch.arange(N + 1, dtype=torch.float32)
    x = base[1:]  # x[-1] is real memory (base[0]) but not x's
    out = torch.zeros(N)
    with pytest.raises(Exception) as info:
        shifted_load_kernel[(1,)](x, out, N, BLOCK_SIZE=16)
    assert offsets_in(str(stopped_access(info))) == [-1]


def test_two_dimensional_block_past_the_last_row_is_caught():
    rows, cols = 3, 8
    x = torch.ones(rows, cols)
    out = torch.zeros(cols)
    with pytest.raises(Exception) as info:
        tile_kernel[(1,)](x, out, cols, BLOCK_M=4, BLOCK_N=cols)
    assert offsets_in(str(stopped_access(info))) == list(range(rows * cols, 4 * cols))


# --------------------------------------------------------------------------------------------------
# tensor descriptors: their out-of-bounds rows and columns are padded/dropped, never flagged


@triton.jit
def descriptor_copy_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    out_desc = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    row = tl.program_id(0) * BLOCK_M
    col = tl.program_id(1) * BLOCK_N
    out_desc.store([row, col], x_desc.load([row, col]) + 1.0)


@triton.jit
def host_descriptor_copy_kernel(x_desc, out_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0) * BLOCK_M
    col = tl.program_id(1) * BLOCK_N
    out_desc.store([row, col], x_desc.load([row, col]) + 1.0)


M_DESC, N_DESC, BM, BN = 5, 12, 4, 8  # neither dimension a multiple of the block


def test_device_descriptor_edges_are_masked_not_flagged():
    x = torch.randn(M_DESC, N_DESC)
    out, buf = inside_bigger_buffer(M_DESC * N_DESC, fill=-7.0)
    out = out.view(M_DESC, N_DESC)
    grid = (triton.cdiv(M_DESC, BM), triton.cdiv(N_DESC, BN))
    descriptor_copy_kernel[grid](x, out, M_DESC, N_DESC, BLOCK_M=BM, BLOCK_N=BN)
    assert torch.equal(out, x + 1.0)
    assert (buf[M_DESC * N_DESC :] == -7.0).all()


def test_host_descriptor_edges_are_masked_not_flagged():
    tensor_descriptor = pytest.importorskip("triton.tools.tensor_descriptor")
    x = torch.randn(M_DESC, N_DESC)
    out, buf = inside_bigger_buffer(M_DESC * N_DESC, fill=-7.0)
    out = out.view(M_DESC, N_DESC)
    x_desc = tensor_descriptor.TensorDescriptor.from_tensor(x, [BM, BN])
    out_desc = tensor_descriptor.TensorDescriptor.from_tensor(out, [BM, BN])
    host_descriptor_copy_kernel[(triton.cdiv(M_DESC, BM), triton.cdiv(N_DESC, BN))](
        x_desc, out_desc, BLOCK_M=BM, BLOCK_N=BN
    )
    assert torch.equal(out, x + 1.0)
    assert (buf[M_DESC * N_DESC :] == -7.0).all()


# --------------------------------------------------------------------------------------------------
# atomics


@triton.jit
def atomic_add_kernel(ptr, n_elements, BLOCK_SIZE: tl.constexpr, MASKED: tl.constexpr):
    offsets = tl.arange(0, BLOCK_SIZE)
    if MASKED:
        tl.atomic_add(ptr + offsets, 1.0, mask=offsets < n_elements)
    else:
        tl.atomic_add(ptr + offsets, 1.0)


@triton.jit
def atomic_cas_kernel(ptr, index):
    tl.atomic_cas(ptr + index, 0.0, 5.0)


def test_masked_atomic_past_the_end_is_fine():
    counts, buf = inside_bigger_buffer(N)
    counts.zero_()
    atomic_add_kernel[(1,)](counts, N, BLOCK_SIZE=16, MASKED=True)
    assert (counts == 1).all() and (buf[N:] == 0).all()


def test_unmasked_atomic_past_the_end_is_stopped():
    counts, buf = inside_bigger_buffer(N)
    counts.zero_()
    with pytest.raises(Exception) as info:
        atomic_add_kernel[(1,)](counts, N, BLOCK_SIZE=16, MASKED=False)
    assert offsets_in(str(stopped_access(info))) == list(range(N, 16))
    assert (buf == 0).all()


def test_atomic_cas_past_the_end_is_stopped():
    values, buf = inside_bigger_buffer(N)
    with pytest.raises(Exception) as info:
        atomic_cas_kernel[(1,)](values, N + 2)
    assert offsets_in(str(stopped_access(info))) == [N + 2]
    assert (buf[N:] == 0).all()


# --------------------------------------------------------------------------------------------------
# bf16 in the interpreter: arithmetic, casts and tl.dot as a GPU does them


@triton.jit
def bf16_op_kernel(x_ptr, y_ptr, out_ptr, n_elements, OP: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    offsets = tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    if OP == "add":
        result = x + y
    elif OP == "sub":
        result = x - y
    elif OP == "mul":
        result = x * y
    elif OP == "axpy":
        result = x * 2.0 + y
    elif OP == "min":
        result = tl.where(x < y, x, y)
    elif OP == "neg":
        result = -x
    else:  # "cast": float32 in, the kernel rounds to the output's dtype
        result = x.to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + offsets, result, mask=mask)


BF16_OPS = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "axpy": lambda x, y: x * 2.0 + y,
    "min": torch.minimum,
    "neg": lambda x, y: -x,
}


@pytest.mark.parametrize("op", list(BF16_OPS))
def test_bf16_arithmetic_matches_torch(op):
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(1000, generator=gen).bfloat16()
    y = torch.randn(1000, generator=gen).bfloat16()
    out = torch.empty(1000, dtype=torch.bfloat16)
    bf16_op_kernel[(1,)](x, y, out, 1000, OP=op, BLOCK_SIZE=1024)
    assert torch.equal(out, BF16_OPS[op](x, y))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_float32_to_half_cast_rounds_like_torch(dtype):
    """What every "compute in float32, store in the input's dtype" kernel does last."""
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(1000, generator=gen)
    out = torch.empty(1000, dtype=dtype)
    bf16_op_kernel[(1,)](x, x, out, 1000, OP="cast", BLOCK_SIZE=1024)
    differ = int((out != x.to(dtype)).sum())
    assert differ == 0, f"{differ} of 1000 values rounded differently from torch's x.to({dtype})"


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])  # (M, K)
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])  # (K, N)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))  # (M, N), float32


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_dot_matches_float32_matmul(dtype):
    gen = torch.Generator().manual_seed(5)
    a = torch.randn(16, 32, generator=gen).to(dtype)
    b = torch.randn(32, 16, generator=gen).to(dtype)
    c = torch.empty(16, 16)
    dot_kernel[(1,)](a, b, c, M=16, N=16, K=32)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-5, atol=1e-5)


@triton.jit
def runtime_loop_kernel(x_ptr, out_ptr, n_elements):
    acc = 0.0
    for i in range(0, n_elements):  # a runtime bound: Triton 3.6's interpreter trips here with numpy >= 2.4
        acc += tl.load(x_ptr + i)
    tl.store(out_ptr, acc)


def test_loop_with_a_runtime_bound():
    x = torch.arange(7, dtype=torch.float32)
    out = torch.zeros(1)
    runtime_loop_kernel[(1,)](x, out, 7)
    assert out.item() == x.sum().item()


# --------------------------------------------------------------------------------------------------
# launch watch and the launcher's torch guard


@triton.jit
def _plus_one(x):
    return x + 1


@triton.jit
def plus_one_kernel(x_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(x_ptr + offsets, _plus_one(tl.load(x_ptr + offsets, mask=mask)), mask=mask)


def test_launch_watch_counts_launches_not_device_calls():
    x = torch.zeros(5)
    with hooks.watch_launches() as outer:
        plus_one_kernel[(1,)](x, 5, BLOCK_SIZE=8)
        with hooks.watch_launches() as inner:
            plus_one_kernel[(1,)](x, 5, BLOCK_SIZE=8)
        plus_one_kernel[(1,)](x, 5, BLOCK_SIZE=8)
    assert inner.launches == ["plus_one_kernel"]
    assert outer.launches == ["plus_one_kernel", "plus_one_kernel"]
    assert (x == 3).all()


def test_torch_guard_allows_allocation_views_and_shapes():
    x = torch.randn(6)
    with guards.launcher_torch_guard():
        empty = torch.empty(3, 2)
        like = torch.empty_like(x)
        new = x.new_empty(4)
        ints = torch.empty(5, dtype=torch.int32)
        zeros = torch.zeros(4)
        full = torch.full((2,), 3.0)
        views = [x.view(2, 3), x.reshape(3, 2).t(), x[1:], x.unsqueeze(0), x.flatten(), x.as_strided((2,), (3,))]
        facts = (x.shape, x.numel(), x.stride(), x.dim(), x.dtype, x.is_contiguous(), x.data_ptr(), len(x))
    for fresh in (empty, like, new):
        assert torch.isnan(fresh).all(), "torch.empty outputs must be poisoned"
    assert (ints == torch.iinfo(torch.int32).min).all()
    assert (zeros == 0).all() and (full == 3).all()
    assert [v.numel() for v in views] == [6, 6, 5, 6, 6, 2]
    assert facts[:4] == ((6,), 6, (1,), 1)


COMPUTE = [
    ("add", lambda x, y: x + y),
    ("add", lambda x, y: torch.add(x, y, out=y)),
    ("add_", lambda x, y: x.add_(y)),
    ("sum", lambda x, y: x.sum()),
    ("clone", lambda x, y: x.clone()),
    ("copy_", lambda x, y: y.copy_(x)),
    ("fill_", lambda x, y: y.fill_(0)),
    ("to", lambda x, y: x.to(torch.float16)),
    ("matmul", lambda x, y: x @ y),
    ("numpy", lambda x, y: x.numpy()),
    ("__array__", lambda x, y: np.asarray(x)),
    ("item", lambda x, y: x[0].item()),
    ("__setitem__", lambda x, y: y.__setitem__(0, 1.0)),
]


@pytest.mark.parametrize(("name", "call"), COMPUTE, ids=[f"{i}-{n}" for i, (n, _) in enumerate(COMPUTE)])
def test_torch_guard_blocks_compute_and_names_it(name, call):
    x, y = torch.randn(4), torch.randn(4)
    before = y.clone()
    with pytest.raises(guards.TorchComputeInLauncher) as info, guards.launcher_torch_guard(learner_files=(__file__,)):
        call(x, y)
    assert f"torch `{name}`" in str(info.value)
    assert "test_guards.py:" in str(info.value)  # where, in the learner's file
    assert torch.equal(y, before)


def test_torch_guard_lets_triton_work_inside_a_launch():
    x = torch.zeros(5)
    with hooks.watch_launches() as watch, guards.launcher_torch_guard():
        plus_one_kernel[(1,)](x, 5, BLOCK_SIZE=8)
    assert watch.launches == ["plus_one_kernel"]
    assert (x == 1).all()


_X, _V = torch.randn(4, 6), torch.randn(8)
# what a launcher writes to make views and read shapes: the guard lets each through
_VIEWS_AND_QUERIES = {
    "ravel": lambda: _X.ravel(),
    "swapaxes": lambda: _X.swapaxes(0, 1),
    "movedim": lambda: _X.movedim(0, 1),
    "broadcast_to": lambda: _V.broadcast_to((3, 8)),
    "diagonal": lambda: _X.diagonal(),
    "tensor_split": lambda: _V.tensor_split(2),
    "get_device": lambda: _X.get_device(),
    "type": lambda: _X.type(),
    "is_same_size": lambda: _X.is_same_size(_X),
    "numpy ints as a shape": lambda: torch.empty([np.int64(3), np.int32(4)]),
    "torch.Size arithmetic": lambda: torch.empty(_X.shape[:-1] + (2,)),
    "slices and None": lambda: _V[None, 1:5:2],
    "promote_types": lambda: torch.promote_types(_X.dtype, torch.float16),
    "result_type": lambda: torch.result_type(_X, _V),
    "no_grad": lambda: torch.no_grad().__enter__(),
}


@pytest.mark.parametrize("name", list(_VIEWS_AND_QUERIES))
def test_views_and_shape_questions_pass_the_guard(name):
    with guards.launcher_torch_guard():
        _VIEWS_AND_QUERIES[name]()


class _Index:
    """An index that computes with torch in its __index__, which torch calls inside its own indexing, where
    the guard's mode is off (elsewhere the guard is on while it runs, and refuses the add)."""

    def __index__(self):
        torch.add(_V, _V)
        return 0


@pytest.mark.parametrize("make", [lambda i: _X[i], lambda i: _X[(i, 0)], lambda i: torch.empty([i, 2]),
                                  lambda i: _X.new_zeros((i, 2))])  # fmt: skip
def test_an_object_of_the_launchers_own_is_no_torch_argument(make):
    # refused by the guard, or by torch's own argument parser (a size must be ints): never computed unseen
    with pytest.raises((guards.TorchComputeInLauncher, TypeError)), guards.launcher_torch_guard():
        make(_Index())


def test_a_tensor_type_with_a_dtype_converts_and_is_refused():
    with pytest.raises(guards.TorchComputeInLauncher, match="torch `type`"), guards.launcher_torch_guard():
        _X.type(torch.float64)


def test_allocations_are_poisoned_in_graded_calls_and_not_in_timed_ones(monkeypatch):
    """A graded call's allocations are filled with NaN (an element no kernel wrote shows); a timed
    call's are not: the fill would be a pass over memory timed as the learner's."""
    import torch

    from course_lib.grader import guards

    filled = []
    monkeypatch.setattr(guards, "poison", lambda t: filled.append(t.numel()))
    with guards.launcher_torch_guard():
        torch.empty(8)
    assert filled == [8]
    with guards.launcher_torch_guard(poison_allocations=False):
        torch.empty(8)
    assert filled == [8]
