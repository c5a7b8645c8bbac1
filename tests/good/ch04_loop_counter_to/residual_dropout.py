"""out = residual + dropout(x, p): persistent grid-stride loop over (BLOCK // 4, 4) tiles; x is loaded
only where the element is kept (a dropped element's x is never read)."""

import triton
import triton.language as tl


@triton.jit
def residual_dropout_kernel(x_ptr, residual_ptr, out_ptr, n_elements, p, scale, seed, BLOCK_SIZE: tl.constexpr):
    Q: tl.constexpr = BLOCK_SIZE // 4
    j = tl.arange(0, 4)[None, :]
    n_blocks = tl.cdiv(n_elements, BLOCK_SIZE)
    for blk in range(tl.program_id(0), n_blocks, tl.num_programs(0)):
        k = blk.to(tl.int64) * Q + tl.arange(0, Q)
        offs = k[:, None] * 4 + j
        inb = offs < n_elements
        r0, r1, r2, r3 = tl.rand4x(seed, k)
        r = tl.where(j == 0, r0[:, None], tl.where(j == 1, r1[:, None], tl.where(j == 2, r2[:, None], r3[:, None])))
        keep = r >= p
        xv = tl.load(x_ptr + offs, mask=inb & keep, other=0.0).to(tl.float32)
        res = tl.load(residual_ptr + offs, mask=inb, other=0.0).to(tl.float32)
        tl.store(out_ptr + offs, (res + xv * scale).to(out_ptr.dtype.element_ty), mask=inb)


def residual_dropout(x, residual, out, p, seed):
    """out[:] = residual + dropout(x, p) with the mask given by seed. Returns out."""
    n_elements = out.numel()
    BLOCK_SIZE = 512
    programs = max(1, min(triton.cdiv(n_elements, BLOCK_SIZE), 24))
    scale = 1.0 / (1.0 - p)
    residual_dropout_kernel[(programs,)](
        x_ptr=x,
        residual_ptr=residual,
        out_ptr=out,
        n_elements=n_elements,
        p=p,
        scale=scale,
        seed=seed,
        BLOCK_SIZE=BLOCK_SIZE,
    )
    return out
