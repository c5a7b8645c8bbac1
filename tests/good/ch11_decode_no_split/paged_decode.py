"""A correct decode written differently: no split and no merge. One program per (sequence, query head)
walks every page of its sequence token block by token block, with the scores computed on CUDA cores
(a multiply and a sum, no tl.dot) and natural exp. Right; on a GPU it leaves most SMs idle for a small
batch (the speed tiers say so), which is what splitting the keys fixes."""

import triton
import triton.language as tl


@triton.jit
def decode_whole(
    q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, out_ptr,
    s_qb, s_qh, s_kp, s_kt, s_kh, s_vp, s_vt, s_vh, s_tb, s_ob, s_oh,
    scale, GROUP: tl.constexpr, PAGE: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    h = tl.program_id(1)
    kvh = h // GROUP
    d = tl.arange(0, D)
    t = tl.arange(0, PAGE)
    q = tl.load(q_ptr + b * s_qb + h * s_qh + d).to(tl.float32)
    n = tl.load(lens_ptr + b)
    m = float("-inf")
    total = 0.0
    acc = tl.zeros([D], tl.float32)
    for i in range(0, tl.cdiv(n, PAGE)):
        pg = tl.load(table_ptr + b * s_tb + i)
        k = tl.load(k_ptr + pg * s_kp + t[:, None] * s_kt + kvh * s_kh + d[None, :]).to(tl.float32)
        v = tl.load(v_ptr + pg * s_vp + t[:, None] * s_vt + kvh * s_vh + d[None, :]).to(tl.float32)
        s = tl.sum(k * q[None, :], axis=1) * scale
        s = tl.where(i * PAGE + t < n, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))
        e = tl.exp(s - m_new)
        c = tl.exp(m - m_new)
        total = total * c + tl.sum(e, axis=0)
        acc = acc * c + tl.sum(e[:, None] * v, axis=0)
        m = m_new
    tl.store(out_ptr + b * s_ob + h * s_oh + d, (acc / total).to(out_ptr.dtype.element_ty))


def paged_decode(q, k_cache, v_cache, block_table, context_lens, sm_scale, out):
    B, Hq, D = q.shape
    decode_whole[(B, Hq)](
        q, k_cache, v_cache, block_table, context_lens, out,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), block_table.stride(0), out.stride(0), out.stride(1),
        sm_scale, GROUP=Hq // k_cache.shape[2], PAGE=k_cache.shape[1], D=D,
    )  # fmt: skip
    return out
