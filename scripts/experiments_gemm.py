"""Experiments behind chapters 06-08's solutions, run on a GPU: matmul tiles, orders and loads; the
linear layer at decode shapes; what torch.compile costs per new token count; transposes; and the
batched GEMM whose reduction dimension is 866 or padded to 872.

    PYTHONPATH=. python3 scripts/experiments_gemm.py matmul decode decode_compile transpose padded_k --out DIR

Each writes DIR/experiment_<name>.json (rows of variant, shape, dtype, median, rate, config) and prints
a summary. Every row of one experiment is timed in the same process with course_lib.timing.bench
(L2 flushed by a read before each call), baselines included. These kernels are experiments; what
they teach goes into solutions/ and the notebooks.
"""

from __future__ import annotations

import argparse
import json
import time
import traceback

import course_lib  # noqa: F401  (mode set-up first)
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from course_lib import runtime, timing

BF16 = torch.bfloat16


def _ms(fn) -> float:
    return timing.bench(fn, warmup_ms=10, rep_ms=60).median_ms


def _kernel_resources(compiled) -> dict:
    """Registers per thread, spilled registers and shared memory of a launched kernel (what the launch
    returned), where this Triton reports them; {} otherwise."""
    out = {}
    for key, value in (
        ("n_regs", getattr(compiled, "n_regs", None)),
        ("n_spills", getattr(compiled, "n_spills", None)),
        ("shared_bytes", getattr(getattr(compiled, "metadata", None), "shared", None)),
    ):
        if isinstance(value, int):
            out[key] = value
    return out


def _row(variant, shape, dtype, ms, flops=0, n_bytes=0, **extra) -> dict:
    return {
        "variant": variant,
        "shape": list(shape),
        "dtype": str(dtype).replace("torch.", ""),
        "median_ms": ms,
        "tflops": flops / (ms * 1e-3) / 1e12 if flops else None,
        "gbs": n_bytes / (ms * 1e-3) / 1e9 if n_bytes else None,
        **extra,
    }


def _try(log, label, fn):
    """Run one measurement; a variant that fails to compile or run is recorded as such."""
    try:
        return fn()
    except Exception as e:  # an experiment's variant may not exist on this Triton
        log(f"  {label}: {type(e).__name__}: {str(e)[:300]}")
        return None


@triton.jit
def _tile_of(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    n_row_tiles = tl.cdiv(M, BLOCK_M)
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * n_col_tiles
    first = (pid // per_group) * GROUP_M
    rows = tl.minimum(n_row_tiles - first, GROUP_M)
    return first + (pid % per_group) % rows, (pid % per_group) // rows


@triton.jit
def _gelu_tanh(u):
    # tanh(z) = 1 - 2 / (exp(2z) + 1): one exp and one reciprocal
    z = 0.7978845608028654 * (u + 0.044715 * u * u * u)
    t = 1.0 - 2.0 / (tl.exp(2.0 * z) + 1.0)
    return 0.5 * u * (1.0 + t)


# --------------------------------------------------------------------------------------------------
# matmul: pointer loads against tensor descriptors, row-major against grouped, persistent


@triton.jit
def mm_ptr(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):  # fmt: skip
    pid_m, pid_n = _tile_of(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (rows % M)[:, None] * sam + ks[None, :] * sak
    b_ptrs = b_ptr + ks[:, None] * sbk + (cols % N)[None, :] * sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k0, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * scm + cols[None, :] * scn, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def mm_tma(a_desc, b_desc, c_desc, bias_ptr, M, N, K,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
           B_NK: tl.constexpr, EPILOGUE: tl.constexpr):  # fmt: skip
    # B_NK: b is stored (N, K) as nn.Linear's weight, and the tile is transposed in shared memory
    pid_m, pid_n = _tile_of(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([off_m, k])
        if B_NK:
            b = b_desc.load([off_n, k]).T
        else:
            b = b_desc.load([k, off_n])
        acc = tl.dot(a, b, acc)
    if EPILOGUE:
        cols = off_n + tl.arange(0, BLOCK_N)
        bias = tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc = _gelu_tanh(acc + bias[None, :])
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@triton.jit
def mm_tma_persistent(a_desc, b_desc, c_desc, M, N, K, NUM_SMS: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                      STAGES: tl.constexpr):  # fmt: skip
    n_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    for tile in range(tl.program_id(0), n_tiles, NUM_SMS):
        pid_m, pid_n = _tile_of(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in tl.range(0, k_steps, num_stages=STAGES):
            a = a_desc.load([pid_m * BLOCK_M, kk * BLOCK_K])
            b = b_desc.load([kk * BLOCK_K, pid_n * BLOCK_N])
            acc = tl.dot(a, b, acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


def _launch_ptr(a, b, c, bm, bn, bk, g, w, s):
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    mm_ptr[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                 BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=g, num_warps=w, num_stages=s)  # fmt: skip


def _tma_launcher(a, b, c, bm, bn, bk, g, w, s, b_nk=False, bias=None):
    M, K = a.shape
    N = c.shape[1]
    a_d = TensorDescriptor.from_tensor(a, [bm, bk])
    b_d = TensorDescriptor.from_tensor(b, [bn, bk] if b_nk else [bk, bn])
    c_d = TensorDescriptor.from_tensor(c, [bm, bn])
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)

    def go():
        mm_tma[grid](a_d, b_d, c_d, bias if bias is not None else c, M, N, K,
                     BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=g, B_NK=b_nk, EPILOGUE=bias is not None,
                     num_warps=w, num_stages=s)  # fmt: skip

    return go


def _persistent_launcher(a, b, c, bm, bn, bk, g, w, s):
    M, K = a.shape
    N = b.shape[1]
    sms = runtime.gpu_info().sm_count
    a_d = TensorDescriptor.from_tensor(a, [bm, bk])
    b_d = TensorDescriptor.from_tensor(b, [bk, bn])
    c_d = TensorDescriptor.from_tensor(c, [bm, bn])
    n_tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)

    def go():
        mm_tma_persistent[(min(sms, n_tiles),)](a_d, b_d, c_d, M, N, K, NUM_SMS=sms, BLOCK_M=bm, BLOCK_N=bn,
                                                BLOCK_K=bk, GROUP_M=g, STAGES=s, num_warps=w)  # fmt: skip

    return go


def exp_matmul(log) -> dict:
    rows = []
    # the default GPU allocator for descriptors made on the device is not needed: host descriptors
    ptr_configs = [(128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (256, 128, 64, 8, 3)]
    tma_configs = [(128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (128, 128, 64, 8, 4), (128, 128, 64, 4, 4)]
    for M, N, K in ((8192, 8192, 8192), (4096, 4096, 4096), (8192, 8192, 512)):
        a = torch.randn(M, K, device="cuda", dtype=BF16)
        b = torch.randn(K, N, device="cuda", dtype=BF16)
        c = torch.empty(M, N, device="cuda", dtype=BF16)
        flops = 2 * M * N * K
        ref = a @ b

        def record(variant, fn, **cfg):
            fn()
            err = ((c.float() - ref.float()).norm() / ref.float().norm()).item()
            ms = _ms(fn)
            r = _row(variant, (M, N, K), BF16, ms, flops, rel_err=err, **cfg)
            rows.append(r)
            log(f"{variant:<22}{str((M, N, K)):<20}{str(cfg):<90}{ms * 1e3:9.1f} us {r['tflops']:7.1f} TFLOP/s")

        cublas_ms = _ms(lambda: torch.matmul(a, b, out=c))
        rows.append(_row("cublas", (M, N, K), BF16, cublas_ms, flops))
        log(f"cublas {(M, N, K)}: {cublas_ms * 1e3:.1f} us {flops / cublas_ms / 1e9:.1f} TFLOP/s")
        for bm, bn, bk, w, s in ptr_configs:
            for g in (1, 8):
                cfg = dict(config={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w, "num_stages": s},
                           grouped=g > 1, group_m=g)  # fmt: skip
                _try(
                    log,
                    f"ptr {cfg}",
                    lambda: record("pointer", lambda: _launch_ptr(a, b, c, bm, bn, bk, g, w, s), **cfg),
                )
        for bm, bn, bk, w, s in tma_configs:
            for g in (1, 8):
                cfg = dict(config={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w, "num_stages": s},
                           grouped=g > 1, group_m=g)  # fmt: skip
                _try(log, f"tma {cfg}", lambda: record("tma", _tma_launcher(a, b, c, bm, bn, bk, g, w, s), **cfg))
        for bm, bn, bk, w, s in ((128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (128, 128, 64, 8, 4)):
            for g in (1, 8):
                cfg = dict(config={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w, "num_stages": s},
                           grouped=g > 1, group_m=g)  # fmt: skip
                _try(log, f"persistent {cfg}",
                     lambda: record("tma_persistent", _persistent_launcher(a, b, c, bm, bn, bk, g, w, s), **cfg))  # fmt: skip
        if (M, N, K) == (8192, 8192, 8192):
            # the linear layer's layout (weight (N, K)) and the fused bias + GELU epilogue
            w_nk = b.t().contiguous()  # (N, K)
            bias = torch.randn(N, device="cuda", dtype=BF16)
            for bm, bn, bk, w, s in ((128, 256, 64, 8, 3), (128, 256, 64, 8, 4)):
                for epi in (False, True):
                    cfg = dict(config={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w, "num_stages": s},
                               grouped=True, group_m=8, epilogue=epi)  # fmt: skip
                    launcher = _tma_launcher(a, w_nk, c, bm, bn, bk, 8, w, s, b_nk=True, bias=bias if epi else None)
                    if epi:
                        ref = torch.nn.functional.gelu(a @ b + bias, approximate="tanh")
                    else:
                        ref = a @ b
                    _try(log, f"linear {cfg}", lambda: record("tma_linear", launcher, **cfg))
            x, wt = a, w_nk
            ts = {
                "eager_mm_add_gelu": lambda: torch.nn.functional.gelu(x @ wt.t() + bias, approximate="tanh"),
                "cublas_mm_only": lambda: x @ wt.t(),
                "addmm_gelu_lt": lambda: torch._addmm_activation(bias, x, wt.t(), use_gelu=True),
            }
            for name, fn in ts.items():
                ms = _try(log, name, lambda fn=fn: _ms(fn))
                if ms:
                    rows.append(_row(name, (M, N, K), BF16, ms, flops))
                    log(f"{name:<22}{ms * 1e3:9.1f} us {flops / ms / 1e9:7.1f} TFLOP/s")
        torch.cuda.empty_cache()
    return {"rows": rows}


# --------------------------------------------------------------------------------------------------
# the linear layer at decode shapes: M = 1 to 16 tokens, K = N = 8192


@triton.jit
def lin_small_m(x_ptr, w_ptr, b_ptr, o_ptr, M, N, K, sxm, swn, som,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
                EPILOGUE: tl.constexpr, SEM: tl.constexpr = "relaxed", LOOP: tl.constexpr = "steps"):  # fmt: skip
    # one program per BLOCK_N output features (and one K slice when SPLIT_K > 1); rows past M masked
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows = tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if LOOP == "steps":
        # the slice's steps counted from zero: Triton pipelines this loop (cp.async, num_stages buffers)
        steps = tl.cdiv(tl.cdiv(K, SPLIT_K), BLOCK_K)
        for i in range(0, steps):
            kk = (pid_k * steps + i) * BLOCK_K + ks
            x = tl.load(
                x_ptr + rows[:, None] * sxm + kk[None, :], mask=(rows[:, None] < M) & (kk[None, :] < K), other=0.0
            )
            w = tl.load(w_ptr + cols[:, None] * swn + kk[None, :], mask=kk[None, :] < K, other=0.0)  # (BN, BK)
            acc = tl.dot(x, w.T, acc)
    else:
        # LOOP == "bounds", the 2026-12-01 record's form: over the slice's K offsets. With SPLIT_K > 1
        # Triton 3.6-3.9 does not pipeline it: no cp.async in the PTX, 16 KB of shared memory, each step's
        # loads waited for (compiled here for sm_90: the steps form has 90 cp.async and 120 KB). It is also
        # wrong where a slice is not a multiple of BLOCK_K (slices overlap); at K = 8192, 2 or 4 slices, it is not
        k_per = tl.cdiv(K, SPLIT_K)
        k_start = pid_k * k_per
        for k0 in range(k_start, k_start + k_per, BLOCK_K):
            kk = k0 + ks
            x = tl.load(
                x_ptr + rows[:, None] * sxm + kk[None, :], mask=(rows[:, None] < M) & (kk[None, :] < K), other=0.0
            )
            w = tl.load(w_ptr + cols[:, None] * swn + kk[None, :], mask=kk[None, :] < K, other=0.0)  # (BN, BK)
            acc = tl.dot(x, w.T, acc)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    if SPLIT_K == 1:
        bias = tl.load(b_ptr + cols).to(tl.float32)
        y = acc + bias[None, :]
        if EPILOGUE:
            y = _gelu_tanh(y)
        tl.store(o_ptr + rows[:, None] * som + cols[None, :], y.to(o_ptr.dtype.element_ty), mask=mask)
    else:
        # relaxed: the slices' sums need no ordering among themselves (lin_finish runs after, in stream
        # order); Triton's default, acq_rel, made each of these a fenced atom.acq_rel in the sm_90 PTX.
        # SEM="acq_rel" times that default beside it
        tl.atomic_add(o_ptr + rows[:, None] * som + cols[None, :], acc, mask=mask, sem=SEM)


@triton.jit
def lin_finish(ws_ptr, b_ptr, o_ptr, M, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < M * N
    y = tl.load(ws_ptr + offs, mask=mask) + tl.load(b_ptr + offs % N, mask=mask).to(tl.float32)
    tl.store(o_ptr + offs, _gelu_tanh(y).to(o_ptr.dtype.element_ty), mask=mask)


@triton.jit
def gemv(x_ptr, w_ptr, b_ptr, o_ptr, N, K, swn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # M = 1 without tensor cores: each program dots BLOCK_N rows of the weight with x
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        x = tl.load(x_ptr + k0 + ks).to(tl.float32)
        w = tl.load(w_ptr + cols[:, None] * swn + (k0 + ks)[None, :]).to(tl.float32)
        acc += w * x[None, :]
    y = tl.sum(acc, axis=1) + tl.load(b_ptr + cols).to(tl.float32)
    tl.store(o_ptr + cols, _gelu_tanh(y).to(o_ptr.dtype.element_ty))


def exp_decode(log) -> dict:
    rows = []
    N = K = 8192
    floor_us = N * K * 2 / (4.27e12) * 1e6
    w = torch.randn(N, K, device="cuda", dtype=BF16) * K**-0.5
    bias = torch.randn(N, device="cuda", dtype=BF16)
    for M in (1, 4, 16):
        x = torch.randn(M, K, device="cuda", dtype=BF16)
        out = torch.empty(M, N, device="cuda", dtype=BF16)
        ws = torch.zeros(M, N, device="cuda", dtype=torch.float32)
        ref = torch.nn.functional.gelu(x.float() @ w.float().t() + bias.float(), approximate="tanh")
        n_bytes = (N * K + M * K + N + M * N) * 2

        def record(variant, fn, **cfg):
            fn()
            torch.cuda.synchronize()
            err = ((out.float() - ref).norm() / ref.norm()).item()
            ms = _ms(fn)
            r = _row(variant, (M, N, K), BF16, ms, 2 * M * N * K, n_bytes, rel_err=err, floor_us=floor_us, **cfg)
            rows.append(r)
            log(f"M={M:<3}{variant:<18}{str(cfg):<70}{ms * 1e3:8.1f} us {r['gbs']:7.0f} GB/s err {err:.1e}")

        for name, fn in {
            "eager": lambda: torch.nn.functional.gelu(x @ w.t() + bias, approximate="tanh"),
            "cublas_mm_only": lambda: x @ w.t(),
            "addmm_gelu_lt": lambda: torch._addmm_activation(bias, x, w.t(), use_gelu=True),
        }.items():
            ms = _try(log, name, lambda fn=fn: _ms(fn))
            if ms:
                rows.append(_row(name, (M, N, K), BF16, ms, 2 * M * N * K, n_bytes, floor_us=floor_us))
                log(f"M={M:<3}{name:<18}{ms * 1e3:8.1f} us")
        for bn in (32, 64, 128):
            for bk in (128, 256):
                for wps, st in ((4, 4), (4, 6)):
                    if bn * bk * 2 * st > 200 * 1024:
                        continue
                    cfg = dict(config={"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": wps, "num_stages": st, "split_k": 1})

                    def go(bn=bn, bk=bk, wps=wps, st=st):
                        return lin_small_m[(N // bn, 1)](x, w, bias, out, M, N, K, x.stride(0), w.stride(0), out.stride(0),
                                                         BLOCK_M=16, BLOCK_N=bn, BLOCK_K=bk, SPLIT_K=1, EPILOGUE=True,
                                                         num_warps=wps, num_stages=st)  # fmt: skip

                    cfg["config"].update(_kernel_resources(_try(log, f"small_m compile {cfg}", go)))
                    _try(log, f"small_m {cfg}", lambda: record("small_m", go, **cfg))
        # split-K: K cut in `split` slices, each program adds its slice's sum into a zeroed float32 buffer
        # (atomics), then lin_finish applies bias and GELU. Timed on the plain kernel's good tiles (so the
        # difference is the split's own cost), whole and in its three parts, with relaxed atomics and with
        # Triton's default (acq_rel), and with the 2026-12-01 record's loop form ("bounds", not pipelined);
        # also on that record's two wide tiles (58-2037 us there: experiment_decode_2026-12-01_h200.json),
        # with the compiled kernel's registers, spills and shared memory beside each, to say what made those slow
        tiles = [(64, 256, 4, "plain's best"), (32, 128, 6, "plain's best"), (64, 128, 6, "plain's best"),
                 (128, 256, 4, "2026-12-01 record"), (256, 128, 4, "2026-12-01 record")]  # fmt: skip
        forms = (("relaxed", "steps"), ("acq_rel", "steps"), ("relaxed", "bounds"))
        for bn, bk, st, why in tiles:
            for split in (2, 4):
                for sem, loop in forms:
                    cfg = dict(config={"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 4, "num_stages": st,
                                       "split_k": split, "sem": sem, "loop": loop, "tile": why})  # fmt: skip

                    def partial(bn=bn, bk=bk, st=st, split=split, sem=sem, loop=loop):
                        return lin_small_m[(N // bn, split)](
                            x, w, bias, ws, M, N, K, x.stride(0), w.stride(0), ws.stride(0),
                            BLOCK_M=16, BLOCK_N=bn, BLOCK_K=bk, SPLIT_K=split, EPILOGUE=True, SEM=sem, LOOP=loop,
                            num_warps=4, num_stages=st,
                        )  # fmt: skip

                    def finish():
                        lin_finish[(triton.cdiv(M * N, 1024),)](ws, bias, out, M, N, BLOCK=1024)

                    def go_split(partial=partial, finish=finish):
                        ws.zero_()
                        partial()
                        finish()

                    compiled = _try(log, f"split_k compile {cfg}", partial)
                    cfg["config"].update(_kernel_resources(compiled))
                    _try(log, f"split_k {cfg}", lambda: record("split_k", go_split, **cfg))
                    if (sem, loop) == forms[0]:  # the parts, each alone (the partial sums pile up: timing only)
                        for part, fn in (("zero", ws.zero_), ("partial", partial), ("finish", finish)):
                            ms = _try(log, f"split_k_{part}", lambda fn=fn: _ms(fn))
                            if ms:
                                rows.append(_row(f"split_k_{part}", (M, N, K), BF16, ms, **cfg))
                                log(f"M={M:<3}split_k_{part:<10}{str(cfg['config']):<70}{ms * 1e3:8.1f} us")
        if M == 1:
            for bn, bk, wps in ((16, 512, 4), (32, 256, 4), (64, 128, 4), (32, 512, 8)):
                cfg = dict(config={"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": wps})

                def go_gemv(bn=bn, bk=bk, wps=wps):
                    gemv[(N // bn,)](x, w, bias, out, N, K, w.stride(0), BLOCK_N=bn, BLOCK_K=bk, num_warps=wps)

                _try(log, f"gemv {cfg}", lambda: record("gemv", go_gemv, **cfg))
    return {"rows": rows, "floor_us": floor_us}


def exp_decode_compile(log) -> dict:
    """torch.compile of the eager layer as new token counts arrive: static shapes (a compile per M)
    against dynamic=True (one graph for every M)."""
    import torch._dynamo

    rows = []
    N = K = 8192
    w = torch.randn(N, K, device="cuda", dtype=BF16) * K**-0.5
    bias = torch.randn(N, device="cuda", dtype=BF16)

    def layer(x, w, bias):
        return torch.nn.functional.gelu(x @ w.t() + bias, approximate="tanh")

    for mode, kwargs in (("static", {"dynamic": False}), ("dynamic", {"dynamic": True})):
        torch._dynamo.reset()
        compiled = torch.compile(layer, **kwargs)
        for M in (1, 2, 3, 4, 8, 16, 5):
            x = torch.randn(M, K, device="cuda", dtype=BF16)
            torch.cuda.synchronize()
            start = time.perf_counter()
            compiled(x, w, bias)
            torch.cuda.synchronize()
            first_s = time.perf_counter() - start
            ms = _ms(lambda: compiled(x, w, bias))
            eager_ms = _ms(lambda: layer(x, w, bias))
            rows.append({"M": M, "mode": mode, "compile_s": first_s, "median_us": ms * 1e3, "eager_us": eager_ms * 1e3})
            log(f"{mode:<8} M={M:<3} first call {first_s:6.2f} s, then {ms * 1e3:6.1f} us (eager {eager_ms * 1e3:.1f})")
    return {"rows": rows}


# --------------------------------------------------------------------------------------------------
# transposes


@triton.jit
def transpose_naive(x_ptr, o_ptr, M, N, sxm, som, BLOCK: tl.constexpr):
    # one row of x per program (in BLOCK pieces), stored as a column of out: a warp's stores hit 32 rows
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + row * sxm + cols, mask=cols < N)
    tl.store(o_ptr + cols * som + row, v, mask=cols < N)


@triton.jit
def transpose_tiled(x_ptr, o_ptr, M, N, sxm, som, BM: tl.constexpr, BN: tl.constexpr, TRANS: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tile = tl.load(x_ptr + rows[:, None] * sxm + cols[None, :], mask=mask)  # (BM, BN)
    if TRANS:
        # store the transposed tile, addressed row by row of out
        tl.store(o_ptr + cols[:, None] * som + rows[None, :], tl.trans(tile), mask=tl.trans(mask))
    else:
        tl.store(o_ptr + cols[None, :] * som + rows[:, None], tile, mask=mask)


def exp_transpose(log) -> dict:
    rows = []
    for M, N in ((16384, 16384), (8192, 8192)):
        x = torch.randn(M, N, device="cuda")
        out = torch.empty(N, M, device="cuda")
        ref = x.t().contiguous()
        n_bytes = 2 * M * N * 4

        def record(variant, fn, **cfg):
            fn()
            ok = torch.equal(out, ref) if variant not in ("copy",) else None
            ms = _ms(fn)
            r = _row(variant, (M, N), torch.float32, ms, 0, n_bytes, exact=ok, **cfg)
            rows.append(r)
            log(f"{variant:<16}{str((M, N)):<16}{str(cfg):<60}{ms * 1e3:9.1f} us {r['gbs']:7.0f} GB/s exact={ok}")

        record("copy", lambda: out.view(-1).copy_(x.view(-1)))
        record("torch", lambda: out.copy_(x.t()))
        for block in (256, 1024):
            record("naive", lambda block=block: transpose_naive[(M, triton.cdiv(N, block))](
                x, out, M, N, x.stride(0), out.stride(0), BLOCK=block, num_warps=4), config={"BLOCK": block})  # fmt: skip
        for bm, bn, wps in ((32, 32, 4), (64, 64, 4), (64, 64, 8), (128, 128, 8), (32, 128, 4), (128, 32, 4)):
            for trans in (False, True):
                cfg = {"config": {"BM": bm, "BN": bn, "num_warps": wps, "tl.trans": trans}}
                _try(log, f"tiled {cfg}", lambda: record("tiled", lambda: transpose_tiled[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
                    x, out, M, N, x.stride(0), out.stride(0), BM=bm, BN=bn, TRANS=trans, num_warps=wps), **cfg))  # fmt: skip
        torch.cuda.empty_cache()
    return {"rows": rows}


# --------------------------------------------------------------------------------------------------
# the batched GEMM with K = 866 (1732-byte rows) against K padded to 872 (1744 bytes) and 880


@triton.jit
def bmm_ptr(a_ptr, b_ptr, c_ptr, M, N, K, sab, sam, sbb, sbk, scb, scm,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, HINT: tl.constexpr):  # fmt: skip
    # a (B, M, K) rows sam apart; b (B, K, N) rows sbk apart; c (B, M, N)
    batch = tl.program_id(1)
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    pid_m = tl.program_id(0) // n_col_tiles
    pid_n = tl.program_id(0) % n_col_tiles
    if HINT >= 1:
        # the launcher promises rows 16 bytes apart (8 elements of 2 bytes) and 16-byte aligned bases
        sam = tl.multiple_of(sam, 8)
        sab = tl.multiple_of(sab, 8)
    if HINT >= 2:
        # and a K that is a multiple of 8, so the mask on K is constant over 8 elements
        K = tl.multiple_of(K, 8)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + batch * sab + (rows % M)[:, None] * sam + ks[None, :]
    b_ptrs = b_ptr + batch * sbb + ks[:, None] * sbk + cols[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k0, other=0.0)
        b = tl.load(b_ptrs, mask=(ks[:, None] < K - k0) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * sbk
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + batch * scb + rows[:, None] * scm + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def bmm_tma(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # 3-D descriptors over (B, M, K), (B, K, N), (B, M, N): a tile never crosses into the next batch,
    # and the hardware fills reads past M, N or K with zeros (no masks)
    batch = tl.program_id(1)
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    off_m = (tl.program_id(0) // n_col_tiles) * BLOCK_M
    off_n = (tl.program_id(0) % n_col_tiles) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([batch, off_m, k]).reshape(BLOCK_M, BLOCK_K)
        b = b_desc.load([batch, k, off_n]).reshape(BLOCK_K, BLOCK_N)
        acc = tl.dot(a, b, acc)
    c_desc.store([batch, off_m, off_n], acc.to(c_desc.dtype).reshape(1, BLOCK_M, BLOCK_N))


def exp_padded_k(log) -> dict:
    rows = []
    B, M, N, K = 1024, 433, 256, 866
    for dtype in (BF16,):
        for kp in (866, 872, 880):
            a = torch.zeros(B, M, kp, device="cuda", dtype=dtype)
            a[:, :, :K] = torch.randn(B, M, K, device="cuda", dtype=dtype) * K**-0.25
            b = torch.zeros(B, kp, N, device="cuda", dtype=dtype)
            b[:, :K] = torch.randn(B, K, N, device="cuda", dtype=dtype) * K**-0.25
            c = torch.empty(B, M, N, device="cuda", dtype=dtype)
            ref = torch.bmm(a.float(), b.float())
            flops = 2 * B * M * N * K

            def record(variant, fn, **cfg):
                fn()
                err = ((c.float() - ref).norm() / ref.norm()).item()
                ms = _ms(fn)
                r = _row(variant, (B, M, N, kp), dtype, ms, flops, rel_err=err, k_stride=kp, **cfg)
                rows.append(r)
                log(
                    f"K stride {kp}: {variant:<10}{str(cfg):<70}{ms * 1e3:9.1f} us {r['tflops']:6.1f} TFLOP/s err {err:.1e}"
                )

            record("cublas", lambda: torch.bmm(a, b, out=c))
            for bm, bn, bk, wps, st in (
                (128, 128, 64, 8, 3),
                (128, 256, 64, 8, 3),
                (64, 256, 64, 4, 4),
                (128, 128, 32, 4, 4),
            ):
                for hint in (0, 1, 2):
                    if hint and kp % 8:
                        continue
                    cfg = {
                        "config": {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": wps, "num_stages": st},
                        "hint": hint,
                    }

                    def go(bm=bm, bn=bn, bk=bk, wps=wps, st=st, hint=hint):
                        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), B)
                        bmm_ptr[grid](a, b, c, M, N, kp, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                      c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, HINT=hint,
                                      num_warps=wps, num_stages=st)  # fmt: skip

                    _try(log, f"bmm {cfg}", lambda: record("triton", go, **cfg))
            if kp % 8 == 0:
                for bm, bn, bk, wps, st in ((128, 256, 64, 8, 3), (128, 128, 64, 8, 4), (64, 256, 64, 4, 4)):
                    cfg = {"config": {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": wps, "num_stages": st}}

                    def go_tma(bm=bm, bn=bn, bk=bk, wps=wps, st=st):
                        a_d = TensorDescriptor.from_tensor(a, [1, bm, bk])
                        b_d = TensorDescriptor.from_tensor(b, [1, bk, bn])
                        c_d = TensorDescriptor.from_tensor(c, [1, bm, bn])
                        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), B)
                        bmm_tma[grid](a_d, b_d, c_d, M, N, kp, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=wps,
                                      num_stages=st)  # fmt: skip

                    _try(log, f"bmm tma {cfg}", lambda: record("triton_tma", go_tma, **cfg))
            torch.cuda.empty_cache()
    return {"rows": rows}


# --------------------------------------------------------------------------------------------------
# the linear layer's weight layout (N, K) at 8192^3: pointer loads of w.T, descriptors, persistence


@triton.jit
def lin_ptr(x_ptr, w_ptr, b_ptr, o_ptr, M, N, K, sxm, swn, som,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
            EPILOGUE: tl.constexpr):  # fmt: skip
    pid_m, pid_n = _tile_of(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + (rows % M)[:, None] * sxm + ks[None, :]
    w_ptrs = w_ptr + (cols % N)[None, :] * swn + ks[:, None]  # (BLOCK_K, BLOCK_N): w.T through strides
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(x_ptrs, mask=ks[None, :] < K - k0, other=0.0)
        b = tl.load(w_ptrs, mask=ks[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    if EPILOGUE:
        bias = tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc = _gelu_tanh(acc + bias[None, :])
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(o_ptr + rows[:, None] * som + cols[None, :], acc.to(o_ptr.dtype.element_ty), mask=mask)


@triton.jit
def lin_tma_persistent(x_desc, w_desc, o_desc, b_ptr, M, N, K, NUM_SMS: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                       STAGES: tl.constexpr, EPILOGUE: tl.constexpr):  # fmt: skip
    n_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    for tile in range(tl.program_id(0), n_tiles, NUM_SMS):
        pid_m, pid_n = _tile_of(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in tl.range(0, k_steps, num_stages=STAGES):
            a = x_desc.load([pid_m * BLOCK_M, kk * BLOCK_K])
            b = w_desc.load([pid_n * BLOCK_N, kk * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        if EPILOGUE:
            cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            bias = tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
            acc = _gelu_tanh(acc + bias[None, :])
        o_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(o_desc.dtype))


def exp_linear(log) -> dict:
    import torch._dynamo

    rows = []
    sms = runtime.gpu_info().sm_count
    for M, N, K in ((8192, 8192, 8192), (4096, 4096, 4096)):
        x = torch.randn(M, K, device="cuda", dtype=BF16) * K**-0.25
        w = torch.randn(N, K, device="cuda", dtype=BF16) * K**-0.25
        bias = torch.randn(N, device="cuda", dtype=BF16)
        out = torch.empty(M, N, device="cuda", dtype=BF16)
        flops = 2 * M * N * K
        refs = {False: (x.float() @ w.float().t()), True: None}
        refs[True] = torch.nn.functional.gelu(refs[False] + bias.float(), approximate="tanh")

        def record(variant, fn, epi, **cfg):
            fn()
            ref = refs[epi]
            err = ((out.float() - ref).norm() / ref.norm()).item()
            ms = _ms(fn)
            r = _row(variant, (M, N, K), BF16, ms, flops, rel_err=err, epilogue=epi, **cfg)
            rows.append(r)
            log(
                f"{variant:<18}{str((M, N, K)):<20}epi={epi!s:<6}{str(cfg):<86}{ms * 1e3:8.1f} us {r['tflops']:6.1f} TFLOP/s"
            )

        for name, fn in {
            "eager": lambda: torch.nn.functional.gelu(x @ w.t() + bias, approximate="tanh"),
            "cublas_mm_only": lambda: torch.matmul(x, w.t(), out=out),
            "addmm_gelu_lt": lambda: torch._addmm_activation(bias, x, w.t(), use_gelu=True),
        }.items():
            ms = _try(log, name, lambda fn=fn: _ms(fn))
            if ms:
                rows.append(_row(name, (M, N, K), BF16, ms, flops))
                log(f"{name:<18}{str((M, N, K)):<20}{ms * 1e3:8.1f} us {flops / ms / 1e9:6.1f} TFLOP/s")
        for bm, bn, bk, wps, st in (
            (128, 256, 64, 8, 3),
            (128, 256, 64, 8, 4),
            (256, 128, 64, 8, 3),
            (128, 128, 64, 8, 4),
        ):
            for epi in (False, True):
                cfg = {"config": {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": wps, "num_stages": st}}

                def go(bm=bm, bn=bn, bk=bk, wps=wps, st=st, epi=epi):
                    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
                    lin_ptr[grid](x, w, bias, out, M, N, K, x.stride(0), w.stride(0), out.stride(0), BLOCK_M=bm,
                                  BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, EPILOGUE=epi, num_warps=wps, num_stages=st)  # fmt: skip

                _try(log, f"lin_ptr {cfg}", lambda: record("pointer", go, epi, **cfg))
        for bm, bn, bk, wps, st in ((128, 256, 64, 8, 3), (128, 128, 64, 8, 4), (128, 128, 64, 8, 5)):
            for epi in (False, True):
                cfg = {"config": {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": wps, "num_stages": st}}
                x_d = TensorDescriptor.from_tensor(x, [bm, bk])
                w_d = TensorDescriptor.from_tensor(w, [bn, bk])
                o_d = TensorDescriptor.from_tensor(out, [bm, bn])
                n_tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)

                def go_p(bm=bm, bn=bn, bk=bk, wps=wps, st=st, epi=epi, x_d=x_d, w_d=w_d, o_d=o_d, n_tiles=n_tiles):
                    lin_tma_persistent[(min(sms, n_tiles),)](x_d, w_d, o_d, bias, M, N, K, NUM_SMS=sms, BLOCK_M=bm,
                                                              BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, STAGES=st,
                                                              EPILOGUE=epi, num_warps=wps)  # fmt: skip

                _try(log, f"lin_tma_persistent {cfg}", lambda: record("tma_persistent", go_p, epi, **cfg))
        for mode in ("default", "max-autotune"):
            # at its best: max-autotune without its CUDA graphs' per-call input copy (timing.compiled_at_best)
            def fused(x, w, bias):
                return torch.nn.functional.gelu(x @ w.t() + bias, approximate="tanh")

            got = _try(
                log, f"compile {mode}", lambda: timing.compiled_at_best(fused, mode, {"x": x, "w": w, "bias": bias})
            )
            if not got:
                continue
            layer, how, compile_s = got
            ms = _try(log, f"compiled {mode}", lambda: _ms(lambda: layer(x=x, w=w, bias=bias)))
            if ms:
                rows.append(
                    _row(f"torch_compile_{mode}", (M, N, K), BF16, ms, flops, compile_s=compile_s, compile_config=how)
                )
                log(
                    f"torch.compile {mode:<14}{ms * 1e3:8.1f} us {flops / ms / 1e9:6.1f} TFLOP/s "
                    f"(compile {compile_s:.1f} s; {how})"
                )
        torch.cuda.empty_cache()
    return {"rows": rows}


def exp_host(log) -> dict:
    """What the host spends per call at a decode shape: the GPU time a timing with hidden launches
    reports against the wall time of calls made back to back, as a decoding loop makes them."""
    import torch._dynamo

    N = K = 8192
    w = torch.randn(N, K, device="cuda", dtype=BF16) * K**-0.5
    bias = torch.randn(N, device="cuda", dtype=BF16)
    x = torch.randn(4, K, device="cuda", dtype=BF16)
    out = torch.empty(4, N, device="cuda", dtype=BF16)

    def layer(x, w, bias):
        return torch.nn.functional.gelu(x @ w.t() + bias, approximate="tanh")

    torch._dynamo.reset()
    static = torch.compile(layer, dynamic=False)
    dynamic = torch.compile(layer, dynamic=True)

    def small_m():
        lin_small_m[(N // 64, 1)](x, w, bias, out, 4, N, K, x.stride(0), w.stride(0), out.stride(0), BLOCK_M=16,
                                  BLOCK_N=64, BLOCK_K=256, SPLIT_K=1, EPILOGUE=True, num_warps=4, num_stages=4)  # fmt: skip

    fns = {"eager": lambda: layer(x, w, bias), "compile static": lambda: static(x, w, bias),
           "compile dynamic": lambda: dynamic(x, w, bias), "triton small_m": small_m}  # fmt: skip
    graph_fns = {}
    for name, fn in fns.items():
        fn()
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            fn()
        graph_fns[name + " (CUDA graph)"] = g.replay
    rows = []
    for name, fn in {**fns, **graph_fns}.items():
        fn()
        gpu_us = _ms(fn) * 1e3
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        wall_us = (time.perf_counter() - start) / 200 * 1e6
        rows.append({"variant": name, "M": 4, "gpu_us": gpu_us, "wall_us_back_to_back": wall_us})
        log(f"{name:<34} GPU {gpu_us:6.1f} us   back to back {wall_us:6.1f} us per call")
    return {"rows": rows}


def exp_stages(log) -> dict:
    """num_stages 1 to 4 on chapter 06's pointer-load kernel (grouped), bf16: what software pipelining
    of the loads is worth, set beside course_lib.pipeline_sim's prediction in chapter 09."""
    rows = []
    for M, N, K in ((8192, 8192, 8192), (8192, 8192, 512)):
        a = torch.randn(M, K, device="cuda", dtype=BF16)
        b = torch.randn(K, N, device="cuda", dtype=BF16)
        c = torch.empty(M, N, device="cuda", dtype=BF16)
        flops = 2 * M * N * K
        cublas = _ms(lambda: torch.matmul(a, b, out=c))
        rows.append(_row("cublas", (M, N, K), BF16, cublas, flops))
        for bm, bn, bk, w in ((128, 256, 64, 8), (128, 128, 64, 8)):
            for st in (1, 2, 3, 4):
                cfg = {"config": {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w, "num_stages": st}}

                def go(bm=bm, bn=bn, bk=bk, w=w, st=st):
                    _launch_ptr(a, b, c, bm, bn, bk, 8, w, st)

                ms = _try(log, f"stages {cfg}", lambda go=go: (go(), _ms(go))[1])
                if ms:
                    rows.append(_row("pointer", (M, N, K), BF16, ms, flops, **cfg))
                    log(f"{(M, N, K)} {bm}x{bn}x{bk} stages {st}: {ms * 1e3:8.1f} us {flops / ms / 1e9:6.0f} TFLOP/s")
        torch.cuda.empty_cache()
    return {"rows": rows}


@triton.jit
def mm_auto_ws(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, STAGES: tl.constexpr, WS: tl.constexpr):  # fmt: skip
    # chapter 09, section 5: the same descriptor loop, with and without tl.range(warp_specialize=...)
    pid_m, pid_n = _tile_of(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kk in tl.range(0, tl.cdiv(K, BLOCK_K), num_stages=STAGES, warp_specialize=WS):
        a = a_desc.load([pid_m * BLOCK_M, kk * BLOCK_K])
        b = b_desc.load([kk * BLOCK_K, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


@triton.jit
def mm_auto_ws_ptr(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, STAGES: tl.constexpr, WS: tl.constexpr):  # fmt: skip
    # the pointer-load form of the same loop (contiguous a, b, c; M, N, K multiples of the tile)
    pid_m, pid_n = _tile_of(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in tl.range(0, K, BLOCK_K, num_stages=STAGES, warp_specialize=WS):
        a = tl.load(a_ptr + rows[:, None] * K + (k0 + ks)[None, :])
        b = tl.load(b_ptr + (k0 + ks)[:, None] * N + cols[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty))


def exp_auto_ws(log) -> dict:
    """tl.range(..., warp_specialize=True) against the same loop without it, timed on Hopper: whether
    the compiler's own warp specialization compiles, whether it makes a warp_specialize region, and
    what it is worth, at 4 and 8 warps, for tensor-descriptor and pointer loads."""
    rows = []
    for M, N, K in ((8192, 8192, 8192), (8192, 8192, 512)):
        a = torch.randn(M, K, device="cuda", dtype=BF16)
        b = torch.randn(K, N, device="cuda", dtype=BF16)
        c = torch.empty(M, N, device="cuda", dtype=BF16)
        ref = a.float() @ b.float()
        flops = 2 * M * N * K
        rows.append(_row("cublas", (M, N, K), BF16, _ms(lambda: torch.matmul(a, b, out=c)), flops))
        bm, bn, bk = 128, 256, 64
        a_d = TensorDescriptor.from_tensor(a, [bm, bk])
        b_d = TensorDescriptor.from_tensor(b, [bk, bn])
        c_d = TensorDescriptor.from_tensor(c, [bm, bn])
        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
        for form in ("descriptors", "pointers"):
            for warps in (4, 8):
                for ws in (False, True):
                    cfg = {"form": form, "num_warps": warps, "warp_specialize": ws, "num_stages": 3}

                    def go(form=form, warps=warps, ws=ws):
                        if form == "descriptors":
                            return mm_auto_ws[grid](a_d, b_d, c_d, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                                    GROUP_M=8, STAGES=3, WS=ws, num_warps=warps)  # fmt: skip
                        return mm_auto_ws_ptr[grid](a, b, c, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                                    STAGES=3, WS=ws, num_warps=warps)  # fmt: skip

                    c.zero_()
                    compiled = _try(log, f"auto_ws {cfg}", go)
                    if compiled is None:
                        rows.append({**_row(f"auto_ws_{form}", (M, N, K), BF16, None), **cfg, "compiles": False})
                        continue
                    region = "ttg.warp_specialize" in compiled.asm["ttgir"]
                    err = ((c.float() - ref).norm() / ref.norm()).item()
                    ms = _ms(go)
                    rows.append(_row(f"auto_ws_{form}", (M, N, K), BF16, ms, flops, **cfg, compiles=True,
                                     region=region, rel_err=err))  # fmt: skip
                    log(f"{(M, N, K)} {form} {warps} warps ws={ws}: region {region}, {ms * 1e3:.1f} us "
                        f"{flops / ms / 1e9:.0f} TFLOP/s, err {err:.1e}")  # fmt: skip
        torch.cuda.empty_cache()
    return {"rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "which",
        nargs="+",
        choices=["matmul", "decode", "decode_compile", "transpose", "padded_k", "linear", "host", "stages", "auto_ws"],
    )
    ap.add_argument("--out", default="results/session")
    args = ap.parse_args()
    from pathlib import Path

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"gpu": runtime.gpu_info().name, "versions": runtime.versions(), "date": time.strftime("%Y-%m-%d")}
    for name in args.which:
        start = time.time()
        print(f"\n===== {name}", flush=True)
        try:
            data = globals()[f"exp_{name}"](lambda s: print(s, flush=True))
        except Exception:
            traceback.print_exc()
            continue
        data["seconds"] = round(time.time() - start, 1)
        (out / f"experiment_{name}.json").write_text(json.dumps({"meta": meta, **data}, indent=1))
        print(f"({name}: {time.time() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
