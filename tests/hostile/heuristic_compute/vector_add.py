"""Hostile: a @triton.heuristics function computes the answer with torch while Triton runs it inside
the launch, then a kernel that reads every input (and throws the values away) copies out onto
itself. Host code that Triton runs during a launch is launcher code: the torch guard stops it."""

import triton
import triton.language as tl


def compute(args):
    args["out_ptr"].copy_(args["x_ptr"] + args["y_ptr"])
    return 1024


@triton.heuristics(values={"BLOCK_SIZE": compute})
@triton.jit
def touch_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    seen = tl.load(x_ptr + offsets, mask=mask) * 0 + tl.load(y_ptr + offsets, mask=mask) * 0
    tl.store(out_ptr + offsets, tl.load(out_ptr + offsets, mask=mask) + seen, mask=mask)


def vector_add(x, y, out):
    n = out.numel()
    touch_kernel[(triton.cdiv(n, 1024),)](x, y, out, n)
    return out
