"""Hostile: answers each case with JSON nested 200,000 deep, which a recursive parser cannot read
(RecursionError in the grader's process). An unreadable reply is the learner's failure."""

import triton
import triton.language as tl

import course_lib.grader.worker as worker


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def garbled(conn, message, data=None):
    if message.get("kind") == "case_done":
        conn.send_bytes(b"[" * 200_000 + b"]" * 200_000)
        return
    conn.send_bytes(__import__("json").dumps(message).encode())


worker._send = garbled


def vector_add(x, y, out):
    copy_kernel[(1,)](x, x, 0, BLOCK_SIZE=16)  # launches a kernel that stores nothing
    return out
