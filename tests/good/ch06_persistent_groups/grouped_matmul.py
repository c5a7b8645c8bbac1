"""Right, another way: a persistent kernel (chapter 09's design). A fixed grid of programs, one per SM,
each loops over output tiles NUM_PROGRAMS apart; tile numbers map to (pid_m, pid_n) in groups of
GROUP_M tile-rows, so the tiles that the programs work on side by side share strips of a and b."""

import torch
import triton
import triton.language as tl


@triton.jit
def _tile(tile, n_row_tiles, n_col_tiles, GROUP_M: tl.constexpr):
    """Tile number -> (pid_m, pid_n) in groups of GROUP_M tile-rows, the tile-row changing fastest."""
    per_group = GROUP_M * n_col_tiles
    first = (tile // per_group) * GROUP_M
    height = tl.minimum(n_row_tiles - first, GROUP_M)
    return first + (tile % per_group) % height, (tile % per_group) // height


@triton.jit
def persistent_matmul_kernel(
    a_ptr,  # a, (M, K)
    b_ptr,  # b, (K, N)
    out_ptr,  # out, (M, N)
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_om,
    stride_on,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr,  # the grid: each program walks tiles NUM_PROGRAMS apart
):
    n_row_tiles = tl.cdiv(M, BLOCK_M)
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    for tile in range(tl.program_id(0), n_row_tiles * n_col_tiles, NUM_PROGRAMS):
        pid_m, pid_n = _tile(tile, n_row_tiles, n_col_tiles, GROUP_M)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
        ks = tl.arange(0, BLOCK_K)  # (BLOCK_K,)
        a_ptrs = a_ptr + (rows % M)[:, None] * stride_am + ks[None, :] * stride_ak  # (BLOCK_M, BLOCK_K)
        b_ptrs = b_ptr + ks[:, None] * stride_bk + (cols % N)[None, :] * stride_bn  # (BLOCK_K, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a = tl.load(a_ptrs, mask=ks[None, :] < K - k0, other=0.0)
            b = tl.load(b_ptrs, mask=ks[:, None] < K - k0, other=0.0)
            acc = tl.dot(a, b, acc, input_precision="ieee")
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        out_ptrs = out_ptr + rows[:, None] * stride_om + cols[None, :] * stride_on
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)


def grouped_matmul(a, b, out):
    M, K = a.shape
    N = b.shape[1]
    BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 32
    # one program per SM on a GPU; on CPU tensors 16, so that the programs loop there too
    sms = torch.cuda.get_device_properties(out.device).multi_processor_count if out.is_cuda else 16
    programs = min(sms, triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N))
    persistent_matmul_kernel[(programs,)](
        a, b, out, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=8, NUM_PROGRAMS=programs, num_warps=8,
    )  # fmt: skip
    return out
