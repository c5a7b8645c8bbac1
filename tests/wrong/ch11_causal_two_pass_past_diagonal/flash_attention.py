"""Wrong on purpose (right values, wasted work): tests/good/ch11_attention_two_pass, but its first pass, for
the rows' maxima, walks every key tile, past the diagonal, its loads there masked off (zeros); the second
stops at the diagonal. No load of a key above the diagonal reads memory, and the outputs are right: the
products of the first pass are what the probe counts (more q k^T than p v, and not the second pass's
tiles over again)."""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _scores(q, Kb, skn, skd, rows, start, N, scale, CAUSAL: tl.constexpr, D: tl.constexpr, BN: tl.constexpr):
    cols = start + tl.arange(0, BN)
    d = tl.arange(0, D)
    lim = tl.minimum(N, tl.max(rows) + 1) if CAUSAL else N
    kt = tl.load(Kb + cols[None, :] * skn + d[:, None] * skd, mask=cols[None, :] < lim, other=0.0)
    s = tl.dot(q, kt) * scale
    keep = cols[None, :] < N
    if CAUSAL:
        keep = keep & (cols[None, :] <= rows[:, None])
    return tl.where(keep, s, float("-inf"))


@triton.jit
def attn_two_pass(
    Q,
    K,
    V,
    Out,
    sqb,
    sqh,
    sqm,
    sqd,
    skb,
    skh,
    skn,
    skd,
    svb,
    svh,
    svn,
    svd,
    sob,
    soh,
    som,
    sod,
    H,
    N,
    sm_scale,
    CAUSAL: tl.constexpr,
    D: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
):
    t = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    rows = t * BM + tl.arange(0, BM)
    d = tl.arange(0, D)
    q = tl.load(Q + b * sqb + h * sqh + rows[:, None] * sqm + d[None, :] * sqd, mask=rows[:, None] < N, other=0.0)
    Kb = K + b * skb + h * skh
    Vb = V + b * svb + h * svh
    scale = sm_scale * LOG2E
    end = tl.minimum((t + 1) * BM, N) if CAUSAL else N
    m = tl.full([BM], float("-inf"), tl.float32)
    for start in range(0, N, BN):  # pass 1: every tile (wasted above the diagonal)
        m = tl.maximum(m, tl.max(_scores(q, Kb, skn, skd, rows, start, N, scale, CAUSAL, D, BN), 1))
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    for start in range(0, end, BN):  # pass 2: exponentials against the final max, no rescale
        p = tl.exp2(_scores(q, Kb, skn, skd, rows, start, N, scale, CAUSAL, D, BN) - m[:, None])
        cols = start + tl.arange(0, BN)
        v = tl.load(Vb + cols[:, None] * svn + d[None, :] * svd, mask=cols[:, None] < N, other=0.0)
        l_i += tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc)
    tl.store(
        Out + b * sob + h * soh + rows[:, None] * som + d[None, :] * sod,
        (acc / l_i[:, None]).to(Out.dtype.element_ty),
        mask=rows[:, None] < N,
    )


def flash_attention(q, k, v, out, causal, sm_scale):
    B, H, N, D = q.shape
    BM, BN = 64, 64
    attn_two_pass[(triton.cdiv(N, BM), B * H)](
        q,
        k,
        v,
        out,
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *out.stride(),
        H,
        N,
        sm_scale,
        CAUSAL=bool(causal),
        D=D,
        BM=BM,
        BN=BN,
        num_warps=4,
    )
    return out
