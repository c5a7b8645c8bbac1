"""Found by a sixth red-team review: Python deletes an `except ... as name` name when its handler
ends, so `inspect` here was counted as bound and was not: Triton's interpreter filled in its own inspect,
and through it the builtins. The pre-check counts an except-as name as deleted."""

import triton
import triton.language as tl

TENSORS = []

try:
    raise ValueError
except ValueError as inspect:
    inspect = 0  # "bound" in the handler; Python unbinds an except-as name when the handler ends


@triton.jit
def touch_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 0 + tl.load(y_ptr + offs, mask=m) * 0, mask=m)


def vector_add(x, y, out):
    n = out.numel()
    touch_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    TENSORS[:] = [x, y, out]
    found = dict(inspect.getmembers(vector_add))["__builtins__"]  # noqa: F821 (the point: unbound here)
    found["exec"](
        "import torch\nwith torch._C.DisableTorchFunction():\n    x, y, out = T\n    out.copy_(x + y)\n",
        {"T": TENSORS},
    )
    return out
