"""Chapter 11 experiment, for head dim 64: three consumer warpgroups instead of two, as FlashAttention-3 runs
head dim 64 (a query tile of 192 rows, 64 a warpgroup). At head dim 64 a key tile's GEMMs are half as long as
at 128 while its softmax is as long, so two warpgroups taking turns leave the tensor cores idle part of each
turn; a third warpgroup's GEMMs can fill it. The turn goes round the three: warpgroup r waits on turn[r] and
hands over on turn[(r + 1) % 3]. Non-causal only (the timed head-dim-64 shape is non-causal; with a causal
mask the three walks of an item differ in length, and the rotation would need the shorter walks to pass their
turns on). Otherwise the solution's kernel: its helpers, its two rings, its overlap inside a warpgroup.

scripts/gluon_attention.py --kernel scripts/attention_variants/three_consumers --simulate runs it in course_lib's
Gluon simulator (the shapes it is not written for are skipped); --d64 times it beside the solution and cuDNN.
Not yet run on a GPU."""

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

_solution = sources.load_module("ws_attention")  # the solution's helpers, the same code in both kernels
_softmax_step, _load_tile, _desc = _solution._softmax_step, _solution._load_tile, _solution._desc
tma_load, tma_store, LOG2E = _solution.tma_load, _solution.tma_store, _solution.LOG2E
CONSUMERS = 3


@gluon.jit
def _producer(q_desc, k_desc, v_desc, q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
              seq_len, n_items, n_groups, NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr):  # fmt: skip
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[1]
    N_CONSUMERS: gl.constexpr = q_smem.type.shape[0]
    n_kv = gl.cdiv(seq_len, BLOCK_N)
    count = 0
    i = 0
    for item in range(gl.program_id(0), n_items, NUM_SMS):
        bh = item // n_groups
        group = item % n_groups
        for role in gl.static_range(N_CONSUMERS):
            mbarrier.wait(q_empty.index(role), (i & 1) ^ 1)
            mbarrier.expect(q_ready.index(role), q_desc.block_type.nbytes)
            tma_load(q_desc, [bh, (N_CONSUMERS * group + role) * BLOCK_M, 0], q_ready.index(role),
                     q_smem.index(role))  # fmt: skip
        for j in range(n_kv):
            _load_tile(k_desc, bh, j * BLOCK_N, k_bufs, k_ready, k_empty, count + j, NUM_BUFFERS)
            if j > 0:
                _load_tile(v_desc, bh, (j - 1) * BLOCK_N, v_bufs, v_ready, v_empty, count + j - 1, NUM_BUFFERS)
        _load_tile(v_desc, bh, (n_kv - 1) * BLOCK_N, v_bufs, v_ready, v_empty, count + n_kv - 1, NUM_BUFFERS)
        count += n_kv
        i += 1


@gluon.jit
def _consumer(o_desc, q_smem, k_bufs, v_bufs, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn,
              seq_len, n_items, n_groups, qk_scale, ROLE: gl.constexpr, NUM_BUFFERS: gl.constexpr,
              NUM_SMS: gl.constexpr):  # fmt: skip
    BLOCK_M: gl.constexpr = q_smem.type.shape[2]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[3]
    BLOCK_N: gl.constexpr = k_bufs.type.shape[2]
    N_CONSUMERS: gl.constexpr = q_smem.type.shape[0]
    NEXT: gl.constexpr = (ROLE + 1) % N_CONSUMERS
    FIRST: gl.constexpr = 1 if ROLE == 0 else 0  # warpgroup 0's first turn is free
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])  # fmt: skip
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])  # fmt: skip
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    q_tile = q_smem.index(ROLE).reshape([BLOCK_M, HEAD_DIM])
    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)
    o_tile = o_smem.index(ROLE)
    n_kv = gl.cdiv(seq_len, BLOCK_N)
    count = 0
    turns = 0
    i = 0
    for item in range(gl.program_id(0), n_items, NUM_SMS):
        bh = item // n_groups
        q_row = (N_CONSUMERS * (item % n_groups) + ROLE) * BLOCK_M
        rows = q_row + gl.arange(0, BLOCK_M, layout=row_layout)
        m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, layout=row_layout)
        l_i = gl.zeros([BLOCK_M], gl.float32, layout=row_layout)
        acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=o_layout)
        mbarrier.wait(q_ready.index(ROLE), i & 1)
        s = count % NUM_BUFFERS
        mbarrier.wait(k_ready.index(s), (count // NUM_BUFFERS) & 1)
        mbarrier.wait(turn.index(ROLE), (turns & 1) ^ FIRST)
        k_t = k_bufs.index(s).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0))
        scores = warpgroup_mma(q_tile, k_t, s_zero, use_acc=False, is_async=True)
        mbarrier.arrive(turn.index(NEXT), count=1)
        turns += 1
        scores = warpgroup_mma_wait(num_outstanding=0, deps=(scores,))
        mbarrier.arrive(k_empty.index(s), count=1)
        p, m_i, l_i, alpha = _softmax_step(scores, m_i, l_i, 0, n_kv == 1, rows, seq_len, qk_scale, q_tile.dtype,
                                           False, BLOCK_N, s_layout, o_layout)  # fmt: skip
        count += 1
        for j in range(1, n_kv):
            s = count % NUM_BUFFERS
            prev = (count - 1) % NUM_BUFFERS
            mbarrier.wait(k_ready.index(s), (count // NUM_BUFFERS) & 1)
            mbarrier.wait(v_ready.index(prev), ((count - 1) // NUM_BUFFERS) & 1)
            mbarrier.wait(turn.index(ROLE), (turns & 1) ^ FIRST)
            k_t = k_bufs.index(s).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0))
            scores = warpgroup_mma(q_tile, k_t, s_zero, use_acc=False, is_async=True)
            acc = warpgroup_mma(p, v_bufs.index(prev).reshape([BLOCK_N, HEAD_DIM]), acc, is_async=True)
            mbarrier.arrive(turn.index(NEXT), count=1)
            turns += 1
            scores = warpgroup_mma_wait(num_outstanding=1, deps=(scores,))
            mbarrier.arrive(k_empty.index(s), count=1)
            p_next, m_i, l_i, alpha = _softmax_step(scores, m_i, l_i, j, j == n_kv - 1, rows, seq_len, qk_scale,
                                                    q_tile.dtype, False, BLOCK_N, s_layout, o_layout)  # fmt: skip
            acc, p = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p))
            mbarrier.arrive(v_empty.index(prev), count=1)
            acc = acc * gl.expand_dims(alpha, 1)
            p = p_next
            count += 1
        mbarrier.arrive(q_empty.index(ROLE), count=1)
        last = (count - 1) % NUM_BUFFERS
        mbarrier.wait(v_ready.index(last), ((count - 1) // NUM_BUFFERS) & 1)
        mbarrier.wait(turn.index(ROLE), (turns & 1) ^ FIRST)
        acc = warpgroup_mma(p, v_bufs.index(last).reshape([BLOCK_N, HEAD_DIM]), acc, is_async=True)
        mbarrier.arrive(turn.index(NEXT), count=1)
        turns += 1
        acc, p = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p))
        mbarrier.arrive(v_empty.index(last), count=1)
        out = acc / gl.expand_dims(gl.convert_layout(l_i, gl.SliceLayout(1, o_layout)), 1)
        tma.store_wait(0)
        o_tile.reshape([BLOCK_M, HEAD_DIM]).store(out.to(o_desc.dtype))
        fence_async_shared()
        tma_store(o_desc, [bh, q_row, 0], o_tile)
        i += 1
    tma.store_wait(0)


@gluon.jit
def ws_attention_kernel(q_desc, k_desc, v_desc, o_desc, seq_len, n_items, n_groups, qk_scale,
                        NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                        num_warps: gl.constexpr):  # fmt: skip
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [3] + q_desc.block_type.shape, q_desc.layout)
    k_bufs = gl.allocate_shared_memory(k_desc.dtype, [NUM_BUFFERS] + k_desc.block_type.shape, k_desc.layout)
    v_bufs = gl.allocate_shared_memory(v_desc.dtype, [NUM_BUFFERS] + v_desc.block_type.shape, v_desc.layout)
    o_smem = gl.allocate_shared_memory(o_desc.dtype, [3] + o_desc.block_type.shape, o_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [3, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [3, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [3, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    for r in gl.static_range(3):
        mbarrier.init(q_ready.index(r), count=1)
        mbarrier.init(q_empty.index(r), count=1)
        mbarrier.init(turn.index(r), count=1)
    for s in gl.static_range(NUM_BUFFERS):
        mbarrier.init(k_ready.index(s), count=1)
        mbarrier.init(k_empty.index(s), count=3)  # all three warpgroups read every slot
        mbarrier.init(v_ready.index(s), count=1)
        mbarrier.init(v_empty.index(s), count=3)
    ROLE0: gl.constexpr = 0
    ROLE1: gl.constexpr = 1
    ROLE2: gl.constexpr = 2
    gl.warp_specialize(
        [
            (_consumer, (o_desc, q_smem, k_bufs, v_bufs, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
                         turn, seq_len, n_items, n_groups, qk_scale, ROLE0, NUM_BUFFERS, NUM_SMS)),
            (_consumer, (o_desc, q_smem, k_bufs, v_bufs, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
                         turn, seq_len, n_items, n_groups, qk_scale, ROLE1, NUM_BUFFERS, NUM_SMS)),
            (_consumer, (o_desc, q_smem, k_bufs, v_bufs, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
                         turn, seq_len, n_items, n_groups, qk_scale, ROLE2, NUM_BUFFERS, NUM_SMS)),
            (_producer, (q_desc, k_desc, v_desc, q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, k_empty, v_ready,
                         v_empty, seq_len, n_items, n_groups, NUM_BUFFERS, NUM_SMS)),
        ],
        [4, 4, 1],
        [CONSUMER_REGS, CONSUMER_REGS, 24],
    )  # fmt: skip
    for r in gl.static_range(3):
        mbarrier.invalidate(q_ready.index(r))
        mbarrier.invalidate(q_empty.index(r))
        mbarrier.invalidate(turn.index(r))
    for s in gl.static_range(NUM_BUFFERS):
        mbarrier.invalidate(k_ready.index(s))
        mbarrier.invalidate(k_empty.index(s))
        mbarrier.invalidate(v_ready.index(s))
        mbarrier.invalidate(v_empty.index(s))


BLOCK_M, BLOCK_N, NUM_BUFFERS = 64, 128, 2
# the consumers' registers: with 3 x 4 warps of consumers and a producer warp, 160 is what ptxas fits without a
# spill at head dim 64 (152 and 168 spill 16-32 bytes); at head dim 128 every choice spills (hundreds of bytes)
CONSUMER_REGS = 160


def ws_attention(q, k, v, out, causal, sm_scale, sms=None, consumer_regs=None):
    """The solution's launcher for three consumer warpgroups; non-causal attention at head dim 64 only
    (ValueError otherwise)."""
    B, H, S, D = q.shape
    if causal or D != 64:
        raise ValueError("three_consumers is written for non-causal attention at head dim 64 only")
    views = [t.view(B * H, S, D) for t in (q, k, v, out)]
    q_desc, o_desc = _desc(views[0], [1, BLOCK_M, D]), _desc(views[3], [1, BLOCK_M, D])
    k_desc, v_desc = _desc(views[1], [1, BLOCK_N, D]), _desc(views[2], [1, BLOCK_N, D])
    n_groups = triton.cdiv(triton.cdiv(S, BLOCK_M), CONSUMERS)
    n_items = B * H * n_groups
    if sms is None:
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 132
    grid = (min(sms, n_items),)
    ws_attention_kernel[grid](q_desc, k_desc, v_desc, o_desc, S, n_items, n_groups, sm_scale * LOG2E,
                              NUM_BUFFERS=NUM_BUFFERS, NUM_SMS=grid[0], CONSUMER_REGS=consumer_regs or CONSUMER_REGS,
                              num_warps=4)  # fmt: skip
    return out
