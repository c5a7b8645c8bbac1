"""What notebook 11 computes: where a transformer layer's time goes at prefill and at decode (its floors
on the roofline, part by part), what a faster attention buys a whole step (Amdahl), how many key tiles
a causal walk skips, how many programs a decode launch has without and with split-KV, how many
kernels the JIT compiles as the context length changes, and at which widths a growing block table
compiles paged_decode again.

Every function computes from its arguments; nothing here times anything.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import triton
import triton.language as tl

from .. import compilation, roofline


@dataclass(frozen=True)
class Layer:
    """One decoder layer of a grouped-query transformer. The default is an 8-billion-parameter model's
    layer (Llama 3 8B's published shape): d_model 4096, 32 query heads and 8 KV heads of 128, a gated
    feed-forward of 14336, weights in bf16."""

    d_model: int = 4096
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    ffn: int = 14336
    dtype_bytes: int = 2

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def matmuls(self) -> list[tuple[str, int, int]]:
        """(name, inputs, outputs) of each weight matrix: q, k, v, o, and the feed-forward's three."""
        d, kv, f = self.d_model, self.kv_dim, self.ffn
        return [("q k v projections", d, d + 2 * kv), ("output projection", d, d), ("feed-forward", d, 2 * f),
                ("feed-forward down", f, d)]  # fmt: skip

    def weights(self) -> int:
        return sum(i * o for _, i, o in self.matmuls())

    def kv_bytes_per_token(self) -> int:
        return 2 * self.kv_dim * self.dtype_bytes  # a key and a value per KV head


@dataclass(frozen=True)
class Part:
    name: str
    flops: int
    bytes: int
    floor: roofline.Floor


def _part(name: str, flops: int, n_bytes: int, peaks: roofline.Peaks) -> Part:
    return Part(name, int(flops), int(n_bytes), roofline.floor(int(n_bytes), int(flops), peaks, "bfloat16"))


def prefill_parts(layer: Layer, tokens: int, peaks: roofline.Peaks, causal: bool = True) -> list[Part]:
    """The layer's parts for one prompt of ``tokens`` tokens: each weight matrix (its weights read once,
    its activations read and written) and attention (q, k, v read, the output written; FLOPs of q k^T
    and p v over the (query, key) pairs it computes, about half of them when causal)."""
    b = layer.dtype_bytes
    parts = []
    for name, n_in, n_out in layer.matmuls():
        parts.append(_part(name, 2 * tokens * n_in * n_out, (n_in * n_out + tokens * (n_in + n_out)) * b, peaks))
    pairs = tokens * (tokens + 1) // 2 if causal else tokens * tokens
    attention_flops = 4 * pairs * layer.heads * layer.head_dim
    attention_bytes = tokens * (2 * layer.d_model + 2 * layer.kv_dim) * b
    parts.append(_part("attention", attention_flops, attention_bytes, peaks))
    return parts


def decode_parts(layer: Layer, batch: int, context: int, peaks: roofline.Peaks) -> list[Part]:
    """The layer's parts for one new token of each of ``batch`` sequences of ``context`` tokens: every
    weight matrix read once for the whole batch, and attention reading each sequence's keys and values."""
    b = layer.dtype_bytes
    parts = []
    for name, n_in, n_out in layer.matmuls():
        parts.append(_part(name, 2 * batch * n_in * n_out, (n_in * n_out + batch * (n_in + n_out)) * b, peaks))
    attention_flops = 4 * batch * context * layer.heads * layer.head_dim
    attention_bytes = batch * context * layer.kv_bytes_per_token() + 2 * batch * layer.d_model * b
    parts.append(_part("attention", attention_flops, attention_bytes, peaks))
    return parts


def share(parts: list[Part], name: str = "attention") -> float:
    """The named part's share of the sum of the parts' floors."""
    total = sum(p.floor.ms for p in parts)
    return sum(p.floor.ms for p in parts if p.name == name) / total


def amdahl(fraction: float, speedup: float) -> float:
    """The whole step's speedup when ``fraction`` of its time gets ``speedup`` times faster."""
    return 1.0 / ((1.0 - fraction) + fraction / speedup)


def parts_table(parts: list[Part]) -> str:
    total = sum(p.floor.ms for p in parts)
    lines = [f"{'part':<20}{'GFLOP':>10}{'MB':>10}{'FLOP/byte':>11}{'floor (us)':>12}{'bound':>9}{'share':>8}"]
    for p in parts:
        lines.append(f"{p.name:<20}{p.flops / 1e9:>10.1f}{p.bytes / 1e6:>10.1f}{p.flops / p.bytes:>11.1f}"
                     f"{p.floor.ms * 1e3:>12.1f}{p.floor.bound:>9}{p.floor.ms / total:>8.0%}")  # fmt: skip
    lines.append(f"{'the layer':<20}{'':>10}{'':>10}{'':>11}{total * 1e3:>12.1f}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# the causal walk, and decode's programs


def causal_tiles(seq_len: int, block_m: int, block_n: int) -> tuple[int, int]:
    """(key tiles a causal walk loads when it stops at each query tile's last query, key tiles it loads
    when it walks every tile), summed over the query tiles of one (batch, head)."""
    query_tiles = triton.cdiv(seq_len, block_m)
    every = query_tiles * triton.cdiv(seq_len, block_n)
    stopped = sum(triton.cdiv(min((m + 1) * block_m, seq_len), block_n) for m in range(query_tiles))
    return stopped, every


def decode_programs(batch: int, kv_heads: int, max_pages: int, page: int = 16, sms: int = 132, per_sm: int = 2,
                    slice_tokens: int = 2048) -> tuple[int, int]:  # fmt: skip
    """(programs of a decode launch with one program per (sequence, KV head), with the split the course's
    solution chooses): it splits each sequence's pages until there are about ``per_sm`` programs an SM, and
    into slices of at most about ``slice_tokens`` tokens."""
    fill, even = triton.cdiv(per_sm * sms, batch * kv_heads), triton.cdiv(max_pages * page, slice_tokens)
    splits = min(triton.next_power_of_2(max(1, fill, even)), 32, triton.next_power_of_2(max_pages))
    return batch * kv_heads, batch * kv_heads * splits


# --------------------------------------------------------------------------------------------------
# JIT for real shapes: what the cache is keyed on


def _context_body(k_ptr, out_ptr, context_len, page_size, HEAD_DIM: tl.constexpr):
    # a stand-in with decode's kinds of arguments: pointers, the context length (changes with every
    # token), the page size (fixed for a deployment) and the head dim (fixed for a model)
    offs = tl.arange(0, HEAD_DIM)
    tl.store(out_ptr + offs, tl.load(k_ptr + offs) * context_len * page_size)


_context_kernel = triton.jit(_context_body)
_context_kernel_unspecialized = triton.jit(do_not_specialize=["context_len"])(_context_body)


def compile_keys(contexts, page_size: int = 16, head_dim: int = 128, specialize: bool = True) -> dict:
    """{JIT cache key: the context lengths that share it} for launches with each context length, the
    pointers aligned: a new key is a new compile (a few hundred milliseconds on a GPU)."""
    import torch

    kernel = _context_kernel if specialize else _context_kernel_unspecialized
    k = torch.empty(head_dim)
    out = torch.empty(head_dim)
    keys: dict = {}
    for n in contexts:
        spec = compilation.specialization(kernel, k, out, n, page_size, HEAD_DIM=head_dim)
        key = tuple((a.name, a.type, repr(a.value), a.divisible_by_16) for a in spec)
        keys.setdefault(key, []).append(n)
    return keys


def decode_compile_keys(max_pages: int, batch: int = 16, q_heads: int = 32, kv_heads: int = 8, head_dim: int = 128,
                        page: int = 16, reallocated: bool = False, launcher=None) -> dict:  # fmt: skip
    """{(kernel, JIT cache key): the block-table widths that share it} for a paged_decode launcher (by default
    the course's solution, solutions/paged_decode.py) called with its table at each width from 1 to
    ``max_pages`` pages: a new key is a new compile. Nothing runs: each call's launches are recorded
    (``compilation.recorded_launches``) and specialized as the JIT would, so the keys follow whatever rule the
    launcher has for its slices. The table grows as a view of the widest table (its row stride fixed), or,
    ``reallocated``, is allocated anew at each width (its row stride is then the width: an argument too)."""
    import torch

    from .. import sources

    if launcher is None:
        folder = "solutions" if sources.solution_present("paged_decode") else "exercises"
        launcher = sources.load_module("paged_decode", folder).paged_decode
    dtype = torch.bfloat16
    q = torch.empty(batch, q_heads, head_dim, dtype=dtype)
    k_cache = torch.empty(1, page, kv_heads, head_dim, dtype=dtype)  # never read: one page will do
    v_cache, out = torch.empty_like(k_cache), torch.empty_like(q)
    widest = torch.zeros(batch, max_pages, dtype=torch.int32)
    lens = torch.ones(batch, dtype=torch.int32)
    keys: dict = {}
    for width in range(1, max_pages + 1):
        table = torch.zeros(batch, width, dtype=torch.int32) if reallocated else widest[:, :width]
        for kernel, args, kwargs in compilation.recorded_launches(launcher, q, k_cache, v_cache, table, lens,
                                                                  head_dim**-0.5, out):  # fmt: skip
            fn = compilation.python_function(kernel)
            params = inspect.signature(fn).parameters
            spec = compilation.specialization(kernel, *args, **{k: v for k, v in kwargs.items() if k in params})
            key = tuple((a.name, a.type, repr(a.value), a.divisible_by_16) for a in spec)
            options = tuple((k, kwargs[k]) for k in ("num_warps", "num_stages") if k in kwargs)  # keyed on too
            keys.setdefault((fn.__name__, key + options), []).append(width)
    return keys


def decode_compile_widths(keys: dict) -> list[int]:
    """The table widths at which some kernel compiles: the first width of each key of ``decode_compile_keys``."""
    return sorted({widths[0] for widths in keys.values()})
