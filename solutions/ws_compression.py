"""The capstone's step 4 (chapter 10): the linear compression's candidate GEMM warp-specialized and
persistent in Gluon on Hopper (chapter 09's structure), with the user's part added by index lookup;
the user GEMM is a first launch, of the cooperative kernel.

    user_out[u] = W_u @ E_user[u]                      (once per unique user, in out's dtype, stays in the L2)
    out[b]      = W_c @ E_cand[b] + user_out[user_of[b]]

One producer warp issues TMA loads of W's tile and of E's tile into a ring of NUM_BUFFERS slots;
consumer warpgroups run wgmma on them and free each slot when its wgmma has completed. Two schedules:

- cooperative (capstone_ws_kernel, the user GEMM): two warpgroups share one tile, 64 rows each; the
  epilogue stops the tensor cores until the next tile starts;
- ping-pong (capstone_pingpong_kernel, the candidate GEMM): two warpgroups take alternate tiles, each
  with its own accumulator, their main loops in turn: one's epilogue runs beside the other's main loop.

Before its turn, a candidate GEMM's consumer looks up its tile's user (user_of[b]) and starts a TMA
copy of that user's tile of user_out into its own staging tile, the one its store of out goes
through; the copy lands during the main loop, and the epilogue adds it to the accumulator and writes
the sum back over it for the store. The broadcast costs no memory pass and no load from global memory
on the tile's critical path: on the H200 the candidate GEMM then takes 2-3% more time than with no
user part at all at the course's shapes, 5-9% at the published one
(results/probes/probe_user_tile_mode5_2026-12-02_h200.json). E and out go through 3-D descriptors
(batch, rows, columns): the K tail of each batch is filled with zeros by TMA, never read from the next
batch, and an output tile's rows past M are dropped, never written into the next candidate's rows.
W_u and W_c arrive padded: their rows start on 16-byte boundaries (step 2), as a model's weights are
padded once, when they are loaded.

Needs a Hopper GPU (sm_90) to run; it compiles anywhere. On the H200: results/experiment_capstone_h200.json
and results/bench_ws_compression_h200.json. The variants tried against it (the user tile loaded from
global memory in other user modes, the tiles stored from the registers, both GEMMs in one launch, other
tiles and schedules) are in scripts/capstone_variants.py, with their records.
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
def _copy_user_tile(u_desc, user_of_ptr, b, pid_m, pid_n, bar, dest):
    """Start the TMA copy of candidate b's user's tile of user_out (U, M, N) into dest (the consumer's
    staging tile), its arrival counted on bar: the broadcast, by index lookup."""
    # BEGIN SOLUTION
    # TODO: look up this candidate's user: one number, read through user_of_ptr, made an int32 (TMA
    # TODO: coordinates are 32-bit). Tell bar how many bytes the copy brings (mbarrier.expect: one block of
    # TODO: u_desc), then start the copy (tma_load, its arguments in the order _producer passes them) of the
    # TODO: block of user_out whose corner is this user, this tile's first row and its first column. BLOCK_M
    # TODO: and BLOCK_N are u_desc.block_type.shape[1] and [2]; dest has the block's shape (1, BLOCK_M,
    # TODO: BLOCK_N) already; rows past M come as zeros. Do not wait on bar here: the epilogue does, after
    # TODO: the main loop. A byte count that no copy brings hangs that wait. Hints: course_lib.hint("ws_compression").
    BLOCK_M: gl.constexpr = u_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = u_desc.block_type.shape[2]
    user = gl.load(user_of_ptr + b).to(gl.int32)
    mbarrier.expect(bar, u_desc.block_type.nbytes)
    tma_load(u_desc, [user, pid_m * BLOCK_M, pid_n * BLOCK_N], bar, dest)
    # END SOLUTION


@gluon.jit
def _consumer(c_desc, a_bufs, e_bufs, ready, empty, c_smem, batches, M, N, K,
              NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr, num_warps: gl.constexpr):  # fmt: skip
    """The cooperative consumer (the user GEMM's): all num_warps warps on one tile, c = a @ e[b] with
    no user part, stored through c_smem by TMA."""
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
    for tile in range(gl.program_id(0), total, NUM_SMS):
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
        values = acc.to(c_desc.dtype)
        tma.store_wait(0)  # the last tile's store has read c_smem
        c_smem.reshape([BLOCK_M, BLOCK_N]).store(values)
        fence_async_shared()
        tma_store(c_desc, [b, pid_m * BLOCK_M, pid_n * BLOCK_N], c_smem)
    tma.store_wait(0)


@gluon.jit
def capstone_ws_kernel(a_desc, e_desc, c_desc, batches, M, N, K,
                       NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr, num_warps: gl.constexpr):  # fmt: skip
    """Cooperative: one producer warp, the consumer in the default partition (launch with num_warps=8 for
    two warpgroups on one tile, 4 for one)."""
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
            (_consumer, (c_desc, a_bufs, e_bufs, ready, empty, c_smem, batches, M, N, K, NUM_BUFFERS, NUM_SMS,
                         num_warps)),
            (_producer, (a_desc, e_desc, a_bufs, e_bufs, ready, empty, batches, M, N, K, NUM_BUFFERS, NUM_SMS)),
        ],
        [1],
        [40],
    )  # fmt: skip
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))


@gluon.jit
def _turn_main_loop(acc, a_bufs, e_bufs, ready, empty, turn, count, k_steps,
                    ROLE: gl.constexpr, NUM_BUFFERS: gl.constexpr):  # fmt: skip
    """A ping-pong consumer's main loop over the ring from step ``count`` (its turn already taken): each
    slot freed once the wgmma that read it has completed; the turn handed over after the last wgmma is
    issued, before it completes."""
    BLOCK_K: gl.constexpr = a_bufs.type.shape[2]
    BLOCK_N: gl.constexpr = e_bufs.type.shape[3]
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
    return acc


@gluon.jit
def _pingpong_consumer(c_desc, u_desc, u_bar, a_bufs, e_bufs, ready, empty, turn, c_smem, user_of_ptr,
                       batches, M, N, K, ROLE: gl.constexpr, NUM_BUFFERS: gl.constexpr,
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
        staged = c_smem.index(ROLE)  # this warpgroup's staging tile: the user tile first, then the output
        tma.store_wait(0)  # the last tile's store has read the staging tile
        _copy_user_tile(u_desc, user_of_ptr, b, pid_m, pid_n, u_bar.index(ROLE), staged)  # lands during the loop
        acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=layout)
        mbarrier.wait(turn.index(ROLE), (i & 1) ^ (1 - ROLE))  # role 0's first turn is free
        acc = _turn_main_loop(acc, a_bufs, e_bufs, ready, empty, turn, count, k_steps, ROLE, NUM_BUFFERS)
        mbarrier.wait(u_bar.index(ROLE), i & 1)  # the user tile has landed (one copy a tile)
        # each thread reads, then writes, the same elements of the staging tile
        acc = acc + staged.reshape([BLOCK_M, BLOCK_N]).load(layout).to(gl.float32)
        tma.store_wait(0)
        staged.reshape([BLOCK_M, BLOCK_N]).store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma_store(c_desc, [b, pid_m * BLOCK_M, pid_n * BLOCK_N], staged)
        i += 1
    tma.store_wait(0)


@gluon.jit
def capstone_pingpong_kernel(a_desc, e_desc, c_desc, u_desc, user_of_ptr, batches, M, N, K,
                             NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr, num_warps: gl.constexpr):  # fmt: skip
    """Ping-pong: the same producer, two consumer warpgroups of 4 warps on alternate tiles (launch with
    num_warps=4: the first consumer is the default partition), each with its own staging tile."""
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [NUM_BUFFERS] + a_desc.block_type.shape, a_desc.layout)
    e_bufs = gl.allocate_shared_memory(e_desc.dtype, [NUM_BUFFERS] + e_desc.block_type.shape, e_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    u_bar = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())  # the user tiles' copies
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [2] + c_desc.block_type.shape, c_desc.layout)
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    for i in gl.static_range(2):
        mbarrier.init(turn.index(i), count=1)
        mbarrier.init(u_bar.index(i), count=1)
    ROLE0: gl.constexpr = 0
    ROLE1: gl.constexpr = 1
    gl.warp_specialize(
        [
            (_pingpong_consumer, (c_desc, u_desc, u_bar, a_bufs, e_bufs, ready, empty, turn, c_smem, user_of_ptr,
                                  batches, M, N, K, ROLE0, NUM_BUFFERS, NUM_SMS)),
            (_pingpong_consumer, (c_desc, u_desc, u_bar, a_bufs, e_bufs, ready, empty, turn, c_smem, user_of_ptr,
                                  batches, M, N, K, ROLE1, NUM_BUFFERS, NUM_SMS)),
            (_producer, (a_desc, e_desc, a_bufs, e_bufs, ready, empty, batches, M, N, K, NUM_BUFFERS, NUM_SMS)),
        ],
        [4, 1],
        # registers a thread for role 1 and the producer; role 0, the default partition, takes what is left
        # (setmaxnreg 256 in the sm_90 PTX). Both consumers hold a 128-register accumulator and neither
        # spills (no local loads or stores in the SASS), so 256 against 208 costs nothing here
        [208, 40],
    )  # fmt: skip
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))
    for i in gl.static_range(2):
        mbarrier.invalidate(turn.index(i))
        mbarrier.invalidate(u_bar.index(i))


def _desc(x, block):
    layout = gl.NVMMASharedLayout.get_default_for(block, GL_DTYPES[x.dtype])
    return TensorDescriptor.from_tensor(x, block, layout)


# (BLOCK_M, BLOCK_N, BLOCK_K, NUM_BUFFERS, num_warps), as timed on the H200
# (results/experiment_capstone_h200.json, the ws_try and ws_user_try rows). The candidate GEMM:
# ping-pong, two consumer warpgroups on alternate tiles of 64 x 256 (M = 433 is 7 tiles of 64, 3% of
# the work wasted, against 18% with 128-row tiles), or 128 x 128 where N is 128 or less; each
# accumulator is 128 registers a thread; 4 slots of 40 KB at 64 x 256, 5 of 32 KB at 128 x 128, beside
# two 32 KB staging tiles. The user GEMM: cooperative, one 128 x 128 tile for both warpgroups, user_out
# in out's dtype.
CANDIDATE = (64, 256, 64, 4, 4)
CANDIDATE_NARROW = (128, 128, 64, 5, 4)  # N <= 128
USER = (128, 128, 64, 4, 8)
USER_SMALL = (64, 64, 64, 4, 4)  # one warpgroup on 64 x 64 tiles: 4 times the programs, for few users


def candidate_config(N: int) -> tuple:
    """The candidate GEMM's configuration for output width N."""
    return CANDIDATE_NARROW if N <= 128 else CANDIDATE


def pick_user_config(U: int, M: int, N: int, sms: int) -> tuple:
    """The user GEMM's configuration: USER, unless its 128 x 128 tiles would leave more than half the
    SMs idle (the course's shape: 32 tiles for 132 SMs), then USER_SMALL (128 tiles there; 7.7 against
    10.4 us on the H200, the ws_user_try rows of results/experiment_capstone_h200.json)."""
    return USER_SMALL if U * triton.cdiv(M, 128) * triton.cdiv(N, 128) < sms // 2 else USER


def user_gemm(w_u, e_user, user_out, sms):
    """user_out[u] = W_u @ E_user[u] on the cooperative kernel: w_u (M, Ku) with 16-byte rows, e_user
    (U, Ku, N), user_out (U, M, N)."""
    M, Ku = w_u.shape
    U, _, N = e_user.shape
    bm, bn, bk, nb, num_warps = pick_user_config(U, M, N, sms)
    bn = min(bn, max(16, triton.next_power_of_2(N)))  # no wider than N needs
    grid = (min(sms, U * triton.cdiv(M, bm) * triton.cdiv(N, bn)),)  # persistent: at most one program per SM
    capstone_ws_kernel[grid](_desc(w_u, [bm, bk]), _desc(e_user, [1, bk, bn]), _desc(user_out, [1, bm, bn]),
                             U, M, N, Ku, NUM_BUFFERS=nb, NUM_SMS=grid[0], num_warps=num_warps)  # fmt: skip
    return user_out


def candidate_gemm(w_c, e_cand, out, user_out, user_of, sms):
    """out[b] = W_c @ E_cand[b] + user_out[user_of[b]] on the ping-pong kernel: w_c (M, Kc) with 16-byte
    rows, e_cand (B, Kc, N), out (B, M, N), user_out (U, M, N) in out's dtype (its tiles are copied into
    the output's staging tiles), user_of (B,)."""
    M, Kc = w_c.shape
    B, _, N = e_cand.shape
    bm, bn, bk, nb, num_warps = candidate_config(N)
    bn = min(bn, max(16, triton.next_power_of_2(N)))
    grid = (min(sms, B * triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
    capstone_pingpong_kernel[grid](_desc(w_c, [bm, bk]), _desc(e_cand, [1, bk, bn]), _desc(out, [1, bm, bn]),
                                   _desc(user_out, [1, bm, bn]), user_of, B, M, N, Kc, NUM_BUFFERS=nb,
                                   NUM_SMS=grid[0], num_warps=num_warps)  # fmt: skip
    return out


def ws_compression(w_u, w_c, e_user, e_cand, user_of, out, sms=None):
    """out[b] = W_u @ E_user[user_of[b]] + W_c @ E_cand[b] in two launches: the user GEMM (user_out in
    out's dtype, once per unique user), then the candidate GEMM, each tile's user tile copied by TMA
    and added in its epilogue. w_u (M, Ku) and w_c (M, Kc) with 16-byte rows; e_user (U, Ku, N), e_cand
    (B, Kc, N), out (B, M, N) contiguous; user_of (B,) int64 or int32.
    sms: the persistent grid's programs (default: the GPU's SMs; 132, an H200's, on the CPU)."""
    if sms is None:
        sms = torch.cuda.get_device_properties(out.device).multi_processor_count if out.is_cuda else 132
    U, _, N = e_user.shape
    user_out = torch.empty(U, w_u.shape[0], N, dtype=out.dtype, device=out.device)  # (U, M, N)
    user_gemm(w_u, e_user, user_out, sms)
    return candidate_gemm(w_c, e_cand, out, user_out, user_of, sms)
