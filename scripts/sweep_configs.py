"""Sweep launch configurations of the row and tile kernels on a GPU, next to torch, and print the
best per shape. The launchers' heuristics (row_config in solutions/softmax.py and layernorm.py, the
tile of solutions/fused_bias_gelu.py) were chosen from this sweep's output.

    PYTHONPATH=. python3 scripts/sweep_configs.py [--out sweep.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time

import course_lib  # noqa: F401  (mode set-up first)
import torch
import triton
import triton.language as tl

from course_lib import runtime, timing

ROOT = runtime.course_root()


def _solution(name):
    spec = importlib.util.spec_from_file_location(f"sol_{name}", ROOT / "solutions" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _t(fn) -> float:
    return timing.bench(fn, warmup_ms=10, rep_ms=40).median_ms * 1e3  # microseconds


def sweep_rows(log):
    softmax, layernorm = _solution("softmax"), _solution("layernorm")
    rows_out = []
    for dtype in (torch.bfloat16, torch.float32):
        for n in (512, 1024, 2048, 4096, 8192):
            x = torch.randn(4096, n, device="cuda", dtype=dtype)
            w = torch.randn(n, device="cuda", dtype=dtype)
            b = torch.randn(n, device="cuda", dtype=dtype)
            out = torch.empty_like(x)
            block_n = triton.next_power_of_2(n)
            base = {
                "softmax_eager": _t(lambda x=x: torch.softmax(x, -1)),
                "layernorm_eager": _t(lambda x=x, w=w, b=b: torch.nn.functional.layer_norm(x, (x.shape[1],), w, b)),
            }
            sm_c = torch.compile(lambda x: torch.softmax(x, -1))
            ln_c = torch.compile(lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[1],), w, b))
            base["softmax_compile"] = _t(lambda x=x: sm_c(x))
            base["layernorm_compile"] = _t(lambda x=x, w=w, b=b: ln_c(x, w, b))
            results = []
            for rows in (1, 2, 4, 8, 16, 32):
                if not 256 <= rows * block_n <= 32768:
                    continue
                for warps in (2, 4, 8, 16, 32):
                    if rows * block_n // (32 * warps) < 4 or rows * block_n // (32 * warps) > 128:
                        continue
                    grid = (triton.cdiv(4096, rows),)

                    def sm(rows=rows, warps=warps, grid=grid, x=x, out=out, n=n):
                        softmax.softmax_kernel[grid](
                            x, out, 4096, n, x.stride(0), out.stride(0), ROWS=rows, BLOCK_N=block_n, num_warps=warps
                        )

                    def ln(rows=rows, warps=warps, grid=grid, x=x, out=out, n=n, w=w, b=b):
                        layernorm.layernorm_kernel[grid](
                            x, w, b, out, 4096, n, x.stride(0), out.stride(0), 1e-5,
                            ROWS=rows, BLOCK_N=block_n, num_warps=warps,
                        )  # fmt: skip

                    results.append({"rows": rows, "warps": warps, "softmax": _t(sm), "layernorm": _t(ln)})
            best_sm = min(results, key=lambda r: r["softmax"])
            best_ln = min(results, key=lambda r: r["layernorm"])
            row = {
                "dtype": str(dtype),
                "n": n,
                **base,
                "configs": results,
                "best_softmax": best_sm,
                "best_layernorm": best_ln,
            }
            rows_out.append(row)
            log(
                f"{str(dtype):<15}{n:>6}  softmax best {best_sm['softmax']:7.1f} us (rows {best_sm['rows']}, "
                f"warps {best_sm['warps']}) eager {base['softmax_eager']:.1f} compile {base['softmax_compile']:.1f} | "
                f"layernorm best {best_ln['layernorm']:7.1f} (rows {best_ln['rows']}, warps {best_ln['warps']}) "
                f"eager {base['layernorm_eager']:.1f} compile {base['layernorm_compile']:.1f}"
            )
    return rows_out


def sweep_gelu(log):
    gelu = _solution("fused_bias_gelu")
    out_rows = []
    for dtype in (torch.bfloat16, torch.float32):
        x = torch.randn(8192, 8192, device="cuda", dtype=dtype)
        bias = torch.randn(8192, device="cuda", dtype=dtype)
        out = torch.empty_like(x)
        f = lambda x, b: torch.nn.functional.gelu(x + b, approximate="tanh")  # noqa: E731
        fc = torch.compile(f)
        base = {"eager": _t(lambda: f(x, bias)), "compile": _t(lambda: fc(x, bias))}
        results = []
        for block_n in (256, 512, 1024, 2048):
            for tile in (2048, 4096, 8192, 16384):
                block_m = max(1, tile // block_n)
                for warps in (4, 8, 16):
                    grid = (triton.cdiv(8192, block_m), triton.cdiv(8192, block_n))

                    def run(block_m=block_m, block_n=block_n, warps=warps, grid=grid):
                        gelu.bias_gelu_kernel[grid](
                            x, bias, out, 8192, 8192, x.stride(0), out.stride(0),
                            TANH=True, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps,
                        )  # fmt: skip

                    results.append({"block_m": block_m, "block_n": block_n, "warps": warps, "us": _t(run)})
        best = min(results, key=lambda r: r["us"])
        gbs = 2 * x.numel() * x.element_size() / (best["us"] * 1e-6) / 1e9
        log(
            f"gelu {str(dtype):<15} best {best} = {gbs:.0f} GB/s; eager {base['eager']:.1f} compile {base['compile']:.1f}"
        )
        out_rows.append({"dtype": str(dtype), **base, "configs": results, "best": best})
    return out_rows


@triton.jit
def _gelu_flat_kernel(x_ptr, bias_ptr, out_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    """The layout torch.compile picks: the matrix as one flat vector, bias gathered by column."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    u = tl.load(x_ptr + offsets, mask=mask).to(tl.float32) + tl.load(bias_ptr + offsets % n_cols, mask=mask).to(
        tl.float32
    )
    z = 1.5957691216057308 * u * (1.0 + 0.044715 * u * u)
    tl.store(out_ptr + offsets, tl.fdiv(u, 1.0 + tl.exp(-z)).to(out_ptr.dtype.element_ty), mask=mask)


def sweep_gelu_flat(log):
    rows = []
    for dtype in (torch.bfloat16, torch.float32):
        x = torch.randn(8192, 8192, device="cuda", dtype=dtype)
        bias = torch.randn(8192, device="cuda", dtype=dtype)
        out = torch.empty_like(x)
        for block in (512, 1024, 2048, 4096):
            for warps in (4, 8):
                grid = (triton.cdiv(x.numel(), block),)
                us = _t(
                    lambda grid=grid, block=block, warps=warps: _gelu_flat_kernel[grid](
                        x, bias, out, x.numel(), 8192, BLOCK=block, num_warps=warps
                    )
                )
                rows.append({"dtype": str(dtype), "block": block, "warps": warps, "us": us})
        best = min((r for r in rows if r["dtype"] == str(dtype)), key=lambda r: r["us"])
        log(f"gelu flat {best}")
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--only", choices=["rows", "gelu", "gelu_flat"])
    args = parser.parse_args()
    data = {"gpu": runtime.gpu_info().name, "versions": runtime.versions(), "date": time.strftime("%Y-%m-%d")}
    if args.only in (None, "rows"):
        data["rows"] = sweep_rows(print)
    if args.only in (None, "gelu"):
        data["gelu"] = sweep_gelu(print)
    if args.only in (None, "gelu_flat"):
        data["gelu_flat"] = sweep_gelu_flat(print)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(data, f, indent=1)


if __name__ == "__main__":
    main()
