"""Hostile (found by a red-team review): writes a reply's length header and a few of its bytes on the
worker's socket, then sleeps: a grader that waits for the rest of a message without a deadline hangs
for good, and a room with it. Every byte of a reply must come within the step's time limit."""

import os
import stat
import struct
import time

for fd in range(3, 64):
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            os.write(fd, struct.pack("!i", 1000) + b'{"kind": ')  # a length header, then 9 of its 1000 bytes
    except OSError:
        pass
time.sleep(3600)


def vector_add(x, y, out):
    return out
