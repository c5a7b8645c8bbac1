"""Chapter 11, section 6 on a GPU: what just-in-time compilation costs a decode server as context lengths grow.

Decode makes one token per step, so the context length grows by one every step. Three ways to run the
course's paged_decode (solutions/paged_decode.py) over steps 1 .. MAX_CONTEXT:

- **table grows**: the block table is as wide as the longest sequence needs, so its width (and the launch's
  NUM_SPLITS and pages_per_split) changes as the context crosses page and power-of-two boundaries;
- **table fixed**: the table is allocated once at the widest context allowed; nothing the JIT keys on changes;
- **CUDA graph**: the fixed-width launch captured once and replayed, the lengths updated in place.

Beside them, torch.compile of a plain decode (SDPA over a contiguous cache of the current length, its query
heads grouped over the same KV heads, so that it reads the same bytes), with
static shapes (a compile per new length) and with dynamic=True, each length called twice. For each: the
number of compiles (new JIT cache entries, or torch.compile's recompiles), the steps that paid one, the
total time of those steps, and the median time of the other steps (wall time around each step,
synchronized).

    python scripts/attention_jit.py --out results/experiment_attention_jit_h200.json     # GPU
    python scripts/attention_jit.py --dry-run                                            # CPU: the loops, tiny
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# compiles as a fresh server pays them: Triton's and inductor's disk caches in new, empty folders (an earlier
# run's kernels would otherwise load in a fraction of a compile's time)
for _name in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
    os.environ[_name] = tempfile.mkdtemp(prefix="attention-jit-")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import course_lib  # noqa: E402, F401  (first: it picks the mode)
import torch  # noqa: E402

from course_lib import runtime, sources  # noqa: E402


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _compiled_kernels(module) -> int:
    """JIT cache entries of the module's two kernels, over every device (GPU mode only; 0 in the interpreter)."""
    total = 0
    for kernel in (module.decode_partial_kernel, module.decode_merge_kernel):
        for entry in getattr(kernel, "device_caches", {}).values():
            total += len(entry[0]) if isinstance(entry, tuple) else len(entry)
    return total


def _summary(name: str, times: list[float], compiled: list[bool], compiles: int) -> dict:
    paid = [t for t, c in zip(times, compiled) if c]
    steady = [t for t, c in zip(times, compiled) if not c]  # none when every step compiled: said so, not faked
    median = round(statistics.median(steady) * 1e6, 2) if steady else None
    row = {"way": name, "steps": len(times), "compiles": compiles, "steps_that_compiled": len(paid),
           "compile_steps_s": round(sum(paid), 4), "steady_median_us": median, "total_s": round(sum(times), 4)}  # fmt: skip
    said = f"{median:9.1f} us median" if steady else "none (every step compiled)"
    print(f"{name:<28} {compiles:>3} compiles, {len(paid):>3} steps paid one ({sum(paid):7.3f} s); other steps "
          f"{said}; all {len(times)} steps {sum(times):7.3f} s")  # fmt: skip
    return row


def paged(module, batch, q_heads, kv_heads, dim, page, max_context, contexts, fixed: bool, graph: bool, device):
    dtype = torch.bfloat16
    max_pages = -(-max_context // page)
    pages_total = batch * max_pages
    k_cache = torch.randn(pages_total, page, kv_heads, dim, device=device, dtype=dtype)
    v_cache = torch.randn_like(k_cache)
    full_table = torch.arange(pages_total, device=device, dtype=torch.int32).view(batch, max_pages)
    q = torch.randn(batch, q_heads, dim, device=device, dtype=dtype)
    out = torch.empty_like(q)
    lens = torch.empty(batch, device=device, dtype=torch.int32)
    times, compiled = [], []
    before = _compiled_kernels(module)
    runner = None
    if graph:  # captured once at the fixed width, replayed with the lengths written in place
        lens.fill_(1)
        module.paged_decode(q, k_cache, v_cache, full_table, lens, dim**-0.5, out)  # compile and warm up first
        _sync()
        runner = torch.cuda.CUDAGraph()
        with torch.cuda.graph(runner):
            module.paged_decode(q, k_cache, v_cache, full_table, lens, dim**-0.5, out)
    for n in contexts:
        table = full_table if fixed else full_table[:, : -(-n // page)]
        seen = _compiled_kernels(module)
        _sync()
        start = time.perf_counter()
        lens.fill_(n)
        if runner is not None:
            runner.replay()
        else:
            module.paged_decode(q, k_cache, v_cache, table, lens, dim**-0.5, out)
        _sync()
        times.append(time.perf_counter() - start)
        compiled.append(_compiled_kernels(module) > seen)
    return times, compiled, _compiled_kernels(module) - before


def compiled_sdpa(batch, q_heads, kv_heads, dim, contexts, dynamic: bool, device):
    """The same decode as paged_decode's, query heads grouped over ``kv_heads`` (enable_gqa): the same bytes
    read. The first record (2026-12-05) gave SDPA a key and value head per query head, 4x the bytes."""
    import torch._dynamo

    torch._dynamo.reset()
    dtype = torch.bfloat16

    def decode(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    fn = torch.compile(decode, dynamic=dynamic)
    q = torch.randn(batch, q_heads, 1, dim, device=device, dtype=dtype)
    k_all = torch.randn(batch, kv_heads, max(contexts), dim, device=device, dtype=dtype)
    v_all = torch.randn_like(k_all)
    times, compiled = [], []
    frames = torch._dynamo.utils.counters["stats"]
    for n in contexts:
        k, v = k_all[:, :, :n], v_all[:, :, :n]
        for _ in range(2):  # the first call at a new length may compile; the second shows the step after it
            seen = frames["unique_graphs"]
            _sync()
            start = time.perf_counter()
            fn(q, k, v)
            _sync()
            times.append(time.perf_counter() - start)
            compiled.append(frames["unique_graphs"] > seen)
    return times, compiled, sum(compiled)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="write the record here (JSON)")
    parser.add_argument(
        "--dry-run", action="store_true", help="CPU, tiny shapes: the loops run, no figure means anything"
    )
    args = parser.parse_args()
    if not args.dry_run and not runtime.is_gpu():
        print("GPU only (or --dry-run)", file=sys.stderr)
        return 2
    device = runtime.device()
    module = sources.load_module("paged_decode")
    if args.dry_run:
        batch, q_heads, kv_heads, dim, page, max_context = 2, 4, 2, 64, 16, 80
        contexts = list(range(1, max_context + 1, 7))
    else:  # a decode batch as notebook 11's: 32 query heads over 8 KV heads of 128, pages of 16 tokens
        batch, q_heads, kv_heads, dim, page, max_context = 16, 32, 8, 128, 16, 4096
        contexts = list(range(1, max_context + 1))
    rows = []
    shape = (batch, q_heads, kv_heads, dim, page, max_context, contexts)
    for name, fixed, graph in (("paged_decode, table grows", False, False), ("paged_decode, table fixed", True, False),
                               ("paged_decode, CUDA graph", True, True)):  # fmt: skip
        if graph and args.dry_run:
            continue
        times, compiled, compiles = paged(module, *shape, fixed=fixed, graph=graph, device=device)
        rows.append(_summary(name, times, compiled, compiles))
    if not args.dry_run:
        # static shapes compile once per new length (each a few seconds); past its recompile limit (8 by
        # default) dynamo runs the function uncompiled, so 8 lengths, 512 apart, each called twice (a compile,
        # then a step): that limit is dynamo's setting, not something this run measures
        steps = contexts[:: max(1, len(contexts) // 8)][:8]
        for name, dynamic in (("torch.compile SDPA, static", False), ("torch.compile SDPA, dynamic", True)):
            times, compiled, compiles = compiled_sdpa(batch, q_heads, kv_heads, dim, steps, dynamic, device)
            rows.append(_summary(name, times, compiled, compiles))
    if args.out:
        meta = {"gpu": runtime.gpu_info().name if runtime.gpu_info() else "cpu (dry run)", "versions": runtime.versions(),
                "date": time.strftime("%Y-%m-%d"), "shape": dict(zip(("batch", "q_heads", "kv_heads", "head_dim",
                "page", "max_context"), shape[:6])), "method": "wall time around each step, synchronized; Triton's and inductor's disk caches in fresh folders"}  # fmt: skip
        Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
