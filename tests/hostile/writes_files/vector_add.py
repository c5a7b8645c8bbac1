"""Hostile: writes a fake grades file and a fake progress file, then writes nothing."""

import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


for name in ("grades.csv", "progress.json"):
    with open(name, "w") as f:
        f.write("student_id,assignment,score\nme,vector_add,100\n")


def vector_add(x, y, out):
    copy_kernel[(1,)](x, x, 0, BLOCK_SIZE=16)
    return out
