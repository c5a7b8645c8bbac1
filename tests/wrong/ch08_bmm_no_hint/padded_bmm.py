"""Wrong on purpose: right values, no hint: padded rows of a (872 fp16 apart) are still read 2 bytes at a time."""

import triton
import triton.language as tl

# Tile and launch settings by element size (bytes), easy to retune: the first guess for an H200 is
# chapter 06's best plain-Triton matmul (128x128x64, 8 warps, 3 stages: 606 TFLOP/s in bf16 at 8192^3);
# float32 multiplies exactly on the FMA units, and BLOCK_K 32 keeps three stages in shared memory.
CONFIGS = {
    2: {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
    4: {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3},
}


@triton.jit
def padded_bmm_kernel(
    a_ptr,  # a, (M, K): element (m, k) at a_ptr + m * stride_am + k
    e_ptr,  # e, (B, K, N): element (b, k, n) at e_ptr + b * stride_eb + k * stride_ek + n
    out_ptr,  # out, (B, M, N): element (b, m, n) at out_ptr + b * stride_ob + m * stride_om + n
    M,
    N,
    K,
    stride_am,
    stride_eb,
    stride_ek,
    stride_ob,
    stride_om,
    BLOCK_M: tl.constexpr,  # rows of out per program
    BLOCK_N: tl.constexpr,  # columns of out per program
    BLOCK_K: tl.constexpr,  # depth of one tl.dot step
    VEC: tl.constexpr,  # the launcher's promise: a's rows start on multiples of VEC elements (16 bytes)
):
    pid = tl.program_id(axis=0)
    batch = tl.program_id(axis=1)
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    pid_m = pid // n_col_tiles
    pid_n = pid % n_col_tiles
    # BEGIN SOLUTION
    # TODO: the tile's rows, columns and a BLOCK_K slice of K; a's row starts hinted as multiples
    # TODO: of VEC; K // BLOCK_K whole steps without a mask (masks along K split the vectors),
    # TODO: then one masked step for the rest; a float32 accumulator; a masked store.
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    ks = tl.arange(0, BLOCK_K)  # (BLOCK_K,)
    # rows past M and columns past N wrap to real ones: no mask along M or N on the loads
    a_starts = (rows % M) * stride_am  # BUG: no hint: 872 is no multiple of 16 elements
    a_ptrs = a_ptr + a_starts[:, None] + ks[None, :]  # (BLOCK_M, BLOCK_K)
    e_ptrs = e_ptr + batch * stride_eb + ks[:, None] * stride_ek + (cols % N)[None, :]  # (BLOCK_K, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_whole = K // BLOCK_K * BLOCK_K
    for _ in range(0, k_whole, BLOCK_K):
        a = tl.load(a_ptrs)
        e = tl.load(e_ptrs)
        acc = tl.dot(a, e, acc, input_precision="ieee")  # fp32 inputs: no TF32 (see tiled_matmul)
        a_ptrs += BLOCK_K
        e_ptrs += BLOCK_K * stride_ek
    if k_whole < K:  # the last, partial step: zeros beyond K add nothing
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k_whole, other=0.0)
        e = tl.load(e_ptrs, mask=ks[:, None] < K - k_whole, other=0.0)
        acc = tl.dot(a, e, acc, input_precision="ieee")
    out_ptrs = out_ptr + batch * stride_ob + rows[:, None] * stride_om + cols[None, :]
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)
    # END SOLUTION


def padded_bmm(a, e, out):
    """out[b] = a @ e[b] for a (M, K), e (B, K, N) and out (B, M, N), each with unit stride in its
    last dimension. Returns out."""
    M, K = a.shape
    B, _, N = e.shape
    # BEGIN SOLUTION
    # TODO: VEC = 16 // a.element_size() only where a.data_ptr() is a multiple of 16 and a.stride(0)
    # TODO: a multiple of VEC, else 1; a (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N), B) grid; every stride.
    vec = 16 // a.element_size()
    aligned = a.data_ptr() % 16 == 0 and a.stride(0) % vec == 0
    config = CONFIGS[a.element_size()]
    grid = (triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"]), B)
    padded_bmm_kernel[grid](
        a, e, out, M, N, K,
        a.stride(0), e.stride(0), e.stride(1), out.stride(0), out.stride(1),
        VEC=vec if aligned else 1, **config,
    )  # fmt: skip
    # END SOLUTION
    return out
