"""Where one transformer layer's time goes on a GPU, at prefill and at decode: notebook 11's record.

The layer is notebook 11's model (course_lib.lessons.ch11.Layer: Llama 3 8B's shape, bf16), written as a
PyTorch user would: RMSNorm, the q/k/v projection, SDPA (causal at prefill; one query token against a
contiguous KV cache at decode), the output projection, RMSNorm, the gated feed-forward. Each part is timed
on its own with course_lib.timing.bench (CUDA events, L2 flushed, medians), and the whole layer too.

    python scripts/attention_layer_profile.py --out results/experiment_attention_layer_h200.json
    python scripts/attention_layer_profile.py --dry-run   # CPU: build and run each part once, tiny shapes
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import course_lib  # noqa: E402, F401  (first: it picks the mode)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from course_lib import runtime, timing  # noqa: E402
from course_lib.lessons.ch11 import Layer  # noqa: E402


def _weights(layer: Layer, device, dtype):
    gen = torch.Generator(device="cpu").manual_seed(0)

    def w(n_in, n_out):
        return (torch.randn(n_out, n_in, generator=gen) / n_in**0.5).to(device=device, dtype=dtype)

    return {
        "qkv": w(layer.d_model, layer.d_model + 2 * layer.kv_dim),
        "o": w(layer.d_model, layer.d_model),
        "gate_up": w(layer.d_model, 2 * layer.ffn),
        "down": w(layer.ffn, layer.d_model),
        "norm1": torch.ones(layer.d_model, device=device, dtype=dtype),
        "norm2": torch.ones(layer.d_model, device=device, dtype=dtype),
    }


def _forward(layer: Layer, W: dict, x: torch.Tensor, k_cache=None, v_cache=None) -> dict:
    """The layer on tokens x (batch, tokens, d_model), every intermediate kept: at decode (k_cache given)
    attention reads the cache (batch, kv_heads, context, head_dim) for one query token; else causal."""
    B, T, _ = x.shape
    hd, H, Hkv = layer.head_dim, layer.heads, layer.kv_heads
    t = {"x": x, "h": F.rms_norm(x, (layer.d_model,), W["norm1"])}
    q, k, v = (t["h"] @ W["qkv"].T).split([layer.d_model, layer.kv_dim, layer.kv_dim], dim=-1)
    t["q"] = q.view(B, T, H, hd).transpose(1, 2)
    if k_cache is None:
        t["k"], t["v"] = k.view(B, T, Hkv, hd).transpose(1, 2), v.view(B, T, Hkv, hd).transpose(1, 2)
    else:
        t["k"], t["v"] = k_cache, v_cache
    t["causal"] = k_cache is None
    attended = F.scaled_dot_product_attention(t["q"], t["k"], t["v"], is_causal=t["causal"], enable_gqa=True)
    t["a"] = attended.transpose(1, 2).reshape(B, T, layer.d_model)
    t["y"] = x + t["a"] @ W["o"].T
    t["g"] = F.rms_norm(t["y"], (layer.d_model,), W["norm2"])
    t["gate"], t["up"] = (t["g"] @ W["gate_up"].T).chunk(2, dim=-1)
    t["act"] = F.silu(t["gate"]) * t["up"]
    t["out"] = t["y"] + t["act"] @ W["down"].T
    return t


def _parts(layer: Layer, W: dict, x: torch.Tensor, k_cache=None, v_cache=None) -> dict:
    """{part: a callable that runs that part alone on the layer's own intermediates}, and the whole layer."""
    t = _forward(layer, W, x, k_cache, v_cache)
    d = layer.d_model
    return {
        "norms": lambda: (F.rms_norm(t["x"], (d,), W["norm1"]), F.rms_norm(t["y"], (d,), W["norm2"])),
        "q k v projections": lambda: t["h"] @ W["qkv"].T,
        "attention": lambda: F.scaled_dot_product_attention(
            t["q"], t["k"], t["v"], is_causal=t["causal"], enable_gqa=True
        ),  # fmt: skip
        "output projection": lambda: t["a"] @ W["o"].T,
        "feed-forward": lambda: t["g"] @ W["gate_up"].T,
        "gate": lambda: F.silu(t["gate"]) * t["up"],
        "feed-forward down": lambda: t["act"] @ W["down"].T,
        "the layer": lambda: _forward(layer, W, x, k_cache, v_cache)["out"],
    }


def profile(phase: str, layer: Layer, batch: int, tokens: int, context: int, device, dry: bool) -> list[dict]:
    dtype = torch.bfloat16
    W = _weights(layer, device, dtype)
    x = torch.randn(batch, tokens, layer.d_model, device=device, dtype=dtype)
    caches = {}
    if phase == "decode":
        shape = (batch, layer.kv_heads, context, layer.head_dim)
        caches = {"k_cache": torch.randn(shape, device=device, dtype=dtype),
                  "v_cache": torch.randn(shape, device=device, dtype=dtype)}  # fmt: skip
    rows = []
    for part, fn in _parts(layer, W, x, **caches).items():
        if dry:
            start = time.perf_counter()
            fn()
            ms, spread = (time.perf_counter() - start) * 1e3, None  # not a GPU time: a smoke test
        else:
            t = timing.bench(fn)
            ms, spread = t.median_ms, [t.p20_ms, t.p80_ms]
        rows.append({"phase": phase, "part": part, "ms": ms, "p20_p80_ms": spread, "batch": batch, "tokens": tokens,
                     "context": context})  # fmt: skip
    total = next(r["ms"] for r in rows if r["part"] == "the layer")
    parts_sum = sum(r["ms"] for r in rows if r["part"] != "the layer")
    for r in rows:
        r["share"] = r["ms"] / parts_sum if r["part"] != "the layer" else 1.0
    print(f"{phase}: batch {batch}, tokens {tokens}, context {context}: the layer {total:.3f} ms, its parts timed "
          f"alone sum to {parts_sum:.3f} ms")  # fmt: skip
    for r in rows:
        print(f"  {r['part']:<20} {r['ms']:9.3f} ms  {r['share']:5.0%}")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", help="write the record here (JSON)")
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes, each part run once, no timing")
    args = parser.parse_args()
    if not args.dry_run and not runtime.is_gpu():
        print("GPU only (or --dry-run)", file=sys.stderr)
        return 2
    device = runtime.device()
    if args.dry_run:
        layer = Layer(d_model=256, heads=4, kv_heads=2, head_dim=64, ffn=512)
        settings = [("prefill", 1, 64, 64), ("decode", 4, 1, 128)]
    else:
        layer = Layer()
        settings = [("prefill", 1, 8192, 8192), ("prefill", 1, 32768, 32768), ("decode", 64, 1, 4096),
                    ("decode", 8, 1, 1024)]  # fmt: skip
    rows = []
    for phase, batch, tokens, context in settings:
        rows += profile(phase, layer, batch, tokens, context, device, args.dry_run)
    if args.out:
        meta = {"gpu": runtime.gpu_info().name if runtime.gpu_info() else "cpu (dry run)",
                "versions": runtime.versions(), "date": time.strftime("%Y-%m-%d"),
                "method": "course_lib.timing.bench per part (CUDA events, L2 flushed, median); bf16; "
                          "SDPA with its default backend choice", "layer": layer.__dict__}  # fmt: skip
        Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
