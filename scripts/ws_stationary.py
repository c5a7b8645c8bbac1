"""An experiment for chapter 10's step 4, not yet timed on a GPU: the candidate GEMM with W_c's tile
*stationary* in shared memory, for shapes whose K is short (the course's and the many-users shape:
Kc = 256).

Why: at the course's shape a 128 x 128 candidate tile of 4 K steps brings 64 KB of W_c, 64 KB of E and
its 64 KB float32 user tile through the L2 into the SM, and stores 32 KB. cuBLAS's candidate GEMM alone
(no user tile) moves about 7.5 TB/s from the L2 at 0.071 ms; step 4's candidate GEMM, with the user
tile, moves about the same rate at 0.107 ms (results/experiment_capstone_h200.json). If the L2's rate
is the limit, W_c's 64 KB a tile is a third of what can go. With the grid a multiple of the M tiles
(num_pid_m), a program's tiles all have the same pid_m (tile = program + j * grid, pid_m = tile mod
num_pid_m): its W_c tile, all K steps of it, is loaded once, at the start, and the ring carries E only.

    PYTHONPATH=. python3 scripts/ws_stationary.py          # compile for sm_90 (no GPU needed), print the structure
    PYTHONPATH=. python3 scripts/ws_stationary.py --run     # on a Hopper GPU: check against float64 and time

Built on the ping-pong kernel of scripts/capstone_variants.py (the solution's _tile, the learner's
part, the variants' _user_tile, the turn protocol); scripts/experiments_capstone.py times it as a
`ws_try` row (config ending "stationary") beside the others.
"""

from __future__ import annotations

import sys
from pathlib import Path

import course_lib  # noqa: F401  (mode set-up first)
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from course_lib import sources

# step 4's variants (and through them the solution): their kernels' parts are reused here
ws = sources.load_file(Path(__file__).with_name("capstone_variants.py"), "ws_compression", "capstone_variants")[0]
mbarrier, tma, fence_async_shared = ws.mbarrier, ws.tma, ws.fence_async_shared
warpgroup_mma, warpgroup_mma_wait = ws.warpgroup_mma, ws.warpgroup_mma_wait
tma_load, tma_store, _tile, _user_tile = ws.tma_load, ws.tma_store, ws._tile, ws._user_tile

# (BLOCK_M, BLOCK_N, BLOCK_K, NUM_BUFFERS of E, num_warps, programs per SM, "pingpong", "stationary")
CONFIG = (128, 128, 64, 6, 4, 1, "pingpong", "stationary")
SHARED_LIMIT = 227 * 1024  # bytes of shared memory a program may have on Hopper


@gluon.jit
def _st_producer(a_desc, e_desc, a_res, e_bufs, a_ready, ready, empty, batches, M, N,
                 K_STEPS: gl.constexpr, NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr):  # fmt: skip
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = e_desc.block_type.shape[2]
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    pid_m = gl.program_id(0) % num_pid_m  # every tile of this program has it (NUM_SMS % num_pid_m == 0)
    mbarrier.expect(a_ready, K_STEPS * a_desc.block_type.nbytes)
    for ka in gl.static_range(K_STEPS):
        tma_load(a_desc, [pid_m * BLOCK_M, ka * BLOCK_K], a_ready, a_res.index(ka))
    count = 0
    for tile in range(gl.program_id(0), batches * num_pid_m * num_pid_n, NUM_SMS):
        b, _pid_m, pid_n = _tile(tile, num_pid_m, num_pid_n)
        for kk in range(K_STEPS):
            s = count % NUM_BUFFERS
            mbarrier.wait(empty.index(s), ((count // NUM_BUFFERS) & 1) ^ 1)
            mbarrier.expect(ready.index(s), e_desc.block_type.nbytes)
            tma_load(e_desc, [b, kk * BLOCK_K, pid_n * BLOCK_N], ready.index(s), e_bufs.index(s))
            count += 1


@gluon.jit
def _st_consumer(c_desc, a_res, e_bufs, a_ready, ready, empty, turn, c_smem, user_ptr, user_of_ptr, batches, M, N,
                 ROLE: gl.constexpr, K_STEPS: gl.constexpr, NUM_BUFFERS: gl.constexpr,
                 NUM_SMS: gl.constexpr):  # fmt: skip
    """The ping-pong consumer with W_c's tile resident: step kk multiplies a_res[kk] by the ring's slot."""
    BLOCK_M: gl.constexpr = c_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = c_desc.block_type.shape[2]
    BLOCK_K: gl.constexpr = a_res.type.shape[2]
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
    )
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    mbarrier.wait(a_ready, 0)  # W_c's tile, loaded once
    i = 0
    for tile in range(gl.program_id(0) + ROLE * NUM_SMS, batches * num_pid_m * num_pid_n, 2 * NUM_SMS):
        b, pid_m, pid_n = _tile(tile, num_pid_m, num_pid_n)
        count = (2 * i + ROLE) * K_STEPS
        acc = _user_tile(user_ptr, user_of_ptr, b, pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, layout).to(gl.float32)
        mbarrier.wait(turn.index(ROLE), (i & 1) ^ (1 - ROLE))
        for kk in range(K_STEPS):
            s = count % NUM_BUFFERS
            mbarrier.wait(ready.index(s), (count // NUM_BUFFERS) & 1)
            e_tile = e_bufs.index(s).reshape([BLOCK_K, BLOCK_N])
            acc = warpgroup_mma(a_res.index(kk), e_tile, acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            if kk > 0:
                mbarrier.arrive(empty.index((count - 1) % NUM_BUFFERS), count=1)
            count += 1
        mbarrier.arrive(turn.index(1 - ROLE), count=1)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((count - 1) % NUM_BUFFERS), count=1)
        tma.store_wait(0)
        c_smem.index(ROLE).reshape([BLOCK_M, BLOCK_N]).store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma_store(c_desc, [b, pid_m * BLOCK_M, pid_n * BLOCK_N], c_smem.index(ROLE))
        i += 1
    tma.store_wait(0)


@gluon.jit
def capstone_stationary_kernel(a_desc, e_desc, c_desc, user_ptr, user_of_ptr, batches, M, N,
                               K_STEPS: gl.constexpr, NUM_BUFFERS: gl.constexpr, NUM_SMS: gl.constexpr,
                               num_warps: gl.constexpr):  # fmt: skip
    a_res = gl.allocate_shared_memory(a_desc.dtype, [K_STEPS] + a_desc.block_type.shape, a_desc.layout)
    e_bufs = gl.allocate_shared_memory(e_desc.dtype, [NUM_BUFFERS] + e_desc.block_type.shape, e_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [2] + c_desc.block_type.shape, c_desc.layout)
    a_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(a_ready, count=1)
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    for i in gl.static_range(2):
        mbarrier.init(turn.index(i), count=1)
    ROLE0: gl.constexpr = 0
    ROLE1: gl.constexpr = 1
    gl.warp_specialize(
        [
            (_st_consumer, (c_desc, a_res, e_bufs, a_ready, ready, empty, turn, c_smem, user_ptr, user_of_ptr,
                            batches, M, N, ROLE0, K_STEPS, NUM_BUFFERS, NUM_SMS)),
            (_st_consumer, (c_desc, a_res, e_bufs, a_ready, ready, empty, turn, c_smem, user_ptr, user_of_ptr,
                            batches, M, N, ROLE1, K_STEPS, NUM_BUFFERS, NUM_SMS)),
            (_st_producer, (a_desc, e_desc, a_res, e_bufs, a_ready, ready, empty, batches, M, N, K_STEPS,
                            NUM_BUFFERS, NUM_SMS)),
        ],
        [4, 1],
        [208, 40],
    )  # fmt: skip
    mbarrier.invalidate(a_ready)
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))
    for i in gl.static_range(2):
        mbarrier.invalidate(turn.index(i))


def fits(a, e, config=CONFIG) -> str | None:
    """Why this kernel cannot take the problem (a sentence), or None when it can."""
    bm, bn, bk, nb = config[:4]
    M, K = a.shape
    N = e.shape[2]
    bn = min(bn, max(16, triton.next_power_of_2(N)))
    k_steps = triton.cdiv(K, bk)
    shared = (k_steps * bm * bk + nb * bk * bn + 2 * bm * bn) * a.element_size()
    if shared > SHARED_LIMIT:
        return f"W_c's resident tile, the ring and the output tiles need {shared // 1024} KB of shared memory"
    return None


def gemm(a, e, c, user, user_of, config=CONFIG, sms=132):
    """c[b] = a @ e[b] + user[user_of[b]] with a's tile resident: a (M, K) with 16-byte rows, e (batches,
    K, N), c (batches, M, N), user (U, M, N) float32. The grid is the largest multiple of the M tiles
    that fits sms."""
    problem = fits(a, e, config)
    if problem:
        raise ValueError(f"capstone_stationary_kernel cannot take this shape: {problem}")
    bm, bn, bk, nb, num_warps = config[:5]
    M, K = a.shape
    batches, _, N = e.shape
    bn = min(bn, max(16, triton.next_power_of_2(N)))
    num_pid_m = triton.cdiv(M, bm)
    tiles = batches * num_pid_m * triton.cdiv(N, bn)
    if sms < num_pid_m:
        raise ValueError(f"capstone_stationary_kernel needs a program per M tile at least: {num_pid_m} > {sms} SMs")
    grid = (min(sms // num_pid_m * num_pid_m, tiles),)  # tiles is a multiple of num_pid_m too
    capstone_stationary_kernel[grid](ws._desc(a, [bm, bk]), ws._desc(e, [1, bk, bn]), ws._desc(c, [1, bm, bn]), user, user_of, batches,
                 M, N, K_STEPS=triton.cdiv(K, bk), NUM_BUFFERS=nb, NUM_SMS=grid[0], num_warps=num_warps)  # fmt: skip
    return c


def _structure() -> int:
    from course_lib import compilation
    from course_lib.tasks import ch10_capstone as ch10

    B, U, M, Ku, Kc, N = ch10.bench_case("course").shape
    a = torch.zeros(M, Kc, dtype=torch.bfloat16)
    e = torch.zeros(4, Kc, N, dtype=torch.bfloat16)
    c = torch.zeros(4, M, N, dtype=torch.bfloat16)
    user, user_of = torch.zeros(U, M, N), torch.zeros(4, dtype=torch.int64)
    launches = compilation.recorded_launches(lambda: gemm(a, e, c, user, user_of))
    compiled = compilation.compile_launch(launches[-1])
    ptx = compiled.asm["ptx"]
    print(f"{launches[-1][0].__name__} for the course's shape, compiled for sm_90: "
          f"{compiled.metadata.shared // 1024} KB shared, {ptx.count('cp.async.bulk.tensor')} TMA copies, "
          f"{ptx.count('wgmma.mma_async')} wgmma, warp_specialize {'ttg.warp_specialize' in compiled.asm['ttgir']}")  # fmt: skip
    return 0


def _run() -> int:
    from gluon_capstone import case_inputs, rel_err  # the bench case's inputs with W padded; the error

    from course_lib import timing
    from course_lib.tasks import ch10_capstone as ch10

    failed = 0
    for label in ("course", "many users"):
        x = case_inputs(label, torch.bfloat16, "cuda")
        B, U, M, Ku, Kc, N = ch10.bench_case(label).shape
        user_out = torch.matmul(x["w_u"].float(), x["e_user"].float())
        out = torch.full((B, M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemm(x["w_c"], x["e_cand"], out, user_out, x["user_of"])
        torch.cuda.synchronize()
        ref = torch.matmul(x["w_c"].double(), x["e_cand"].double()) + user_out.double()[x["user_of"]]
        err = rel_err(out, ref)
        failed += not err < 1e-2
        ms = timing.bench(lambda x=x: gemm(x["w_c"], x["e_cand"], out, user_out, x["user_of"])).median_ms
        base = timing.bench(lambda x=x: ws.gemm(x["w_c"], x["e_cand"], out, user_out, x["user_of"],
                            config=ws.candidate_config(N))).median_ms  # fmt: skip
        print(
            f"{label}: stationary candidate GEMM {ms:.4f} ms, rel err {err:.1e}; "
            f"the ping-pong candidate GEMM on the solution's tile, this user tile in user mode 2, {base:.4f} ms "
            "in the same run",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(_run() if "--run" in sys.argv else _structure())
