"""Found by a fifth red-team review: the pre-check skips a main-guard block, and a def can bind the
module's __name__ (through a decorator named like a property's setter) so that the block runs in the
worker, unchecked, with the torch guard off. The pre-check refuses the decorator and the dunder def, and
checks the block wherever __name__ could be bound."""

import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, src_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    seen_x = tl.load(x_ptr + offs, mask=mask)  # read, never used: the data-flow rule is satisfied
    seen_y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


class Prop:
    def setter(self, fn):  # "@value.setter of a property": any object's .setter passes the decorator rule
        return "__main__"


p = Prop()


@p.setter
def __name__():  # a def binds the module's __name__: the pre-check's main-block scan looks only at ast.Name
    pass


if __name__ == "__main__":  # skipped by the pre-check, and now true in the grader's worker
    import os

    def vector_add(x, y, out):
        with torch._C.DisableTorchFunction():  # the launcher torch guard off
            answer = x + y  # torch computes the answer
        n = out.numel()
        copy_kernel[(triton.cdiv(n, 1024),)](x, y, answer, out, n, BLOCK=1024)
        return out
