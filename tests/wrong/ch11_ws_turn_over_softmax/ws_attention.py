"""Wrong on purpose (values right): the turn is handed over only after the softmax, so the other warpgroup's
GEMMs wait through it: the two warpgroups' softmaxes and GEMMs run one after the other, not side by side.
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

tma_load = tma.async_load if hasattr(tma, "async_load") else tma.async_copy_global_to_shared
tma_store = tma.async_store if hasattr(tma, "async_store") else tma.async_copy_shared_to_global
GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}
LOG2E = 1.4426950408889634


@gluon.jit
def _work(item, n_items, n_groups, NUM_SMS: gl.constexpr, CAUSAL: gl.constexpr):
    """Work item -> (batch x head, group): group g is query tiles g * C to g * C + C - 1 for C consumers. The groups
    of a head are taken last first: with a causal mask the last group walks the most key tiles, and the
    longest work first leaves the short items to even out the programs' ends. With a causal mask the items are
    also dealt in rounds of NUM_SMS, one a program, every other whole round backwards (a snake): the program
    that drew a round's longest walk draws the next round's shortest. On an H100 the causal kernel went from
    462-475 to 526-539 TFLOP/s with it (results/attention_h100_2026-12-05/third_run, fourth_run); without a
    mask every walk is as long, and the plain order measured faster there."""
    if CAUSAL:
        base = item - item % NUM_SMS
        back = ((item // NUM_SMS) % 2 == 1) & (base + NUM_SMS <= n_items)
        item = gl.where(back, base + NUM_SMS - 1 - item % NUM_SMS, item)
    return item // n_groups, n_groups - 1 - item % n_groups


@gluon.jit
def _key_tiles(group, seq_len, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    """Key tiles a group walks: to its last query when causal (g + 1 tiles, as tall as its two query tiles),
    else all."""
    if CAUSAL:
        return gl.minimum(group + 1, gl.cdiv(seq_len, BLOCK_N))
    else:
        return gl.cdiv(seq_len, BLOCK_N)


@gluon.jit
def _load_tile(desc, bh, row, bufs, ready, empty, t, NUM_BUFFERS: gl.constexpr):
    """A ring's tile number t (the ring's count of tiles so far) into slot t % NUM_BUFFERS, once every
    consumer has freed that slot's previous tile: round t // NUM_BUFFERS of the slot's barriers."""
    s = t % NUM_BUFFERS
    mbarrier.wait(empty.index(s), ((t // NUM_BUFFERS) & 1) ^ 1)
    mbarrier.expect(ready.index(s), desc.block_type.nbytes)
    tma_load(desc, [bh, row, 0], ready.index(s), bufs.index(s))


@gluon.jit
def _producer(q_desc, k_desc, v_desc, q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
              seq_len, n_items, n_groups, CAUSAL: gl.constexpr, NUM_BUFFERS: gl.constexpr,
              NUM_SMS: gl.constexpr):  # fmt: skip
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[1]
    CONSUMERS: gl.constexpr = q_smem.type.shape[0]
    count = 0  # key/value tiles of the items before this one: tile t goes in slot t % NUM_BUFFERS of each ring
    i = 0  # work items of this program so far
    for item in range(gl.program_id(0), n_items, NUM_SMS):
        bh, group = _work(item, n_items, n_groups, NUM_SMS, CAUSAL)
        for role in gl.static_range(CONSUMERS):  # each warpgroup's query tile, once it has finished with the last
            mbarrier.wait(q_empty.index(role), (i & 1) ^ 1)
            mbarrier.expect(q_ready.index(role), q_desc.block_type.nbytes)
            tma_load(q_desc, [bh, (CONSUMERS * group + role) * BLOCK_M, 0], q_ready.index(role), q_smem.index(role))
        n_kv = _key_tiles(group, seq_len, BLOCK_N, CAUSAL)
        for j in range(n_kv):  # in the order of use: tile j's keys (its scores), then tile j - 1's values (p @ v)
            _load_tile(k_desc, bh, j * BLOCK_N, k_bufs, k_ready, k_empty, count + j, NUM_BUFFERS)
            if j > 0:
                _load_tile(v_desc, bh, (j - 1) * BLOCK_N, v_bufs, v_ready, v_empty, count + j - 1, NUM_BUFFERS)
        _load_tile(v_desc, bh, (n_kv - 1) * BLOCK_N, v_bufs, v_ready, v_empty, count + n_kv - 1, NUM_BUFFERS)
        count += n_kv
        i += 1


@gluon.jit
def _softmax_step(scores, m_i, l_i, j, masked, rows, seq_len, qk_scale, dtype: gl.constexpr, CAUSAL: gl.constexpr,
                  BLOCK_N: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr):  # fmt: skip
    """The online softmax of key tile j's scores: the masks, the new row max, the probabilities p (in the
    registers, as wgmma's A operand), the running sum, and alpha, the factor that rescales the output to
    the new max (in the output's row layout; the caller applies it once the output is out of its wgmma).
    ``masked``: this tile needs the masks (the last tile of a walk: the one reaching past seq_len, or the
    diagonal's); the others keep every key and skip the compare and select, which cost as much as the
    exponential in a softmax that keeps pace with the tensor cores."""
    if masked:
        cols = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        keep = gl.expand_dims(cols < seq_len, 0)
        if CAUSAL:
            keep = keep & (gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1))
        scores = gl.where(keep, scores, float("-inf"))
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    m_new = gl.maximum(m_i, gl.max(scores, axis=1) * qk_scale)
    probs = gl.exp2(scores * qk_scale - gl.expand_dims(m_new, 1))
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(probs, axis=1)
    return (
        gl.convert_layout(probs.to(dtype), p_layout),
        m_new,
        l_i,
        gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)),
    )


@gluon.jit
def _consumer(o_desc, q_smem, k_bufs, v_bufs, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn,
              seq_len, n_items, n_groups, qk_scale, ROLE: gl.constexpr, CAUSAL: gl.constexpr,
              NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr):  # fmt: skip
    BLOCK_M: gl.constexpr = q_smem.type.shape[2]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[3]
    BLOCK_N: gl.constexpr = k_bufs.type.shape[2]
    CONSUMERS: gl.constexpr = q_smem.type.shape[0]
    NEXT: gl.constexpr = (ROLE + 1) % CONSUMERS  # the warpgroup whose turn follows this one's
    FIRST: gl.constexpr = 1 if ROLE == 0 else 0  # 1: this warpgroup's first turn is free (role 0's)
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])  # fmt: skip
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])  # fmt: skip
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    q_tile = q_smem.index(ROLE).reshape([BLOCK_M, HEAD_DIM])
    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)  # the scores' wgmma starts from nothing
    o_tile = o_smem.index(ROLE)
    count = 0  # key tiles consumed so far (the producer's count, tile for tile; tile t's values too)
    turns = 0  # turns this warpgroup has taken
    i = 0
    for item in range(gl.program_id(0), n_items, NUM_SMS):
        bh, group = _work(item, n_items, n_groups, NUM_SMS, CAUSAL)
        q_row = (CONSUMERS * group + ROLE) * BLOCK_M
        rows = q_row + gl.arange(0, BLOCK_M, layout=row_layout)
        n_kv = _key_tiles(group, seq_len, BLOCK_N, CAUSAL)  # only the last needs a mask (_softmax_step)
        m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, layout=row_layout)
        l_i = gl.zeros([BLOCK_M], gl.float32, layout=row_layout)
        acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=o_layout)
        mbarrier.wait(q_ready.index(ROLE), i & 1)
        # key tile 0: its scores alone in the turn (no p @ v before it)
        s = count % NUM_BUFFERS
        mbarrier.wait(k_ready.index(s), (count // NUM_BUFFERS) & 1)
        mbarrier.wait(turn.index(ROLE), (turns & 1) ^ FIRST)  # role 0's first turn is free
        k_t = k_bufs.index(s).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0))
        scores = warpgroup_mma(q_tile, k_t, s_zero, use_acc=False, is_async=True)
        mbarrier.arrive(turn.index(NEXT), count=1)
        turns += 1
        scores = warpgroup_mma_wait(num_outstanding=0, deps=(scores,))
        mbarrier.arrive(k_empty.index(s), count=1)  # this warpgroup has read the keys of slot s
        # acc is still zero: alpha has nothing to rescale
        p, m_i, l_i, alpha = _softmax_step(scores, m_i, l_i, 0, n_kv == 1, rows, seq_len, qk_scale, q_tile.dtype,
                                           CAUSAL, BLOCK_N, s_layout, o_layout)  # fmt: skip
        count += 1
        for j in range(1, n_kv):
            s = count % NUM_BUFFERS  # tile j's keys
            prev = (count - 1) % NUM_BUFFERS  # tile j - 1's values
            mbarrier.wait(k_ready.index(s), (count // NUM_BUFFERS) & 1)
            mbarrier.wait(v_ready.index(prev), ((count - 1) // NUM_BUFFERS) & 1)
            mbarrier.wait(turn.index(ROLE), (turns & 1) ^ FIRST)
            k_t = k_bufs.index(s).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0))
            scores = warpgroup_mma(q_tile, k_t, s_zero, use_acc=False, is_async=True)
            acc = warpgroup_mma(p, v_bufs.index(prev).reshape([BLOCK_N, HEAD_DIM]), acc, is_async=True)
            scores = warpgroup_mma_wait(num_outstanding=1, deps=(scores,))  # p @ v may still run
            mbarrier.arrive(k_empty.index(s), count=1)  # q k^T has read key slot s: a turn before its values
            # the softmax of tile j, while this warpgroup's p @ v and the other warpgroups' GEMMs run
            p_next, m_i, l_i, alpha = _softmax_step(scores, m_i, l_i, j, j == n_kv - 1, rows, seq_len, qk_scale,
                                                    q_tile.dtype, CAUSAL, BLOCK_N, s_layout, o_layout)  # fmt: skip
            mbarrier.arrive(turn.index(NEXT), count=1)
            turns += 1
            acc, p = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p))
            mbarrier.arrive(v_empty.index(prev), count=1)  # p @ v has read value slot prev
            acc = acc * gl.expand_dims(alpha, 1)
            p = p_next
            count += 1
        mbarrier.arrive(q_empty.index(ROLE), count=1)  # every q k^T of this item has completed
        # the last tile's p @ v, in one more turn
        last = (count - 1) % NUM_BUFFERS
        mbarrier.wait(v_ready.index(last), ((count - 1) // NUM_BUFFERS) & 1)
        mbarrier.wait(turn.index(ROLE), (turns & 1) ^ FIRST)
        acc = warpgroup_mma(p, v_bufs.index(last).reshape([BLOCK_N, HEAD_DIM]), acc, is_async=True)
        mbarrier.arrive(turn.index(NEXT), count=1)
        turns += 1
        acc, p = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p))
        mbarrier.arrive(v_empty.index(last), count=1)
        out = acc / gl.expand_dims(gl.convert_layout(l_i, gl.SliceLayout(1, o_layout)), 1)
        tma.store_wait(0)  # the last item's store has read o_tile
        o_tile.reshape([BLOCK_M, HEAD_DIM]).store(out.to(o_desc.dtype))
        fence_async_shared()
        tma_store(o_desc, [bh, q_row, 0], o_tile)
        i += 1
    tma.store_wait(0)


@gluon.jit
def ws_attention_kernel(q_desc, k_desc, v_desc, o_desc, seq_len, n_items, n_groups, qk_scale,
                        CAUSAL: gl.constexpr, CONSUMERS: gl.constexpr, NUM_BUFFERS: gl.constexpr,
                        NUM_SMS: gl.constexpr, num_warps: gl.constexpr):  # fmt: skip
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [CONSUMERS] + q_desc.block_type.shape, q_desc.layout)
    k_bufs = gl.allocate_shared_memory(k_desc.dtype, [NUM_BUFFERS] + k_desc.block_type.shape, k_desc.layout)
    v_bufs = gl.allocate_shared_memory(v_desc.dtype, [NUM_BUFFERS] + v_desc.block_type.shape, v_desc.layout)
    o_smem = gl.allocate_shared_memory(o_desc.dtype, [CONSUMERS] + o_desc.block_type.shape, o_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    for r in gl.static_range(CONSUMERS):
        mbarrier.init(q_ready.index(r), count=1)
        mbarrier.init(q_empty.index(r), count=1)
        mbarrier.init(turn.index(r), count=1)
    for s in gl.static_range(NUM_BUFFERS):
        mbarrier.init(k_ready.index(s), count=1)
        mbarrier.init(k_empty.index(s), count=CONSUMERS)  # every consumer reads every slot
        mbarrier.init(v_ready.index(s), count=1)
        mbarrier.init(v_empty.index(s), count=CONSUMERS)
    ROLE0: gl.constexpr = 0
    ROLE1: gl.constexpr = 1
    ROLE2: gl.constexpr = 2
    if CONSUMERS == 3:  # head dim 64: a third consumer warpgroup (a worker of 4 warps, as the second)
        gl.warp_specialize(
            [
                (_consumer, (o_desc, q_smem, k_bufs, v_bufs, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready,
                             v_empty, turn, seq_len, n_items, n_groups, qk_scale, ROLE0, CAUSAL, NUM_BUFFERS, NUM_SMS)),
                (_consumer, (o_desc, q_smem, k_bufs, v_bufs, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready,
                             v_empty, turn, seq_len, n_items, n_groups, qk_scale, ROLE1, CAUSAL, NUM_BUFFERS, NUM_SMS)),
                (_consumer, (o_desc, q_smem, k_bufs, v_bufs, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready,
                             v_empty, turn, seq_len, n_items, n_groups, qk_scale, ROLE2, CAUSAL, NUM_BUFFERS, NUM_SMS)),
                (_producer, (q_desc, k_desc, v_desc, q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, k_empty,
                             v_ready, v_empty, seq_len, n_items, n_groups, CAUSAL, NUM_BUFFERS, NUM_SMS)),
            ],
            [4, 4, 1],
            [160, 160, 24],  # 13 warps: 160 is what ptxas fits at head dim 64 without a spill (152 and 168 spill)
        )  # fmt: skip
    else:
        gl.warp_specialize(
            [
                (_consumer, (o_desc, q_smem, k_bufs, v_bufs, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready,
                             v_empty, turn, seq_len, n_items, n_groups, qk_scale, ROLE0, CAUSAL, NUM_BUFFERS, NUM_SMS)),
                (_consumer, (o_desc, q_smem, k_bufs, v_bufs, o_smem, q_ready, q_empty, k_ready, k_empty, v_ready,
                             v_empty, turn, seq_len, n_items, n_groups, qk_scale, ROLE1, CAUSAL, NUM_BUFFERS, NUM_SMS)),
                (_producer, (q_desc, k_desc, v_desc, q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, k_empty,
                             v_ready, v_empty, seq_len, n_items, n_groups, CAUSAL, NUM_BUFFERS, NUM_SMS)),
            ],
            [4, 1],
            [208, 40],
        )  # fmt: skip
    for r in gl.static_range(CONSUMERS):
        mbarrier.invalidate(q_ready.index(r))
        mbarrier.invalidate(q_empty.index(r))
        mbarrier.invalidate(turn.index(r))
    for s in gl.static_range(NUM_BUFFERS):
        mbarrier.invalidate(k_ready.index(s))
        mbarrier.invalidate(k_empty.index(s))
        mbarrier.invalidate(v_ready.index(s))
        mbarrier.invalidate(v_empty.index(s))


def _desc(x, block):
    layout = gl.NVMMASharedLayout.get_default_for(block, GL_DTYPES[x.dtype])
    return TensorDescriptor.from_tensor(x, block, layout)


BLOCK_M, BLOCK_N, NUM_BUFFERS = 64, 128, 2  # 2 key slots and 2 value slots, 32 KB each at head dim 128


def consumers(head_dim: int, causal: bool) -> int:
    """Consumer warpgroups: three at head dim 64 without a mask (its GEMMs leave room for a third), else two."""
    return 3 if head_dim == 64 and not causal else 2


def ws_attention(q, k, v, out, causal, sm_scale, sms=None):
    """out = softmax(q k^T * sm_scale (+ causal mask)) v for contiguous (batch, heads, seq_len, head_dim)
    tensors, head_dim 64 or 128, bf16 or fp16. ``sms``: the persistent grid's programs (default: the GPU's
    SMs; 132, an H200's, on the CPU)."""
    B, H, S, D = q.shape
    n_consumers = consumers(D, causal)
    views = [t.view(B * H, S, D) for t in (q, k, v, out)]  # 3-D: a tile never reads the next head's rows
    q_desc, o_desc = _desc(views[0], [1, BLOCK_M, D]), _desc(views[3], [1, BLOCK_M, D])
    k_desc, v_desc = _desc(views[1], [1, BLOCK_N, D]), _desc(views[2], [1, BLOCK_N, D])
    n_groups = triton.cdiv(triton.cdiv(S, BLOCK_M), n_consumers)
    n_items = B * H * n_groups
    if sms is None:
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 132
    grid = (min(sms, n_items),)
    ws_attention_kernel[grid](q_desc, k_desc, v_desc, o_desc, S, n_items, n_groups, sm_scale * LOG2E,
                              CAUSAL=bool(causal), CONSUMERS=n_consumers, NUM_BUFFERS=NUM_BUFFERS, NUM_SMS=grid[0],
                              num_warps=4)  # fmt: skip
    return out
