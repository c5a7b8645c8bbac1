"""Chapter 11 experiment: keys and values in rings of their own, of depths of their own. The experiment that led to
the solution's two rings (solutions/ws_attention.py since 2026-12-05, both rings NUM_BUFFERS deep): before, one
ring's slot held a key tile and its value tile together, freed when both warpgroups had finished p @ v on the
values, so the key tile stayed in shared memory a turn longer than the q k^T that read it, and the producer's
next copy waited for it. Here:

- a key slot is freed as soon as both warpgroups have the scores of its tile (the wait before the softmax);
- a value slot when both have finished p @ v on it;
- the producer copies in the order the consumers use the tiles: K_0, then K_j and V_{j-1} for each j, then
  the last V;
- the rings' depths are set apart: at head dim 128, 3 key slots and 2 value slots fill 224 KB of the 227 KB
  a block may have.

scripts/gluon_attention.py --rings times the depths beside the solution and cuDNN (on an H100, results/
attention_h100_2026-12-05/sixth_run: 3 + 2 slots no faster than 2 + 2); --kernel
scripts/attention_variants/split_rings --simulate runs it in course_lib's Gluon simulator."""

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
_work, _key_tiles, _softmax_step, _desc = (
    _solution._work,
    _solution._key_tiles,
    _solution._softmax_step,
    _solution._desc,
)
tma_load, tma_store, LOG2E = _solution.tma_load, _solution.tma_store, _solution.LOG2E


@gluon.jit
def _copy(desc, row, bh, bufs, ready, empty, count, NUM: gl.constexpr):
    """One tile into the next slot of a ring of NUM (count: the ring's copies so far), once it is free."""
    s = count % NUM
    mbarrier.wait(empty.index(s), ((count // NUM) & 1) ^ 1)
    mbarrier.expect(ready.index(s), desc.block_type.nbytes)
    tma_load(desc, [bh, row, 0], ready.index(s), bufs.index(s))
    return count + 1


@gluon.jit
def _producer(q_desc, k_desc, v_desc, q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
              seq_len, n_items, n_pairs, CAUSAL: gl.constexpr, NUM_K: gl.constexpr, NUM_V: gl.constexpr,
              NUM_SMS: gl.constexpr):  # fmt: skip
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[1]
    kc = 0
    vc = 0
    i = 0
    for item in range(gl.program_id(0), n_items, NUM_SMS):
        bh, pair = _work(item, n_items, n_pairs, NUM_SMS, CAUSAL)
        for role in gl.static_range(2):
            mbarrier.wait(q_empty.index(role), (i & 1) ^ 1)
            mbarrier.expect(q_ready.index(role), q_desc.block_type.nbytes)
            tma_load(q_desc, [bh, (2 * pair + role) * BLOCK_M, 0], q_ready.index(role), q_smem.index(role))
        n_kv = _key_tiles(pair, seq_len, BLOCK_N, CAUSAL)
        kc = _copy(k_desc, 0, bh, k_bufs, k_ready, k_empty, kc, NUM_K)
        for j in range(1, n_kv):  # in the order of use: the scores of tile j, then p @ v of tile j - 1
            kc = _copy(k_desc, j * BLOCK_N, bh, k_bufs, k_ready, k_empty, kc, NUM_K)
            vc = _copy(v_desc, (j - 1) * BLOCK_N, bh, v_bufs, v_ready, v_empty, vc, NUM_V)
        vc = _copy(v_desc, (n_kv - 1) * BLOCK_N, bh, v_bufs, v_ready, v_empty, vc, NUM_V)
        i += 1


@gluon.jit
def _consumer(o_desc, q_smem, k_bufs, v_bufs, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn,
              seq_len, n_items, n_pairs, qk_scale, ROLE: gl.constexpr, CAUSAL: gl.constexpr, NUM_K: gl.constexpr,
              NUM_V: gl.constexpr, NUM_SMS: gl.constexpr):  # fmt: skip
    BLOCK_M: gl.constexpr = q_smem.type.shape[2]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[3]
    BLOCK_N: gl.constexpr = k_bufs.type.shape[2]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])  # fmt: skip
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])  # fmt: skip
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    q_tile = q_smem.index(ROLE).reshape([BLOCK_M, HEAD_DIM])
    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)
    o_tile = o_smem.index(ROLE)
    kc = 0  # key tiles consumed (the producer's count, tile for tile)
    vc = 0  # value tiles consumed
    turns = 0
    i = 0
    for item in range(gl.program_id(0), n_items, NUM_SMS):
        bh, pair = _work(item, n_items, n_pairs, NUM_SMS, CAUSAL)
        q_row = (2 * pair + ROLE) * BLOCK_M
        rows = q_row + gl.arange(0, BLOCK_M, layout=row_layout)
        n_kv = _key_tiles(pair, seq_len, BLOCK_N, CAUSAL)
        m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, layout=row_layout)
        l_i = gl.zeros([BLOCK_M], gl.float32, layout=row_layout)
        acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=o_layout)
        mbarrier.wait(q_ready.index(ROLE), i & 1)
        ks = kc % NUM_K
        mbarrier.wait(k_ready.index(ks), (kc // NUM_K) & 1)
        mbarrier.wait(turn.index(ROLE), (turns & 1) ^ (1 - ROLE))
        scores = warpgroup_mma(q_tile, k_bufs.index(ks).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0)), s_zero,
                               use_acc=False, is_async=True)  # fmt: skip
        mbarrier.arrive(turn.index(1 - ROLE), count=1)
        turns += 1
        scores = warpgroup_mma_wait(num_outstanding=0, deps=(scores,))
        mbarrier.arrive(k_empty.index(ks), count=1)  # the key tile is read: its slot may take the next
        kc += 1
        p, m_i, l_i, alpha = _softmax_step(scores, m_i, l_i, 0, n_kv == 1, rows, seq_len, qk_scale, q_tile.dtype,
                                           CAUSAL, BLOCK_N, s_layout, o_layout)  # fmt: skip
        for j in range(1, n_kv):
            ks = kc % NUM_K
            vs = vc % NUM_V
            mbarrier.wait(k_ready.index(ks), (kc // NUM_K) & 1)
            mbarrier.wait(v_ready.index(vs), (vc // NUM_V) & 1)  # tile j - 1's values
            mbarrier.wait(turn.index(ROLE), (turns & 1) ^ (1 - ROLE))
            scores = warpgroup_mma(q_tile, k_bufs.index(ks).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0)), s_zero,
                                   use_acc=False, is_async=True)  # fmt: skip
            acc = warpgroup_mma(p, v_bufs.index(vs).reshape([BLOCK_N, HEAD_DIM]), acc, is_async=True)
            mbarrier.arrive(turn.index(1 - ROLE), count=1)
            turns += 1
            scores = warpgroup_mma_wait(num_outstanding=1, deps=(scores,))
            mbarrier.arrive(k_empty.index(ks), count=1)  # freed a turn before its values' slot
            kc += 1
            p_next, m_i, l_i, alpha = _softmax_step(scores, m_i, l_i, j, j == n_kv - 1, rows, seq_len, qk_scale,
                                                    q_tile.dtype, CAUSAL, BLOCK_N, s_layout, o_layout)  # fmt: skip
            acc, p = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p))
            mbarrier.arrive(v_empty.index(vs), count=1)
            vc += 1
            acc = acc * gl.expand_dims(alpha, 1)
            p = p_next
        mbarrier.arrive(q_empty.index(ROLE), count=1)
        vs = vc % NUM_V
        mbarrier.wait(v_ready.index(vs), (vc // NUM_V) & 1)
        mbarrier.wait(turn.index(ROLE), (turns & 1) ^ (1 - ROLE))
        acc = warpgroup_mma(p, v_bufs.index(vs).reshape([BLOCK_N, HEAD_DIM]), acc, is_async=True)
        mbarrier.arrive(turn.index(1 - ROLE), count=1)
        turns += 1
        acc, p = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p))
        mbarrier.arrive(v_empty.index(vs), count=1)
        vc += 1
        out = acc / gl.expand_dims(gl.convert_layout(l_i, gl.SliceLayout(1, o_layout)), 1)
        tma.store_wait(0)
        o_tile.reshape([BLOCK_M, HEAD_DIM]).store(out.to(o_desc.dtype))
        fence_async_shared()
        tma_store(o_desc, [bh, q_row, 0], o_tile)
        i += 1
    tma.store_wait(0)


@gluon.jit
def _barriers(n: gl.constexpr, count: gl.constexpr):
    bars = gl.allocate_shared_memory(gl.int64, [n, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(n):
        mbarrier.init(bars.index(s), count=count)
    return bars


@gluon.jit
def _invalidate(bars, n: gl.constexpr):
    for s in gl.static_range(n):
        mbarrier.invalidate(bars.index(s))


@gluon.jit
def ws_attention_kernel(q_desc, k_desc, v_desc, o_desc, seq_len, n_items, n_pairs, qk_scale,
                        CAUSAL: gl.constexpr, NUM_K: gl.constexpr, NUM_V: gl.constexpr, NUM_SMS: gl.constexpr,
                        num_warps: gl.constexpr):  # fmt: skip
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [2] + q_desc.block_type.shape, q_desc.layout)
    k_bufs = gl.allocate_shared_memory(k_desc.dtype, [NUM_K] + k_desc.block_type.shape, k_desc.layout)
    v_bufs = gl.allocate_shared_memory(v_desc.dtype, [NUM_V] + v_desc.block_type.shape, v_desc.layout)
    o_smem = gl.allocate_shared_memory(o_desc.dtype, [2] + o_desc.block_type.shape, o_desc.layout)
    q_ready = _barriers(2, 1)
    q_empty = _barriers(2, 1)
    turn = _barriers(2, 1)
    k_ready = _barriers(NUM_K, 1)
    k_empty = _barriers(NUM_K, 2)  # both warpgroups read every key tile
    v_ready = _barriers(NUM_V, 1)
    v_empty = _barriers(NUM_V, 2)
    ROLE0: gl.constexpr = 0
    ROLE1: gl.constexpr = 1
    gl.warp_specialize(
        [
            (_consumer, (o_desc, q_smem, k_bufs, v_bufs, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
                         turn, seq_len, n_items, n_pairs, qk_scale, ROLE0, CAUSAL, NUM_K, NUM_V, NUM_SMS)),
            (_consumer, (o_desc, q_smem, k_bufs, v_bufs, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
                         turn, seq_len, n_items, n_pairs, qk_scale, ROLE1, CAUSAL, NUM_K, NUM_V, NUM_SMS)),
            (_producer, (q_desc, k_desc, v_desc, q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, k_empty, v_ready,
                         v_empty, seq_len, n_items, n_pairs, CAUSAL, NUM_K, NUM_V, NUM_SMS)),
        ],
        [4, 1],
        [208, 40],
    )  # fmt: skip
    _invalidate(q_ready, 2)
    _invalidate(q_empty, 2)
    _invalidate(turn, 2)
    _invalidate(k_ready, NUM_K)
    _invalidate(k_empty, NUM_K)
    _invalidate(v_ready, NUM_V)
    _invalidate(v_empty, NUM_V)


BLOCK_M = 64
RINGS = {64: (4, 4), 128: (3, 2)}  # head dim -> (key slots, value slots)


def ws_attention(q, k, v, out, causal, sm_scale, sms=None, rings=None):
    """The solution's launcher, with the rings' depths: ``rings`` = (key slots, value slots), by head dim
    when None."""
    B, H, S, D = q.shape
    num_k, num_v = rings or RINGS[D]
    block_n = 2 * BLOCK_M
    views = [t.view(B * H, S, D) for t in (q, k, v, out)]
    q_desc, o_desc = _desc(views[0], [1, BLOCK_M, D]), _desc(views[3], [1, BLOCK_M, D])
    k_desc, v_desc = _desc(views[1], [1, block_n, D]), _desc(views[2], [1, block_n, D])
    n_pairs = triton.cdiv(triton.cdiv(S, BLOCK_M), 2)
    n_items = B * H * n_pairs
    if sms is None:
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 132
    grid = (min(sms, n_items),)
    ws_attention_kernel[grid](q_desc, k_desc, v_desc, o_desc, S, n_items, n_pairs, sm_scale * LOG2E,
                              CAUSAL=bool(causal), NUM_K=num_k, NUM_V=num_v, NUM_SMS=grid[0], num_warps=4)  # fmt: skip
    return out
