# Exercise file for task `fused_broadcast`: generated from solutions/fused_broadcast.py by
# `python -m course_lib sync-exercises`. Replace each TODO stub with your code, then run
# `python -m course_lib check fused_broadcast`. Your edits are never overwritten by sync-exercises.
"""The capstone, step 3: out[b] = W @ concat(E_user[user_of[b]], E_cand[b]) with the broadcast of the
user part fused into the candidate GEMM's epilogue, by index lookup.

Step 1 split W into W_u = W[:, :Ku] and W_c = W[:, Ku:]: out[b] = W_c @ E_cand[b] + user_out[user_of[b]],
where user_out[u] = W_u @ E_user[u] is computed once per user. Here that takes two GEMM launches:

1. the user GEMM: user_out (U, M, N) in float32, one program per (tile, user);
2. the candidate GEMM: one program per (tile, candidate b). After its K loop, the epilogue loads
   user_of[b], then that user's tile of user_out, adds it to the float32 accumulator and stores out,
   once. No (B, M, N) copy of the user part is ever made, and out is never read back.

Why user_out is float32: out is then rounded once, on its store, as the float64 reference implies.
Kept in bf16 or fp16, the user part would be rounded before the sum, and where the candidate part
cancels most of it that first rounding is a large part of what is left (chapter 07 measured it: 2-3%
of the fp16 elements fail the elementwise limit). The price is 4 bytes per element of out read by the
epilogue instead of 2, from L2: user_out is 6.7 MB at the published shape (U = 15, M = 433, N = 256)
and 2.1 MB at the course's, against an H200's 60 MB of L2.

W's parts are views of one (M, Ku + Kc) matrix. At the published shape rows are 2044 elements (4088
bytes) apart, no multiple of 16 bytes, and W_c starts 1178 elements (2356 bytes) in: no 16-byte loads,
no TMA (chapter 08). The launcher pads W once per call (step 2's idea, as a copy kernel: a launcher
computes with no torch): both parts start on 16-byte boundaries, rows 1184 + 872 elements apart, zero
between. It reads 1.8 MB and writes 1.8 MB (under a microsecond at 4.27 TB/s, plus one launch of a few
microseconds) to make the 196 GFLOP candidate GEMM run on aligned rows: chapter 08 measured the same
pointer kernel for that GEMM alone at 1.22 ms unpadded against 0.65 ms padded (and a TMA kernel,
which needs the padding, at 0.39 ms). A model would pad W once at load time instead.
"""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

# Launch settings, easy to retune (scripts/experiments_capstone.py --sweep times others on a GPU).
# * "candidate_tma", the candidate GEMM with the fused epilogue, tensor descriptors: chapter 08's
#   padded_bmm_tma tile, 128 x 256 x 64, 8 warps, 3 stages (0.394 ms for the candidate GEMM alone at
#   the published shape, bf16, H200, results/bench_padded_bmm_h200.json). Compiled for sm_90: 147 KB of
#   shared memory, 186 registers a thread, no spills: one program per SM. BLOCK_N shrinks to N where N is
#   smaller (_tma_gemm): at the course's N = 128, 128 x 128 tiles take 98 KB and 127 registers, so two
#   programs share an SM and one's epilogue overlaps the other's main loop.
# * "user_tma", the user GEMM into float32 user_out: 128 x 128 (98 KB, 90 registers); its work is U / B
#   of the candidate GEMM's at equal K (2% of the FLOPs at the published shape, 1/3 with 4 candidates
#   per user).
# * "pointer", by element size: pointer loads, used in CPU mode (the interpreter) and on a GPU for
#   small or unaligned problems; chapter 08's padded_bmm tiles, shrunk to small problems by
#   pointer_config. float32 multiplies exactly on the FMA units; BLOCK_K 32 keeps three stages in
#   shared memory.
CONFIGS = {
    "candidate_tma": {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
    "user_tma": {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
    "pointer": {
        2: {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
        4: {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3},
    },
    "pad": {"BLOCK": 1024, "num_warps": 4},
    # the descriptor kernels serve problems this large (B * M * N elements of out) on a GPU, where
    # their set-up (descriptors made on the host per call) is small beside the work
    "tma_min_out": 2**22,
}


@triton.jit
def add_user_tile(
    acc,  # (BLOCK_M, BLOCK_N) float32: the candidate GEMM's tile of W_c @ E_cand[batch]
    user_ptr,  # user_out, (U, M, N) float32: (u, m, n) at user_ptr + u * stride_uu + m * stride_um + n * stride_un
    user_of_ptr,  # user_of, (B,): the user of each candidate
    batch,  # the candidate b this program computes
    rows,  # (BLOCK_M,) the tile's rows of out[b]
    cols,  # (BLOCK_N,) the tile's columns of out[b]
    M,
    N,
    stride_uu,
    stride_um,
    stride_un,
):
    """acc + user_out[user_of[batch]][rows, cols], in float32: the fused broadcast. Both GEMM kernels
    below call it on their accumulator before their one store of out."""
    # TODO: look the candidate's user up (one load of user_of), then load that user's tile of
    # TODO: user_out (mask rows past M and columns past N: the last tile-row overhangs M) and return
    # TODO: acc plus it, in float32. Nothing is stored here.
    tl.static_assert(False, "not implemented yet: add_user_tile in exercises/fused_broadcast.py")


@triton.jit
def capstone_gemm_kernel(
    a_ptr,  # W_u or W_c, (M, K): element (m, k) at a_ptr + m * stride_am + k
    e_ptr,  # E_user or E_cand, (batches, K, N): (b, k, n) at e_ptr + b * stride_eb + k * stride_ek + n * stride_en
    out_ptr,  # user_out or out, (batches, M, N): (b, m, n) at out_ptr + b * stride_ob + m * stride_om + n * stride_on
    user_ptr,  # user_out, (U, M, N) float32: read by the epilogue when ADD_USER
    user_of_ptr,  # user_of, (B,): read by the epilogue when ADD_USER
    M,
    N,
    K,
    stride_am,
    stride_eb,
    stride_ek,
    stride_en,
    stride_ob,
    stride_om,
    stride_on,
    stride_uu,
    stride_um,
    stride_un,
    ADD_USER: tl.constexpr,  # False: the user GEMM (user_out = W_u @ E_user); True: the candidate GEMM
    BLOCK_M: tl.constexpr,  # rows of out per program
    BLOCK_N: tl.constexpr,  # columns of out per program
    BLOCK_K: tl.constexpr,  # depth of one tl.dot step
    VEC: tl.constexpr,  # the launcher's promise: a's rows start on multiples of VEC elements (16 bytes)
):
    # Given: chapter 08's batched GEMM with a shared A (padded_bmm). Program (pid, batch) computes one
    # BLOCK_M x BLOCK_N tile of W @ E[batch] into acc, in float32.
    pid = tl.program_id(axis=0)
    batch = tl.program_id(axis=1)
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    rows = (pid // n_col_tiles) * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    cols = (pid % n_col_tiles) * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    ks = tl.arange(0, BLOCK_K)  # (BLOCK_K,)
    # rows past M and columns past N wrap to real ones: the loads need no mask along M or N, and
    # those results are never stored (the epilogue's masks keep them out)
    a_starts = tl.multiple_of((rows % M) * stride_am, VEC)  # (BLOCK_M,) hinted on the product
    a_ptrs = a_ptr + a_starts[:, None] + ks[None, :]  # (BLOCK_M, BLOCK_K)
    e_base = e_ptr + batch.to(tl.int64) * stride_eb  # 64-bit: B * K * N passes 2^31 at large B
    e_ptrs = e_base + ks[:, None] * stride_ek + (cols % N)[None, :] * stride_en  # (BLOCK_K, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_whole = K // BLOCK_K * BLOCK_K
    for _ in range(0, k_whole, BLOCK_K):  # whole steps without a mask: the vectors stay whole
        acc = tl.dot(tl.load(a_ptrs), tl.load(e_ptrs), acc, input_precision="ieee")  # fp32: no TF32
        a_ptrs += BLOCK_K
        e_ptrs += BLOCK_K * stride_ek
    if k_whole < K:  # the last, partial step: zeros beyond K add nothing
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k_whole, other=0.0)
        e = tl.load(e_ptrs, mask=ks[:, None] < K - k_whole, other=0.0)
        acc = tl.dot(a, e, acc, input_precision="ieee")
    # TODO: the epilogue. For the candidate GEMM (ADD_USER), add the user's tile with add_user_tile
    # TODO: (above); then store the tile once, in out's dtype, masked to the M x N edge. Nothing is
    # TODO: stored before this point and nothing is read back.
    tl.static_assert(False, "not implemented yet: capstone_gemm_kernel in exercises/fused_broadcast.py")


@triton.jit
def capstone_tma_kernel(
    a_desc,  # tensor descriptor of W_u or W_c, (M, K), blocks of (BLOCK_M, BLOCK_K)
    e_desc,  # tensor descriptor of E_user or E_cand, (batches, K, N), blocks of (1, BLOCK_K, BLOCK_N)
    out_desc,  # tensor descriptor of user_out or out, (batches, M, N), blocks of (1, BLOCK_M, BLOCK_N // 2)
    user_ptr,  # user_out, (U, M, N) float32: read by the epilogue when ADD_USER
    user_of_ptr,  # user_of, (B,)
    M,
    N,
    K,
    stride_uu,
    stride_um,
    stride_un,
    ADD_USER: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    # Given, not an exercise: large aligned problems on a GPU, chapter 08's padded_bmm_tma with your
    # epilogue. TMA copies whole tiles to shared memory and fills what lies past a dimension's end
    # with zeros (no masks, no narrow loads at the K edge); out's stores drop rows past M.
    batch = tl.program_id(axis=1)
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    off_m = (tl.program_id(axis=0) // n_col_tiles) * BLOCK_M
    off_n = (tl.program_id(axis=0) % n_col_tiles) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([off_m, k])  # (BLOCK_M, BLOCK_K)
        e = e_desc.load([batch, k, off_n]).reshape(BLOCK_K, BLOCK_N)
        acc = tl.dot(a, e, acc)
    # The epilogue in two halves of BLOCK_N / 2 columns, each stored on its own (out_desc's blocks are
    # (1, BLOCK_M, BLOCK_N / 2)). A whole float32 user tile of 128 x 256 beside the accumulator needs
    # 256 registers a thread: the sm_90 code spilled (10 spill stores in its SASS); in halves, none.
    HALF: tl.constexpr = BLOCK_N // 2
    left, right = acc.reshape(BLOCK_M, 2, HALF).permute(0, 2, 1).split()  # (BLOCK_M, HALF) each
    rows = off_m + tl.arange(0, BLOCK_M)
    cols = off_n + tl.arange(0, HALF)
    if ADD_USER:
        left = add_user_tile(left, user_ptr, user_of_ptr, batch, rows, cols, M, N, stride_uu, stride_um, stride_un)
    out_desc.store([batch, off_m, off_n], left.to(out_desc.dtype).reshape(1, BLOCK_M, HALF))
    if ADD_USER:
        right = add_user_tile(
            right, user_ptr, user_of_ptr, batch, rows, cols + HALF, M, N, stride_uu, stride_um, stride_un
        )
    out_desc.store([batch, off_m, off_n + HALF], right.to(out_desc.dtype).reshape(1, BLOCK_M, HALF))


@triton.jit
def pad_rows_kernel(
    w_ptr,  # W, (M, KU + KC): element (m, k) at w_ptr + m * stride_wm + k * stride_wk
    padded_ptr,  # the padded copy, (M, WIDTH), contiguous: W_u in columns [0, KU), W_c in [KU_PAD, KU_PAD + KC)
    KU,
    KC,
    KU_PAD,  # W_c's first column in the copy: KU rounded up to 16 bytes
    WIDTH,  # the copy's row length: KU_PAD + KC rounded up to 16 bytes
    stride_wm,
    stride_wk,
    BLOCK: tl.constexpr,
):
    # Given: step 2's padding as a kernel. Program (row, column block) writes one block of a row of the
    # copy, zeros between and after the two parts.
    row = tl.program_id(axis=0).to(tl.int64)
    cols = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)  # columns of the copy
    src = tl.where(cols < KU_PAD, cols, cols - KU_PAD + KU)  # the column of W each one comes from
    keep = (cols < KU) | ((cols >= KU_PAD) & (cols < KU_PAD + KC))
    x = tl.load(w_ptr + row * stride_wm + src * stride_wk, mask=keep, other=0.0)
    tl.store(padded_ptr + row * WIDTH + cols, x, mask=cols < WIDTH)


def _aligned(t) -> bool:
    """Rows a 16-byte load or a TMA copy can read: unit column stride, base and row stride multiples of 16 bytes."""
    return t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0


def aligned_parts(w, ku):
    """(W_u, W_c) as views whose rows start on 16-byte boundaries: of w itself when they already do,
    else of a padded copy made by pad_rows_kernel (one launch)."""
    w_u, w_c = w[:, :ku], w[:, ku:]
    if _aligned(w_u) and _aligned(w_c):
        return w_u, w_c
    M, K = w.shape
    per_16 = 16 // w.element_size()  # elements in 16 bytes
    ku_pad = triton.cdiv(ku, per_16) * per_16
    width = ku_pad + triton.cdiv(K - ku, per_16) * per_16
    padded = torch.empty(M, width, dtype=w.dtype, device=w.device)  # (M, width): rows 16-byte aligned
    block = CONFIGS["pad"]["BLOCK"]
    pad_rows_kernel[(M, triton.cdiv(width, block))](
        w, padded, ku, K - ku, ku_pad, width, w.stride(0), w.stride(1),
        BLOCK=block, num_warps=CONFIGS["pad"]["num_warps"],
    )  # fmt: skip
    return padded[:, :ku], padded[:, ku_pad : ku_pad + K - ku]


def descriptors_fit(*tensors) -> bool:
    """True when TMA can read and write each tensor: unit last stride, the base and every other
    stride multiples of 16 bytes (chapter 08's rule)."""
    return all(
        t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and all((s * t.element_size()) % 16 == 0 for s in t.stride()[:-1])
        for t in tensors
    )


def _tma_gemm(a, e, out, user_out, user_of, add_user, config):
    """out[b] = a @ e[b] (+ user_out[user_of[b]] when add_user) by the descriptor kernel."""
    M, K = a.shape
    batches, _, N = e.shape
    # BLOCK_N no wider than N needs: at the course's N = 128 a 256-wide tile would multiply zeros for half
    # its columns (TMA fills them), and 128 x 128 tiles leave shared memory for two programs per SM
    c = dict(config, BLOCK_N=min(config["BLOCK_N"], max(16, triton.next_power_of_2(N))))
    a_desc = TensorDescriptor.from_tensor(a, [c["BLOCK_M"], c["BLOCK_K"]])
    e_desc = TensorDescriptor.from_tensor(e, [1, c["BLOCK_K"], c["BLOCK_N"]])
    out_desc = TensorDescriptor.from_tensor(out, [1, c["BLOCK_M"], c["BLOCK_N"] // 2])  # the epilogue's halves
    grid = (triton.cdiv(M, c["BLOCK_M"]) * triton.cdiv(N, c["BLOCK_N"]), batches)
    capstone_tma_kernel[grid](
        a_desc, e_desc, out_desc, user_out, user_of, M, N, K, *user_out.stride(), ADD_USER=add_user,
        BLOCK_M=c["BLOCK_M"], BLOCK_N=c["BLOCK_N"], BLOCK_K=c["BLOCK_K"],
        num_warps=c["num_warps"], num_stages=c["num_stages"],
    )  # fmt: skip


def fused_broadcast_tma(w_u, w_c, e_user, e_cand, user_of, out):
    """The large-problem path on a GPU: both GEMMs by the descriptor kernel, for 2-byte inputs whose
    tensors pass descriptors_fit. Returns out."""
    U, _, N = e_user.shape
    M = w_u.shape[0]
    user_out = torch.empty(U, M, N, dtype=torch.float32, device=out.device)  # (U, M, N)
    _tma_gemm(w_u, e_user, user_out, user_out, user_of, False, CONFIGS["user_tma"])
    _tma_gemm(w_c, e_cand, out, user_out, user_of, True, CONFIGS["candidate_tma"])
    return out


def pointer_config(M, N, K, element_size) -> dict:
    """capstone_gemm_kernel's launch settings for an (M, N, K) problem: CONFIGS["pointer"], with each
    block shrunk to the problem's next power of two where that is smaller (at least 16, tl.dot's
    smallest). Small problems then compute no tile that is mostly overhang, and the interpreter,
    which computes every element of a tile, stays quick."""
    config = dict(CONFIGS["pointer"][element_size])
    for name, size in (("BLOCK_M", M), ("BLOCK_N", N), ("BLOCK_K", K)):
        config[name] = min(config[name], max(16, triton.next_power_of_2(size)))
    return config


def _vec(a) -> int:
    """VEC for capstone_gemm_kernel: 16 bytes' worth of elements where a's rows start on 16-byte
    boundaries (padded), else 1."""
    vec = 16 // a.element_size()
    return vec if a.data_ptr() % 16 == 0 and a.stride(0) % vec == 0 and a.stride(1) == 1 else 1


def fused_broadcast(w, e_user, e_cand, user_of, ku, out):
    """out[b] = W @ concat(E_user[user_of[b]], E_cand[b]) for W (M, Ku + Kc), E_user (U, Ku, N),
    E_cand (B, Kc, N), user_of (B,) (sorted; every user has a candidate), out (B, M, N). Returns out."""
    M = w.shape[0]
    U, _, N = e_user.shape
    B, Kc, _ = e_cand.shape
    w_u, w_c = aligned_parts(w, ku)  # given: W's two parts on 16-byte rows (a padded copy when needed)
    tma_inputs = (w_u, w_c, e_user, e_cand)
    if (
        out.is_cuda
        and B * M * N >= CONFIGS["tma_min_out"]
        and all(t.element_size() == 2 for t in tma_inputs)
        and descriptors_fit(*tma_inputs, out)
    ):
        return fused_broadcast_tma(w_u, w_c, e_user, e_cand, user_of, out)  # given: see above
    # TODO: allocate user_out, (U, M, N) in float32, and launch capstone_gemm_kernel twice on a
    # TODO: (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N), batches) grid, with the settings of pointer_config:
    # TODO: the user GEMM (W_u, E_user -> user_out, ADD_USER=False, U batches), then the candidate GEMM
    # TODO: (W_c, E_cand -> out, ADD_USER=True, B batches) reading user_out and user_of. Pass every
    # TODO: stride, and VEC=_vec(a) for each a.
    raise NotImplementedError("not implemented yet: fused_broadcast in exercises/fused_broadcast.py")
    return out
