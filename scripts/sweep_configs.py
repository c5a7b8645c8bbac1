"""Sweep launch configurations of the row kernels on a GPU, next to torch, and print the best per
shape. The launchers' heuristic (course_lib.tuned.row_config, used by solutions/softmax.py and
layernorm.py) was chosen from this sweep's output. (The bias + GELU tile was chosen with
scripts/experiments.py gelu.)

    PYTHONPATH=. python3 scripts/sweep_configs.py [--out sweep.json]
"""

from __future__ import annotations

import argparse
import json
import time

import course_lib  # noqa: F401  (mode set-up first)
import torch
import triton

from course_lib import runtime, sources, timing


def _t(fn) -> float:
    return timing.bench(fn, warmup_ms=10, rep_ms=50).median_ms * 1e3  # microseconds


def sweep_rows(log):
    softmax, layernorm = sources.load_module("softmax"), sources.load_module("layernorm")
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
                for warps in (1, 2, 4, 8, 16, 32):
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    args = parser.parse_args()
    data = {"gpu": runtime.gpu_info().name, "versions": runtime.versions(), "date": time.strftime("%Y-%m-%d")}
    data["note"] = (
        "rows per program x warps for solutions/softmax.py and layernorm.py, 4096 rows; microseconds, median of "
        "course_lib.timing.bench (CUDA events, L2 flushed by a read; warm-up 10 ms, 50 ms of calls)"
    )
    data["rows"] = sweep_rows(print)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(data, f, indent=1)


if __name__ == "__main__":
    main()
