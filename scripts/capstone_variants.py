"""Chapter 10's step 4 as it was experimented with: every variant of solutions/ws_compression.py that was
timed on the H200, kept here so that their records stay reproducible. The course ships, and the grader
and `course_lib bench` run, solutions/ws_compression.py (its learner's copy: exercises/ws_compression.py);
this module is for scripts/experiments_capstone.py, scripts/probe_user_tile.py, scripts/gluon_capstone.py
and scripts/ws_stationary.py.

What it adds to the solution, whose _tile, _producer, _copy_user_tile and _turn_main_loop it reuses:

- user modes (USER_MODE, a constexpr), how a candidate tile gets its user tile: 0 none (a plain GEMM,
  the user GEMM); 1 loaded from global memory after the main loop and added; 2 loaded before the main
  loop (before the turn in ping-pong) and the accumulator started from it; 3 (cooperative only) as 2,
  the next tile's loaded before this tile's store; 5 (ping-pong only) copied by TMA into the staging
  tile during the main loop and added in the epilogue: the solution's, and this module's default;
- both GEMMs on either kernel, the cooperative one (capstone_ws_kernel, modes 0-3) and the ping-pong
  one (capstone_pingpong_kernel, modes 0-2 and 5), by configuration: (BLOCK_M, BLOCK_N, BLOCK_K,
  NUM_BUFFERS, num_warps, programs per SM[, "pingpong"[, "direct"]]); "direct" stores the ping-pong
  tiles from the registers instead of through shared memory and TMA (DIRECT_STORE);
- both GEMMs in one launch (capstone_one_launch_kernel, ws_compression(..., one=True)), flags between
  them.

Their records: results/experiment_capstone_h200.json (ws_try, ws_user_try and ws_compression_one_launch
rows), results/experiment_capstone_2026-12-01_h200.json, results/experiment_capstone_2026-12-02_h200.json
("direct" tries, the first one launch), results/experiment_capstone_one_launch_h200.json,
results/experiment_ws_sweep_h200.json (scripts/gluon_capstone.py --sweep) and results/probes/
(scripts/probe_user_tile.py). Without knobs, ws_compression here runs the solution's two launches in
the solution's configuration (kernels of the same code, defined here with their other modes).

Needs a Hopper GPU (sm_90) to run; it compiles anywhere. Import it from a script (scripts/ on sys.path)
or load it by its path.
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

from course_lib import sources

solution = sources.load_module("ws_compression", "solutions")  # the shipped step 4: the parts reused here
tma_load, tma_store, _desc = solution.tma_load, solution.tma_store, solution._desc
_tile, _producer, _copy_user_tile, _turn_main_loop = (
    solution._tile,
    solution._producer,
    solution._copy_user_tile,
    solution._turn_main_loop,
)


@gluon.jit
def _user_tile(user_ptr, user_of_ptr, b, pid_m, pid_n, M, N,
               BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, layout: gl.constexpr):  # fmt: skip
    """Candidate b's user's tile of user_out, (U, M, N) contiguous, in the accumulator's layout, by masked
    loads from global memory (user modes 1 to 3 and the one launch; step 3's add_user_tile in Gluon)."""
    user = gl.load(user_of_ptr + b).to(gl.int64)
    rows = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
    cols = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
    inside = (rows < M)[:, None] & (cols < N)[None, :]
    offsets = user * M * N + rows[:, None] * N + cols[None, :]
    return gl.load(user_ptr + offsets, mask=inside, other=0.0)


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
        acc_next = _user_tile(user_ptr, user_of_ptr, b, pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, layout).to(gl.float32)
    for tile in range(gl.program_id(0), total, NUM_SMS):
        b, pid_m, pid_n = _tile(tile, num_pid_m, num_pid_n)
        if USER_MODE == 3:
            acc = acc_next
        elif USER_MODE == 2:
            acc = _user_tile(user_ptr, user_of_ptr, b, pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, layout).to(gl.float32)
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
            acc = acc + _user_tile(user_ptr, user_of_ptr, b, pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, layout).to(
                gl.float32
            )
        values = acc.to(c_desc.dtype)
        if USER_MODE == 3:  # the next tile's start (a tile past the end reads the last one's, unused)
            nb, nm, nn = _tile(gl.minimum(tile + NUM_SMS, total - 1), num_pid_m, num_pid_n)
            acc_next = _user_tile(user_ptr, user_of_ptr, nb, nm, nn, M, N, BLOCK_M, BLOCK_N, layout).to(gl.float32)
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
def _pingpong_consumer(c_desc, c_ptr, u_desc, u_bar, a_bufs, e_bufs, ready, empty, turn, c_smem, user_ptr,
                       user_of_ptr, batches, M, N, K, ROLE: gl.constexpr, USER_MODE: gl.constexpr,
                       NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr, DIRECT_STORE: gl.constexpr):  # fmt: skip
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
        staged = c_smem.index(ROLE)
        if USER_MODE == 2:  # loaded before the turn: its latency hides behind the other's main loop
            acc = _user_tile(user_ptr, user_of_ptr, b, pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, layout).to(gl.float32)
        elif USER_MODE == 5:  # the user tile copied by TMA into this warpgroup's staging tile, during the main loop
            tma.store_wait(0)  # the last tile's store has read the staging tile
            _copy_user_tile(u_desc, user_of_ptr, b, pid_m, pid_n, u_bar.index(ROLE), staged)
            acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=layout)
        else:
            acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=layout)
        mbarrier.wait(turn.index(ROLE), (i & 1) ^ (1 - ROLE))  # role 0's first turn is free
        acc = _turn_main_loop(acc, a_bufs, e_bufs, ready, empty, turn, count, k_steps, ROLE, NUM_BUFFERS)
        if USER_MODE == 1:
            acc = acc + _user_tile(user_ptr, user_of_ptr, b, pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, layout).to(
                gl.float32
            )
        elif USER_MODE == 5:  # each thread reads, then writes, the same elements of the staging tile
            mbarrier.wait(u_bar.index(ROLE), i & 1)
            acc = acc + staged.reshape([BLOCK_M, BLOCK_N]).load(layout).to(gl.float32)
        if DIRECT_STORE:  # from the registers, masked: no staging tile, more shared memory for the ring
            rows = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
            cols = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
            inside = (rows < M)[:, None] & (cols < N)[None, :]
            offsets = b.to(gl.int64) * M * N + rows[:, None] * N + cols[None, :]
            gl.store(c_ptr + offsets, acc.to(c_desc.dtype), mask=inside)
        else:
            tma.store_wait(0)
            staged.reshape([BLOCK_M, BLOCK_N]).store(acc.to(c_desc.dtype))
            fence_async_shared()
            tma_store(c_desc, [b, pid_m * BLOCK_M, pid_n * BLOCK_N], staged)
        i += 1
    tma.store_wait(0)


@gluon.jit
def capstone_pingpong_kernel(a_desc, e_desc, c_desc, c_ptr, u_desc, user_ptr, user_of_ptr, batches, M, N, K,
                             USER_MODE: gl.constexpr, NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr,
                             DIRECT_STORE: gl.constexpr, num_warps: gl.constexpr):  # fmt: skip
    """Ping-pong: the same producer, two consumer warpgroups of 4 warps on alternate tiles (launch with
    num_warps=4: the first consumer is the default partition)."""
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [NUM_BUFFERS] + a_desc.block_type.shape, a_desc.layout)
    e_bufs = gl.allocate_shared_memory(e_desc.dtype, [NUM_BUFFERS] + e_desc.block_type.shape, e_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    u_bar = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())  # USER_MODE 5's copies
    if DIRECT_STORE:
        c_smem = turn  # unused: the tiles are stored from the registers
    else:
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
            (_pingpong_consumer, (c_desc, c_ptr, u_desc, u_bar, a_bufs, e_bufs, ready, empty, turn, c_smem, user_ptr,
                                  user_of_ptr, batches, M, N, K, ROLE0, USER_MODE, NUM_BUFFERS, NUM_SMS, DIRECT_STORE)),
            (_pingpong_consumer, (c_desc, c_ptr, u_desc, u_bar, a_bufs, e_bufs, ready, empty, turn, c_smem, user_ptr,
                                  user_of_ptr, batches, M, N, K, ROLE1, USER_MODE, NUM_BUFFERS, NUM_SMS, DIRECT_STORE)),
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
        mbarrier.invalidate(u_bar.index(i))


# One launch: the user GEMM's tiles first (tile numbers 0 .. user_tiles - 1), then the candidates'. A
# user tile's consumer stores its tile to user_out and raises the tile's flag; a candidate's
# consumer waits for its user tile's flag before its turn (rarely long: every program takes its user
# tiles before any candidate's), then starts its accumulator from the tile. No wait can close a cycle:
# the user tiles wait on nothing, and the grid is at most one program per SM, all resident (at most one
# fits an SM). The flags count up across calls (FLAG_RAISES a call), so that they need no clearing
# launch. (A first version that did not wait, starting from zeros and adding the tile after the main
# loop when the flag was not up yet, held two tiles in registers there: ptxas spilled 77 registers.)
FLAG_RAISES = 128  # each thread of a consumer warpgroup raises a user tile's flag once


@gluon.jit
def _one_tile(tile, user_tiles, num_pid_m, num_pid_n):
    """One launch's tile number -> (is_user, batch or user, pid_m, pid_n)."""
    is_user = tile < user_tiles
    if is_user:
        b, pid_m, pid_n = _tile(tile, num_pid_m, num_pid_n)
    else:
        b, pid_m, pid_n = _tile(tile - user_tiles, num_pid_m, num_pid_n)
    return is_user, b, pid_m, pid_n


@gluon.jit
def _one_producer(wu_desc, eu_desc, wc_desc, ec_desc, a_bufs, e_bufs, ready, empty, users, batches, M, N, Ku, Kc,
                  NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr):  # fmt: skip
    BLOCK_M: gl.constexpr = wc_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = wc_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = ec_desc.block_type.shape[2]
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    user_tiles = users * num_pid_m * num_pid_n
    count = 0
    for tile in range(gl.program_id(0), user_tiles + batches * num_pid_m * num_pid_n, NUM_SMS):
        is_user, b, pid_m, pid_n = _one_tile(tile, user_tiles, num_pid_m, num_pid_n)
        if is_user:
            for kk in range(gl.cdiv(Ku, BLOCK_K)):
                s = count % NUM_BUFFERS
                mbarrier.wait(empty.index(s), ((count // NUM_BUFFERS) & 1) ^ 1)
                mbarrier.expect(ready.index(s), wu_desc.block_type.nbytes + eu_desc.block_type.nbytes)
                tma_load(wu_desc, [pid_m * BLOCK_M, kk * BLOCK_K], ready.index(s), a_bufs.index(s))
                tma_load(eu_desc, [b, kk * BLOCK_K, pid_n * BLOCK_N], ready.index(s), e_bufs.index(s))
                count += 1
        else:
            for kk in range(gl.cdiv(Kc, BLOCK_K)):
                s = count % NUM_BUFFERS
                mbarrier.wait(empty.index(s), ((count // NUM_BUFFERS) & 1) ^ 1)
                mbarrier.expect(ready.index(s), wc_desc.block_type.nbytes + ec_desc.block_type.nbytes)
                tma_load(wc_desc, [pid_m * BLOCK_M, kk * BLOCK_K], ready.index(s), a_bufs.index(s))
                tma_load(ec_desc, [b, kk * BLOCK_K, pid_n * BLOCK_N], ready.index(s), e_bufs.index(s))
                count += 1


@gluon.jit
def _flag_is_up(flag_ptr, target):
    return gl.atomic_add(flag_ptr, 0, sem="acquire") >= target


@gluon.jit
def _one_consumer(c_desc, a_bufs, e_bufs, ready, empty, turn, c_smem, user_ptr, user_of_ptr, flags_ptr, target,
                  users, batches, M, N, Ku, Kc, ROLE: gl.constexpr, NUM_BUFFERS: gl.constexpr,
                  NUM_SMS: gl.constexpr):  # fmt: skip
    """A ping-pong consumer of the one-launch kernel: its user tiles stored to user_out with
    their flags raised, its candidate tiles started from (or added to) their user tile."""
    BLOCK_M: gl.constexpr = c_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = c_desc.block_type.shape[2]
    BLOCK_K: gl.constexpr = a_bufs.type.shape[2]
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
    )
    per_thread: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    ku_steps = gl.cdiv(Ku, BLOCK_K)
    kc_steps = gl.cdiv(Kc, BLOCK_K)
    user_tiles = users * num_pid_m * num_pid_n
    pid = gl.program_id(0)
    my_user_tiles = (gl.maximum(user_tiles - pid, 0) + NUM_SMS - 1) // NUM_SMS  # this program's, all first
    i = 0
    for tile in range(pid + ROLE * NUM_SMS, user_tiles + batches * num_pid_m * num_pid_n, 2 * NUM_SMS):
        is_user, b, pid_m, pid_n = _one_tile(tile, user_tiles, num_pid_m, num_pid_n)
        j = 2 * i + ROLE  # this tile's place in the program's sequence; the ring's count at its first step:
        count = gl.minimum(j, my_user_tiles) * ku_steps + gl.maximum(j - my_user_tiles, 0) * kc_steps
        if is_user:
            k_steps = ku_steps
            acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=layout)
        else:  # wait for the user tile's flag (before the turn: the other warpgroup's main loop goes on)
            k_steps = kc_steps
            user = gl.load(user_of_ptr + b).to(gl.int64)
            flag_ptr = flags_ptr + (user * num_pid_m + pid_m) * num_pid_n + pid_n
            up = _flag_is_up(flag_ptr, target)
            while not up:
                up = _flag_is_up(flag_ptr, target)
            acc = _user_tile(user_ptr, user_of_ptr, b, pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, layout).to(gl.float32)
        mbarrier.wait(turn.index(ROLE), (i & 1) ^ (1 - ROLE))  # role 0's first turn is free
        acc = _turn_main_loop(acc, a_bufs, e_bufs, ready, empty, turn, count, k_steps, ROLE, NUM_BUFFERS)
        if is_user:
            rows = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
            cols = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
            inside = (rows < M)[:, None] & (cols < N)[None, :]
            offsets = b.to(gl.int64) * M * N + rows[:, None] * N + cols[None, :]
            gl.store(user_ptr + offsets, acc.to(user_ptr.dtype.element_ty), mask=inside)
            # each thread's stores, then its release: a flag at FLAG_RAISES more means the whole tile is there
            ones = gl.full([128], 1, gl.int32, per_thread)  # one element a thread
            gl.atomic_add(flags_ptr + (b * num_pid_m + pid_m) * num_pid_n + pid_n + 0 * ones, ones, sem="release")
        else:
            tma.store_wait(0)
            c_smem.index(ROLE).reshape([BLOCK_M, BLOCK_N]).store(acc.to(c_desc.dtype))
            fence_async_shared()
            tma_store(c_desc, [b, pid_m * BLOCK_M, pid_n * BLOCK_N], c_smem.index(ROLE))
        i += 1
    tma.store_wait(0)


@gluon.jit
def capstone_one_launch_kernel(wu_desc, eu_desc, wc_desc, ec_desc, c_desc, user_ptr, user_of_ptr, flags_ptr,
                               target, users, batches, M, N, Ku, Kc, NUM_BUFFERS: gl.constexpr,
                               NUM_SMS: gl.constexpr, num_warps: gl.constexpr):  # fmt: skip
    """The user GEMM and the candidate GEMM in one launch: ping-pong consumers (launch with num_warps=4),
    one producer warp, the ring shared by both GEMMs' tiles (their blocks have one shape)."""
    a_bufs = gl.allocate_shared_memory(wc_desc.dtype, [NUM_BUFFERS] + wc_desc.block_type.shape, wc_desc.layout)
    e_bufs = gl.allocate_shared_memory(ec_desc.dtype, [NUM_BUFFERS] + ec_desc.block_type.shape, ec_desc.layout)
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
            (_one_consumer, (c_desc, a_bufs, e_bufs, ready, empty, turn, c_smem, user_ptr, user_of_ptr, flags_ptr,
                             target, users, batches, M, N, Ku, Kc, ROLE0, NUM_BUFFERS, NUM_SMS)),
            (_one_consumer, (c_desc, a_bufs, e_bufs, ready, empty, turn, c_smem, user_ptr, user_of_ptr, flags_ptr,
                             target, users, batches, M, N, Ku, Kc, ROLE1, NUM_BUFFERS, NUM_SMS)),
            (_one_producer, (wu_desc, eu_desc, wc_desc, ec_desc, a_bufs, e_bufs, ready, empty, users, batches, M, N,
                             Ku, Kc, NUM_BUFFERS, NUM_SMS)),
        ],
        [4, 1],
        [208, 40],
    )  # fmt: skip
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))
    for i in gl.static_range(2):
        mbarrier.invalidate(turn.index(i))


# The solution's configurations in the experiments' form: (BLOCK_M, BLOCK_N, BLOCK_K, NUM_BUFFERS,
# num_warps, programs per SM[, "pingpong"]), the schedule named where it is ping-pong.
CANDIDATE = (*solution.CANDIDATE, 1, "pingpong")
CANDIDATE_NARROW = (*solution.CANDIDATE_NARROW, 1, "pingpong")  # N <= 128
USER = (*solution.USER, 1)
USER_SMALL = (*solution.USER_SMALL, 1)
# The candidate GEMM's user mode where a ping-pong config and user_out in out's dtype allow it (the
# solution's): 5; else 2, the accumulator started from the user tile, loaded before the turn.
USER_MODE = 5


def candidate_config(N: int) -> tuple:
    """The solution's candidate GEMM configuration for output width N, in the experiments' form."""
    return CANDIDATE_NARROW if N <= 128 else CANDIDATE


def pick_user_config(U: int, M: int, N: int, sms: int) -> tuple:
    """The solution's user GEMM configuration (USER or USER_SMALL), in the experiments' form."""
    return USER if solution.pick_user_config(U, M, N, sms) == solution.USER else USER_SMALL


def gemm(a, e, c, user=None, user_of=None, config=CANDIDATE, sms=132, user_mode=None):
    """c[b] = a @ e[b] (+ user[user_of[b]]): a (M, K) with 16-byte rows, e (batches, K, N), c (batches, M, N)."""
    bm, bn, bk, nb, num_warps, per_sm = config[:6]
    pingpong = config[6:7] == ("pingpong",)
    M, K = a.shape
    batches, _, N = e.shape
    bn = min(bn, max(16, triton.next_power_of_2(N)))
    a_d, e_d, c_d = _desc(a, [bm, bk]), _desc(e, [1, bk, bn]), _desc(c, [1, bm, bn])
    tiles = batches * triton.cdiv(M, bm) * triton.cdiv(N, bn)
    grid = (min(sms * per_sm, tiles),)
    add = user is not None
    tma_user = add and pingpong and user.dtype == c.dtype and "direct" not in config[7:]  # mode 5 can run
    mode = (user_mode if user_mode is not None else USER_MODE if tma_user else 2) if add else 0
    if mode == 5 and not tma_user:
        raise ValueError("user mode 5 copies the user tile into a ping-pong consumer's staging tile: it needs a "
                         "ping-pong config that stores through shared memory and user_out in out's dtype")  # fmt: skip
    common = (user if add else c, user_of if add else c, batches, M, N, K)
    if pingpong:  # ("pingpong", "direct"): the tiles stored from the registers, not through shared memory
        u_d = _desc(user, [1, bm, bn]) if mode == 5 else c_d
        capstone_pingpong_kernel[grid](a_d, e_d, c_d, c, u_d, *common, USER_MODE=mode, NUM_BUFFERS=nb, NUM_SMS=grid[0],
                                       DIRECT_STORE=config[7:] == ("direct",), num_warps=num_warps)  # fmt: skip
    else:
        capstone_ws_kernel[grid](a_d, e_d, c_d, *common, USER_MODE=mode, NUM_BUFFERS=nb, NUM_SMS=grid[0],
                                 num_warps=num_warps)  # fmt: skip
    return c


# (device, count) -> [flags tensor, calls so far]: the one launch's flags, reused. The n-th call waits for
# 128 n, so calls must follow each other on one stream: a CUDA graph would replay its first target (reached
# already: no wait, wrong values), and two streams could pass on each other's flags. A user_of entry outside
# 0 .. U - 1 waits on a flag no tile raises: a hang, where two launches read a wrong tile.
_FLAGS: dict = {}


def one_launch(w_u, w_c, e_user, e_cand, user_of, out, user_out, sms, config):
    """The user GEMM and the candidate GEMM in one launch of capstone_one_launch_kernel (a ping-pong
    config); user_out (U, M, N) is written on the way. sms must not exceed the GPU's SMs: every
    program must be resident at once."""
    bm, bn, bk, nb, num_warps = config[:5]
    M, Kc = w_c.shape
    U, Ku, N = e_user.shape
    B = e_cand.shape[0]
    bn = min(bn, max(16, triton.next_power_of_2(N)))
    tiles = (U + B) * triton.cdiv(M, bm) * triton.cdiv(N, bn)
    if out.is_cuda:  # more programs than SMs could leave a waiting one with its user tile's not started
        sms = min(sms, torch.cuda.get_device_properties(out.device).multi_processor_count)
    grid = (min(sms, tiles),)
    key = (out.device, U * triton.cdiv(M, bm) * triton.cdiv(N, bn))
    held = _FLAGS.get(key)
    if held is None or (held[1] + 2) * FLAG_RAISES >= 2**31:
        held = _FLAGS[key] = [torch.zeros(key[1], dtype=torch.int32, device=out.device), 0]
    capstone_one_launch_kernel[grid](
        _desc(w_u, [bm, bk]), _desc(e_user, [1, bk, bn]), _desc(w_c, [bm, bk]), _desc(e_cand, [1, bk, bn]),
        _desc(out, [1, bm, bn]), user_out, user_of, held[0], (held[1] + 1) * FLAG_RAISES, U, B, M, N, Ku, Kc,
        NUM_BUFFERS=nb, NUM_SMS=grid[0], num_warps=num_warps,
    )  # fmt: skip
    held[1] += 1  # counted once launched: a launch refused before it ran leaves the flags where they were
    return out


ONE_LAUNCH = False  # ws_compression's default: the two launches (True: capstone_one_launch_kernel)


def ws_compression(w_u, w_c, e_user, e_cand, user_of, out, sms=None, config=None, user_mode=None, one=None,
                   user_config=None):  # fmt: skip
    """out[b] = W_u @ E_user[user_of[b]] + W_c @ E_cand[b] in two launches: the user GEMM (user_out in
    out's dtype, once per unique user), then the candidate GEMM, each tile's user tile copied by TMA
    and added in its epilogue. w_u (M, Ku) and w_c (M, Kc) with 16-byte rows; e_user (U, Ku, N), e_cand (B, Kc, N),
    out (B, M, N) contiguous; user_of (B,) int64 (int32 works too: the kernel widens it).
    config, user_mode, user_config: the candidate GEMM's configuration and user mode, the user GEMM's
    configuration (each left out: the solution's).
    one=True (or ONE_LAUNCH): both GEMMs in one launch of capstone_one_launch_kernel, with flags
    between them (slower on the H200: the ws_compression_one_launch rows of
    results/experiment_capstone_h200.json); ping-pong configs only."""
    if sms is None:
        sms = torch.cuda.get_device_properties(out.device).multi_processor_count if out.is_cuda else 132
    U, _, N = e_user.shape
    user_out = torch.empty(U, w_u.shape[0], N, dtype=out.dtype, device=out.device)  # (U, M, N)
    config = config or candidate_config(N)
    if (ONE_LAUNCH if one is None else one) and config[6:7] == ("pingpong",):
        return one_launch(w_u, w_c, e_user, e_cand, user_of, out, user_out, sms, config)
    gemm(w_u, e_user, user_out, config=user_config or pick_user_config(U, w_u.shape[0], N, sms), sms=sms)
    return gemm(w_c, e_cand, out, user_out, user_of, config=config, sms=sms, user_mode=user_mode)


# the tries of scripts/experiments_capstone.py (ws_try, ws_user_try rows) and of scripts/gluon_capstone.py's smoke run
# step 4's candidate GEMM as tried at each shape: (BLOCK_M, BLOCK_N, BLOCK_K, NUM_BUFFERS, num_warps,
# programs per SM[, "pingpong"]) and the user mode (this module: 1 the user tile added
# after the main loop, 2 the accumulator starting from it, 3 as 2 with the next tile's loaded early, all
# three by loads from global memory; 5 the user tile copied by TMA into the staging tile during the main
# loop, added in the epilogue). Cooperative: two warpgroups on one tile (8 warps) or one (4 warps,
# 64-row tiles); ping-pong: two warpgroups on alternate tiles, one's epilogue beside the other's main
# loop. user_out is in out's dtype for every try, as in ws_compression. The tiles stored from the
# registers ("direct", 2-3 times slower) are in results/experiment_capstone_2026-12-02_h200.json.
WS_TRIES = [
    ((128, 256, 64, 3, 8, 1), 3),
    ((128, 128, 64, 4, 8, 1), 3),
    ((64, 256, 64, 4, 4, 1), 3),
    ((64, 256, 64, 4, 4, 1, "pingpong"), 1),
    ((64, 256, 64, 4, 4, 1, "pingpong"), 2),
    ((64, 256, 64, 4, 4, 1, "pingpong"), 5),
    ((128, 128, 64, 4, 4, 1, "pingpong"), 2),
    ((128, 128, 64, 4, 4, 1, "pingpong"), 5),
    ((128, 128, 64, 5, 4, 1, "pingpong"), 2),
    ((128, 128, 64, 5, 4, 1, "pingpong"), 5),
    ((64, 128, 64, 6, 4, 1, "pingpong"), 5),
    # W_c's tile resident in shared memory, the ring carrying E only (scripts/ws_stationary.py; short K only)
    ((128, 128, 64, 4, 4, 1, "pingpong", "stationary"), 2),
]
# the user GEMM (mode 0, user_out in out's dtype) as tried at each shape: rows only (ws_user_try); the
# step is the solution's (its pick_user_config)
USER_TRIES = [
    (128, 128, 64, 4, 8, 1),
    (128, 64, 64, 4, 8, 1),
    (64, 128, 64, 4, 4, 1),
    (64, 64, 64, 4, 4, 1),
    (128, 128, 64, 4, 4, 1, "pingpong"),
]
