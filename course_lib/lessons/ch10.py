"""What notebook 10 reads and shows from the records (one floor above the task module, which holds
what grading needs): section 1's floors and cost models, section 6's summary tables and chart, the
records' names and the course's targets. Moved from ``course_lib.tasks.ch10_capstone``, unchanged.
"""

from __future__ import annotations

import torch

from .. import roofline
from ..tasks import Case
from ..tasks.ch10_capstone import COPY_BANDWIDTH, SHAPES, capstone_bytes, capstone_flops

# --------------------------------------------------------------------------------------------------
# the notebook's models and records (notebooks/10_capstone.ipynb): section 1's floors, section 6's
# summary. One copy here, so that the sections read the same numbers and each runs on its own.

MATMUL_REFERENCE_RATE = 677e12  # FLOP/s: cuBLAS fp16 8192^3 in the recorded baselines' do_bench run, a reference
PEAKS_RECORD = "bench_padded_bmm_h200.json"  # chapter 08's bench of the candidate GEMM, whose meta.peaks we read
BASELINES_RECORD = "capstone_baselines_h200.json"  # the team's do_bench notes, transcribed
EXPERIMENT_RECORD = (
    "experiment_capstone_h200.json"  # every step and baseline in one run (scripts/experiments_capstone.py)
)
GLUON_RECORD = "experiment_gluon_capstone_h200.json"  # step 4 at the three shapes (scripts/gluon_capstone.py)
FIRST_RECORDS = (  # the experiment's two earlier full runs, step 4's user tile loaded from global memory in float32
    "experiment_capstone_2026-12-01_h200.json",
    "experiment_capstone_2026-12-02_h200.json",
)
NOT_YET = "not recorded yet: run `PYTHONPATH=. python scripts/experiments_capstone.py --out results` on a GPU"

# The course's targets for the final kernel, (shape label, dtype) -> (target, stretch) in ms. The stretch is
# the issue's: "the whole step as fast as cuBLAS's padded candidate GEMM alone" (0.336 ms bf16, 0.370 ms fp16
# and, K aligned already, 0.076 ms at the course's shape in the baselines): 0.34 ms in fp16 is below that
# dtype's baseline. That baseline leaves out the user GEMM and the padded copy of E_cand it reads.
TARGETS_MS = {
    ("published", "bfloat16"): (0.40, 0.34),
    ("published", "float16"): (0.40, 0.34),
    ("course", "bfloat16"): (0.088, 0.075),
}
SUMMARY_CASES = (*TARGETS_MS, ("many users", "bfloat16"))  # section 6's tables, one per shape and dtype


def read_record(name: str) -> dict | None:
    """A JSON record of results/ by file name, or None where it has not been written yet."""
    from .. import results

    return results.read_record(name)


def capstone_records() -> dict:
    """The chapter's three records, {"baselines", "experiment", "gluon"}: each a dict or None."""
    return {
        "baselines": read_record(BASELINES_RECORD),
        "experiment": read_record(EXPERIMENT_RECORD),
        "gluon": read_record(GLUON_RECORD),
    }


def recorded_peaks(name: str = PEAKS_RECORD) -> dict | None:
    """meta.peaks of a bench record (a copy and cuBLAS 8192^3 matmuls, measured in that run with
    course_lib.timing), with "file" added; None where the record or its peaks are missing."""
    data = read_record(name)
    peaks = (data or {}).get("meta", {}).get("peaks")
    return dict(peaks, file=f"results/{name}") if peaks else None


def matmul_rate(dtype: str, peaks: dict | None) -> float:
    """The FLOP floors' rate, FLOP/s, for a dtype name ("bfloat16", "float16"): the GPU's datasheet
    dense peak (``roofline.hardware``: the roof is the hardware's, and no kernel can be faster), the
    H200's when no peaks are recorded."""
    sheet = roofline.from_record(peaks) if peaks else roofline.datasheet_peaks()
    return sheet.flops_rate(dtype) * 1e12


def library_rate(dtype: str, peaks: dict | None) -> float:
    """cuBLAS's measured rate, FLOP/s, at 8192^3 in the record's run (the best library: what a kernel
    can hope to reach, not a roof); MATMUL_REFERENCE_RATE when none is recorded."""
    measured = (roofline.from_record(peaks).library_tflops or {}) if peaks else {}
    return measured[dtype] * 1e12 if dtype in measured else MATMUL_REFERENCE_RATE


def kernel_floor_ms(n_bytes: float, n_flops: float, rate: float, bandwidth: float = COPY_BANDWIDTH) -> float:
    """The least time of one kernel, ms: the larger of its bytes at ``bandwidth`` and its FLOPs at ``rate``."""
    return max(n_bytes / bandwidth, n_flops / rate) * 1e3


def eager_kernels(shape, itemsize: int = 2) -> dict:
    """What each kernel of eager PyTorch must move and compute, {"naive": {kernel: (bytes, FLOPs)},
    "decomposed": {...}}, for shape (B, U, M, Ku, Kc, N): every input read from memory once and every
    output written once, a floor per kernel, not a measurement.

    The gathers read each user's rows once and the L2 serves their repeats: E_user (U, Ku, N) is 60 MB
    at the published shape in bf16 and user_out (U, M, N) 3 MB (6.7 in float32), against an H200's
    60 MB of L2, and the candidates of one user are next to each other (user_of is sorted), so a
    user's rows are read back while still there. A gather of rows then reads U rows and writes B."""
    B, U, M, Ku, Kc, N = shape
    e = itemsize
    return {
        "naive": {
            # read each user's (Ku, N) once, write (B, Ku, N)
            "E_user[user_of]: gather": ((U + B) * Ku * N * e, 0),
            # read the (B, Ku, N) copy and E_cand (B, Kc, N), write (B, Ku + Kc, N)
            "torch.cat": (2 * B * (Ku + Kc) * N * e, 0),
            # W (M, Ku + Kc), the concatenation (B, Ku + Kc, N), out (B, M, N)
            "batched GEMM over Ku + Kc": (
                (M * (Ku + Kc) + B * (Ku + Kc) * N + B * M * N) * e,
                2 * M * N * B * (Ku + Kc),
            ),
        },
        "decomposed": {
            # W_u (M, Ku), E_user (U, Ku, N), user_out (U, M, N)
            "user GEMM, once per user": ((M * Ku + U * Ku * N + U * M * N) * e, 2 * M * N * U * Ku),
            # W_c (M, Kc), E_cand (B, Kc, N), the candidate part (B, M, N)
            "candidate GEMM": ((M * Kc + B * Kc * N + B * M * N) * e, 2 * M * N * B * Kc),
            # read each user's (M, N) once, write the broadcast (B, M, N)
            "user_out[user_of]: gather": ((U + B) * M * N * e, 0),
            # read the candidate part and the broadcast, write out: three (B, M, N)
            "add": (3 * B * M * N * e, B * M * N),
        },
    }


def layer_floors_ms(shape, dtype: torch.dtype, rate: float, bandwidth: float = COPY_BANDWIDTH) -> tuple[float, float]:
    """(memory floor, FLOP floor) of the whole layer in ms: capstone_bytes at ``bandwidth``,
    capstone_flops at ``rate``."""
    case = Case(shape, dtype, "floors")
    return capstone_bytes(case) / bandwidth * 1e3, capstone_flops(case) / rate * 1e3


def baseline_row(baselines: dict | None, label: str, dtype: str = "bfloat16") -> dict | None:
    """The recorded baselines' row for a shape label ("published", "course", "many users") and dtype."""
    rows = [r for r in (baselines or {}).get("rows", []) if r["shape"] == label and r["dtype"] == dtype]
    return rows[0] if rows else None


def measured(experiment: dict | None, label: str, dtype: str, variant: str) -> dict | None:
    """The experiment's fastest timing of a variant at a shape and dtype, as its row, or None."""
    rows = [
        r
        for r in (experiment or {}).get("rows", [])
        if r.get("shape_label") == label
        and r.get("dtype") == dtype
        and r.get("variant") == variant
        and "median_ms" in r
    ]
    return min(rows, key=lambda r: r["median_ms"]) if rows else None


# Section 6's rows: (label, the experiment's variant, the baselines' key or None, the whole layer?). The
# labels sort in this order (start < step 1 < ... < step 4 < torch.compile ...): the comparison chart
# orders its bars by label, so the chart's order is the table's (tests/test_ch10.py checks it).
SUMMARY = (
    ("start: naive, torch eager", "naive_eager", "naive_eager_ms", True),
    ("step 1: decomposed, torch eager", "decomposed_eager", "decomposed_eager_ms", True),
    ("step 2: cuBLAS candidate GEMM, K = Kc", "cublas_candidate_k_contiguous", "cublas_candidate_ms", False),
    ("step 2: cuBLAS candidate GEMM, K padded in both", "cublas_candidate_padded", "cublas_candidate_padded_ms", False),
    ("step 2: cuBLAS candidate GEMM, W_c a view", "cublas_candidate_view", None, False),
    ("step 3: fused broadcast (solution)", "solution", None, True),
    ("step 3: its candidate GEMM and epilogue", "solution_part_candidate_gemm", None, False),
    ("step 3: its padding of W", "solution_part_pad", None, False),
    ("step 3: its user GEMM", "solution_part_user_gemm", None, False),
    ("step 4: Gluon, warp-specialized", "ws_compression", None, True),
    ("step 4: its candidate GEMM and epilogue", "ws_compression_part_candidate_gemm", None, False),
    ("step 4: its user GEMM", "ws_compression_part_user_gemm", None, False),
    ("torch eager at its best: W_c padded once, one baddbmm", "best_torch_eager", None, True),
    ("torch.compile default, decomposed", "decomposed_torch_compile_default", "decomposed_compile_default_ms", True),
    ("torch.compile default, naive", "naive_torch_compile_default", None, True),
    ("torch.compile max-autotune, decomposed", "decomposed_torch_compile_max-autotune",
     "decomposed_compile_max_autotune_ms", True),
    ("torch.compile max-autotune, naive", "naive_torch_compile_max-autotune", "naive_compile_max_autotune_ms", True),
)  # fmt: skip
_GLUON_FIELDS = {  # step 4's variants -> their fields in the Gluon record
    "ws_compression": "median_ms",
    "ws_compression_part_user_gemm": "user_gemm_ms",
    "ws_compression_part_candidate_gemm": "candidate_ms",
}


def _gluon_row(gluon: dict | None, label: str, dtype: str) -> dict | None:
    rows = [r for r in (gluon or {}).get("rows", []) if r["shape"].replace("_", " ") == label and r["dtype"] == dtype]
    return rows[0] if rows else None


def summary_rows(label: str, dtype: str, records: dict) -> tuple[str | None, list[dict]]:
    """(the record the rows come from, [{"name", "variant", "ms", "p20", "p80", "over", "whole", "note"}])
    for one shape and dtype, in SUMMARY's order; (None, []) where nothing is recorded.

    The experiment, where it has the shape and dtype, gives every row (one run, one method). Without
    it the rows are the recorded baselines' (do_bench) and the course's kernels are "not measured yet".
    Step 4's rows, missing from the experiment, may come from the Gluon record: another run, so its
    speed-up is against that run's own naive time."""
    experiment, baselines, gluon = records.get("experiment"), records.get("baselines"), records.get("gluon")
    from_experiment = measured(experiment, label, dtype, "naive_eager") is not None
    base = baseline_row(baselines, label, dtype)
    if not from_experiment and base is None:
        return None, []
    naive = (
        measured(experiment, label, dtype, "naive_eager")["median_ms"] if from_experiment else base["naive_eager_ms"]
    )
    failed = {
        r["variant"]: r["error"]
        for r in (experiment or {}).get("rows", [])
        if r.get("shape_label") == label and r.get("dtype") == dtype and "error" in r
    }
    rows = []
    for name, variant, key, whole in SUMMARY:
        ms = p20 = p80 = over = None
        note = ""
        hit = measured(experiment, label, dtype, variant) if from_experiment else None
        step4 = _gluon_row(gluon, label, dtype) if variant in _GLUON_FIELDS else None
        if hit:
            ms, p20, p80 = hit["median_ms"], hit["p20_ms"], hit["p80_ms"]
        elif variant in failed:  # the experiment ran it and it failed its check or its launch
            note = f"failed in the run: {failed[variant][:60]}"
        elif step4:  # step 4 only in its own record: another run, against that run's naive time
            ms = step4[_GLUON_FIELDS[variant]]
            over = step4["naive_eager_ms"] / ms if whole else None
            note = "another run: x its own naive" if whole else "another run"
        elif not from_experiment and key and base.get(key) is not None:  # the do_bench baselines
            ms = base[key]
        elif not from_experiment and key == "cublas_candidate_padded_ms":  # course shapes: Kc's rows aligned
            note = "aligned already: the row above"
        if ms is None and not note:
            note = "not measured yet" if variant.startswith(("solution", "ws_compression")) else "not in this record"
        if ms is not None and over is None and whole:
            over = naive / ms
        rows.append(dict(name=name, variant=variant, ms=ms, p20=p20 or ms, p80=p80 or ms, over=over, whole=whole,
                         note=note))  # fmt: skip
    return (EXPERIMENT_RECORD if from_experiment else BASELINES_RECORD), rows


def summary_text(label: str, dtype: str, records: dict, peaks: dict | None) -> str:
    """Section 6's table for one shape and dtype: where the rows come from (provenance, method), the
    layer's floors, each row's time, speed-up over naive and share of each floor, the targets."""
    from .. import results

    source, rows = summary_rows(label, dtype, records)
    if not rows:
        return f"{label} {dtype}: nothing recorded"
    shape = SHAPES[label]
    meta = records["experiment" if source == EXPERIMENT_RECORD else "baselines"]["meta"]
    rate, library = matmul_rate(dtype, peaks), library_rate(dtype, peaks)
    memory_ms, flop_ms = layer_floors_ms(shape, getattr(torch, dtype), rate)
    library_ms = flop_ms * rate / library  # the layer's FLOPs at cuBLAS's rate
    lines = [
        f"{label} {shape} {dtype}: from {source}, recorded on {results.provenance(meta)}",
        f"  method: {meta['method']}",
        f"  floors: memory {memory_ms:.3f} ms at {COPY_BANDWIDTH / 1e12:.2f} TB/s, FLOPs {flop_ms:.3f} ms at "
        f"{rate / 1e12:.0f} TFLOP/s (the datasheet's dense peak); the FLOPs at cuBLAS's {library / 1e12:.0f} "
        f"TFLOP/s, the best library ({'meta.peaks of ' + peaks['file'] if peaks else 'the reference rate'}): "
        f"{library_ms:.3f} ms",
        f"  {'':<48}{'ms':>7}{'x naive':>9}{'of memory floor':>17}{'of FLOP floor':>15}{'at cuBLAS rate':>16}",
    ]
    for r in rows:
        if r["ms"] is None:
            lines.append(f"  {r['name']:<48}{'-':>7}   {r['note']}")
        elif r["whole"]:
            lines.append(f"  {r['name']:<48}{r['ms']:>7.3f}{r['over']:>8.2f}x{memory_ms / r['ms']:>17.0%}"
                         f"{flop_ms / r['ms']:>15.0%}{library_ms / r['ms']:>16.0%}   {r['note']}")  # fmt: skip
        else:
            lines.append(
                f"  {r['name']:<48}{r['ms']:>7.3f}   (a part of the layer){'; ' + r['note'] if r['note'] else ''}"
            )
    if (label, dtype) in TARGETS_MS:
        target, stretch = TARGETS_MS[label, dtype]
        for r in rows:
            if r["variant"] in ("solution", "ws_compression"):
                verdict = "not measured yet" if r["ms"] is None else "met" if r["ms"] <= target else "not met"
                stretched = ", and the stretch" if r["ms"] is not None and r["ms"] <= stretch else ""
                lines.append(f"  target {target} ms (stretch {stretch}) for {r['name']}: {verdict}{stretched}")
    if any(r["note"].startswith("another run") for r in rows):
        lines.append(f"  the rows from another run: {GLUON_RECORD}, recorded on "
                     f"{results.provenance(records['gluon']['meta'])}")  # fmt: skip
    if source == BASELINES_RECORD:
        lines.append(f"  the experiment, every step in one run: {NOT_YET}")
    return "\n".join(lines)


def chart_rows(label: str, dtype: str, records: dict) -> list[dict]:
    """Section 6's rows as bars for widgets.comparison_figure, labelled as in the table: the rows of
    one run only (not measured yet and another run's left out)."""
    from .. import results

    source, rows = summary_rows(label, dtype, records)
    if not rows:
        return []
    meta = records["experiment" if source == EXPERIMENT_RECORD else "baselines"]["meta"]
    provenance = f"{results.provenance(meta)} ({source})"
    return [
        {"label": r["name"], "case": "", "median_ms": r["ms"], "p20_ms": r["p20"], "p80_ms": r["p80"], "gbs": None,
         "tflops": None, "provenance": provenance}
        for r in rows
        if r["ms"] is not None and not r["note"].startswith("another run")
    ]  # fmt: skip


def launch_lines(launches) -> list[str]:
    """Each recorded launch of ws_compression compiled for sm_90 (a few seconds each) and what its code
    holds, as text: warps, shared memory, the warp_specialize region, setmaxnreg, wgmma, TMA, mbarrier
    waits and the loads outside TMA (ld.global: the epilogue's lookup)."""
    import re

    from .. import compilation
    from ..tasks.ch09_pipelining import ws_facts

    lines = []
    for i, launch in enumerate(launches):
        kernel, _, kwargs = launch
        compiled = compilation.compile_launch(launch)
        facts = ws_facts(compiled, kernel.__name__)
        loads = len(re.findall(r"\bld\.global", compilation.asm(compiled, "ptx")))
        shown = ("NUM_BUFFERS", "num_warps")
        settings = ", ".join(f"{k} {kwargs[k]}" for k in shown if k in kwargs)
        lines += [
            f"  launch {i + 1}: {kernel.__name__}, grid {kwargs.get('grid')}, {settings}",
            f"    {facts['num_warps']} warps, {facts['shared'] // 1024} KB shared; warp_specialize regions "
            f"{facts['warp_specialize']}, workers of {facts['worker_warps']} warps asking {facts['worker_regs']} "
            f"registers; setmaxnreg {', '.join(facts['setmaxnreg']) or 'none'}",
            f"    wgmma.mma_async {facts['wgmma']}, TMA loads {facts['tma_loads']}, TMA stores {facts['tma_stores']}, "
            f"mbarrier waits {facts['mbarrier_waits']}, ld.global (loads outside TMA) {loads}",
        ]
    return lines
