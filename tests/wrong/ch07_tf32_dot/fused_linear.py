"""Wrong on purpose: the course's solution with tl.dot left at its default precision. On float32
inputs that is TF32 on a GPU (10 bits of each input's mantissa kept), about 1e-3 off per product:
every float32 case fails, the float16 and bfloat16 ones pass. course_lib's interpreter multiplies as
the GPU does, so CPU mode fails it too (until 2026-12-05 it multiplied exactly, and passed it)."""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def fused_linear_kernel(
    x_ptr,  # x, (M, K): element (m, k) at x_ptr + m * stride_xm + k * stride_xk
    w_ptr,  # weight, (N, K): element (n, k) at w_ptr + n * stride_wn + k * stride_wk
    bias_ptr,  # bias, (N,), contiguous
    out_ptr,  # out, (M, N): element (m, n) at out_ptr + m * stride_om + n * stride_on
    M,
    N,
    K,
    stride_xm,
    stride_xk,
    stride_wn,
    stride_wk,
    stride_om,
    stride_on,
    BLOCK_M: tl.constexpr,  # rows of out per program
    BLOCK_N: tl.constexpr,  # columns of out per program
    BLOCK_K: tl.constexpr,  # depth of one tl.dot step
    GROUP_M: tl.constexpr,  # tile-rows per L2 group (chapter 06)
):
    # The program's tile, in L2 groups of GROUP_M tile-rows (chapter 06's grouped_matmul).
    pid = tl.program_id(axis=0)
    n_row_tiles = tl.cdiv(M, BLOCK_M)
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    programs_per_group = GROUP_M * n_col_tiles
    first_row_tile = (pid // programs_per_group) * GROUP_M
    group_rows = tl.minimum(n_row_tiles - first_row_tile, GROUP_M)
    pid_m = first_row_tile + (pid % programs_per_group) % group_rows
    pid_n = (pid % programs_per_group) // group_rows
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    ks = tl.arange(0, BLOCK_K)  # (BLOCK_K,)
    # Rows past M are masked (they load zeros), columns past N wrap around to real ones: no load
    # leaves x or weight, and those results are never stored. With M = 1 and BLOCK_M = 16, 15 of the 16
    # rows are past M: unmasked, they would read 15 rows past the end of x. Masking rather than
    # wrapping them (rows % M): 36.4 us against 41.8 at M = 1, N = K = 8192 bf16 on an H200
    # (results/bench_fused_linear_h200.json, masked; results/experiment_fused_linear_wrapped_rows_h200.json,
    # the same bench wrapped). Wrapped, every row of the tile is row 0, and the compiler, which knows
    # M = 1, handles the load worse.
    x_ptrs = x_ptr + rows[:, None] * stride_xm + ks[None, :] * stride_xk  # (BLOCK_M, BLOCK_K)
    # weight.T's (BLOCK_K, BLOCK_N) slice: k down the rows, n across, read straight from weight
    w_ptrs = w_ptr + ks[:, None] * stride_wk + (cols % N)[None, :] * stride_wn  # (BLOCK_K, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        x = tl.load(x_ptrs, mask=(rows[:, None] < M) & (ks[None, :] < K - k0), other=0.0)
        w = tl.load(w_ptrs, mask=ks[:, None] < K - k0, other=0.0)
        acc = tl.dot(x, w, acc)  # the default precision: TF32 for float32 inputs
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk
    # BEGIN SOLUTION
    # TODO: the epilogue, on the float32 accumulator while it is still in registers: write
    # TODO: epilogue() below (the bias, then GELU's tanh form), call it on acc, then store the tile
    # TODO: once in out's dtype, masked to the M x N edge. Nothing is stored before this point and
    # TODO: nothing is read back.
    y = epilogue(acc, bias_ptr, cols, N)  # (BLOCK_M, BLOCK_N) float32
    out_ptrs = out_ptr + rows[:, None] * stride_om + cols[None, :] * stride_on
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=mask)  # the only store: out is written once
    # END SOLUTION


@triton.jit
def epilogue(acc, bias_ptr, cols, N):
    """GELU_tanh(acc + bias[cols]) in float32, for a (BLOCK_M, BLOCK_N) accumulator whose columns are
    ``cols``: the fused epilogue. Both kernels in this file call it before their one store."""
    # BEGIN SOLUTION
    # TODO: load the bias of each column (one value per column of out, the same for every row; mask
    # TODO: columns past N), add it to acc in float32, apply GELU's tanh form (chapter 04's formula)
    # TODO: and return the float32 result. Nothing is stored here.
    # The bias: BLOCK_N values per program, once, broadcast over the rows. Loaded in its dtype and
    # added in float32, so the sum is rounded once, on the store, as in torch's float64 reference.
    bias = tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)  # (BLOCK_N,)
    u = acc + bias[None, :]  # (BLOCK_M, BLOCK_N)
    # GELU, tanh form, as chapter 04 computes it: 0.5 u (1 + tanh(v)) = u * sigmoid(2v) with
    # v = sqrt(2/pi) (u + 0.044715 u^3), and sigmoid(2v) = 1 / (1 + 2^-z), z = 2v log2(e). The
    # reciprocal is rsqrt squared (one hardware instruction and a multiply); rsqrt(inf) = 0 sends
    # large negative u to 0. About 10 instructions an element: against the K = 8192 multiply-adds
    # each element of out took, the epilogue costs nothing measurable.
    z = 2.302208198 * u * (1.0 + 0.044715 * u * u)
    r = tl.math.rsqrt(1.0 + tl.exp2(-z))
    return u * (r * r)
    # END SOLUTION


@triton.jit
def fused_linear_tma_kernel(
    x_desc,  # tensor descriptor of x, (M, K), blocks of (BLOCK_M, BLOCK_K)
    w_desc,  # tensor descriptor of weight, (N, K), blocks of (BLOCK_N, BLOCK_K)
    out_desc,  # tensor descriptor of out, (M, N), blocks of (BLOCK_M, BLOCK_N)
    bias_ptr,  # bias, (N,), contiguous
    M,
    N,
    K,
    NUM_SMS: tl.constexpr,  # programs launched: one per SM, each walks tiles NUM_SMS apart
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    STAGES: tl.constexpr,  # loads in flight in the K loop
    EPILOGUE: tl.constexpr,  # False: the plain matmul, for measuring what the epilogue costs
):
    # Given, not an exercise: the large-shape path on a GPU. Tensor descriptors (TMA, chapter 08) copy
    # whole tiles from memory to shared memory in the hardware, out of bounds filled with zeros (no
    # masks), and one program per SM walks its tiles (a persistent kernel, chapter 09). weight's tile
    # is (BLOCK_N, BLOCK_K), K-contiguous as nn.Linear stores it; .T hands it to tl.dot as
    # (BLOCK_K, BLOCK_N) without moving it. The epilogue is yours: the same function as above.
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    n_tiles = tl.cdiv(M, BLOCK_M) * n_col_tiles
    k_steps = tl.cdiv(K, BLOCK_K)
    for tile in range(tl.program_id(0), n_tiles, NUM_SMS):
        programs_per_group = GROUP_M * n_col_tiles
        first_row_tile = (tile // programs_per_group) * GROUP_M
        group_rows = tl.minimum(tl.cdiv(M, BLOCK_M) - first_row_tile, GROUP_M)
        pid_m = first_row_tile + (tile % programs_per_group) % group_rows
        pid_n = (tile % programs_per_group) // group_rows
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in tl.range(0, k_steps, num_stages=STAGES):
            x = x_desc.load([pid_m * BLOCK_M, kk * BLOCK_K])  # (BLOCK_M, BLOCK_K)
            w = w_desc.load([pid_n * BLOCK_N, kk * BLOCK_K])  # (BLOCK_N, BLOCK_K)
            acc = tl.dot(x, w.T, acc)
        if EPILOGUE:
            acc = epilogue(acc, bias_ptr, pid_n * BLOCK_N + tl.arange(0, BLOCK_N), N)
        out_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(out_desc.dtype))  # rows past M are dropped


# 128 x 256 x 64 tiles, 8 warps, 3 stages, groups of 8 tile-rows, one program per SM, at 8192^3 bf16 on an
# H200 (results/bench_fused_linear_h200.json): 1.451 ms with the epilogue, 1.398 ms without (4%); eager
# matmul + bias + GELU 1.660 ms, torch.compile 1.547, max-autotune 1.694, cuBLAS's matmul alone 1.427,
# cuBLASLt's own GELU epilogue 1.423. The pointer-load kernel above, best tile: 1.708 ms
# (results/experiment_linear_h200.json).
TMA_CONFIG = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "STAGES": 3, "num_warps": 8}
_SM_COUNT = {}  # device index -> SMs


def descriptors_fit(*tensors) -> bool:
    """True when TMA can read each tensor: 2-byte elements, rows contiguous, the row stride and the
    base address multiples of 16 bytes (chapter 08's rule)."""
    return all(
        t.element_size() == 2
        and t.stride(-1) == 1
        and (t.stride(0) * t.element_size()) % 16 == 0
        and t.data_ptr() % 16 == 0
        for t in tensors
    )


def fused_linear_tma(x, weight, bias, out, apply_epilogue=True):
    """The large-shape path: out = gelu(x @ weight.T + bias) (or x @ weight.T alone) by the persistent
    kernel with tensor descriptors. For tensors on a GPU that pass descriptors_fit."""
    M, K = x.shape
    N = weight.shape[0]
    c = TMA_CONFIG
    x_desc = TensorDescriptor.from_tensor(x, [c["BLOCK_M"], c["BLOCK_K"]])
    w_desc = TensorDescriptor.from_tensor(weight, [c["BLOCK_N"], c["BLOCK_K"]])
    out_desc = TensorDescriptor.from_tensor(out, [c["BLOCK_M"], c["BLOCK_N"]])
    device = x.device.index or 0
    if device not in _SM_COUNT:
        _SM_COUNT[device] = torch.cuda.get_device_properties(device).multi_processor_count
    n_tiles = triton.cdiv(M, c["BLOCK_M"]) * triton.cdiv(N, c["BLOCK_N"])
    programs = min(_SM_COUNT[device], n_tiles)
    fused_linear_tma_kernel[(programs,)](
        x_desc, w_desc, out_desc, bias, M, N, K, NUM_SMS=programs,
        BLOCK_M=c["BLOCK_M"], BLOCK_N=c["BLOCK_N"], BLOCK_K=c["BLOCK_K"], GROUP_M=c["GROUP_M"],
        STAGES=c["STAGES"], EPILOGUE=apply_epilogue, num_warps=c["num_warps"],
    )  # fmt: skip
    return out


def _config(M, N, K, element_size):
    """(BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages) for an (M, N, K) problem whose
    inputs have ``element_size`` bytes an element. Block sizes are powers of two, at least 16 for
    tl.dot; an H200 has 132 SMs."""
    # BEGIN SOLUTION
    # TODO: two regimes, told apart by M (the tokens in the batch). Many rows: compute-bound, use
    # TODO: a large tile (256 x 128 x 64, GROUP_M 8, 8 warps, 3 stages: the best tile measured for this
    # TODO: pointer kernel, 1.72 ms at 8192^3 against 1.87 for 128 x 256, without the epilogue; the given
    # TODO: descriptor kernel's best is 128 x 256, results/experiment_linear_h200.json). Few rows
    # TODO: (M <= 64, every M the launcher sends here; decoding is M = 1 ... 16): memory-bound, the time
    # TODO: is reading weight once; count the programs your tiles give for M = 16, N = 8192 and make it
    # TODO: at least 128, about one per SM of an H200's 132 (small BLOCK_M and BLOCK_N, a long BLOCK_K,
    # TODO: 4 warps, 4 stages). For M = 17 ... 64, BLOCK_M is the next power of two and BLOCK_K halves,
    # TODO: so the taller tiles still fit in shared memory.
    # Few rows (decoding, M <= 64): memory-bound, the time is streaming weight (N x K) once. With
    # 128 x 128 tiles at M = 16, N = 8192 there would be 64 programs for 132 SMs: half the SMs without
    # a program (measured with 16 x 128 tiles, that costs 2 to 7%, not half the speed).
    # So BLOCK_M is as small as tl.dot allows (16; rows past M are masked and never stored), BLOCK_N
    # is narrow enough for >= 128 programs across N (8192 / 64 = 128), and BLOCK_K is long, so each
    # program keeps many bytes of weight in flight: 4 stages x 256 x 64 x 2 bytes = 128 KB per SM,
    # well above the ~32 KB per SM it takes to cover ~1 us of memory latency at 4.27 TB/s.
    # 16 x 64 x 256, 4 warps, 4 stages: 36.8 / 37.1 / 37.2 us at M = 1 / 4 / 16, N = K = 8192 bf16
    # on an H200, cuBLAS's matmul alone 36.8 / 36.8 / 36.9, the floor 31.4; split-K in 2 or 4 parts,
    # pipelined, 41.7 / 42.2 / 43.7 at best: the same weight read, and two more launches
    # (results/experiment_decode_h200.json, 2026-12-05).
    # Taller tiles (M = 17 ... 64) halve BLOCK_K to stay in shared memory: 4 x (64 x 128 + 128 x 64)
    # x 2 bytes = 128 KB of the 227 KB an SM has. float32 (exact products on the FMA units) halves
    # BLOCK_K again: 4-byte elements fill shared memory twice as fast.
    # The lead re-tunes these numbers on the H200: they are all here.
    narrow = element_size > 2  # float32
    if M <= 64:
        BLOCK_M = max(16, triton.next_power_of_2(M))
        BLOCK_N = 64 if triton.cdiv(N, 64) * triton.cdiv(M, BLOCK_M) >= 128 else 32
        BLOCK_K = (256 if BLOCK_M == 16 else 128) // (2 if narrow else 1)
        return BLOCK_M, BLOCK_N, BLOCK_K, 1, 4, 4
    # Many rows: compute-bound (8192^3 in bf16 is 1.1 TFLOP on 0.4 GB). 256 x 128 x 64, 8 warps,
    # 3 stages, with this epilogue: 1.708 ms at 8192^3 bf16 on an H200, the best of the pointer-load
    # tiles timed (128 x 256: 1.923 ms; 128 x 128, 4 stages: 1.837 ms); cuBLAS's matmul alone 1.422 ms,
    # eager matmul + bias + GELU 1.615 ms (results/experiment_linear_h200.json). The rest of the gap
    # is TMA and persistence (chapter 09). float32 halves BLOCK_K (3 x 48 KB of shared memory).
    return 256, 128, 32 if narrow else 64, 8, 8, 3
    # END SOLUTION


def fused_linear(x, weight, bias, out):
    """out[:] = gelu(x @ weight.T + bias, approximate="tanh") for x (M, K), weight (N, K), bias (N,),
    out (M, N), views of any strides. Returns out."""
    M, K = x.shape
    N = weight.shape[0]
    if x.is_cuda and M > 64 and descriptors_fit(x, weight, out) and bias.stride(0) == 1:
        return fused_linear_tma(x, weight, bias, out)  # given: large shapes on a GPU (see above)
    # BEGIN SOLUTION
    # TODO: choose the tiles for this shape with _config, launch one program per output tile on a
    # TODO: 1-D grid, and pass every tensor's strides (weight's as they are: the kernel reads
    # TODO: weight.T through them) and the tiles with num_warps and num_stages.
    BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages = _config(M, N, K, x.element_size())
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    fused_linear_kernel[grid](
        x, weight, bias, out, M, N, K,
        x.stride(0), x.stride(1), weight.stride(0), weight.stride(1), out.stride(0), out.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
        num_warps=num_warps, num_stages=num_stages,
    )  # fmt: skip
    # END SOLUTION
    return out
