"""Wrong on purpose: the Hopper release bug. The consumer frees slot s (arrives on empty[s]) right
after it starts the asynchronous wgmma that reads it, not after that wgmma has completed. The producer
may then copy the next tile into a_bufs[s] and b_bufs[s] while the wgmma still reads them.

On a GPU this is a race: the wgmma is usually done before the copy lands, so most elements come out
right. On the H200 (2026-12-05, results/grader_h200/speed_2026-12-05/late) it failed the 'ragged edges'
case with 758 of 1,000,000 elements wrong; a smaller case can pass. CPU mode runs the kernel in
course_lib's Gluon simulator, where wgmmas finish late in some of the seeded orders, and names the
overwrite: the slot, the partition and the wgmma still reading it."""

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

# Triton 3.8 renamed the TMA copies to async_load / async_store (3.6 and 3.7 call them
# async_copy_global_to_shared / async_copy_shared_to_global)
tma_load = tma.async_load if hasattr(tma, "async_load") else tma.async_copy_global_to_shared
tma_store = tma.async_store if hasattr(tma, "async_store") else tma.async_copy_shared_to_global

# 128 x 256 x 64 tiles, 3 slots of 48 KB (a 16 KB + b 32 KB) and a 64 KB output tile: 208 KB of the
# H200's 227 KB of shared memory per block. On an H200 (Triton 3.6.0, 2026-12-01), 3 slots reached 98-103% of
# cuBLAS from 8192 x 8192 x 512 to 8192^3, 2 slots 65-81% of 3 (results/experiment_gluon_ws_h200.json).
CONFIG = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "NUM_BUFFERS": 3, "GROUP_M": 8, "num_warps": 8}
GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}


@gluon.jit
def _tile(tile, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    """Output tile number -> (pid_m, pid_n), in groups of GROUP_M tile-rows (chapter 06)."""
    per_group = GROUP_M * num_pid_n
    first = (tile // per_group) * GROUP_M
    rows = gl.minimum(num_pid_m - first, GROUP_M)
    return first + (tile % per_group) % rows, (tile % per_group) // rows


@gluon.jit
def _producer(
    a_desc,  # TMA descriptor of a, blocks (BLOCK_M, BLOCK_K)
    b_desc,  # TMA descriptor of b, blocks (BLOCK_K, BLOCK_N)
    a_bufs,  # the ring's a tiles in shared memory, (NUM_BUFFERS, BLOCK_M, BLOCK_K)
    b_bufs,  # the ring's b tiles, (NUM_BUFFERS, BLOCK_K, BLOCK_N)
    ready,  # NUM_BUFFERS mbarriers: slot s is full (its two copies have landed)
    empty,  # NUM_BUFFERS mbarriers: slot s is free (the wgmma that read it has completed)
    M,
    N,
    K,
    GROUP_M: gl.constexpr,
    NUM_BUFFERS: gl.constexpr,
    NUM_SMS: gl.constexpr,
):
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    count = 0  # steps issued so far, across tiles: slot count % NUM_BUFFERS, round count // NUM_BUFFERS
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, NUM_SMS):
        pid_m, pid_n = _tile(tile, num_pid_m, num_pid_n, GROUP_M)
        for kk in range(k_steps):
            s = count % NUM_BUFFERS
            phase = (count // NUM_BUFFERS) & 1
            mbarrier.wait(empty.index(s), phase ^ 1)
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma_load(a_desc, [pid_m * BLOCK_M, kk * BLOCK_K], ready.index(s), a_bufs.index(s))
            tma_load(b_desc, [kk * BLOCK_K, pid_n * BLOCK_N], ready.index(s), b_bufs.index(s))
            count += 1


@gluon.jit
def _consumer(
    c_desc,  # TMA descriptor of out, blocks (BLOCK_M, BLOCK_N)
    a_bufs,
    b_bufs,
    ready,
    empty,
    c_smem,  # one output tile in shared memory, for the TMA store
    M,
    N,
    K,
    GROUP_M: gl.constexpr,
    NUM_BUFFERS: gl.constexpr,
    NUM_SMS: gl.constexpr,
    num_warps: gl.constexpr,
):
    BLOCK_M: gl.constexpr = c_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = c_desc.block_type.shape[1]
    BLOCK_K: gl.constexpr = a_bufs.type.shape[2]
    # wgmma's accumulator layout: the warps stacked along M (2 warpgroups x 4 warps: 64 rows each)
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_N, 16]
    )
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    count = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, NUM_SMS):
        pid_m, pid_n = _tile(tile, num_pid_m, num_pid_n, GROUP_M)
        acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=layout)
        for kk in range(k_steps):
            s = count % NUM_BUFFERS
            mbarrier.wait(ready.index(s), (count // NUM_BUFFERS) & 1)
            acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
            mbarrier.arrive(empty.index(s), count=1)  # the slot freed while its wgmma may still read it
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            count += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        tma.store_wait(0)  # the previous tile's store has read c_smem
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()  # the registers' writes to shared memory, before TMA reads it
        tma_store(c_desc, [pid_m * BLOCK_M, pid_n * BLOCK_N], c_smem)
    tma.store_wait(0)


@gluon.jit
def ws_matmul_kernel(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    GROUP_M: gl.constexpr,  # tile-rows per group (chapter 06)
    NUM_BUFFERS: gl.constexpr,  # slots in the ring
    NUM_SMS: gl.constexpr,  # programs: one per SM, each walks tiles NUM_SMS apart
    num_warps: gl.constexpr,  # of the default partition (the consumers)
):
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [NUM_BUFFERS] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [NUM_BUFFERS] + b_desc.block_type.shape, b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.init(ready.index(i), count=1)  # completed by the TMA bytes landing (expect + copies)
        mbarrier.init(empty.index(i), count=1)  # completed by the consumers' one arrive
    gl.warp_specialize(
        [
            (
                _consumer,
                (c_desc, a_bufs, b_bufs, ready, empty, c_smem, M, N, K, GROUP_M, NUM_BUFFERS, NUM_SMS, num_warps),
            ),
            (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, GROUP_M, NUM_BUFFERS, NUM_SMS)),
        ],
        [1],  # warps of each worker partition
        [40],  # registers per thread of each worker partition
    )
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))


def _descriptor(x, block):
    layout = gl.NVMMASharedLayout.get_default_for(block, GL_DTYPES[x.dtype])
    return TensorDescriptor.from_tensor(x, block, layout)


def ws_matmul(a, b, out, sms=None):
    """out = a @ b. ``sms``: the number of programs (default: the GPU's SM count)."""
    cfg = CONFIG
    M, K = a.shape
    N = b.shape[1]
    a_desc = _descriptor(a, [cfg["BLOCK_M"], cfg["BLOCK_K"]])
    b_desc = _descriptor(b, [cfg["BLOCK_K"], cfg["BLOCK_N"]])
    c_desc = _descriptor(out, [cfg["BLOCK_M"], cfg["BLOCK_N"]])
    if sms is None:
        sms = torch.cuda.get_device_properties(out.device).multi_processor_count if out.is_cuda else 132
    tiles = triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"])
    grid = (min(sms, tiles),)
    ws_matmul_kernel[grid](
        a_desc, b_desc, c_desc, M, N, K,
        GROUP_M=cfg["GROUP_M"], NUM_BUFFERS=cfg["NUM_BUFFERS"], NUM_SMS=grid[0], num_warps=cfg["num_warps"],
    )  # fmt: skip
    return out
