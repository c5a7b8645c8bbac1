"""The capstone on a GPU: chapter 10's steps checked and timed side by side at three shapes.

    PYTHONPATH=. python3 scripts/experiments_capstone.py --out DIR [--shapes published course many_users]
        [--dtypes bfloat16 float16] [--no-compile] [--sweep]

For each shape (the published benchmark's, the course's, the course's with 4 candidates per user) and
dtype, every variant runs on the same inputs (fused_broadcast's input maker, bench seed 0) and is
checked against the float64 reference before it is timed with course_lib.timing.bench (L2 flushed by
a read before each call):

- naive eager: the concat materialized, one batched GEMM over Ku + Kc (ch10_capstone.naive_eager);
- decomposed eager: the user GEMM once per user, the candidate GEMM, a gather-add (step 1);
- torch.compile of both, default and max-autotune, with their cold compile seconds;
- cuBLAS's candidate GEMM alone: on W_c as a view of W (rows Ku + Kc apart), on W_c and E_cand
  copied with K = 866 contiguous, and padded to 16 bytes (872, zeros), the copies made once;
- the solution, solutions/fused_broadcast.py (twice, for the method's spread), and its parts: the
  padding of W, the user GEMM, the candidate GEMM with its fused epilogue;
- with --sweep, the solution with other tiles for its descriptor kernels (its CONFIGS, set in turn);
- on a Hopper GPU, step 4's variants (scripts/capstone_variants.py): its user GEMM in each
  configuration of USER_TRIES (`ws_user_try` rows) and its candidate GEMM in each of WS_TRIES
  (`ws_try` rows; those ending "stationary" are scripts/ws_stationary.py's kernel, tried where the shape
  lets it); then step 4 as it ships (solutions/ws_compression.py, `ws_compression`, twice) and its two
  launches timed apart; and the whole step in one launch (capstone_one_launch_kernel, a variant,
  `ws_compression_one_launch`).

It writes DIR/experiment_capstone.json after each shape (meta: GPU, versions, date; the floors; one
row per variant) and prints a summary against the targets (step 3: course shape <= 0.10 ms,
published bf16 <= 0.45 ms; step 4, the issue's: course <= 0.088 ms, published <= 0.40 ms).
Importable, and --help works, without a GPU; measuring needs one.
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
from pathlib import Path

import course_lib  # noqa: F401  (mode set-up first)
import torch

from course_lib import roofline, runtime, sources, tasks, timing
from course_lib.compare import compare
from course_lib.lessons import ch10 as lesson10
from course_lib.tasks import ch10_capstone as ch10

SHAPES = {"published": "published", "course": "course", "many_users": "many users"}  # option -> bench label
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
# step 3, fused_broadcast: the course's own aims for it
STEP3_TARGETS_MS = {("course", "bfloat16"): 0.10, ("published", "bfloat16"): 0.45}
# step 4, ws_compression: the targets, one copy in ch10_capstone (target, stretch), read here
STEP4_TARGETS_MS = {key: target for key, (target, _stretch) in lesson10.TARGETS_MS.items()}
COPY_BANDWIDTH, CUBLAS_FP16 = (
    4.27e12,
    lesson10.MATMUL_REFERENCE_RATE,
)  # GPU_FACTS.md: the H200's copy, cuBLAS fp16 8192^3
DEVICE = "cuda"

# Tiles tried by --sweep for the candidate GEMM's descriptor kernel (BLOCK_M, BLOCK_N, BLOCK_K,
# num_warps, num_stages); the first is the solution's. M = 433 is 3.4 tiles of 128 and 6.8 of 64 (a
# 64-row tile wastes 3% of the MMA work there, a 128-row one 15%); tiles under about 113 KB of shared
# memory let two programs share an SM, so that one's epilogue overlaps the other's main loop. The
# solution narrows BLOCK_N to N (128 at the course's shape). A tile that does not fit is recorded as
# such.
SWEEP = [
    (128, 256, 64, 8, 3),
    (128, 256, 64, 8, 4),
    (128, 128, 64, 8, 3),
    (128, 128, 64, 8, 4),
    (128, 128, 64, 4, 3),
    (64, 256, 64, 4, 3),
    (64, 256, 64, 4, 2),
    (64, 128, 64, 4, 3),
]


# step 4's tries (WS_TRIES, USER_TRIES) are the variants module's: scripts/capstone_variants.py
VARIANTS_FILE = Path(__file__).with_name("capstone_variants.py")


def _variants():
    """scripts/capstone_variants.py, loaded as course_lib loads a task file (it imports Gluon)."""
    return sources.load_file(VARIANTS_FILE, "ws_compression", "capstone_variants")[0]


def _rel_err(got: torch.Tensor, expected: torch.Tensor) -> float:
    return ((got.double() - expected).norm() / expected.norm()).item()


def _float64(inputs: dict) -> dict:
    return {k: (v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v) for k, v in inputs.items()}


class Session:
    """One shape and dtype: its inputs, its reference and the rows measured on them."""

    def __init__(self, label: str, dtype: torch.dtype, log):
        self.case = ch10.bench_case(label, dtype)
        self.spec = tasks.get("fused_broadcast")
        self.inputs = self.spec.make_inputs(self.case, torch.Generator(device=DEVICE).manual_seed(0))
        self.args = {k: v for k, v in self.inputs.items() if k != "out"}
        self.expected = ch10.capstone_reference(**_float64(self.args))
        self.log = log
        self.rows: list[dict] = []

    def candidate_part(self) -> torch.Tensor:
        """W_c @ E_cand in float64: what the variants that compute the candidate GEMM alone are checked against."""
        a = _float64(self.args)
        return torch.matmul(a["w"][:, a["ku"] :], a["e_cand"])

    def record(self, variant: str, fn, output=None, expected=None, **extra) -> dict | None:
        """Check ``fn`` (its return value, or ``output`` after it ran) against ``expected`` (default: the
        whole layer's reference), then time it."""
        try:
            start = time.perf_counter()
            got = fn()
            torch.cuda.synchronize()
            first_s = time.perf_counter() - start
            got = got if output is None else output
            expected = self.expected if expected is None else expected
            same = isinstance(got, torch.Tensor) and got.shape == expected.shape
            err = _rel_err(got, expected) if same else None
            t = timing.bench(fn)
        except Exception as e:  # a variant that fails to compile or run is recorded as such
            self.log(f"  {variant}: {type(e).__name__}: {str(e)[:300]}")
            self.rows.append({"variant": variant, "error": f"{type(e).__name__}: {str(e)[:300]}", **self._where()})
            return None
        seconds = t.median_ms * 1e-3
        # the layer's FLOPs and bytes over a part's time would be no rate at all: rates for whole-layer rows only
        whole = not (variant.startswith("cublas") or "_part_" in variant or variant == "ws_try")
        row = {
            "variant": variant,
            **self._where(),
            "median_ms": t.median_ms,
            "p20_ms": t.p20_ms,
            "p80_ms": t.p80_ms,
            "method": t.method,
            "tflops": self.spec.flops(self.case) / seconds / 1e12 if whole else None,
            "gbs": self.spec.bytes_moved(self.case) / seconds / 1e9 if whole else None,
            "rel_err": err,
            "first_call_s": round(first_s, 2),
            **extra,
        }
        self.rows.append(row)
        shown = f"{err:.1e}" if err is not None else "-"
        rate = f"{row['tflops']:7.1f} TFLOP/s" if whole else " " * 15
        self.log(f"  {variant:<44}{t.median_ms * 1e3:10.1f} us {rate}  err {shown}")
        return row

    def _where(self) -> dict:
        return {"shape_label": self.case.label, "shape": list(self.case.shape), "dtype": str(self.case.dtype)[6:]}


def _torch_rows(s: Session, compile_modes: tuple[str, ...]) -> None:
    a = s.args
    s.record("naive_eager", lambda: ch10.naive_eager(**a))
    s.record("decomposed_eager", lambda: ch10.decomposed_eager(**a))
    best = ch10.best_torch_eager()
    s.record("best_torch_eager", lambda: best(**a))
    s.rows[-1]["config"] = best.config()  # which of ch10.eager_forms was fastest here
    for name, fn in (("naive", ch10.naive_eager), ("decomposed", ch10.decomposed_eager)):
        for mode in compile_modes:
            # at its best: max-autotune without its CUDA graphs' per-call input copy (timing.compiled_at_best)
            compiled, how, compile_s = timing.compiled_at_best(fn, mode, a)
            s.record(
                f"{name}_torch_compile_{mode}", lambda c=compiled: c(**a), compile_mode=mode, compile_config=how,
                compile_s=round(compile_s, 2),
            )  # fmt: skip
    w, ku, e_cand = a["w"], a["ku"], a["e_cand"]
    B, Kc, N = e_cand.shape
    w_c_view = w[:, ku:]  # rows Ku + Kc apart
    cand = s.candidate_part()
    s.record("cublas_candidate_view", lambda: torch.matmul(w_c_view, e_cand), expected=cand, k_stride=w.stride(0))
    w_c = w_c_view.contiguous()  # (M, Kc), rows Kc apart
    s.record("cublas_candidate_k_contiguous", lambda: torch.matmul(w_c, e_cand), expected=cand, k_stride=Kc)
    kp = ch10.padded_width(Kc, w.element_size())
    w_p = w.new_zeros(w.shape[0], kp)
    w_p[:, :Kc] = w_c
    e_p = e_cand.new_zeros(B, kp, N)
    e_p[:, :Kc] = e_cand
    s.record("cublas_candidate_padded", lambda: torch.matmul(w_p, e_p), expected=cand, k_stride=kp)


def _solution_rows(s: Session, module, entry, sweep: bool) -> None:
    out = s.inputs["out"]
    for repeat in (1, 2):
        s.record("solution", lambda: entry(**s.inputs), output=out, repeat=repeat)
    verdict = compare(out, s.expected, ch10.BROADCAST_TOLERANCE[s.case.dtype], poisoned=False)
    s.rows[-1]["verdict"] = verdict.summary
    a = s.args
    w_u, w_c = module.aligned_parts(a["w"], a["ku"])
    s.record("solution_part_pad", lambda: module.aligned_parts(a["w"], a["ku"]))
    fits = (
        all(t.element_size() == 2 for t in (w_u, w_c, a["e_user"], a["e_cand"]))
        and module.descriptors_fit(w_u, w_c, a["e_user"], a["e_cand"], out)
        and out.numel() >= module.CONFIGS["tma_min_out"]
    )
    if not fits:
        s.log("  (the solution takes its pointer path here: no parts timed)")
        return
    U, _, N = a["e_user"].shape
    user_out = torch.empty(U, w_u.shape[0], N, dtype=torch.float32, device=DEVICE)

    def user_gemm():
        module._tma_gemm(w_u, a["e_user"], user_out, user_out, a["user_of"], False, module.CONFIGS["user_tma"])

    def candidate_gemm():
        module._tma_gemm(w_c, a["e_cand"], out, user_out, a["user_of"], True, module.CONFIGS["candidate_tma"])

    s.record("solution_part_user_gemm", user_gemm, config=dict(module.CONFIGS["user_tma"]))
    s.record("solution_part_candidate_gemm", candidate_gemm, output=out, config=dict(module.CONFIGS["candidate_tma"]))
    if not sweep:
        return
    saved = dict(module.CONFIGS["candidate_tma"])
    try:
        for bm, bn, bk, warps, stages in SWEEP[1:]:
            config = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": warps, "num_stages": stages}
            module.CONFIGS["candidate_tma"] = config
            s.record("solution_sweep", lambda: entry(**s.inputs), output=out, config=config)
    finally:
        module.CONFIGS["candidate_tma"] = saved


def _gluon_rows(s: Session, tries: list | None) -> None:
    """Step 4 on a Hopper GPU: as it ships (solutions/ws_compression.py), the whole step and its two
    launches timed apart; with tries, the variants of scripts/capstone_variants.py at this shape first
    (ws_user_try and ws_try rows); then the whole step in one launch (a variant too). W padded once
    beforehand, as a model's weights are at load (its cost is the pad row)."""
    info = runtime.gpu_info()
    if info.capability[0] != 9 or runtime.gluon_problem():
        s.log(f"  (ws_compression not timed: {runtime.gluon_problem() or 'needs a Hopper GPU'})")
        return
    from course_lib.tasks.ch10_warp_specialized import padded

    solution = sources.load_module("ws_compression", "solutions")  # the course's step 4
    variants = _variants()  # step 4's variants, timed beside it
    a, out = s.args, s.inputs["out"]
    w_u, w_c = padded(a["w"][:, : a["ku"]]), padded(a["w"][:, a["ku"] :])
    args = {"w_u": w_u, "w_c": w_c, "e_user": a["e_user"], "e_cand": a["e_cand"], "user_of": a["user_of"]}
    sms = info.sm_count
    U, _, N = a["e_user"].shape
    user_out = torch.empty(U, w_u.shape[0], N, dtype=out.dtype, device=DEVICE)
    user_expected = torch.matmul(w_u.double(), a["e_user"].double())
    for config in variants.USER_TRIES if tries else ():
        s.record("ws_user_try", lambda c=config: variants.gemm(w_u, a["e_user"], user_out, config=c, sms=sms),
                 output=user_out, expected=user_expected, config=list(config))  # fmt: skip
    solution.user_gemm(w_u, a["e_user"], user_out, sms)  # the candidate tries add this user_out
    # the solution's configuration in the tries' form, recorded with its rows
    config, user_config = variants.candidate_config(N), variants.pick_user_config(U, w_u.shape[0], N, sms)
    shipped = {"config": list(config), "user_mode": variants.USER_MODE, "user_config": list(user_config)}
    fastest = None  # (ms, config, mode) of the fastest right try
    for try_config, mode in tries or ():
        if "stationary" in try_config:  # its own kernel, scripts/ws_stationary.py
            import ws_stationary

            why = ws_stationary.fits(w_c, a["e_cand"], try_config)
            if why:
                s.log(f"  ws_try {try_config}: not at this shape ({why})")
                continue
            s.record("ws_try", lambda c=try_config: ws_stationary.gemm(w_c, a["e_cand"], out, user_out, a["user_of"],
                     config=c, sms=sms), output=out, config=list(try_config), user_mode=mode)  # fmt: skip
            continue
        row = s.record("ws_try", lambda c=try_config, m=mode: variants.gemm(w_c, a["e_cand"], out, user_out,
                       a["user_of"], config=c, sms=sms, user_mode=m), output=out, config=list(try_config),
                       user_mode=mode)  # fmt: skip
        right = row and row["rel_err"] is not None and row["rel_err"] < 1e-2
        if right and (fastest is None or row["median_ms"] < fastest[0]):
            fastest = (row["median_ms"], try_config, mode)
    if fastest and (list(fastest[1]), fastest[2]) != (shipped["config"], shipped["user_mode"]):
        s.log(f"  the fastest try is not the solution's: {fastest[1]} in user mode {fastest[2]}, {fastest[0]:.4f} ms")
    for repeat in (1, 2):
        s.record("ws_compression", lambda: solution.ws_compression(**args, out=out, sms=sms), output=out,
                 repeat=repeat, **shipped)  # fmt: skip
    s.record("ws_compression_part_user_gemm", lambda: solution.user_gemm(w_u, a["e_user"], user_out, sms),
             output=user_out, expected=user_expected, config=list(user_config))  # fmt: skip
    s.record("ws_compression_part_candidate_gemm",
             lambda: solution.candidate_gemm(w_c, a["e_cand"], out, user_out, a["user_of"], sms), output=out,
             **shipped)  # fmt: skip
    # the user GEMM and the candidate GEMM in one launch (flags between them), on the solution's tile
    for repeat in (1, 2):
        s.record("ws_compression_one_launch", lambda: variants.ws_compression(**args, out=out, sms=sms, config=config,
                 one=True), output=out, repeat=repeat, config=list(config))  # fmt: skip


def _floors(case: tasks.Case, peaks: roofline.Peaks) -> dict:
    spec = tasks.get("fused_broadcast")
    n_bytes, n_flops = spec.bytes_moved(case), spec.flops(case)
    dtype = str(case.dtype)[6:]
    return {
        "bytes": n_bytes,
        "flops": n_flops,
        "memory_floor_ms_4.27TBs": n_bytes / COPY_BANDWIDTH * 1e3,
        "flop_floor_ms_677TFLOPs": n_flops / CUBLAS_FP16 * 1e3,
        "memory_floor_ms_measured": n_bytes / (peaks.bandwidth_gbs * 1e9) * 1e3,
        "flop_floor_ms_measured": n_flops / (peaks.flops_rate(dtype) * 1e12) * 1e3,
    }


def _summary(rows: list[dict], log) -> None:
    by = {}
    for r in rows:
        if "median_ms" in r:
            by.setdefault((r["shape_label"], r["dtype"]), {}).setdefault(r["variant"], r["median_ms"])
    for (label, dtype), times in by.items():
        for step in ("solution", "ws_compression", "ws_compression_one_launch"):
            if step in times:
                _summary_line(label, dtype, step, times, log)


def _summary_line(label: str, dtype: str, step: str, times: dict, log) -> None:
    mine = times[step]
    line = [f"{label} {dtype}: {step} {mine:.3f} ms"]
    for other in (
        "naive_eager",
        "decomposed_eager",
        "decomposed_torch_compile_max-autotune",
        "cublas_candidate_padded",
    ):
        if other in times:
            line.append(f"{other} {times[other]:.3f} ms ({times[other] / mine:.2f}x)")
    target = (STEP3_TARGETS_MS if step == "solution" else STEP4_TARGETS_MS).get((label, dtype))
    if target:
        line.append(f"target {target:.2f} ms: {'met' if mine <= target else 'NOT met'}")
    log("; ".join(line))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="results/session", help="folder for experiment_capstone.json")
    ap.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    ap.add_argument("--dtypes", nargs="+", choices=list(DTYPES), default=["bfloat16", "float16"])
    ap.add_argument("--no-compile", action="store_true", help="leave out torch.compile (minutes of compiling)")
    ap.add_argument("--sweep", action="store_true", help="also time the solution with other candidate tiles")
    ap.add_argument("--no-gluon", action="store_true", help="leave out step 4 (ws_compression)")
    ap.add_argument("--no-pingpong", action="store_true", help="leave the ping-pong schedule out of step 4's tries")
    ap.add_argument("--only-step4", action="store_true",
                    help="step 4 alone, as it ships, and in one launch (no baselines, no tries)")  # fmt: skip
    args = ap.parse_args(argv)
    if not runtime.is_gpu():
        print("experiments_capstone.py measures on a GPU; this is CPU mode (no CUDA GPU visible)")
        return 1

    def log(text: str) -> None:
        print(text, flush=True)

    module, entry = sources.load_file(sources.task_path("fused_broadcast", "solutions"), "fused_broadcast")
    peaks = roofline.gpu_peaks()
    info = runtime.gpu_info()
    meta = {
        "gpu": info.name,
        "sm_count": info.sm_count,
        "versions": runtime.versions(),
        "date": time.strftime("%Y-%m-%d"),
        "peaks": peaks.to_dict(),
        "method": "course_lib.timing.bench: CUDA events, L2 flushed by a read before each call; median, p20/p80",
        "solution_configs": {k: v for k, v in module.CONFIGS.items() if k != "pointer"},
    }
    rows, floors = [], {}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def write() -> None:  # after each shape, so that a run cut short keeps what it measured
        data = {"meta": meta, "floors": floors, "rows": rows, "seconds": round(time.time() - start, 1)}
        (out / "experiment_capstone.json").write_text(json.dumps(data, indent=1))

    compile_modes = () if args.no_compile else ("default", "max-autotune")
    start = time.time()
    for shape in args.shapes:
        for dtype in args.dtypes:
            if shape != "published" and dtype != "bfloat16":
                continue  # the issue asks fp16 of the published shape only
            label = SHAPES[shape]
            log(f"\n===== {label} {ch10.bench_case(label).shape} {dtype}")
            s = None
            try:
                s = Session(label, DTYPES[dtype], log)
                floors[f"{label} {dtype}"] = _floors(s.case, peaks)
                if args.only_step4:
                    _gluon_rows(s, None)
                else:
                    _torch_rows(s, compile_modes)
                    _solution_rows(s, module, entry, args.sweep)
                    if not args.no_gluon:
                        _gluon_rows(
                            s, [t for t in _variants().WS_TRIES if not (args.no_pingpong and "pingpong" in t[0])]
                        )
            except Exception:
                traceback.print_exc()
            rows += s.rows if s is not None else []
            write()
            torch._dynamo.reset()
            torch.cuda.empty_cache()
    log("")
    _summary(rows, log)
    log(f"wrote {len(rows)} rows to {out / 'experiment_capstone.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
