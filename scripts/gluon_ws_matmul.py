"""Chapter 09's warp-specialized Gluon GEMM on Hopper (solutions/ws_matmul.py): one producer warp issues
TMA loads into a ring of NUM_BUFFERS shared-memory slots; the default partition, two consumer
warpgroups (8 warps, cooperative: each computes half the rows of the 128 x 256 tile), runs wgmma on
the slots that are full and frees each one once the wgmma that read it has completed. Persistent:
one program per SM walks output tiles NUM_SMS apart, in groups of GROUP_M tile-rows.

    PYTHONPATH=. python3 scripts/gluon_ws_matmul.py            # compile for sm_90 (no GPU needed), list the PTX ops
    PYTHONPATH=. python3 scripts/gluon_ws_matmul.py --run OUT  # on a Hopper GPU: check and time against cuBLAS

Triton 3.6 through 3.9 share the warp_specialize signature used here; 3.8 renamed the TMA copies.
"""

import course_lib  # noqa: F401  (mode set-up first)
import torch
import triton

from course_lib import compilation, sources

ws = sources.load_module("ws_matmul", "solutions")  # the kernel, its roles and its descriptors


def ws_matmul(a, b, c, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, NUM_BUFFERS=3, GROUP_M=8, num_warps=8, sms=132):
    """The solution's kernel with every setting open (the solution's launcher fixes them)."""
    M, K = a.shape
    N = b.shape[1]
    ad = ws._descriptor(a, [BLOCK_M, BLOCK_K])
    bd = ws._descriptor(b, [BLOCK_K, BLOCK_N])
    cd = ws._descriptor(c, [BLOCK_M, BLOCK_N])
    grid = (min(sms, triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)),)
    ws.ws_matmul_kernel[grid](ad, bd, cd, M, N, K, GROUP_M, NUM_BUFFERS, grid[0], num_warps=num_warps)
    return c


def compile_sm90(M=8192, N=8192, K=8192, dtype=torch.bfloat16, NUM_BUFFERS=3, num_warps=8):
    """The kernel compiled for sm_90 as ws_matmul would launch it (CPU tensors; nothing runs)."""
    a, b, c = torch.empty(M, K, dtype=dtype), torch.empty(K, N, dtype=dtype), torch.empty(M, N, dtype=dtype)
    return compilation.compile_first_launch(ws_matmul, a, b, c, NUM_BUFFERS=NUM_BUFFERS, num_warps=num_warps)[1]


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
