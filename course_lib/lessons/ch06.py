"""What notebook 06 reads and shows from the records: the GPU of section 5's wave model, the grouping
experiment against cuBLAS and its noise band, the two solutions' bench tables, and section 6's stage
counts. Each function returns the text the notebook prints; the models themselves stay in the
notebook, where the prose walks through them.
"""

from __future__ import annotations

from .. import results, runtime

GROUPING_RECORD = "experiment_matmul_h200.json"  # scripts/experiments_gemm.py matmul: each order, beside cuBLAS
STAGES_RECORD = "experiment_stages_h200.json"  # scripts/experiments_gemm.py stages: num_stages 1 to 4
KERNELS = {  # the grouping experiment's matmul kernels of this chapter; its other rows belong to chapter 07
    "pointer": "pointer loads, as in the exercises",
    "tma": "tensor-descriptor (TMA) loads, chapters 08-09",
    "tma_persistent": "TMA, persistent: one program per SM, chapter 09",
}
SOLUTIONS = ("tiled_matmul", "grouped_matmul")  # the chapter's tasks, whose bench files hold the noise band


def wave_hardware() -> tuple[int, float, str]:
    """(SMs, MiB of L2, where the figures come from) for section 5's wave model: this GPU in GPU mode;
    in CPU mode the SM count of the first bench record that holds one (results/), 132 (the H200's
    datasheet) where none does, and the H200's 60 MiB of L2 (torch's L2_cache_size there:
    results/README.md's flush buffer, 480 MiB, is 8x it)."""
    if runtime.is_gpu():
        info = runtime.gpu_info()
        return info.sm_count, info.l2_mib, f"{info.name}, this GPU"
    record_meta = next((d["meta"] for d in results.load_bench_files() if "sm_count" in d["meta"]), None)
    sms = record_meta["sm_count"] if record_meta else 132
    where = f"the H200 of the records ({results.provenance(record_meta)})" if record_meta else "H200 datasheet"
    return sms, 60, where


def config_text(config: dict | None) -> str:
    """A kernel config as sorted "key=value" pairs, the way the tables print it."""
    return ", ".join(f"{k}={v}" for k, v in sorted((config or {}).items()))


def without_group(config: dict | None) -> str:
    """config_text with the grouping taken out: rows that differ only in grouping share it."""
    return config_text({k: v for k, v in (config or {}).items() if k != "GROUP_M"})


def chapter_rows(rows: list[dict]) -> list[dict]:
    """The grouping experiment's rows of this chapter's kernels (KERNELS), epilogue rows left out."""
    return [r for r in rows if r["variant"] in KERNELS and not r.get("epilogue")]


def _order(row: dict) -> str:
    return f"groups of {row.get('group_m', '?')}" if row.get("grouped") else "row by row"


def kernels_table(experiment: dict | None) -> str:
    """Section 5's grouping experiment (GROUPING_RECORD, or None where it is not recorded): its
    provenance, the kernels, and per shape and dtype each row's time, TFLOP/s and share of the
    cuBLAS of the same run, with its order and config."""
    if experiment is None:
        return f"results/{GROUPING_RECORD}: not recorded yet (scripts/experiments_gemm.py writes it on a GPU)"
    lines = [f"recorded on {results.provenance(experiment['meta'])} ({GROUPING_RECORD}); the kernels:"]
    lines += [f"  {variant:<15}{what}" for variant, what in KERNELS.items()]
    cublas = {(tuple(r["shape"]), r["dtype"]): r for r in experiment["rows"] if r["variant"] == "cublas"}
    for (shape, dtype), ref in cublas.items():
        lines.append(f"\n{shape} {dtype}: cuBLAS {ref['median_ms']:.3f} ms, {ref['tflops']:.0f} TFLOP/s")
        for r in chapter_rows(experiment["rows"]):
            if (tuple(r["shape"]), r["dtype"]) == (shape, dtype):
                lines.append(
                    f"  {r['variant']:<15}{_order(r):<12}{r['median_ms']:7.3f} ms {r['tflops']:5.0f} TFLOP/s "
                    f"({r['tflops'] / ref['tflops']:4.0%} of cuBLAS)  {config_text(r.get('config'))}"
                )
    return "\n".join(lines)


def same_call_gaps() -> list[tuple[str, str, tuple, float]]:
    """(task, what, shape, gap) for each pair of timings of one call in one bench file of SOLUTIONS
    (the solution's two repeats; torch_eager and cublas, both a @ b), the gap as max / min - 1."""
    gaps = []
    for task in SOLUTIONS:
        recorded = results.records(task)
        for shape in dict.fromkeys(tuple(r["shape"]) for r in recorded):
            for what, variants in (
                ("the solution's two repeats", {"solution"}),
                ("torch_eager and cublas, both a @ b", {"torch_eager", "cublas"}),
            ):
                times = [r["median_ms"] for r in recorded if tuple(r["shape"]) == shape and r["variant"] in variants]
                if len(times) == 2:
                    gaps.append((task, what, shape, max(times) / min(times) - 1))
    return gaps


def noise_band() -> tuple[float, str]:
    """(the noise band, the line that says where it comes from): the widest of same_call_gaps, 0.0
    where no bench file of SOLUTIONS is recorded."""
    gaps = same_call_gaps()
    if not gaps:
        return 0.0, (
            "noise band: not recorded yet (no bench files for tiled_matmul or grouped_matmul); verdicts without one"
        )
    task, what, shape, noise = max(gaps, key=lambda g: g[3])
    return noise, (
        f"noise band: +-{noise:.1%}, the widest gap between two timings of one call in one bench file "
        f"({what}, {task}, {shape}; {len(gaps)} such gaps, the narrowest {min(g[3] for g in gaps):.1%})"
    )


def verdict(speedup: float, noise: float) -> str:
    """The verdict on a speed-up, "helped", "lost" or "within noise": one inside the noise band says
    nothing either way."""
    return "helped" if speedup > 1 + noise else "lost" if speedup < 1 - noise else "within noise"


def grouping_pairs(rows: list[dict]) -> list[tuple]:
    """(variant, shape, dtype, config, row-by-row row, grouped row) for each pair of the experiment's
    chapter rows that differ only in grouping."""
    pairs = {}
    for r in chapter_rows(rows):
        key = (r["variant"], tuple(r["shape"]), r["dtype"], without_group(r.get("config")))
        pairs.setdefault(key, {})[bool(r.get("grouped"))] = r
    return [(*key, pair[False], pair[True]) for key, pair in pairs.items() if len(pair) == 2]


def grouping_table(experiment: dict | None, noise: float, l2_mib: float, size: int = 2) -> str:
    """Grouped against row by row, all else equal, from the grouping experiment: each pair's speed-up
    and verdict against the noise band, the count of each verdict, and per shape the verdicts beside
    whether a and b (``size`` bytes an element) fit in an L2 of ``l2_mib`` MiB."""
    pairs = grouping_pairs(experiment["rows"]) if experiment else []
    if not pairs:
        return (
            "grouped against row by row: not recorded yet"
            if experiment is None
            else "the experiment holds no pair of rows that differ only in grouping"
        )
    lines = ["\ngrouped against row by row, all else equal: speed-up = time row by row / time grouped"]
    speedups = {}
    for variant, shape, _dtype, config, plain_row, grouped_row in pairs:
        speedup = plain_row["median_ms"] / grouped_row["median_ms"]
        speedups[(variant, shape, config)] = speedup
        lines.append(f"  {variant:<15}{str(shape):<20}{speedup:6.3f}x  {verdict(speedup, noise):<13} [{config}]")
    gains = list(speedups.values())
    count = {way: sum(verdict(g, noise) == way for g in gains) for way in ("helped", "lost", "within noise")}
    lines.append(
        f"\n{len(gains)} pairs: grouping helped in {count['helped']}, lost in {count['lost']}, "
        f"within noise in {count['within noise']}"
    )
    for shape in dict.fromkeys(s for _, s, _ in speedups):
        mine = [g for (_, s, _), g in speedups.items() if s == shape]
        operands = (shape[0] * shape[2] + shape[2] * shape[1]) * size / 2**20  # a and b, MiB
        fits = "fit" if operands <= l2_mib else "do not fit"
        lines.append(
            f"  {str(shape):<20} helped in {sum(verdict(g, noise) == 'helped' for g in mine)} of {len(mine)}, "
            f"lost in {sum(verdict(g, noise) == 'lost' for g in mine)}; speed-ups {min(mine):.3f}x to "
            f"{max(mine):.3f}x; a and b together {operands:,.0f} MiB: they {fits} in the {l2_mib:.0f} MiB L2"
        )
    return "\n".join(lines)


def bench_table(task: str, recorded: list[dict]) -> str:
    """One task's bench records (``results.records(task)``): provenance, then per shape and dtype
    each variant's time, TFLOP/s and share of the cuBLAS of the same run; the solution's runs
    numbered."""
    if not recorded:
        return (
            f"{task}: no benchmark record yet, not recorded yet "
            f"(python -m course_lib bench {task} --record results/bench_{task}_h200.json on a GPU)"
        )
    lines = [f"{task}, recorded on {recorded[0]['provenance']} ({recorded[0]['file']}):"]
    by_case = {}
    for r in recorded:
        by_case.setdefault((tuple(r["shape"]), r["dtype"]), []).append(r)
    for (shape, dtype), rows in by_case.items():
        ref = next((r for r in rows if r["variant"] == "cublas"), None)
        lines.append(f"  {shape} {dtype}:")
        for r in rows:
            share = f"{r['tflops'] / ref['tflops']:5.0%} of cuBLAS" if ref else ""
            run = f" (run {r['repeat']})" if r["variant"] == "solution" else ""
            lines.append(f"    {r['variant'] + run:<20}{r['median_ms']:8.3f} ms {r['tflops']:6.0f} TFLOP/s {share}")
    return "\n".join(lines)


def solution_tflops(recorded: list[dict]) -> dict:
    """(shape, dtype) -> the faster of the solution's recorded runs, in TFLOP/s."""
    best = {}
    for r in recorded:
        if r["variant"] == "solution":
            key = (tuple(r["shape"]), r["dtype"])
            best[key] = max(best.get(key, 0.0), r["tflops"])
    return best


def solutions_table(bench_records: dict, noise: float) -> str:
    """grouped_matmul against tiled_matmul from their bench records ({task: records}): the faster run
    of each per shape and dtype, the change and its verdict against the noise band."""
    plain = solution_tflops(bench_records["tiled_matmul"])
    grouped_best = solution_tflops(bench_records["grouped_matmul"])
    shared_cases = [key for key in plain if key in grouped_best]
    if not shared_cases:
        return "the two solutions side by side: not recorded yet"
    lines = [
        "grouped_matmul (grouped, autotuned) against tiled_matmul (row by row, one fixed tile), faster run of each:"
    ]
    for key in shared_cases:
        ratio = grouped_best[key] / plain[key]
        way = "within noise" if abs(ratio - 1) <= noise else "faster" if ratio > 1 else "slower"
        lines.append(
            f"  {str(key[0]):<20}{key[1]:<10}{plain[key]:6.0f} -> {grouped_best[key]:6.0f} TFLOP/s "
            f"({ratio - 1:+.1%}, {way})"
        )
    lines.append("(the autotuner may also have picked another tile: the experiment above holds the tile fixed)")
    return "\n".join(lines)


def stages_sweep_table(sweep: dict | None) -> str:
    """Section 6's sweep of num_stages (STAGES_RECORD, or None where it is not recorded): TFLOP/s by
    stage count per shape and tile, the best count's gain over one stage, and cuBLAS in the same run."""
    if sweep is None:
        return "num_stages 1 to 4: not recorded yet (scripts/experiments_gemm.py stages writes it on a GPU)"
    cublas_sweep = {tuple(r["shape"]): r["tflops"] for r in sweep["rows"] if r["variant"] == "cublas"}
    sweep_rows = {}  # (shape, tile and warps) -> {num_stages: TFLOP/s}
    for r in sweep["rows"]:
        if r["variant"] != "cublas":
            cfg = r["config"]
            tile = f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']}, {cfg['num_warps']} warps"
            sweep_rows.setdefault((tuple(r["shape"]), tile), {})[cfg["num_stages"]] = r["tflops"]
    counts = sorted({s for by_stages in sweep_rows.values() for s in by_stages})
    lines = [
        f"recorded on {results.provenance(sweep['meta'])} ({STAGES_RECORD}); "
        f"grouped pointer loads, bf16, TFLOP/s by num_stages:",
        f"{'shape':<20}{'tile':<21}" + "".join(f"{s:>7}" for s in counts) + f"{'best / 1 stage':>17}{'cuBLAS':>8}",
    ]
    for (shape, tile), by_stages in sweep_rows.items():
        best = max(by_stages, key=by_stages.get)
        gain = f"{by_stages[best] / by_stages[1]:.2f}x at {best}" if 1 in by_stages else "-"
        figures = "".join(f"{by_stages[s]:>7.0f}" if s in by_stages else f"{'-':>7}" for s in counts)
        lines.append(f"{str(shape):<20}{tile:<21}{figures}{gain:>17}{cublas_sweep.get(shape, float('nan')):>8.0f}")
    return "\n".join(lines)


def stage_pairs_table(experiment: dict | None) -> str:
    """The grouping experiment's rows that differ only in num_stages: TFLOP/s by stage count for each
    shape, kernel, order and config, and the range of the most stages against the fewest."""
    stage_rows = {}
    for r in chapter_rows((experiment or {}).get("rows", [])):
        config = dict(r.get("config") or {})
        if "num_stages" in config:
            stages = config.pop("num_stages")
            key = (tuple(r["shape"]), r["dtype"], r["variant"], _order(r), config_text(config))
            stage_rows.setdefault(key, {})[stages] = r
    stage_rows = {k: v for k, v in stage_rows.items() if len(v) > 1}
    if not stage_rows:
        return (
            "num_stages compared: not recorded yet"
            if experiment is None
            else "the experiment holds no rows that differ only in num_stages"
        )
    lines = [f"recorded on {results.provenance(experiment['meta'])}, TFLOP/s by num_stages:"]
    for (shape, _dtype, variant, order, config), by_stages in stage_rows.items():
        figures = "  ".join(f"{s} stages: {r['tflops']:.0f}" for s, r in sorted(by_stages.items()))
        lines.append(f"  {str(shape):<20}{variant:<15}{order:<12}[{config}]: {figures}")
    changes = [r[max(r)]["tflops"] / r[min(r)]["tflops"] - 1 for r in stage_rows.values()]
    lines.append(f"the most stages against the fewest recorded: {min(changes):+.1%} to {max(changes):+.1%} in TFLOP/s")
    return "\n".join(lines)
