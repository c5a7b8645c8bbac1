"""The capstone's last step on a GPU (chapter 10): solutions/ws_compression.py, the candidate GEMM of the
linear compression warp-specialized and persistent in Gluon on Hopper, with the user's part added in
its epilogue by index lookup, and the user GEMM as a first launch (the cooperative kernel); checked and
timed at the capstone's three shapes. --sweep and --smoke run its variants (scripts/capstone_variants.py:
other tiles, schedules and user modes); --smoke also runs the whole step in one launch
(capstone_one_launch_kernel) against the float64 reference.

    out[b] = W_c @ E_cand[b] + user_out[user_of[b]],   user_out[u] = W_u @ E_user[u]

One producer warp issues TMA loads of W's tile (M, K padded to 16-byte rows) and of E's tile (3-D
descriptors: the K tail of each batch is zero-filled, never read from the next one) into a ring of
NUM_BUFFERS slots; two consumer warpgroups run wgmma on them. Tiles are numbered with the M tiles of
one (batch, N tile) next to each other, so programs that run together read the same E tile: E comes
from memory once, W stays in the L2.

    PYTHONPATH=. python3 scripts/gluon_capstone.py             # compile for sm_90 (no GPU), list the PTX ops
    PYTHONPATH=. python3 scripts/gluon_capstone.py --run OUT   # on a Hopper GPU: check and time
    PYTHONPATH=. python3 scripts/gluon_capstone.py --sweep OUT # on a Hopper GPU: the candidate GEMM's tiles,
                                                               # programs per SM and user modes, each checked
"""

from __future__ import annotations

from pathlib import Path

import course_lib  # noqa: F401  (mode set-up first)
import torch

from course_lib import compilation, sources
from course_lib.tasks import ch10_capstone as ch10
from course_lib.tasks import ch10_warp_specialized as ch10ws

solution = sources.load_module("ws_compression", "solutions")  # the kernels and their launcher (chapter 10, step 4)
# the variants: the same kernels with their other tiles, schedules and user modes, and the one launch
ws = sources.load_file(Path(__file__).with_name("capstone_variants.py"), "ws_compression", "capstone_variants")[0]


def case_inputs(label: str, dtype: torch.dtype, device: str) -> dict:
    """The bench case's inputs (ch10's input maker, seed 0), with W padded once as a model's weights are."""
    made = ch10.split_inputs(ch10.bench_case(label, dtype), torch.Generator(device=device).manual_seed(0))
    w, ku = made.pop("w"), made.pop("ku")
    return {"w": w, "ku": ku, "w_u": ch10ws.padded(w[:, :ku]), "w_c": ch10ws.padded(w[:, ku:]), **made}


def rel_err(got: torch.Tensor, expected: torch.Tensor) -> float:
    """The relative error, in float64, of got against expected (the norm of the difference over expected's)."""
    return ((got.double() - expected).norm() / expected.norm()).item()


def reference(x: dict) -> torch.Tensor:
    """The whole step in float64 (ch10_warp_specialized's reference, on the padded W_u and W_c)."""
    keys = ("w_u", "w_c", "e_user", "e_cand", "user_of")
    return ch10ws.ws_reference(**{k: x[k].double() if x[k].is_floating_point() else x[k] for k in keys})


def run(out_dir):
    import json
    import time

    from course_lib import runtime, timing

    sms = runtime.gpu_info().sm_count
    rows = []
    for label in ("published", "course", "many users"):
        for dtype in (torch.bfloat16, torch.float16) if label == "published" else (torch.bfloat16,):
            x = case_inputs(label, dtype, "cuda")
            B, U, M, Ku, Kc, N = ch10.bench_case(label, dtype).shape
            out = torch.empty(B, M, N, dtype=dtype, device="cuda")
            args = {k: x[k] for k in ("w_u", "w_c", "e_user", "e_cand", "user_of")}

            def step():
                return solution.ws_compression(**args, out=out, sms=sms)

            step()
            err = rel_err(out, reference(x))
            ms = timing.bench(step).median_ms
            # the solution's own two launches, as step() makes them (user_out in the output's dtype). Until
            # 2026-12-03 this timed the earlier variant (user_out float32, loaded from global memory): its
            # candidate part, 0.430 ms at the published shape, was slower than the whole step (0.378)
            user_out = torch.empty(U, M, N, dtype=dtype, device="cuda")
            user_ms = timing.bench(lambda: solution.user_gemm(x["w_u"], x["e_user"], user_out, sms)).median_ms
            cand_ms = timing.bench(
                lambda: solution.candidate_gemm(x["w_c"], x["e_cand"], out, user_out, x["user_of"], sms)
            ).median_ms
            naive = {k: x[k] for k in ("w", "e_user", "e_cand", "user_of", "ku")}
            eager = timing.bench(lambda: ch10.naive_eager(**naive)).median_ms
            flops = ch10.capstone_flops(ch10.bench_case(label, dtype))
            row = {"shape": label, "dims": [B, U, M, Ku, Kc, N], "dtype": str(dtype).replace("torch.", ""),
                   "median_ms": ms, "user_gemm_ms": user_ms, "candidate_ms": cand_ms, "naive_eager_ms": eager,
                   "tflops": flops / ms / 1e9, "rel_err": err}  # fmt: skip
            rows.append(row)
            print(f"{label} {row['dtype']}: {ms * 1e3:.1f} us (user {user_ms * 1e3:.1f}, candidates "
                  f"{cand_ms * 1e3:.1f}), {row['tflops']:.0f} TFLOP/s, naive eager {eager * 1e3:.1f} us "
                  f"({eager / ms:.1f}x), err {err:.1e}", flush=True)  # fmt: skip
    meta = {"gpu": runtime.gpu_info().name, "versions": runtime.versions(), "date": time.strftime("%Y-%m-%d")}
    with open(f"{out_dir}/experiment_gluon_capstone_h200.json", "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)


# the candidate GEMM's configurations tried by --sweep: (BLOCK_M, BLOCK_N, BLOCK_K, NUM_BUFFERS,
# num_warps, programs per SM); BLOCK_N narrows to N. num_warps 4 is one consumer warpgroup: 64-row
# tiles waste less of M = 433 (448 rows computed, against 512 with 128-row tiles) but read E's tile
# for half the work. (Two programs per SM do not fit: Triton 3.6 gives a warp-specialized kernel of
# 4 + 1 warps all 65536 registers.)
SWEEP = [
    (128, 256, 64, 3, 8, 1),
    (128, 128, 64, 4, 8, 1),
    (128, 128, 64, 6, 8, 1),
    (128, 128, 128, 3, 8, 1),
    (64, 256, 64, 4, 4, 1),
    (64, 128, 64, 6, 4, 1),
]


def smoke() -> int:
    """Each configuration that experiments_capstone.py tries (capstone_variants.WS_TRIES) once at two
    shapes, checked (run under a timeout: a schedule that deadlocks shows here, not in the long run)."""
    failed = 0
    for label in ("course", "published"):
        x = case_inputs(label, torch.bfloat16, "cuda")
        B, U, M, Ku, Kc, N = ch10.bench_case(label).shape
        out = torch.empty(B, M, N, dtype=torch.bfloat16, device="cuda")
        user_out = torch.matmul(x["w_u"].float(), x["e_user"].float())
        ref = torch.matmul(x["w_c"].double(), x["e_cand"].double()) + user_out.double()[x["user_of"]]
        for config, mode in ws.WS_TRIES:
            out.fill_(float("nan"))
            if "stationary" in config:  # scripts/ws_stationary.py's kernel, where the shape lets it
                import ws_stationary

                if ws_stationary.fits(x["w_c"], x["e_cand"], config):
                    continue
                ws_stationary.gemm(x["w_c"], x["e_cand"], out, user_out, x["user_of"], config=config)
            else:
                ws.gemm(x["w_c"], x["e_cand"], out, user_out, x["user_of"], config=config, user_mode=mode)
            torch.cuda.synchronize()
            err = rel_err(out, ref)
            failed += not err < 1e-2
            print(f"smoke {label} {config} mode {mode}: rel err {err:.1e}", flush=True)
        out.fill_(float("nan"))  # the whole step in one launch, against the whole step's reference
        ws.ws_compression(x["w_u"], x["w_c"], x["e_user"], x["e_cand"], x["user_of"], out, one=True)
        torch.cuda.synchronize()
        err = rel_err(out, reference(x))
        failed += not err < 1e-2
        print(f"smoke {label} one launch: rel err {err:.1e}", flush=True)
    return 1 if failed else 0


def sweep(out_dir):
    import json
    import time

    from course_lib import runtime, timing

    sms = runtime.gpu_info().sm_count
    rows = []
    for label in ("published", "course", "many users"):
        x = case_inputs(label, torch.bfloat16, "cuda")
        B, U, M, Ku, Kc, N = ch10.bench_case(label).shape
        out = torch.empty(B, M, N, dtype=torch.bfloat16, device="cuda")
        user_out = torch.empty(U, M, N, dtype=torch.float32, device="cuda")
        ws.gemm(x["w_u"], x["e_user"], user_out, config=ws.USER, sms=sms)
        ref = torch.matmul(x["w_c"].double(), x["e_cand"].double()) + user_out.double()[x["user_of"]]
        for config in SWEEP + [("user", c) for c in (ws.USER, (128, 128, 64, 6, 8, 1), (128, 256, 64, 3, 8, 1))]:
            for mode in (1, 2, 3) if config[0] != "user" else (0,):
                row = {"shape": label, "config": list(config[-1] if mode == 0 else config), "user_mode": mode}
                try:
                    if mode == 0:

                        def launch(c=config[1]):
                            return ws.gemm(x["w_u"], x["e_user"], user_out, config=c, sms=sms)
                    else:

                        def launch(c=config, m=mode):
                            return ws.gemm(
                                x["w_c"], x["e_cand"], out, user_out, x["user_of"], config=c, sms=sms, user_mode=m
                            )

                    out.zero_()
                    launch()
                    torch.cuda.synchronize()
                    if mode:
                        row["rel_err"] = rel_err(out, ref)
                    t = timing.bench(launch)
                    row.update(median_ms=t.median_ms, p20_ms=t.p20_ms, p80_ms=t.p80_ms)
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
                rows.append(row)
                print(label, row, flush=True)
        meta = {
            "gpu": runtime.gpu_info().name,
            "versions": runtime.versions(),
            "date": time.strftime("%Y-%m-%d"),
            "method": "course_lib.timing.bench (L2 flushed by a read, medians)",
            "dtype": "bfloat16",
        }
        with open(f"{out_dir}/experiment_ws_sweep_h200.json", "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    import re
    import sys

    if "--smoke" in sys.argv:
        sys.path.insert(0, "scripts")
        raise SystemExit(smoke())
    if "--sweep" in sys.argv:
        sweep(sys.argv[sys.argv.index("--sweep") + 1])
        raise SystemExit
    if "--run" in sys.argv:
        run(sys.argv[sys.argv.index("--run") + 1])
        raise SystemExit
    x = case_inputs("published", torch.bfloat16, "cpu")
    B, U, M, Ku, Kc, N = ch10.PUBLISHED
    out = torch.empty(B, M, N, dtype=torch.bfloat16)
    user_out = torch.empty(U, M, N, dtype=torch.float32)
    for label, launch in (
        ("user GEMM", lambda: ws.gemm(x["w_u"], x["e_user"], user_out, config=ws.USER)),
        ("candidate GEMM + user tile", lambda: ws.gemm(x["w_c"], x["e_cand"], out, user_out, x["user_of"])),
    ):
        kernel, compiled = compilation.compile_first_launch(launch)
        ptx = compiled.asm["ptx"]
        counts = {op: len(re.findall(re.escape(op), ptx)) for op in ("setmaxnreg", "wgmma.mma_async",
                  "cp.async.bulk.tensor", "mbarrier.try_wait", "ld.global")}  # fmt: skip
        print(label, counts, "warp_specialize:", "ttg.warp_specialize" in compiled.asm["ttgir"],
              "shared", compiled.metadata.shared)  # fmt: skip
