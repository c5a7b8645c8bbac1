"""Chapter 11's decode kernel (solutions/paged_decode.py) beside variants of its launch, to find what keeps
a paged decode from the GPU's bandwidth: the slice length (how many programs, and how even their work),
pages walked a step (bytes in flight a program), pipeline stages and warps.

    python scripts/decode_sweep.py --check        # CPU: each variant's values in the interpreter
    python scripts/decode_sweep.py --bench OUT    # GPU: every variant at the task's bench cases, to OUT

Each variant launches the solution's own kernels with other choices: its slices, TILE_PAGES (pages a step
of the walk), stages and warps. The sweep of 2026-12-05 (results/attention_h100_2026-12-05/third_run) ran a
copy of the partial kernel with TILE_PAGES while the solution still took a page a step; the solution took
64-token steps from it, and the copy went.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import course_lib  # noqa: E402, F401  (first: it picks the mode)
import torch  # noqa: E402
import triton  # noqa: E402

from course_lib import sources, tasks  # noqa: E402

solution = sources.load_module("paged_decode")


def launch(q, k_cache, v_cache, block_table, context_lens, sm_scale, out, *, slice_tokens, tile_pages, stages,
           warps, fill=264):  # fmt: skip
    """The solution's launcher with its choices as arguments: slices of at most ``slice_tokens`` (and
    enough programs to make ``fill``), ``tile_pages`` pages a step, ``stages`` and ``warps``."""
    batch, q_heads, head_dim = q.shape
    page, kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = q_heads // kv_heads
    max_pages = block_table.shape[1]
    least, even = triton.cdiv(fill, batch * kv_heads), triton.cdiv(max_pages * page, slice_tokens)
    num_splits = min(triton.next_power_of_2(max(1, least, even)), 64, triton.next_power_of_2(max_pages))
    pages_per_split = triton.cdiv(max_pages, num_splits)
    if num_splits == 1:
        m = l = acc = out  # noqa: E741
    else:
        m = torch.empty((batch, q_heads, num_splits), dtype=torch.float32, device=q.device)
        l = torch.empty((batch, q_heads, num_splits), dtype=torch.float32, device=q.device)  # noqa: E741
        acc = torch.empty((batch, q_heads, num_splits, head_dim), dtype=torch.float32, device=q.device)
    solution.decode_partial_kernel[(batch, kv_heads, num_splits)](
        q, k_cache, v_cache, block_table, context_lens, m, l, acc, out,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        block_table.stride(0), sm_scale, pages_per_split,
        NUM_SPLITS=num_splits, GROUP=group, BLOCK_G=max(16, triton.next_power_of_2(group)),
        PAGE=page, HEAD_DIM=head_dim, TILE_PAGES=tile_pages, num_warps=warps, num_stages=stages,
    )  # fmt: skip
    if num_splits > 1:
        solution.decode_merge_kernel[(batch, q_heads)](
            m, l, acc, out, out.stride(0), out.stride(1), NUM_SPLITS=num_splits, HEAD_DIM=head_dim, num_warps=4
        )
    return out


CONFIGS = [
    dict(slice_tokens=s, tile_pages=t, stages=st, warps=w)
    for s, t, st, w in itertools.product((256, 512, 1024, 2048), (1, 2, 4, 8), (2, 3, 4), (4, 8))
    if not (t == 8 and w == 4)
]


def _name(config: dict) -> str:
    return "slice{slice_tokens}_tile{tile_pages}_s{stages}_w{warps}".format(**config)


def check() -> int:
    """Each slice length and tile on the task's CPU cases, in the interpreter, against its reference."""
    from course_lib.compare import compare
    from course_lib.grader.cases import reference_of

    spec = tasks.get("paged_decode")
    failures = 0
    for case in spec.all_cases("cpu"):
        inputs = spec.make_inputs(case, torch.Generator().manual_seed(7))
        expected = reference_of(spec, {k: v for k, v in inputs.items() if k != "out"})
        for slice_tokens, tile_pages in itertools.product((16, 64, 2048), (1, 2, 4)):
            out = torch.empty_like(inputs["out"])
            args = {k: v for k, v in inputs.items() if k != "out"}
            launch(**args, out=out, slice_tokens=slice_tokens, tile_pages=tile_pages, stages=2, warps=4)
            verdict = compare(out.double(), expected, spec.tolerance[case.dtype], poisoned=False)
            failures += not verdict.ok
            if not verdict.ok:
                print(f"BAD {case.label} slice {slice_tokens} tile {tile_pages}: {verdict.summary}")
    print(f"{failures} failures")
    return 1 if failures else 0


def bench(out_dir: str) -> int:
    from course_lib import runtime, timing

    spec = tasks.get("paged_decode")
    rows = []
    for case in spec.bench_cases:
        inputs = spec.make_inputs(case, torch.Generator(device="cuda").manual_seed(0))
        args = {k: v for k, v in inputs.items() if k != "out"}
        out = inputs["out"]
        moved = spec.bytes_moved(case)
        expected = solution.paged_decode(**args, out=torch.empty_like(out)).float()
        variants = {"solution": lambda: solution.paged_decode(**args, out=out)}
        for config in CONFIGS:
            variants[_name(config)] = lambda config=config: launch(**args, out=out, **config)
        for name, fn in spec.bench_variants(case).items():
            variants[name] = lambda fn=fn: fn(**args)
        for name, fn in variants.items():
            try:
                got = fn()
                err = ((got.float() - expected).norm() / expected.norm()).item()
                t = timing.bench(fn, rep_ms=60)
            except Exception as e:
                rows.append({"case": case.label, "variant": name, "error": repr(e)[:300]})
                print(f"{case.label:<22} {name:<28} {e!r}"[:200], flush=True)
                continue
            gbs = moved / t.median_ms / 1e6
            rows.append({"case": case.label, "variant": name, "median_ms": t.median_ms, "p20_ms": t.p20_ms,
                         "p80_ms": t.p80_ms, "gb_s": gbs, "rel_error": err})  # fmt: skip
            print(f"{case.label:<22} {name:<28} {t.median_ms * 1e3:8.1f} us {gbs:7.0f} GB/s err {err:.0e}", flush=True)
    for label in dict.fromkeys(r["case"] for r in rows):
        timed = sorted((r for r in rows if r["case"] == label and "gb_s" in r), key=lambda r: -r["gb_s"])
        print(f"best at {label}: " + ", ".join(f"{r['variant']} {r['gb_s']:.0f}" for r in timed[:5]))
    meta = {"gpu": runtime.gpu_info().name, "versions": runtime.versions(), "date": time.strftime("%Y-%m-%d"),
            "method": "course_lib.timing.bench (CUDA events, L2 flushed, median); bytes: K and V read, q and out"}  # fmt: skip
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "experiment_decode_sweep.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--bench", metavar="OUT")
    args = parser.parse_args()
    code = 0
    if args.check:
        code |= check()
    if args.bench:
        code |= bench(args.bench)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
