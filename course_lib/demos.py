"""Teaching kernels that notebooks and benchmarks show beside a task's solution; never graded.

They live here rather than in ``course_lib.tasks``: a task module is a spec in plain data and
imports Triton only inside functions, so ``python -m course_lib list`` and the grader's protected
process define no kernel. A demo kernel is a @triton.jit function at module level, so this module
imports Triton when it is imported (after ``course_lib``, which sets up CPU mode first).

* ``naive_transpose``: out = x.T with one row of x per program, stored as a column of out. Its
  loads are coalesced; its stores are not: consecutive elements of x's row land a whole out row
  apart, so each lane of a warp writes a 32-byte sector of its own. Chapter 08 sets it against the
  tiled transpose (``solutions/tiled_transpose.py``) and a plain copy of the same bytes.
* ``split_k_slices``: the partial sums of split-K, its loop over K written two ways (over the slice's
  K offsets, as chapter 07's first decode record did, or over its steps counted from zero). Chapter
  07 compiles both for sm_90 and counts what the compiler made of each (``lessons.ch07``).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def naive_transpose_kernel(
    x_ptr,  # x, (M, N): element (m, n) at x_ptr + m * stride_xm + n * stride_xn
    out_ptr,  # out, (N, M): element (n, m) at out_ptr + n * stride_on + m * stride_om
    M,
    N,
    stride_xm,
    stride_xn,
    stride_on,
    stride_om,
    BLOCK_N: tl.constexpr,  # elements of the row per step
):
    m = tl.program_id(axis=0).to(tl.int64)  # this program's row of x = column of out
    for n0 in range(0, N, BLOCK_N):
        cols = n0 + tl.arange(0, BLOCK_N).to(tl.int64)  # (BLOCK_N,)
        mask = cols < N
        row = tl.load(x_ptr + m * stride_xm + cols * stride_xn, mask=mask)  # (BLOCK_N,) along x's row
        # consecutive lanes store stride_on elements apart: one out row each
        tl.store(out_ptr + cols * stride_on + m * stride_om, row, mask=mask)


def naive_transpose(x, out, BLOCK_N: int = 1024):
    """out[:] = x.T, one program per row of x (M programs). Returns out."""
    M, N = x.shape
    naive_transpose_kernel[(M,)](
        x, out, M, N, x.stride(0), x.stride(1), out.stride(0), out.stride(1), BLOCK_N=BLOCK_N, num_warps=4
    )
    return out


@triton.jit
def split_k_slices(
    x_ptr,  # x, (M, K), rows K elements apart
    w_ptr,  # weight, (N, K), rows K elements apart
    ws_ptr,  # float32 partial sums, (M, N), zeroed before the launch
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,  # slices of K, one per program along the grid's second axis
    LOOP: tl.constexpr,  # "offsets" or "steps": how the loop over the slice is written
):
    # one program: BLOCK_N output features over one of SPLIT_K slices of K, added into ws
    pid_n, pid_k = tl.program_id(0), tl.program_id(1)
    rows = tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if LOOP == "offsets":  # over the slice's K offsets
        k_per = tl.cdiv(K, SPLIT_K)
        for k0 in range(pid_k * k_per, (pid_k + 1) * k_per, BLOCK_K):
            kk = k0 + ks
            x = tl.load(
                x_ptr + rows[:, None] * K + kk[None, :], mask=(rows[:, None] < M) & (kk[None, :] < K), other=0.0
            )
            w = tl.load(w_ptr + cols[:, None] * K + kk[None, :], mask=kk[None, :] < K, other=0.0)
            acc = tl.dot(x, w.T, acc)
    else:  # over the slice's steps, counted from zero
        steps = tl.cdiv(tl.cdiv(K, SPLIT_K), BLOCK_K)
        for i in range(steps):
            kk = (pid_k * steps + i) * BLOCK_K + ks
            x = tl.load(
                x_ptr + rows[:, None] * K + kk[None, :], mask=(rows[:, None] < M) & (kk[None, :] < K), other=0.0
            )
            w = tl.load(w_ptr + cols[:, None] * K + kk[None, :], mask=kk[None, :] < K, other=0.0)
            acc = tl.dot(x, w.T, acc)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.atomic_add(ws_ptr + rows[:, None] * N + cols[None, :], acc, mask=mask, sem="relaxed")
