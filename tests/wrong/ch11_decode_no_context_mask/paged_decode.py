"""Wrong on purpose: the last page's tokens past the context length are not masked (only the step's pages
past the slice's last are)."""

import torch
import triton
import triton.language as tl

# the most tokens a slice of a long sequence walks (the launcher splits longer ones), up to sequences of
# 64k tokens: past them the 32 slices a launch may have hold more
SLICE_TOKENS = 2048
# tokens a step of the walk takes (TILE_PAGES pages of PAGE tokens). On an H100 (results/attention_h100_2026-12-05/
# third_run, scripts/decode_sweep.py) 64-token steps read 2825 GB/s on the ragged bench case against 2533 with a
# page (16 tokens) a step, and 2945 against 2563 on short uniform contexts (SDPA over contiguous keys: 2996)
TILE_TOKENS = 64


@triton.jit
def decode_partial_kernel(
    q_ptr,  # (batch, q_heads, HEAD_DIM)
    k_cache_ptr, v_cache_ptr,  # (n_pages, PAGE, kv_heads, HEAD_DIM)
    block_table_ptr,  # (batch, max_pages) int32: the pages of each sequence, in order
    context_lens_ptr,  # (batch,) int32
    m_ptr, l_ptr, acc_ptr,  # partials, float32: (batch, q_heads, NUM_SPLITS) and (..., HEAD_DIM)
    out_ptr,  # (batch, q_heads, HEAD_DIM): written here when there is one slice (no merge then)
    stride_qb, stride_qh, stride_ob, stride_oh,
    stride_kp, stride_kt, stride_kh,
    stride_vp, stride_vt, stride_vh,
    stride_tb,
    sm_scale, pages_per_split,
    NUM_SPLITS: tl.constexpr, GROUP: tl.constexpr, BLOCK_G: tl.constexpr,
    PAGE: tl.constexpr, HEAD_DIM: tl.constexpr, TILE_PAGES: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0).to(tl.int64)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    offs_g = tl.arange(0, BLOCK_G)  # the query heads of this KV head (BLOCK_G >= 16 rows for tl.dot)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_t = tl.arange(0, TILE_PAGES * PAGE)  # a step's tokens: token t is token t % PAGE of the step's page t // PAGE
    heads = kv_head * GROUP + offs_g
    in_group = offs_g < GROUP
    q = tl.load(q_ptr + b * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
                mask=in_group[:, None], other=0.0)  # (BLOCK_G, HEAD_DIM)  # fmt: skip
    context = tl.load(context_lens_ptr + b)
    first = split * pages_per_split
    last = tl.minimum(first + pages_per_split, tl.cdiv(context, PAGE))  # pages past the context: never read
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e): exp2 below
    for p0 in range(first, last, TILE_PAGES):
        pages_at = p0 + offs_t // PAGE  # the sequence's page that each token of the step lies in
        live = pages_at < last
        page = tl.load(block_table_ptr + b * stride_tb + pages_at, mask=live, other=0).to(tl.int64)
        within = offs_t % PAGE  # each token's place in its page
        tokens = pages_at * PAGE + within
        k = tl.load(k_cache_ptr + page[None, :] * stride_kp + within[None, :] * stride_kt + kv_head * stride_kh
                    + offs_d[:, None], mask=live[None, :], other=0.0)  # (HEAD_DIM, tile)  # fmt: skip
        v = tl.load(v_cache_ptr + page[:, None] * stride_vp + within[:, None] * stride_vt + kv_head * stride_vh
                    + offs_d[None, :], mask=live[:, None], other=0.0)  # (tile, HEAD_DIM)  # fmt: skip
        s = tl.dot(q, k) * qk_scale  # (BLOCK_G, tile)
        s = tl.where(live[None, :], s, float("-inf"))  # wrong: tokens past the context kept
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p_ = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p_, axis=1)
        acc = tl.dot(p_.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    if NUM_SPLITS == 1:  # the slice is the whole sequence: its result is final, and no merge is launched
        out = acc / l_i[:, None]
        tl.store(out_ptr + b * stride_ob + heads[:, None] * stride_oh + offs_d[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=in_group[:, None])  # fmt: skip
    else:
        # a slice past the end of its sequence writes m = -inf, l = 0, acc = 0: weight 0 in the merge
        row = (b * (tl.num_programs(1) * GROUP) + heads) * NUM_SPLITS + split  # (batch, q_heads, NUM_SPLITS)
        tl.store(m_ptr + row, m_i, mask=in_group)
        tl.store(l_ptr + row, l_i, mask=in_group)
        tl.store(acc_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=in_group[:, None])


@triton.jit
def decode_merge_kernel(
    m_ptr, l_ptr, acc_ptr,  # the slices' partials, float32
    out_ptr,  # (batch, q_heads, HEAD_DIM)
    stride_ob, stride_oh,
    NUM_SPLITS: tl.constexpr, HEAD_DIM: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    row = b * tl.num_programs(1) + head
    offs_s = tl.arange(0, NUM_SPLITS)
    offs_d = tl.arange(0, HEAD_DIM)
    m = tl.load(m_ptr + row * NUM_SPLITS + offs_s)  # (NUM_SPLITS,)
    l = tl.load(l_ptr + row * NUM_SPLITS + offs_s)  # noqa: E741
    acc = tl.load(acc_ptr + (row * NUM_SPLITS + offs_s[:, None]) * HEAD_DIM + offs_d[None, :])
    top = tl.max(m, axis=0)
    w = tl.math.exp2(m - top)
    total = tl.sum(l * w, axis=0)
    out = tl.sum(acc * w[:, None], axis=0) / total
    tl.store(out_ptr + b * stride_ob + head * stride_oh + offs_d, out.to(out_ptr.dtype.element_ty))


def paged_decode(q, k_cache, v_cache, block_table, context_lens, sm_scale, out):
    """out[b, h] = attention of query token q[b, h] over the context_lens[b] tokens whose keys and values
    lie in the pages block_table[b, :] of k_cache and v_cache (n_pages, PAGE, kv_heads, head_dim)."""
    batch, q_heads, head_dim = q.shape
    page, kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = q_heads // kv_heads
    max_pages = block_table.shape[1]
    # enough programs to fill the GPU (132 SMs on an H200) when batch x kv_heads alone does not, and slices of
    # at most about SLICE_TOKENS, so that in a ragged batch the longest sequence is not one program's long
    # walk while the others have finished (an H100 read 61% of its bandwidth with whole sequences of 2048 to
    # 6143 tokens). The slices are cut from the table's width: reading the lengths here would be torch
    # compute on the data.
    fill, even = triton.cdiv(264, batch * kv_heads), triton.cdiv(max_pages * page, SLICE_TOKENS)
    num_splits = min(triton.next_power_of_2(max(1, fill, even)), 32, triton.next_power_of_2(max_pages))
    pages_per_split = triton.cdiv(max_pages, num_splits)
    if num_splits == 1:  # no partials: the kernel writes out itself (these arguments are never read)
        m = l = acc = out  # noqa: E741
    else:
        m = torch.empty((batch, q_heads, num_splits), dtype=torch.float32, device=q.device)
        l = torch.empty((batch, q_heads, num_splits), dtype=torch.float32, device=q.device)  # noqa: E741
        acc = torch.empty((batch, q_heads, num_splits, head_dim), dtype=torch.float32, device=q.device)
    decode_partial_kernel[(batch, kv_heads, num_splits)](
        q, k_cache, v_cache, block_table, context_lens, m, l, acc, out,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        block_table.stride(0),
        sm_scale, pages_per_split,
        NUM_SPLITS=num_splits, GROUP=group, BLOCK_G=max(16, triton.next_power_of_2(group)),
        PAGE=page, HEAD_DIM=head_dim, TILE_PAGES=max(1, TILE_TOKENS // page), num_warps=4, num_stages=2,
    )  # fmt: skip
    if num_splits > 1:
        decode_merge_kernel[(batch, q_heads)](
            m, l, acc, out, out.stride(0), out.stride(1), NUM_SPLITS=num_splits, HEAD_DIM=head_dim, num_warps=4
        )
    return out
