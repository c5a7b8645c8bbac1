"""A first warp-specialized GEMM in Gluon for Hopper (chapter 09's draft, an experiment): one producer
warp issues TMA loads into a ring of NUM_BUFFERS shared-memory slots; the default partition, two
consumer warpgroups (8 warps, cooperative: each computes half the rows of the 128 x 256 tile), runs
wgmma on the slots that are full and frees each one once the wgmma that read it has completed.
Persistent: one program per SM walks output tiles NUM_SMS apart, in groups of GROUP_M tile-rows.

    PYTHONPATH=. python3 scripts/gluon_ws_matmul.py            # compile for sm_90 (no GPU needed), list the PTX ops
    PYTHONPATH=. python3 scripts/gluon_ws_matmul.py --run OUT  # on a Hopper GPU: check and time against cuBLAS

Triton 3.6 through 3.9 share the warp_specialize signature used here; 3.8 renamed the TMA copies.
"""

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.experimental.gluon.language.nvidia.hopper import (
    tma,
    mbarrier,
    fence_async_shared,
    warpgroup_mma,
    warpgroup_mma_wait,
)


# Triton 3.8 renamed the TMA copies: async_load / async_store (3.6 and 3.7: async_copy_global_to_shared /
# async_copy_shared_to_global; 3.9 keeps the old names only to raise an error)
tma_load = tma.async_load if hasattr(tma, "async_load") else tma.async_copy_global_to_shared
tma_store = tma.async_store if hasattr(tma, "async_store") else tma.async_copy_shared_to_global


@gluon.jit
def _tile(tile, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    per_group = GROUP_M * num_pid_n
    first = (tile // per_group) * GROUP_M
    rows = gl.minimum(num_pid_m - first, GROUP_M)
    return first + (tile % per_group) % rows, (tile % per_group) // rows


@gluon.jit
def _producer(
    a_desc,
    b_desc,
    a_bufs,
    b_bufs,
    ready,
    empty,
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
    count = 0
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
    c_desc,
    a_bufs,
    b_bufs,
    ready,
    empty,
    c_smem,
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
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            if kk > 0:
                mbarrier.arrive(empty.index((count - 1) % NUM_BUFFERS), count=1)
            count += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((count - 1) % NUM_BUFFERS), count=1)
        tma.store_wait(0)
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
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
    GROUP_M: gl.constexpr,
    NUM_BUFFERS: gl.constexpr,
    NUM_SMS: gl.constexpr,
    num_warps: gl.constexpr,
):
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [NUM_BUFFERS] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [NUM_BUFFERS] + b_desc.block_type.shape, b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    gl.warp_specialize(
        [
            (
                _consumer,
                (c_desc, a_bufs, b_bufs, ready, empty, c_smem, M, N, K, GROUP_M, NUM_BUFFERS, NUM_SMS, num_warps),
            ),
            (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, GROUP_M, NUM_BUFFERS, NUM_SMS)),
        ],
        [1],
        [40],
    )
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))


GL = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}


def descriptors(a, b, c, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64):
    t = GL[a.dtype]
    mk = lambda x, shape: TensorDescriptor.from_tensor(x, shape, gl.NVMMASharedLayout.get_default_for(shape, t))
    return mk(a, [BLOCK_M, BLOCK_K]), mk(b, [BLOCK_K, BLOCK_N]), mk(c, [BLOCK_M, BLOCK_N])


def ws_matmul(a, b, c, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, NUM_BUFFERS=3, GROUP_M=8, num_warps=8, sms=132):
    M, K = a.shape
    N = b.shape[1]
    ad, bd, cd = descriptors(a, b, c, BLOCK_M, BLOCK_N, BLOCK_K)
    n_tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    grid = (min(sms, n_tiles),)
    ws_matmul_kernel[grid](ad, bd, cd, M, N, K, GROUP_M, NUM_BUFFERS, grid[0], num_warps=num_warps)
    return c


def compile_sm90(M=8192, N=8192, K=8192, dtype=torch.bfloat16, NUM_BUFFERS=3, num_warps=8):
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    a = torch.empty(16, 64, dtype=dtype)
    b = torch.empty(64, 256, dtype=dtype)
    c = torch.empty(128, 256, dtype=dtype)
    ad, bd, cd = descriptors(a, b, c)
    from triton._utils import canonicalize_dtype

    def mangle(d):  # what the JIT calls the descriptor's type (3.6 does it in C++, 3.9 in __mangle__)
        return f"tensordesc<{canonicalize_dtype(d.base.dtype)}[{','.join(map(str, d.block_shape))}],{d.layout!r}>"

    sig = {
        "a_desc": mangle(ad),
        "b_desc": mangle(bd),
        "c_desc": mangle(cd),
        "M": "i32",
        "N": "i32",
        "K": "i32",
        "GROUP_M": "constexpr",
        "NUM_BUFFERS": "constexpr",
        "NUM_SMS": "constexpr",
        "num_warps": "constexpr",
    }
    src = GluonASTSource(
        ws_matmul_kernel,
        sig,
        constexprs={"GROUP_M": 8, "NUM_BUFFERS": NUM_BUFFERS, "NUM_SMS": 132, "num_warps": num_warps},
    )
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps})


def run(out_dir):
    import json
    import time

    from course_lib import runtime, timing

    rows = []
    sms = runtime.gpu_info().sm_count
    for M, N, K in ((300, 520, 200), (1000, 1000, 1000)):  # ragged: TMA fills the edges with zeros
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        ws_matmul(a, b, c, sms=sms)
        ref = a.float() @ b.float()
        err = ((c.float() - ref).norm() / ref.norm()).item()
        print(f"check {(M, N, K)}: relative error {err:.2e}", flush=True)
        rows.append({"check": [M, N, K], "rel_err": err})
    for M, N, K in ((8192, 8192, 8192), (4096, 4096, 4096), (8192, 8192, 512)):
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        flops = 2 * M * N * K
        cublas = timing.bench(lambda: torch.matmul(a, b, out=c)).median_ms
        for nb in (3, 2):
            ws_matmul(a, b, c, NUM_BUFFERS=nb, sms=sms)
            err = ((c.float() - (a.float() @ b.float())).norm() / (a.float() @ b.float()).norm()).item()
            ms = timing.bench(lambda: ws_matmul(a, b, c, NUM_BUFFERS=nb, sms=sms)).median_ms
            row = {
                "shape": [M, N, K],
                "num_buffers": nb,
                "median_ms": ms,
                "tflops": flops / ms / 1e9,
                "cublas_ms": cublas,
                "cublas_tflops": flops / cublas / 1e9,
                "rel_err": err,
            }
            rows.append(row)
            print(
                f"{(M, N, K)} buffers {nb}: {ms * 1e3:.1f} us {row['tflops']:.0f} TFLOP/s, cuBLAS "
                f"{cublas * 1e3:.1f} us {row['cublas_tflops']:.0f} ({cublas / ms:.0%}), err {err:.1e}",
                flush=True,
            )
    meta = {"gpu": runtime.gpu_info().name, "versions": runtime.versions(), "date": time.strftime("%Y-%m-%d")}
    with open(f"{out_dir}/experiment_gluon_ws_h200.json", "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    import sys

    if "--run" in sys.argv:
        run(sys.argv[sys.argv.index("--run") + 1])
        raise SystemExit
    k = compile_sm90()
    ptx = k.asm["ptx"]
    import re

    for op in ("setmaxnreg", "wgmma.mma_async", "cp.async.bulk.tensor", "mbarrier.try_wait", "mbarrier.arrive"):
        print(op, len(re.findall(re.escape(op), ptx)))
    print("warp_specialize in ttgir:", "ttg.warp_specialize" in k.asm["ttgir"])
    print("shared", k.metadata.shared)
