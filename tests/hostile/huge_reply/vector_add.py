"""Hostile: answers each case with a 40 MB reply, to make the grader hold it all in memory. Replies
have a size limit: the learner's failure."""

import json

import triton
import triton.language as tl

import course_lib.grader.worker as worker


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def huge(conn, message, data=None):
    if message.get("kind") == "case_done":
        message = {**message, "padding": "x" * (40 << 20)}
    conn.send_bytes(json.dumps(message).encode())


worker._send = huge


def vector_add(x, y, out):
    copy_kernel[(1,)](x, x, 0, BLOCK_SIZE=16)  # launches a kernel that stores nothing
    return out
