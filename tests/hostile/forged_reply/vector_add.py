"""Hostile: replaces the worker's reply with one whose fields are not what the grader asked for (a
word where a count belongs, a name that is no input). Every field is checked before it is read: the
learner's failure, never the grader's."""

import json

import triton
import triton.language as tl

import course_lib.grader.worker as worker


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def forged(conn, message, data=None):
    if message.get("kind") == "case_done":
        message = {**message, "launches": "many", "flow": {"unread_inputs": ["the reference"]}, "error": None}
    conn.send_bytes(json.dumps(message).encode())


worker._send = forged


def vector_add(x, y, out):
    copy_kernel[(1,)](x, x, 0, BLOCK_SIZE=16)  # launches a kernel that stores nothing
    return out
