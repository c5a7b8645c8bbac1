"""The same door as index_hook, through a sequence: torch reads an index object's __len__ and
__getitem__ inside its own call, with the launcher guard's mode off. Nothing here is refused by the
pre-check (a class may be a container); the guard refuses any argument but plain values."""

import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, t_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.load(x_ptr + offs, mask=mask)
    tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.load(t_ptr + offs, mask=mask), mask=mask)


class Door:
    def __init__(self, x, y, t):
        self.x, self.y, self.t = x, y, t

    def __len__(self):
        return 1

    def __getitem__(self, i):
        if i > 0:
            raise IndexError(i)
        torch.add(self.x, self.y, out=self.t)
        return 0


def vector_add(x, y, out):
    n = out.numel()
    t = torch.empty_like(out)
    x[Door(x, y, t)]
    copy_kernel[(triton.cdiv(n, 1024),)](x, y, t, out, n, BLOCK=1024)
    return out
