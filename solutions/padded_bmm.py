"""out[b] = a @ e[b] for a shared (M, K) weight and B matrices e[b] of shape (K, N): the capstone's
candidate GEMM. K = 866 is stored either 866 elements apart (1732 bytes: no multiple of 16) or
padded to 872 (1744 bytes). Padded, a's rows start on 16-byte boundaries, but 872 is no multiple of
16 elements, so Triton does not see it: the launcher says so (VEC), the kernel hints a's row
starts, and the K loop runs its whole steps without a mask so that the vectors stay whole.
"""

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

# Tile and launch settings of the pointer kernel by element size (bytes), easy to retune. bf16 at the
# capstone's shape on an H200 (results/bench_padded_bmm_h200.json): 1.23 ms with rows 866 apart; the
# padded layout takes the descriptor kernel below. float32 multiplies exactly on the FMA units, and
# BLOCK_K 32 keeps three stages in shared memory.
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
    a_starts = tl.multiple_of((rows % M) * stride_am, VEC)  # (BLOCK_M,) hinted on the product
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


@triton.jit
def padded_bmm_tma_kernel(
    a_desc,  # tensor descriptor of a, (M, K), blocks of (BLOCK_M, BLOCK_K)
    e_desc,  # tensor descriptor of e, (B, K, N), blocks of (1, BLOCK_K, BLOCK_N)
    out_desc,  # tensor descriptor of out, (B, M, N), blocks of (1, BLOCK_M, BLOCK_N)
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    # Given, not an exercise: large padded problems on a GPU. A tensor descriptor (TMA) copies a whole
    # tile to shared memory in one instruction, and fills what lies past a dimension's end with zeros:
    # no masks, so no narrow loads at the K edge, and a tile of e never reaches into the next batch. Its
    # rule is the point of this chapter: the base and every stride but the last must be multiples of
    # 16 bytes. Rows 872 elements apart pass (1744 bytes); 866 (1732) would be refused.
    batch = tl.program_id(axis=1)
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    off_m = (tl.program_id(axis=0) // n_col_tiles) * BLOCK_M
    off_n = (tl.program_id(axis=0) % n_col_tiles) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([off_m, k])  # (BLOCK_M, BLOCK_K)
        e = e_desc.load([batch, k, off_n]).reshape(BLOCK_K, BLOCK_N)
        acc = tl.dot(a, e, acc)
    out_desc.store([batch, off_m, off_n], acc.to(out_desc.dtype).reshape(1, BLOCK_M, BLOCK_N))


# 128 x 256 x 64, 8 warps, 3 stages: 0.394 ms for B = 1024, M = 433, N = 256, K = 866 in rows 872 apart,
# bf16, on an H200, against 1.228 ms for the pointer kernel above on rows 866 apart (3.1x) and 0.97 ms for
# cuBLAS on either layout (results/bench_padded_bmm_h200.json). Used where the problem is large enough
# for its set-up (three descriptors made on the host per call) not to matter.
TMA_CONFIG = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}


def descriptors_fit(*tensors) -> bool:
    """True when TMA can read each tensor: 2-byte elements, unit last stride, the base and every other
    stride multiples of 16 bytes."""
    return all(
        t.element_size() == 2
        and t.stride(-1) == 1
        and t.data_ptr() % 16 == 0
        and all((s * t.element_size()) % 16 == 0 for s in t.stride()[:-1])
        for t in tensors
    )


def padded_bmm_tma(a, e, out):
    """out[b] = a @ e[b] by the descriptor kernel; for tensors that pass descriptors_fit."""
    M, K = a.shape
    B, _, N = e.shape
    c = TMA_CONFIG
    a_desc = TensorDescriptor.from_tensor(a, [c["BLOCK_M"], c["BLOCK_K"]])
    e_desc = TensorDescriptor.from_tensor(e, [1, c["BLOCK_K"], c["BLOCK_N"]])
    out_desc = TensorDescriptor.from_tensor(out, [1, c["BLOCK_M"], c["BLOCK_N"]])
    grid = (triton.cdiv(M, c["BLOCK_M"]) * triton.cdiv(N, c["BLOCK_N"]), B)
    padded_bmm_tma_kernel[grid](
        a_desc, e_desc, out_desc, M, N, K, BLOCK_M=c["BLOCK_M"], BLOCK_N=c["BLOCK_N"], BLOCK_K=c["BLOCK_K"],
        num_warps=c["num_warps"], num_stages=c["num_stages"],
    )  # fmt: skip
    return out


def padded_bmm(a, e, out):
    """out[b] = a @ e[b] for a (M, K), e (B, K, N) and out (B, M, N), each with unit stride in its
    last dimension. Returns out."""
    M, K = a.shape
    B, _, N = e.shape
    if a.is_cuda and B * M * N >= 2**22 and descriptors_fit(a, e, out):
        return padded_bmm_tma(a, e, out)  # given: large padded problems on a GPU (see above)
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
