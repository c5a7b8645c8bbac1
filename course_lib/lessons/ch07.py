"""What notebook 07 reads and shows from the records: fused_linear's bench at one shape (each variant's
fastest time, and at 8192^3 the comparisons the prose reads) and the decode experiment's programs
per SM. Each function returns the text the notebook prints; the byte counts and floors stay in the
notebook.
"""

from __future__ import annotations

from .. import results

VARIANTS = (  # fused_linear's bench variants, in the order the tables print them
    "solution",
    "torch_eager",
    "torch_compile",
    "torch_compile_max-autotune",
    "cublas_matmul_only",
    "cublaslt_gelu_epilogue",
    "solution_no_epilogue",
    "course_matmul_no_epilogue",
)
DECODE_RECORD = "experiment_decode_h200.json"  # section 2's decode kernels: BLOCK_N, split-K and GEMV at M = 1, 4, 16


def recorded(shape, variants=VARIANTS) -> tuple[dict, str]:
    """({variant: its fastest median, ms}, the table) for one shape of fused_linear's bench records
    (``results.records("fused_linear")``): provenance, then each variant's fastest time, TFLOP/s and
    GB/s, "not recorded yet" where the bench has no row of it; ({}, a line) where it has no row of
    the shape."""
    rows = [r for r in results.records("fused_linear") if tuple(r["shape"]) == tuple(shape)]
    if not rows:
        return {}, f"{tuple(shape)}: not recorded yet (results/bench_fused_linear_h200.json)"
    lines = [f"{tuple(shape)} bf16, recorded on {rows[0]['provenance']} ({rows[0]['file']}):"]
    fastest = {}
    for name in variants:
        mine = [r for r in rows if r["variant"] == name]
        if not mine:
            lines.append(f"  {name:<28} not recorded yet")
            continue
        best = min(mine, key=lambda r: r["median_ms"])
        fastest[name] = best["median_ms"]
        lines.append(
            f"  {name:<28}{best['median_ms'] * 1e3:>10.1f} us {best['tflops']:>7.1f} TFLOP/s {best['gbs']:>7.0f} GB/s"
        )
    return fastest, "\n".join(lines)


def large_shape_text(extra_bytes: float, copy_bw: float, shape=(8192, 8192, 8192)) -> str:
    """Section 1's table at the large shape (``recorded``) and, under it, the comparisons the prose
    reads: fused against eager, eager minus the matmul alone against ``extra_bytes`` (the unfused
    passes) at ``copy_bw`` bytes/s, the epilogue's cost on the same kernel, and torch.compile's
    max-autotune against its default."""
    big, table = recorded(shape)
    lines = [table]
    if {"solution", "torch_eager"} <= set(big):
        saved = big["torch_eager"] - big["solution"]
        share = saved / big["torch_eager"]
        lines.append(f"  fused against eager: {saved * 1e3:.0f} us less, {share:.0%} of eager's time")
    if {"torch_eager", "cublas_matmul_only"} <= set(big):
        passes = big["torch_eager"] - big["cublas_matmul_only"]
        lines.append(
            f"  eager minus the matmul alone: {passes * 1e3:.0f} us for + bias and GELU, "
            f"{passes * 1e-3 / (extra_bytes / copy_bw):.1f}x the {extra_bytes / copy_bw * 1e6:.0f} us their bytes "
            f"take at copy speed"
        )
    if {"solution", "solution_no_epilogue"} <= set(big):
        cost = big["solution"] - big["solution_no_epilogue"]
        lines.append(
            f"  the epilogue's cost on the same kernel: {cost * 1e3:.0f} us, "
            f"{big['solution'] / big['solution_no_epilogue'] - 1:.1%}"
        )
    if {"torch_compile", "torch_compile_max-autotune"} <= set(big):
        lines.append(
            f"  torch.compile max-autotune against the default compile: "
            f"{big['torch_compile_max-autotune'] / big['torch_compile']:.2f}x the time"
        )
    return "\n".join(lines)


# a split-K row's loop form and atomics; the 2026-12-01 record's rows name neither: they looped over the
# slice's K offsets (not pipelined) with Triton's default atomics
_SPLIT_FORMS = (
    (("steps", "relaxed"), "loop over steps, relaxed atomics"),
    (("steps", "acq_rel"), "loop over steps, default atomics (acq_rel)"),
    (("bounds", "relaxed"), "loop over K offsets (not pipelined)"),
    (("bounds", "acq_rel"), "loop over K offsets (not pipelined), default atomics"),
)


def _wide(config: dict) -> bool:
    """The 2026-12-01 record's split-K tiles of 32K elements of weight (128 x 256, 256 x 128), wider than
    any plain kernel's tile that fits its stages in shared memory."""
    return config["BLOCK_N"] * config["BLOCK_K"] >= 128 * 256


def _split_form(row: dict) -> tuple[str, str]:
    config = row.get("config") or {}
    return config.get("loop", "bounds"), config.get("sem", "acq_rel")


def _resources(rows: list[dict]) -> str:
    """The compiled kernels' shared memory (KB) and spilled registers over ``rows``, where recorded."""
    shared = [r["config"]["shared_bytes"] / 1024 for r in rows if "shared_bytes" in r["config"]]
    spills = [r["config"]["n_spills"] for r in rows if "n_spills" in r["config"]]
    if not shared or not spills:
        return ""
    return f"; {min(shared):.0f}-{max(shared):.0f} KB shared, {min(spills)}-{max(spills)} spills"


def _split_k_lines(rows: list[dict]) -> list[str]:
    """Split-K's rows of one M: per loop form and atomics, the range over 2 or 4 parts on the plain
    kernel's tiles (and on the first record's wide tiles apart), and the parts of the best whole run."""
    split = [r for r in rows if r["variant"] == "split_k"]
    lines = []
    for form, label in _SPLIT_FORMS:
        mine = [r for r in split if _split_form(r) == form]
        for wide in (False, True):
            picked = [r for r in mine if _wide(r["config"]) == wide]
            us = [r["median_ms"] * 1e3 for r in picked]
            if us:
                where = " (the first record's wide tiles)" if wide else ""
                lines.append(f"  split-K, {label}{where}: {min(us):.1f} to {max(us):.1f} us{_resources(picked)}")
    best = min((r for r in split if _split_form(r) == ("steps", "relaxed")), key=lambda r: r["median_ms"], default=None)
    if best is not None:
        parts = {}
        for r in rows:
            if r["variant"].startswith("split_k_") and r["config"] == best["config"]:
                parts[r["variant"].removeprefix("split_k_")] = r["median_ms"] * 1e3
        if parts:
            cfg = best["config"]
            lines.append(
                f"    its best ({cfg['split_k']} parts, BLOCK_N {cfg['BLOCK_N']}, BLOCK_K {cfg['BLOCK_K']}) in parts, "
                "each timed alone: " + ", ".join(f"{name} {us:.1f} us" for name, us in parts.items())
            )
    return lines


def split_k_loop_forms(M: int = 16, N: int = 8192, K: int = 8192, split: int = 2) -> dict[str, tuple[int, int]]:
    """{loop form: (cp.async instructions in the PTX, bytes of shared memory)} of ``demos.split_k_slices``
    compiled for sm_90 on this machine (nothing runs: the tensors only give shapes and dtypes), bf16, its
    decode tile (BLOCK_N 64, BLOCK_K 256, 4 stages)."""
    import torch

    from .. import compilation, demos

    x, w = torch.empty(M, K, dtype=torch.bfloat16), torch.empty(N, K, dtype=torch.bfloat16)
    ws = torch.empty(M, N)
    forms = {}
    for loop in ("offsets", "steps"):
        kernel = compilation.compile_for_args(
            demos.split_k_slices, x, w, ws, M, N, K, BLOCK_M=16, BLOCK_N=64, BLOCK_K=256, SPLIT_K=split, LOOP=loop,
            num_warps=4, num_stages=4,
        )  # fmt: skip
        ptx = compilation.asm(kernel, "ptx")
        forms[loop] = (ptx.count("cp.async.cg") + ptx.count("cp.async.ca"), kernel.metadata.shared)
    return forms


def split_k_loop_text(forms: dict[str, tuple[int, int]]) -> str:
    """The lines notebook 07 prints for ``split_k_loop_forms``."""
    return "\n".join(
        f"loop over {loop:<8}{copies:4} cp.async in the PTX, {shared // 1024:4} KB of shared memory"
        for loop, (copies, shared) in forms.items()
    )


def decode_table(data: dict | None) -> str:
    """The decode experiment (DECODE_RECORD, or None where it is not recorded), N = K = 8192 bf16: per
    M, cuBLAS's matmul alone, the range of times of each BLOCK_N (so each count of programs) over
    BLOCK_K and stages, split-K's range per loop form and atomics (and its parts) and GEMV's best;
    then, at M = 16, 64 programs against 128."""
    if data is None:
        return f"not recorded yet (results/{DECODE_RECORD})"
    lines = [f"recorded on {results.provenance(data['meta'])} ({DECODE_RECORD}); N = K = 8192 bf16, BLOCK_M = 16"]
    for M in (1, 4, 16):
        rows = [r for r in data["rows"] if r["shape"][0] == M]
        alone = [r["median_ms"] * 1e3 for r in rows if r["variant"] == "cublas_mm_only"]
        lines.append(f"M = {M:>2}" + (f" (cuBLAS's matmul alone: {alone[0]:.1f} us)" if alone else ""))
        for bn in sorted({r["config"]["BLOCK_N"] for r in rows if r["variant"] == "small_m"}):
            us = [r["median_ms"] * 1e3 for r in rows if r["variant"] == "small_m" and r["config"]["BLOCK_N"] == bn]
            lines.append(
                f"  BLOCK_N {bn:>3}: {8192 // bn:>3} programs, {min(us):5.1f} to {max(us):5.1f} us over BLOCK_K, stages"
            )
        lines.extend(_split_k_lines(rows))
        gemv = [r["median_ms"] * 1e3 for r in rows if r["variant"] == "gemv"]
        if gemv:
            lines.append(f"  GEMV, no tl.dot:          {min(gemv):7.1f} us at best")
    at16 = [r for r in data["rows"] if r["shape"][0] == 16 and r["variant"] == "small_m"]
    best = {}
    for r in at16:
        bn = r["config"]["BLOCK_N"]
        best[bn] = min(best.get(bn, float("inf")), r["median_ms"] * 1e3)
    if {64, 128} <= set(best):
        slow = [r["median_ms"] * 1e3 for r in at16 if r["config"]["BLOCK_N"] == 128]
        lines.append(
            f"M = 16: 64 programs take {min(slow):.1f} to {max(slow):.1f} us against {best[64]:.1f} for 128 "
            f"at best: {min(slow) / best[64] - 1:.0%} to {max(slow) / best[64] - 1:.0%} slower, not 2x"
        )
    return "\n".join(lines)
