"""The capstone's last step on a GPU (chapter 10): solutions/ws_compression.py, the candidate GEMM of the
linear compression warp-specialized and persistent in Gluon on Hopper, with the user's part added in
its epilogue by index lookup, and the user GEMM as a first launch of the same kernel; checked and
timed at the capstone's three shapes.

    out[b] = W_c @ E_cand[b] + user_out[user_of[b]],   user_out[u] = W_u @ E_user[u]

One producer warp issues TMA loads of W's tile (M, K padded to 16-byte rows) and of E's tile (3-D
descriptors: the K tail of each batch is zero-filled, never read from the next one) into a ring of
NUM_BUFFERS slots; two consumer warpgroups run wgmma on them. Tiles are numbered with the M tiles of
one (batch, N tile) next to each other, so programs that run together read the same E tile: E comes
from memory once, W stays in the L2.

    PYTHONPATH=. python3 scripts/gluon_capstone.py             # compile for sm_90 (no GPU), list the PTX ops
    PYTHONPATH=. python3 scripts/gluon_capstone.py --run OUT   # on a Hopper GPU: check and time
"""

from __future__ import annotations

import course_lib  # noqa: F401  (mode set-up first)
import torch
import triton

from course_lib import compilation, sources

ws = sources.load_module("ws_compression", "solutions")  # the kernel and its launcher (chapter 10, step 4)
gemm, USER = ws.gemm, ws.USER


def pad_k(w):
    """w (M, K) as a view of an (M, K rounded up to 16 bytes) buffer: TMA's rows start 16 bytes apart."""
    per = 16 // w.element_size()
    K = w.shape[1]
    buf = torch.zeros(w.shape[0], triton.cdiv(K, per) * per, dtype=w.dtype, device=w.device)
    buf[:, :K] = w
    return buf[:, :K]


class Compression:
    """W padded once (as a model's weights are, at load), then ws_compression per request."""

    def __init__(self, w, ku):
        self.w_u = pad_k(w[:, :ku])  # (M, Ku), rows 16-byte aligned
        self.w_c = pad_k(w[:, ku:])  # (M, Kc)

    def __call__(self, e_user, e_cand, user_of, out, sms=132):
        return ws.ws_compression(self.w_u, self.w_c, e_user, e_cand, user_of, out, sms=sms)


def inputs(B, U, M, Ku, Kc, N, dtype, device, per_user=None, seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    scale = (Ku + Kc) ** -0.25
    w = (torch.randn(M, Ku + Kc, generator=g, device=device) * scale).to(dtype)
    e_user = (torch.randn(U, Ku, N, generator=g, device=device) * scale).to(dtype)
    e_cand = (torch.randn(B, Kc, N, generator=g, device=device) * scale).to(dtype)
    per_user = per_user or -(-B // U)
    user_of = (torch.arange(B, device=device) // per_user).clamp(max=U - 1).to(torch.int32)
    return w, e_user, e_cand, user_of


def naive(w, e_user, e_cand, user_of):
    """The PyTorch version the capstone starts from: the concatenation materialized, one batched matmul."""
    x = torch.cat([e_user[user_of.long()], e_cand], dim=1)  # (B, Ku + Kc, N)
    return torch.matmul(w, x)  # (B, M, N)


def decomposed(w, e_user, e_cand, user_of, ku):
    user_out = torch.matmul(w[:, :ku], e_user)  # (U, M, N): once per unique user
    return torch.matmul(w[:, ku:], e_cand) + user_out[user_of.long()]  # (B, M, N)


SHAPES = {  # B, U, M, Ku, Kc, N
    "published": (1024, 15, 433, 1178, 866, 256),
    "course": (2048, 16, 256, 512, 256, 128),
    "many_users": (2048, 512, 256, 512, 256, 128),
}


def run(out_dir):
    import json
    import time

    from course_lib import runtime, timing

    sms = runtime.gpu_info().sm_count
    rows = []
    for name, (B, U, M, Ku, Kc, N) in SHAPES.items():
        for dtype in (torch.bfloat16, torch.float16) if name == "published" else (torch.bfloat16,):
            w, e_user, e_cand, user_of = inputs(
                B, U, M, Ku, Kc, N, dtype, "cuda", per_user=4 if name == "many_users" else None
            )
            step = Compression(w, Ku)
            out = torch.empty(B, M, N, dtype=dtype, device="cuda")
            step(e_user, e_cand, user_of, out, sms=sms)
            ref = decomposed(w.double(), e_user.double(), e_cand.double(), user_of, Ku)
            err = ((out.double() - ref).norm() / ref.norm()).item()
            flops = 2 * M * N * (U * Ku + B * Kc)
            ms = timing.bench(lambda: step(e_user, e_cand, user_of, out, sms=sms)).median_ms
            user_out = torch.empty(U, M, N, dtype=torch.float32, device="cuda")
            user_ms = timing.bench(lambda: gemm(step.w_u, e_user, user_out, config=USER, sms=sms)).median_ms
            cand_ms = timing.bench(lambda: gemm(step.w_c, e_cand, out, user_out, user_of, sms=sms)).median_ms
            eager = timing.bench(lambda: naive(w, e_user, e_cand, user_of)).median_ms
            row = {"shape": name, "dims": [B, U, M, Ku, Kc, N], "dtype": str(dtype).replace("torch.", ""),
                   "median_ms": ms, "user_gemm_ms": user_ms, "candidate_ms": cand_ms, "naive_eager_ms": eager,
                   "tflops": flops / ms / 1e9, "rel_err": err}  # fmt: skip
            rows.append(row)
            print(f"{name} {row['dtype']}: {ms * 1e3:.1f} us (user {user_ms * 1e3:.1f}, candidates "
                  f"{cand_ms * 1e3:.1f}), {row['tflops']:.0f} TFLOP/s, naive eager {eager * 1e3:.1f} us "
                  f"({eager / ms:.1f}x), err {err:.1e}", flush=True)  # fmt: skip
    meta = {"gpu": runtime.gpu_info().name, "versions": runtime.versions(), "date": time.strftime("%Y-%m-%d")}
    with open(f"{out_dir}/experiment_gluon_capstone_h200.json", "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    import re
    import sys

    if "--run" in sys.argv:
        run(sys.argv[sys.argv.index("--run") + 1])
        raise SystemExit
    w, e_user, e_cand, user_of = inputs(1024, 15, 433, 1178, 866, 256, torch.bfloat16, "cpu")
    step = Compression(w, 1178)
    out = torch.empty(1024, 433, 256, dtype=torch.bfloat16)
    user_out = torch.empty(15, 433, 256, dtype=torch.float32)
    for label, launch in (
        ("user GEMM", lambda: gemm(step.w_u, e_user, user_out, config=USER)),
        ("candidate GEMM + user tile", lambda: gemm(step.w_c, e_cand, out, user_out, user_of)),
    ):
        kernel, compiled = compilation.compile_first_launch(launch)
        ptx = compiled.asm["ptx"]
        counts = {op: len(re.findall(re.escape(op), ptx)) for op in ("setmaxnreg", "wgmma.mma_async",
                  "cp.async.bulk.tensor", "mbarrier.try_wait", "ld.global")}  # fmt: skip
        print(label, counts, "warp_specialize:", "ttg.warp_specialize" in compiled.asm["ttgir"],
              "shared", compiled.metadata.shared)  # fmt: skip
