"""Chapter 11's Gluon kernel (solutions/ws_attention.py, FlashAttention-3's structure on Hopper) outside the
grader: run in the CPU simulator over many seeds, compiled for sm_90, and timed on a GPU beside SDPA's
backends and the course's Triton kernel (solutions/flash_attention.py).

    python scripts/gluon_attention.py --simulate [--seeds 12]  # CPU: the simulator, values and protocol
    python scripts/gluon_attention.py --compile      # CPU: compile for sm_90, count wgmma and setmaxnreg
    python scripts/gluon_attention.py --smoke        # GPU: small shapes against float64, before the rest
    python scripts/gluon_attention.py --bench OUT    # H200: time against SDPA's backends and the Triton kernel
    python scripts/gluon_attention.py --causal-study OUT  # GPU: variants that say what slows the causal kernel
    python scripts/gluon_attention.py --d64 OUT      # GPU: head dim 64, three consumer warpgroups against two
    --kernel FOLDER: the ws_attention.py that --simulate, --compile and --smoke take (default: the solution), e.g.
    scripts/attention_variants/first_version
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import course_lib  # noqa: E402, F401  (first: it picks the mode)
import torch  # noqa: E402


from course_lib import sources  # noqa: E402
from course_lib.tasks.ch11_attention import attention_reference  # noqa: E402

attention_ws = sources.load_module("ws_attention").ws_attention
ROOT = Path(__file__).resolve().parent.parent


def simulate(seeds: int = 1) -> int:
    """Each shape under ``seeds`` orders of events (and 1 to 3 programs): values against float64, and the
    barrier protocol, which the simulator checks as the kernel runs."""
    from course_lib import gluon_cpu

    failures = 0
    shapes = [((1, 2, 200, 64), False), ((1, 1, 300, 64), True), ((2, 1, 130, 128), True), ((1, 2, 64, 128), False),
              ((2, 1, 70, 64), True)]  # fmt: skip
    for seed in range(seeds):
        for (B, H, S, D), causal in shapes:
            gen = torch.Generator().manual_seed(seed)
            q, k, v = (torch.randn(B, H, S, D, generator=gen).to(torch.bfloat16) for _ in range(3))
            out = torch.full_like(q, float("nan"))
            start = time.perf_counter()
            try:
                with gluon_cpu.launches_simulated(seed=seed, event_weight=(0.2, 1.0, 5.0)[seed % 3]):
                    attention_ws(q, k, v, out, causal, D**-0.5, sms=1 + seed % 3)
            except ValueError as e:  # a variant's launcher refuses what it is not written for
                print(f"skip seed {seed} {(B, H, S, D)} causal={causal}: {e}")
                continue
            except Exception as e:  # a protocol error or a deadlock, named by the simulator
                failures += 1
                print(f"BAD seed {seed} {(B, H, S, D)} causal={causal}: {type(e).__name__}: {e}"[:400])
                continue
            expected = attention_reference(q.double(), k.double(), v.double(), causal, D**-0.5)
            error = ((out.double() - expected).norm() / expected.norm()).item()
            ok = error < 8e-3 and not torch.isnan(out).any()
            failures += not ok
            print(f"{'ok ' if ok else 'BAD'} seed {seed} {(B, H, S, D)} causal={causal}: relative error {error:.1e} "
                  f"({time.perf_counter() - start:.1f} s)")  # fmt: skip
    return 1 if failures else 0


def compile_sm90() -> int:
    from course_lib import compilation

    for D in (64, 128):
        for causal in (False, True):
            q = torch.empty(2, 4, 1024, D, dtype=torch.bfloat16)
            launches = compilation.recorded_launches(attention_ws, q, q.clone(), q.clone(), q.clone(), causal, 0.1)
            compiled = compilation.compile_launch(launches[-1])
            ptx = compilation.asm(compiled, "ptx")
            print(f"D={D} causal={causal}: wgmma {ptx.count('wgmma.mma_async')}, setmaxnreg "
                  f"{sorted(set(line.split()[-1] for line in ptx.splitlines() if 'setmaxnreg' in line))}, shared "
                  f"{compiled.metadata.shared} bytes; {_ptxas_report(ptx)}")  # fmt: skip
    return 0


def _ptxas_report(ptx: str) -> str:
    """ptxas -v on the PTX, for sm_90a: registers and spills (a spill in the consumers' loop costs more than
    any overlap buys). Triton's NVIDIA backend ships the ptxas; the newer of its two reads newer PTX."""
    import subprocess
    import tempfile

    import triton

    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    for tool in (tools / "ptxas-blackwell", tools / "ptxas"):
        if not tool.exists():
            continue
        with tempfile.TemporaryDirectory() as scratch:
            source = Path(scratch) / "kernel.ptx"
            source.write_text(ptx)
            done = subprocess.run([str(tool), "-arch=sm_90a", "-v", str(source), "-o", str(Path(scratch) / "k.o")],
                                  capture_output=True, text=True)  # fmt: skip
        if done.returncode == 0:
            said = [" ".join(line.split("info    :")[-1].split()) for line in done.stderr.splitlines()
                    if "spill" in line or "registers" in line]  # fmt: skip
            return f"ptxas ({tool.name}): " + "; ".join(said)
    return "ptxas: none here reads this PTX"


def smoke() -> int:
    """On a GPU, before anything long: the kernel, and the one without the overlap, on small shapes
    against float64 (a hang shows here, under the caller's timeout, not in the grader's)."""
    no_overlap = sources.load_module("ws_attention", ROOT / "tests" / "wrong" / "ch11_ws_no_overlap").ws_attention
    failures = 0
    for (B, H, S, D), causal in [((1, 2, 200, 64), False), ((2, 2, 333, 128), True), ((1, 4, 1024, 128), False)]:
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        expected = attention_reference(q.double(), k.double(), v.double(), causal, D**-0.5)
        for name, fn in (("ws_attention", attention_ws), ("no_intra_overlap", no_overlap)):
            out = torch.full_like(q, float("nan"))
            start = time.perf_counter()
            fn(q, k, v, out, causal, D**-0.5)
            torch.cuda.synchronize()
            error = ((out.double() - expected).norm() / expected.norm()).item()
            ok = error < 8e-3
            failures += not ok
            print(f"{'ok ' if ok else 'BAD'} {name} {(B, H, S, D)} causal={causal}: relative error {error:.1e} "
                  f"({time.perf_counter() - start:.1f} s with the compile)", flush=True)  # fmt: skip
    return 1 if failures else 0


def bench(out_dir: str) -> int:
    from course_lib.tasks import ch11_attention as ch11

    fa = sources.load_module("flash_attention")
    # the same kernel with the softmax after both GEMMs' wait (values right): what the overlap inside a
    # warpgroup buys, beside the ping-pong between warpgroups that both keep
    no_overlap = sources.load_module("ws_attention", ROOT / "tests" / "wrong" / "ch11_ws_no_overlap").ws_attention
    # the kernel as first written (every tile masked, pairs in order): what the solution's changes bought
    first = sources.load_module("ws_attention", ROOT / "scripts" / "attention_variants" / "first_version").ws_attention
    rows = []
    for (B, H, S, D), causal in [((4, 32, 8192, 128), False), ((4, 32, 8192, 128), True), ((16, 16, 2048, 64), False)]:
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = 4 * B * H * D * (S * (S + 1) // 2 if causal else S * S)
        expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        variants = {"gluon_ws": lambda: attention_ws(q, k, v, out, causal, D**-0.5),
                    "gluon_ws_no_intra_overlap": lambda: no_overlap(q, k, v, out, causal, D**-0.5),
                    "gluon_ws_first_version": lambda: first(q, k, v, out, causal, D**-0.5),
                    "triton_course": lambda: fa.flash_attention(q, k, v, out, causal, D**-0.5)}  # fmt: skip
        for name, fn in ch11._sdpa_backends(None).items():
            variants[name] = lambda fn=fn: fn(q, k, v, causal, D**-0.5)
        for name, fn in variants.items():
            out = torch.empty_like(q)
            _time_variant(rows, name, fn, out, expected, flops, causal)
    meta = _meta("course_lib.timing.bench (CUDA events, L2 flushed, median)")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    # named for the GPU that ran it: experiment_attention_h200.json on an H200, _h100 on an H100
    tag = next(iter(re.findall(r"[a-z]\d{2,3}", meta["gpu"].lower())), "gpu")
    (Path(out_dir) / f"experiment_attention_{tag}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


def _time_variant(rows: list, name: str, fn, out, expected, flops: int, causal: bool, **extra) -> None:
    """One variant's row: run once and checked against SDPA (``out`` holds the result of a launcher that
    returns nothing), then timed; a variant that does not run at this shape is said, not fatal."""
    from course_lib import timing

    shape = list(expected.shape)
    try:
        got = fn()
        got = out if got is None else got
        err = ((got.float() - expected.float()).norm() / expected.float().norm()).item()
        t = timing.bench(fn)
        rows.append({"variant": name, **extra, "shape": shape, "causal": causal, "median_ms": t.median_ms,
                     "p20_ms": t.p20_ms, "p80_ms": t.p80_ms, "tflops": flops / t.median_ms / 1e9,
                     "rel_error": err})  # fmt: skip
        print(f"{name:<22} {tuple(shape)} causal={causal}: {t.median_ms:.3f} ms, {flops / t.median_ms / 1e9:.0f} "
              f"TFLOP/s, error {err:.1e}", flush=True)  # fmt: skip
    except Exception as e:
        rows.append({"variant": name, **extra, "shape": shape, "causal": causal, "error": repr(e)[:300]})
        print(f"{name:<22} {tuple(shape)} causal={causal}: {e!r}"[:300], flush=True)


def _meta(method: str) -> dict:
    from course_lib import runtime

    return {"gpu": runtime.gpu_info().name, "versions": runtime.versions(), "date": time.strftime("%Y-%m-%d"),
            "method": method}  # fmt: skip


# what keeps the causal kernel below the non-causal one (on an H100, before the snake order: 463 TFLOP/s against
# 588): the order of the work items, the mask, or the walks' length
CAUSAL_STUDY = {
    # the rounds of NUM_SMS items all dealt forwards (the solution's order before 2026-12-05's third H100 run)
    "no_snake": {"        item = gl.where(back, base + NUM_SMS - 1 - item % NUM_SMS, item)\n": ""},
    # groups in order (first first): the longest walks come last, as the programs finish
    "groups_in_order": {"return item // n_groups, n_groups - 1 - item % n_groups":
                        "return item // n_groups, item % n_groups"},
    # launched non-causal but walking the causal walk's tiles: no mask at all (values wrong: timing only)
    "causal_walk_no_mask": {"    else:\n        return gl.cdiv(seq_len, BLOCK_N)":
                            "    else:\n        return gl.minimum(group + 1, gl.cdiv(seq_len, BLOCK_N))"},
}  # fmt: skip


# three consumer warpgroups at head dim 64 with a causal mask too (the solution keeps two there): a group of three
# 64-row tiles spans 192 rows and key tiles are 128 (a Gluon tile is a power of two), so every consumer walks to
# its group's last query, as FlashAttention-3 does, and masks past its own diagonal from the first key tile that
# reaches past the group's first query. Right in the simulator; ptxas spills 84 bytes a thread at 160 registers.
CAUSAL_THREE = {
    "def _key_tiles(group, seq_len, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):":
        "def _key_tiles(group, seq_len, GROUP_ROWS: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):",
    "        return gl.minimum(group + 1, gl.cdiv(seq_len, BLOCK_N))\n    else:\n        return gl.cdiv(seq_len, BLOCK_N)":
        "        return (gl.minimum(gl.cdiv((group + 1) * GROUP_ROWS, BLOCK_N), gl.cdiv(seq_len, BLOCK_N)),\n"
        "                (group * GROUP_ROWS) // BLOCK_N)\n    else:\n"
        "        return gl.cdiv(seq_len, BLOCK_N), gl.cdiv(seq_len, BLOCK_N) - 1",
    "        n_kv = _key_tiles(group, seq_len, BLOCK_N, CAUSAL)\n        for j in range(n_kv):":
        "        n_kv, _ = _key_tiles(group, seq_len, CONSUMERS * BLOCK_M, BLOCK_N, CAUSAL)\n        for j in range(n_kv):",
    "        n_kv = _key_tiles(group, seq_len, BLOCK_N, CAUSAL)  # only the last needs a mask (_softmax_step)":
        "        n_kv, masked_from = _key_tiles(group, seq_len, CONSUMERS * BLOCK_M, BLOCK_N, CAUSAL)",
    "_softmax_step(scores, m_i, l_i, 0, n_kv == 1, rows,": "_softmax_step(scores, m_i, l_i, 0, masked_from == 0, rows,",
    "_softmax_step(scores, m_i, l_i, j, j == n_kv - 1, rows,": "_softmax_step(scores, m_i, l_i, j, j >= masked_from, rows,",
    "    return 3 if head_dim == 64 and not causal else 2\n": "    return 3 if head_dim == 64 else 2\n",
}  # fmt: skip


def causal_study(out_dir: str) -> int:
    """Variants of the solution at the causal timed shape, beside the solution and cuDNN in the same run,
    and the non-causal kernel on walks half as long (S 4096, twice the heads: the causal case's FLOPs)."""
    from course_lib import lesson, timing
    from course_lib.tasks import ch11_attention as ch11

    B, H, S, D = 4, 32, 8192, 128
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out = torch.empty_like(q)
    causal_flops = 4 * B * H * D * (S * (S + 1) // 2)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    kept = []  # the variants' folders live until the end
    runs = {"solution": (lambda: attention_ws(q, k, v, out, True, D**-0.5), True)}
    for name, replace in CAUSAL_STUDY.items():
        variant = lesson.write_variant("ws_attention", replace)
        kept.append(variant)
        fn = sources.load_module("ws_attention", variant.folder).ws_attention
        causal = name != "causal_walk_no_mask"
        runs[name] = (lambda fn=fn, causal=causal: fn(q, k, v, out, causal, D**-0.5), causal)
    cudnn = ch11._sdpa_backends(None)["sdpa_cudnn"]
    runs["sdpa_cudnn"] = (lambda: cudnn(q, k, v, True, D**-0.5), True)
    rows = []
    for name, (fn, checked) in runs.items():
        got = fn()
        got = out if got is None else got
        err = ((got.float() - expected.float()).norm() / expected.float().norm()).item() if checked else None
        t = timing.bench(fn)
        rows.append({"variant": name, "shape": [B, H, S, D], "causal": True, "median_ms": t.median_ms,
                     "p20_ms": t.p20_ms, "p80_ms": t.p80_ms, "tflops": causal_flops / t.median_ms / 1e9,
                     "rel_error": err})  # fmt: skip
        print(f"{name:<22} causal: {t.median_ms:.3f} ms, {causal_flops / t.median_ms / 1e9:.0f} TFLOP/s, error {err}")
    for shape in ((B, H, S, D), (2 * B, H, S // 2, D)):  # non-causal: 64 and 32 key tiles a walk
        q2, k2, v2 = (torch.randn(*shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        out2 = torch.empty_like(q2)
        flops = 4 * shape[0] * shape[1] * shape[3] * shape[2] ** 2
        t = timing.bench(lambda: attention_ws(q2, k2, v2, out2, False, D**-0.5))
        rows.append({"variant": "solution", "shape": list(shape), "causal": False, "median_ms": t.median_ms,
                     "tflops": flops / t.median_ms / 1e9})  # fmt: skip
        print(f"solution non-causal {shape}: {t.median_ms:.3f} ms, {flops / t.median_ms / 1e9:.0f} TFLOP/s")
    meta = _meta("course_lib.timing.bench (CUDA events, L2 flushed, median)")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "experiment_attention_causal_study.json").write_text(
        json.dumps({"meta": meta, "rows": rows}, indent=1)
    )
    return 0


def d64(out_dir: str) -> int:
    """Head dim 64 (B 16, H 16, S 2048), each checked against SDPA and timed twice in alternation: without a
    mask the solution (three consumer warpgroups), the same kernel with two (the solution before 2026-12-06)
    and cuDNN; causal the solution (two consumers), CAUSAL_THREE (three, each walking to its group's last
    query) and cuDNN."""
    from course_lib import lesson
    from course_lib.tasks import ch11_attention as ch11

    variant = lesson.write_variant(  # kept alive to the end: the folder goes with the object
        "ws_attention", {"    return 3 if head_dim == 64 and not causal else 2\n": "    return 2\n"}
    )
    two = sources.load_module("ws_attention", variant.folder).ws_attention
    causal_three = lesson.write_variant("ws_attention", CAUSAL_THREE)
    three = sources.load_module("ws_attention", causal_three.folder).ws_attention
    cudnn = ch11._sdpa_backends(None)["sdpa_cudnn"]
    B, H, S, D = 16, 16, 2048, 64
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out = torch.empty_like(q)
    flops = 4 * B * H * D * S * S
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    runs = {"solution": lambda: attention_ws(q, k, v, out, False, D**-0.5),
            "sdpa_cudnn": lambda: cudnn(q, k, v, False, D**-0.5),
            "two_consumers": lambda: two(q, k, v, out, False, D**-0.5)}  # fmt: skip
    rows = []
    for round_ in range(2):  # twice, alternating: a drift of the clocks shows as a difference between rounds
        for name, fn in runs.items():
            _time_variant(rows, name, fn, out, expected, flops, False, round=round_)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    causal_flops = 4 * B * H * D * (S * (S + 1) // 2)
    causal = {"solution": lambda: attention_ws(q, k, v, out, True, D**-0.5),
              "sdpa_cudnn": lambda: cudnn(q, k, v, True, D**-0.5),
              "causal_three": lambda: three(q, k, v, out, True, D**-0.5)}  # fmt: skip
    for round_ in range(2):
        for name, fn in causal.items():
            _time_variant(rows, name, fn, out, expected, causal_flops, True, round=round_)
    meta = _meta("course_lib.timing.bench (CUDA events, L2 flushed, median), each variant twice")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "experiment_attention_d64.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    del variant, causal_three
    return 0


def main() -> int:
    global attention_ws
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--simulate", action="store_true")
    parser.add_argument("--seeds", type=int, default=1, help="--simulate: orders of events per shape")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="GPU: small shapes against float64, first")
    parser.add_argument("--bench", metavar="OUT")
    parser.add_argument("--causal-study", metavar="OUT", help="GPU: what slows the causal kernel")
    parser.add_argument("--d64", metavar="OUT", help="GPU: head dim 64, three consumer warpgroups")
    parser.add_argument("--kernel", metavar="FOLDER", help="the ws_attention.py of --simulate, --compile, --smoke")
    args = parser.parse_args()
    if args.kernel:
        attention_ws = sources.load_module("ws_attention", Path(args.kernel).resolve()).ws_attention
    code = 0
    if args.smoke:
        code |= smoke()
    if args.simulate:
        code |= simulate(args.seeds)
    if args.compile:
        code |= compile_sm90()
    if args.bench:
        code |= bench(args.bench)
    if args.causal_study:
        code |= causal_study(args.causal_study)
    if args.d64:
        code |= d64(args.d64)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
