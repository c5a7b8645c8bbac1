"""The capstone's step 4 (chapter 10): the linear compression's candidate GEMM warp-specialized and
persistent in Gluon on Hopper (chapter 09's structure), with the user's part added in its epilogue
by index lookup; the user GEMM is a first launch of the same kernel.

    user_out[u] = W_u @ E_user[u]                      (once per unique user, float32, stays in the L2)
    out[b]      = W_c @ E_cand[b] + user_out[user_of[b]]

One producer warp issues TMA loads of W's tile and of E's tile into a ring of NUM_BUFFERS slots; two
consumer warpgroups run wgmma on them and free each slot when its wgmma has completed. E and out
go through 3-D descriptors (batch, rows, columns): the K tail of each batch is filled with zeros by
TMA, never read from the next batch, and an output tile's rows past M are dropped, never written
into the next candidate's rows. W_u and W_c arrive padded: their rows start on 16-byte boundaries
(step 2), as a model's weights are padded once, when they are loaded.

Needs a Hopper GPU (sm_90) to run; it compiles anywhere. Not run on a GPU yet: scripts/experiments_capstone.py and
scripts/gluon_capstone.py --run will record it (results/experiment_capstone_h200.json).
"""

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

# Triton 3.8 renamed the TMA copies (3.6 and 3.7: async_copy_global_to_shared / _shared_to_global)
tma_load = tma.async_load if hasattr(tma, "async_load") else tma.async_copy_global_to_shared
tma_store = tma.async_store if hasattr(tma, "async_store") else tma.async_copy_shared_to_global
GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16, torch.float32: gl.float32}


@gluon.jit
def _tile(tile, num_pid_m, num_pid_n):
    """Tile number -> (batch, pid_m, pid_n), the M tiles of one (batch, N tile) next to each other."""
    # BEGIN SOLUTION
    # TODO: tile -> (batch, pid_m, pid_n), with the M tiles of one (batch, N tile) numbered next to each
    # TODO: other: programs running together then read the same tile of E from memory once.
    per_batch = num_pid_m * num_pid_n
    rest = tile % per_batch
    return tile // per_batch, rest % num_pid_m, rest // num_pid_m
    # END SOLUTION


@gluon.jit
def _producer(a_desc, e_desc, a_bufs, e_bufs, ready, empty, batches, M, N, K,
              NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr):  # fmt: skip
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = e_desc.block_type.shape[2]
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    count = 0
    for tile in range(gl.program_id(0), batches * num_pid_m * num_pid_n, NUM_SMS):
        b, pid_m, pid_n = _tile(tile, num_pid_m, num_pid_n)
        for kk in range(k_steps):
            s = count % NUM_BUFFERS
            mbarrier.wait(empty.index(s), ((count // NUM_BUFFERS) & 1) ^ 1)
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + e_desc.block_type.nbytes)
            tma_load(a_desc, [pid_m * BLOCK_M, kk * BLOCK_K], ready.index(s), a_bufs.index(s))
            tma_load(e_desc, [b, kk * BLOCK_K, pid_n * BLOCK_N], ready.index(s), e_bufs.index(s))
            count += 1


@gluon.jit
def _consumer(c_desc, a_bufs, e_bufs, ready, empty, c_smem, user_ptr, user_of_ptr, batches, M, N, K,
              ADD_USER: gl.constexpr, NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr,
              num_warps: gl.constexpr):  # fmt: skip
    BLOCK_M: gl.constexpr = c_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = c_desc.block_type.shape[2]
    BLOCK_K: gl.constexpr = a_bufs.type.shape[2]
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_N, 16]
    )
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    count = 0
    for tile in range(gl.program_id(0), batches * num_pid_m * num_pid_n, NUM_SMS):
        b, pid_m, pid_n = _tile(tile, num_pid_m, num_pid_n)
        acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=layout)
        for kk in range(k_steps):
            s = count % NUM_BUFFERS
            mbarrier.wait(ready.index(s), (count // NUM_BUFFERS) & 1)
            e_tile = e_bufs.index(s).reshape([BLOCK_K, BLOCK_N])
            acc = warpgroup_mma(a_bufs.index(s), e_tile, acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            if kk > 0:
                mbarrier.arrive(empty.index((count - 1) % NUM_BUFFERS), count=1)
            count += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((count - 1) % NUM_BUFFERS), count=1)
        if ADD_USER:  # the broadcast, by index lookup: this candidate's user's tile, from the L2
            # BEGIN SOLUTION
            # TODO: look up this candidate's user (user_of[b]) and add its tile of user_out, (U, M, N)
            # TODO: float32 contiguous, to acc before the store. The rows and columns of acc's elements:
            # TODO: gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout)) and gl.SliceLayout(0, layout)
            # TODO: for the columns; mask the rows past M and the columns past N. Offsets in int64.
            user = gl.load(user_of_ptr + b).to(gl.int64)
            rows = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
            cols = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
            inside = (rows < M)[:, None] & (cols < N)[None, :]
            offsets = user * M * N + rows[:, None] * N + cols[None, :]
            acc = acc + gl.load(user_ptr + offsets, mask=inside, other=0.0).to(gl.float32)
            # END SOLUTION
        tma.store_wait(0)
        c_smem.reshape([BLOCK_M, BLOCK_N]).store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma_store(c_desc, [b, pid_m * BLOCK_M, pid_n * BLOCK_N], c_smem)
    tma.store_wait(0)


@gluon.jit
def capstone_ws_kernel(a_desc, e_desc, c_desc, user_ptr, user_of_ptr, batches, M, N, K,
                       ADD_USER: gl.constexpr, NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr,
                       num_warps: gl.constexpr):  # fmt: skip
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [NUM_BUFFERS] + a_desc.block_type.shape, a_desc.layout)
    e_bufs = gl.allocate_shared_memory(e_desc.dtype, [NUM_BUFFERS] + e_desc.block_type.shape, e_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    gl.warp_specialize(
        [
            (_consumer, (c_desc, a_bufs, e_bufs, ready, empty, c_smem, user_ptr, user_of_ptr, batches, M, N, K,
                         ADD_USER, NUM_BUFFERS, NUM_SMS, num_warps)),
            (_producer, (a_desc, e_desc, a_bufs, e_bufs, ready, empty, batches, M, N, K, NUM_BUFFERS, NUM_SMS)),
        ],
        [1],
        [40],
    )  # fmt: skip
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))


def _desc(x, block):
    layout = gl.NVMMASharedLayout.get_default_for(block, GL_DTYPES[x.dtype])
    return TensorDescriptor.from_tensor(x, block, layout)


# (BLOCK_M, BLOCK_N, BLOCK_K, NUM_BUFFERS): the candidate GEMM writes bf16/fp16 (a 64 KB output tile
# beside three 48 KB slots), the user GEMM fp32 (BLOCK_N 128: 64 KB of output beside 32 KB slots)
CANDIDATE = (128, 256, 64, 3)
USER = (128, 128, 64, 4)


def gemm(a, e, c, user=None, user_of=None, config=CANDIDATE, sms=132, num_warps=8):
    """c[b] = a @ e[b] (+ user[user_of[b]]): a (M, K) with 16-byte rows, e (batches, K, N), c (batches, M, N)."""
    bm, bn, bk, nb = config
    M, K = a.shape
    batches, _, N = e.shape
    a_d, e_d, c_d = _desc(a, [bm, bk]), _desc(e, [1, bk, bn]), _desc(c, [1, bm, bn])
    tiles = batches * triton.cdiv(M, bm) * triton.cdiv(N, bn)
    grid = (min(sms, tiles),)
    add = user is not None
    capstone_ws_kernel[grid](a_d, e_d, c_d, user if add else c, user_of if add else c, batches, M, N, K,
                             ADD_USER=add, NUM_BUFFERS=nb, NUM_SMS=grid[0], num_warps=num_warps)  # fmt: skip
    return c


def ws_compression(w_u, w_c, e_user, e_cand, user_of, out, sms=None):
    """out[b] = W_u @ E_user[user_of[b]] + W_c @ E_cand[b] in two launches of one kernel: the user GEMM
    (float32 user_out, once per unique user), then the candidate GEMM adding each candidate's user tile
    in its epilogue. w_u (M, Ku) and w_c (M, Kc) with 16-byte rows; e_user (U, Ku, N), e_cand (B, Kc, N),
    out (B, M, N) contiguous; user_of (B,) int64 (int32 works too: the kernel widens it)."""
    if sms is None:
        sms = torch.cuda.get_device_properties(out.device).multi_processor_count if out.is_cuda else 132
    U, _, N = e_user.shape
    user_out = torch.empty(U, w_u.shape[0], N, dtype=torch.float32, device=out.device)  # (U, M, N)
    gemm(w_u, e_user, user_out, config=USER, sms=sms)
    return gemm(w_c, e_cand, out, user_out, user_of, config=CANDIDATE, sms=sms)
