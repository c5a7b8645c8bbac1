"""The capstone's step 4 (chapter 10): the linear compression's candidate GEMM warp-specialized and
persistent in Gluon on Hopper (chapter 09's structure), with the user's part added by index lookup;
the user GEMM is a first launch, of the cooperative kernel.

    user_out[u] = W_u @ E_user[u]                      (once per unique user, float32, stays in the L2)
    out[b]      = W_c @ E_cand[b] + user_out[user_of[b]]

One producer warp issues TMA loads of W's tile and of E's tile into a ring of NUM_BUFFERS slots;
consumer warpgroups run wgmma on them and free each slot when its wgmma has completed. Two schedules:

- cooperative (capstone_ws_kernel): two warpgroups share one tile, 64 rows each; the epilogue stops
  the tensor cores until the next tile starts;
- ping-pong (capstone_pingpong_kernel): two warpgroups take alternate tiles, each with its own
  accumulator, their main loops in turn: one's epilogue runs beside the other's main loop.

The candidate GEMM runs ping-pong, its accumulator starting from the candidate's user tile (the
broadcast costs no add, and the load's latency hides behind the other warpgroup's main loop). E and
out go through 3-D descriptors (batch, rows, columns): the K tail of each batch is filled with zeros
by TMA, never read from the next batch, and an output tile's rows past M are dropped, never written
into the next candidate's rows. W_u and W_c arrive padded: their rows start on 16-byte boundaries
(step 2), as a model's weights are padded once, when they are loaded.

Needs a Hopper GPU (sm_90) to run; it compiles anywhere. On the H200: results/experiment_capstone_h200.json
(every variant, the tiles and schedules tried) and results/bench_ws_compression_h200.json.
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
def _user_tile(user_ptr, user_of_ptr, b, pid_m, pid_n, M, N,
               BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, layout: gl.constexpr):  # fmt: skip
    """Candidate b's user's tile of user_out, (U, M, N) float32 contiguous, in the accumulator's layout:
    the broadcast, by index lookup."""
    # BEGIN SOLUTION
    # TODO: look up this candidate's user (user_of[b]) and load its (BLOCK_M, BLOCK_N) tile of user_out.
    # TODO: The rows of acc's elements: gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout)), the
    # TODO: columns gl.SliceLayout(0, layout); rows past M and columns past N read as 0. Offsets in int64.
    # TODO: The tile starts at row pid_m * BLOCK_M and column pid_n * BLOCK_N; element (u, m, n) of user_out
    # TODO: is at u * M * N + m * N + n. Return the tile: the consumers start their accumulators from it.
    user = gl.load(user_of_ptr + b).to(gl.int64)
    rows = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
    cols = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
    inside = (rows < M)[:, None] & (cols < N)[None, :]
    offsets = user * M * N + rows[:, None] * N + cols[None, :]
    return gl.load(user_ptr + offsets, mask=inside, other=0.0)
    # END SOLUTION


@gluon.jit
def _consumer(c_desc, a_bufs, e_bufs, ready, empty, c_smem, user_ptr, user_of_ptr, batches, M, N, K,
              USER_MODE: gl.constexpr, NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr,
              num_warps: gl.constexpr):  # fmt: skip
    # USER_MODE 0: a plain GEMM (the user GEMM); 1: the user tile added after the main loop; 2: the
    # accumulator starts from the user tile; 3: as 2, the next tile's user tile loaded before this
    # tile's store, so that its latency hides behind the store
    BLOCK_M: gl.constexpr = c_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = c_desc.block_type.shape[2]
    BLOCK_K: gl.constexpr = a_bufs.type.shape[2]
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_N, 16]
    )
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    total = batches * num_pid_m * num_pid_n
    count = 0
    if USER_MODE == 3:
        b, pid_m, pid_n = _tile(gl.program_id(0), num_pid_m, num_pid_n)
        acc_next = _user_tile(user_ptr, user_of_ptr, b, pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, layout)
    for tile in range(gl.program_id(0), total, NUM_SMS):
        b, pid_m, pid_n = _tile(tile, num_pid_m, num_pid_n)
        if USER_MODE == 3:
            acc = acc_next
        elif USER_MODE == 2:
            acc = _user_tile(user_ptr, user_of_ptr, b, pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, layout)
        else:
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
        if USER_MODE == 1:
            acc = acc + _user_tile(user_ptr, user_of_ptr, b, pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, layout)
        values = acc.to(c_desc.dtype)
        if USER_MODE == 3:  # the next tile's start (a tile past the end reads the last one's, unused)
            nb, nm, nn = _tile(gl.minimum(tile + NUM_SMS, total - 1), num_pid_m, num_pid_n)
            acc_next = _user_tile(user_ptr, user_of_ptr, nb, nm, nn, M, N, BLOCK_M, BLOCK_N, layout)
        tma.store_wait(0)
        c_smem.reshape([BLOCK_M, BLOCK_N]).store(values)
        fence_async_shared()
        tma_store(c_desc, [b, pid_m * BLOCK_M, pid_n * BLOCK_N], c_smem)
    tma.store_wait(0)


@gluon.jit
def capstone_ws_kernel(a_desc, e_desc, c_desc, user_ptr, user_of_ptr, batches, M, N, K,
                       USER_MODE: gl.constexpr, NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr,
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
                         USER_MODE, NUM_BUFFERS, NUM_SMS, num_warps)),
            (_producer, (a_desc, e_desc, a_bufs, e_bufs, ready, empty, batches, M, N, K, NUM_BUFFERS, NUM_SMS)),
        ],
        [1],
        [40],
    )  # fmt: skip
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))


@gluon.jit
def _pingpong_consumer(c_desc, a_bufs, e_bufs, ready, empty, turn, c_smem, user_ptr, user_of_ptr, batches, M, N,
                       K, ROLE: gl.constexpr, USER_MODE: gl.constexpr, NUM_BUFFERS: gl.constexpr,
                       NUM_SMS: gl.constexpr):  # fmt: skip
    """One of two consumer warpgroups that take this program's tiles in turn (ROLE 0 its 0th, 2nd, 4th,
    ... tile, ROLE 1 its 1st, 3rd, ...), each with its own accumulator: while one runs its epilogue, the
    other's main loop keeps the tensor cores busy. Their main loops alternate (the turn barriers), so
    the ring is consumed in the order the producer fills it and no slot's ready barrier is waited on an
    even number of phases early (tests/test_pingpong_protocol.py)."""
    BLOCK_M: gl.constexpr = c_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = c_desc.block_type.shape[2]
    BLOCK_K: gl.constexpr = a_bufs.type.shape[2]
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
    )
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    i = 0
    for tile in range(gl.program_id(0) + ROLE * NUM_SMS, batches * num_pid_m * num_pid_n, 2 * NUM_SMS):
        b, pid_m, pid_n = _tile(tile, num_pid_m, num_pid_n)
        count = (2 * i + ROLE) * k_steps  # the ring's count at this tile's first step
        if USER_MODE == 2:  # loaded before the turn: its latency hides behind the other's main loop
            acc = _user_tile(user_ptr, user_of_ptr, b, pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, layout)
        else:
            acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=layout)
        mbarrier.wait(turn.index(ROLE), (i & 1) ^ (1 - ROLE))  # role 0's first turn is free
        for kk in range(k_steps):
            s = count % NUM_BUFFERS
            mbarrier.wait(ready.index(s), (count // NUM_BUFFERS) & 1)
            e_tile = e_bufs.index(s).reshape([BLOCK_K, BLOCK_N])
            acc = warpgroup_mma(a_bufs.index(s), e_tile, acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            if kk > 0:
                mbarrier.arrive(empty.index((count - 1) % NUM_BUFFERS), count=1)
            count += 1
        mbarrier.arrive(turn.index(1 - ROLE), count=1)  # the other warpgroup's main loop may start
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((count - 1) % NUM_BUFFERS), count=1)
        if USER_MODE == 1:
            acc = acc + _user_tile(user_ptr, user_of_ptr, b, pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, layout)
        tma.store_wait(0)
        c_smem.index(ROLE).reshape([BLOCK_M, BLOCK_N]).store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma_store(c_desc, [b, pid_m * BLOCK_M, pid_n * BLOCK_N], c_smem.index(ROLE))
        i += 1
    tma.store_wait(0)


@gluon.jit
def capstone_pingpong_kernel(a_desc, e_desc, c_desc, user_ptr, user_of_ptr, batches, M, N, K,
                             USER_MODE: gl.constexpr, NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr,
                             num_warps: gl.constexpr):  # fmt: skip
    """Ping-pong: the same producer, two consumer warpgroups of 4 warps on alternate tiles (launch with
    num_warps=4: the first consumer is the default partition)."""
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [NUM_BUFFERS] + a_desc.block_type.shape, a_desc.layout)
    e_bufs = gl.allocate_shared_memory(e_desc.dtype, [NUM_BUFFERS] + e_desc.block_type.shape, e_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [2] + c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    for i in gl.static_range(2):
        mbarrier.init(turn.index(i), count=1)
    ROLE0: gl.constexpr = 0
    ROLE1: gl.constexpr = 1
    gl.warp_specialize(
        [
            (_pingpong_consumer, (c_desc, a_bufs, e_bufs, ready, empty, turn, c_smem, user_ptr, user_of_ptr, batches,
                                  M, N, K, ROLE0, USER_MODE, NUM_BUFFERS, NUM_SMS)),
            (_pingpong_consumer, (c_desc, a_bufs, e_bufs, ready, empty, turn, c_smem, user_ptr, user_of_ptr, batches,
                                  M, N, K, ROLE1, USER_MODE, NUM_BUFFERS, NUM_SMS)),
            (_producer, (a_desc, e_desc, a_bufs, e_bufs, ready, empty, batches, M, N, K, NUM_BUFFERS, NUM_SMS)),
        ],
        [4, 1],
        [208, 40],
    )  # fmt: skip
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))
    for i in gl.static_range(2):
        mbarrier.invalidate(turn.index(i))


def _desc(x, block):
    layout = gl.NVMMASharedLayout.get_default_for(block, GL_DTYPES[x.dtype])
    return TensorDescriptor.from_tensor(x, block, layout)


# (BLOCK_M, BLOCK_N, BLOCK_K, NUM_BUFFERS, num_warps, programs per SM[, "pingpong"]), as timed on the
# H200 (results/experiment_capstone_h200.json, the ws_try rows). The candidate GEMM: ping-pong, two
# consumer warpgroups on alternate tiles of 64 x 256 (M = 433 is 7 tiles of 64, 3% of the work wasted,
# against 18% with 128-row tiles), or 128 x 128 where N is 128 or less; each accumulator is 128
# registers a thread. The user GEMM: cooperative, one 128 x 128 tile for both warpgroups, fp32 out.
CANDIDATE = (64, 256, 64, 4, 4, 1, "pingpong")
CANDIDATE_NARROW = (128, 128, 64, 4, 4, 1, "pingpong")  # N <= 128
USER = (128, 128, 64, 4, 8, 1)
USER_MODE = 2  # the candidate GEMM's accumulator starts from the user tile (see _consumer)


def candidate_config(N: int) -> tuple:
    """The candidate GEMM's configuration for output width N."""
    return CANDIDATE_NARROW if N <= 128 else CANDIDATE


def gemm(a, e, c, user=None, user_of=None, config=CANDIDATE, sms=132, user_mode=None):
    """c[b] = a @ e[b] (+ user[user_of[b]]): a (M, K) with 16-byte rows, e (batches, K, N), c (batches, M, N)."""
    bm, bn, bk, nb, num_warps, per_sm = config[:6]
    kernel = capstone_pingpong_kernel if config[6:] == ("pingpong",) else capstone_ws_kernel
    M, K = a.shape
    batches, _, N = e.shape
    bn = min(bn, max(16, triton.next_power_of_2(N)))
    a_d, e_d, c_d = _desc(a, [bm, bk]), _desc(e, [1, bk, bn]), _desc(c, [1, bm, bn])
    tiles = batches * triton.cdiv(M, bm) * triton.cdiv(N, bn)
    grid = (min(sms * per_sm, tiles),)
    add = user is not None
    mode = (USER_MODE if user_mode is None else user_mode) if add else 0
    kernel[grid](a_d, e_d, c_d, user if add else c, user_of if add else c, batches, M, N, K,
                 USER_MODE=mode, NUM_BUFFERS=nb, NUM_SMS=grid[0], num_warps=num_warps)  # fmt: skip
    return c


def ws_compression(w_u, w_c, e_user, e_cand, user_of, out, sms=None, config=None, user_mode=None):
    """out[b] = W_u @ E_user[user_of[b]] + W_c @ E_cand[b] in two launches: the user GEMM (float32
    user_out, once per unique user), then the candidate GEMM, each tile's accumulator starting from
    its candidate's user tile. w_u (M, Ku) and w_c (M, Kc) with 16-byte rows; e_user (U, Ku, N), e_cand (B, Kc, N),
    out (B, M, N) contiguous; user_of (B,) int64 (int32 works too: the kernel widens it)."""
    if sms is None:
        sms = torch.cuda.get_device_properties(out.device).multi_processor_count if out.is_cuda else 132
    U, _, N = e_user.shape
    user_out = torch.empty(U, w_u.shape[0], N, dtype=torch.float32, device=out.device)  # (U, M, N)
    gemm(w_u, e_user, user_out, config=USER, sms=sms)
    config = config or candidate_config(N)
    return gemm(w_c, e_cand, out, user_out, user_of, config=config, sms=sms, user_mode=user_mode)
