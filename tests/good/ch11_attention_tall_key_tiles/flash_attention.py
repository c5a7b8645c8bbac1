"""Right, with other tiles: key tiles of 128, taller than the query tiles of 32 (a walk's last tile reaches
past its last query, and is masked there), so a program's diagonal tile starts before its queries end."""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # exp(x) = exp2(x * log2(e)): exp2 is one instruction on a GPU


@triton.jit
def _attend(
    acc, m_i, l_i,  # the running output (BLOCK_M, HEAD_DIM), max and sum (BLOCK_M,), all float32
    q,  # this program's queries (BLOCK_M, HEAD_DIM)
    qk_scale,  # sm_scale * log2(e): scores in log2 units, for exp2
    k_base, v_base,  # this (batch, head)'s keys and values
    stride_kn, stride_kd, stride_vn, stride_vd,
    offs_m, seq_len, start, stop,
    MASKED: tl.constexpr,  # the tiles that hold the diagonal or the end of the sequence
    CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr,
):  # fmt: skip
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in tl.range(start, stop, BLOCK_N, num_stages=NUM_STAGES):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        if MASKED:
            k = tl.load(k_base + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd,
                        mask=offs_n[None, :] < seq_len, other=0.0)  # (HEAD_DIM, BLOCK_N)  # fmt: skip
            v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                        mask=offs_n[:, None] < seq_len, other=0.0)  # (BLOCK_N, HEAD_DIM)  # fmt: skip
        else:
            k = tl.load(k_base + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd)
            v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd)
        s = tl.dot(q, k) * qk_scale  # (BLOCK_M, BLOCK_N) scores, in log2 units, float32
        if MASKED:
            keep = offs_n[None, :] < seq_len
            if CAUSAL:
                keep = keep & (offs_n[None, :] <= offs_m[:, None])
            s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)  # the old sum and output were measured against the old max
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def flash_attention_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr,  # (batch, heads, seq_len, HEAD_DIM), any strides
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    n_heads, seq_len, sm_scale,
    CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)  # the query tile
    bh = tl.program_id(1)  # the (batch, head) pair
    b = (bh // n_heads).to(tl.int64)
    h = (bh % n_heads).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_base = q_ptr + b * stride_qb + h * stride_qh
    k_base = k_ptr + b * stride_kb + h * stride_kh
    v_base = v_ptr + b * stride_vb + h * stride_vh
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                mask=offs_m[:, None] < seq_len, other=0.0)  # (BLOCK_M, HEAD_DIM)  # fmt: skip
    qk_scale = sm_scale * LOG2E
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    stop = tl.minimum((pid_m + 1) * BLOCK_M, seq_len) if CAUSAL else seq_len
    full = (pid_m * BLOCK_M // BLOCK_N) * BLOCK_N if CAUSAL else (seq_len // BLOCK_N) * BLOCK_N
    full = tl.minimum(full, (seq_len // BLOCK_N) * BLOCK_N)
    acc, m_i, l_i = _attend(acc, m_i, l_i, q, qk_scale, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                            offs_m, seq_len, 0, full, False, CAUSAL, HEAD_DIM, BLOCK_N, NUM_STAGES)  # fmt: skip
    acc, m_i, l_i = _attend(acc, m_i, l_i, q, qk_scale, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                            offs_m, seq_len, full, stop, True, CAUSAL, HEAD_DIM, BLOCK_N, NUM_STAGES)  # fmt: skip
    out = acc / l_i[:, None]
    out_base = out_ptr + b * stride_ob + h * stride_oh
    tl.store(out_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od,
             out.to(out_ptr.dtype.element_ty), mask=offs_m[:, None] < seq_len)  # fmt: skip


def flash_attention(q, k, v, out, causal, sm_scale):
    """out[:] = softmax(q @ k^T * sm_scale (+ causal mask)) @ v for q, k, v, out of shape
    (batch, heads, seq_len, head_dim), head_dim 64 or 128."""
    batch, heads, seq_len, head_dim = q.shape
    # right: key tiles taller than the query tiles (a walk's last tile reaches past its last query, and is
    # masked there), so a program's diagonal tile starts before its queries end
    block_m, block_n = 32, 128
    grid = (triton.cdiv(seq_len, block_m), batch * heads)
    flash_attention_kernel[grid](
        q, k, v, out, *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        heads, seq_len, sm_scale,
        CAUSAL=bool(causal), HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n,
        NUM_STAGES=2, num_warps=4,
    )  # fmt: skip
    return out
