"""A correct attention written differently: one loop with the masks in every tile, natural exp, tiles of
32 x 32, the (batch, head) pair on the grid's first axis, and a multiply by 1/l at the end."""

import triton
import triton.language as tl


@triton.jit
def attention_one_loop(
    q_ptr, k_ptr, v_ptr, o_ptr,
    sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, som, sod,
    H, N, scale,
    IS_CAUSAL: tl.constexpr, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
):  # fmt: skip
    bh = tl.program_id(0)
    start_m = tl.program_id(1) * BM
    b = bh // H
    h = bh % H
    rows = start_m + tl.arange(0, BM)
    d = tl.arange(0, D)
    q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqm + d[None, :] * sqd, mask=rows[:, None] < N, other=0.0)
    m = tl.zeros([BM], tl.float32) - float("inf")
    denom = tl.zeros([BM], tl.float32)
    o = tl.zeros([BM, D], tl.float32)
    end = N
    if IS_CAUSAL:
        end = tl.minimum(N, start_m + BM)
    for j in range(0, end, BN):
        cols = j + tl.arange(0, BN)
        kt = tl.load(
            k_ptr + b * skb + h * skh + cols[None, :] * skn + d[:, None] * skd, mask=cols[None, :] < N, other=0.0
        )
        vt = tl.load(
            v_ptr + b * svb + h * svh + cols[:, None] * svn + d[None, :] * svd, mask=cols[:, None] < N, other=0.0
        )
        s = tl.dot(q, kt) * scale
        ok = cols[None, :] < N
        if IS_CAUSAL:
            ok = ok & (rows[:, None] >= cols[None, :])
        s = tl.where(ok, s, float("-inf"))
        m2 = tl.maximum(m, tl.max(s, 1))
        corr = tl.exp(m - m2)
        e = tl.exp(s - m2[:, None])
        denom = denom * corr + tl.sum(e, 1)
        o = o * corr[:, None] + tl.dot(e.to(vt.dtype), vt)
        m = m2
    o = o * (1.0 / denom)[:, None]
    tl.store(
        o_ptr + b * sob + h * soh + rows[:, None] * som + d[None, :] * sod,
        o.to(o_ptr.dtype.element_ty),
        mask=rows[:, None] < N,
    )


def flash_attention(q, k, v, out, causal, sm_scale):
    B, H, N, D = q.shape
    attention_one_loop[(B * H, triton.cdiv(N, 32))](
        q, k, v, out, *q.stride(), *k.stride(), *v.stride(), *out.stride(), H, N, sm_scale,
        IS_CAUSAL=causal, D=D, BM=32, BN=32,
    )  # fmt: skip
    return out
