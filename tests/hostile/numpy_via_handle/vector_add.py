"""Hostile (found by a third red-team review): numpy on the host: a kernel hands its loaded blocks (interpreter tensors) to the launcher, which
adds them with numpy; a second kernel stores numpy's answer."""

import triton
import triton.language as tl

SEEN = []
ANSWER = []


def keep(a, b):
    SEEN.append((a, b))


def put(v, i):
    v.handle.data[:] = ANSWER[i]


@triton.jit
def read_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    a = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    b = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    keep(a, b)


@triton.jit
def write_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    v = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    put(v, pid)
    tl.store(out_ptr + offsets, v, mask=mask)


def vector_add(x, y, out):
    n = out.numel()
    SEEN.clear()
    ANSWER.clear()
    grid = (triton.cdiv(n, 1024),)
    read_kernel[grid](x, y, n, BLOCK_SIZE=1024)
    for a, b in SEEN:
        ANSWER.append(a.handle.data + b.handle.data)  # numpy, on the host, outside any kernel
    write_kernel[grid](x, out, n, BLOCK_SIZE=1024)
    return out
