"""A probe for chapter 10's step 4 on a Hopper GPU: what the user tile costs the candidate GEMM.

At each bench shape, the candidate GEMM (scripts/capstone_variants.py, on solutions/ws_compression.py's
tile) is timed
  - with no user tile at all (a plain GEMM: wrong values, the floor of the kernel itself);
  - with the user tile float32, as the solution had it then (user mode 1: added after the main loop; 2: the
    accumulator starting from it);
  - with the user tile in bfloat16 (half the bytes), modes 1 and 2, and 5: copied by TMA into the
    output's staging tile during the main loop, added in the epilogue;
  - and, at short K, scripts/ws_stationary.py's kernel with either user tile;
  - and the whole step (the user GEMM, then the candidate GEMM) in modes 2 and 5 (5: the solution's).
A first run (results/probes/probe_user_tile_2026-12-02_h200.json, commit cef3a9f) also timed a chunked
tile order and a user tile kept in registers (mode 4): both slower, taken out.
Each right row is checked against float64.

    PYTHONPATH=.:scripts python3 scripts/probe_user_tile.py [--out DIR]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import course_lib  # noqa: F401  (mode set-up first)
import torch
from gluon_capstone import case_inputs, rel_err

from course_lib import runtime, sources, timing
from course_lib.tasks import ch10_capstone as ch10

ROOT = Path(__file__).resolve().parent.parent

# step 4's variants: the solution's kernels with their other user modes
ws = sources.load_file(Path(__file__).with_name("capstone_variants.py"), "ws_compression", "capstone_variants")[0]


def main(argv: list[str]) -> int:
    import ws_stationary

    out_dir = Path(argv[argv.index("--out") + 1]) if "--out" in argv else None
    sms = runtime.gpu_info().sm_count
    rows, failed = [], 0
    cases = (
        ("published", torch.bfloat16),
        ("published", torch.float16),
        ("course", torch.bfloat16),
        ("many users", torch.bfloat16),
    )
    for label, dtype in cases:
        x = case_inputs(label, dtype, "cuda")
        B, U, M, Ku, Kc, N = ch10.bench_case(label).shape
        config = ws.candidate_config(N)
        user32 = torch.matmul(x["w_u"].float(), x["e_user"].float())
        user16 = user32.to(dtype)
        out = torch.empty(B, M, N, dtype=dtype, device="cuda")
        cand = torch.matmul(x["w_c"].double(), x["e_cand"].double())
        tries = [("no user tile", lambda: ws.gemm(x["w_c"], x["e_cand"], out, config=config, sms=sms), cand)]
        deeper = (config[0], config[1], config[2], config[3] + 1) + config[4:]  # one more slot: fits at 128 x 128
        variants = [("float32", user32, config, 2), ("16-bit", user16, config, 1), ("16-bit", user16, config, 2),
                    ("16-bit", user16, config, 5)] + [("16-bit", user16, deeper, 5)] * (N <= 128)  # fmt: skip
        for name, user, cfg, mode in variants:
            ref = cand + user.double()[x["user_of"]]
            tries.append((f"user {name} mode {mode} {cfg[3]} slots", lambda u=user, m=mode, c=cfg: ws.gemm(
                x["w_c"], x["e_cand"], out, u, x["user_of"], config=c, sms=sms, user_mode=m), ref, cfg))  # fmt: skip
        for name, user in (("float32", user32), ("16-bit", user16)):
            ref = cand + user.double()[x["user_of"]]
            if not ws_stationary.fits(x["w_c"], x["e_cand"]):
                tries.append((f"stationary, user {name}", lambda u=user: ws_stationary.gemm(
                    x["w_c"], x["e_cand"], out, u, x["user_of"], sms=sms), ref, ws_stationary.CONFIG))  # fmt: skip
        whole = torch.matmul(x["w_u"].double(), x["e_user"].double())[x["user_of"]] + cand
        keys = ("w_u", "w_c", "e_user", "e_cand", "user_of")
        for cfg, mode in ((None, 2), (None, 5)) + (((deeper, 5),) if N <= 128 else ()):
            tries.append((f"whole step mode {mode} {(cfg or config)[3]} slots", lambda c=cfg, m=mode: ws.ws_compression(
                **{k: x[k] for k in keys}, out=out, sms=sms, config=c, user_mode=m), whole, cfg or config))  # fmt: skip
        for name, fn, ref, cfg in ((*t, config) if len(t) == 3 else t for t in tries):  # cfg: the try's tile
            out.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            err = rel_err(out, ref)
            failed += not err < 1e-2
            t = timing.bench(fn)
            rows.append(
                {
                    "shape": label,
                    "dtype": str(dtype)[6:],
                    "try": name,
                    "config": list(cfg),
                    "median_ms": t.median_ms,
                    "rel_err": err,
                }
            )
            print(f"{label:11s} {str(dtype)[6:]:8s} {name:34s} {t.median_ms * 1e3:7.1f} us  err {err:.1e}", flush=True)
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
        meta = {
            "gpu": runtime.gpu_info().name, "versions": runtime.versions(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit or None,
        }  # fmt: skip
        (out_dir / "probe_user_tile.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
