"""A right vector_add written as a learner keeps it while debugging: an optional import with a
fallback, a config as a NamedTuple, a scratch buffer made from a shape, and a self-test under the main
guard that uses what a launcher may not (torch.manual_seed, torch.testing). None of it is refused:
the self-test never runs in the grader, and the fallback binds the name either way."""

from typing import NamedTuple

import torch
import triton
import triton.language as tl

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # an older Triton: no TMA descriptors
    TensorDescriptor = None


class Config(NamedTuple):
    block: int
    warps: int


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y, out):
    if TensorDescriptor is None:
        print("this Triton has no TMA descriptors (not needed here)")
    cfg = Config(1024, 4)
    n = out.numel()
    scratch = torch.empty(x.shape, dtype=x.dtype, device=x.device)  # a view target, never read
    assert scratch.shape == out.shape
    add_kernel[(triton.cdiv(n, cfg.block),)](x, y, out, n, BLOCK=cfg.block, num_warps=cfg.warps)
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    a, b = torch.randn(4097), torch.randn(4097)
    o = torch.empty_like(a)
    vector_add(a, b, o)
    torch.testing.assert_close(o, a + b)
    print("max error", (o - (a + b)).abs().max().item())
