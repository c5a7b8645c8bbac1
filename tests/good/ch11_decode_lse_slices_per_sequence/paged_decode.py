"""Split-KV paged decode whose slices are cut on the device from each sequence's own length: NUM_SPLITS
(from the table's width) programs per (sequence, KV head) share that sequence's pages evenly, so a short
sequence in a wide table is not one program's work while others idle. A step takes one page (PAGE
tokens, its number read once as a scalar); the group's query heads are one tl.dot tile. Each slice
stores its log-sum-exp (log2 units) and its normalized output; the merge, a separate kernel, weighs
each by exp2(lse_s - LSE)."""

import torch
import triton
import triton.language as tl


@triton.jit
def split_kernel(Q, Kc, Vc, table, lens, LSE, PART,
                 sqb, sqh, skp, skt, skh, svp, svt, svh, stb, scale,
                 NUM_SPLITS: tl.constexpr, GROUP: tl.constexpr, GP: tl.constexpr, PAGE: tl.constexpr,
                 D: tl.constexpr):  # fmt: skip
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    sp = tl.program_id(2)
    g = tl.arange(0, GP)
    d = tl.arange(0, D)
    t = tl.arange(0, PAGE)
    heads = kvh * GROUP + g
    valid = g < GROUP
    q = tl.load(Q + b.to(tl.int64) * sqb + heads[:, None] * sqh + d[None, :], mask=valid[:, None], other=0.0)
    n = tl.load(lens + b)
    n_pages = tl.cdiv(n, PAGE)
    per = tl.cdiv(n_pages, NUM_SPLITS)
    first = sp * per
    last = tl.minimum(first + per, n_pages)
    m = tl.full([GP], float("-inf"), tl.float32)
    l = tl.zeros([GP], tl.float32)  # noqa: E741
    acc = tl.zeros([GP, D], tl.float32)
    qs = scale * 1.4426950408889634
    for p in range(first, last):
        page = tl.load(table + b.to(tl.int64) * stb + p).to(tl.int64)
        kt = tl.load(Kc + page * skp + t[None, :] * skt + kvh * skh + d[:, None])  # (D, PAGE)
        v = tl.load(Vc + page * svp + t[:, None] * svt + kvh * svh + d[None, :])  # (PAGE, D)
        s = tl.dot(q, kt) * qs
        s = tl.where((p * PAGE + t)[None, :] < n, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        a = tl.exp2(m - m_new)
        e = tl.exp2(s - m_new[:, None])
        l = l * a + tl.sum(e, 1)  # noqa: E741
        acc = tl.dot(e.to(v.dtype), v, acc * a[:, None])
        m = m_new
    # an empty slice: lse = -inf and output 0 (never 0 / 0)
    has = l > 0
    lse = tl.where(has, m + tl.log2(tl.where(has, l, 1.0)), float("-inf"))
    o = acc / tl.where(has, l, 1.0)[:, None]
    row = (b * (tl.num_programs(1) * GROUP) + heads).to(tl.int64) * NUM_SPLITS + sp
    tl.store(LSE + row, lse, mask=valid)
    tl.store(PART + row[:, None] * D + d[None, :], o, mask=valid[:, None])


@triton.jit
def merge_kernel(LSE, PART, Out, sob, soh, NUM_SPLITS: tl.constexpr, D: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    row = (b * tl.num_programs(1) + h).to(tl.int64)
    s = tl.arange(0, NUM_SPLITS)
    d = tl.arange(0, D)
    lse = tl.load(LSE + row * NUM_SPLITS + s)
    part = tl.load(PART + (row * NUM_SPLITS + s[:, None]) * D + d[None, :])
    top = tl.max(lse, 0)
    total = top + tl.log2(tl.sum(tl.exp2(lse - top), 0))
    w = tl.exp2(lse - total)  # each slice's share of the softmax's mass
    out = tl.sum(part * w[:, None], 0)
    tl.store(Out + b.to(tl.int64) * sob + h * soh + d, out.to(Out.dtype.element_ty))


def paged_decode(q, k_cache, v_cache, block_table, context_lens, sm_scale, out):
    B, Hq, D = q.shape
    page, Hkv = k_cache.shape[1], k_cache.shape[2]
    group = Hq // Hkv
    max_pages = block_table.shape[1]
    splits = min(16, triton.next_power_of_2(max(1, triton.cdiv(max_pages * page, 512))))
    lse = torch.empty((B, Hq, splits), dtype=torch.float32, device=q.device)
    part = torch.empty((B, Hq, splits, D), dtype=torch.float32, device=q.device)
    split_kernel[(B, Hkv, splits)](
        q, k_cache, v_cache, block_table, context_lens, lse, part,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), block_table.stride(0), sm_scale,
        NUM_SPLITS=splits, GROUP=group, GP=max(16, triton.next_power_of_2(group)), PAGE=page, D=D, num_warps=4,
    )  # fmt: skip
    merge_kernel[(B, Hq)](lse, part, out, out.stride(0), out.stride(1), NUM_SPLITS=splits, D=D, num_warps=4)
    return out
