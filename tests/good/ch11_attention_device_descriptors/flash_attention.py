"""Right, written otherwise: the queries, keys, values and output reached through tensor descriptors made inside
the kernel (tl.make_tensor_descriptor, as Triton's own attention tutorial does), one 2-D descriptor a (batch,
head) over its (seq_len, head_dim) rows. A descriptor's loads past seq_len give zeros and its stores past it
write nothing, so no load or store takes a mask; the scores of keys past seq_len still need -inf. On a GPU the
descriptors need scratch memory at each launch, from the allocator the course installs."""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _walk(acc, m_i, l_i, q, qk_scale, k_desc, v_desc, offs_m, seq_len, start, stop,
          MASKED: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    for start_n in range(start, stop, BLOCK_N):
        k = k_desc.load([start_n, 0])  # (BLOCK_N, HEAD_DIM), zeros past seq_len
        v = v_desc.load([start_n, 0])
        s = tl.dot(q, tl.trans(k)) * qk_scale
        if MASKED:
            offs_n = start_n + tl.arange(0, BLOCK_N)
            keep = offs_n[None, :] < seq_len
            if CAUSAL:
                keep = keep & (offs_n[None, :] <= offs_m[:, None])
            s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, out_ptr, stride_qb, stride_qh, stride_qm, stride_kb, stride_kh, stride_kn,
                     stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_om, n_heads, seq_len, sm_scale,
                     CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr):  # fmt: skip
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // n_heads).to(tl.int64)
    h = (bh % n_heads).to(tl.int64)
    q_desc = tl.make_tensor_descriptor(q_ptr + b * stride_qb + h * stride_qh, shape=[seq_len, HEAD_DIM],
                                       strides=[stride_qm, 1], block_shape=[BLOCK_M, HEAD_DIM])  # fmt: skip
    k_desc = tl.make_tensor_descriptor(k_ptr + b * stride_kb + h * stride_kh, shape=[seq_len, HEAD_DIM],
                                       strides=[stride_kn, 1], block_shape=[BLOCK_N, HEAD_DIM])  # fmt: skip
    v_desc = tl.make_tensor_descriptor(v_ptr + b * stride_vb + h * stride_vh, shape=[seq_len, HEAD_DIM],
                                       strides=[stride_vn, 1], block_shape=[BLOCK_N, HEAD_DIM])  # fmt: skip
    o_desc = tl.make_tensor_descriptor(out_ptr + b * stride_ob + h * stride_oh, shape=[seq_len, HEAD_DIM],
                                       strides=[stride_om, 1], block_shape=[BLOCK_M, HEAD_DIM])  # fmt: skip
    q = q_desc.load([pid_m * BLOCK_M, 0])
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    qk_scale = sm_scale * LOG2E
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    if CAUSAL:  # the tiles below the diagonal unmasked, then the diagonal's, stopping at this tile's last query
        stop = tl.minimum((pid_m + 1) * BLOCK_M, seq_len)
        full = tl.minimum((pid_m * BLOCK_M // BLOCK_N) * BLOCK_N, (seq_len // BLOCK_N) * BLOCK_N)
    else:
        stop = seq_len
        full = (seq_len // BLOCK_N) * BLOCK_N
    acc, m_i, l_i = _walk(acc, m_i, l_i, q, qk_scale, k_desc, v_desc, offs_m, seq_len, 0, full, False, CAUSAL,
                          BLOCK_N)  # fmt: skip
    acc, m_i, l_i = _walk(acc, m_i, l_i, q, qk_scale, k_desc, v_desc, offs_m, seq_len, full, stop, True, CAUSAL,
                          BLOCK_N)  # fmt: skip
    o_desc.store([pid_m * BLOCK_M, 0], (acc / l_i[:, None]).to(out_ptr.dtype.element_ty))


def flash_attention(q, k, v, out, causal, sm_scale):
    batch, heads, seq_len, head_dim = q.shape
    block_m, block_n = 128, 64
    grid = (triton.cdiv(seq_len, block_m), batch * heads)
    attention_kernel[grid](q, k, v, out, q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1),
                           k.stride(2), v.stride(0), v.stride(1), v.stride(2), out.stride(0), out.stride(1),
                           out.stride(2), heads, seq_len, sm_scale, CAUSAL=bool(causal), HEAD_DIM=head_dim,
                           BLOCK_M=block_m, BLOCK_N=block_n, num_warps=8 if head_dim == 128 else 4)  # fmt: skip
    return out
