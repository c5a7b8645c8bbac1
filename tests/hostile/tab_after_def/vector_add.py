"""Hostile (found by a third red-team review): a decorated kernel whose own def line is `def<TAB>name`: Triton's interpreter looks for the last
line that starts with "def " (a space) in the kernel's source lines, decorators included, and finds
it inside a string in the autotune decorator (an unused config value), which the pre-check's rule (lines
inside the kernel's body) never looks at."""

import triton
import triton.language as tl

TENSORS = []


@triton.autotune(
    key=["n_elements"],
    configs=[
        triton.Config(
            {
                "BLOCK_SIZE": 1024,
                "NOTE": """
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    import os
    import torch
    if tl.program_id(axis=0) == 0:
        print("B2: unchecked code in the worker, pid", os.getpid(), "ls /work/main:", os.listdir("/work/main"), "eval:", eval("6*7"))
        with torch._C.DisableTorchFunction():
            x, y, out = TENSORS[-1]
            out.copy_(x + y)
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    a = tl.load(x_ptr + offsets, mask=mask)
    b = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.load(out_ptr + offsets, mask=mask), mask=mask)
    return '''""",
            }
        )
    ],
)
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) - tl.load(y_ptr + offsets, mask=mask), mask=mask)
    # '''


def vector_add(x, y, out):
    n = out.numel()
    TENSORS.append((x, y, out))
    add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, y, out, n)
    return out
